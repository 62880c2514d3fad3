/* Collective choices through MPI, run by crates/cli/tests/mpi_preload.rs
 * with liboutboard_mpi preloaded and OUTBOARD_MPI_VERBOSE=1: a duplicate
 * of MPI_COMM_WORLD gets every choice from MPI_Info keys on
 * MPI_Comm_set_info, its collectives must give the right results, and the
 * verbose lines printed when it is freed say what they ran as (the test
 * checks them); a bad value is an error naming the key. MPI_COMM_WORLD
 * runs with what the environment chose. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

#define LEN 6000

/* One of each collective on `comm`, results checked. */
static void run(MPI_Comm comm) {
    static unsigned char buf[LEN];
    for (int i = 0; i < LEN; i++) buf[i] = rank == 0 ? (unsigned char)(i * 3 + 1) : 0;
    CHECK(MPI_Bcast(buf, LEN, MPI_BYTE, 0, comm) == MPI_SUCCESS);
    for (int i = 0; i < LEN; i++) CHECK(buf[i] == (unsigned char)(i * 3 + 1));
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS);
    long v = rank + 1, sum = 0;
    CHECK(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS);
    CHECK(sum == (long)size * (size + 1) / 2);
    sum = 0;
    CHECK(MPI_Reduce(&v, &sum, 1, MPI_LONG, MPI_SUM, 0, comm) == MPI_SUCCESS);
    if (rank == 0) CHECK(sum == (long)size * (size + 1) / 2);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    run(MPI_COMM_WORLD);

    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_name(comm, "chosen");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "outboard_barrier_algorithm", "pairwise-exchange");
    MPI_Info_set(info, "outboard_barrier_protocol", "nic-collective");
    MPI_Info_set(info, "outboard_bcast_mode", "nic-assisted");
    MPI_Info_set(info, "outboard_bcast_tree", "kary:3");
    MPI_Info_set(info, "outboard_reduce_degree", "2");
    MPI_Info_set(info, "outboard_reduce_algorithm", "tree");
    MPI_Info_set(info, "outboard_allreduce_algorithm", "tree");
    CHECK(MPI_Comm_set_info(comm, info) == MPI_SUCCESS);
    MPI_Info_free(&info);
    run(comm);
    /* Other choices on the same communicator, later. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "outboard_barrier_algorithm", "gather-broadcast:2");
    MPI_Info_set(info, "outboard_bcast_mode", "host-based");
    MPI_Info_set(info, "outboard_bcast_tree", "postal:2");
    CHECK(MPI_Comm_set_info(comm, info) == MPI_SUCCESS);
    MPI_Info_free(&info);
    run(comm);

    /* A bad value: an error whose string names the key and the forms. */
    MPI_Info_create(&info);
    MPI_Info_set(info, "outboard_bcast_tree", "kary");
    int rc = MPI_Comm_set_info(comm, info);
    MPI_Info_free(&info);
    CHECK(rc != MPI_SUCCESS);
    int class = 0;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_INFO_VALUE);
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    CHECK(strstr(msg, "outboard_bcast_tree") && strstr(msg, "kary:DEGREE"));
    run(comm); /* the earlier choices stand */

    MPI_Comm_free(&comm);
    printf("rank %d: choices checked\n", rank);
    MPI_Finalize();
    return 0;
}
