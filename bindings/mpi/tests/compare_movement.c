/* Compares the data-movement collectives and the scans liboutboard_mpi
 * takes over with PMPI's result: MPI_Allgather(v), MPI_Gather,
 * MPI_Scatter, MPI_Alltoall, MPI_Reduce_scatter(_block), MPI_Scan and
 * MPI_Exscan, and the non-blocking forms of those that have one, at every
 * root, at counts of 0, 1, odd and beyond a packet, with a predefined and
 * a strided derived type, in place, on MPI_COMM_WORLD and on a split with
 * reversed ranks. A plain MPI program: run it with and without the
 * library. Exits 1 at the first difference. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, compared;

#define FAIL(...) do { fprintf(stderr, "rank %d: ", wrank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

static void fill(int *buf, int n, int r, int salt) {
    for (int i = 0; i < n; i++) buf[i] = (r + 1) * 7919 + i * 104729 + salt * 31;
}

static void same(const void *a, const void *b, size_t bytes, const char *what, const char *comm, int count) {
    compared++;
    if (memcmp(a, b, bytes)) FAIL("%s on %s, count %d: differs from PMPI", what, comm, count);
}

/* Element type `t` (MPI_INT, or every other int of a strided vector) of
 * `count` elements: ints the buffer spans. */
static int span(MPI_Datatype t, int count) {
    return t == MPI_INT ? count : 2 * count;
}

static void movement(MPI_Comm comm, const char *name, MPI_Datatype t, int count, int nb) {
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int per = span(t, count), all = per * n;
    int *send = malloc(sizeof(int) * (all + 1)), *a = malloc(sizeof(int) * (all * n + 1)), *b = malloc(sizeof(int) * (all * n + 1));
    MPI_Request rq;
#define RUN(call, icall) do { if (nb) { icall; MPI_Wait(&rq, MPI_STATUS_IGNORE); } else { call; } } while (0)

    /* allgather, and in place */
    fill(send, per, me, count);
    memset(a, 0x5A, sizeof(int) * all);
    memset(b, 0x5A, sizeof(int) * all);
    RUN(MPI_Allgather(send, count, t, a, count, t, comm), MPI_Iallgather(send, count, t, a, count, t, comm, &rq));
    PMPI_Allgather(send, count, t, b, count, t, comm);
    same(a, b, sizeof(int) * all, "MPI_Allgather", name, count);
    memset(a, 0x5A, sizeof(int) * all);
    memcpy(a + me * per, b + me * per, sizeof(int) * per);
    RUN(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, t, comm), MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, t, comm, &rq));
    same(a, b, sizeof(int) * all, "MPI_Allgather in place", name, count);

    /* gather and scatter at every root */
    for (int root = 0; root < n; root++) {
        memset(a, 0x5A, sizeof(int) * all);
        memset(b, 0x5A, sizeof(int) * all);
        RUN(MPI_Gather(send, count, t, a, count, t, root, comm), MPI_Igather(send, count, t, a, count, t, root, comm, &rq));
        PMPI_Gather(send, count, t, b, count, t, root, comm);
        if (me == root) same(a, b, sizeof(int) * all, "MPI_Gather", name, count);
        if (me == root) {
            memset(a, 0x5A, sizeof(int) * all);
            memcpy(a + me * per, b + me * per, sizeof(int) * per);
            RUN(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, t, root, comm),
                MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, count, t, root, comm, &rq));
            same(a, b, sizeof(int) * all, "MPI_Gather in place", name, count);
        } else {
            RUN(MPI_Gather(send, count, t, NULL, 0, MPI_DATATYPE_NULL, root, comm),
                MPI_Igather(send, count, t, NULL, 0, MPI_DATATYPE_NULL, root, comm, &rq));
        }
        fill(a, all, root, count + 1);
        int *ra = malloc(sizeof(int) * (per + 1)), *rb = malloc(sizeof(int) * (per + 1));
        memset(ra, 0x5A, sizeof(int) * per);
        memset(rb, 0x5A, sizeof(int) * per);
        RUN(MPI_Scatter(a, count, t, ra, count, t, root, comm), MPI_Iscatter(a, count, t, ra, count, t, root, comm, &rq));
        PMPI_Scatter(a, count, t, rb, count, t, root, comm);
        same(ra, rb, sizeof(int) * per, "MPI_Scatter", name, count);
        free(ra);
        free(rb);
    }

    /* alltoall: block j of rank r is (r, j) */
    fill(send, all, me, count + 2);
    memset(a, 0x5A, sizeof(int) * all);
    memset(b, 0x5A, sizeof(int) * all);
    RUN(MPI_Alltoall(send, count, t, a, count, t, comm), MPI_Ialltoall(send, count, t, a, count, t, comm, &rq));
    PMPI_Alltoall(send, count, t, b, count, t, comm);
    same(a, b, sizeof(int) * all, "MPI_Alltoall", name, count);
    free(send);
    free(a);
    free(b);
}

/* The v-form: rank q's block is q + count ints, placed in reverse rank
 * order with gaps of 3 (each rank's own displacements). */
static void allgatherv(MPI_Comm comm, const char *name, int count) {
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n), at = 0;
    for (int q = n - 1; q >= 0; q--) {
        counts[q] = q + count;
        displs[q] = at + 3;
        at += 3 + counts[q];
    }
    int *send = malloc(sizeof(int) * (counts[me] + 1)), *a = malloc(sizeof(int) * (at + 1)), *b = malloc(sizeof(int) * (at + 1));
    fill(send, counts[me], me, count);
    memset(a, 0x5A, sizeof(int) * at);
    memset(b, 0x5A, sizeof(int) * at);
    MPI_Allgatherv(send, counts[me], MPI_INT, a, counts, displs, MPI_INT, comm);
    PMPI_Allgatherv(send, counts[me], MPI_INT, b, counts, displs, MPI_INT, comm);
    same(a, b, sizeof(int) * at, "MPI_Allgatherv", name, count);
    memset(a, 0x5A, sizeof(int) * at);
    memcpy(a + displs[me], send, sizeof(int) * counts[me]);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, comm);
    same(a, b, sizeof(int) * at, "MPI_Allgatherv in place", name, count);
    /* Gatherv and scatterv at every root: the non-roots know only their
     * own count. */
    for (int root = 0; root < n; root++) {
        memset(a, 0x5A, sizeof(int) * at);
        memset(b, 0x5A, sizeof(int) * at);
        MPI_Gatherv(send, counts[me], MPI_INT, a, counts, displs, MPI_INT, root, comm);
        PMPI_Gatherv(send, counts[me], MPI_INT, b, counts, displs, MPI_INT, root, comm);
        if (me == root) same(a, b, sizeof(int) * at, "MPI_Gatherv", name, count);
        if (me == root) {
            memset(a, 0x5A, sizeof(int) * at);
            memcpy(a + displs[me], send, sizeof(int) * counts[me]);
            MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, root, comm);
            for (int q = 0; q < n; q++) same(a + displs[q], b + displs[q], sizeof(int) * counts[q], "MPI_Gatherv in place", name, count);
        } else {
            /* An empty block's rank may pass no buffer at all. */
            MPI_Gatherv(counts[me] ? send : NULL, counts[me], MPI_INT, NULL, NULL, NULL, MPI_DATATYPE_NULL, root, comm);
        }
        fill(b, at, root, count + 5);
        int *ra = malloc(sizeof(int) * (counts[me] + 1)), *rb = malloc(sizeof(int) * (counts[me] + 1));
        memset(ra, 0x5A, sizeof(int) * counts[me]);
        memset(rb, 0x5A, sizeof(int) * counts[me]);
        MPI_Scatterv(b, counts, displs, MPI_INT, ra, counts[me], MPI_INT, root, comm);
        PMPI_Scatterv(b, counts, displs, MPI_INT, rb, counts[me], MPI_INT, root, comm);
        same(ra, rb, sizeof(int) * counts[me], "MPI_Scatterv", name, count);
        free(ra);
        free(rb);
    }
    free(counts);
    free(displs);
    free(send);
    free(a);
    free(b);
}

static void reductions(MPI_Comm comm, const char *name, MPI_Datatype t, MPI_Op op, int count, int nb) {
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int all = count * n;
    long long *send = malloc(8 * (all + 1)), *a = malloc(8 * (all + 1)), *b = malloc(8 * (all + 1));
    for (int i = 0; i < all; i++) {
        long long v = (long long)((me + 1) * 7919 + i * 104729) % 201 - 100;
        if (t == MPI_DOUBLE) ((double *)send)[i] = (double)v / 4;
        else send[i] = v;
    }
    MPI_Request rq;
    memset(a, 0x5A, 8 * count);
    memset(b, 0x5A, 8 * count);
    RUN(MPI_Reduce_scatter_block(send, a, count, t, op, comm), MPI_Ireduce_scatter_block(send, a, count, t, op, comm, &rq));
    PMPI_Reduce_scatter_block(send, b, count, t, op, comm);
    same(a, b, 8 * count, "MPI_Reduce_scatter_block", name, count);
    memcpy(a, send, 8 * all);
    RUN(MPI_Reduce_scatter_block(MPI_IN_PLACE, a, count, t, op, comm), MPI_Ireduce_scatter_block(MPI_IN_PLACE, a, count, t, op, comm, &rq));
    same(a, b, 8 * count, "MPI_Reduce_scatter_block in place", name, count);
    if (!nb) {
        int *counts = malloc(sizeof(int) * n), total = 0;
        for (int q = 0; q < n; q++) total += counts[q] = (q * 5 + count) % (count + 2);
        if (total <= all) {
            memset(a, 0x5A, 8 * counts[me] + 8);
            memset(b, 0x5A, 8 * counts[me] + 8);
            MPI_Reduce_scatter(send, a, counts, t, op, comm);
            PMPI_Reduce_scatter(send, b, counts, t, op, comm);
            same(a, b, 8 * counts[me], "MPI_Reduce_scatter", name, count);
        }
        free(counts);
    }
    memset(a, 0x5A, 8 * count);
    memset(b, 0x5A, 8 * count);
    RUN(MPI_Scan(send, a, count, t, op, comm), MPI_Iscan(send, a, count, t, op, comm, &rq));
    PMPI_Scan(send, b, count, t, op, comm);
    same(a, b, 8 * count, "MPI_Scan", name, count);
    memset(a, 0x5A, 8 * count);
    memset(b, 0x5A, 8 * count);
    RUN(MPI_Exscan(send, a, count, t, op, comm), MPI_Iexscan(send, a, count, t, op, comm, &rq));
    PMPI_Exscan(send, b, count, t, op, comm);
    if (me > 0) same(a, b, 8 * count, "MPI_Exscan", name, count);
    memcpy(a, send, 8 * count);
    RUN(MPI_Scan(MPI_IN_PLACE, a, count, t, op, comm), MPI_Iscan(MPI_IN_PLACE, a, count, t, op, comm, &rq));
    PMPI_Scan(send, b, count, t, op, comm);
    same(a, b, 8 * count, "MPI_Scan in place", name, count);
    free(send);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm reversed;
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - wrank, &reversed);
    MPI_Comm_set_name(reversed, "reversed");
    MPI_Datatype strided;
    MPI_Type_vector(1, 1, 2, MPI_INT, &strided);
    MPI_Datatype resized;
    MPI_Type_create_resized(strided, 0, 2 * sizeof(int), &resized);
    MPI_Type_commit(&resized);
    static const int counts[] = {0, 1, 7, 1200};
    struct { MPI_Comm c; const char *name; } comms[] = {{MPI_COMM_WORLD, "MPI_COMM_WORLD"}, {reversed, "reversed"}};
    for (int ci = 0; ci < 2; ci++)
        for (int k = 0; k < 4; k++)
            for (int nb = 0; nb < 2; nb++) {
                movement(comms[ci].c, comms[ci].name, MPI_INT, counts[k], nb);
                if (counts[k] < 1000) movement(comms[ci].c, comms[ci].name, resized, counts[k], nb);
                reductions(comms[ci].c, comms[ci].name, MPI_LONG_LONG, MPI_SUM, counts[k], nb);
                reductions(comms[ci].c, comms[ci].name, MPI_DOUBLE, MPI_MAX, counts[k], nb);
                reductions(comms[ci].c, comms[ci].name, MPI_LONG_LONG, MPI_BOR, counts[k], nb);
                if (!nb) allgatherv(comms[ci].c, comms[ci].name, counts[k]);
            }
    MPI_Type_free(&resized);
    MPI_Type_free(&strided);
    MPI_Comm_free(&reversed);
    printf("rank %d: %d movement comparisons with PMPI equal\n", wrank, compared);
    MPI_Finalize();
    return 0;
}
