/* Open MPI side of `outboard bench lock`: an exclusive lock at rank 0,
 * taken by 1..N-1 contending ranks, with MPI-3 RMA (MPI_Win_lock) or,
 * built with oshcc (-DUSE_SHMEM), with OpenSHMEM (shmem_set_lock).
 *
 * usage: mpirun -n N ob_mpi_lock ITERS ROUNDS    (or oshrun -n N ob_shmem_lock)
 *
 * For c = 1 .. N-1: ranks 1..c each run ITERS cycles of lock + unlock
 * (MPI: MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0) + MPI_Win_unlock(0) on rank
 * 0's window; SHMEM: shmem_set_lock + shmem_clear_lock on a symmetric
 * lock word); rank 1's mean time per cycle, median of ROUNDS rounds, the
 * figure `outboard bench lock` prints for its own lock.
 *
 * Output (rank 1): "@ lock C KIND LATENCY_US" lines, KIND mpi or shmem.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef USE_SHMEM
#include <shmem.h>
#define KIND "shmem"
static long lock_word = 0;
static long epoch_sync[SHMEM_BARRIER_SYNC_SIZE];
#else
#include <mpi.h>
#define KIND "mpi"
#endif

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

#ifdef USE_SHMEM
#include <time.h>
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void sync_all(void) { shmem_barrier_all(); }
#else
static MPI_Win win;
static double now(void) { return MPI_Wtime(); }
static void sync_all(void) { MPI_Barrier(MPI_COMM_WORLD); }
#endif

static void cycle(void) {
#ifdef USE_SHMEM
    shmem_set_lock(&lock_word);
    shmem_clear_lock(&lock_word);
#else
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Win_unlock(0, win);
#endif
}

int main(int argc, char **argv) {
    int rank, size;
#ifdef USE_SHMEM
    shmem_init();
    rank = shmem_my_pe();
    size = shmem_n_pes();
    (void)epoch_sync;
#else
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t *base;
    MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
#endif
    if (argc != 3 || size < 2) {
        if (rank == 0) fprintf(stderr, "usage: -n N (N >= 2) ob_mpi_lock ITERS ROUNDS\n");
        exit(2);
    }
    int iters = atoi(argv[1]), rounds = atoi(argv[2]);
    if (iters < 1 || rounds < 1) exit(2);
    double *t = malloc(sizeof(double) * rounds);
    for (int c = 1; c < size; c++) {
        for (int r = 0; r < rounds; r++) {
            sync_all();
            if (rank >= 1 && rank <= c) {
                for (int i = 0; i < iters / 10 + 2; i++) cycle(); /* warm-up */
                double start = now();
                for (int i = 0; i < iters; i++) cycle();
                t[r] = (now() - start) / iters * 1e6;
            }
        }
        if (rank == 1) {
            printf("@ lock %d " KIND " %.3f\n", c, median(t, rounds));
            fflush(stdout);
        }
    }
    sync_all();
    free(t);
#ifdef USE_SHMEM
    shmem_finalize();
#else
    MPI_Win_free(&win);
    MPI_Finalize();
#endif
    return 0;
}
