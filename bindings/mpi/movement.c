/* MPI_Allgather, MPI_Allgatherv, MPI_Gather, MPI_Gatherv, MPI_Scatter,
 * MPI_Scatterv, MPI_Alltoall, MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Scan and MPI_Exscan on Outboard, and the non-blocking forms of all
 * but the v-forms (which pass through). The decision to take a call over is made as in colls.c, from
 * what every rank agrees on: the communicator, the collective, the bytes
 * of the type signatures (the whole assembled buffer is what the size
 * threshold applies to), and a
 * reduction's predefined type and operation. Data not laid out as one run
 * of bytes at a rank moves through a packed copy there.
 *
 * MPI_Gatherv's and MPI_Scatterv's non-root ranks do not know the other
 * ranks' block lengths, which Outboard's forms need and the size
 * threshold is about: the ranks first share them (an allgather of each
 * rank's length, a broadcast of the root's), then decide on the size
 * alike. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int comm_size(MPI_Comm comm) {
    int n = 0;
    if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &n);
    return n;
}

/* Bytes of `count` elements of `dt`'s signature in *bytes, and whether a
 * collective whose assembled buffer holds `times` of them is taken over
 * by size. */
static enum why sized(int count, MPI_Datatype dt, long long times, enum coll k, struct layout *l, long long *bytes) {
    if (count < 0 || ob_layout(dt, l) != 0) return W_DATATYPE; /* PMPI reports it */
    *bytes = (long long)count * l->size;
    long long total = *bytes * times;
    if (total > ob.max_bytes[k] || total > INT_MAX) return W_SIZE;
    return W_TAKEN;
}

/* The same for a reduction, which also needs an operator the engines run. */
static enum why reducible(MPI_Comm comm, int count, MPI_Datatype dt, MPI_Op op, long long times, enum coll k, struct layout *l, long long *bytes, int *obop) {
    enum why w = sized(count, dt, times, k, l, bytes);
    if (w == W_DATATYPE) return w;
    int m = ob_module_reduction(comm, l, op, obop);
    enum why r = m >= 0 ? (enum why)m : ob_reduction(l, op, obop);
    return r != W_TAKEN ? r : w;
}

/* A call's buffers as Outboard takes them: packed bytes to send (NULL: in
 * place) and room for the packed result, each the program's own buffer
 * where it is one run of bytes, else a copy. */
struct io {
    const void *src;
    void *dst;
    void *stmp;     /* packed send copy, freed once the call has started */
    void *rtmp;     /* packed result, unpacked into the receive buffer */
    int truncated;  /* the receive buffer is shorter than what comes: the
                     * call runs into rtmp (the others are not left
                     * waiting), then fails with MPI_ERR_TRUNCATE */
};

/* The send side: `count` elements of `dt` at `buf` as `bytes` packed
 * bytes. MPI_ERR_TRUNCATE when the signature is not `bytes` long (the
 * receive side's: an erroneous program). */
static int send_side(const void *buf, int count, MPI_Datatype dt, long long bytes, MPI_Comm comm, const char *call, struct io *io) {
    struct layout l;
    if (count < 0 || ob_layout(dt, &l) != 0 || (long long)count * l.size != bytes)
        return ob_fail_msg(comm, MPI_ERR_TRUNCATE, call, "the send type signature is not as long as the receive type signature");
    if (l.contiguous) {
        io->src = buf;
        return MPI_SUCCESS;
    }
    io->stmp = malloc(bytes ? (size_t)bytes : 1);
    if (!io->stmp) return MPI_ERR_NO_MEM;
    io->src = io->stmp;
    return ob_pack(buf, count, dt, io->stmp, bytes, comm);
}

/* The receive side: room for `bytes` packed bytes that are `count`
 * elements of a type laid out as `l` at `buf`. */
static int recv_side(void *buf, const struct layout *l, long long bytes, struct io *io) {
    if (l->contiguous) {
        io->dst = buf;
        return MPI_SUCCESS;
    }
    io->rtmp = malloc(bytes ? (size_t)bytes : 1);
    if (!io->rtmp) return MPI_ERR_NO_MEM;
    io->dst = io->rtmp;
    return MPI_SUCCESS;
}

/* In place with a packed result: element block `at` (of `count` elements,
 * `bytes` packed) of the receive buffer copied to its place in the copy. */
static int pack_own(const void *buf, int count, MPI_Datatype dt, long long at, long long bytes, MPI_Comm comm, struct io *io) {
    if (!io->rtmp) return MPI_SUCCESS;
    MPI_Aint lb, extent;
    PMPI_Type_get_extent(dt, &lb, &extent);
    return ob_pack((const char *)buf + at * count * extent, count, dt, (char *)io->rtmp + at * bytes, bytes, comm);
}

/* A call given up before it started: its copies freed. */
static int abandon(struct io *io, int rc) {
    free(io->stmp);
    free(io->rtmp);
    return rc;
}

/* After a blocking call: its MPI result, the packed result unpacked into
 * `buf` (`count` elements of `dt`, `bytes` packed), the copies freed. */
static int finished(MPI_Comm comm, enum coll k, int rc, struct io *io, void *buf, int count, MPI_Datatype dt, long long bytes) {
    int err = ob_done(comm, k, rc);
    if (err == MPI_SUCCESS && io->truncated)
        err = ob_fail_msg(comm, MPI_ERR_TRUNCATE, ob_coll_name[k], "the root's receive type signature is shorter than the blocks sent");
    else if (err == MPI_SUCCESS && io->rtmp) err = ob_unpack(io->rtmp, bytes, buf, count, dt, comm);
    free(io->stmp);
    free(io->rtmp);
    return err;
}

/* After a non-blocking start: the MPI request, unpacking at completion. */
static int started(MPI_Comm comm, struct comm *c, enum coll k, int rc, outboard_request *r, struct io *io, void *buf, int count, MPI_Datatype dt,
                   long long bytes, MPI_Request *req) {
    free(io->stmp);
    struct staging *s = io->rtmp ? ob_staging(io->rtmp, buf, count, dt, bytes, comm, io->truncated ? -1 : 1) : NULL;
    return ob_wrap(comm, c, k, rc, r, s, req);
}

/* ---- Allgather ---- */

/* MPI_Allgather, blocking (`req` NULL) or not. */
static int allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
                     MPI_Request *req) {
    /* Nothing asked of MPI when everything passes through. */
    int n = ob.up ? comm_size(comm) : 0, nb = req != NULL;
    struct layout rl;
    long long per = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        enum why w = sized(rcount, rtype, n, C_ALLGATHER, &rl, &per);
        g = ob_take(comm, C_ALLGATHER, nb ? L_NONBLOCKING : L_BLOCKING, w, per * n, &c);
    }
    if (!g)
        return nb ? PMPI_Iallgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, req)
                  : PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    struct io io = {0};
    int rc = recv_side(recvbuf, &rl, per * n, &io);
    if (rc == MPI_SUCCESS)
        rc = sendbuf == MPI_IN_PLACE ? pack_own(recvbuf, rcount, rtype, ob_my_rank(g), per, comm, &io)
                                     : send_side(sendbuf, scount, stype, per, comm, nb ? ob_icoll_name[C_ALLGATHER] : ob_coll_name[C_ALLGATHER], &io);
    if (rc != MPI_SUCCESS) return abandon(&io, rc);
    if (!nb) return finished(comm, C_ALLGATHER, outboard_allgather(g, io.src, (size_t)per, io.dst), &io, recvbuf, rcount * n, rtype, per * n);
    outboard_request *r = NULL;
    rc = outboard_allgather_start(g, io.src, (size_t)per, io.dst, &r);
    return started(comm, c, C_ALLGATHER, rc, r, &io, recvbuf, rcount * n, rtype, per * n, req);
}

int MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm) {
    return allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, NULL);
}

int MPI_Iallgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    return allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, req);
}

/* The v-form runs on packed blocks one after the other (the same layout
 * at every rank, whatever each one's displacements), then each block is
 * put at its displacement here. */
int MPI_Allgatherv(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, const int rcounts[], const int displs[], MPI_Datatype rtype,
                   MPI_Comm comm) {
    if (!ob.up) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    int inter = 0;
    if (comm != MPI_COMM_NULL) PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        /* Its counts are the remote group's: not read here. */
        ob_take(comm, C_ALLGATHERV, L_BLOCKING, W_INTER, 0, NULL);
        return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    }
    int n = comm_size(comm);
    long long total = 0;
    int bad = 0;
    for (int q = 0; q < n; q++) {
        bad |= rcounts[q] < 0;
        total += rcounts[q];
    }
    struct layout rl;
    long long elems = 0, bytes = 0;
    enum why w = bad ? W_DATATYPE : sized(1, rtype, total, C_ALLGATHERV, &rl, &elems);
    if (w != W_DATATYPE) bytes = elems * total;
    outboard_group *g = ob_take(comm, C_ALLGATHERV, L_BLOCKING, w, bytes, NULL);
    if (!g) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    long long *at = malloc((size_t)n * sizeof *at);
    char *packed = malloc(bytes ? (size_t)bytes : 1);
    if (!counts || !at || !packed) {
        free(counts);
        free(at);
        free(packed);
        return MPI_ERR_NO_MEM;
    }
    long long sum = 0;
    for (int q = 0; q < n; q++) {
        counts[q] = (size_t)(rcounts[q] * elems);
        at[q] = sum;
        sum += (long long)counts[q];
    }
    MPI_Aint lb, extent;
    PMPI_Type_get_extent(rtype, &lb, &extent);
    int me = (int)ob_my_rank(g);
    struct io io = {0};
    int rc = MPI_SUCCESS;
    if (sendbuf == MPI_IN_PLACE) {
        rc = ob_pack((char *)recvbuf + (MPI_Aint)displs[me] * extent, rcounts[me], rtype, packed + at[me], (long long)counts[me], comm);
        io.src = NULL;
    } else {
        rc = send_side(sendbuf, scount, stype, (long long)counts[me], comm, ob_coll_name[C_ALLGATHERV], &io);
    }
    if (rc == MPI_SUCCESS) rc = ob_done(comm, C_ALLGATHERV, outboard_allgatherv(g, io.src, packed, counts, NULL));
    for (int q = 0; q < n && rc == MPI_SUCCESS; q++) {
        char *to = (char *)recvbuf + (MPI_Aint)displs[q] * extent;
        if (rl.contiguous) memcpy(to, packed + at[q], counts[q]);
        else rc = ob_unpack(packed + at[q], (long long)counts[q], to, rcounts[q], rtype, comm);
    }
    free(io.stmp);
    free(counts);
    free(at);
    free(packed);
    return rc;
}

/* ---- Gather and scatter ---- */

static int gather_io(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, long long per, int n,
                     int root, outboard_group *g, MPI_Comm comm, enum coll k, int nb, struct io *io) {
    int me = (int)ob_my_rank(g);
    if (me == root) {
        struct layout rl;
        if (ob_layout(rtype, &rl) != 0) return ob_fail_msg(comm, MPI_ERR_TYPE, nb ? ob_icoll_name[k] : ob_coll_name[k], "the receive type cannot be described");
        if ((long long)rcount * rl.size < per && sendbuf != MPI_IN_PLACE) {
            /* Room for what comes, not the program's buffer. */
            io->truncated = 1;
            rl.contiguous = 0;
        }
        int rc = recv_side(recvbuf, &rl, per * n, io);
        if (rc != MPI_SUCCESS) return rc;
        if (sendbuf == MPI_IN_PLACE) return pack_own(recvbuf, rcount, rtype, me, per, comm, io);
    }
    return send_side(sendbuf, scount, stype, per, comm, nb ? ob_icoll_name[k] : ob_coll_name[k], io);
}

static int is_root(MPI_Comm comm, int root) {
    int me = -1;
    if (comm != MPI_COMM_NULL) PMPI_Comm_rank(comm, &me);
    return me == root;
}

/* MPI_Gather, blocking (`req` NULL) or not. */
static int gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                  MPI_Request *req) {
    int n = ob.up ? comm_size(comm) : 0, me_root = ob.up && is_root(comm, root), nb = req != NULL;
    struct layout l;
    long long per = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        /* A rank's block in bytes from the side it describes it with:
         * every rank's agree in a correct program. */
        int by_recv = me_root && sendbuf == MPI_IN_PLACE;
        enum why w = sized(by_recv ? rcount : scount, by_recv ? rtype : stype, n, C_GATHER, &l, &per);
        g = ob_take(comm, C_GATHER, nb ? L_NONBLOCKING : L_BLOCKING, w, per * n, &c);
    }
    if (!g)
        return nb ? PMPI_Igather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, req)
                  : PMPI_Gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    struct io io = {0};
    int rc = gather_io(sendbuf, scount, stype, recvbuf, rcount, rtype, per, n, root, g, comm, C_GATHER, nb, &io);
    if (rc != MPI_SUCCESS) return abandon(&io, rc);
    void *at_root = me_root ? io.dst : NULL;
    if (!nb) return finished(comm, C_GATHER, outboard_gather(g, io.src, (size_t)per, at_root, (uint32_t)root), &io, recvbuf, rcount * n, rtype, per * n);
    outboard_request *r = NULL;
    rc = outboard_gather_start(g, io.src, (size_t)per, at_root, (uint32_t)root, &r);
    return started(comm, c, C_GATHER, rc, r, &io, recvbuf, rcount * n, rtype, per * n, req);
}

int MPI_Gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
    return gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, NULL);
}

int MPI_Igather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                MPI_Request *req) {
    return gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, req);
}

static int scatter_io(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, long long per, int n,
                      int me_root, MPI_Comm comm, enum coll k, int nb, struct io *io) {
    const char *call = nb ? ob_icoll_name[k] : ob_coll_name[k];
    if (me_root) {
        int rc = send_side(sendbuf, scount * n, stype, per * n, comm, call, io);
        if (rc != MPI_SUCCESS || recvbuf == MPI_IN_PLACE) return rc;
    }
    struct layout rl;
    if (ob_layout(rtype, &rl) != 0 || (long long)rcount * rl.size != per)
        return ob_fail_msg(comm, MPI_ERR_TRUNCATE, call, "the receive type signature is not as long as the send type signature");
    return recv_side(recvbuf, &rl, per, io);
}

/* MPI_Scatter, blocking (`req` NULL) or not. */
static int scatter(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                   MPI_Request *req) {
    int n = ob.up ? comm_size(comm) : 0, me_root = ob.up && is_root(comm, root), nb = req != NULL;
    struct layout l;
    long long per = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        enum why w = sized(me_root ? scount : rcount, me_root ? stype : rtype, n, C_SCATTER, &l, &per);
        g = ob_take(comm, C_SCATTER, nb ? L_NONBLOCKING : L_BLOCKING, w, per * n, &c);
    }
    if (!g)
        return nb ? PMPI_Iscatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, req)
                  : PMPI_Scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    struct io io = {0};
    int rc = scatter_io(sendbuf, scount, stype, recvbuf, rcount, rtype, per, n, me_root, comm, C_SCATTER, nb, &io);
    if (rc != MPI_SUCCESS) return abandon(&io, rc);
    const void *from = me_root ? io.src : NULL;
    if (!nb) return finished(comm, C_SCATTER, outboard_scatter(g, from, (size_t)per, io.dst, (uint32_t)root), &io, recvbuf, rcount, rtype, per);
    outboard_request *r = NULL;
    rc = outboard_scatter_start(g, from, (size_t)per, io.dst, (uint32_t)root, &r);
    return started(comm, c, C_SCATTER, rc, r, &io, recvbuf, rcount, rtype, per, req);
}

int MPI_Scatter(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
    return scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, NULL);
}

int MPI_Iscatter(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                 MPI_Request *req) {
    return scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, req);
}

/* ---- The rooted v-forms: block lengths shared first ---- */

/* The byte lengths of every rank's block, `n` of them in `lens` (shared
 * by `share`), as the C ABI's counts, and whether their total is within
 * collective `k`'s threshold (said in verbose mode when it is not). */
static int within(MPI_Comm comm, enum coll k, const long long *lens, int n, size_t *counts) {
    long long total = 0;
    for (int q = 0; q < n; q++) {
        counts[q] = (size_t)lens[q];
        total += lens[q];
    }
    if (total <= ob.max_bytes[k] && total <= INT_MAX) return 1;
    ob_say(comm, ob_lookup(comm), k, 0, W_SIZE);
    return 0;
}

int MPI_Gatherv(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, const int rcounts[], const int displs[], MPI_Datatype rtype,
                int root, MPI_Comm comm) {
    if (!ob.up) return PMPI_Gatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, root, comm);
    outboard_group *g = ob_take(comm, C_GATHERV, L_BLOCKING, W_TAKEN, 0, NULL);
    if (!g) return PMPI_Gatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    int n = comm_size(comm), me = (int)ob_my_rank(g), at_root = me == root;
    /* This rank's block in bytes, from the side it describes it with. */
    struct layout sl, rl;
    int by_recv = at_root && sendbuf == MPI_IN_PLACE;
    if (ob_layout(by_recv ? rtype : stype, &sl) != 0 || (at_root && ob_layout(rtype, &rl) != 0))
        return ob_fail_msg(comm, MPI_ERR_TYPE, ob_coll_name[C_GATHERV], "a datatype cannot be described");
    long long mine = (long long)(by_recv ? rcounts[me] : scount) * sl.size;
    long long *lens = malloc((size_t)n * sizeof *lens);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    if (!lens || !counts) {
        free(lens);
        free(counts);
        return MPI_ERR_NO_MEM;
    }
    int rc = ob_done(comm, C_GATHERV, outboard_allgather(g, &mine, sizeof mine, lens));
    if (rc != MPI_SUCCESS || !within(comm, C_GATHERV, lens, n, counts)) {
        free(lens);
        free(counts);
        return rc != MPI_SUCCESS ? rc : PMPI_Gatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, root, comm);
    }
    /* A block longer than the root's receive signature for it: the call
     * still runs (into the packed copy), then fails at the root. */
    int truncated = 0;
    for (int q = 0; at_root && q < n; q++) truncated |= lens[q] > (long long)rcounts[q] * rl.size;
    long long total = 0;
    for (int q = 0; q < n; q++) total += lens[q];
    char *packed = at_root ? malloc(total ? (size_t)total : 1) : NULL;
    struct io io = {0};
    if (rc == MPI_SUCCESS && at_root && !packed) rc = MPI_ERR_NO_MEM;
    MPI_Aint lb = 0, extent = 0;
    if (at_root) PMPI_Type_get_extent(rtype, &lb, &extent);
    long long before = 0;
    for (int q = 0; q < me; q++) before += lens[q];
    if (rc == MPI_SUCCESS && by_recv) {
        /* In place: the root's block is in its receive buffer. */
        rc = ob_pack((char *)recvbuf + (MPI_Aint)displs[me] * extent, rcounts[me], rtype, packed + before, mine, comm);
    } else if (rc == MPI_SUCCESS) {
        rc = send_side(sendbuf, scount, stype, mine, comm, ob_coll_name[C_GATHERV], &io);
    }
    if (rc == MPI_SUCCESS) rc = ob_done(comm, C_GATHERV, outboard_gatherv(g, by_recv ? NULL : io.src, packed, counts, NULL, (uint32_t)root));
    if (rc == MPI_SUCCESS && truncated)
        rc = ob_fail_msg(comm, MPI_ERR_TRUNCATE, ob_coll_name[C_GATHERV], "a rank's block is longer than the root's receive type signature for it");
    for (int q = 0, at = 0; rc == MPI_SUCCESS && at_root && q < n; at += (int)counts[q], q++) {
        char *to = (char *)recvbuf + (MPI_Aint)displs[q] * extent;
        if (rl.contiguous) memcpy(to, packed + at, counts[q]);
        else rc = ob_unpack(packed + at, (long long)counts[q], to, rcounts[q], rtype, comm);
    }
    free(io.stmp);
    free(packed);
    free(lens);
    free(counts);
    return rc;
}

int MPI_Scatterv(const void *sendbuf, const int scounts[], const int displs[], MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype,
                 int root, MPI_Comm comm) {
    if (!ob.up) return PMPI_Scatterv(sendbuf, scounts, displs, stype, recvbuf, rcount, rtype, root, comm);
    outboard_group *g = ob_take(comm, C_SCATTERV, L_BLOCKING, W_TAKEN, 0, NULL);
    if (!g) return PMPI_Scatterv(sendbuf, scounts, displs, stype, recvbuf, rcount, rtype, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    int n = comm_size(comm), me = (int)ob_my_rank(g), at_root = me == root;
    int keeps = !(at_root && recvbuf == MPI_IN_PLACE);
    struct layout sl, rl;
    if ((at_root && ob_layout(stype, &sl) != 0) || (keeps && ob_layout(rtype, &rl) != 0))
        return ob_fail_msg(comm, MPI_ERR_TYPE, ob_coll_name[C_SCATTERV], "a datatype cannot be described");
    long long *lens = calloc((size_t)n, sizeof *lens);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    if (!lens || !counts) {
        free(lens);
        free(counts);
        return MPI_ERR_NO_MEM;
    }
    for (int q = 0; at_root && q < n; q++) lens[q] = (long long)scounts[q] * sl.size;
    int rc = ob_done(comm, C_SCATTERV, outboard_bcast(g, lens, (size_t)n * sizeof *lens, (uint32_t)root));
    if (rc == MPI_SUCCESS && !within(comm, C_SCATTERV, lens, n, counts)) {
        free(lens);
        free(counts);
        return PMPI_Scatterv(sendbuf, scounts, displs, stype, recvbuf, rcount, rtype, root, comm);
    }
    long long total = 0;
    for (int q = 0; q < n; q++) total += lens[q];
    char *packed = at_root ? malloc(total ? (size_t)total : 1) : NULL;
    if (rc == MPI_SUCCESS && at_root && !packed) rc = MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS && at_root) {
        /* The root's blocks one after the other, from its displacements. */
        MPI_Aint lb, extent;
        PMPI_Type_get_extent(stype, &lb, &extent);
        for (int q = 0, at = 0; rc == MPI_SUCCESS && q < n; at += (int)counts[q], q++)
            rc = ob_pack((const char *)sendbuf + (MPI_Aint)displs[q] * extent, scounts[q], stype, packed + at, lens[q], comm);
    }
    struct io io = {0};
    if (rc == MPI_SUCCESS && keeps) {
        if ((long long)rcount * rl.size != lens[me])
            rc = ob_fail_msg(comm, MPI_ERR_TRUNCATE, ob_coll_name[C_SCATTERV], "the receive type signature is not as long as the root's block for this rank");
        else rc = recv_side(recvbuf, &rl, lens[me], &io);
    }
    if (rc == MPI_SUCCESS) rc = ob_done(comm, C_SCATTERV, outboard_scatterv(g, packed, counts, NULL, keeps ? io.dst : NULL, (uint32_t)root));
    if (rc == MPI_SUCCESS && io.rtmp) rc = ob_unpack(io.rtmp, lens[me], recvbuf, rcount, rtype, comm);
    free(io.rtmp);
    free(packed);
    free(lens);
    free(counts);
    return rc;
}

/* ---- Alltoall: the threshold applies to the n x n blocks together ---- */

static int alltoall_io(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, const struct layout *rl,
                       long long per, int n, MPI_Comm comm, enum coll k, int nb, struct io *io) {
    int rc = recv_side(recvbuf, rl, per * n, io);
    if (rc != MPI_SUCCESS) return rc;
    if (sendbuf == MPI_IN_PLACE) {
        if (io->rtmp) rc = ob_pack(recvbuf, rcount * n, rtype, io->rtmp, per * n, comm);
        return rc;
    }
    return send_side(sendbuf, scount * n, stype, per * n, comm, nb ? ob_icoll_name[k] : ob_coll_name[k], io);
}

/* MPI_Alltoall, blocking (`req` NULL) or not. */
static int alltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm,
                    MPI_Request *req) {
    /* Nothing asked of MPI when everything passes through. */
    int n = ob.up ? comm_size(comm) : 0, nb = req != NULL;
    struct layout rl;
    long long per = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        enum why w = sized(rcount, rtype, (long long)n * n, C_ALLTOALL, &rl, &per);
        g = ob_take(comm, C_ALLTOALL, nb ? L_NONBLOCKING : L_BLOCKING, w, per * n * n, &c);
    }
    if (!g)
        return nb ? PMPI_Ialltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, req)
                  : PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    struct io io = {0};
    int rc = alltoall_io(sendbuf, scount, stype, recvbuf, rcount, rtype, &rl, per, n, comm, C_ALLTOALL, nb, &io);
    if (rc != MPI_SUCCESS) return abandon(&io, rc);
    if (!nb) return finished(comm, C_ALLTOALL, outboard_alltoall(g, io.src, (size_t)per, io.dst), &io, recvbuf, rcount * n, rtype, per * n);
    outboard_request *r = NULL;
    rc = outboard_alltoall_start(g, io.src, (size_t)per, io.dst, &r);
    return started(comm, c, C_ALLTOALL, rc, r, &io, recvbuf, rcount * n, rtype, per * n, req);
}

int MPI_Alltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm) {
    return alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, NULL);
}

int MPI_Ialltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req) {
    return alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, req);
}

/* ---- Reductions: predefined types, so the buffers are contiguous ---- */

/* MPI_Reduce_scatter_block, blocking (`req` NULL) or not. */
static int reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    int n = ob.up ? comm_size(comm) : 0, obop = 0, nb = req != NULL;
    struct layout l;
    long long per = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        enum why w = reducible(comm, count, dt, op, n, C_REDUCE_SCATTER_BLOCK, &l, &per, &obop);
        g = ob_take(comm, C_REDUCE_SCATTER_BLOCK, nb ? L_NONBLOCKING : L_BLOCKING, w, per * n, &c);
    }
    if (!g)
        return nb ? PMPI_Ireduce_scatter_block(sendbuf, recvbuf, count, dt, op, comm, req) : PMPI_Reduce_scatter_block(sendbuf, recvbuf, count, dt, op, comm);
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    if (!nb) return ob_done(comm, C_REDUCE_SCATTER_BLOCK, outboard_reduce_scatter_block(g, src, recvbuf, (size_t)count, l.base, obop));
    outboard_request *r = NULL;
    int rc = outboard_reduce_scatter_block_start(g, src, recvbuf, (size_t)count, l.base, obop, &r);
    return ob_wrap(comm, c, C_REDUCE_SCATTER_BLOCK, rc, r, NULL, req);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    return reduce_scatter_block(sendbuf, recvbuf, count, dt, op, comm, NULL);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    return reduce_scatter_block(sendbuf, recvbuf, count, dt, op, comm, req);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    if (!ob.up) return PMPI_Reduce_scatter(sendbuf, recvbuf, rcounts, dt, op, comm);
    int n = comm_size(comm), obop = 0, bad = 0;
    long long total = 0;
    for (int q = 0; q < n; q++) {
        bad |= rcounts[q] < 0;
        total += rcounts[q];
    }
    struct layout l;
    long long elem = 0;
    enum why w = bad ? W_DATATYPE : reducible(comm, 1, dt, op, total, C_REDUCE_SCATTER, &l, &elem, &obop);
    outboard_group *g = ob_take(comm, C_REDUCE_SCATTER, L_BLOCKING, w, elem * total, NULL);
    if (!g) return PMPI_Reduce_scatter(sendbuf, recvbuf, rcounts, dt, op, comm);
    size_t *counts = malloc((size_t)n * sizeof *counts);
    if (!counts) return MPI_ERR_NO_MEM;
    for (int q = 0; q < n; q++) counts[q] = (size_t)rcounts[q];
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    int rc = ob_done(comm, C_REDUCE_SCATTER, outboard_reduce_scatter(g, src, recvbuf, counts, l.base, obop));
    free(counts);
    return rc;
}

/* ---- Scans ---- */

/* MPI_Scan or MPI_Exscan (`exclusive`), blocking (`req` NULL) or not. */
static int scan(int exclusive, const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    enum coll k = exclusive ? C_EXSCAN : C_SCAN;
    int nb = req != NULL, obop = 0;
    struct layout l;
    long long bytes = 0;
    struct comm *c = NULL;
    outboard_group *g = NULL;
    if (ob.up) {
        enum why w = reducible(comm, count, dt, op, 1, k, &l, &bytes, &obop);
        g = ob_take(comm, k, nb ? L_NONBLOCKING : L_BLOCKING, w, bytes, &c);
    }
    if (!g) {
        if (exclusive) return nb ? PMPI_Iexscan(sendbuf, recvbuf, count, dt, op, comm, req) : PMPI_Exscan(sendbuf, recvbuf, count, dt, op, comm);
        return nb ? PMPI_Iscan(sendbuf, recvbuf, count, dt, op, comm, req) : PMPI_Scan(sendbuf, recvbuf, count, dt, op, comm);
    }
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    if (!nb) {
        int rc = exclusive ? outboard_exscan(g, src, recvbuf, (size_t)count, l.base, obop) : outboard_scan(g, src, recvbuf, (size_t)count, l.base, obop);
        return ob_done(comm, k, rc);
    }
    outboard_request *r = NULL;
    int rc = exclusive ? outboard_exscan_start(g, src, recvbuf, (size_t)count, l.base, obop, &r)
                       : outboard_scan_start(g, src, recvbuf, (size_t)count, l.base, obop, &r);
    return ob_wrap(comm, c, k, rc, r, NULL, req);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    return scan(0, sendbuf, recvbuf, count, dt, op, comm, NULL);
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    return scan(0, sendbuf, recvbuf, count, dt, op, comm, req);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    return scan(1, sendbuf, recvbuf, count, dt, op, comm, NULL);
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    return scan(1, sendbuf, recvbuf, count, dt, op, comm, req);
}
