// An MPI program whose calls all pass through the Outboard library: a 1-D
// stencil whose halo exchange is point-to-point (MPI_Sendrecv), with
// compute between. Run with and without the library preloaded, it shows
// what an engine that has nothing to do costs the ranks. Usage:
//   mpi_idle [iterations=2000]; prints "idle <seconds> <checksum>" at rank 0.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = 200000, iters = atoi(argc > 1 ? argv[1] : "2000");
    double *a = malloc((n + 2) * sizeof(double)), *b = malloc((n + 2) * sizeof(double));
    for (int i = 0; i < n + 2; i++) a[i] = rank + i * 1e-6;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        MPI_Sendrecv(&a[n], 1, MPI_DOUBLE, right, 0, &a[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&a[1], 1, MPI_DOUBLE, left, 1, &a[n + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 1; i <= n; i++) b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
        double *t = a; a = b; b = t;
    }
    double t = MPI_Wtime() - t0, s = 0;
    for (int i = 1; i <= n; i++) s += a[i];
    if (rank == 0) printf("idle %.3f %.6f\n", t, s);
    MPI_Finalize();
    return 0;
}
