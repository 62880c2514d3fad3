/* liboutboard_mpi's shared state and the functions its parts call in each
 * other. Not installed: the library's interface is MPI's own. */
#ifndef OUTBOARD_MPI_INTERNAL_H
#define OUTBOARD_MPI_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>

#include "outboard.h"

enum coll {
    C_BARRIER, C_BCAST, C_REDUCE, C_ALLREDUCE,
    /* movement.c; one OUTBOARD_MPI_* variable per family (allgather,
     * reduce-scatter, scan) */
    C_ALLGATHER, C_ALLGATHERV, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, C_ALLTOALL, C_REDUCE_SCATTER_BLOCK, C_REDUCE_SCATTER, C_SCAN,
    C_EXSCAN,
    C_COUNT
};
/* How a collective runs: passed through, offloaded, host-based, or (for
 * MPI_Bcast and MPI_Reduce) by application bypass, offloaded beyond the
 * eager limit and in the non-blocking forms. */
enum how { H_OFF, H_OFFLOAD, H_HOST, H_BYPASS };

/* Why a call was not taken over (verbose mode prints each once per
 * communicator and collective). */
enum why { W_TAKEN, W_OFF, W_DATATYPE, W_OP, W_SIZE, W_SIZE_NODES, W_INTER, W_NOGROUP, W_UNMAPPED, W_MODULE, W_COUNT };

/* Blocking and non-blocking collectives of one communicator run on two
 * Outboard groups, so each kind keeps its own order, as in Open MPI and
 * MPICH (whose non-blocking collectives are matched apart from the
 * blocking ones). */
enum lane { L_BLOCKING, L_NONBLOCKING, L_COUNT };

/* A communicator's collective choices: the C ABI's group options, set from
 * OUTBOARD_MPI_<NAME> for every communicator and from the MPI_Info key
 * outboard_<name> for one (MPI_Comm_set_info, MPI_Comm_dup_with_info). */
enum opt { O_BARRIER_ALGORITHM, O_BARRIER_PROTOCOL, O_BCAST_MODE, O_BCAST_TREE, O_REDUCE_DEGREE, O_REDUCE_ALGORITHM, O_ALLREDUCE_ALGORITHM, O_COUNT };

extern struct ob_state {
    int up;                 /* Outboard is running */
    int verbose;
    int rank;               /* in MPI_COMM_WORLD */
    enum how how[C_COUNT];
    long long max_bytes[C_COUNT]; /* per collective; barrier's unused */
    long long max_bytes_between_nodes[C_COUNT]; /* the same, on communicators spanning engines */
    char opt[O_COUNT][64];  /* the choices' variables, canonical */
    int opt_set[O_COUNT];   /* the variable chooses other than the default */
    outboard_world *world;
    MPI_Comm boot;          /* private duplicate of MPI_COMM_WORLD for the bootstrap */
    pthread_mutex_t lock;   /* guards the group ids and the pending list */
} ob;

/* What a communicator maps to. */
struct comm {
    outboard_group *group[L_COUNT]; /* NULL: every collective passes through */
    uint32_t id[L_COUNT];
    enum why broken;        /* why group is NULL */
    uint32_t nodes;         /* engines (machines) its ranks use; 0 or 1: one */
    unsigned said[C_COUNT]; /* bit per `enum why` already printed (+16: non-blocking) */
    int chosen;             /* a choice was made (environment or MPI_Info): verbose lines say which */
    int pending;            /* non-blocking collectives under way (under ob.lock) */
    int freed;              /* the communicator was freed while some were (under ob.lock) */
};

/* comms.c */
void ob_comms_start(void);
void ob_comms_stop(void);
struct comm *ob_lookup(MPI_Comm comm);
void ob_release(struct comm *c);

/* types.c: a datatype's layout and its meaning for reductions. */
struct layout {
    long long size;         /* bytes of data in one element (the signature's) */
    int contiguous;         /* count elements are count x size bytes at buf, no holes */
    int base;               /* OUTBOARD_* type for reductions, 0: not combined */
    int base_unsigned32;    /* base is an unsigned 32-bit type (no order in the engine) */
    int base_float;         /* base is a floating-point type (no bitwise ops) */
};
int ob_layout(MPI_Datatype dt, struct layout *l);
enum why ob_reduction(const struct layout *l, MPI_Op op, int *obop);
int ob_pack(const void *buf, int count, MPI_Datatype dt, void *out, long long bytes, MPI_Comm comm);
int ob_unpack(const void *in, long long bytes, void *buf, int count, MPI_Datatype dt, MPI_Comm comm);
void ob_types_start(void);
void ob_types_stop(void);

/* colls.c: what every collective's wrapper does first and last. */
outboard_group *ob_take(MPI_Comm comm, enum coll k, int nb, enum why w, long long bytes, struct comm **cp);
int ob_bad_root(outboard_group *g, int root, MPI_Comm comm);
uint32_t ob_my_rank(outboard_group *g);
int ob_done(MPI_Comm comm, enum coll k, int rc);

/* requests.c */
struct staging;
int ob_wrap(MPI_Comm comm, struct comm *c, enum coll k, int rc, outboard_request *r, struct staging *s, MPI_Request *req);
struct staging *ob_staging(void *copy, void *buf, int count, MPI_Datatype dt, long long bytes, MPI_Comm comm, int unpack);
void ob_drain(void);

/* modules.c: NICVM modules as operators (outboard_mpi.h). */
int ob_module_reduction(MPI_Comm comm, const struct layout *l, MPI_Op op, int *obop);
void ob_modules_stop(void);

/* outboard_mpi.c */
void ob_say(MPI_Comm comm, struct comm *c, enum coll k, int nb, enum why w);
int ob_failed(MPI_Comm comm, const char *call, int rc);
int ob_error_code(int rc, const char *what);
int ob_fail_msg(MPI_Comm comm, int class, const char *call, const char *why);
extern const char *const ob_coll_name[C_COUNT];
extern const char *const ob_opt_name[O_COUNT];
extern const char *const ob_opt_env[O_COUNT];
extern const char *const ob_icoll_name[C_COUNT];

#endif
