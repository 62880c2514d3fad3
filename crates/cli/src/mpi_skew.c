/* Open MPI side of `outboard bench skew` (dissertation 6.3's method).
 *
 * usage: ob_mpi_skew SIZE ITERS SKEWS SEED
 *   SIZE   bytes broadcast from rank 0 / reduced to rank 0 (int64 sums:
 *          SIZE/8 elements, at least one)
 *   SKEWS  comma-separated maximum skews in microseconds
 *
 * For each skew and for MPI_Bcast then MPI_Reduce: ITERS times, an
 * untimed MPI_Barrier, a busy wait of a random 0..max us on every rank,
 * then the timed call. Rank 0 prints the mean over the ranks of each
 * rank's mean time inside the call:
 *   @ bcast mpi SKEW MEAN_US
 *   @ reduce mpi SKEW MEAN_US
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void busy(double secs) {
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < secs) {
    }
}

static uint64_t rng_state;
static uint64_t next_rand(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5) {
        if (rank == 0) fprintf(stderr, "usage: %s SIZE ITERS SKEWS SEED\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bytes = atoi(argv[1]), iters = atoi(argv[2]);
    rng_state = (uint64_t)strtoull(argv[4], NULL, 10) * 0x9E3779B97F4A7C15ull + (uint64_t)rank + 1;
    int count = bytes >= 8 ? bytes / 8 : 1;
    int64_t *in = malloc(sizeof(int64_t) * count), *out = malloc(sizeof(int64_t) * count);
    char *buf = malloc(bytes > 0 ? bytes : 1);
    char *skews = strdup(argv[3]);
    for (char *tok = strtok(skews, ","); tok; tok = strtok(NULL, ",")) {
        int max = atoi(tok);
        for (int op = 0; op < 2; op++) {
            double total = 0;
            for (int i = 0; i < iters; i++) {
                for (int k = 0; k < count; k++) in[k] = rank * 1000 + k + i;
                if (rank == 0) memset(buf, i & 0xff, bytes);
                MPI_Barrier(MPI_COMM_WORLD);
                busy((double)(next_rand() % (uint64_t)(max + 1)) * 1e-6);
                double t0 = MPI_Wtime();
                if (op == 0)
                    MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
                else
                    MPI_Reduce(in, out, count, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
                total += MPI_Wtime() - t0;
                if (op == 0 && bytes > 0 && (buf[0] != (char)(i & 0xff) || buf[bytes - 1] != (char)(i & 0xff))) {
                    fprintf(stderr, "rank %d: broadcast %d delivered other bytes\n", rank, i);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
            double mean = total / iters * 1e6, sum = 0;
            MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) printf("@ %s mpi %d %.3f\n", op == 0 ? "bcast" : "reduce", max, sum / size);
        }
    }
    MPI_Finalize();
    return 0;
}
