/* liboutboard_mpi's Fortran entry points. Built into the same shared object
 * as outboard_mpi.c.
 *
 * Why: a Fortran program's MPI calls never reach the C MPI_* symbols that
 * outboard_mpi.c defines. Open MPI's Fortran bindings (libmpi_mpifh,
 * libmpi_usempif08) call PMPI_* directly; MPICH's mpif.h / `use mpi`
 * bindings (libmpichfort) call the C MPI_* functions, but its mpi_f08
 * barrier, ibarrier, wait and test routines call PMPI_* too. So the
 * collectives would pass the library by, and worse, a wait on a request
 * that the library started (under MPICH, an mpi_f08 MPI_Ibcast reaches the
 * C MPI_Ibcast) would go to PMPI_Wait, which cannot complete it.
 *
 * Open MPI's Fortran MPI_INIT (and MPICH's mpi_f08 one) calls PMPI_Init
 * as well, so Outboard would not even start.
 *
 * What: the Fortran symbols of MPI_Init, MPI_Init_thread, MPI_Finalize,
 * MPI_Barrier, MPI_Bcast, MPI_Reduce, MPI_Allreduce, their I-forms,
 * MPI_Allgather, MPI_Gather, MPI_Scatter, MPI_Alltoall,
 * MPI_Reduce_scatter_block, MPI_Scan, MPI_Exscan, the
 * communicator constructors below and MPI_Comm_set_info, and
 * every wait and test function (so that the requests of the I-forms
 * complete), in each name mangling a Fortran compiler may use: mpi_bcast,
 * mpi_bcast_, mpi_bcast__, MPI_BCAST (the MPIs export all four); plus the
 * mpi_f08 module's names: Open MPI's mpi_*_f08_ (the same arguments as
 * mpif.h, ierror optional), MPICH's mpi_{init,init_thread,finalize,
 * barrier,ibarrier,wait*,test*,request_free,request_get_status}_f08_ (its
 * type(MPI_Status) is C's MPI_Status). Each converts the handles
 * (MPI_Comm_f2c, MPI_Type_f2c, MPI_Op_f2c, MPI_Request_f2c/c2f, statuses)
 * and calls the C MPI_* function, which is outboard_mpi.c's wrapper where
 * it defines one and PMPI otherwise. MPICH's mpi_f08 calls with buffers
 * (mpi_bcast_f08ts_ and the others) are left to MPICH: they take gfortran's
 * own array descriptors, and they already reach the C MPI_* functions.
 *
 * Fortran's MPI_IN_PLACE and MPI_BOTTOM are not C's: they are the addresses
 * of variables in common blocks, and each MPI recognises them its own way.
 *   Open MPI: the symbols mpi_fortran_in_place, mpi_fortran_in_place_,
 *     mpi_fortran_in_place__, MPI_FORTRAN_IN_PLACE (only the mangling the
 *     MPI was built with exists; the common block of mpif.h, `use mpi` and
 *     `use mpi_f08` alike), likewise mpi_fortran_bottom*,
 *     mpi_fortran_status_ignore*, mpi_fortran_statuses_ignore*.
 *   MPICH: libmpichfort's C variables MPIR_F_MPI_IN_PLACE and
 *     MPIR_F_MPI_BOTTOM (and the standard MPI_F_STATUS_IGNORE,
 *     MPI_F_STATUSES_IGNORE), filled in by the Fortran routine mpirinitf_
 *     on the first call that needs them (MPIR_F_NeedInit), exactly as
 *     MPICH's own bindings do; mpi_f08's statuses: MPI_F08_STATUS_IGNORE,
 *     MPI_F08_STATUSES_IGNORE.
 * Where these cannot be found (another MPI, or an MPICH without those
 * symbols), a call with a buffer or a status goes to the MPI's own Fortran
 * symbol (dlsym(RTLD_NEXT)) instead of risking a wrong answer; under MPICH
 * that symbol calls the C function, so the call is still taken over.
 *
 * Fortran datatypes become the C types of the same representation before
 * the C call (MPI_INTEGER -> MPI_INT32_T, MPI_DOUBLE_PRECISION -> MPI_DOUBLE,
 * MPI_REAL8, MPI_INTEGER8, MPI_COMPLEX, ..., matched by size at run time),
 * so that reductions on them are taken over like those of C programs, and
 * a C rank and a Fortran rank of one job decide alike. MPI_LOGICAL is left
 * as it is (its true value is the compiler's).
 *
 * OUTBOARD_MPI_VERBOSE=1 prints, once per process and entry point, that a
 * Fortran call reached this file and where it went.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OMPI_MAJOR_VERSION)
#define FORTRAN_OPEN_MPI 1
#elif defined(MPICH_VERSION)
#define FORTRAN_MPICH 1
#endif

/* A Fortran INTEGER status array's length (MPI_STATUS_SIZE): the C status's
 * size in MPI_Fints in both MPIs (Open MPI 6, MPICH 5). */
#define F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

/* ---- The entry points, for the verbose lines and forwarding ---- */

enum entry {
    E_BARRIER, E_BCAST, E_REDUCE, E_ALLREDUCE, E_IBARRIER, E_IBCAST, E_IREDUCE, E_IALLREDUCE,
    E_WAIT, E_WAITALL, E_WAITANY, E_WAITSOME, E_TEST, E_TESTALL, E_TESTANY, E_TESTSOME,
    E_REQUEST_FREE, E_REQUEST_GET_STATUS, E_INIT, E_INIT_THREAD, E_FINALIZE,
    E_COMM_DUP, E_COMM_DUP_WITH_INFO, E_COMM_SPLIT, E_COMM_SPLIT_TYPE, E_COMM_CREATE, E_COMM_CREATE_GROUP, E_COMM_SET_INFO,
    E_ALLGATHER, E_GATHER, E_SCATTER, E_ALLTOALL, E_REDUCE_SCATTER_BLOCK, E_SCAN, E_EXSCAN, E_COUNT
};

/* Fortran name (as the MPI standard writes it) and the C function called. */
static const char *const entry_name[E_COUNT][2] = {
    {"MPI_BARRIER", "MPI_Barrier"}, {"MPI_BCAST", "MPI_Bcast"}, {"MPI_REDUCE", "MPI_Reduce"},
    {"MPI_ALLREDUCE", "MPI_Allreduce"}, {"MPI_IBARRIER", "MPI_Ibarrier"}, {"MPI_IBCAST", "MPI_Ibcast"},
    {"MPI_IREDUCE", "MPI_Ireduce"}, {"MPI_IALLREDUCE", "MPI_Iallreduce"}, {"MPI_WAIT", "MPI_Wait"},
    {"MPI_WAITALL", "MPI_Waitall"}, {"MPI_WAITANY", "MPI_Waitany"}, {"MPI_WAITSOME", "MPI_Waitsome"},
    {"MPI_TEST", "MPI_Test"}, {"MPI_TESTALL", "MPI_Testall"}, {"MPI_TESTANY", "MPI_Testany"},
    {"MPI_TESTSOME", "MPI_Testsome"}, {"MPI_REQUEST_FREE", "MPI_Request_free"},
    {"MPI_REQUEST_GET_STATUS", "MPI_Request_get_status"}, {"MPI_INIT", "MPI_Init"},
    {"MPI_INIT_THREAD", "MPI_Init_thread"}, {"MPI_FINALIZE", "MPI_Finalize"}, {"MPI_COMM_DUP", "MPI_Comm_dup"},
    {"MPI_COMM_DUP_WITH_INFO", "MPI_Comm_dup_with_info"}, {"MPI_COMM_SPLIT", "MPI_Comm_split"},
    {"MPI_COMM_SPLIT_TYPE", "MPI_Comm_split_type"}, {"MPI_COMM_CREATE", "MPI_Comm_create"},
    {"MPI_COMM_CREATE_GROUP", "MPI_Comm_create_group"}, {"MPI_COMM_SET_INFO", "MPI_Comm_set_info"},
    {"MPI_ALLGATHER", "MPI_Allgather"}, {"MPI_GATHER", "MPI_Gather"}, {"MPI_SCATTER", "MPI_Scatter"},
    {"MPI_ALLTOALL", "MPI_Alltoall"}, {"MPI_REDUCE_SCATTER_BLOCK", "MPI_Reduce_scatter_block"}, {"MPI_SCAN", "MPI_Scan"},
    {"MPI_EXSCAN", "MPI_Exscan"}};

/* Addresses that stand for one Fortran constant, one per symbol mangling
 * (NULL where that mangling does not exist). */
#define MANGLINGS 4
struct sentinel {
    const void *at[MANGLINGS];
};

static struct {
    pthread_once_t once;
    const char *unknown;  /* NULL: the sentinels are known; else why not */
    int verbose;
    struct sentinel in_place, bottom, status_ignore, statuses_ignore;
    struct sentinel f08_status_ignore, f08_statuses_ignore; /* MPICH's mpi_f08 */
    struct {
        MPI_Datatype fortran, c;
    } types[16];
    int ntypes;
    int said[2][E_COUNT]; /* verbose line printed: [forwarded][entry] */
} fx = {.once = PTHREAD_ONCE_INIT};

static int is(const void *p, const struct sentinel *s) {
    for (int i = 0; i < MANGLINGS; i++)
        if (s->at[i] && p == s->at[i]) return 1;
    return 0;
}

#if FORTRAN_OPEN_MPI
/* Open MPI's sentinel `base` (e.g. "mpi_fortran_in_place") in its four
 * manglings, as Open MPI's OMPI_IS_FORTRAN_* macros compare them. */
static struct sentinel ompi_sentinel(const char *base) {
    struct sentinel s = {{NULL}};
    char name[64], upper[64];
    size_t n = strlen(base);
    for (size_t i = 0; i <= n && i < sizeof upper; i++) upper[i] = (char)(base[i] >= 'a' && base[i] <= 'z' ? base[i] - 32 : base[i]);
    upper[sizeof upper - 1] = 0;
    const char *suffix[] = {"", "_", "__"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s", base, suffix[i]);
        s.at[i] = dlsym(RTLD_DEFAULT, name);
    }
    s.at[3] = dlsym(RTLD_DEFAULT, upper);
    return s;
}

static void find_sentinels(void) {
    fx.in_place = ompi_sentinel("mpi_fortran_in_place");
    fx.bottom = ompi_sentinel("mpi_fortran_bottom");
    fx.status_ignore = ompi_sentinel("mpi_fortran_status_ignore");
    fx.statuses_ignore = ompi_sentinel("mpi_fortran_statuses_ignore");
    struct sentinel none = {{NULL}};
    if (!memcmp(&fx.in_place, &none, sizeof none) || !memcmp(&fx.status_ignore, &none, sizeof none))
        fx.unknown = "Open MPI's mpi_fortran_in_place / mpi_fortran_status_ignore symbols not found";
}
#elif FORTRAN_MPICH
/* MPICH fills these in from its Fortran common blocks (mpirinitf_ calls
 * mpirinitc_ with their addresses) on the first Fortran call that needs
 * them; so does this. */
static void find_sentinels(void) {
    int *need_init = dlsym(RTLD_DEFAULT, "MPIR_F_NeedInit");
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "mpirinitf_");
    void **in_place = dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE");
    void **bottom = dlsym(RTLD_DEFAULT, "MPIR_F_MPI_BOTTOM");
    if (!need_init || !init || !in_place || !bottom) {
        fx.unknown = "MPICH's MPIR_F_NeedInit / mpirinitf_ / MPIR_F_MPI_IN_PLACE symbols not found";
        return;
    }
    if (*need_init) {
        init();
        *need_init = 0;
    }
    fx.in_place.at[0] = *in_place;
    fx.bottom.at[0] = *bottom;
    fx.status_ignore.at[0] = MPI_F_STATUS_IGNORE;
    fx.statuses_ignore.at[0] = MPI_F_STATUSES_IGNORE;
    fx.f08_status_ignore.at[0] = MPI_F08_STATUS_IGNORE;
    fx.f08_statuses_ignore.at[0] = MPI_F08_STATUSES_IGNORE;
    if (!fx.in_place.at[0] || !fx.status_ignore.at[0])
        fx.unknown = "MPICH's Fortran initialisation left MPI_IN_PLACE or MPI_STATUS_IGNORE unset";
}
#else
static void find_sentinels(void) {
    fx.unknown = "neither Open MPI nor MPICH: its Fortran sentinels are unknown to this library";
}
#endif

/* Fortran type `f` becomes the first C type in `c` of its size. */
static void map_type(MPI_Datatype f, const MPI_Datatype *c, int nc) {
    int fsize = 0, csize = 0;
    if (f == MPI_DATATYPE_NULL || MPI_Type_size(f, &fsize) != MPI_SUCCESS || fsize <= 0) return;
    for (int i = 0; i < nc; i++) {
        if (c[i] == MPI_DATATYPE_NULL || MPI_Type_size(c[i], &csize) != MPI_SUCCESS || csize != fsize) continue;
        if (fx.ntypes < (int)(sizeof fx.types / sizeof fx.types[0])) {
            fx.types[fx.ntypes].fortran = f;
            fx.types[fx.ntypes].c = c[i];
            fx.ntypes++;
        }
        return;
    }
}

static void map_types(void) {
    const MPI_Datatype ints[] = {MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T};
    const MPI_Datatype reals[] = {MPI_FLOAT, MPI_DOUBLE};
    const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX};
    const MPI_Datatype fints[] = {MPI_INTEGER, MPI_INTEGER1, MPI_INTEGER2, MPI_INTEGER4, MPI_INTEGER8};
    const MPI_Datatype freals[] = {MPI_REAL, MPI_DOUBLE_PRECISION, MPI_REAL4, MPI_REAL8};
    const MPI_Datatype fcomplexes[] = {MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_COMPLEX8, MPI_COMPLEX16};
    for (size_t i = 0; i < sizeof fints / sizeof fints[0]; i++) map_type(fints[i], ints, 4);
    for (size_t i = 0; i < sizeof freals / sizeof freals[0]; i++) map_type(freals[i], reals, 2);
    for (size_t i = 0; i < sizeof fcomplexes / sizeof fcomplexes[0]; i++) map_type(fcomplexes[i], complexes, 2);
}

static void setup(void) {
    const char *v = getenv("OUTBOARD_MPI_VERBOSE");
    fx.verbose = v && *v && strcmp(v, "0") && strcmp(v, "off") && strcmp(v, "false") && strcmp(v, "no");
    find_sentinels();
    map_types();
}

/* Called first by every entry point: all of them run between MPI_Init and
 * MPI_Finalize, when the MPI's Fortran library is loaded and its datatypes
 * have sizes. Returns whether buffers and statuses can be translated. */
static int ready(void) {
    pthread_once(&fx.once, setup);
    return fx.unknown == NULL;
}

/* The verbose line of entry `e`, once per process. */
static void said(enum entry e, int forwarded) {
    if (!fx.verbose || __atomic_exchange_n(&fx.said[forwarded][e], 1, __ATOMIC_RELAXED)) return;
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (forwarded)
        fprintf(stderr, "outboard_mpi: rank %d: Fortran %s: passed to the MPI's own Fortran binding (%s)\n", rank, entry_name[e][0], fx.unknown);
    else
        fprintf(stderr, "outboard_mpi: rank %d: Fortran %s: calls %s\n", rank, entry_name[e][0], entry_name[e][1]);
}

static void set(MPI_Fint *ierr, int rc) {
    if (ierr) *ierr = rc; /* optional in mpi_f08 */
}

/* ---- Forwarding to the MPI's own Fortran symbol ---- */

/* The MPI's own definition of entry `e` (the next one after this library):
 * its mpif.h symbol in whichever mangling it has, or for MPICH's mpi_f08
 * statuses (`f08`) its mpi_f08 symbol. */
static void *own(enum entry e, int f08) {
    char lower[40], name[48];
    const char *upper = entry_name[e][0];
    size_t n = strlen(upper);
    for (size_t i = 0; i <= n && i < sizeof lower; i++) lower[i] = (char)(upper[i] >= 'A' && upper[i] <= 'Z' ? upper[i] + 32 : upper[i]);
    lower[sizeof lower - 1] = 0;
    if (f08) {
        snprintf(name, sizeof name, "%s_f08_", lower);
        return dlsym(RTLD_NEXT, name);
    }
    const char *suffix[] = {"_", "", "__"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s%s", lower, suffix[i]);
        void *f = dlsym(RTLD_NEXT, name);
        if (f) return f;
    }
    return dlsym(RTLD_NEXT, upper);
}

/* Calls the MPI's own entry `e` (type `fn_t`) with the arguments and an
 * ierror of its own (the caller's may be absent, in mpi_f08), or reports
 * that there is none. */
#define FORWARD(e, f08, fn_t, ierr, ...)                                                                        \
    do {                                                                                                        \
        said(e, 1);                                                                                             \
        fn_t own_fn = (fn_t)own(e, f08);                                                                        \
        MPI_Fint own_ierr = MPI_ERR_INTERN;                                                                     \
        if (own_fn)                                                                                             \
            own_fn(__VA_ARGS__, &own_ierr);                                                                     \
        else                                                                                                    \
            fprintf(stderr, "outboard_mpi: the MPI defines no Fortran %s to pass the call to\n", entry_name[e][0]); \
        set(ierr, own_ierr);                                                                                    \
    } while (0)

/* ---- Conversions ---- */

static void *buffer(void *f) {
    if (is(f, &fx.in_place)) return MPI_IN_PLACE;
    if (is(f, &fx.bottom)) return MPI_BOTTOM;
    return f;
}

static MPI_Datatype datatype(MPI_Fint f) {
    MPI_Datatype t = MPI_Type_f2c(f);
    for (int i = 0; i < fx.ntypes; i++)
        if (fx.types[i].fortran == t) return fx.types[i].c;
    return t;
}

/* How a routine's statuses are laid out: an INTEGER array of
 * MPI_STATUS_SIZE (mpif.h, `use mpi`, and Open MPI's mpi_f08), or MPICH's
 * mpi_f08 type(MPI_Status), which is C's MPI_Status. */
enum flavour { F_INTEGER, F_C_STATUS };

static int status_ignored(const MPI_Fint *st, enum flavour k) {
    return is(st, k == F_INTEGER ? &fx.status_ignore : &fx.f08_status_ignore);
}

static int statuses_ignored(const MPI_Fint *st, enum flavour k) {
    return is(st, k == F_INTEGER ? &fx.statuses_ignore : &fx.f08_statuses_ignore);
}

/* The C status to pass for Fortran status `f`: MPI_STATUS_IGNORE, `f`
 * itself (F_C_STATUS) or `tmp`, to be copied back by status_back. */
static MPI_Status *status_c(MPI_Fint *f, enum flavour k, MPI_Status *tmp) {
    if (status_ignored(f, k)) return MPI_STATUS_IGNORE;
    return k == F_C_STATUS ? (MPI_Status *)(void *)f : tmp;
}

static void status_back(MPI_Status *c, MPI_Fint *f, enum flavour k) {
    if (c != MPI_STATUS_IGNORE && k == F_INTEGER) MPI_Status_c2f(c, f);
}

/* n statuses: MPI_STATUSES_IGNORE, the Fortran array itself
 * (F_C_STATUS), or a C array (free with statuses_back). */
static MPI_Status *statuses_c(int n, MPI_Fint *f, enum flavour k) {
    if (statuses_ignored(f, k)) return MPI_STATUSES_IGNORE;
    if (k == F_C_STATUS) return (MPI_Status *)(void *)f;
    return malloc(sizeof(MPI_Status) * (size_t)(n > 0 ? n : 1));
}

/* Copies the first n statuses back (n <= 0: none) and frees the array. */
static void statuses_back(MPI_Status *c, int n, MPI_Fint *f, enum flavour k) {
    if (c == MPI_STATUSES_IGNORE || k == F_C_STATUS) return;
    for (int i = 0; i < n; i++) MPI_Status_c2f(&c[i], f + (size_t)i * F_STATUS_SIZE);
    free(c);
}

static MPI_Request *requests_c(int n, const MPI_Fint *f) {
    MPI_Request *c = malloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) c[i] = MPI_Request_f2c(f[i]);
    return c;
}

/* Writes the requests back (completed ones are now MPI_REQUEST_NULL) and
 * frees the C array. */
static void requests_back(MPI_Request *c, int n, MPI_Fint *f) {
    for (int i = 0; i < n; i++) f[i] = MPI_Request_c2f(c[i]);
    free(c);
}

/* A C index (0-based, or MPI_UNDEFINED) as Fortran's (1-based). */
static MPI_Fint index_f(int i) {
    return i == MPI_UNDEFINED ? i : i + 1;
}

/* ---- Start and end ----
 *
 * Open MPI's Fortran MPI_INIT calls PMPI_Init, and so does MPICH's mpi_f08
 * one: without these, Outboard would never start for a Fortran program
 * (and never stop). */

static void f_init(MPI_Fint *ierr) {
    int rc = MPI_Init(NULL, NULL);
    if (rc == MPI_SUCCESS) {
        ready();
        said(E_INIT, 0);
    }
    set(ierr, rc);
}

static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr) {
    int got = MPI_THREAD_SINGLE;
    int rc = MPI_Init_thread(NULL, NULL, *required, &got);
    if (rc == MPI_SUCCESS) {
        *provided = got;
        ready();
        said(E_INIT_THREAD, 0);
    }
    set(ierr, rc);
}

static void f_finalize(MPI_Fint *ierr) {
    ready();
    said(E_FINALIZE, 0);
    set(ierr, MPI_Finalize());
}

/* ---- The collectives ---- */

typedef void (*bcast_fn)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*reduce_fn)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*allreduce_fn)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*ibcast_fn)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*ireduce_fn)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*iallreduce_fn)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void f_barrier(MPI_Fint *comm, MPI_Fint *ierr) {
    ready();
    said(E_BARRIER, 0);
    set(ierr, MPI_Barrier(MPI_Comm_f2c(*comm)));
}

static void f_ibarrier(MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr) {
    ready();
    said(E_IBARRIER, 0);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(MPI_Comm_f2c(*comm), &r);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
    set(ierr, rc);
}

static void f_bcast(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_BCAST, 0, bcast_fn, ierr, buf, count, type, root, comm);
        return;
    }
    said(E_BCAST, 0);
    set(ierr, MPI_Bcast(buffer(buf), *count, datatype(*type), *root, MPI_Comm_f2c(*comm)));
}

static void f_reduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                     MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_REDUCE, 0, reduce_fn, ierr, sbuf, rbuf, count, type, op, root, comm);
        return;
    }
    said(E_REDUCE, 0);
    set(ierr, MPI_Reduce(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), *root, MPI_Comm_f2c(*comm)));
}

static void f_allreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_ALLREDUCE, 0, allreduce_fn, ierr, sbuf, rbuf, count, type, op, comm);
        return;
    }
    said(E_ALLREDUCE, 0);
    set(ierr, MPI_Allreduce(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}

/* The data-movement calls and scans (blocking). */
typedef void (*allgather_fn)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*rooted_fn)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void f_allgather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm,
                        MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_ALLGATHER, 0, allgather_fn, ierr, sbuf, scount, stype, rbuf, rcount, rtype, comm);
        return;
    }
    said(E_ALLGATHER, 0);
    set(ierr, MPI_Allgather(buffer(sbuf), *scount, datatype(*stype), buffer(rbuf), *rcount, datatype(*rtype), MPI_Comm_f2c(*comm)));
}

static void f_alltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm,
                       MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_ALLTOALL, 0, allgather_fn, ierr, sbuf, scount, stype, rbuf, rcount, rtype, comm);
        return;
    }
    said(E_ALLTOALL, 0);
    set(ierr, MPI_Alltoall(buffer(sbuf), *scount, datatype(*stype), buffer(rbuf), *rcount, datatype(*rtype), MPI_Comm_f2c(*comm)));
}

static void f_gather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_GATHER, 0, rooted_fn, ierr, sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
        return;
    }
    said(E_GATHER, 0);
    set(ierr, MPI_Gather(buffer(sbuf), *scount, datatype(*stype), buffer(rbuf), *rcount, datatype(*rtype), *root, MPI_Comm_f2c(*comm)));
}

static void f_scatter(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *root,
                      MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_SCATTER, 0, rooted_fn, ierr, sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
        return;
    }
    said(E_SCATTER, 0);
    set(ierr, MPI_Scatter(buffer(sbuf), *scount, datatype(*stype), buffer(rbuf), *rcount, datatype(*rtype), *root, MPI_Comm_f2c(*comm)));
}

static void f_reduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_REDUCE_SCATTER_BLOCK, 0, allreduce_fn, ierr, sbuf, rbuf, count, type, op, comm);
        return;
    }
    said(E_REDUCE_SCATTER_BLOCK, 0);
    set(ierr, MPI_Reduce_scatter_block(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}

static void f_scan(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_SCAN, 0, allreduce_fn, ierr, sbuf, rbuf, count, type, op, comm);
        return;
    }
    said(E_SCAN, 0);
    set(ierr, MPI_Scan(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}

static void f_exscan(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_EXSCAN, 0, allreduce_fn, ierr, sbuf, rbuf, count, type, op, comm);
        return;
    }
    said(E_EXSCAN, 0);
    set(ierr, MPI_Exscan(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm)));
}

static void f_ibcast(void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_IBCAST, 0, ibcast_fn, ierr, buf, count, type, root, comm, req);
        return;
    }
    said(E_IBCAST, 0);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(buffer(buf), *count, datatype(*type), *root, MPI_Comm_f2c(*comm), &r);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
    set(ierr, rc);
}

static void f_ireduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *req, MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_IREDUCE, 0, ireduce_fn, ierr, sbuf, rbuf, count, type, op, root, comm, req);
        return;
    }
    said(E_IREDUCE, 0);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), *root, MPI_Comm_f2c(*comm), &r);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
    set(ierr, rc);
}

static void f_iallreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req,
                         MPI_Fint *ierr) {
    if (!ready()) {
        FORWARD(E_IALLREDUCE, 0, iallreduce_fn, ierr, sbuf, rbuf, count, type, op, comm, req);
        return;
    }
    said(E_IALLREDUCE, 0);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(buffer(sbuf), buffer(rbuf), *count, datatype(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm), &r);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
    set(ierr, rc);
}

/* ---- Waits and tests ----
 *
 * Each in two flavours of status (see enum flavour); `f_` entries take
 * INTEGER statuses. Without known sentinels (the status-ignore values),
 * they go to the MPI's own symbol, as the collectives with buffers do. */

typedef void (*wait_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*waitall_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*waitany_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*waitsome_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*test_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*testall_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*testany_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*request_free_fn)(MPI_Fint *, MPI_Fint *);
typedef void (*get_status_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void wait_as(MPI_Fint *req, MPI_Fint *st, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_WAIT, k == F_C_STATUS, wait_fn, ierr, req, st);
        return;
    }
    said(E_WAIT, 0);
    MPI_Request r = MPI_Request_f2c(*req);
    MPI_Status tmp, *c = status_c(st, k, &tmp);
    int rc = MPI_Wait(&r, c);
    *req = MPI_Request_c2f(r);
    status_back(c, st, k);
    set(ierr, rc);
}

static void waitall_as(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *sts, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_WAITALL, k == F_C_STATUS, waitall_fn, ierr, n, reqs, sts);
        return;
    }
    said(E_WAITALL, 0);
    MPI_Request *r = requests_c(*n, reqs);
    MPI_Status *c = statuses_c(*n, sts, k);
    int rc = MPI_Waitall(*n, r, c);
    requests_back(r, *n, reqs);
    statuses_back(c, *n, sts, k);
    set(ierr, rc);
}

static void waitany_as(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *st, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_WAITANY, k == F_C_STATUS, waitany_fn, ierr, n, reqs, idx, st);
        return;
    }
    said(E_WAITANY, 0);
    MPI_Request *r = requests_c(*n, reqs);
    MPI_Status tmp, *c = status_c(st, k, &tmp);
    int i = MPI_UNDEFINED;
    int rc = MPI_Waitany(*n, r, &i, c);
    requests_back(r, *n, reqs);
    status_back(c, st, k);
    *idx = index_f(i);
    set(ierr, rc);
}

/* MPI_Waitsome and MPI_Testsome: one signature, one conversion. */
typedef int (*some_call)(int, MPI_Request *, int *, int *, MPI_Status *);

static void some_as(enum entry e, some_call call, MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *outcount, MPI_Fint *idx,
                    MPI_Fint *sts, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(e, k == F_C_STATUS, waitsome_fn, ierr, n, reqs, outcount, idx, sts);
        return;
    }
    said(e, 0);
    MPI_Request *r = requests_c(*n, reqs);
    MPI_Status *c = statuses_c(*n, sts, k);
    int out = 0;
    int rc = call(*n, r, &out, idx, c);
    requests_back(r, *n, reqs);
    statuses_back(c, out == MPI_UNDEFINED ? 0 : out, sts, k);
    for (int i = 0; out != MPI_UNDEFINED && i < out; i++) idx[i] = index_f(idx[i]);
    *outcount = out;
    set(ierr, rc);
}

static void test_as(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_TEST, k == F_C_STATUS, test_fn, ierr, req, flag, st);
        return;
    }
    said(E_TEST, 0);
    MPI_Request r = MPI_Request_f2c(*req);
    MPI_Status tmp, *c = status_c(st, k, &tmp);
    int done = 0;
    int rc = MPI_Test(&r, &done, c);
    *req = MPI_Request_c2f(r);
    if (done) status_back(c, st, k);
    *flag = done ? 1 : 0; /* Fortran's .TRUE. is 1 in gfortran and both MPIs' bindings */
    set(ierr, rc);
}

static void testall_as(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *flag, MPI_Fint *sts, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_TESTALL, k == F_C_STATUS, testall_fn, ierr, n, reqs, flag, sts);
        return;
    }
    said(E_TESTALL, 0);
    MPI_Request *r = requests_c(*n, reqs);
    MPI_Status *c = statuses_c(*n, sts, k);
    int done = 0;
    int rc = MPI_Testall(*n, r, &done, c);
    requests_back(r, *n, reqs);
    statuses_back(c, done ? *n : 0, sts, k);
    *flag = done ? 1 : 0;
    set(ierr, rc);
}

static void testany_as(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_TESTANY, k == F_C_STATUS, testany_fn, ierr, n, reqs, idx, flag, st);
        return;
    }
    said(E_TESTANY, 0);
    MPI_Request *r = requests_c(*n, reqs);
    MPI_Status tmp, *c = status_c(st, k, &tmp);
    int i = MPI_UNDEFINED, done = 0;
    int rc = MPI_Testany(*n, r, &i, &done, c);
    requests_back(r, *n, reqs);
    if (done) status_back(c, st, k);
    *idx = index_f(i);
    *flag = done ? 1 : 0;
    set(ierr, rc);
}

static void request_get_status_as(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr, enum flavour k) {
    if (!ready()) {
        FORWARD(E_REQUEST_GET_STATUS, k == F_C_STATUS, get_status_fn, ierr, req, flag, st);
        return;
    }
    said(E_REQUEST_GET_STATUS, 0);
    MPI_Status tmp, *c = status_c(st, k, &tmp);
    int done = 0;
    int rc = MPI_Request_get_status(MPI_Request_f2c(*req), &done, c);
    if (done) status_back(c, st, k);
    *flag = done ? 1 : 0;
    set(ierr, rc);
}

static void f_request_free(MPI_Fint *req, MPI_Fint *ierr) {
    ready();
    said(E_REQUEST_FREE, 0);
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Request_free(&r);
    *req = MPI_Request_c2f(r);
    set(ierr, rc);
}

static void f_wait(MPI_Fint *req, MPI_Fint *st, MPI_Fint *ierr) {
    wait_as(req, st, ierr, F_INTEGER);
}
static void f_waitall(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *sts, MPI_Fint *ierr) {
    waitall_as(n, reqs, sts, ierr, F_INTEGER);
}
static void f_waitany(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *st, MPI_Fint *ierr) {
    waitany_as(n, reqs, idx, st, ierr, F_INTEGER);
}
static void f_waitsome(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out, MPI_Fint *idx, MPI_Fint *sts, MPI_Fint *ierr) {
    some_as(E_WAITSOME, MPI_Waitsome, n, reqs, out, idx, sts, ierr, F_INTEGER);
}
static void f_test(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    test_as(req, flag, st, ierr, F_INTEGER);
}
static void f_testall(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *flag, MPI_Fint *sts, MPI_Fint *ierr) {
    testall_as(n, reqs, flag, sts, ierr, F_INTEGER);
}
static void f_testany(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    testany_as(n, reqs, idx, flag, st, ierr, F_INTEGER);
}
static void f_testsome(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out, MPI_Fint *idx, MPI_Fint *sts, MPI_Fint *ierr) {
    some_as(E_TESTSOME, MPI_Testsome, n, reqs, out, idx, sts, ierr, F_INTEGER);
}
static void f_request_get_status(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    request_get_status_as(req, flag, st, ierr, F_INTEGER);
}

/* ---- Communicator constructors: the C library maps a communicator to
 * Outboard groups inside the call that makes it, so a Fortran program's
 * communicators must be made through it too (else their collectives pass
 * through). Those taking LOGICALs (MPI_CART_CREATE, MPI_CART_SUB,
 * MPI_GRAPH_CREATE, MPI_INTERCOMM_MERGE) are not wrapped: their
 * communicators pass through. ---- */

/* The new communicator's handle and the code, once the call returned. */
static void new_comm(MPI_Fint *newcomm, MPI_Fint *ierr, int rc, const MPI_Comm *c) {
    if (rc == MPI_SUCCESS) *newcomm = MPI_Comm_c2f(*c);
    set(ierr, rc);
}

static void f_comm_dup(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_DUP, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_Comm_f2c(*comm), &c);
    new_comm(newcomm, ierr, rc, &c);
}

static void f_comm_dup_with_info(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_DUP_WITH_INFO, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup_with_info(MPI_Comm_f2c(*comm), MPI_Info_f2c(*info), &c);
    new_comm(newcomm, ierr, rc, &c);
}

static void f_comm_split(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_SPLIT, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_split(MPI_Comm_f2c(*comm), (int)*color, (int)*key, &c);
    new_comm(newcomm, ierr, rc, &c);
}

static void f_comm_split_type(MPI_Fint *comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_SPLIT_TYPE, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(MPI_Comm_f2c(*comm), (int)*type, (int)*key, MPI_Info_f2c(*info), &c);
    new_comm(newcomm, ierr, rc, &c);
}

static void f_comm_create(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_CREATE, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create(MPI_Comm_f2c(*comm), MPI_Group_f2c(*group), &c);
    new_comm(newcomm, ierr, rc, &c);
}

static void f_comm_create_group(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *tag, MPI_Fint *newcomm, MPI_Fint *ierr) {
    ready();
    said(E_COMM_CREATE_GROUP, 0);
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create_group(MPI_Comm_f2c(*comm), MPI_Group_f2c(*group), (int)*tag, &c);
    new_comm(newcomm, ierr, rc, &c);
}

/* MPI_COMM_SET_INFO: its outboard_* keys choose how the communicator's
 * collectives run (comms.c), so it must reach the C library too. */
static void f_comm_set_info(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *ierr) {
    ready();
    said(E_COMM_SET_INFO, 0);
    set(ierr, MPI_Comm_set_info(MPI_Comm_f2c(*comm), MPI_Info_f2c(*info)));
}

/* ---- The exported names ---- */

/* `impl` under the four manglings of a Fortran name. */
#define FORTRAN_NAMES(impl, lower, upper)                          \
    extern __typeof__(impl) lower __attribute__((alias(#impl)));    \
    extern __typeof__(impl) lower##_ __attribute__((alias(#impl))); \
    extern __typeof__(impl) lower##__ __attribute__((alias(#impl)));\
    extern __typeof__(impl) upper __attribute__((alias(#impl)))
#define ONE_NAME(impl, name) extern __typeof__(impl) name __attribute__((alias(#impl)))

FORTRAN_NAMES(f_init, mpi_init, MPI_INIT);
FORTRAN_NAMES(f_init_thread, mpi_init_thread, MPI_INIT_THREAD);
FORTRAN_NAMES(f_finalize, mpi_finalize, MPI_FINALIZE);
FORTRAN_NAMES(f_barrier, mpi_barrier, MPI_BARRIER);
FORTRAN_NAMES(f_bcast, mpi_bcast, MPI_BCAST);
FORTRAN_NAMES(f_reduce, mpi_reduce, MPI_REDUCE);
FORTRAN_NAMES(f_allreduce, mpi_allreduce, MPI_ALLREDUCE);
FORTRAN_NAMES(f_ibarrier, mpi_ibarrier, MPI_IBARRIER);
FORTRAN_NAMES(f_ibcast, mpi_ibcast, MPI_IBCAST);
FORTRAN_NAMES(f_ireduce, mpi_ireduce, MPI_IREDUCE);
FORTRAN_NAMES(f_iallreduce, mpi_iallreduce, MPI_IALLREDUCE);
FORTRAN_NAMES(f_allgather, mpi_allgather, MPI_ALLGATHER);
FORTRAN_NAMES(f_gather, mpi_gather, MPI_GATHER);
FORTRAN_NAMES(f_scatter, mpi_scatter, MPI_SCATTER);
FORTRAN_NAMES(f_alltoall, mpi_alltoall, MPI_ALLTOALL);
FORTRAN_NAMES(f_reduce_scatter_block, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK);
FORTRAN_NAMES(f_scan, mpi_scan, MPI_SCAN);
FORTRAN_NAMES(f_exscan, mpi_exscan, MPI_EXSCAN);
FORTRAN_NAMES(f_wait, mpi_wait, MPI_WAIT);
FORTRAN_NAMES(f_waitall, mpi_waitall, MPI_WAITALL);
FORTRAN_NAMES(f_waitany, mpi_waitany, MPI_WAITANY);
FORTRAN_NAMES(f_waitsome, mpi_waitsome, MPI_WAITSOME);
FORTRAN_NAMES(f_test, mpi_test, MPI_TEST);
FORTRAN_NAMES(f_testall, mpi_testall, MPI_TESTALL);
FORTRAN_NAMES(f_testany, mpi_testany, MPI_TESTANY);
FORTRAN_NAMES(f_testsome, mpi_testsome, MPI_TESTSOME);
FORTRAN_NAMES(f_request_free, mpi_request_free, MPI_REQUEST_FREE);
FORTRAN_NAMES(f_request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS);
FORTRAN_NAMES(f_comm_dup, mpi_comm_dup, MPI_COMM_DUP);
FORTRAN_NAMES(f_comm_dup_with_info, mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO);
FORTRAN_NAMES(f_comm_split, mpi_comm_split, MPI_COMM_SPLIT);
FORTRAN_NAMES(f_comm_split_type, mpi_comm_split_type, MPI_COMM_SPLIT_TYPE);
FORTRAN_NAMES(f_comm_create, mpi_comm_create, MPI_COMM_CREATE);
FORTRAN_NAMES(f_comm_create_group, mpi_comm_create_group, MPI_COMM_CREATE_GROUP);
FORTRAN_NAMES(f_comm_set_info, mpi_comm_set_info, MPI_COMM_SET_INFO);

#if FORTRAN_OPEN_MPI
/* Open MPI's mpi_f08 routines take what its mpif.h ones take (handles as
 * INTEGERs inside one-member types, INTEGER statuses, the same sentinels),
 * with ierror optional. */
ONE_NAME(f_init, mpi_init_f08_);
ONE_NAME(f_init_thread, mpi_init_thread_f08_);
ONE_NAME(f_finalize, mpi_finalize_f08_);
ONE_NAME(f_barrier, mpi_barrier_f08_);
ONE_NAME(f_bcast, mpi_bcast_f08_);
ONE_NAME(f_reduce, mpi_reduce_f08_);
ONE_NAME(f_allreduce, mpi_allreduce_f08_);
ONE_NAME(f_ibarrier, mpi_ibarrier_f08_);
ONE_NAME(f_ibcast, mpi_ibcast_f08_);
ONE_NAME(f_ireduce, mpi_ireduce_f08_);
ONE_NAME(f_iallreduce, mpi_iallreduce_f08_);
ONE_NAME(f_allgather, mpi_allgather_f08_);
ONE_NAME(f_gather, mpi_gather_f08_);
ONE_NAME(f_scatter, mpi_scatter_f08_);
ONE_NAME(f_alltoall, mpi_alltoall_f08_);
ONE_NAME(f_reduce_scatter_block, mpi_reduce_scatter_block_f08_);
ONE_NAME(f_scan, mpi_scan_f08_);
ONE_NAME(f_exscan, mpi_exscan_f08_);
ONE_NAME(f_wait, mpi_wait_f08_);
ONE_NAME(f_waitall, mpi_waitall_f08_);
ONE_NAME(f_waitany, mpi_waitany_f08_);
ONE_NAME(f_waitsome, mpi_waitsome_f08_);
ONE_NAME(f_test, mpi_test_f08_);
ONE_NAME(f_testall, mpi_testall_f08_);
ONE_NAME(f_testany, mpi_testany_f08_);
ONE_NAME(f_testsome, mpi_testsome_f08_);
ONE_NAME(f_request_free, mpi_request_free_f08_);
ONE_NAME(f_request_get_status, mpi_request_get_status_f08_);
ONE_NAME(f_comm_dup, mpi_comm_dup_f08_);
ONE_NAME(f_comm_dup_with_info, mpi_comm_dup_with_info_f08_);
ONE_NAME(f_comm_split, mpi_comm_split_f08_);
ONE_NAME(f_comm_split_type, mpi_comm_split_type_f08_);
ONE_NAME(f_comm_create, mpi_comm_create_f08_);
ONE_NAME(f_comm_create_group, mpi_comm_create_group_f08_);
ONE_NAME(f_comm_set_info, mpi_comm_set_info_f08_);
#elif FORTRAN_MPICH
/* MPICH's mpi_f08 routines without a buffer call PMPI directly; their
 * statuses are C's. (Those with buffers reach the C functions.) */
static void f08_wait(MPI_Fint *req, MPI_Fint *st, MPI_Fint *ierr) {
    wait_as(req, st, ierr, F_C_STATUS);
}
static void f08_waitall(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *sts, MPI_Fint *ierr) {
    waitall_as(n, reqs, sts, ierr, F_C_STATUS);
}
static void f08_waitany(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *st, MPI_Fint *ierr) {
    waitany_as(n, reqs, idx, st, ierr, F_C_STATUS);
}
static void f08_waitsome(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out, MPI_Fint *idx, MPI_Fint *sts, MPI_Fint *ierr) {
    some_as(E_WAITSOME, MPI_Waitsome, n, reqs, out, idx, sts, ierr, F_C_STATUS);
}
static void f08_test(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    test_as(req, flag, st, ierr, F_C_STATUS);
}
static void f08_testall(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *flag, MPI_Fint *sts, MPI_Fint *ierr) {
    testall_as(n, reqs, flag, sts, ierr, F_C_STATUS);
}
static void f08_testany(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    testany_as(n, reqs, idx, flag, st, ierr, F_C_STATUS);
}
static void f08_testsome(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out, MPI_Fint *idx, MPI_Fint *sts, MPI_Fint *ierr) {
    some_as(E_TESTSOME, MPI_Testsome, n, reqs, out, idx, sts, ierr, F_C_STATUS);
}
static void f08_request_get_status(MPI_Fint *req, MPI_Fint *flag, MPI_Fint *st, MPI_Fint *ierr) {
    request_get_status_as(req, flag, st, ierr, F_C_STATUS);
}
ONE_NAME(f_init, mpi_init_f08_);
ONE_NAME(f_init_thread, mpi_init_thread_f08_);
ONE_NAME(f_finalize, mpi_finalize_f08_);
ONE_NAME(f_barrier, mpi_barrier_f08_);
ONE_NAME(f_ibarrier, mpi_ibarrier_f08_);
ONE_NAME(f08_wait, mpi_wait_f08_);
ONE_NAME(f08_waitall, mpi_waitall_f08_);
ONE_NAME(f08_waitany, mpi_waitany_f08_);
ONE_NAME(f08_waitsome, mpi_waitsome_f08_);
ONE_NAME(f08_test, mpi_test_f08_);
ONE_NAME(f08_testall, mpi_testall_f08_);
ONE_NAME(f08_testany, mpi_testany_f08_);
ONE_NAME(f08_testsome, mpi_testsome_f08_);
ONE_NAME(f_request_free, mpi_request_free_f08_);
ONE_NAME(f08_request_get_status, mpi_request_get_status_f08_);
ONE_NAME(f_comm_dup, mpi_comm_dup_f08_);
ONE_NAME(f_comm_dup_with_info, mpi_comm_dup_with_info_f08_);
ONE_NAME(f_comm_split, mpi_comm_split_f08_);
ONE_NAME(f_comm_split_type, mpi_comm_split_type_f08_);
ONE_NAME(f_comm_create, mpi_comm_create_f08_);
ONE_NAME(f_comm_create_group, mpi_comm_create_group_f08_);
ONE_NAME(f_comm_set_info, mpi_comm_set_info_f08_);
#endif
