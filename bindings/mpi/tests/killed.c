/* A rank killed in the middle of a job: the survivors' next taken-over
 * collective must return an error (MPI_ERRORS_RETURN) instead of hanging.
 * Each survivor writes what it got to DIR/rank-N (argv[1]; a launcher
 * tearing the job down may lose forwarded output), with the error's class
 * (MPIX_ERR_PROC_FAILED where the MPI defines it), and leaves at once (the
 * job is broken; MPI_Finalize would wait for the dead rank). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    long long x = rank, s = 0;
    MPI_Allreduce(&x, &s, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) raise(SIGKILL);
    int rc = MPI_Allreduce(&x, &s, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d", argc > 1 ? argv[1] : ".", rank);
    FILE *f = fopen(path, "w");
    if (f) {
        int cls = -1;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        const char *name = cls == MPI_ERR_OTHER ? "MPI_ERR_OTHER" : "another class";
#ifdef MPIX_ERR_PROC_FAILED
        if (cls == MPIX_ERR_PROC_FAILED) name = "MPIX_ERR_PROC_FAILED";
#endif
        if (rc == MPI_SUCCESS) fprintf(f, "allreduce after a kill returned success\n");
        else fprintf(f, "allreduce after a kill returned an error of class %s\n", name);
        fclose(f);
    }
    _exit(rc == MPI_SUCCESS ? 1 : 0);
}
