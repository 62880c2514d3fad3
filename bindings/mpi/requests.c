/* Non-blocking collectives' requests, and MPI's wait and test functions.
 *
 * A taken-over MPI_Ibarrier / Ibcast / Ireduce / Iallreduce is an Outboard
 * request behind an MPI generalized request (MPI_Grequest_start), so its
 * handle is a real MPI_Request: arrays may mix it with MPI's own requests,
 * and PMPI's wait and test functions report it. What MPI cannot do is
 * drive it, so every wait and test function below first tests the Outboard
 * requests under way (drive), completing the generalized request of each
 * that finished, then hands the array to PMPI.
 *
 * A wait loop idles between rounds through the C ABI's waiting policy
 * (spin, then yield or block until the engine delivers an event): a rank
 * that only tests keeps the core from the engine's thread when cores are
 * few, and the collective it waits for then moves at the scheduler's tick. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* A broadcast's packed copy, alive until the collective completes. */
struct staging {
    void *copy;             /* unpacked into buf at completion if unpack, then freed */
    void *buf;
    int count;
    MPI_Datatype dt;        /* a duplicate: the program may free its own */
    long long bytes;
    MPI_Comm comm;
    int unpack;             /* 1: unpack; -1: fail with MPI_ERR_TRUNCATE (the copy held more than buf) */
};

struct obreq {
    MPI_Request handle;
    outboard_request *r;    /* NULL once finished */
    int error;              /* MPI error code once finished */
    struct comm *comm;      /* its communicator's mapping */
    struct staging *staging;
    struct obreq *next;
};

static struct obreq *pending; /* under ob.lock */

struct staging *ob_staging(void *copy, void *buf, int count, MPI_Datatype dt, long long bytes, MPI_Comm comm, int unpack) {
    struct staging *s = calloc(1, sizeof *s);
    s->copy = copy;
    s->buf = buf;
    s->count = count;
    PMPI_Type_dup(dt, &s->dt);
    s->bytes = bytes;
    s->comm = comm;
    s->unpack = unpack;
    return s;
}

/* Unpacks a finished collective's result (if it succeeded) and frees the
 * copy; the MPI error code of the unpacking, or `error`. */
static int unstage(struct staging *s, int error) {
    if (!s) return error;
    if (error == MPI_SUCCESS && s->unpack < 0) error = MPI_ERR_TRUNCATE;
    else if (error == MPI_SUCCESS && s->unpack) error = ob_unpack(s->copy, s->bytes, s->buf, s->count, s->dt, s->comm);
    PMPI_Type_free(&s->dt);
    free(s->copy);
    free(s);
    return error;
}

/* Whether any Outboard request is under way (a read of the list head
 * without the lock: another thread may be adding or finishing one). */
static int some_pending(void) {
    return __atomic_load_n(&pending, __ATOMIC_ACQUIRE) != NULL;
}

static int greq_query(void *extra, MPI_Status *st) {
    struct obreq *q = extra;
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    st->MPI_ERROR = q->error;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
    return q->error;
}

static int greq_free(void *extra) {
    free(extra);
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete) {
    (void)extra; (void)complete;
    return MPI_SUCCESS; /* collectives cannot be cancelled */
}

/* Tests every Outboard request under way; completes the generalized
 * request of each that finished. */
static void drive(void) {
    pthread_mutex_lock(&ob.lock);
    struct obreq **pp = &pending;
    while (*pp) {
        struct obreq *q = *pp;
        int finished = 0;
        int rc = outboard_test(&q->r, &finished, NULL);
        if (!finished && rc == OUTBOARD_OK) {
            pp = &q->next;
            continue;
        }
        if (rc != OUTBOARD_OK) {
            fprintf(stderr, "outboard_mpi: rank %d: a non-blocking collective failed: %s: %s\n", ob.rank, outboard_strerror(rc), outboard_last_error());
            q->error = ob_error_code(rc, "a non-blocking collective");
        }
        q->error = unstage(q->staging, q->error);
        q->staging = NULL;
        *pp = q->next;
        if (--q->comm->pending == 0 && q->comm->freed) ob_release(q->comm);
        PMPI_Grequest_complete(q->handle);
        /* q itself is freed by greq_free when MPI frees the request. */
    }
    pthread_mutex_unlock(&ob.lock);
}

static struct obreq *find(MPI_Request h) {
    if (h == MPI_REQUEST_NULL) return NULL;
    pthread_mutex_lock(&ob.lock);
    struct obreq *q = pending;
    while (q && q->handle != h) q = q->next;
    pthread_mutex_unlock(&ob.lock);
    return q;
}

/* Whether any of the n requests is an Outboard one still under way; in
 * *all_ours whether every other one is null (so a wait may block on
 * Outboard's events alone). */
static int any_pending(int n, const MPI_Request *reqs, int *all_ours) {
    int any = 0, ours = 1;
    if (!some_pending()) return 0;
    for (int i = 0; i < n; i++) {
        if (find(reqs[i])) any = 1;
        else if (reqs[i] != MPI_REQUEST_NULL) ours = 0;
    }
    if (all_ours) *all_ours = ours;
    return any;
}

/* Lets MPI progress its own requests while Outboard ones are awaited. */
static void poke_mpi(void) {
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

/* One idle step between rounds of a wait: block on Outboard's events only
 * when nothing else is awaited. */
static void idle(int only_ours) {
    poke_mpi();
    outboard_idle(ob.world, only_ours);
}

int ob_wrap(MPI_Comm comm, struct comm *c, enum coll k, int rc, outboard_request *r, struct staging *s, MPI_Request *req) {
    if (rc != OUTBOARD_OK) {
        unstage(s, MPI_ERR_OTHER);
        return ob_failed(comm, ob_icoll_name[k], rc);
    }
    struct obreq *q = calloc(1, sizeof *q);
    q->r = r;
    q->error = MPI_SUCCESS;
    q->comm = c;
    q->staging = s;
    PMPI_Grequest_start(greq_query, greq_free, greq_cancel, q, req);
    q->handle = *req;
    pthread_mutex_lock(&ob.lock);
    c->pending++;
    q->next = pending;
    pending = q;
    pthread_mutex_unlock(&ob.lock);
    return MPI_SUCCESS;
}

/* At MPI_Finalize: every collective under way finishes first. */
void ob_drain(void) {
    while (some_pending()) {
        drive();
        if (some_pending()) idle(1);
    }
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    int ours = 1;
    while (any_pending(1, req, &ours)) {
        drive();
        if (any_pending(1, req, NULL)) idle(ours);
    }
    return PMPI_Wait(req, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    int ours = 1;
    while (any_pending(n, reqs, &ours)) {
        drive();
        if (any_pending(n, reqs, NULL)) idle(ours);
    }
    return PMPI_Waitall(n, reqs, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st) {
    int ours = 1;
    if (!any_pending(n, reqs, &ours)) return PMPI_Waitany(n, reqs, idx, st);
    for (;;) {
        drive();
        int flag = 0;
        int rc = PMPI_Testany(n, reqs, idx, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
        any_pending(n, reqs, &ours);
        idle(ours);
    }
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[]) {
    int ours = 1;
    if (!any_pending(n, reqs, &ours)) return PMPI_Waitsome(n, reqs, outcount, idx, sts);
    for (;;) {
        drive();
        int rc = PMPI_Testsome(n, reqs, outcount, idx, sts);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc;
        any_pending(n, reqs, &ours);
        idle(ours);
    }
}

/* A test that finds an Outboard request unfinished yields the core: a
 * program that tests in a loop would otherwise starve the engine. */
static void after_test(int n, const MPI_Request *reqs, int flag) {
    if (!flag && any_pending(n, reqs, NULL)) outboard_idle(ob.world, 0);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    if (!some_pending()) return PMPI_Test(req, flag, st);
    drive();
    int rc = PMPI_Test(req, flag, st);
    if (rc == MPI_SUCCESS) after_test(1, req, *flag);
    return rc;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    if (!some_pending()) return PMPI_Testall(n, reqs, flag, sts);
    drive();
    int rc = PMPI_Testall(n, reqs, flag, sts);
    if (rc == MPI_SUCCESS) after_test(n, reqs, *flag);
    return rc;
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st) {
    if (!some_pending()) return PMPI_Testany(n, reqs, idx, flag, st);
    drive();
    int rc = PMPI_Testany(n, reqs, idx, flag, st);
    if (rc == MPI_SUCCESS) after_test(n, reqs, *flag);
    return rc;
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[]) {
    if (!some_pending()) return PMPI_Testsome(n, reqs, outcount, idx, sts);
    drive();
    int rc = PMPI_Testsome(n, reqs, outcount, idx, sts);
    if (rc == MPI_SUCCESS) after_test(n, reqs, *outcount != 0);
    return rc;
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st) {
    if (!some_pending()) return PMPI_Request_get_status(req, flag, st);
    drive();
    int rc = PMPI_Request_get_status(req, flag, st);
    if (rc == MPI_SUCCESS) after_test(1, &req, *flag);
    return rc;
}

/* Freeing a collective's request is erroneous in MPI; an Outboard one is
 * finished first (its buffers are in use until then), then freed. */
int MPI_Request_free(MPI_Request *req) {
    int ours = 1;
    while (any_pending(1, req, &ours)) {
        drive();
        if (any_pending(1, req, NULL)) idle(ours);
    }
    return PMPI_Request_free(req);
}
