/* liboutboard_mpi: runs an unmodified MPI program's collectives on Outboard
 * through the MPI profiling interface (PMPI). Built once per MPI (Open MPI,
 * MPICH) against that MPI's mpi.h (`outboard mpi-lib`), linked against
 * liboutboard_capi, and used with LD_PRELOAD:
 *
 *   mpirun.openmpi -x LD_PRELOAD=/path/liboutboard_mpi_openmpi.so ./app
 *   mpiexec.mpich -env LD_PRELOAD /path/liboutboard_mpi_mpich.so ./app
 *
 * This file: bringing Outboard up and down with MPI, the configuration,
 * the verbose report and errors. The parts: types.c (what a datatype is to
 * Outboard), comms.c (communicators as groups), colls.c (the collectives),
 * requests.c (non-blocking requests and MPI's wait and test functions),
 * modules.c (NICVM modules as reduction operators, outboard_mpi.h),
 * fortran.c (the Fortran entry points).
 *
 * movement.c (allgather, gather, scatter, alltoall, reduce-scatter and the
 * scans).
 *
 * MPI_Init / MPI_Init_thread call PMPI first, then bring Outboard up from
 * the MPI job itself (engine addresses and rank 0's job key exchanged with
 * PMPI_Allgather on a private duplicate of MPI_COMM_WORLD). MPI_Barrier,
 * MPI_Bcast, MPI_Reduce and MPI_Allreduce on intra-communicators, and their
 * non-blocking forms, are taken over when the datatype and operation are
 * ones the engine combines and the message is within that collective's
 * size threshold; everything else goes to PMPI unchanged.
 *
 * Environment (the same at every rank; checked at MPI_Init, where a bad
 * value stops the job with a sentence naming the variable):
 *   OUTBOARD_MPI=offload|host|off        all collectives (default offload)
 *   OUTBOARD_MPI_BARRIER / _BCAST / _REDUCE / _ALLREDUCE / _ALLGATHER / _GATHER / _SCATTER
 *     / _ALLTOALL / _REDUCE_SCATTER / _SCAN = offload|host|off
 *   OUTBOARD_MPI_MAX_BYTES=SIZE          larger messages pass through (default 1M)
 *   OUTBOARD_MPI_BCAST_MAX_BYTES / _REDUCE_MAX_BYTES / _ALLREDUCE_MAX_BYTES / _ALLGATHER_MAX_BYTES
 *     / ... / _SCAN_MAX_BYTES=SIZE
 *                                        the same per collective, overriding the above
 *   OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES (128K) / _REDUCE_... (16K) / _ALLREDUCE_... (16K)
 *                                        the same on communicators spanning nodes (engines),
 *                                        where the smaller of the two applies
 *   OUTBOARD_MPI_BARRIER_ALGORITHM=dissemination|pairwise-exchange|gather-broadcast[:DEGREE]
 *   OUTBOARD_MPI_BARRIER_PROTOCOL=point-to-point|nic-collective
 *   OUTBOARD_MPI_BCAST_MODE=collective|offloaded|host-based|nic-assisted[:CHUNK]
 *   OUTBOARD_MPI_BCAST_TREE=binomial|kary:DEGREE|chain|postal:LAMBDA
 *   OUTBOARD_MPI_REDUCE_DEGREE=N (0: binomial)
 *   OUTBOARD_MPI_REDUCE_ALGORITHM=tree|block-trees
 *   OUTBOARD_MPI_ALLREDUCE_ALGORITHM=auto|block-trees|tree|recursive-doubling
 *                                        the collective choices of every communicator;
 *                                        per communicator, the MPI_Info keys
 *                                        outboard_barrier_algorithm, ... on
 *                                        MPI_Comm_set_info (comms.c)
 *   OUTBOARD_MPI_VERBOSE=on|off          print, per communicator and collective,
 *                                        what was taken over and why not, and
 *                                        what a communicator's collectives ran
 *                                        as when it is freed
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(OPEN_MPI) && OPEN_MPI
#define BUILT_FOR "Open MPI"
#define BUILT_FILE "liboutboard_mpi_openmpi.so"
#define OTHER_FILE "liboutboard_mpi_mpich.so"
#elif defined(MPICH_VERSION)
#define BUILT_FOR "MPICH"
#define BUILT_FILE "liboutboard_mpi_mpich.so"
#define OTHER_FILE "liboutboard_mpi_openmpi.so"
#else
#error "liboutboard_mpi is built against Open MPI's or MPICH's mpi.h"
#endif

struct ob_state ob = {.lock = PTHREAD_MUTEX_INITIALIZER};

const char *const ob_coll_name[C_COUNT] = {"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv",
                                           "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Alltoall",
                                           "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Scan", "MPI_Exscan"};
const char *const ob_icoll_name[C_COUNT] = {"MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce", "MPI_Iallgather", "MPI_Iallgatherv",
                                            "MPI_Igather", "MPI_Igatherv", "MPI_Iscatter", "MPI_Iscatterv", "MPI_Ialltoall",
                                            "MPI_Ireduce_scatter_block", "MPI_Ireduce_scatter", "MPI_Iscan", "MPI_Iexscan"};
static const char *const coll_env[C_COUNT] = {"OUTBOARD_MPI_BARRIER", "OUTBOARD_MPI_BCAST", "OUTBOARD_MPI_REDUCE", "OUTBOARD_MPI_ALLREDUCE",
                                              "OUTBOARD_MPI_ALLGATHER", "OUTBOARD_MPI_ALLGATHER", "OUTBOARD_MPI_GATHER", "OUTBOARD_MPI_GATHER",
                                              "OUTBOARD_MPI_SCATTER", "OUTBOARD_MPI_SCATTER", "OUTBOARD_MPI_ALLTOALL", "OUTBOARD_MPI_REDUCE_SCATTER",
                                              "OUTBOARD_MPI_REDUCE_SCATTER", "OUTBOARD_MPI_SCAN", "OUTBOARD_MPI_SCAN"};
static const char *const max_env[C_COUNT] = {NULL, "OUTBOARD_MPI_BCAST_MAX_BYTES", "OUTBOARD_MPI_REDUCE_MAX_BYTES", "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES",
                                             "OUTBOARD_MPI_ALLGATHER_MAX_BYTES", "OUTBOARD_MPI_ALLGATHER_MAX_BYTES", "OUTBOARD_MPI_GATHER_MAX_BYTES",
                                             "OUTBOARD_MPI_GATHER_MAX_BYTES", "OUTBOARD_MPI_SCATTER_MAX_BYTES", "OUTBOARD_MPI_SCATTER_MAX_BYTES",
                                             "OUTBOARD_MPI_ALLTOALL_MAX_BYTES", "OUTBOARD_MPI_REDUCE_SCATTER_MAX_BYTES",
                                             "OUTBOARD_MPI_REDUCE_SCATTER_MAX_BYTES", "OUTBOARD_MPI_SCAN_MAX_BYTES", "OUTBOARD_MPI_SCAN_MAX_BYTES"};
/* NULL: the collective has no threshold of its own between nodes. */
static const char *const between_env[C_COUNT] = {NULL, "OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES", "OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES",
                                                 "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES"};
static const char *const how_name[] = {"off", "offload", "host", "bypass"};
const char *const ob_opt_name[O_COUNT] = {"barrier_algorithm", "barrier_protocol", "bcast_mode", "bcast_tree", "reduce_degree", "reduce_algorithm", "allreduce_algorithm"};
const char *const ob_opt_env[O_COUNT] = {"OUTBOARD_MPI_BARRIER_ALGORITHM", "OUTBOARD_MPI_BARRIER_PROTOCOL", "OUTBOARD_MPI_BCAST_MODE",
                                         "OUTBOARD_MPI_BCAST_TREE", "OUTBOARD_MPI_REDUCE_DEGREE", "OUTBOARD_MPI_REDUCE_ALGORITHM",
                                         "OUTBOARD_MPI_ALLREDUCE_ALGORITHM"};
/* The defaults' canonical values: a variable that says one chooses nothing
 * (so the communicator keeps the node's shared-memory path). */
static const char *const opt_default[O_COUNT] = {"dissemination", "point-to-point", "collective", "binomial", "0", "tree", "auto"};

static const char *const why_text[W_COUNT] = {
    "taken over", "pass-through by configuration", "datatype not offloadable",
    "operation not offloadable for this datatype", "message beyond the size threshold",
    "message beyond the size threshold between nodes",
    "inter-communicator", "no Outboard group (set-up failed at some rank)",
    "communicator not mapped (made by a call the library does not wrap, such as MPI_Comm_idup)",
    "the operation's module is not loaded on this communicator's engines (MPI runs it on the hosts)"};

void ob_say(MPI_Comm comm, struct comm *c, enum coll k, int nb, enum why w) {
    unsigned bit = 1u << (w + (nb ? 16 : 0));
    if (!ob.verbose || (c && (c->said[k] & bit)))
        return;
    if (c)
        c->said[k] |= bit;
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Comm_get_name(comm, name, &len);
    const char *mode = ob.how[k] == H_HOST ? " (host-based)" : ob.how[k] == H_OFFLOAD || (ob.how[k] == H_BYPASS && nb) ? " (offloaded)"
                     : ob.how[k] == H_BYPASS ? " (application bypass up to 16384 bytes, offloaded beyond)" : "";
    char limit[160] = "";
    if (w == W_SIZE)
        snprintf(limit, sizeof limit, " (%lld bytes, %s or OUTBOARD_MPI_MAX_BYTES)", ob.max_bytes[k], max_env[k] ? max_env[k] : "");
    if (w == W_SIZE_NODES)
        snprintf(limit, sizeof limit, " (%lld bytes on a communicator spanning %u nodes, %s)", ob.max_bytes_between_nodes[k], c ? c->nodes : 0,
                 between_env[k] ? between_env[k] : "");
    char chosen[400] = "";
    if (w == W_TAKEN && c && c->chosen && c->group[nb]) {
        char d[380];
        if (outboard_group_describe(c->group[nb], d, sizeof d) == OUTBOARD_OK) snprintf(chosen, sizeof chosen, " [%s]", d);
    }
    fprintf(stderr, "outboard_mpi: rank %d: %s on %s: %s%s%s%s\n", ob.rank, nb ? ob_icoll_name[k] : ob_coll_name[k], len ? name : "a communicator",
            why_text[w], w == W_TAKEN ? mode : "", limit, chosen);
}

/* ---- Errors ---- */

/* MPI's error class for an Outboard error code. */
static int error_class(int rc) {
    switch (rc) {
    case OUTBOARD_ERR_PEER:
#ifdef MPIX_ERR_PROC_FAILED
        return MPIX_ERR_PROC_FAILED;
#else
        return MPI_ERR_OTHER;
#endif
    case OUTBOARD_ERR_PROC_FAILED_PENDING:
#ifdef MPIX_ERR_PROC_FAILED_PENDING
        return MPIX_ERR_PROC_FAILED_PENDING;
#else
        return MPI_ERR_OTHER;
#endif
    case OUTBOARD_ERR_TRUNCATED: return MPI_ERR_TRUNCATE;
    case OUTBOARD_ERR_ARG: return MPI_ERR_ARG;
    case OUTBOARD_ERR_MEMORY: return MPI_ERR_NO_MEM;
    case OUTBOARD_ERR_PANIC: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;
    }
}

/* Error codes made for messages, so that MPI_Error_string tells what
 * happened (which rank failed, which calls disagreed) and MPI_Error_class
 * still gives the class. Made once per distinct message, up to a bound. */
#define MAX_CODES 64
static struct { int class; int code; char msg[MPI_MAX_ERROR_STRING]; } codes[MAX_CODES];
static int ncodes;
static pthread_mutex_t codes_lock = PTHREAD_MUTEX_INITIALIZER;

/* What went wrong: the C ABI's message, or the code's description if it
 * left none. */
static const char *what_failed(int rc) {
    const char *last = outboard_last_error();
    return last && *last ? last : outboard_strerror(rc);
}

/* An error code of `class` whose string says that `what` failed at this
 * rank and why. */
static int code_for(int class, const char *what, const char *why) {
    char msg[MPI_MAX_ERROR_STRING];
    snprintf(msg, sizeof msg, "%s failed at rank %d: %s", what, ob.rank, why);
    pthread_mutex_lock(&codes_lock);
    int code = class;
    for (int i = 0; i < ncodes; i++)
        if (codes[i].class == class && !strcmp(codes[i].msg, msg)) {
            code = codes[i].code;
            goto out;
        }
    if (ncodes < MAX_CODES && PMPI_Add_error_code(class, &code) == MPI_SUCCESS) {
        PMPI_Add_error_string(code, msg);
        codes[ncodes].class = class;
        codes[ncodes].code = code;
        snprintf(codes[ncodes].msg, sizeof codes[ncodes].msg, "%s", msg);
        ncodes++;
    } else {
        code = class;
    }
out:
    pthread_mutex_unlock(&codes_lock);
    return code;
}

int ob_error_code(int rc, const char *what) {
    return code_for(error_class(rc), what, what_failed(rc));
}

/* A failure the library found itself (not the C ABI): said on stderr and
 * given to `comm`'s error handler, as ob_failed does. */
int ob_fail_msg(MPI_Comm comm, int class, const char *call, const char *why) {
    fprintf(stderr, "outboard_mpi: rank %d: %s failed: %s\n", ob.rank, call, why);
    int code = code_for(class, call, why);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* The message of a code this library made. MPICH 4.0's MPI_Error_string
 * does not find the string MPI_Add_error_string gave a code added to a
 * predefined class (it decodes the code as one of its own), so the library
 * answers for its codes itself. */
int MPI_Error_string(int code, char *string, int *len) {
    pthread_mutex_lock(&codes_lock);
    for (int i = 0; i < ncodes; i++)
        if (codes[i].code == code && code != codes[i].class) {
            *len = snprintf(string, MPI_MAX_ERROR_STRING, "%s", codes[i].msg);
            if (*len >= MPI_MAX_ERROR_STRING) *len = MPI_MAX_ERROR_STRING - 1;
            pthread_mutex_unlock(&codes_lock);
            return MPI_SUCCESS;
        }
    pthread_mutex_unlock(&codes_lock);
    return PMPI_Error_string(code, string, len);
}

/* An Outboard failure as an MPI error, through the communicator's error
 * handler. */
int ob_failed(MPI_Comm comm, const char *call, int rc) {
    fprintf(stderr, "outboard_mpi: rank %d: %s failed: %s\n", ob.rank, call, what_failed(rc));
    int code = ob_error_code(rc, call);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* ---- Configuration ---- */

/* A variable's value, validated and canonical (the C ABI parses every
 * OUTBOARD_* variable, so the rules are the runtime's); 0 if bad. */
static int setting(const char *name, char *value, size_t cap) {
    if (outboard_setting(name, value, cap) == OUTBOARD_OK) return 1;
    fprintf(stderr, "outboard_mpi: rank %d: %s\n", ob.rank, outboard_last_error());
    return 0;
}

/* Reads the configuration; 0 (after saying why) if a value is bad. */
static int read_config(void) {
    if (outboard_settings_check() != OUTBOARD_OK) {
        fprintf(stderr, "outboard_mpi: rank %d: %s\n", ob.rank, outboard_last_error());
        return 0;
    }
    char v[64];
    for (int k = 0; k < C_COUNT; k++) {
        if (!setting(coll_env[k], v, sizeof v)) return 0;
        ob.how[k] = !strcmp(v, "off") ? H_OFF : !strcmp(v, "host") ? H_HOST : !strcmp(v, "bypass") ? H_BYPASS : H_OFFLOAD;
        if (!max_env[k]) continue;
        if (!setting(max_env[k], v, sizeof v)) return 0;
        ob.max_bytes[k] = strtoll(v, NULL, 10);
        ob.max_bytes_between_nodes[k] = LLONG_MAX;
        if (!between_env[k]) continue;
        if (!setting(between_env[k], v, sizeof v)) return 0;
        ob.max_bytes_between_nodes[k] = strtoll(v, NULL, 10);
    }
    if (!setting("OUTBOARD_MPI_VERBOSE", v, sizeof v)) return 0;
    ob.verbose = !strcmp(v, "1");
    for (int o = 0; o < O_COUNT; o++) {
        if (!setting(ob_opt_env[o], ob.opt[o], sizeof ob.opt[o])) return 0;
        ob.opt_set[o] = strcmp(ob.opt[o], opt_default[o]) != 0;
    }
    return 1;
}

/* ---- Up and down ---- */

/* The bootstrap's collective: MPI_Allgather of bytes. */
static int boot_allgather(void *ctx, const void *mine, size_t len, void *all) {
    (void)ctx;
    if (len > INT32_MAX) return 1;
    return PMPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, ob.boot) == MPI_SUCCESS ? 0 : 1;
}

/* Stops a program that preloaded the library built for the other MPI
 * before anything uses that MPI's handles (they differ in kind). */
static void check_mpi_identity(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS || strstr(version, BUILT_FOR)) return;
    char *nl = strchr(version, '\n');
    if (nl) *nl = 0;
    fprintf(stderr, "outboard_mpi: this is " BUILT_FILE ", built for " BUILT_FOR ", but the program runs under \"%s\": preload " OTHER_FILE
            " instead (`outboard mpi-lib` builds both)\n", version);
    exit(1);
}

/* Brings Outboard up after PMPI_Init; on failure the job runs on PMPI alone
 * (decided together: every rank learns whether all came up). MPI_SUCCESS,
 * or MPI_ERR_ARG for a bad setting. */
static int start_outboard(void) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &ob.rank);
    if (!read_config()) {
        PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_ARG);
        return MPI_ERR_ARG;
    }
    int any_on = 0;
    for (int k = 0; k < C_COUNT; k++) any_on |= ob.how[k] != H_OFF;
    if (!any_on) {
        if (ob.verbose && ob.rank == 0) fprintf(stderr, "outboard_mpi: OUTBOARD_MPI=off: everything passes through\n");
        return MPI_SUCCESS;
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
        return MPI_SUCCESS;
    }
    ob_types_start();
    ob.up = 1;
    ob_comms_start();
    if (ob.verbose && ob.rank == 0)
        fprintf(stderr, "outboard_mpi: Outboard up on %d ranks (%d on this host); barrier %s, bcast %s, reduce %s, allreduce %s; "
                "max bytes bcast %lld, reduce %lld, allreduce %lld (between nodes %lld, %lld, %lld)\n",
                size, local_size, how_name[ob.how[0]], how_name[ob.how[1]], how_name[ob.how[2]], how_name[ob.how[3]],
                ob.max_bytes[C_BCAST], ob.max_bytes[C_REDUCE], ob.max_bytes[C_ALLREDUCE], ob.max_bytes_between_nodes[C_BCAST],
                ob.max_bytes_between_nodes[C_REDUCE], ob.max_bytes_between_nodes[C_ALLREDUCE]);
    if (ob.verbose && ob.rank == 0) {
        char chosen[512] = "";
        size_t at = 0;
        for (int o = 0; o < O_COUNT; o++)
            if (ob.opt_set[o] && at < sizeof chosen)
                at += (size_t)snprintf(chosen + at, sizeof chosen - at, "%s%s=%s", at ? ", " : "", ob_opt_env[o], ob.opt[o]);
        if (at) fprintf(stderr, "outboard_mpi: collective choices of every communicator: %s\n", chosen);
    }
    if (ob.verbose) {
        char engine[512];
        if (outboard_describe(ob.world, engine, sizeof engine) == OUTBOARD_OK)
            fprintf(stderr, "outboard_mpi: rank %d: %s\n", ob.rank, engine);
    }
    return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv) {
    check_mpi_identity();
    int rc = PMPI_Init(argc, argv);
    return rc == MPI_SUCCESS ? start_outboard() : rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    check_mpi_identity();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    return rc == MPI_SUCCESS ? start_outboard() : rc;
}

int MPI_Finalize(void) {
    ob_modules_stop();
    if (ob.up) {
        ob_drain();
        ob_comms_stop();
        ob.up = 0;
        int rc = outboard_finalize(ob.world);
        if (rc != OUTBOARD_OK)
            fprintf(stderr, "outboard_mpi: rank %d: leaving Outboard: %s: %s\n", ob.rank, outboard_strerror(rc), outboard_last_error());
        ob.world = NULL;
        PMPI_Comm_free(&ob.boot);
        ob_types_stop();
    }
    return PMPI_Finalize();
}
