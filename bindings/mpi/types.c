/* What a datatype is to Outboard: its signature's bytes, whether count of
 * it lie in memory as one run of bytes, and, for reductions, the engine's
 * type for it.
 *
 * Whether a call is taken over must be decided alike at every rank of the
 * communicator, and MPI lets ranks describe one broadcast with different
 * (count, datatype) pairs of one type signature (a contiguous type of 4
 * MPI_INT at the root, 4 x MPI_INT elsewhere). So a broadcast's decision
 * uses only the signature's bytes; layout (holes, strides, a lower bound)
 * only chooses, per rank, whether the data moves in place or through a
 * packed copy. A reduction with a predefined operation takes a predefined
 * datatype, the same at every rank (MPI 4.0, 6.9.2): its decision may use
 * the handle. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A predefined type's base for reductions (0: Outboard does not combine it). */
static void named_base(MPI_Datatype dt, struct layout *l) {
    int d = 0, u32 = 0, fl = 0;
    if (dt == MPI_INT || dt == MPI_INT32_T) d = sizeof(int) == 4 || dt == MPI_INT32_T ? OUTBOARD_INT32 : 0;
    else if (dt == MPI_LONG) d = sizeof(long) == 8 ? OUTBOARD_INT64 : OUTBOARD_INT32;
    else if (dt == MPI_LONG_LONG || dt == MPI_LONG_LONG_INT || dt == MPI_INT64_T) d = OUTBOARD_INT64;
    else if (dt == MPI_AINT || dt == MPI_OFFSET || dt == MPI_COUNT) d = OUTBOARD_INT64;
    else if (dt == MPI_UNSIGNED_LONG) d = sizeof(unsigned long) == 8 ? OUTBOARD_UINT64 : 0;
    else if (dt == MPI_UNSIGNED_LONG_LONG || dt == MPI_UINT64_T) d = OUTBOARD_UINT64;
    else if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T) { d = OUTBOARD_INT32; u32 = 1; }
    else if (dt == MPI_FLOAT) { d = OUTBOARD_FLOAT; fl = 1; }
    else if (dt == MPI_DOUBLE) { d = OUTBOARD_DOUBLE; fl = 1; }
#if defined(OMPI_HAVE_FORTRAN_INTEGER) ? OMPI_HAVE_FORTRAN_INTEGER : 1
    /* Fortran's default kinds, as gfortran lays them out. */
    else if (dt == MPI_INTEGER) { int s = 0; PMPI_Type_size(dt, &s); d = s == 4 ? OUTBOARD_INT32 : s == 8 ? OUTBOARD_INT64 : 0; }
    else if (dt == MPI_REAL) { int s = 0; PMPI_Type_size(dt, &s); d = s == 4 ? OUTBOARD_FLOAT : 0; fl = 1; }
    else if (dt == MPI_DOUBLE_PRECISION) { int s = 0; PMPI_Type_size(dt, &s); d = s == 8 ? OUTBOARD_DOUBLE : 0; fl = 1; }
#endif
    l->base = d;
    l->base_unsigned32 = u32;
    l->base_float = fl;
}

/* Derived types' layouts are cached as a type attribute (freed with the
 * type; a duplicate works its own out). */
static int keyval = MPI_KEYVAL_INVALID;

static int delete_layout(MPI_Datatype dt, int kv, void *attr, void *extra) {
    (void)dt; (void)kv; (void)extra;
    free(attr);
    return MPI_SUCCESS;
}

void ob_types_start(void) {
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, delete_layout, &keyval, NULL);
}

void ob_types_stop(void) {
    if (keyval != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&keyval);
}

/* Fills `l` for `dt`; -1 if MPI cannot describe it (the call then passes
 * through, and MPI reports whatever is wrong with it). */
/* Predefined types' layouts never change: each thread keeps the last few
 * it met, so that a collective on one costs no MPI queries (they cost more
 * than a collective within a node). */
#define NAMED_CACHE 8
static __thread struct { MPI_Datatype dt; struct layout l; } named_cache[NAMED_CACHE];
static __thread int named_cached, named_next;

int ob_layout(MPI_Datatype dt, struct layout *l) {
    if (dt == MPI_DATATYPE_NULL) return -1;
    for (int i = 0; i < named_cached; i++)
        if (named_cache[i].dt == dt) {
            *l = named_cache[i].l;
            return 0;
        }
    int ni, na, nd, combiner;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return -1;
    int named = combiner == MPI_COMBINER_NAMED;
    if (!named && keyval != MPI_KEYVAL_INVALID) {
        struct layout *cached = NULL;
        int found = 0;
        PMPI_Type_get_attr(dt, keyval, &cached, &found);
        if (found) {
            *l = *cached;
            return 0;
        }
    }
    MPI_Count size, lb, extent, tlb, textent;
    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS || PMPI_Type_get_extent_x(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent_x(dt, &tlb, &textent) != MPI_SUCCESS || size == MPI_UNDEFINED)
        return -1;
    memset(l, 0, sizeof *l);
    l->size = size;
    /* No holes within an element (true extent equals size, from byte 0)
     * and none between elements (extent equals size, lower bound 0). The
     * pair types (MPI_DOUBLE_INT: 12 bytes of data in 16) fail here. */
    l->contiguous = lb == 0 && tlb == 0 && extent == size && textent == size;
    /* Predefined operations combine predefined types only; a derived one
     * passes through, and MPI reports the error it is. */
    if (named && l->contiguous) named_base(dt, l);
    if (named) {
        named_cache[named_next].dt = dt;
        named_cache[named_next].l = *l;
        named_next = (named_next + 1) % NAMED_CACHE;
        if (named_cached < NAMED_CACHE) named_cached++;
    }
    if (!named && keyval != MPI_KEYVAL_INVALID) {
        struct layout *cached = malloc(sizeof *cached);
        *cached = *l;
        PMPI_Type_set_attr(dt, keyval, cached);
    }
    return 0;
}

/* Outboard's operation for MPI's `op` on the base type, or why not. */
enum why ob_reduction(const struct layout *l, MPI_Op op, int *obop) {
    if (!l->base) return W_DATATYPE;
    int bitwise_ok = !l->base_float, u32 = l->base_unsigned32, o = 0;
    if (op == MPI_SUM) o = OUTBOARD_SUM;
    else if (op == MPI_MIN) o = u32 ? 0 : OUTBOARD_MIN; /* no unsigned 32-bit order in the engine */
    else if (op == MPI_MAX) o = u32 ? 0 : OUTBOARD_MAX;
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
    *obop = o;
    return W_TAKEN;
}

/* Packs count elements at buf into exactly `bytes` bytes at out (the
 * signature's size: on one machine MPI's packed form is the data alone). */
int ob_pack(const void *buf, int count, MPI_Datatype dt, void *out, long long bytes, MPI_Comm comm) {
    int pos = 0;
    if (bytes > INT_MAX) return MPI_ERR_COUNT;
    int rc = PMPI_Pack(buf, count, dt, out, (int)bytes, &pos, comm);
    if (rc == MPI_SUCCESS && pos != bytes) rc = MPI_ERR_INTERN;
    return rc;
}

int ob_unpack(const void *in, long long bytes, void *buf, int count, MPI_Datatype dt, MPI_Comm comm) {
    int pos = 0;
    if (bytes > INT_MAX) return MPI_ERR_COUNT;
    int rc = PMPI_Unpack(in, (int)bytes, &pos, buf, count, dt, comm);
    if (rc == MPI_SUCCESS && pos != bytes) rc = MPI_ERR_INTERN;
    return rc;
}
