/* liboutboard_mpi: runs an unmodified MPI program's collectives on Outboard
 * through the MPI profiling interface (PMPI). Built once per MPI (Open MPI,
 * MPICH) against that MPI's mpi.h, linked against liboutboard_capi, and
 * used with LD_PRELOAD:
 *
 *   mpirun.openmpi -x LD_PRELOAD=/path/liboutboard_mpi_openmpi.so ./app
 *   mpiexec.mpich -env LD_PRELOAD /path/liboutboard_mpi_mpich.so ./app
 *
 * MPI_Init / MPI_Init_thread call PMPI first, then bring Outboard up from
 * the MPI job itself (engine addresses and rank 0's job key exchanged with
 * PMPI_Allgather on a private duplicate of MPI_COMM_WORLD). MPI_Barrier,
 * MPI_Bcast, MPI_Reduce and MPI_Allreduce on intra-communicators are taken
 * over when the datatype and operation are ones the engine combines and the
 * message is within that collective's size threshold; everything else goes to PMPI
 * unchanged. MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce and MPI_Iallreduce
 * likewise, their requests usable with every MPI wait and test function,
 * mixed with MPI's own. Communicators are mapped lazily, on their first collective, to
 * Outboard groups (members translated to world ranks, the group id agreed
 * like a context id by one PMPI_Allreduce), cached as an MPI attribute and
 * freed with the communicator.
 *
 * Environment (the same at every rank):
 *   OUTBOARD_MPI=offload|host|off        all collectives (default offload)
 *   OUTBOARD_MPI_BARRIER / _BCAST / _REDUCE / _ALLREDUCE = offload|host|off
 *   OUTBOARD_MPI_MAX_BYTES=N             larger messages pass through (default 1 MiB)
 *   OUTBOARD_MPI_BCAST_MAX_BYTES / _REDUCE_MAX_BYTES / _ALLREDUCE_MAX_BYTES=N
 *                                        the same per collective (blocking and
 *                                        non-blocking), overriding the above
 *   OUTBOARD_MPI_VERBOSE=1               print, per communicator and collective,
 *                                        what was taken over and why not
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "outboard.h"

enum coll { C_BARRIER, C_BCAST, C_REDUCE, C_ALLREDUCE, C_COUNT };
static const char *coll_name[C_COUNT] = {"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce"};
static const char *icoll_name[C_COUNT] = {"MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce"};
static const char *coll_env[C_COUNT] = {"OUTBOARD_MPI_BARRIER", "OUTBOARD_MPI_BCAST", "OUTBOARD_MPI_REDUCE", "OUTBOARD_MPI_ALLREDUCE"};
static const char *max_env[C_COUNT] = {NULL, "OUTBOARD_MPI_BCAST_MAX_BYTES", "OUTBOARD_MPI_REDUCE_MAX_BYTES", "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES"};

enum how { H_OFF, H_OFFLOAD, H_HOST };

/* Why a call was not taken over (verbose mode prints each once per
 * communicator and collective). */
enum why { W_TAKEN, W_OFF, W_DATATYPE, W_OP, W_SIZE, W_INTER, W_NOGROUP, W_COUNT };
static const char *why_text[W_COUNT] = {
    "taken over", "pass-through by configuration", "datatype not offloadable",
    "operation not offloadable for this datatype", "message beyond the size threshold",
    "inter-communicator", "no Outboard group (set-up failed at some rank)"};

static struct {
    int up;                 /* Outboard is running */
    int verbose;
    int rank;
    enum how how[C_COUNT];
    long long max_bytes[C_COUNT]; /* per collective; barrier's unused */
    outboard_world *world;
    MPI_Comm boot;          /* private duplicate of MPI_COMM_WORLD for the bootstrap */
    int keyval;             /* communicator -> struct comm attribute */
    uint64_t next_id;       /* next group id this process may use */
    int id_busy;            /* a mapping is agreeing on an id (MPI_THREAD_MULTIPLE) */
    unsigned seed;          /* for the retry pauses */
    unsigned long retries;  /* id agreements retried (printed at finalize, verbose) */
    pthread_mutex_t lock;   /* guards next_id, id_busy and the pending list */
} ob = {.keyval = MPI_KEYVAL_INVALID, .lock = PTHREAD_MUTEX_INITIALIZER};

/* What a communicator maps to. */
struct comm {
    outboard_group *group;  /* NULL: every collective passes through */
    enum why broken;        /* why group is NULL */
    unsigned said[C_COUNT]; /* bit per `enum why` already printed (+16: non-blocking) */
};

static void say(MPI_Comm comm, struct comm *c, enum coll k, int nb, enum why w) {
    unsigned bit = 1u << (w + (nb ? 16 : 0));
    if (!ob.verbose || (c && (c->said[k] & bit)))
        return;
    if (c)
        c->said[k] |= bit;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Comm_get_name(comm, name, &len);
    const char *mode = ob.how[k] == H_HOST ? " (host-based)" : ob.how[k] == H_OFFLOAD ? " (offloaded)" : "";
    char limit[160] = "";
    if (w == W_SIZE)
        snprintf(limit, sizeof limit, " (%lld bytes, %s or OUTBOARD_MPI_MAX_BYTES)", ob.max_bytes[k], max_env[k] ? max_env[k] : "");
    fprintf(stderr, "outboard_mpi: rank %d: %s on %s: %s%s%s\n", ob.rank, nb ? icoll_name[k] : coll_name[k], len ? name : "a communicator",
            why_text[w], w == W_TAKEN ? mode : "", limit);
}

static enum how parse_how(const char *v, enum how dflt) {
    if (!v || !*v) return dflt;
    if (!strcmp(v, "off") || !strcmp(v, "pmpi") || !strcmp(v, "0")) return H_OFF;
    if (!strcmp(v, "host") || !strcmp(v, "host-based")) return H_HOST;
    if (!strcmp(v, "offload") || !strcmp(v, "offloaded") || !strcmp(v, "1")) return H_OFFLOAD;
    fprintf(stderr, "outboard_mpi: ignoring unknown setting \"%s\" (offload, host or off)\n", v);
    return dflt;
}

static void read_config(void) {
    enum how all = parse_how(getenv("OUTBOARD_MPI"), H_OFFLOAD);
    for (int k = 0; k < C_COUNT; k++) ob.how[k] = parse_how(getenv(coll_env[k]), all);
    const char *m = getenv("OUTBOARD_MPI_MAX_BYTES");
    long long dflt = m && *m ? atoll(m) : 1 << 20;
    for (int k = 0; k < C_COUNT; k++) {
        const char *mk = max_env[k] ? getenv(max_env[k]) : NULL;
        ob.max_bytes[k] = mk && *mk ? atoll(mk) : dflt;
    }
    const char *v = getenv("OUTBOARD_MPI_VERBOSE");
    ob.verbose = v && *v && strcmp(v, "0") != 0;
}

/* The bootstrap's collective: MPI_Allgather of bytes. */
static int boot_allgather(void *ctx, const void *mine, size_t len, void *all) {
    (void)ctx;
    if (len > INT32_MAX) return 1;
    return PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, ob.boot) == MPI_SUCCESS ? 0 : 1;
}

static int delete_comm(MPI_Comm comm, int keyval, void *attr, void *extra) {
    (void)comm; (void)keyval; (void)extra;
    struct comm *c = attr;
    if (c->group) outboard_group_free(c->group);
    free(c);
    return MPI_SUCCESS;
}

/* Brings Outboard up after PMPI_Init; on failure the job runs on PMPI alone
 * (decided together: every rank learns whether all came up). */
static void start_outboard(void) {
    read_config();
    PMPI_Comm_rank(MPI_COMM_WORLD, &ob.rank);
    int any_on = 0;
    for (int k = 0; k < C_COUNT; k++) any_on |= ob.how[k] != H_OFF;
    if (!any_on) {
        if (ob.verbose && ob.rank == 0) fprintf(stderr, "outboard_mpi: OUTBOARD_MPI=off: everything passes through\n");
        return;
    }
    int size;
    MPI_Comm local;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_dup(MPI_COMM_WORLD, &ob.boot);
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    int local_size = 1;
    PMPI_Comm_size(local, &local_size);
    PMPI_Comm_free(&local);
    int rc = outboard_init_exchange((uint32_t)ob.rank, (uint32_t)size, (uint32_t)local_size, boot_allgather, NULL, &ob.world);
    if (rc != OUTBOARD_OK) {
        fprintf(stderr, "outboard_mpi: rank %d: Outboard did not start (%s: %s); collectives pass through\n", ob.rank,
                outboard_strerror(rc), outboard_last_error());
        ob.world = NULL;
    }
    int ok = ob.world != NULL, all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all_ok) {
        /* Some rank failed: nobody may take anything over. The world that
         * did start is abandoned without the collective finalize. */
        ob.world = NULL;
        return;
    }
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm, &ob.keyval, NULL);
    ob.next_id = 1;
    ob.seed = (unsigned)ob.rank * 2654435761u + 1;
    ob.up = 1;
    if (ob.verbose && ob.rank == 0) {
        fprintf(stderr, "outboard_mpi: Outboard up on %d ranks (%d on this host); barrier %s, bcast %s, reduce %s, allreduce %s; "
                "max bytes bcast %lld, reduce %lld, allreduce %lld\n",
                size, local_size, ob.how[0] == H_OFF ? "off" : ob.how[0] == H_HOST ? "host" : "offload",
                ob.how[1] == H_OFF ? "off" : ob.how[1] == H_HOST ? "host" : "offload",
                ob.how[2] == H_OFF ? "off" : ob.how[2] == H_HOST ? "host" : "offload",
                ob.how[3] == H_OFF ? "off" : ob.how[3] == H_HOST ? "host" : "offload", ob.max_bytes[C_BCAST], ob.max_bytes[C_REDUCE],
                ob.max_bytes[C_ALLREDUCE]);
    }
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) start_outboard();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) start_outboard();
    return rc;
}

struct obreq;
static struct obreq *pending;
static void drive(void);

/* Whether any Outboard request is under way (a read of the list head
 * without the lock: another thread may be adding or finishing one). */
static int some_pending(void) {
    return __atomic_load_n(&pending, __ATOMIC_ACQUIRE) != NULL;
}

int MPI_Finalize(void) {
    if (ob.up) {
        while (some_pending()) drive();
        if (ob.verbose && ob.retries)
            fprintf(stderr, "outboard_mpi: rank %d: %lu group id agreements retried (mapped concurrently by several threads)\n", ob.rank, ob.retries);
        ob.up = 0;
        /* MPI_COMM_WORLD's group, if it was mapped (a program may never
         * call a collective on it; deleting a missing attribute is an
         * error in Open MPI). */
        void *attr = NULL;
        int mapped = 0;
        PMPI_Comm_get_attr(MPI_COMM_WORLD, ob.keyval, &attr, &mapped);
        if (mapped) PMPI_Comm_delete_attr(MPI_COMM_WORLD, ob.keyval);
        int rc = outboard_finalize(ob.world);
        if (rc != OUTBOARD_OK)
            fprintf(stderr, "outboard_mpi: rank %d: leaving Outboard: %s: %s\n", ob.rank, outboard_strerror(rc), outboard_last_error());
        ob.world = NULL;
        PMPI_Comm_free(&ob.boot);
    }
    return PMPI_Finalize();
}

/* The communicator's mapping, made on first use (collective over `comm`:
 * called only from collectives, which every member calls in the same
 * order). */
static struct comm *mapping(MPI_Comm comm) {
    struct comm *c = NULL;
    int found = 0;
    PMPI_Comm_get_attr(comm, ob.keyval, &c, &found);
    if (found) return c;
    c = calloc(1, sizeof *c);
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        c->broken = W_INTER; /* the same at every member */
        PMPI_Comm_set_attr(comm, ob.keyval, c);
        return c;
    }
    int n, me;
    PMPI_Comm_size(comm, &n);
    PMPI_Comm_rank(comm, &me);
    /* Members as world ranks. */
    MPI_Group g, wg;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n);
    uint32_t *ranks = malloc(sizeof(uint32_t) * n);
    for (int i = 0; i < n; i++) in[i] = i;
    PMPI_Group_translate_ranks(g, n, in, wg, out);
    int translated = 1;
    for (int i = 0; i < n; i++) {
        translated &= out[i] != MPI_UNDEFINED;
        ranks[i] = (uint32_t)out[i];
    }
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    /* The id: the largest next id of any member, so unused at each. Under
     * MPI_THREAD_MULTIPLE, threads may map different communicators at
     * once, and no lock may be held across the agreement (two ranks taking
     * two such locks in opposite orders would deadlock): each rank lets one
     * mapping at a time own its next id (id_busy); a round in which some
     * member's mapping did not own it agrees on nothing, and is retried
     * after a random pause (as MPICH does for context ids). A failure
     * anywhere is carried in the third slot. */
    unsigned long long agreed[3];
    int ok = 0;
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&ob.lock);
        int owner = !ob.id_busy;
        if (owner) ob.id_busy = 1;
        long pause_us = (long)(rand_r(&ob.seed) % 100 + 1) * (attempt < 10 ? attempt + 1 : 10);
        unsigned long long mine[3] = {owner ? ob.next_id : 0, !owner, translated ? 0 : 1};
        pthread_mutex_unlock(&ob.lock);
        PMPI_Allreduce(mine, agreed, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
        int agreed_now = agreed[1] == 0;
        pthread_mutex_lock(&ob.lock);
        if (owner) {
            if (agreed_now && agreed[2] == 0 && agreed[0] < OUTBOARD_GROUP_ID_LIMIT) ob.next_id = agreed[0] + 1;
            ob.id_busy = 0;
        }
        pthread_mutex_unlock(&ob.lock);
        if (agreed_now || agreed[2] != 0) {
            ok = agreed_now && agreed[2] == 0 && agreed[0] < OUTBOARD_GROUP_ID_LIMIT;
            break;
        }
        __atomic_add_fetch(&ob.retries, 1, __ATOMIC_RELAXED);
        struct timespec pause = {0, pause_us * 1000L};
        nanosleep(&pause, NULL);
    }
    int made = ok && outboard_group_create(ob.world, agreed[0], (uint32_t)n, ranks, &c->group) == OUTBOARD_OK;
    if (ok && !made && ob.verbose)
        fprintf(stderr, "outboard_mpi: rank %d: group set-up failed: %s\n", ob.rank, outboard_last_error());
    /* Every member must agree to use the group. */
    int all = 0;
    PMPI_Allreduce(&made, &all, 1, MPI_INT, MPI_LAND, comm);
    if (!all) {
        if (c->group) outboard_group_free(c->group);
        c->group = NULL;
        c->broken = W_NOGROUP;
    }
    free(in); free(out); free(ranks);
    PMPI_Comm_set_attr(comm, ob.keyval, c);
    (void)me;
    return c;
}

/* The group to run collective `k` on, in the configured mode, or NULL
 * (with the reason printed in verbose mode). */
static outboard_group *take_as(MPI_Comm comm, enum coll k, int nb, enum why w, struct comm **cp) {
    if (!ob.up || comm == MPI_COMM_NULL) return NULL;
    if (ob.how[k] == H_OFF) w = W_OFF;
    struct comm *c = w == W_TAKEN || ob.verbose ? mapping(comm) : NULL;
    if (cp) *cp = c;
    if (w == W_TAKEN && (!c || !c->group)) w = c ? c->broken : W_NOGROUP;
    say(comm, c, k, nb, w);
    if (w != W_TAKEN) return NULL;
    outboard_group_set_mode(c->group, ob.how[k] == H_HOST ? OUTBOARD_MODE_HOST_BASED : OUTBOARD_MODE_OFFLOADED);
    return c->group;
}

#define take(comm, k, w, cp) take_as(comm, k, 0, w, cp)
#define itake(comm, k, w, cp) take_as(comm, k, 1, w, cp)

/* Outboard's types for an MPI datatype and operation. */
static enum why reduction(MPI_Datatype dt, MPI_Op op, int *obdt, int *obop) {
    int d = 0, bitwise_ok = 1, unsigned32 = 0;
    if (dt == MPI_INT || dt == MPI_INT32_T) d = sizeof(int) == 4 || dt == MPI_INT32_T ? OUTBOARD_INT32 : 0;
    else if (dt == MPI_LONG) d = sizeof(long) == 8 ? OUTBOARD_INT64 : OUTBOARD_INT32;
    else if (dt == MPI_LONG_LONG || dt == MPI_LONG_LONG_INT || dt == MPI_INT64_T) d = OUTBOARD_INT64;
    else if (dt == MPI_UNSIGNED_LONG) d = sizeof(unsigned long) == 8 ? OUTBOARD_UINT64 : 0;
    else if (dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT64_T) d = OUTBOARD_UINT64;
    else if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) { d = OUTBOARD_INT32; unsigned32 = 1; }
    else if (dt == MPI_FLOAT) { d = OUTBOARD_FLOAT; bitwise_ok = 0; }
    else if (dt == MPI_DOUBLE) { d = OUTBOARD_DOUBLE; bitwise_ok = 0; }
    if (!d) return W_DATATYPE;
    int o = 0;
    if (op == MPI_SUM) o = OUTBOARD_SUM;
    else if (op == MPI_MIN) o = unsigned32 ? 0 : OUTBOARD_MIN; /* no unsigned 32-bit order in the engine */
    else if (op == MPI_MAX) o = unsigned32 ? 0 : OUTBOARD_MAX;
    else if (op == MPI_BAND) o = bitwise_ok ? OUTBOARD_BAND : 0;
    else if (op == MPI_BOR) o = bitwise_ok ? OUTBOARD_BOR : 0;
    /* Products and the bitwise and logical ops give the same bits on
     * unsigned 32-bit values as on signed ones (wrapping, non-zero). */
    else if (op == MPI_PROD) o = OUTBOARD_PROD;
    else if (op == MPI_BXOR) o = bitwise_ok ? OUTBOARD_BXOR : 0;
    else if (op == MPI_LAND) o = bitwise_ok ? OUTBOARD_LAND : 0;
    else if (op == MPI_LOR) o = bitwise_ok ? OUTBOARD_LOR : 0;
    else if (op == MPI_LXOR) o = bitwise_ok ? OUTBOARD_LXOR : 0;
    if (!o) return W_OP;
    *obdt = d;
    *obop = o;
    return W_TAKEN;
}

/* Bytes of `count` elements of a predefined (hence contiguous) datatype;
 * -1 for a derived one. */
static long long contiguous_bytes(int count, MPI_Datatype dt) {
    int ni, na, nd, combiner;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) != MPI_SUCCESS || combiner != MPI_COMBINER_NAMED) return -1;
    int sz;
    if (PMPI_Type_size(dt, &sz) != MPI_SUCCESS) return -1;
    return (long long)count * sz;
}

/* An Outboard failure as an MPI error, through the communicator's error
 * handler. */
static int failed(MPI_Comm comm, enum coll k, int rc) {
    fprintf(stderr, "outboard_mpi: rank %d: %s failed: %s: %s\n", ob.rank, coll_name[k], outboard_strerror(rc), outboard_last_error());
    int code = MPI_ERR_OTHER;
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int MPI_Barrier(MPI_Comm comm) {
    outboard_group *g = take(comm, C_BARRIER, W_TAKEN, NULL);
    if (!g) return PMPI_Barrier(comm);
    int rc = outboard_barrier(g);
    return rc == OUTBOARD_OK ? MPI_SUCCESS : failed(comm, C_BARRIER, rc);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    enum why w = bytes < 0 ? W_DATATYPE : bytes > ob.max_bytes[C_BCAST] ? W_SIZE : W_TAKEN;
    outboard_group *g = ob.up ? take(comm, C_BCAST, w, NULL) : NULL;
    if (!g) return PMPI_Bcast(buf, count, dt, root, comm);
    int rc = outboard_bcast(g, buf, (size_t)bytes, (uint32_t)root);
    return rc == OUTBOARD_OK ? MPI_SUCCESS : failed(comm, C_BCAST, rc);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
    int obdt = 0, obop = 0;
    enum why w = ob.up ? reduction(dt, op, &obdt, &obop) : W_OFF;
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    if (w == W_TAKEN && bytes > ob.max_bytes[C_REDUCE]) w = W_SIZE;
    outboard_group *g = ob.up ? take(comm, C_REDUCE, w, NULL) : NULL;
    if (!g) return PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm);
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    int rc = outboard_reduce(g, src, recvbuf, (size_t)count, obdt, obop, (uint32_t)root);
    return rc == OUTBOARD_OK ? MPI_SUCCESS : failed(comm, C_REDUCE, rc);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    int obdt = 0, obop = 0;
    enum why w = ob.up ? reduction(dt, op, &obdt, &obop) : W_OFF;
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    if (w == W_TAKEN && bytes > ob.max_bytes[C_ALLREDUCE]) w = W_SIZE;
    outboard_group *g = ob.up ? take(comm, C_ALLREDUCE, w, NULL) : NULL;
    if (!g) return PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm);
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    int rc = outboard_allreduce(g, src, recvbuf, (size_t)count, obdt, obop);
    return rc == OUTBOARD_OK ? MPI_SUCCESS : failed(comm, C_ALLREDUCE, rc);
}

/* ---- Non-blocking collectives and requests ----
 *
 * A taken-over MPI_Ibarrier / Ibcast / Ireduce / Iallreduce is an Outboard
 * request behind an MPI generalized request (MPI_Grequest_start), so its
 * handle is a real MPI_Request: arrays may mix it with MPI's own requests,
 * and PMPI's wait and test functions report it. What MPI cannot do is
 * drive it, so every wait and test function below first drives all
 * Outboard requests under way (drive), completing the generalized request
 * of each that finished, then hands the array to PMPI. */

struct obreq {
    MPI_Request handle;
    outboard_request *r;    /* NULL once finished */
    int error;              /* MPI error code once finished */
    struct obreq *next;
};
/* pending: under ob.lock */

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
        int done = 0;
        int rc = outboard_test(&q->r, &done, NULL);
        if (!done && rc == OUTBOARD_OK) {
            pp = &q->next;
            continue;
        }
        if (rc != OUTBOARD_OK) {
            fprintf(stderr, "outboard_mpi: rank %d: a non-blocking collective failed: %s: %s\n", ob.rank, outboard_strerror(rc), outboard_last_error());
            q->error = MPI_ERR_OTHER;
        }
        *pp = q->next;
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

/* Whether any of the n requests is an Outboard one still under way. */
static int any_pending(int n, const MPI_Request *reqs) {
    if (!some_pending()) return 0;
    for (int i = 0; i < n; i++)
        if (find(reqs[i])) return 1;
    return 0;
}

/* Lets MPI progress its own requests while Outboard ones are awaited. */
static void poke_mpi(void) {
    int flag;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

/* Wraps a started Outboard request in a generalized request. */
static int wrap(MPI_Comm comm, enum coll k, int rc, outboard_request *r, MPI_Request *req) {
    if (rc != OUTBOARD_OK) return failed(comm, k, rc);
    struct obreq *q = calloc(1, sizeof *q);
    q->r = r;
    q->error = MPI_SUCCESS;
    PMPI_Grequest_start(greq_query, greq_free, greq_cancel, q, req);
    q->handle = *req;
    pthread_mutex_lock(&ob.lock);
    q->next = pending;
    pending = q;
    pthread_mutex_unlock(&ob.lock);
    return MPI_SUCCESS;
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    outboard_group *g = itake(comm, C_BARRIER, W_TAKEN, NULL);
    if (!g) return PMPI_Ibarrier(comm, req);
    outboard_request *r = NULL;
    int rc = outboard_barrier_start(g, &r);
    return wrap(comm, C_BARRIER, rc, r, req);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, MPI_Request *req) {
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    enum why w = bytes < 0 ? W_DATATYPE : bytes > ob.max_bytes[C_BCAST] ? W_SIZE : W_TAKEN;
    outboard_group *g = ob.up ? itake(comm, C_BCAST, w, NULL) : NULL;
    if (!g) return PMPI_Ibcast(buf, count, dt, root, comm, req);
    outboard_request *r = NULL;
    int rc = outboard_bcast_start(g, buf, (size_t)bytes, (uint32_t)root, &r);
    return wrap(comm, C_BCAST, rc, r, req);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm, MPI_Request *req) {
    int obdt = 0, obop = 0;
    enum why w = ob.up ? reduction(dt, op, &obdt, &obop) : W_OFF;
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    if (w == W_TAKEN && bytes > ob.max_bytes[C_REDUCE]) w = W_SIZE;
    outboard_group *g = ob.up ? itake(comm, C_REDUCE, w, NULL) : NULL;
    if (!g) return PMPI_Ireduce(sendbuf, recvbuf, count, dt, op, root, comm, req);
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    outboard_request *r = NULL;
    int rc = outboard_reduce_start(g, src, recvbuf, (size_t)count, obdt, obop, (uint32_t)root, &r);
    return wrap(comm, C_REDUCE, rc, r, req);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    int obdt = 0, obop = 0;
    enum why w = ob.up ? reduction(dt, op, &obdt, &obop) : W_OFF;
    long long bytes = ob.up ? contiguous_bytes(count, dt) : -1;
    if (w == W_TAKEN && bytes > ob.max_bytes[C_ALLREDUCE]) w = W_SIZE;
    outboard_group *g = ob.up ? itake(comm, C_ALLREDUCE, w, NULL) : NULL;
    if (!g) return PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, req);
    const void *src = sendbuf == MPI_IN_PLACE ? NULL : sendbuf;
    outboard_request *r = NULL;
    int rc = outboard_allreduce_start(g, src, recvbuf, (size_t)count, obdt, obop, &r);
    return wrap(comm, C_ALLREDUCE, rc, r, req);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    while (any_pending(1, req)) {
        drive();
        poke_mpi();
    }
    return PMPI_Wait(req, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    while (any_pending(n, reqs)) {
        drive();
        poke_mpi();
    }
    return PMPI_Waitall(n, reqs, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st) {
    if (!any_pending(n, reqs)) return PMPI_Waitany(n, reqs, idx, st);
    for (;;) {
        drive();
        int flag = 0;
        int rc = PMPI_Testany(n, reqs, idx, &flag, st);
        if (rc != MPI_SUCCESS || flag) return rc;
    }
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[]) {
    if (!any_pending(n, reqs)) return PMPI_Waitsome(n, reqs, outcount, idx, sts);
    for (;;) {
        drive();
        int rc = PMPI_Testsome(n, reqs, outcount, idx, sts);
        if (rc != MPI_SUCCESS || *outcount != 0) return rc;
    }
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    if (some_pending()) drive();
    return PMPI_Test(req, flag, st);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    if (some_pending()) drive();
    return PMPI_Testall(n, reqs, flag, sts);
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st) {
    if (some_pending()) drive();
    return PMPI_Testany(n, reqs, idx, flag, st);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int idx[], MPI_Status sts[]) {
    if (some_pending()) drive();
    return PMPI_Testsome(n, reqs, outcount, idx, sts);
}

int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *st) {
    if (some_pending()) drive();
    return PMPI_Request_get_status(req, flag, st);
}

/* Freeing a collective's request is erroneous in MPI; an Outboard one is
 * finished first (its buffers are in use until then), then freed. */
int MPI_Request_free(MPI_Request *req) {
    while (any_pending(1, req)) {
        drive();
        poke_mpi();
    }
    return PMPI_Request_free(req);
}
