/* MPI_Barrier, MPI_Bcast, MPI_Reduce, MPI_Allreduce and their non-blocking
 * forms on Outboard. Each call first decides, from what every rank of the
 * communicator agrees on (the communicator, the collective, the type
 * signature's bytes, a reduction's predefined type and operation, the
 * configuration), whether it is taken over; a broadcast of data not laid
 * out as one run of bytes at this rank moves through a packed copy. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The group to run collective `k` of `bytes` on, or NULL (the reason
 * printed in verbose mode). */
outboard_group *ob_take(MPI_Comm comm, enum coll k, int nb, enum why w, long long bytes, struct comm **cp) {
    if (!ob.up || comm == MPI_COMM_NULL) return NULL;
    struct comm *c = ob_lookup(comm);
    if (cp) *cp = c;
    if (ob.how[k] == H_OFF) w = W_OFF;
    else if (w == W_TAKEN && !c) {
        int inter = 0;
        PMPI_Comm_test_inter(comm, &inter);
        w = inter ? W_INTER : W_UNMAPPED;
    } else if (w == W_TAKEN && !c->group[nb]) w = c->broken;
    else if (w == W_TAKEN && c->nodes > 1 && bytes > ob.max_bytes_between_nodes[k]) w = W_SIZE_NODES;
    ob_say(comm, c, k, nb, w);
    if (w != W_TAKEN) return NULL;
    outboard_group_set_mode(c->group[nb], ob.how[k] == H_HOST ? OUTBOARD_MODE_HOST_BASED : OUTBOARD_MODE_OFFLOADED);
    return c->group[nb];
}

/* Bytes of the message (count x the signature's size), or why it is not
 * taken over. The same at every rank of a correct program. */
static enum why message(int count, MPI_Datatype dt, enum coll k, struct layout *l, long long *bytes) {
    if (count < 0 || ob_layout(dt, l) != 0) return W_DATATYPE; /* PMPI reports it */
    *bytes = (long long)count * l->size;
    if (*bytes > ob.max_bytes[k] || *bytes > INT_MAX) return W_SIZE;
    return W_TAKEN;
}

/* Whether a reduction on `comm` is taken over, and with which operator:
 * a module's (modules.c) when its engines have it, else a built-in one. */
static enum why reduction(MPI_Comm comm, int count, MPI_Datatype dt, MPI_Op op, enum coll k, struct layout *l, long long *bytes, int *obop) {
    enum why w = message(count, dt, k, l, bytes);
    if (w == W_DATATYPE) return w;
    int m = ob_module_reduction(comm, l, op, obop);
    enum why r = m >= 0 ? (enum why)m : ob_reduction(l, op, obop);
    return r != W_TAKEN ? r : w;
}

/* A root outside the group: MPI_ERR_ROOT, through the communicator's
 * error handler (every rank sees the same root). */
int ob_bad_root(outboard_group *g, int root, MPI_Comm comm) {
    uint32_t n = 0;
    outboard_group_size(g, &n);
    if (root >= 0 && (uint32_t)root < n) return 0;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_ROOT);
    return 1;
}

uint32_t ob_my_rank(outboard_group *g) {
    uint32_t me = 0;
    outboard_group_rank(g, &me);
    return me;
}

/* A broadcast's packed copy of `bytes` bytes in *out, holding the root's
 * data packed (`src`, at the root) or room for it (elsewhere). */
static int packed(const void *src, int count, MPI_Datatype dt, long long bytes, MPI_Comm comm, void **out) {
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return MPI_ERR_NO_MEM;
    return src ? ob_pack(src, count, dt, *out, bytes, comm) : MPI_SUCCESS;
}

int ob_done(MPI_Comm comm, enum coll k, int rc) {
    return rc == OUTBOARD_OK ? MPI_SUCCESS : ob_failed(comm, ob_coll_name[k], rc);
}

int MPI_Barrier(MPI_Comm comm) {
    outboard_group *g = ob_take(comm, C_BARRIER, L_BLOCKING, W_TAKEN, 0, NULL);
    if (!g) return PMPI_Barrier(comm);
    return ob_done(comm, C_BARRIER, outboard_barrier(g));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    if (!ob.up) return PMPI_Bcast(buf, count, dt, root, comm);
    struct layout l;
    long long bytes = 0;
    enum why w = message(count, dt, C_BCAST, &l, &bytes);
    outboard_group *g = ob_take(comm, C_BCAST, L_BLOCKING, w, bytes, NULL);
    if (!g) return PMPI_Bcast(buf, count, dt, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    if (l.contiguous) return ob_done(comm, C_BCAST, outboard_bcast(g, buf, (size_t)bytes, (uint32_t)root));
    int me_root = ob_my_rank(g) == (uint32_t)root;
    void *tmp = NULL;
    int rc = packed(me_root ? buf : NULL, count, dt, bytes, comm, &tmp);
    if (rc == MPI_SUCCESS) {
        rc = ob_done(comm, C_BCAST, outboard_bcast(g, tmp, (size_t)bytes, (uint32_t)root));
        if (rc == MPI_SUCCESS && !me_root) rc = ob_unpack(tmp, bytes, buf, count, dt, comm);
    }
    free(tmp);
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
    if (!ob.up) return PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm);
    struct layout l;
    long long bytes = 0;
    int obop = 0;
    enum why w = reduction(comm, count, dt, op, C_REDUCE, &l, &bytes, &obop);
    outboard_group *g = ob_take(comm, C_REDUCE, L_BLOCKING, w, bytes, NULL);
    if (!g) return PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    return ob_done(comm, C_REDUCE, outboard_reduce(g, src, recvbuf, (size_t)count, l.base, obop, (uint32_t)root));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    if (!ob.up) return PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    struct layout l;
    long long bytes = 0;
    int obop = 0;
    enum why w = reduction(comm, count, dt, op, C_ALLREDUCE, &l, &bytes, &obop);
    outboard_group *g = ob_take(comm, C_ALLREDUCE, L_BLOCKING, w, bytes, NULL);
    if (!g) return PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    return ob_done(comm, C_ALLREDUCE, outboard_allreduce(g, src, recvbuf, (size_t)count, l.base, obop));
}

/* ---- Non-blocking forms: the same decisions; a packed copy lives until
 * the request completes, when the result is unpacked (requests.c). ---- */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    struct comm *c = NULL;
    outboard_group *g = ob_take(comm, C_BARRIER, L_NONBLOCKING, W_TAKEN, 0, &c);
    if (!g) return PMPI_Ibarrier(comm, req);
    outboard_request *r = NULL;
    int rc = outboard_barrier_start(g, &r);
    return ob_wrap(comm, c, C_BARRIER, rc, r, NULL, req);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req) {
    if (!ob.up) return PMPI_Ibcast(buf, count, dt, root, comm, req);
    struct layout l;
    long long bytes = 0;
    struct comm *c = NULL;
    enum why w = message(count, dt, C_BCAST, &l, &bytes);
    outboard_group *g = ob_take(comm, C_BCAST, L_NONBLOCKING, w, bytes, &c);
    if (!g) return PMPI_Ibcast(buf, count, dt, root, comm, req);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    outboard_request *r = NULL;
    if (l.contiguous) {
        int rc = outboard_bcast_start(g, buf, (size_t)bytes, (uint32_t)root, &r);
        return ob_wrap(comm, c, C_BCAST, rc, r, NULL, req);
    }
    int me_root = ob_my_rank(g) == (uint32_t)root;
    void *tmp = NULL;
    int rc = packed(me_root ? buf : NULL, count, dt, bytes, comm, &tmp);
    if (rc != MPI_SUCCESS) {
        free(tmp);
        return rc;
    }
    rc = outboard_bcast_start(g, tmp, (size_t)bytes, (uint32_t)root, &r);
    struct staging *s = ob_staging(tmp, buf, count, dt, bytes, comm, !me_root);
    return ob_wrap(comm, c, C_BCAST, rc, r, s, req);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, MPI_Request *req) {
    if (!ob.up) return PMPI_Ireduce(sendbuf, recvbuf, count, dt, op, root, comm, req);
    struct layout l;
    long long bytes = 0;
    int obop = 0;
    struct comm *c = NULL;
    enum why w = reduction(comm, count, dt, op, C_REDUCE, &l, &bytes, &obop);
    outboard_group *g = ob_take(comm, C_REDUCE, L_NONBLOCKING, w, bytes, &c);
    if (!g) return PMPI_Ireduce(sendbuf, recvbuf, count, dt, op, root, comm, req);
    if (ob_bad_root(g, root, comm)) return MPI_ERR_ROOT;
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    outboard_request *r = NULL;
    int rc = outboard_reduce_start(g, src, recvbuf, (size_t)count, l.base, obop, (uint32_t)root, &r);
    return ob_wrap(comm, c, C_REDUCE, rc, r, NULL, req);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    if (!ob.up) return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, req);
    struct layout l;
    long long bytes = 0;
    int obop = 0;
    struct comm *c = NULL;
    enum why w = reduction(comm, count, dt, op, C_ALLREDUCE, &l, &bytes, &obop);
    outboard_group *g = ob_take(comm, C_ALLREDUCE, L_NONBLOCKING, w, bytes, &c);
    if (!g) return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, req);
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    outboard_request *r = NULL;
    int rc = outboard_allreduce_start(g, src, recvbuf, (size_t)count, l.base, obop, &r);
    return ob_wrap(comm, c, C_ALLREDUCE, rc, r, NULL, req);
}
