/* Application bypass from C, run by crates/cli/tests/capi.rs under
 * `outboard run -n 4` with each OUTBOARD_BYPASS_DELIVERY:
 *
 * - an inner rank of the broadcast tree that computes without calling the
 *   library does not hold up the rank below it: the value is forwarded in
 *   its interrupt handler (rank 3 is served while rank 2 is away, and
 *   rank 2's record names the forward and the interrupt);
 * - broadcasts and reduces with every root and lengths up to the eager
 *   limit and beyond it (which run in the group's mode) give the right
 *   values, with the group's other collectives in between;
 * - the record of what ran and the group's description name application
 *   bypass; bad modes are refused with a sentence naming what is
 *   accepted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <outboard.h>

#include "check.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Computes for `s` seconds without calling the library. */
static void compute(double s) {
    double end = now() + s;
    volatile uint64_t x = 1;
    while (now() < end) x = x * 6364136223846793005ull + 1;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    outboard_world *w;
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    CHECK(size == 4);
    outboard_group *g;
    OK(outboard_world_group(w, &g));

    FAILS(outboard_group_set_reduce_mode(g, 7), OUTBOARD_ERR_ARG, "OUTBOARD_REDUCE_BYPASS (1)");
    FAILS(outboard_group_set_bcast_mode(g, 9, 0), OUTBOARD_ERR_ARG, "OUTBOARD_BCAST_BYPASS (4)");
    FAILS(outboard_group_set_option(g, "reduce_mode", "sometimes"), OUTBOARD_ERR_ARG, "bypass");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_BYPASS, 0));
    OK(outboard_group_set_option(g, "reduce_mode", "bypass"));
    char text[512];
    OK(outboard_group_describe(g, text, sizeof text));
    CHECK(strstr(text, "broadcast by application bypass up to 16384 bytes") != NULL);
    CHECK(strstr(text, "reduce by application bypass up to 16384 bytes") != NULL);

    /* Binomial tree from 0 over 4: 0 -> {2, 1}, 2 -> {3}. Rank 2 computes
     * for 1.5 s before its call; rank 3 must have its value long before. */
    OK(outboard_barrier(g));
    char v[6] = {0};
    if (rank == 0) memcpy(v, "skewed", 6);
    /* The root sends once rank 2 is away: on a loaded machine its value
     * could otherwise reach rank 2 while it still finishes the barrier
     * inside the library, forwarded there with no interrupt. */
    if (rank == 0) compute(0.2);
    if (rank == 2) compute(1.5);
    double t0 = now();
    OK(outboard_bcast(g, v, sizeof v, 0));
    double inside = now() - t0;
    CHECK(memcmp(v, "skewed", 6) == 0);
    if (rank == 3 && inside > 0.75) {
        fprintf(stderr, "rank 3 waited %.3f s for a value its inner rank was away for 1.5 s\n", inside);
        CHECK(0);
    }
    if (rank == 2) {
        CHECK(taken(g, "application bypass values forwarded") >= 1);
        CHECK(taken(g, "application bypass interrupts handled") >= 1);
    }
    printf("rank %u: skewed inner rank: %.3f s inside the broadcast\n", rank, inside);

    /* Every root, lengths below, at and beyond the eager limit. */
    static const size_t lens[] = {0, 1, 8, 2048, 16384, 20000};
    static unsigned char buf[20000];
    static int64_t mine[2500], sum[2500];
    long bypassed = 0;
    for (int round = 0; round < 24; round++) {
        uint32_t root = (uint32_t)round % size;
        size_t len = lens[round % 6];
        for (size_t i = 0; i < len; i++) buf[i] = rank == root ? (unsigned char)(i * 13 + round) : 0;
        OK(outboard_bcast(g, buf, len, root));
        for (size_t i = 0; i < len; i++) CHECK(buf[i] == (unsigned char)(i * 13 + round));
        size_t count = len / 8;
        for (size_t i = 0; i < count; i++) mine[i] = (int64_t)rank * 1000 + (int64_t)i + round;
        memset(sum, 0, sizeof sum);
        OK(outboard_reduce(g, mine, sum, count, OUTBOARD_INT64, OUTBOARD_SUM, root));
        if (rank == root)
            for (size_t i = 0; i < count; i++) CHECK(sum[i] == 6000 + 4 * ((int64_t)i + round));
        bypassed += len <= 16384;
        if (round % 5 == 0) OK(outboard_barrier(g));
    }
    CHECK(taken(g, "broadcast application bypass") == bypassed + 1);
    CHECK(taken(g, "reduce application bypass") == bypassed);

    /* Back to the group's mode: no more bypass calls. */
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_GROUP_MODE, 0));
    OK(outboard_group_set_reduce_mode(g, OUTBOARD_REDUCE_GROUP_MODE));
    OK(outboard_bcast(g, buf, 8, 1));
    CHECK(taken(g, "broadcast application bypass") == bypassed + 1);

    OK(outboard_barrier(g));
    OK(outboard_group_free(g));
    OK(outboard_finalize(w));
    printf("rank %u: bypass: all %d checks passed\n", rank, checks);
    return 0;
}
