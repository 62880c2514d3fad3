/* A rank dies between two collectives of a loop, run by
 * crates/cli/tests/capi.rs under `outboard run -n 4 --ranks-per-node 2`:
 * after a barrier, rank argv[1] SIGKILLs itself; the others loop the
 * collective named by argv[2] (allreduce, reduce, bcast, barrier) of
 * argv[3] 64-bit elements (default 1; above 512, a node's members meet in
 * its shared slots rather than its lines) until one fails, and print the
 * call that failed and its error. No survivor
 * may hang, and each must name a rank: the dead one, or one that gave up
 * because of it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s VICTIM allreduce|reduce|bcast|barrier [COUNT]\n", argv[0]);
        return 2;
    }
    outboard_world *w;
    uint32_t rank, size;
    outboard_group *g;
    if (outboard_init(&w) != OUTBOARD_OK || outboard_rank(w, &rank) != OUTBOARD_OK || outboard_size(w, &size) != OUTBOARD_OK ||
        outboard_world_group(w, &g) != OUTBOARD_OK || outboard_barrier(g) != OUTBOARD_OK) {
        fprintf(stderr, "start: %s\n", outboard_last_error());
        return 1;
    }
    int victim = atoi(argv[1]);
    const char *op = argv[2];
    size_t count = argc == 4 ? (size_t)atol(argv[3]) : 1;
    int64_t *x = calloc(count, sizeof *x), *y = calloc(count, sizeof *y);
    if (!x || !y) return 1;
    for (size_t i = 0; i < count; i++) x[i] = rank + (int64_t)i;
    if ((int)rank == victim) raise(SIGKILL);
    int rc = OUTBOARD_OK;
    long k;
    for (k = 0; k < 100000000 && rc == OUTBOARD_OK; k++) {
        if (!strcmp(op, "allreduce")) rc = outboard_allreduce(g, x, y, count, OUTBOARD_INT64, OUTBOARD_SUM);
        else if (!strcmp(op, "reduce")) rc = outboard_reduce(g, x, y, count, OUTBOARD_INT64, OUTBOARD_MAX, size - 1);
        else if (!strcmp(op, "bcast")) rc = outboard_bcast(g, x, count * sizeof *x, size - 1);
        else if (!strcmp(op, "barrier")) rc = outboard_barrier(g);
        else {
            fprintf(stderr, "unknown collective %s\n", op);
            return 2;
        }
    }
    printf("rank %u: %s failed after %ld calls: %s\n", rank, op, k, outboard_last_error());
    fflush(stdout);
    /* No finalize: the victim can never reach it. */
    _Exit(rc == OUTBOARD_OK ? 1 : 0);
}
