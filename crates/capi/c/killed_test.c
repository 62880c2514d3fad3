/* The wording of a failure from C, run by crates/cli/tests/capi.rs under
 * `outboard run -n 3` (engines per process) and `-n 4 --ranks-per-node 2`
 * (node engines): after a barrier the last rank kills itself; every other
 * rank waits to receive from it, and prints the error it gets, which must
 * name the dead rank (or its node's ranks) - never an engine's node id.
 * The victim dies only once every other rank told it it left the barrier
 * and then that its message to the victim completed: a barrier or a send
 * completes at a rank only when the peer's last packet (a step, an
 * acknowledgement) arrives, and the victim could otherwise die before that
 * packet leaves, failing the others' barrier or send instead of their
 * receive. The second notice is the one whose acknowledgement may die with
 * the victim, so its failure is allowed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

int main(void) {
    outboard_world *w;
    uint32_t rank, size;
    if (outboard_init(&w) != OUTBOARD_OK || outboard_rank(w, &rank) != OUTBOARD_OK || outboard_size(w, &size) != OUTBOARD_OK) {
        fprintf(stderr, "init: %s\n", outboard_last_error());
        return 1;
    }
    outboard_group *all;
    if (outboard_world_group(w, &all) != OUTBOARD_OK || outboard_barrier(all) != OUTBOARD_OK) {
        fprintf(stderr, "barrier: %s\n", outboard_last_error());
        return 1;
    }
    uint32_t victim = size - 1;
    char buf[8] = {0};
    if (rank == victim) {
        for (int tag = 4; tag <= 6; tag += 2) {
            for (uint32_t k = 0; k + 1 < size; k++) {
                if (outboard_recv(w, OUTBOARD_ANY_SOURCE, tag, UINT64_MAX, buf, sizeof buf, NULL) != OUTBOARD_OK) {
                    fprintf(stderr, "victim's receive: %s\n", outboard_last_error());
                    return 1;
                }
            }
        }
        raise(SIGKILL);
    }
    if (outboard_send(w, victim, 4, buf, sizeof buf) != OUTBOARD_OK) {
        fprintf(stderr, "send: %s\n", outboard_last_error());
        return 1;
    }
    if (outboard_send(w, victim, 6, buf, sizeof buf) != OUTBOARD_OK) {
        fprintf(stderr, "rank %u: the notice's acknowledgement died with the victim: %s\n", rank, outboard_last_error());
    }
    int rc = outboard_recv(w, (int32_t)victim, 5, UINT64_MAX, buf, sizeof buf, NULL);
    printf("rank %u: receive from rank %u: %s: %s\n", rank, victim, outboard_strerror(rc), outboard_last_error());
    fflush(stdout);
    /* No finalize: the victim can never reach it. */
    _Exit(rc == OUTBOARD_OK ? 1 : 0);
}
