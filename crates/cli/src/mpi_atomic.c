/* Open MPI side of `outboard bench atomics`: MPI-3 RMA atomics between two
 * ranks, passive target, the method of OSU's osu_fop_latency and
 * osu_cas_latency.
 *
 * Compiled at run time with mpicc into a temporary directory and started
 * with `mpirun --oversubscribe --mca btl tcp,self -n 2`, so the one-sided
 * operations go over Open MPI's osc component on its TCP transport, as
 * Outboard's go over UDP.
 *
 * usage: ob_mpi_atomic ITERS ROUNDS
 *
 * Rank 0 opens a passive-target epoch on rank 1's window
 * (MPI_Win_lock_all) and issues ITERS back-to-back operations on one
 * 64-bit word there, each completed with MPI_Win_flush (as osu_*_latency
 * do); ROUNDS rounds, the median round per operation. Operations:
 *   fetch-add  MPI_Fetch_and_op(MPI_SUM)
 *   swap       MPI_Fetch_and_op(MPI_REPLACE)
 *   cas-hit    MPI_Compare_and_swap whose compare value matches
 *   cas-miss   MPI_Compare_and_swap whose compare value does not
 *   lock       MPI_Win_lock(MPI_LOCK_EXCLUSIVE) + MPI_Win_unlock on rank
 *              1's window, uncontended (outside the lock_all epoch)
 *
 * Output (rank 0): "@ OP mpi LATENCY_US" lines, parsed by outboard.
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

enum { FOP, SWAP, CAS_HIT, CAS_MISS, NOPS };
static const char *NAMES[NOPS] = {"fetch-add", "swap", "cas-hit", "cas-miss"};

static void one(int op, MPI_Win win) {
    int64_t one = 1, zero = 0, two = 2, result = 0;
    switch (op) {
    case FOP:
        MPI_Fetch_and_op(&one, &result, MPI_INT64_T, 1, 0, MPI_SUM, win);
        break;
    case SWAP:
        MPI_Fetch_and_op(&zero, &result, MPI_INT64_T, 1, 0, MPI_REPLACE, win);
        break;
    case CAS_HIT: /* the word holds 0 after the swaps: 0 -> 0 */
        MPI_Compare_and_swap(&zero, &zero, &result, MPI_INT64_T, 1, 0, win);
        break;
    default: /* compare 1 never matches 0 */
        MPI_Compare_and_swap(&two, &one, &result, MPI_INT64_T, 1, 0, win);
        break;
    }
    MPI_Win_flush(1, win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || size != 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n 2 ob_mpi_atomic ITERS ROUNDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iters = atoi(argv[1]), rounds = atoi(argv[2]);
    if (iters < 1 || rounds < 1) MPI_Abort(MPI_COMM_WORLD, 2);
    int64_t *base;
    MPI_Win win;
    MPI_Win_allocate(sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double *t = malloc(sizeof(double) * rounds);
    if (rank == 0) {
        MPI_Win_lock_all(0, win);
        for (int op = 0; op < NOPS; op++) {
            for (int i = 0; i < iters / 10 + 10; i++) one(op, win); /* warm-up */
            for (int r = 0; r < rounds; r++) {
                double start = MPI_Wtime();
                for (int i = 0; i < iters; i++) one(op, win);
                t[r] = (MPI_Wtime() - start) / iters * 1e6;
            }
            printf("@ %s mpi %.3f\n", NAMES[op], median(t, rounds));
        }
        MPI_Win_unlock_all(win);
        for (int r = 0; r < rounds; r++) {
            double start = MPI_Wtime();
            for (int i = 0; i < iters; i++) {
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
                MPI_Win_unlock(1, win);
            }
            t[r] = (MPI_Wtime() - start) / iters * 1e6;
        }
        printf("@ lock mpi %.3f\n", median(t, rounds));
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(t);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
