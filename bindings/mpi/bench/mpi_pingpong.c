/* Point-to-point ping-pong latency and streaming bandwidth between ranks
 * 0 and 1, with the plan of `outboard bench pingpong` (sizes 1, 8, 64, ...
 * up to the largest; one-way latency = half the round trip; bandwidth: a
 * window of min(64, 2 MiB / size) messages, then a 1-byte ack, OSU bw);
 * the median of 5 rounds. Run by scripts/bench-p2p.sh beside Outboard's
 * own path. Prints "latency BYTES US" and "bandwidth BYTES MB/s" lines.
 * Argument: the largest message in bytes (1048576). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 5

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v) {
    qsort(v, ROUNDS, sizeof *v, cmp);
    return v[ROUNDS / 2];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long largest = argc > 1 ? atol(argv[1]) : 1048576;
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_pingpong: run it with 2 ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = calloc(largest, 1), ack = 0;
    MPI_Request reqs[64];
    MPI_Status statuses[64];
    int peer = 1 - rank;
    for (long s = 1;; s = s * 8 > largest && s < largest ? largest : s * 8) {
        int iters = (int)(2000000.0 / (s + 1000.0));
        iters = iters < 20 ? 20 : iters > 2000 ? 2000 : iters;
        double t[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)s, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)s, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)s, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            t[r] = (MPI_Wtime() - t0) / iters / 2 * 1e6;
        }
        if (rank == 0) printf("latency %ld %.2f\n", s, median(t));
        if (s >= largest) break;
    }
    for (long s = 64;; s = s * 8 > largest && s < largest ? largest : s * 8) {
        int window = (int)((2L << 20) / s);
        window = window < 1 ? 1 : window > 64 ? 64 : window;
        int reps = (int)(16e6 / (double)(s * window));
        reps = reps < 2 ? 2 : reps > 500 ? 500 : reps;
        double t[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < reps; i++) {
                for (int w = 0; w < window; w++) {
                    if (rank == 0) MPI_Isend(buf, (int)s, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
                    else MPI_Irecv(buf, (int)s, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
                }
                MPI_Waitall(window, reqs, statuses);
                if (rank == 0) MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                else MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
            }
            t[r] = (double)s * window * reps / (MPI_Wtime() - t0) / 1e6;
        }
        if (rank == 0) printf("bandwidth %ld %.2f\n", s, median(t));
        if (s >= largest) break;
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
