/* Application bypass on many communicators (run with
 * OUTBOARD_MPI_BCAST=bypass OUTBOARD_MPI_REDUCE=bypass): more live
 * communicators than a port's bypass receives allow, so the later ones
 * run offloaded, with the same results and no hang; once they are freed,
 * new ones take bypass again. Every broadcast and reduce is checked.
 * Rank 0 prints one line when all passed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COMMS 40
#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

/* A broadcast from the last rank and a sum to rank 1 % size on `comm`. */
static void check(MPI_Comm comm, int round) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    long v[4];
    for (int i = 0; i < 4; i++) v[i] = rank == size - 1 ? round * 10 + i : -1;
    MPI_Bcast(v, 4, MPI_LONG, size - 1, comm);
    for (int i = 0; i < 4; i++)
        if (v[i] != round * 10 + i) FAIL("rank %d: broadcast %d: element %d is %ld", rank, round, i, v[i]);
    long mine = rank + round, sum = 0;
    int root = 1 % size;
    MPI_Reduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, root, comm);
    long want = (long)size * (size - 1) / 2 + (long)size * round;
    if (rank == root && sum != want) FAIL("rank %d: reduce %d: %ld, not %ld", rank, round, sum, want);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm comms[COMMS];
    for (int i = 0; i < COMMS; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
        check(comms[i], i);
    }
    for (int i = 0; i < COMMS; i++) check(comms[i], 100 + i);
    for (int i = 0; i < COMMS; i++) MPI_Comm_free(&comms[i]);
    for (int i = 0; i < 8; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_set_name(c, "again");
        check(c, 200 + i);
        MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("bypass on %d communicators and after: all checks passed\n", COMMS);
    MPI_Finalize();
    return 0;
}
