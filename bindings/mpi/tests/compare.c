/* Compares every collective liboutboard_mpi takes over with PMPI's result:
 * datatypes x operations x sizes (1 element to beyond the offloaded limit)
 * x communicators (world, dup, split, split with reversed keys) x in place,
 * plus broadcasts of any predefined type and of a derived one, barriers,
 * and calls that must pass through (MPI_SHORT, a user-defined operation,
 * MIN/MAX of 32-bit unsigned values). Every result is compared bit for bit:
 * floating-point values are chosen so that sums and products are exact in
 * any order (see fill). A plain MPI program: run it with and without the library.
 * Exits 1 at the first difference. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* quick: fewer sizes and roots (MPICH on an oversubscribed machine spends
 * milliseconds per collective). */
static int wrank, compared, quick;

#define FAIL(...) do { fprintf(stderr, "rank %d: ", wrank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

struct dtype { MPI_Datatype t; const char *name; int size; int is_float; int is_unsigned; };

/* A value for element i at rank r, by `kind`:
 * K_PLAIN: small integers (floats too), so sums of floats are exact and
 *   the order of combination cannot change them; every third integer
 *   element any bits (sums and products wrap).
 * K_ORDER (MIN, MAX): as K_PLAIN, but values of unsigned types stay below
 *   2^(bits-1): Open MPI 4.1 (MPI_UNSIGNED_LONG) and MPICH 4.0 (every
 *   unsigned type) order larger ones as signed, so PMPI would be a wrong
 *   oracle there (Outboard orders them as unsigned).
 * K_PROD: floats in -3..3 (doubles in quarters of that), whose products
 *   over up to 8 ranks are exactly representable, so the order of
 *   combination cannot change them and bits are compared; integers as
 *   K_PLAIN.
 * K_LOGIC (LAND, LOR, LXOR): 0, -1, 1, 2, a quarter of them zero. */
enum kind { K_PLAIN, K_ORDER, K_PROD, K_LOGIC };

static void fill(const struct dtype *d, void *buf, int n, int r, int salt, enum kind kind) {
    for (int i = 0; i < n; i++) {
        long long x = (long long)(r + 1) * 7919 + (long long)i * 104729 + salt;
        long long v = x % 201 - 100;
        unsigned long long u = ((unsigned long long)(r + 1) * 0x9E3779B97F4A7C15ull) ^ ((unsigned long long)i * 0x100000001B3ull) ^ (unsigned)salt;
        if (kind == K_ORDER && d->is_unsigned) u &= 0x7FFFFFFFull, v = v < 0 ? -v : v;
        if (kind == K_PROD && d->is_float) v = x % 7 - 3;
        if (kind == K_LOGIC) v = (long long[]){0, -1, 1, 2}[x % 4];
        int any_bits = i % 3 == 0 && kind != K_LOGIC;
        if (d->t == MPI_FLOAT) ((float *)buf)[i] = (float)v;
        else if (d->t == MPI_DOUBLE) ((double *)buf)[i] = (double)v / 4;
        else if (d->t == MPI_SHORT) ((short *)buf)[i] = (short)v;
        else if (d->size == 4) ((uint32_t *)buf)[i] = any_bits ? (uint32_t)u : (uint32_t)(int32_t)v;
        else ((uint64_t *)buf)[i] = any_bits ? u : (uint64_t)v;
    }
}

static void user_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    for (int i = 0; i < *len; i++) if (((int *)in)[i] > ((int *)inout)[i]) ((int *)inout)[i] = ((int *)in)[i];
}

static void reductions(MPI_Comm comm, const char *cname, int max_count) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    struct dtype types[] = {
        {MPI_INT, "MPI_INT", sizeof(int), 0, 0}, {MPI_LONG, "MPI_LONG", sizeof(long), 0, 0},
        {MPI_LONG_LONG, "MPI_LONG_LONG", 8, 0, 0}, {MPI_UNSIGNED, "MPI_UNSIGNED", 4, 0, 1},
        {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", sizeof(unsigned long), 0, 1}, {MPI_FLOAT, "MPI_FLOAT", 4, 1, 0},
        {MPI_DOUBLE, "MPI_DOUBLE", 8, 1, 0}, {MPI_INT32_T, "MPI_INT32_T", 4, 0, 0}, {MPI_INT64_T, "MPI_INT64_T", 8, 0, 0},
        {MPI_UINT32_T, "MPI_UINT32_T", 4, 0, 1}, {MPI_UINT64_T, "MPI_UINT64_T", 8, 0, 1}, {MPI_SHORT, "MPI_SHORT", 2, 0, 0},
    };
    MPI_Op user;
    MPI_Op_create(user_max, 1, &user);
    struct { MPI_Op op; const char *name; int ints_only; enum kind kind; } ops[] = {
        {MPI_SUM, "MPI_SUM", 0, K_PLAIN}, {MPI_MIN, "MPI_MIN", 0, K_ORDER}, {MPI_MAX, "MPI_MAX", 0, K_ORDER},
        {MPI_BAND, "MPI_BAND", 1, K_PLAIN}, {MPI_BOR, "MPI_BOR", 1, K_PLAIN}, {MPI_PROD, "MPI_PROD", 0, K_PROD},
        {MPI_BXOR, "MPI_BXOR", 1, K_PLAIN}, {MPI_LAND, "MPI_LAND", 1, K_LOGIC}, {MPI_LOR, "MPI_LOR", 1, K_LOGIC},
        {MPI_LXOR, "MPI_LXOR", 1, K_LOGIC},
    };
    int all_counts[] = {1, 2, 7, 100, 1000, max_count}, quick_counts[] = {1, 1000, max_count};
    int *counts = quick ? quick_counts : all_counts;
    size_t ncounts = quick ? 3 : 6;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const struct dtype *d = &types[ti];
        for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++) {
            if (ops[oi].ints_only && d->is_float) continue;
            for (size_t ci = 0; ci < ncounts; ci++) {
                int n = counts[ci];
                size_t bytes = (size_t)n * d->size;
                char *in = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
                fill(d, in, n, rank, (int)(ti * 31 + oi), ops[oi].kind);
                for (int inplace = 0; inplace < 2; inplace++) {
                    /* Allreduce. */
                    PMPI_Allreduce(in, want, n, d->t, ops[oi].op, comm);
                    memcpy(got, in, bytes);
                    MPI_Allreduce(inplace ? MPI_IN_PLACE : in, got, n, d->t, ops[oi].op, comm);
                    if (memcmp(got, want, bytes))
                        FAIL("MPI_Allreduce %s %s n=%d in_place=%d on %s differs from PMPI", d->name, ops[oi].name, n, inplace, cname);
                    compared++;
                    /* Reduce to every root. */
                    for (int root = quick ? size - 1 : 0; root < size; root++) {
                        PMPI_Reduce(in, want, n, d->t, ops[oi].op, root, comm);
                        memcpy(got, in, bytes);
                        const void *src = inplace && rank == root ? MPI_IN_PLACE : in;
                        /* recvbuf is not significant off the root, but MPICH 4.0's
                         * large-count reduce writes to it: pass one. */
                        MPI_Reduce(src, got, n, d->t, ops[oi].op, root, comm);
                        if (rank == root && memcmp(got, want, bytes))
                            FAIL("MPI_Reduce %s %s n=%d root=%d in_place=%d on %s differs from PMPI", d->name, ops[oi].name, n, root, inplace, cname);
                        compared++;
                    }
                }
                free(in); free(got); free(want);
            }
        }
    }
    /* A user-defined operation passes through. */
    int x = rank * 3 - 1, a = 0, b = 0;
    MPI_Allreduce(&x, &a, 1, MPI_INT, user, comm);
    PMPI_Allreduce(&x, &b, 1, MPI_INT, MPI_MAX, comm);
    if (a != b) FAIL("user-defined op on %s", cname);
    MPI_Op_free(&user);
}

static void broadcasts(MPI_Comm comm, const char *cname, int max_bytes) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int lens[] = {0, 1, 13, 1000, 4000, 70000, max_bytes / 8 + 8};
    for (int root = 0; root < size; root += quick ? size - 1 + (size == 1) : 1) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int n = lens[li];
            double *buf = malloc(sizeof(double) * (n + 1));
            for (int i = 0; i < n; i++) buf[i] = rank == root ? i * 1.5 + root : -1;
            MPI_Bcast(buf, n, MPI_DOUBLE, root, comm);
            for (int i = 0; i < n; i++) if (buf[i] != i * 1.5 + root) FAIL("MPI_Bcast double n=%d root=%d on %s: [%d]=%g", n, root, cname, i, buf[i]);
            char *c = (char *)buf;
            for (int i = 0; i < n; i++) c[i] = rank == root ? (char)(i ^ root) : 0;
            MPI_Bcast(c, n, MPI_CHAR, root, comm);
            for (int i = 0; i < n; i++) if (c[i] != (char)(i ^ root)) FAIL("MPI_Bcast char n=%d root=%d on %s", n, root, cname);
            compared += 2;
            free(buf);
        }
        /* A derived (strided) type passes through. */
        MPI_Datatype vec;
        MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
        MPI_Type_commit(&vec);
        int v[8];
        for (int i = 0; i < 8; i++) v[i] = rank == root ? 100 + i : -i;
        MPI_Bcast(v, 1, vec, root, comm);
        for (int i = 0; i < 8; i++) if (v[i] != (i % 2 == 0 ? 100 + i : rank == root ? 100 + i : -i)) FAIL("derived bcast on %s", cname);
        MPI_Type_free(&vec);
        compared++;
    }
    MPI_Barrier(comm);
}

/* Broadcasts of every predefined datatype, pair types (holes within each
 * element) included: the whole buffer, holes and all, equals what
 * PMPI_Bcast leaves in one filled alike. */
static void every_type(MPI_Comm comm, const char *cname) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    struct { MPI_Datatype t; const char *name; } types[] = {
        {MPI_CHAR, "MPI_CHAR"}, {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"}, {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"}, {MPI_BYTE, "MPI_BYTE"},
        {MPI_WCHAR, "MPI_WCHAR"}, {MPI_SHORT, "MPI_SHORT"}, {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"}, {MPI_INT, "MPI_INT"},
        {MPI_UNSIGNED, "MPI_UNSIGNED"}, {MPI_LONG, "MPI_LONG"}, {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"},
        {MPI_LONG_LONG, "MPI_LONG_LONG"}, {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"}, {MPI_FLOAT, "MPI_FLOAT"},
        {MPI_DOUBLE, "MPI_DOUBLE"}, {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"}, {MPI_C_BOOL, "MPI_C_BOOL"}, {MPI_INT8_T, "MPI_INT8_T"},
        {MPI_INT16_T, "MPI_INT16_T"}, {MPI_UINT8_T, "MPI_UINT8_T"}, {MPI_UINT16_T, "MPI_UINT16_T"},
        {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX"}, {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"},
        {MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"}, {MPI_AINT, "MPI_AINT"}, {MPI_OFFSET, "MPI_OFFSET"},
        {MPI_FLOAT_INT, "MPI_FLOAT_INT"}, {MPI_DOUBLE_INT, "MPI_DOUBLE_INT"}, {MPI_LONG_INT, "MPI_LONG_INT"},
        {MPI_2INT, "MPI_2INT"}, {MPI_SHORT_INT, "MPI_SHORT_INT"}, {MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"},
    };
    int counts[] = {2, 777, 1, 3, 5000};
    size_t ncounts = quick ? 2 : 5;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        MPI_Aint lb, extent;
        MPI_Type_get_extent(types[ti].t, &lb, &extent);
        for (size_t ci = 0; ci < ncounts; ci++) {
            int n = counts[ci], root = (int)(ti + ci) % size;
            size_t bytes = (size_t)n * extent;
            unsigned char *got = malloc(bytes), *want = malloc(bytes);
            for (size_t i = 0; i < bytes; i++) got[i] = want[i] = rank == root ? (unsigned char)(i * 7 + ti) : 0xEE;
            for (int nb = 0; nb < 2; nb++) {
                if (nb) {
                    MPI_Request r;
                    MPI_Ibcast(got, n, types[ti].t, root, comm, &r);
                    MPI_Wait(&r, MPI_STATUS_IGNORE);
                } else {
                    MPI_Bcast(got, n, types[ti].t, root, comm);
                }
                if (!nb) PMPI_Bcast(want, n, types[ti].t, root, comm);
                if (memcmp(got, want, bytes)) FAIL("MPI_%sbcast %s n=%d root=%d on %s differs from PMPI", nb ? "I" : "B", types[ti].name, n, root, cname);
                compared++;
            }
            free(got);
            free(want);
        }
    }
    /* MINLOC and MAXLOC on the pair types, and the types Outboard does not
     * combine (they pass through): results equal PMPI's. */
    struct { MPI_Datatype t; const char *name; MPI_Op op; } pairs[] = {
        {MPI_2INT, "MPI_2INT", MPI_MINLOC}, {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", MPI_MAXLOC},
        {MPI_FLOAT_INT, "MPI_FLOAT_INT", MPI_MINLOC}, {MPI_LONG_INT, "MPI_LONG_INT", MPI_MAXLOC},
        {MPI_SHORT_INT, "MPI_SHORT_INT", MPI_MINLOC}, {MPI_SHORT, "MPI_SHORT", MPI_SUM},
        {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", MPI_MAX}, {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", MPI_SUM},
        {MPI_C_BOOL, "MPI_C_BOOL", MPI_LOR}, {MPI_BYTE, "MPI_BYTE", MPI_BXOR}, {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", MPI_MAX},
        {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", MPI_SUM},
    };
    for (size_t pi = 0; pi < sizeof pairs / sizeof *pairs; pi++) {
        MPI_Aint lb, extent;
        MPI_Type_get_extent(pairs[pi].t, &lb, &extent);
        int n = 37, tsize;
        MPI_Type_size(pairs[pi].t, &tsize);
        size_t bytes = (size_t)n * extent;
        unsigned char *in = calloc(1, bytes), *got = calloc(1, bytes), *want = calloc(1, bytes);
        for (int i = 0; i < n; i++) {
            unsigned char *e = in + (size_t)i * extent;
            int v = (rank * 31 + i * 17) % 23, idx = rank * 1000 + i;
            if (pairs[pi].t == MPI_2INT) { ((int *)e)[0] = v; ((int *)e)[1] = idx; }
            else if (pairs[pi].t == MPI_DOUBLE_INT) { *(double *)e = v * 0.5; *(int *)(e + sizeof(double)) = idx; }
            else if (pairs[pi].t == MPI_FLOAT_INT) { *(float *)e = (float)v; *(int *)(e + sizeof(float)) = idx; }
            else if (pairs[pi].t == MPI_LONG_INT) { *(long *)e = v; *(int *)(e + sizeof(long)) = idx; }
            else if (pairs[pi].t == MPI_SHORT_INT) { *(short *)e = (short)v; *(int *)(e + sizeof(int)) = idx; }
            else if (pairs[pi].t == MPI_SHORT) *(short *)e = (short)(v - 11);
            else if (pairs[pi].t == MPI_LONG_DOUBLE) *(long double *)e = v * 0.25L;
            else if (pairs[pi].t == MPI_C_DOUBLE_COMPLEX) { ((double *)e)[0] = v; ((double *)e)[1] = -v * 0.5; }
            else *e = (unsigned char)(v * 11 + (pairs[pi].t == MPI_C_BOOL ? 0 : rank)) % (pairs[pi].t == MPI_C_BOOL ? 2 : 256);
        }
        memcpy(got, in, bytes);
        memcpy(want, in, bytes);
        MPI_Allreduce(MPI_IN_PLACE, got, n, pairs[pi].t, pairs[pi].op, comm);
        PMPI_Allreduce(MPI_IN_PLACE, want, n, pairs[pi].t, pairs[pi].op, comm);
        /* Compare the data bytes only (pair types have padding). */
        for (int i = 0; i < n; i++)
            if (memcmp(got + (size_t)i * extent, want + (size_t)i * extent, (size_t)(pairs[pi].t == MPI_LONG_DOUBLE ? 10 : tsize)) &&
                pairs[pi].t != MPI_SHORT_INT && pairs[pi].t != MPI_DOUBLE_INT && pairs[pi].t != MPI_LONG_INT && pairs[pi].t != MPI_FLOAT_INT)
                FAIL("MPI_Allreduce %s element %d on %s differs from PMPI", pairs[pi].name, i, cname);
        if (memcmp(got, want, bytes) && (pairs[pi].t == MPI_2INT || pairs[pi].t == MPI_FLOAT_INT))
            FAIL("MPI_Allreduce %s on %s differs from PMPI", pairs[pi].name, cname);
        compared++;
        free(in); free(got); free(want);
    }
    MPI_Barrier(comm);
}

/* Derived datatypes in broadcasts: a contiguous type and a strided
 * (non-contiguous) one, blocking and not, and ranks that describe one
 * message with different (count, datatype) pairs of one type signature -
 * the library must decide alike at every rank. (Reductions with predefined
 * operations take predefined types only, the same at every rank: MPI 4.0,
 * 6.9.2.) */
static void derived(MPI_Comm comm, const char *cname) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Datatype three, strided;
    MPI_Type_contiguous(3, MPI_INT, &three);
    MPI_Type_commit(&three);
    /* 4 doubles at every other slot: 32 bytes of data in a 56-byte extent. */
    MPI_Type_vector(4, 1, 2, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(strided, &lb, &ext);
    const int stride = (int)(ext / sizeof(double));
    for (int k = 0; k < (quick ? 2 : 3); k++) {
        int n = k == 0 ? 1 : k == 1 ? 3000 : 50, root = k % size;
        /* The root sends n x three, the others receive 3n ints. */
        int *got = malloc(sizeof(int) * 3 * n);
        for (int i = 0; i < 3 * n; i++) got[i] = rank == root ? i * 5 + k : -1;
        if (rank == root) MPI_Bcast(got, n, three, root, comm);
        else MPI_Bcast(got, 3 * n, MPI_INT, root, comm);
        for (int i = 0; i < 3 * n; i++) if (got[i] != i * 5 + k) FAIL("MPI_Bcast mixed three/MPI_INT n=%d root=%d on %s: [%d]=%d", n, root, cname, i, got[i]);
        free(got);
        /* Strided doubles through a packed copy: n strided elements at
         * every rank (blocking and not), then strided at the root and
         * plain elsewhere, then the reverse; the gaps stay untouched. */
        int span = stride * n;
        double *buf = malloc(sizeof(double) * span), *plain = malloc(sizeof(double) * 4 * n);
        for (int nb = 0; nb < 3; nb++) {
            for (int i = 0; i < span; i++) buf[i] = -1000 - i;
            for (int e = 0; e < n; e++)
                for (int j = 0; j < 4; j++)
                    if (rank == root) buf[e * stride + 2 * j] = (root * 7 + e * 3 + j + nb) % 11 - 5;
            if (nb == 1) {
                MPI_Request r;
                MPI_Ibcast(buf, n, strided, root, comm, &r);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
            } else if (nb == 0) {
                MPI_Bcast(buf, n, strided, root, comm);
            } else if (rank == root) {
                MPI_Bcast(buf, n, strided, root, comm);
            } else {
                for (int i = 0; i < 4 * n; i++) plain[i] = -1;
                MPI_Bcast(plain, 4 * n, MPI_DOUBLE, root, comm);
                for (int e = 0; e < n; e++)
                    for (int j = 0; j < 4; j++) buf[e * stride + 2 * j] = plain[e * 4 + j];
            }
            for (int e = 0; e < n; e++)
                for (int j = 0; j < 4; j++) {
                    int at = e * stride + 2 * j;
                    if (buf[at] != (root * 7 + e * 3 + j + nb) % 11 - 5) FAIL("MPI_%sbcast strided (%d) n=%d root=%d on %s element %d.%d", nb == 1 ? "I" : "B", nb, n, root, cname, e, j);
                    if (j < 3 && buf[at + 1] != -1000 - (at + 1)) FAIL("MPI_Bcast strided (%d) wrote a gap n=%d on %s", nb, n, cname);
                }
            compared++;
        }
        /* Plain at the root, strided elsewhere. */
        for (int i = 0; i < span; i++) buf[i] = -1000 - i;
        for (int i = 0; i < 4 * n; i++) plain[i] = (root * 3 + i) % 13;
        if (rank == root) MPI_Bcast(plain, 4 * n, MPI_DOUBLE, root, comm);
        else MPI_Bcast(buf, n, strided, root, comm);
        for (int e = 0; rank != root && e < n; e++)
            for (int j = 0; j < 4; j++)
                if (buf[e * stride + 2 * j] != (root * 3 + e * 4 + j) % 13) FAIL("MPI_Bcast plain root to strided n=%d root=%d on %s", n, root, cname);
        compared += 2;
        free(buf); free(plain);
    }
    MPI_Type_free(&three);
    MPI_Type_free(&strided);
    MPI_Barrier(comm);
}

/* Non-blocking collectives mixed with point-to-point requests in one array,
 * finished by each wait and test function in turn; results against PMPI's
 * blocking ones. */
static void nonblocking(MPI_Comm comm, const char *cname) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int counts[] = {1, 100, 3000};
    for (int round = 0; round < 5; round++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            int n = counts[ci], root = (round + (int)ci) % size;
            long long *in = malloc(8 * n), *sum = malloc(8 * n), *want = malloc(8 * n), *red = malloc(8 * n), *wred = malloc(8 * n);
            double *bc = malloc(8 * n), *d = malloc(8 * n), *dmax = malloc(8 * n), *wdmax = malloc(8 * n);
            for (int i = 0; i < n; i++) {
                in[i] = (long long)(rank + 1) * (i + 3) - 50;
                d[i] = (rank * 13 + i) % 29 - 7.5;
                bc[i] = rank == root ? i * 0.25 : -1;
            }
            int sendv = rank * 100 + round, recvv = -1;
            int next = (rank + 1) % size, prev = (rank + size - 1) % size;
            MPI_Request r[7];
            MPI_Irecv(&recvv, 1, MPI_INT, prev, 77, comm, &r[0]);
            MPI_Iallreduce(in, sum, n, MPI_LONG_LONG, MPI_SUM, comm, &r[1]);
            MPI_Ibarrier(comm, &r[2]);
            MPI_Ireduce(in, red, n, MPI_LONG_LONG, round % 2 ? MPI_MIN : MPI_BOR, root, comm, &r[3]);
            MPI_Isend(&sendv, 1, MPI_INT, next, 77, comm, &r[4]);
            MPI_Ibcast(bc, n, MPI_DOUBLE, root, comm, &r[5]);
            memcpy(dmax, d, 8 * n);
            MPI_Iallreduce(MPI_IN_PLACE, dmax, n, MPI_DOUBLE, MPI_MAX, comm, &r[6]);
            MPI_Status st[7];
            if (round == 0) {
                MPI_Waitall(7, r, st);
            } else if (round == 1) {
                int flag = 0;
                while (!flag) MPI_Testall(7, r, &flag, st);
            } else if (round == 2) {
                for (int left = 7; left > 0; left--) {
                    int idx;
                    MPI_Waitany(7, r, &idx, st);
                    if (idx == MPI_UNDEFINED || r[idx] != MPI_REQUEST_NULL) FAIL("Waitany on %s", cname);
                }
            } else if (round == 3) {
                int left = 7, idx[7], out;
                while (left > 0) {
                    MPI_Waitsome(7, r, &out, idx, st);
                    if (out == MPI_UNDEFINED || out < 1) FAIL("Waitsome on %s", cname);
                    left -= out;
                }
            } else {
                for (int i = 6; i >= 0; i--) {
                    int flag = 0;
                    while (!flag) MPI_Request_get_status(r[i], &flag, MPI_STATUS_IGNORE);
                    flag = 0;
                    while (!flag) MPI_Test(&r[i], &flag, &st[0]);
                    if (r[i] != MPI_REQUEST_NULL) FAIL("Test left a request on %s", cname);
                }
            }
            for (int i = 0; i < 7; i++) if (r[i] != MPI_REQUEST_NULL) FAIL("round %d left request %d on %s", round, i, cname);
            if (recvv != prev * 100 + round) FAIL("Irecv got %d on %s", recvv, cname);
            PMPI_Allreduce(in, want, n, MPI_LONG_LONG, MPI_SUM, comm);
            PMPI_Reduce(in, wred, n, MPI_LONG_LONG, round % 2 ? MPI_MIN : MPI_BOR, root, comm);
            PMPI_Allreduce(d, wdmax, n, MPI_DOUBLE, MPI_MAX, comm);
            if (memcmp(sum, want, 8 * n)) FAIL("MPI_Iallreduce n=%d round %d on %s differs from PMPI", n, round, cname);
            if (rank == root && memcmp(red, wred, 8 * n)) FAIL("MPI_Ireduce n=%d round %d on %s differs from PMPI", n, round, cname);
            if (memcmp(dmax, wdmax, 8 * n)) FAIL("MPI_Iallreduce in place n=%d round %d on %s differs from PMPI", n, round, cname);
            for (int i = 0; i < n; i++) if (bc[i] != i * 0.25) FAIL("MPI_Ibcast n=%d round %d on %s", n, round, cname);
            compared += 4;
            free(in); free(sum); free(want); free(red); free(wred); free(bc); free(d); free(dmax); free(wdmax);
        }
    }
    /* A freed point-to-point request beside a non-blocking collective
     * (freeing a collective's request is erroneous in MPI). */
    MPI_Request fr[2];
    int one = rank, got = -1;
    MPI_Irecv(&got, 1, MPI_INT, (rank + size - 1) % size, 78, comm, &fr[0]);
    MPI_Isend(&one, 1, MPI_INT, (rank + 1) % size, 78, comm, &fr[1]);
    MPI_Request_free(&fr[1]);
    MPI_Request b;
    MPI_Ibarrier(comm, &b);
    MPI_Wait(&fr[0], MPI_STATUS_IGNORE);
    MPI_Wait(&b, MPI_STATUS_IGNORE);
    if (fr[1] != MPI_REQUEST_NULL || got != (rank + size - 1) % size) FAIL("Request_free on %s", cname);
    MPI_Barrier(comm);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    int wsize;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    /* Beyond the library's default limit (OUTBOARD_MPI_MAX_BYTES) in the
     * largest case, 1 MiB of doubles. */
    int max_count = argc > 1 ? atoi(argv[1]) : 140000;
    quick = argc > 2 && !strcmp(argv[2], "quick");
    /* Each operation first on a communicator of its own, so that the
     * verbose mode's line for that communicator says whether the operation
     * was taken over. */
    struct { MPI_Op op; const char *name; } first[] = {
        {MPI_SUM, "op MPI_SUM"}, {MPI_PROD, "op MPI_PROD"}, {MPI_BXOR, "op MPI_BXOR"},
        {MPI_LAND, "op MPI_LAND"}, {MPI_LOR, "op MPI_LOR"}, {MPI_LXOR, "op MPI_LXOR"},
    };
    for (size_t i = 0; i < sizeof first / sizeof *first; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_set_name(c, first[i].name);
        int v[3] = {wrank + 1, wrank % 2, 3}, got[3], want[3];
        MPI_Allreduce(v, got, 3, MPI_INT, first[i].op, c);
        PMPI_Allreduce(v, want, 3, MPI_INT, first[i].op, c);
        if (memcmp(got, want, sizeof got)) FAIL("MPI_Allreduce on %s differs from PMPI", first[i].name);
        compared++;
        MPI_Comm_free(&c);
    }
    MPI_Comm dup, half, rev;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, "dup");
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    MPI_Comm_set_name(half, "split");
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
    MPI_Comm_set_name(rev, "reversed");
    MPI_Barrier(MPI_COMM_WORLD);
    struct { MPI_Comm c; const char *name; } comms[] = {{MPI_COMM_WORLD, "MPI_COMM_WORLD"}, {dup, "dup"}, {half, "split"}, {rev, "reversed"}};
    for (size_t i = 0; i < sizeof comms / sizeof *comms; i++) {
        MPI_Barrier(comms[i].c);
        broadcasts(comms[i].c, comms[i].name, max_count * 8);
        reductions(comms[i].c, comms[i].name, i == 0 ? max_count : 1000);
        nonblocking(comms[i].c, comms[i].name);
        /* Quick: the layouts on two communicators only. */
        if (quick && i != 0 && i != 3) continue;
        every_type(comms[i].c, comms[i].name);
        derived(comms[i].c, comms[i].name);
    }
    /* Communicators freed and made again reuse nothing stale. */
    for (int k = 0; k < 3; k++) {
        MPI_Comm t;
        MPI_Comm_split(dup, wrank < wsize / 2, -wrank, &t);
        long long s = wrank, sum = 0, want = 0;
        MPI_Allreduce(&s, &sum, 1, MPI_LONG_LONG, MPI_SUM, t);
        PMPI_Allreduce(&s, &want, 1, MPI_LONG_LONG, MPI_SUM, t);
        if (sum != want) FAIL("allreduce on a re-made split");
        MPI_Comm_free(&t);
    }
    /* Communicators from MPI_Comm_split_type and MPI_Comm_create. */
    MPI_Comm shared, evens;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
    MPI_Group wg, eg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int range[1][3] = {{0, wsize - 1, 2}};
    MPI_Group_range_incl(wg, 1, range, &eg);
    MPI_Comm_create(MPI_COMM_WORLD, eg, &evens);
    MPI_Group_free(&eg);
    MPI_Group_free(&wg);
    MPI_Comm made[2] = {shared, evens};
    for (int k = 0; k < 2; k++) {
        if (made[k] == MPI_COMM_NULL) continue;
        double v[3] = {wrank, -wrank * 0.5, 7}, got[3], want[3];
        MPI_Allreduce(v, got, 3, MPI_DOUBLE, MPI_MAX, made[k]);
        PMPI_Allreduce(v, want, 3, MPI_DOUBLE, MPI_MAX, made[k]);
        int b = wrank * 11, b0 = b;
        MPI_Bcast(&b, 1, MPI_INT, 0, made[k]);
        PMPI_Bcast(&b0, 1, MPI_INT, 0, made[k]);
        if (memcmp(got, want, sizeof got) || b != b0) FAIL("collectives on a communicator from %s", k ? "MPI_Comm_create" : "MPI_Comm_split_type");
        compared += 2;
        MPI_Comm_free(&made[k]);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    MPI_Comm_free(&rev);
    printf("rank %d: %d comparisons with PMPI equal\n", wrank, compared);
    MPI_Finalize();
    return 0;
}
