/* Open MPI side of `outboard bench lock`: an exclusive MPI-3 window lock
 * at rank 0, taken by 1..N-1 contending ranks.
 *
 * usage: mpirun -n N ob_mpi_lock ITERS ROUNDS
 *
 * For c = 1 .. N-1: ranks 1..c each run ITERS cycles of
 * MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0) + MPI_Win_unlock(0) on rank 0's
 * window; rank 1's mean time per cycle, median of ROUNDS rounds, the
 * figure `outboard bench lock` prints for its own lock. (OpenSHMEM's
 * shmem_set_lock is not measured: see bench_lock.rs.)
 *
 * Output (rank 1): "@ lock C mpi LATENCY_US" lines.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static MPI_Win win;

static void cycle(void) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Win_unlock(0, win);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t *base;
    MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    if (argc != 3 || size < 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n N (N >= 2) ob_mpi_lock ITERS ROUNDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iters = atoi(argv[1]), rounds = atoi(argv[2]);
    if (iters < 1 || rounds < 1) MPI_Abort(MPI_COMM_WORLD, 2);
    double *t = malloc(sizeof(double) * rounds);
    for (int c = 1; c < size; c++) {
        for (int r = 0; r < rounds; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank >= 1 && rank <= c) {
                for (int i = 0; i < iters / 10 + 2; i++) cycle(); /* warm-up */
                double start = MPI_Wtime();
                for (int i = 0; i < iters; i++) cycle();
                t[r] = (MPI_Wtime() - start) / iters * 1e6;
            }
        }
        if (rank == 1) {
            printf("@ lock %d mpi %.3f\n", c, median(t, rounds));
            fflush(stdout);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(t);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
