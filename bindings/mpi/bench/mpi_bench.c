/* OSU-style latency and overlap of the collectives liboutboard_mpi takes
 * over; a plain MPI program, run with and without the library by
 * scripts/bench-mpi.sh. Prints "op bytes latency_us overlap_pct" lines
 * (overlap only for the non-blocking ones: the share of a computation as
 * long as the collective that hides it, OSU's formula). Arguments:
 * iterations (200) and the largest message in bytes (65536; 1048576 adds
 * 1 MiB). Allgather, gather, scatter, alltoall and reduce-scatter sizes
 * are each rank's block. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters = 200, warmup = 20;

static double busy(double secs) {
    double t0 = MPI_Wtime(), x = 0;
    while (MPI_Wtime() - t0 < secs) x += 1e-9;
    return x;
}

/* The non-blocking ones last: overlap is measured from IBARRIER on.
 * Data-movement sizes are each rank's block. */
enum op { BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, GATHER, SCATTER, ALLTOALL, REDUCE_SCATTER, SCAN, IBARRIER, IALLREDUCE, IALLGATHER };
static const char *names[] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "alltoall", "red_scat", "scan",
                              "ibarrier", "iallreduce", "iallgather"};

static void once(enum op op, double *buf, double *out, int n, double compute) {
    MPI_Request r;
    switch (op) {
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(buf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(buf, out, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE: MPI_Allreduce(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(buf, n, MPI_DOUBLE, out, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(buf, n, MPI_DOUBLE, out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(buf, n, MPI_DOUBLE, out, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(buf, n, MPI_DOUBLE, out, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter_block(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case SCAN: MPI_Scan(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
    case IALLGATHER:
        MPI_Iallgather(buf, n, MPI_DOUBLE, out, n, MPI_DOUBLE, MPI_COMM_WORLD, &r);
        if (compute > 0) busy(compute);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    case IBARRIER:
        MPI_Ibarrier(MPI_COMM_WORLD, &r);
        if (compute > 0) busy(compute);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    case IALLREDUCE:
        MPI_Iallreduce(buf, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
        if (compute > 0) busy(compute);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        break;
    }
}

/* Mean time of one call over the iterations, the largest over the ranks. */
static double timed(enum op op, double *buf, double *out, int n, double compute) {
    for (int i = 0; i < warmup; i++) once(op, buf, out, n, compute);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) once(op, buf, out, n, compute);
    double t = (MPI_Wtime() - t0) / iters, max;
    MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) iters = atoi(argv[1]);
    /* The largest message (argv[2], default 64 KiB; 1048576 adds 1 MiB). */
    int largest = argc > 2 ? atoi(argv[2]) : 65536;
    int sizes[] = {8, 1024, 65536, 1048576}, all = largest >= 1048576 ? 4 : 3;
    int room = largest >= 1048576 ? 1048576 : 65536;
    /* Room for every rank's block: alltoall's and reduce-scatter's
     * input, allgather's and gather's output. */
    double *buf = calloc((size_t)room / 8 * size, 8), *out = calloc((size_t)room / 8 * size, 8);
    for (int op = BARRIER; op <= IALLGATHER; op++) {
        int nsizes = op == BARRIER || op == IBARRIER ? 1 : all;
        for (int s = 0; s < nsizes; s++) {
            int bytes = op == BARRIER || op == IBARRIER ? 0 : sizes[s], n = bytes / 8;
            double pure = timed(op, buf, out, n, 0);
            double overlap = -1;
            if (op >= IBARRIER) {
                double total = timed(op, buf, out, n, pure);
                overlap = 100.0 * (1.0 - (total - pure) / pure);
                overlap = overlap < 0 ? 0 : overlap > 100 ? 100 : overlap;
            }
            if (rank == 0) {
                if (overlap >= 0) printf("%s %d %.1f %.0f\n", names[op], bytes, pure * 1e6, overlap);
                else printf("%s %d %.1f -\n", names[op], bytes, pure * 1e6);
            }
        }
    }
    MPI_Finalize();
    return 0;
}
