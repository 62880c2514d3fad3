/* Where Outboard and the MPI cross: blocking broadcast, reduce (to the
 * last rank) and allreduce of doubles at every power of two from 1 KiB to
 * 1 MiB; a plain MPI program, run with and without the library by
 * scripts/bench-cluster.sh. Prints "op bytes latency_us" lines, the
 * latency the largest mean over the ranks. Argument: iterations (100). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int iters = argc > 1 ? atoi(argv[1]) : 100;
    const size_t largest = 1 << 20;
    double *a = malloc(largest), *b = malloc(largest);
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < largest / sizeof *a; i++) a[i] = (double)i;
    const char *names[3] = {"bcast", "reduce", "allreduce"};
    for (int op = 0; op < 3; op++) {
        for (size_t bytes = 1024; bytes <= largest; bytes *= 2) {
            int count = (int)(bytes / sizeof *a);
            /* A short untimed round first, then the timed one. */
            for (int timed = 0; timed < 2; timed++) {
                int k = timed ? iters : 10;
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                for (int i = 0; i < k; i++) {
                    if (op == 0) MPI_Bcast(a, count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                    else if (op == 1) MPI_Reduce(a, b, count, MPI_DOUBLE, MPI_SUM, n - 1, MPI_COMM_WORLD);
                    else MPI_Allreduce(a, b, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                }
                t = (MPI_Wtime() - t) / k * 1e6;
                double worst = 0;
                MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                if (timed && me == 0) printf("%s %zu %.1f\n", names[op], bytes, worst);
            }
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
