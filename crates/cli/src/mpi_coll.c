/* Open MPI side of `outboard bench barrier|allreduce|reduce|bcast|overlap`.
 *
 * Compiled at run time with mpicc into a temporary directory and started
 * with `mpirun --oversubscribe --mca btl tcp,self -n N`, so MPI's
 * collectives run over its TCP transport, as Outboard's run over UDP.
 *
 * usage: ob_mpi_coll OP SIZES WARMUP ITERS ROUNDS
 *   OP     barrier | allreduce | reduce | bcast | ibarrier | iallreduce
 *          | allgather | iallgather | alltoall | reduce_scatter
 *   SIZES  comma-separated byte counts (int64 elements: 8 B = 1 element;
 *          bcast: bytes from rank 0; allgather, alltoall, reduce_scatter:
 *          each rank's block); ignored for barrier and ibarrier
 *
 * Methodology, the same as the Rust side's:
 *   blocking ops: every iteration is timed on its own (bcast: followed by
 *   an untimed MPI_Barrier, as OSU's osu_bcast does); each rank takes the
 *   median of its WARMUP-free samples (ROUNDS x ITERS of them); rank 0
 *   prints the mean of the ranks' medians.
 *   i-ops (OSU osu_ibarrier / osu_iallreduce): pure = mean time of start +
 *   wait; then start, compute (busy loop) for `pure`, wait; overall, compute
 *   = means; overlap % = max(0, 1 - (overall - compute) / pure) * 100; each
 *   averaged over the ranks.
 *
 * Output (rank 0): lines starting with "@", parsed by outboard.
 *   @ OP mpi SIZE MEDIAN_US
 *   @ OP mpi SIZE PURE_US OVERALL_US COMPUTE_US OVERLAP_PERCENT
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static void busy(double secs) {
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < secs) {
    }
}

/* One operation of OP on `count` int64 elements (`bytes` bytes for bcast;
 * blocks of `count` for the data-movement ones); returns 0 on success. */
static int once(const char *op, int64_t *in, int64_t *out, int count, int bytes, MPI_Request *req) {
    if (!strcmp(op, "allgather")) return MPI_Allgather(in, count, MPI_INT64_T, out, count, MPI_INT64_T, MPI_COMM_WORLD);
    if (!strcmp(op, "iallgather")) return MPI_Iallgather(in, count, MPI_INT64_T, out, count, MPI_INT64_T, MPI_COMM_WORLD, req);
    if (!strcmp(op, "alltoall")) return MPI_Alltoall(in, count, MPI_INT64_T, out, count, MPI_INT64_T, MPI_COMM_WORLD);
    if (!strcmp(op, "reduce_scatter")) return MPI_Reduce_scatter_block(in, out, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (!strcmp(op, "bcast")) return MPI_Bcast(in, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!strcmp(op, "barrier")) return MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(op, "allreduce")) return MPI_Allreduce(in, out, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (!strcmp(op, "reduce")) return MPI_Reduce(in, out, count, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!strcmp(op, "ibarrier")) return MPI_Ibarrier(MPI_COMM_WORLD, req);
    if (!strcmp(op, "iallreduce")) return MPI_Iallreduce(in, out, count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, req);
    return -1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 6) {
        if (rank == 0) fprintf(stderr, "usage: %s OP SIZES WARMUP ITERS ROUNDS\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *op = argv[1];
    int warmup = atoi(argv[3]), iters = atoi(argv[4]), rounds = atoi(argv[5]);
    int split = op[0] == 'i';
    int sized = !strstr(op, "barrier");
    char *sizes = strdup(sized ? argv[2] : "0");
    double *samples = malloc(sizeof(double) * (size_t)iters * (size_t)rounds);
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        int bytes = atoi(tok);
        int count = bytes > 0 ? (bytes + 7) / 8 : 1;
        /* Room for every rank's block on both sides (alltoall's and
         * reduce-scatter's input, allgather's output). */
        int64_t *in = malloc(sizeof(int64_t) * count * size), *out = malloc(sizeof(int64_t) * count * size);
        for (int i = 0; i < count * size; i++) in[i] = rank + i;
        MPI_Request req = MPI_REQUEST_NULL;
        if (!split) {
            int n = 0;
            for (int r = 0; r < rounds; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                for (int i = 0; i < warmup + iters; i++) {
                    double t0 = MPI_Wtime();
                    if (once(op, in, out, count, bytes, &req)) MPI_Abort(MPI_COMM_WORLD, 3);
                    double t = MPI_Wtime() - t0;
                    if (i >= warmup) samples[n++] = t;
                    /* OSU osu_bcast: an untimed barrier after every broadcast,
                     * so the root cannot run ahead of its receivers. */
                    if (!strcmp(op, "bcast")) MPI_Barrier(MPI_COMM_WORLD);
                }
            }
            double mine = median(samples, n) * 1e6, sum = 0;
            MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) printf("@ %s mpi %d %.3f\n", op, sized ? bytes : 0, sum / size);
        } else {
            int total = iters * rounds;
            double pure = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < warmup + total; i++) {
                double t0 = MPI_Wtime();
                once(op, in, out, count, bytes, &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                if (i >= warmup) pure += MPI_Wtime() - t0;
            }
            pure /= total; /* each rank computes for its own pure latency, as OSU does */
            double overall = 0, comp = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < warmup + total; i++) {
                double t0 = MPI_Wtime();
                once(op, in, out, count, bytes, &req);
                double c0 = MPI_Wtime();
                busy(pure);
                double c = MPI_Wtime() - c0;
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                double t = MPI_Wtime() - t0;
                if (i >= warmup) {
                    overall += t;
                    comp += c;
                }
            }
            double mine[3] = {pure, overall / total, comp / total}, sum[3];
            MPI_Reduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                double p = sum[0] / size, o = sum[1] / size, c = sum[2] / size;
                double ov = 1.0 - (o - c) / p;
                if (ov < 0) ov = 0;
                printf("@ %s mpi %d %.3f %.3f %.3f %.1f\n", op, sized ? bytes : 0, p * 1e6, o * 1e6, c * 1e6, ov * 100.0);
            }
        }
        free(in);
        free(out);
    }
    MPI_Finalize();
    return 0;
}
