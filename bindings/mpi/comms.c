/* Communicators as Outboard groups. A communicator is mapped when it is
 * made - inside the MPI call that makes it, which all its members call -
 * and never later: a mapping agrees on group ids with PMPI_Allreduce, and
 * agreeing inside a collective the program thinks non-blocking (or in a
 * blocking one some rank reaches only after waiting for another) could
 * block where the program does not. A communicator made by a call this
 * file does not wrap (MPI_Comm_idup, whose communicator may not be used
 * for communication before its request completes) stays unmapped and all
 * its collectives pass through, alike at every member.
 *
 * Group ids are allocated like MPICH's context ids: each rank keeps a mask
 * of the ids its groups use, a mapping ORs the members' masks and takes
 * the lowest ids free at all of them, and a freed communicator's ids
 * return to the mask. Under MPI_THREAD_MULTIPLE threads may map different
 * communicators at once and no lock may be held across the agreement (two
 * ranks taking two such locks in opposite orders would deadlock): each rank
 * lets one mapping at a time own its mask; a round in which some member's
 * mapping did not own it agrees on nothing and is retried after a random
 * pause. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Ids below this many are allocated (two per communicator); id 0 is never
 * used. */
#define ID_SPACE 8192
#define ID_WORDS (ID_SPACE / 64)
#if ID_SPACE > OUTBOARD_GROUP_ID_LIMIT
#error "group id space beyond the C ABI's limit"
#endif

static uint64_t used[ID_WORDS];   /* under ob.lock */
static int mask_busy;             /* a mapping owns `used` (under ob.lock) */
static unsigned seed;             /* for the retry pauses */
static unsigned long retries;     /* agreements retried (printed at the end, verbose) */
static int keyval = MPI_KEYVAL_INVALID;

static void free_groups(struct comm *c) {
    for (int l = 0; l < L_COUNT; l++) {
        if (!c->group[l]) continue;
        outboard_group_free(c->group[l]);
        c->group[l] = NULL;
        used[c->id[l] / 64] &= ~(1ull << (c->id[l] % 64));
    }
}

/* Called under ob.lock when a freed communicator's last non-blocking
 * collective finished (MPI lets a program free a communicator with
 * operations under way; they complete first). */
void ob_release(struct comm *c) {
    free_groups(c);
    free(c);
}

/* Verbose mode: what the communicator's collectives ran as, from the
 * C ABI's record of each lane's group - what was taken, not what was
 * asked for. */
static void say_taken(MPI_Comm comm, struct comm *c) {
    char name[MPI_MAX_OBJECT_NAME] = "";
    int len = 0;
    PMPI_Comm_get_name(comm, name, &len);
    for (int l = 0; l < L_COUNT; l++) {
        char text[4096];
        if (!c->group[l] || outboard_group_taken(c->group[l], text, sizeof text) != OUTBOARD_OK || !text[0]) continue;
        for (char *nl = strchr(text, '\n'); nl; nl = strchr(nl, '\n')) *nl = nl[1] ? ';' : 0;
        fprintf(stderr, "outboard_mpi: rank %d: %s's %s collectives ran as: %s\n", ob.rank, len ? name : "a communicator",
                l == L_BLOCKING ? "blocking" : "non-blocking", text);
    }
}

static int delete_comm(MPI_Comm comm, int kv, void *attr, void *extra) {
    (void)kv; (void)extra;
    struct comm *c = attr;
    if (ob.verbose && c->chosen) say_taken(comm, c);
    pthread_mutex_lock(&ob.lock);
    if (c->pending) c->freed = 1;
    else ob_release(c);
    pthread_mutex_unlock(&ob.lock);
    return MPI_SUCCESS;
}

struct comm *ob_lookup(MPI_Comm comm) {
    struct comm *c = NULL;
    int found = 0;
    if (keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL) return NULL;
    PMPI_Comm_get_attr(comm, keyval, &c, &found);
    return found ? c : NULL;
}

/* The lowest two ids clear in `mask` (0 if fewer are). */
/* Application bypass for the blocking group's broadcasts (`bcast`) and
 * reduces (`reduce`), where every member could turn it on (the engine's
 * interrupts: the first time in a process it names where they go); else
 * none does, saying why once (`what`: the setting that asked). Collective
 * over `comm`. The non-blocking lane keeps its mode: bypass is for
 * blocking calls. */
static int bypass_all(struct comm *c, MPI_Comm comm, int bcast, int reduce, const char *what) {
    int ok = (!bcast || outboard_group_set_bcast_mode(c->group[L_BLOCKING], OUTBOARD_BCAST_BYPASS, 0) == OUTBOARD_OK)
          && (!reduce || outboard_group_set_reduce_mode(c->group[L_BLOCKING], OUTBOARD_REDUCE_BYPASS) == OUTBOARD_OK);
    static int said;
    if (!ok && !said++) fprintf(stderr, "outboard_mpi: rank %d: %s=bypass: %s; they run offloaded\n", ob.rank, what, outboard_last_error());
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    if (!all) {
        if (bcast) outboard_group_set_bcast_mode(c->group[L_BLOCKING], OUTBOARD_BCAST_GROUP_MODE, 0);
        if (reduce) outboard_group_set_reduce_mode(c->group[L_BLOCKING], OUTBOARD_REDUCE_GROUP_MODE);
    }
    c->chosen |= all;
    return all;
}

/* Whether the environment chooses bypass for broadcasts: OUTBOARD_MPI_BCAST
 * or OUTBOARD_MPI_BCAST_MODE. */
static int env_bypass_bcast(void) {
    return ob.how[C_BCAST] == H_BYPASS || (ob.opt_set[O_BCAST_MODE] && !strcmp(ob.opt[O_BCAST_MODE], "bypass"));
}

static int two_free(const uint64_t *mask, uint32_t id[2]) {
    int got = 0;
    for (int w = 0; w < ID_WORDS && got < 2; w++) {
        uint64_t freebits = ~mask[w];
        while (freebits && got < 2) {
            int b = __builtin_ctzll(freebits);
            id[got++] = (uint32_t)(w * 64 + b);
            freebits &= freebits - 1;
        }
    }
    return got == 2;
}

/* Maps `comm` (collective over it: called by every member inside the call
 * that made it). */
static void map(MPI_Comm comm) {
    if (!ob.up || comm == MPI_COMM_NULL || keyval == MPI_KEYVAL_INVALID) return;
    struct comm *c = calloc(1, sizeof *c);
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        c->broken = W_INTER; /* the same at every member */
        PMPI_Comm_set_attr(comm, keyval, c);
        return;
    }
    int n;
    PMPI_Comm_size(comm, &n);
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
    /* One round: the members' masks ORed, then a word saying some member
     * did not own its mask, then one saying some could not translate its
     * members. */
    uint64_t mine[ID_WORDS + 2], all[ID_WORDS + 2];
    uint32_t id[2] = {0, 0};
    int ok = 0;
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&ob.lock);
        int owner = !mask_busy;
        if (owner) mask_busy = 1;
        long pause_us = (long)(rand_r(&seed) % 100 + 1) * (attempt < 10 ? attempt + 1 : 10);
        if (owner) memcpy(mine, used, sizeof used);
        else memset(mine, 0, sizeof used);
        pthread_mutex_unlock(&ob.lock);
        mine[ID_WORDS] = !owner;
        mine[ID_WORDS + 1] = !translated;
        PMPI_Allreduce(mine, all, ID_WORDS + 2, MPI_UINT64_T, MPI_BOR, comm);
        int agreed = all[ID_WORDS] == 0;
        int have = agreed && all[ID_WORDS + 1] == 0 && two_free(all, id);
        pthread_mutex_lock(&ob.lock);
        if (owner) {
            if (have)
                for (int l = 0; l < 2; l++) used[id[l] / 64] |= 1ull << (id[l] % 64);
            mask_busy = 0;
        }
        pthread_mutex_unlock(&ob.lock);
        if (agreed || all[ID_WORDS + 1] != 0) {
            ok = have;
            break;
        }
        __atomic_add_fetch(&retries, 1, __ATOMIC_RELAXED);
        struct timespec pause = {0, pause_us * 1000L};
        nanosleep(&pause, NULL);
    }
    int made = ok;
    for (int l = 0; made && l < L_COUNT; l++) {
        c->id[l] = id[l];
        made = outboard_group_create(ob.world, id[l], (uint32_t)n, ranks, &c->group[l]) == OUTBOARD_OK;
        if (!made && ob.verbose) fprintf(stderr, "outboard_mpi: rank %d: group set-up failed: %s\n", ob.rank, outboard_last_error());
    }
    if (!ok && ob.verbose && translated)
        fprintf(stderr, "outboard_mpi: rank %d: no two group ids free at every member (%d in use at most)\n", ob.rank, ID_SPACE);
    /* Every member must agree to use the groups. */
    int every = 0;
    PMPI_Allreduce(&made, &every, 1, MPI_INT, MPI_LAND, comm);
    /* The same at every member: the group's member list is. */
    if (every) outboard_group_nodes(c->group[L_BLOCKING], &c->nodes);
    /* The environment's choices, checked at MPI_Init: alike everywhere. */
    for (int o = 0; every && o < O_COUNT; o++) {
        if (!ob.opt_set[o] || (o == O_BCAST_MODE && !strcmp(ob.opt[o], "bypass"))) continue;
        for (int l = 0; l < L_COUNT; l++)
            if (outboard_group_set_option(c->group[l], ob_opt_name[o], ob.opt[o]) != OUTBOARD_OK)
                fprintf(stderr, "outboard_mpi: rank %d: %s: %s\n", ob.rank, ob_opt_env[o], outboard_last_error());
        c->chosen = 1;
    }
    if (every && (env_bypass_bcast() || ob.how[C_REDUCE] == H_BYPASS))
        bypass_all(c, comm, env_bypass_bcast(), ob.how[C_REDUCE] == H_BYPASS,
                   ob.how[C_BCAST] == H_BYPASS || ob.how[C_REDUCE] == H_BYPASS ? "OUTBOARD_MPI_BCAST or _REDUCE" : "OUTBOARD_MPI_BCAST_MODE");
    pthread_mutex_lock(&ob.lock);
    if (!every) {
        free_groups(c);
        /* Ids agreed but not used by a group go back too. */
        if (ok)
            for (int l = 0; l < L_COUNT; l++) used[id[l] / 64] &= ~(1ull << (id[l] % 64));
        c->broken = W_NOGROUP;
    }
    pthread_mutex_unlock(&ob.lock);
    free(in); free(out); free(ranks);
    PMPI_Comm_set_attr(comm, keyval, c);
}

/* At MPI_Init, once Outboard is up: the predefined communicators. */
void ob_comms_start(void) {
    used[0] = 1; /* id 0 is never used */
    seed = (unsigned)ob.rank * 2654435761u + 1;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm, &keyval, NULL);
    map(MPI_COMM_WORLD);
    map(MPI_COMM_SELF);
}

/* At MPI_Finalize, before Outboard stops: the predefined communicators'
 * groups (deleting a missing attribute is an error in Open MPI). */
void ob_comms_stop(void) {
    if (keyval == MPI_KEYVAL_INVALID) return;
    MPI_Comm predefined[2] = {MPI_COMM_WORLD, MPI_COMM_SELF};
    for (int i = 0; i < 2; i++)
        if (ob_lookup(predefined[i])) PMPI_Comm_delete_attr(predefined[i], keyval);
    if (ob.verbose && retries)
        fprintf(stderr, "outboard_mpi: rank %d: %lu group id agreements retried (mapped concurrently by several threads)\n", ob.rank, retries);
}

/* ---- The calls that make intra-communicators ---- */

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_dup(comm, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

/* The MPI_Info keys naming collective choices (outboard_ and the C ABI's
 * option name). */
static const char *const info_key[O_COUNT] = {"outboard_barrier_algorithm", "outboard_barrier_protocol", "outboard_bcast_mode",
                                              "outboard_bcast_tree", "outboard_reduce_degree", "outboard_reduce_algorithm",
                                              "outboard_allreduce_algorithm"};

/* Applies the keys of `info` that name collective choices to `comm`'s
 * groups (the caller, `call`, is collective: every member applies the
 * same). A bad value is an MPI_ERR_INFO_VALUE through the communicator's
 * error handler, naming the key and what it accepts. */
static int apply_info(MPI_Comm comm, MPI_Info info, const char *call) {
    if (!ob.up || info == MPI_INFO_NULL) return MPI_SUCCESS;
    struct comm *c = ob_lookup(comm);
    int any = 0;
    for (int o = 0; o < O_COUNT; o++) {
        char v[256];
        int flag = 0;
        if (PMPI_Info_get(info, info_key[o], (int)sizeof v - 1, v, &flag) != MPI_SUCCESS || !flag) continue;
        if (!c || !c->group[L_BLOCKING]) {
            if (ob.verbose) fprintf(stderr, "outboard_mpi: rank %d: %s: MPI_Info key %s ignored: the communicator's collectives pass through\n", ob.rank, call, info_key[o]);
            continue;
        }
        if (o == O_BCAST_MODE && !strcmp(v, "bypass")) {
            /* Collective like the call: all members or none. */
            bypass_all(c, comm, 1, 0, info_key[o]);
            any = 1;
            continue;
        }
        for (int l = 0; l < L_COUNT; l++)
            if (outboard_group_set_option(c->group[l], ob_opt_name[o], v) != OUTBOARD_OK) {
                char why[700];
                snprintf(why, sizeof why, "MPI_Info key %s: %s", info_key[o], outboard_last_error());
                return ob_fail_msg(comm, MPI_ERR_INFO_VALUE, call, why);
            }
        c->chosen = any = 1;
    }
    if (any && ob.verbose) {
        char name[MPI_MAX_OBJECT_NAME] = "", d[400] = "";
        int len = 0;
        PMPI_Comm_get_name(comm, name, &len);
        outboard_group_describe(c->group[L_BLOCKING], d, sizeof d);
        fprintf(stderr, "outboard_mpi: rank %d: %s on %s: collective choices now %s\n", ob.rank, call, len ? name : "a communicator", d);
    }
    return MPI_SUCCESS;
}

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
    int rc = PMPI_Comm_set_info(comm, info);
    return rc == MPI_SUCCESS ? apply_info(comm, info, "MPI_Comm_set_info") : rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc == MPI_SUCCESS ? apply_info(*newcomm, info, "MPI_Comm_dup_with_info") : rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_split(comm, color, key, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_split_type(comm, type, key, info, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_create(comm, group, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm) {
    int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm) {
    int rc = PMPI_Intercomm_merge(intercomm, high, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *newcomm) {
    int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
    int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *newcomm) {
    int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int destinations[], const int weights[],
                          MPI_Info info, int reorder, MPI_Comm *newcomm) {
    int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[], MPI_Info info, int reorder, MPI_Comm *newcomm) {
    int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations, destweights, info, reorder, newcomm);
    if (rc == MPI_SUCCESS) map(*newcomm);
    return rc;
}
