/* NICVM modules as MPI reduction operators (outboard_mpi.h): a module is
 * compiled at every rank and loaded on the engines of one communicator; an
 * MPI_Op made for it is an ordinary user-defined operation to MPI, whose
 * function runs the module on the host, so that wherever the library
 * does not take a reduction over (another communicator, a derived type,
 * a size beyond the threshold, OUTBOARD_MPI=off) MPI still computes the
 * module's result. Where it does, the engines combine with the module
 * (ob_module_reduction, called by colls.c).
 *
 * MPI's user functions get no context, so each operator slot has its own
 * function (a fixed number of them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "outboard_mpi.h"

#define MAX_MODULES 32
#define MAX_OPS 16

static struct module {
    char name[65];
    outboard_module *m;
    int obop;           /* the C ABI's operator code, 0 if not loaded on any engine */
    uint32_t comm_id;   /* the group id of the communicator it was loaded on */
} modules[MAX_MODULES];
static int nmodules;

static struct op_slot {
    int used;
    MPI_Op op;
    struct module *mod;
} slots[MAX_OPS];

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
/* Operator slots in use, read without the lock: a program without module
 * operators pays one load per reduction for them. */
static int slots_used;

static struct module *find(const char *name) {
    for (int i = 0; i < nmodules; i++)
        if (!strcmp(modules[i].name, name)) return &modules[i];
    return NULL;
}

/* Slot `i`'s combine step on the host: inout = inout op in, element by
 * element of a contiguous type. A failure cannot be returned through MPI:
 * it ends the job, naming the module. */
static void combine(int i, void *in, void *inout, int *len, MPI_Datatype *dt) {
    struct layout l;
    const char *name = slots[i].mod ? slots[i].mod->name : "?";
    if (ob_layout(*dt, &l) != 0 || !l.contiguous) {
        fprintf(stderr, "outboard_mpi: rank %d: the operator of module '%s' takes contiguous datatypes only\n", ob.rank, name);
        PMPI_Abort(MPI_COMM_WORLD, 1);
        return;
    }
    size_t bytes = (size_t)*len * (size_t)l.size;
    int rc = slots[i].mod ? outboard_module_combine(slots[i].mod->m, inout, in, bytes) : OUTBOARD_ERR_ARG;
    if (rc != OUTBOARD_OK) {
        fprintf(stderr, "outboard_mpi: rank %d: the operator of module '%s' failed on the host: %s\n", ob.rank, name, outboard_last_error());
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#define SLOT(i) \
    static void slot##i(void *in, void *inout, int *len, MPI_Datatype *dt) { combine(i, in, inout, len, dt); }
SLOT(0) SLOT(1) SLOT(2) SLOT(3) SLOT(4) SLOT(5) SLOT(6) SLOT(7)
SLOT(8) SLOT(9) SLOT(10) SLOT(11) SLOT(12) SLOT(13) SLOT(14) SLOT(15)
static MPI_User_function *const slot_fn[MAX_OPS] = {slot0, slot1, slot2,  slot3,  slot4,  slot5,  slot6,  slot7,
                                                     slot8, slot9, slot10, slot11, slot12, slot13, slot14, slot15};

int MPIX_Outboard_module_load(const char *name, const char *source, MPI_Comm comm) {
    static const char *call = "MPIX_Outboard_module_load";
    outboard_module *m = NULL;
    int rc = outboard_module_compile(name, source, &m);
    if (rc != OUTBOARD_OK) return ob_failed(comm, call, rc);
    pthread_mutex_lock(&modules_lock);
    const char *refused = find(name) ? "a module of that name was loaded before"
                          : nmodules == MAX_MODULES ? "every one of the library's 32 module places is taken" : NULL;
    pthread_mutex_unlock(&modules_lock);
    if (refused) {
        outboard_module_free(m);
        char why[200];
        snprintf(why, sizeof why, "module '%s': %s", name, refused);
        return ob_fail_msg(comm, MPI_ERR_ARG, call, why);
    }
    /* On the engines when every rank of the communicator can: the ranks
     * agree, so that each offloads a reduction with it or none does. */
    struct comm *c = ob.up ? ob_lookup(comm) : NULL;
    int loaded = 0, everywhere = 0;
    if (c && c->group[L_BLOCKING]) {
        rc = outboard_module_load(c->group[L_BLOCKING], m, 0, 0);
        loaded = rc == OUTBOARD_OK;
        if (!loaded && ob.verbose)
            fprintf(stderr, "outboard_mpi: rank %d: module '%s' not loaded on the engine (%s); its operators reduce on the hosts\n", ob.rank,
                    name, outboard_last_error());
    }
    PMPI_Allreduce(&loaded, &everywhere, 1, MPI_INT, MPI_MIN, comm);
    if (loaded && !everywhere) outboard_module_purge(m);
    int obop = 0;
    if (everywhere && outboard_op_from_module(m, &obop) != OUTBOARD_OK) obop = 0;
    pthread_mutex_lock(&modules_lock);
    struct module *mod = &modules[nmodules++];
    snprintf(mod->name, sizeof mod->name, "%s", name);
    mod->m = m;
    mod->obop = obop;
    mod->comm_id = c ? c->id[L_BLOCKING] : 0;
    pthread_mutex_unlock(&modules_lock);
    if (ob.verbose && ob.rank == 0)
        fprintf(stderr, "outboard_mpi: module '%s' %s\n", name, obop ? "loaded on the engines" : "compiled; its operators reduce on the hosts");
    return MPI_SUCCESS;
}

int MPIX_Outboard_op_create(const char *name, MPI_Op *op) {
    static const char *call = "MPIX_Outboard_op_create";
    if (!name || !op) return ob_fail_msg(MPI_COMM_WORLD, MPI_ERR_ARG, call, !name ? "the module name is null" : "op is null");
    pthread_mutex_lock(&modules_lock);
    struct module *mod = find(name);
    int i = 0;
    while (i < MAX_OPS && slots[i].used) i++;
    if (mod && i < MAX_OPS) {
        slots[i].used = 1;
        __atomic_add_fetch(&slots_used, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&modules_lock);
    char why[200];
    if (!mod) {
        snprintf(why, sizeof why, "no module '%s' was loaded with MPIX_Outboard_module_load", name);
        return ob_fail_msg(MPI_COMM_WORLD, MPI_ERR_ARG, call, why);
    }
    if (i == MAX_OPS) {
        snprintf(why, sizeof why, "module '%s': all 16 of the library's module operators are in use (MPI_Op_free one)", name);
        return ob_fail_msg(MPI_COMM_WORLD, MPI_ERR_OP, call, why);
    }
    int rc = PMPI_Op_create(slot_fn[i], 1, op);
    pthread_mutex_lock(&modules_lock);
    if (rc == MPI_SUCCESS) {
        slots[i].op = *op;
        slots[i].mod = mod;
    } else {
        slots[i].used = 0;
        __atomic_sub_fetch(&slots_used, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&modules_lock);
    return rc;
}

/* A freed operator's slot is free again (its handle may be reused by
 * MPI for an unrelated operation). */
int MPI_Op_free(MPI_Op *op) {
    if (op) {
        pthread_mutex_lock(&modules_lock);
        for (int i = 0; i < MAX_OPS; i++)
            if (slots[i].used && slots[i].op == *op) {
                slots[i].used = 0;
                slots[i].mod = NULL;
                __atomic_sub_fetch(&slots_used, 1, __ATOMIC_RELEASE);
            }
        pthread_mutex_unlock(&modules_lock);
    }
    return PMPI_Op_free(op);
}

/* For a module's operator: W_TAKEN with the C ABI's code in *obop when
 * the engines of `comm` reduce with it (loaded there, a type the engine
 * cuts into elements); W_MODULE when MPI must (on the hosts); -1 for any
 * other operation. */
int ob_module_reduction(MPI_Comm comm, const struct layout *l, MPI_Op op, int *obop) {
    int found = 0, code = 0;
    uint32_t id = 0;
    if (!__atomic_load_n(&slots_used, __ATOMIC_ACQUIRE)) return -1;
    pthread_mutex_lock(&modules_lock);
    for (int i = 0; i < MAX_OPS && !found; i++)
        if (slots[i].used && slots[i].op == op) {
            found = 1;
            code = slots[i].mod->obop;
            id = slots[i].mod->comm_id;
        }
    pthread_mutex_unlock(&modules_lock);
    if (!found) return -1;
    if (!l->base) return W_DATATYPE;
    struct comm *c = code ? ob_lookup(comm) : NULL;
    if (!c || c->id[L_BLOCKING] != id) return W_MODULE;
    *obop = code;
    return W_TAKEN;
}

/* At MPI_Finalize: the handles go (the engines drop the modules with the
 * ports). */
void ob_modules_stop(void) {
    pthread_mutex_lock(&modules_lock);
    for (int i = 0; i < nmodules; i++) {
        outboard_module_free(modules[i].m);
        modules[i].m = NULL;
    }
    nmodules = 0;
    memset(slots, 0, sizeof slots);
    __atomic_store_n(&slots_used, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&modules_lock);
}
