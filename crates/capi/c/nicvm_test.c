/* NICVM modules through the C ABI, run by crates/cli/tests/capi.rs under
 * `outboard run`: compile (and refuse bad names, sources and bytecode),
 * load, reduce and allreduce with a module's operator (every result equal
 * to a reference computed here), the same module from its bytecode, run
 * on the host, list, send and receive, replace, purge, free, and modules
 * that fail as operators (out of fuel, division by zero): every rank gets
 * OUTBOARD_ERR_MODULE naming the module, and later collectives still run.
 * The first failed check exits non-zero naming the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

#include "check.h"

/* Element-wise maximum of absolute values of i64 vectors: not one of the
 * built-in operators. */
static const char *ABSMAX =
    "func abs(v)\n"
    "    if v < 0 then return -v; end if;\n"
    "    return v;\n"
    "end func;\n"
    "func main()\n"
    "    var off = 0;\n"
    "    var len = packet_length();\n"
    "    if len != acc_length() or len % 8 != 0 then return NICVM_RESULT_FAILURE; end if;\n"
    "    while off < len do\n"
    "        if abs(packet_get_i64(off)) > abs(acc_get_i64(off)) then acc_set_i64(off, abs(packet_get_i64(off)));\n"
    "        else acc_set_i64(off, abs(acc_get_i64(off))); end if;\n"
    "        off = off + 8;\n"
    "    end while;\n"
    "    return NICVM_RESULT_PACKET_CONSUMED;\n"
    "end func;\n";

/* Element-wise minimum: what ABSMAX is replaced with. */
static const char *MIN =
    "func main()\n"
    "    var off = 0;\n"
    "    while off < packet_length() do\n"
    "        if packet_get_i64(off) < acc_get_i64(off) then acc_set_i64(off, packet_get_i64(off)); end if;\n"
    "        off = off + 8;\n"
    "    end while;\n"
    "    return NICVM_RESULT_PACKET_CONSUMED;\n"
    "end func;\n";

/* Never finishes: runs out of fuel on every contribution. */
static const char *SPIN = "func main()\n    while 1 do end while;\n    return 0;\nend func;\n";

/* Divides by zero on every contribution. */
static const char *DIVZERO = "func main()\n    var z = packet_length() - packet_length();\n    return 1 / z;\nend func;\n";

/* Lets a packet go on to this host. */
static const char *PASS = "func main()\n    return NICVM_RESULT_SUCCESS;\nend func;\n";

#define N 37

/* Rank r's element i: signs and sizes that differ by rank. */
static int64_t value(uint32_t r, int i) {
    int64_t v = ((int64_t)i * 7919 + (int64_t)r * 104729) % 1000003 - 500000;
    return (i + r) % 3 == 0 ? -v : v;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

static void check_absmax(const int64_t *got) {
    for (int i = 0; i < N; i++) {
        int64_t want = 0;
        for (uint32_t r = 0; r < size; r++)
            if (abs64(value(r, i)) > want) want = abs64(value(r, i));
        CHECK(got[i] == want);
    }
}

static int find(outboard_world *w, const char *name, outboard_module_info *found) {
    outboard_module_info infos[64];
    size_t n = 0;
    OK(outboard_module_list(w, infos, 64, &n));
    CHECK(n <= 64);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(infos[i].name, name)) {
            if (found) *found = infos[i];
            return 1;
        }
    return 0;
}

int main(void) {
    outboard_world *w;
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    outboard_group *all;
    OK(outboard_world_group(w, &all));
    uint32_t engines = 0;
    OK(outboard_group_nodes(all, &engines));

    /* Bad input: a clear error naming what is wrong, nothing made. */
    outboard_module *bad = NULL;
    FAILS(outboard_module_compile("bad name!", PASS, &bad), OUTBOARD_ERR_ARG, "module name \"bad name!\"");
    FAILS(outboard_module_compile(NULL, PASS, &bad), OUTBOARD_ERR_ARG, "module name is null");
    FAILS(outboard_module_compile("nosource", NULL, &bad), OUTBOARD_ERR_ARG, "source of module 'nosource' is null");
    FAILS(outboard_module_compile("latin1", "func main() return 0; end func; // caf\xe9\n", &bad), OUTBOARD_ERR_ARG, "module 'latin1' is not valid UTF-8");
    FAILS(outboard_module_compile("broken", "func main(\n    return 0;\nend func;\n", &bad), OUTBOARD_ERR_MODULE, "module 'broken' does not compile: line 2");
    FAILS(outboard_module_from_bytecode("junk", "NVM?", 4, &bad), OUTBOARD_ERR_MODULE, "bytecode of module 'junk'");
    CHECK(bad == NULL);

    /* Load, and reduce with the module: the engines combine. */
    outboard_module *absmax;
    OK(outboard_module_compile("absmax", ABSMAX, &absmax));
    OK(outboard_module_load(all, absmax, 0, 0));
    FAILS(outboard_module_load(all, absmax, 0, 0), OUTBOARD_ERR_MODULE, "module 'absmax' is already loaded");
    int op = 0, again = 0;
    OK(outboard_op_from_module(absmax, &op));
    OK(outboard_op_from_module(absmax, &again));
    CHECK(op >= OUTBOARD_OP_MODULE_FIRST && op == again);
    int64_t mine[N], out[N];
    for (int i = 0; i < N; i++) mine[i] = value(rank, i);
    for (int round = 0; round < 3; round++) {
        memset(out, 0, sizeof out);
        OK(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, op));
        check_absmax(out);
    }
    uint32_t root = size - 1;
    memset(out, 0, sizeof out);
    OK(outboard_reduce(all, mine, out, N, OUTBOARD_INT64, op, root));
    if (rank == root) check_absmax(out);
    /* Split-phase, in place. */
    memcpy(out, mine, sizeof out);
    outboard_request *req;
    OK(outboard_allreduce_start(all, NULL, out, N, OUTBOARD_INT64, op, &req));
    OK(outboard_wait(&req, NULL));
    check_absmax(out);
    /* In host-based mode too: a module's operator always runs on the engines. */
    OK(outboard_group_set_mode(all, OUTBOARD_MODE_HOST_BASED));
    OK(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, op));
    check_absmax(out);
    OK(outboard_group_set_mode(all, OUTBOARD_MODE_OFFLOADED));

    /* The same module run here: what a program without the engine uses. */
    int64_t acc[N];
    memcpy(acc, mine, sizeof acc);
    for (uint32_t r = 0; r < size; r++) {
        int64_t theirs[N];
        for (int i = 0; i < N; i++) theirs[i] = value(r, i);
        OK(outboard_module_combine(absmax, acc, theirs, sizeof theirs));
    }
    check_absmax(acc);
    FAILS(outboard_module_combine(absmax, acc, mine, 12), OUTBOARD_ERR_MODULE, "module 'absmax' reported failure");

    /* Its counters on this engine. */
    outboard_module_info info;
    CHECK(find(w, "absmax", &info));
    CHECK(info.invocations > 0 && info.instructions > 0 && info.out_of_fuel == 0 && info.traps == 0 && info.generation >= 1);

    /* From its bytecode, under another name. */
    size_t len = 0;
    FAILS(outboard_module_bytecode(absmax, NULL, 0, &len), OUTBOARD_ERR_ARG, "needs");
    CHECK(len > 0);
    void *code = malloc(len);
    OK(outboard_module_bytecode(absmax, code, len, &len));
    outboard_module *copy;
    OK(outboard_module_from_bytecode("absmax_bytecode", code, len, &copy));
    free(code);
    OK(outboard_module_load(all, copy, 0, 0));
    int copy_op = 0;
    OK(outboard_op_from_module(copy, &copy_op));
    CHECK(copy_op != op);
    OK(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, copy_op));
    check_absmax(out);

    /* Purged: gone from the engine, its operator refused until loaded
     * again (after a barrier: ranks sharing an engine share its copy). */
    OK(outboard_barrier(all));
    OK(outboard_module_purge(copy));
    CHECK(!find(w, "absmax_bytecode", NULL));
    FAILS(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, copy_op), OUTBOARD_ERR_MODULE, "module 'absmax_bytecode' is not loaded");
    FAILS(outboard_module_purge(copy), OUTBOARD_ERR_MODULE, "module 'absmax_bytecode' is not loaded");
    OK(outboard_barrier(all));
    OK(outboard_module_free(copy));
    FAILS(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, copy_op), OUTBOARD_ERR_ARG, "names module 'absmax_bytecode', whose handle was freed");

    /* A packet handed to a module on this rank's engine comes on to this host. */
    outboard_module *pass;
    OK(outboard_module_compile("pass", PASS, &pass));
    OK(outboard_module_load(all, pass, 0, 0));
    char msg[32], got[32];
    snprintf(msg, sizeof msg, "hello from rank %u", rank);
    int failed = -1;
    OK(outboard_module_send(all, pass, rank, rank, msg, strlen(msg) + 1, &failed));
    CHECK(failed == 0);
    size_t got_len = 0;
    int32_t source = -2;
    int flags = -1;
    OK(outboard_module_recv(pass, got, sizeof got, &got_len, &source, &flags));
    CHECK(got_len == strlen(msg) + 1 && !strcmp(got, msg) && flags == 0);
    /* Longer than the buffer: its start, its full length, and an error. */
    OK(outboard_module_send(all, pass, rank, rank, msg, strlen(msg) + 1, NULL));
    memset(got, 0, sizeof got);
    FAILS(outboard_module_recv(pass, got, 5, &got_len, NULL, NULL), OUTBOARD_ERR_TRUNCATED, "");
    CHECK(got_len == strlen(msg) + 1 && !memcmp(got, msg, 5) && got[5] == 0);
    FAILS(outboard_module_send(all, pass, 0, size, msg, 1, NULL), OUTBOARD_ERR_ARG, "must be ranks of the group");

    /* Operators that fail: every rank learns it, naming the module, and
     * nothing stalls. */
    const char *failing[2][2] = {{"spin", "out of fuel"}, {"divzero", "trapped"}};
    for (int f = 0; f < 2; f++) {
        outboard_module *m;
        OK(outboard_module_compile(failing[f][0], f == 0 ? SPIN : DIVZERO, &m));
        OK(outboard_module_load(all, m, 0, 0));
        int mop = 0;
        OK(outboard_op_from_module(m, &mop));
        char name[64];
        snprintf(name, sizeof name, "module '%s'", failing[f][0]);
        int rc = outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, mop);
        checks++;
        if (rc != OUTBOARD_ERR_MODULE || !strstr(outboard_last_error(), name)) {
            fprintf(stderr, "rank %u: allreduce with %s returned %d: %s\n", rank, name, rc, outboard_last_error());
            exit(1);
        }
        printf("rank %u: allreduce with %s failed: %s\n", rank, failing[f][0], outboard_last_error());
        /* Where it ran, the engine counted why. */
        CHECK(find(w, failing[f][0], &info));
        if (strstr(outboard_last_error(), "at this rank")) {
            CHECK(strstr(outboard_last_error(), failing[f][1]));
            CHECK(f == 0 ? info.out_of_fuel > 0 : info.traps > 0);
        }
        FAILS(outboard_module_combine(m, acc, mine, sizeof mine), OUTBOARD_ERR_MODULE, name);
        OK(outboard_barrier(all));
        OK(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, op));
        check_absmax(out);
        OK(outboard_module_free(m));
    }

    /* Replaced: the same operator code now reduces with the new code.
     * Ranks sharing an engine share one copy, which each replace would
     * replace again: only with an engine per rank. */
    if (engines == size) {
        FAILS(outboard_module_replace(all, absmax, "func main( end"), OUTBOARD_ERR_MODULE, "module 'absmax' does not compile");
        OK(outboard_module_replace(all, absmax, MIN));
        OK(outboard_barrier(all));
        OK(outboard_allreduce(all, mine, out, N, OUTBOARD_INT64, op));
        for (int i = 0; i < N; i++) {
            int64_t want = value(0, i);
            for (uint32_t r = 1; r < size; r++)
                if (value(r, i) < want) want = value(r, i);
            CHECK(out[i] == want);
        }
        CHECK(find(w, "absmax", &info) && info.generation >= 2);
    }

    OK(outboard_barrier(all));
    OK(outboard_module_free(pass));
    OK(outboard_module_free(absmax));
    OK(outboard_group_free(all));
    OK(outboard_finalize(w));
    printf("rank %u: nicvm modules: all %d checks passed\n", rank, checks);
    return 0;
}
