/* MPI_THREAD_MULTIPLE: several threads per rank call collectives at once,
 * each on its own communicator (each thread duplicates a duplicate of
 * MPI_COMM_WORLD of its own, so the mappings of the new communicators to
 * Outboard groups, made inside MPI_Comm_dup, run concurrently too), while
 * the main thread runs collectives on MPI_COMM_WORLD, blocking and
 * non-blocking, each result compared with PMPI's on the same communicator. Prints the thread level MPI provided;
 * below MPI_THREAD_MULTIPLE it says so and runs nothing concurrently. A
 * plain MPI program: run it with and without the library. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 3
#define ROUNDS 40

static int wrank, wsize;

#define FAIL(...) do { fprintf(stderr, "rank %d: ", wrank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

struct job { MPI_Comm comm; int t; int compared; };

static void *run(void *arg) {
    struct job *j = arg;
    MPI_Comm c;
    if (j->t >= 0) MPI_Comm_dup(j->comm, &c);
    else c = j->comm;
    for (int i = 0; i < ROUNDS; i++) {
        int n = 1 + (i * 37 + (j->t + 1) * 11) % 300;
        long long *in = malloc(8 * n), *got = malloc(8 * n), *want = malloc(8 * n);
        for (int k = 0; k < n; k++) in[k] = (long long)(wrank + 1) * (k + 1) * (j->t + 1) - i;
        MPI_Allreduce(in, got, n, MPI_LONG_LONG, MPI_SUM, c);
        PMPI_Allreduce(in, want, n, MPI_LONG_LONG, MPI_SUM, c);
        if (memcmp(got, want, 8 * n)) FAIL("thread %d: MPI_Allreduce n=%d round %d differs from PMPI", j->t, n, i);
        int root = (i + j->t + 1) % wsize;
        MPI_Reduce(in, got, n, MPI_LONG_LONG, MPI_MAX, root, c);
        PMPI_Reduce(in, want, n, MPI_LONG_LONG, MPI_MAX, root, c);
        if (wrank == root && memcmp(got, want, 8 * n)) FAIL("thread %d: MPI_Reduce round %d differs from PMPI", j->t, i);
        double b[4] = {wrank == root ? i + 0.5 : -1, j->t, n, 7};
        MPI_Bcast(b, 4, MPI_DOUBLE, root, c);
        if (b[0] != i + 0.5 || b[1] != j->t) FAIL("thread %d: MPI_Bcast round %d", j->t, i);
        MPI_Barrier(c);
        MPI_Request r[2];
        MPI_Iallreduce(in, got, n, MPI_LONG_LONG, MPI_BXOR, c, &r[0]);
        MPI_Ibarrier(c, &r[1]);
        MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 takes MPICH's for a zero-length array */
        MPI_Waitall(2, r, st);
        PMPI_Allreduce(in, want, n, MPI_LONG_LONG, MPI_BXOR, c);
        if (memcmp(got, want, 8 * n)) FAIL("thread %d: MPI_Iallreduce round %d differs from PMPI", j->t, i);
        j->compared += 4;
        free(in); free(got); free(want);
    }
    if (j->t >= 0) MPI_Comm_free(&c);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wrank == 0) printf("thread level provided: %s\n", provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "below MPI_THREAD_MULTIPLE");
    struct job jobs[THREADS];
    pthread_t th[THREADS];
    int threads = provided == MPI_THREAD_MULTIPLE ? THREADS : 1;
    for (int t = 0; t < THREADS; t++) {
        jobs[t].t = t;
        jobs[t].compared = 0;
        MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
    }
    for (int t = 0; t < threads; t++)
        if (pthread_create(&th[t], NULL, run, &jobs[t])) FAIL("pthread_create");
    /* The main thread meanwhile on MPI_COMM_WORLD. */
    struct job world = {MPI_COMM_WORLD, -1, 0};
    if (threads > 1) run(&world);
    int compared = world.compared;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        compared += jobs[t].compared;
    }
    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&jobs[t].comm);
    printf("rank %d: %d threads, %d comparisons with PMPI equal\n", wrank, threads, compared);
    MPI_Finalize();
    return 0;
}
