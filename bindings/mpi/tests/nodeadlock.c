/* Programs that run under plain MPI and must not hang with the library:
 * 1. Rank 0 starts MPI_Ibarrier on a duplicate, then receives; rank 1 sends
 *    4 MiB synchronously (MPI_Ssend), then starts the barrier. The library
 *    may not block inside MPI_Ibarrier (mapping the communicator there
 *    would wait for rank 1, which waits for rank 0's receive).
 * 2. Blocking and non-blocking collectives crossed: the root starts
 *    MPI_Iallreduce, tests it, then calls MPI_Barrier while the others call
 *    MPI_Barrier, then MPI_Iallreduce. Erroneous by the letter of MPI (one
 *    order per communicator), but Open MPI and MPICH match the two kinds
 *    apart and run it, and so must the library.
 * Prints one line per part; all ranks with 2 or more. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    const int n = 4 << 20;
    char *big = malloc(n);
    MPI_Request req;
    if (rank == 0) {
        MPI_Ibarrier(dup, &req);
        MPI_Recv(big, n, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int i = 0; i < n; i += 4099) if (big[i] != (char)(i * 3)) FAIL("rank 0: byte %d of the message", i);
    } else {
        if (rank == 1) {
            for (int i = 0; i < n; i++) big[i] = (char)(i * 3);
            MPI_Ssend(big, n, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        }
        MPI_Ibarrier(dup, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    printf("rank %d: Ibarrier then Recv completed\n", rank);
    long long in = rank + 1, sum = 0;
    if (rank == 0) {
        MPI_Iallreduce(&in, &sum, 1, MPI_LONG_LONG, MPI_SUM, dup, &req);
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        MPI_Barrier(dup);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        MPI_Barrier(dup);
        MPI_Iallreduce(&in, &sum, 1, MPI_LONG_LONG, MPI_SUM, dup, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (sum != (long long)size * (size + 1) / 2) FAIL("rank %d: crossed Iallreduce gave %lld", rank, sum);
    printf("rank %d: crossed blocking and non-blocking collectives completed\n", rank);
    free(big);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
