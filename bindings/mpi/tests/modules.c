/* NICVM modules as MPI operators (outboard_mpi.h), run by
 * crates/cli/tests/mpi_preload.rs under Open MPI and MPICH: a module's
 * MPI_Op in MPI_Allreduce, MPI_Reduce, MPI_Iallreduce and in place, on
 * the communicator it was loaded on (the engines combine) and on a
 * duplicate (MPI does, running the module on the host), and in
 * MPI_Reduce_local, each result equal to a reference computed here; a
 * source that does not compile and, with `engines` as the argument
 * (Outboard up), a module that runs out of fuel: errors whose
 * MPI_Error_string names the module. The first failed check exits
 * non-zero naming the line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboard_mpi.h"

static int rank, size, checks;

#define CHECK(cond) do { checks++; if (!(cond)) { \
    fprintf(stderr, "rank %d: check failed at %s:%d: %s\n", rank, __FILE__, __LINE__, #cond); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define OK(call) do { int rc_ = (call); checks++; if (rc_ != MPI_SUCCESS) { \
    char s_[MPI_MAX_ERROR_STRING]; int n_ = 0; MPI_Error_string(rc_, s_, &n_); \
    fprintf(stderr, "rank %d: %s failed at line %d: %s\n", rank, #call, __LINE__, s_); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

/* Element-wise maximum of absolute values of int64s: no MPI operation. */
static const char *ABSMAX =
    "func abs(v)\n"
    "    if v < 0 then return -v; end if;\n"
    "    return v;\n"
    "end func;\n"
    "func main()\n"
    "    var off = 0;\n"
    "    if packet_length() != acc_length() or packet_length() % 8 != 0 then return NICVM_RESULT_FAILURE; end if;\n"
    "    while off < packet_length() do\n"
    "        if abs(packet_get_i64(off)) > abs(acc_get_i64(off)) then acc_set_i64(off, abs(packet_get_i64(off)));\n"
    "        else acc_set_i64(off, abs(acc_get_i64(off))); end if;\n"
    "        off = off + 8;\n"
    "    end while;\n"
    "    return NICVM_RESULT_PACKET_CONSUMED;\n"
    "end func;\n";

static const char *SPIN = "func main()\n    while 1 do end while;\n    return 0;\nend func;\n";

#define N 41

static long long value(int r, int i) {
    long long v = ((long long)i * 7919 + (long long)r * 104729) % 1000003 - 500000;
    return (i + r) % 3 == 0 ? -v : v;
}

static long long abs64(long long v) { return v < 0 ? -v : v; }

static void check_absmax(const long long *got, int line) {
    for (int i = 0; i < N; i++) {
        long long want = 0;
        for (int r = 0; r < size; r++)
            if (abs64(value(r, i)) > want) want = abs64(value(r, i));
        checks++;
        if (got[i] != want) {
            fprintf(stderr, "rank %d: element %d is %lld, not %lld (line %d)\n", rank, i, got[i], want, line);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

/* `rc` is an error whose string holds `text`. */
static void fails_with(int rc, const char *text, int line) {
    char s[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, s, &n);
    checks++;
    if (rc == MPI_SUCCESS || !strstr(s, text)) {
        fprintf(stderr, "rank %d: line %d: wanted an error with \"%s\", got %d (%s)\n", rank, line, text, rc, s);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("rank %d: error as expected: %s\n", rank, s);
}

int main(int argc, char **argv) {
    int engines = argc > 1 && !strcmp(argv[1], "engines");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    fails_with(MPIX_Outboard_module_load("broken", "func main(\n  return 0;\nend func;\n", MPI_COMM_WORLD), "module 'broken' does not compile: line 2", __LINE__);
    MPI_Op none;
    fails_with(MPIX_Outboard_op_create("nowhere", &none), "no module 'nowhere' was loaded", __LINE__);

    OK(MPIX_Outboard_module_load("absmax", ABSMAX, MPI_COMM_WORLD));
    fails_with(MPIX_Outboard_module_load("absmax", ABSMAX, MPI_COMM_WORLD), "module 'absmax': a module of that name was loaded before", __LINE__);
    MPI_Op op;
    OK(MPIX_Outboard_op_create("absmax", &op));
    long long mine[N], out[N];
    for (int i = 0; i < N; i++) mine[i] = value(rank, i);

    /* On the communicator it was loaded on: the engines combine. */
    for (int round = 0; round < 3; round++) {
        memset(out, 0, sizeof out);
        OK(MPI_Allreduce(mine, out, N, MPI_LONG_LONG, op, MPI_COMM_WORLD));
        check_absmax(out, __LINE__);
    }
    memset(out, 0, sizeof out);
    OK(MPI_Reduce(mine, out, N, MPI_LONG_LONG, op, size - 1, MPI_COMM_WORLD));
    if (rank == size - 1) check_absmax(out, __LINE__);
    memcpy(out, mine, sizeof out);
    MPI_Request req;
    OK(MPI_Iallreduce(MPI_IN_PLACE, out, N, MPI_LONG_LONG, op, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check_absmax(out, __LINE__);

    /* Elsewhere MPI reduces, running the module on the host. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    memset(out, 0, sizeof out);
    OK(MPI_Allreduce(mine, out, N, MPI_LONG_LONG, op, dup));
    check_absmax(out, __LINE__);
    OK(MPI_Comm_free(&dup));
    long long acc[N];
    memcpy(acc, mine, sizeof acc);
    for (int r = 0; r < size; r++) {
        long long theirs[N];
        for (int i = 0; i < N; i++) theirs[i] = value(r, i);
        OK(MPI_Reduce_local(theirs, acc, N, MPI_LONG_LONG, op));
    }
    check_absmax(acc, __LINE__);
    OK(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL);

    /* A module that runs out of fuel on the engines: every rank's
     * allreduce fails naming it, and the next collective runs. (On the
     * host it would end the job, as an MPI operator cannot fail.) */
    if (engines) {
        OK(MPIX_Outboard_module_load("spin", SPIN, MPI_COMM_WORLD));
        MPI_Op spin;
        OK(MPIX_Outboard_op_create("spin", &spin));
        fails_with(MPI_Allreduce(mine, out, N, MPI_LONG_LONG, spin, MPI_COMM_WORLD), "module 'spin'", __LINE__);
        OK(MPI_Op_free(&spin));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        int one = 1, all = 0;
        OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(all == size);
    }

    MPI_Finalize();
    printf("rank %d: modules: all %d checks passed\n", rank, checks);
    return 0;
}
