/* An erroneous program: ranks call a barrier and an allreduce in crossed
 * orders on one communicator (even ranks barrier first, odd ranks
 * allreduce first). Under plain MPI it hangs or mixes the two up; with the
 * library every rank must get an error that says the members called
 * different collectives, instead of waiting for good. Each rank prints
 * the class and string of both calls' codes (MPI_ERRORS_RETURN). */
#include <mpi.h>
#include <stdio.h>

static void report(int rank, const char *what, int rc) {
    if (rc == MPI_SUCCESS) {
        printf("rank %d: %s: success\n", rank, what);
        return;
    }
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = 0;
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, s, &len);
    printf("rank %d: %s: error (%s): %s\n", rank, what, cls == MPI_ERR_OTHER ? "MPI_ERR_OTHER" : "another class", s);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    long long in = rank, out = 0;
    int rc1, rc2;
    if (rank % 2 == 0) {
        rc1 = MPI_Barrier(MPI_COMM_WORLD);
        rc2 = MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    } else {
        rc1 = MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        rc2 = MPI_Barrier(MPI_COMM_WORLD);
    }
    report(rank, "first call", rc1);
    report(rank, "second call", rc2);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
