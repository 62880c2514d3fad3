/* Allgather, gather, scatter, alltoall, reduce-scatter and the scans from
 * C, run by crates/cli/tests/capi.rs under `outboard run` with several
 * rank counts, both modes, and ranks sharing node engines:
 *
 * - every call, blocking and split-phase (gather: at odd roots), at every root and at lengths of
 *   0, 1, odd and more than a packet, gives what this program computes
 *   itself;
 * - the v-forms put each block at its displacement and leave the gaps
 *   between blocks as they were;
 * - in place works where MPI allows it;
 * - bad arguments are refused with a sentence saying what is wrong. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

#include "check.h"

/* Byte `i` of rank `r`'s data for round `k`. */
static unsigned char byte_of(uint32_t r, size_t i, int k) {
    return (unsigned char)(r * 37u + i * 11u + (unsigned)k * 101u + 1u);
}

static void run(outboard_group *g, int k, size_t len) {
    unsigned char *mine = malloc(len * size + 1), *all = malloc(len * size * size + 1), *want = malloc(len * size * size + 1);
    CHECK(mine && all && want);
    for (size_t i = 0; i < len; i++) mine[i] = byte_of(rank, i, k);
    for (uint32_t q = 0; q < size; q++)
        for (size_t i = 0; i < len; i++) want[q * len + i] = byte_of(q, i, k);

    /* allgather, blocking and split-phase, and in place */
    memset(all, 0xEE, len * size);
    OK(outboard_allgather(g, mine, len, all));
    CHECK(memcmp(all, want, len * size) == 0);
    memset(all, 0xEE, len * size);
    memcpy(all + rank * len, mine, len);
    outboard_request *r;
    OK(outboard_allgather_start(g, NULL, len, all, &r));
    OK(outboard_wait(&r, NULL));
    CHECK(memcmp(all, want, len * size) == 0);

    /* gather and scatter at every root */
    for (uint32_t root = 0; root < size; root++) {
        memset(all, 0xEE, len * size);
        if (root % 2) {
            OK(outboard_gather_start(g, mine, len, rank == root ? all : NULL, root, &r));
            OK(outboard_wait(&r, NULL));
        } else {
            OK(outboard_gather(g, mine, len, rank == root ? all : NULL, root));
        }
        if (rank == root) CHECK(memcmp(all, want, len * size) == 0);
        unsigned char *got = malloc(len + 1);
        CHECK(got);
        for (uint32_t q = 0; q < size; q++)
            for (size_t i = 0; i < len; i++) all[q * len + i] = byte_of(q, i, k + (int)root);
        OK(outboard_scatter_start(g, rank == root ? all : NULL, len, got, root, &r));
        OK(outboard_wait(&r, NULL));
        for (size_t i = 0; i < len; i++) CHECK(got[i] == byte_of(rank, i, k + (int)root));
        free(got);
    }

    /* alltoall: block j of rank q's data is (q, j) */
    unsigned char *out = malloc(len * size + 1), *in = malloc(len * size + 1);
    CHECK(out && in);
    for (uint32_t j = 0; j < size; j++)
        for (size_t i = 0; i < len; i++) out[j * len + i] = byte_of(rank * size + j, i, k);
    OK(outboard_alltoall(g, out, len, in));
    for (uint32_t q = 0; q < size; q++)
        for (size_t i = 0; i < len; i++) CHECK(in[q * len + i] == byte_of(q * size + rank, i, k));
    free(out);
    free(in);
    free(mine);
    free(all);
    free(want);
}

/* Reductions: reduce-scatter (both forms) and the scans of `count`
 * 64-bit integers. */
static void reductions(outboard_group *g, size_t count) {
    size_t n = count * size;
    int64_t *send = malloc(n * 8 + 8), *got = malloc(n * 8 + 8);
    CHECK(send && got);
    for (size_t i = 0; i < n; i++) send[i] = (int64_t)(rank + 1) * (int64_t)(i + 3);
    OK(outboard_reduce_scatter_block(g, send, got, count, OUTBOARD_INT64, OUTBOARD_SUM));
    int64_t ranks_sum = (int64_t)size * (size + 1) / 2;
    for (size_t i = 0; i < count; i++) CHECK(got[i] == ranks_sum * (int64_t)(rank * count + i + 3));
    /* counts 1, 2, 3, ...: rank r's block starts after r(r+1)/2 elements */
    size_t *counts = malloc(size * sizeof *counts);
    size_t total = 0;
    for (uint32_t q = 0; q < size; q++) total += counts[q] = q + 1;
    int64_t *v = malloc(total * 8), *res = malloc((rank + 1) * 8);
    for (size_t i = 0; i < total; i++) v[i] = (int64_t)(rank + 1) << (i % 40);
    outboard_request *r;
    OK(outboard_reduce_scatter_start(g, v, res, counts, OUTBOARD_INT64, OUTBOARD_BOR, &r));
    OK(outboard_wait(&r, NULL));
    int64_t all_or = 0;
    for (uint32_t q = 0; q < size; q++) all_or |= (int64_t)(q + 1);
    for (size_t i = 0; i < rank + 1; i++) CHECK(res[i] == all_or << ((rank * (rank + 1) / 2 + i) % 40));
    free(counts);
    free(v);
    free(res);

    /* scans: rank r gets 1 + ... + (r + 1) (inclusive), 1 + ... + r
     * (exclusive; rank 0's buffer untouched) times the element's factor */
    for (size_t i = 0; i < count; i++) send[i] = (int64_t)(rank + 1) * (int64_t)(i + 1);
    OK(outboard_scan(g, send, got, count, OUTBOARD_INT64, OUTBOARD_SUM));
    for (size_t i = 0; i < count; i++) CHECK(got[i] == (int64_t)(rank + 1) * (rank + 2) / 2 * (int64_t)(i + 1));
    for (size_t i = 0; i < count; i++) got[i] = -7;
    OK(outboard_exscan(g, send, rank == 0 ? NULL : got, count, OUTBOARD_INT64, OUTBOARD_SUM)); /* rank 0: no buffer needed */
    for (size_t i = 0; i < count; i++) CHECK(got[i] == (rank == 0 ? -7 : (int64_t)rank * (rank + 1) / 2 * (int64_t)(i + 1)));
    /* in place */
    for (size_t i = 0; i < count; i++) got[i] = (int64_t)(rank + 1);
    OK(outboard_scan(g, NULL, got, count, OUTBOARD_INT64, OUTBOARD_MAX));
    for (size_t i = 0; i < count; i++) CHECK(got[i] == (int64_t)(rank + 1));
    free(send);
    free(got);
}

/* The v-forms: rank q's block is q + 1 bytes at 3 + 5q (gaps of 4 bytes
 * before each block but the first, 3 before it). */
static void vforms(outboard_group *g) {
    size_t counts[64], displs[64];
    CHECK(size <= 64);
    for (uint32_t q = 0; q < size; q++) {
        counts[q] = q + 1;
        displs[q] = 3 + 5 * q;
    }
    size_t extent = displs[size - 1] + counts[size - 1];
    unsigned char mine[64], buf[512];
    for (size_t i = 0; i < counts[rank]; i++) mine[i] = byte_of(rank, i, 9);
    memset(buf, 0xEE, sizeof buf);
    OK(outboard_allgatherv(g, mine, buf, counts, displs));
    for (uint32_t q = 0; q < size; q++) {
        for (size_t i = 0; i < counts[q]; i++) CHECK(buf[displs[q] + i] == byte_of(q, i, 9));
        for (size_t i = displs[q] + counts[q]; i < (q + 1 < size ? displs[q + 1] : extent); i++) CHECK(buf[i] == 0xEE);
    }
    CHECK(buf[0] == 0xEE && buf[1] == 0xEE && buf[2] == 0xEE);
    uint32_t root = size - 1;
    memset(buf, 0xEE, sizeof buf);
    OK(outboard_gatherv(g, mine, rank == root ? buf : NULL, counts, displs, root));
    if (rank == root)
        for (uint32_t q = 0; q < size; q++) {
            for (size_t i = 0; i < counts[q]; i++) CHECK(buf[displs[q] + i] == byte_of(q, i, 9));
            CHECK(buf[displs[q] - 1] == 0xEE);
        }
    unsigned char got[64];
    memset(got, 0xEE, sizeof got);
    OK(outboard_scatterv(g, rank == root ? buf : NULL, counts, displs, got, root));
    for (size_t i = 0; i < counts[rank]; i++) CHECK(got[i] == byte_of(rank, i, 9));
    CHECK(got[counts[rank]] == 0xEE);
}

static void refusals(outboard_group *g) {
    size_t counts[64], displs[64];
    for (uint32_t q = 0; q < size; q++) {
        counts[q] = 8;
        displs[q] = 4 * q; /* overlapping */
    }
    unsigned char buf[1024] = {0};
    if (size > 1) FAILS(outboard_allgatherv(g, buf, buf + 512, counts, displs), OUTBOARD_ERR_ARG, "overlap");
    FAILS(outboard_allgatherv(g, buf, buf + 512, NULL, displs), OUTBOARD_ERR_ARG, "counts is null");
    FAILS(outboard_allgather(g, buf, 8, NULL), OUTBOARD_ERR_ARG, "recvbuf is null");
    FAILS(outboard_scan(g, buf, buf, 1, 99, OUTBOARD_SUM), OUTBOARD_ERR_ARG, "unknown datatype 99");
    FAILS(outboard_gather(g, buf, 8, buf + 512, size), OUTBOARD_ERR_COLL, "outside a group");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    outboard_world *w;
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    outboard_group *g;
    OK(outboard_world_group(w, &g));
    static const size_t lens[] = {0, 1, 13, 9000};
    for (int mode = 0; mode < 2; mode++) {
        OK(outboard_group_set_mode(g, mode == 0 ? OUTBOARD_MODE_OFFLOADED : OUTBOARD_MODE_HOST_BASED));
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) run(g, (int)i, lens[i]);
        static const size_t counts[] = {0, 1, 7, 1200};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) reductions(g, counts[i]);
        vforms(g);
    }
    refusals(g);
    OK(outboard_barrier(g));
    printf("rank %u: movement: all %d checks passed\n", rank, checks);
    OK(outboard_group_free(g));
    OK(outboard_finalize(w));
    return 0;
}
