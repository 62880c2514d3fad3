/* Tests of the C ABI, run by crates/cli/tests/capi.rs under
 * `outboard run -n 2` and `-n 4`: every result is checked against what it
 * must be; the first failure exits non-zero naming the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

#include "check.h"

static void collectives(outboard_group *g, const char *label) {
    uint32_t gr, gs;
    OK(outboard_group_rank(g, &gr));
    OK(outboard_group_size(g, &gs));
    OK(outboard_barrier(g));
    /* Broadcast from every root, at lengths across the piece size. */
    size_t lens[] = {0, 1, 1000, 5000, 100000};
    for (uint32_t root = 0; root < gs; root++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t n = lens[li];
            unsigned char *b = malloc(n + 1);
            for (size_t i = 0; i < n; i++) b[i] = gr == root ? (unsigned char)(i * 7 + root) : 0xEE;
            OK(outboard_bcast(g, b, n, root));
            for (size_t i = 0; i < n; i++) CHECK(b[i] == (unsigned char)(i * 7 + root));
            free(b);
        }
    }
    /* Allreduce and reduce: every datatype with the ops it takes. */
    size_t counts[] = {1, 3, 300, 5000};
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
        size_t n = counts[ci];
        int32_t *a = malloc(n * 4), *ra = malloc(n * 4);
        int64_t *b = malloc(n * 8), *rb = malloc(n * 8);
        uint64_t *c = malloc(n * 8), *rc = malloc(n * 8);
        double *d = malloc(n * 8), *rd = malloc(n * 8);
        float *f = malloc(n * 4), *rf = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            a[i] = (int32_t)(gr + 1) * (int32_t)(i + 1) * (i % 2 ? -1 : 1);
            b[i] = (int64_t)1 << ((gr + i) % 60);
            c[i] = ((uint64_t)gr << 40) + i;
            d[i] = gr * 0.5 + (double)i;
            f[i] = (float)(gr + 1) * 2.0f;
        }
        int64_t ranksum = (int64_t)gs * (gs + 1) / 2;
        OK(outboard_allreduce(g, a, ra, n, OUTBOARD_INT32, OUTBOARD_SUM));
        for (size_t i = 0; i < n; i++) CHECK(ra[i] == (int32_t)(ranksum * (int64_t)(i + 1) * (i % 2 ? -1 : 1)));
        OK(outboard_allreduce(g, b, rb, n, OUTBOARD_INT64, OUTBOARD_BOR));
        for (size_t i = 0; i < n; i++) {
            int64_t want = 0;
            for (uint32_t r = 0; r < gs; r++) want |= (int64_t)1 << ((r + i) % 60);
            CHECK(rb[i] == want);
        }
        OK(outboard_allreduce(g, c, rc, n, OUTBOARD_UINT64, OUTBOARD_MAX));
        for (size_t i = 0; i < n; i++) CHECK(rc[i] == ((uint64_t)(gs - 1) << 40) + i);
        OK(outboard_allreduce(g, d, rd, n, OUTBOARD_DOUBLE, OUTBOARD_MIN));
        for (size_t i = 0; i < n; i++) CHECK(rd[i] == (double)i);
        /* In place: sendbuf null. */
        memcpy(rf, f, n * 4);
        OK(outboard_allreduce(g, NULL, rf, n, OUTBOARD_FLOAT, OUTBOARD_SUM));
        for (size_t i = 0; i < n; i++) CHECK(rf[i] == 2.0f * (float)ranksum);
        for (uint32_t root = 0; root < gs; root++) {
            memset(rb, 0, n * 8);
            OK(outboard_reduce(g, b, gr == root ? rb : NULL, n, OUTBOARD_INT64, OUTBOARD_BAND, root));
            if (gr == root)
                for (size_t i = 0; i < n; i++) {
                    int64_t want = -1;
                    for (uint32_t r = 0; r < gs; r++) want &= (int64_t)1 << ((r + i) % 60);
                    CHECK(rb[i] == want);
                }
        }
        free(a); free(ra); free(b); free(rb); free(c); free(rc); free(d); free(rd); free(f); free(rf);
    }
    /* Product, exclusive or and the logical operations, against a fold
     * over the group ranks' values in rank order (with one member that is
     * its own value, unnormalised, as in MPI). Float products of values
     * +-0.5 and +-2 are exact, so the order of combination cannot show. */
    {
        int64_t p = gr % 3 + 1, pr = 0, pwant = 1;
        uint64_t xv = 0x9E3779B97F4A7C15ull * (gr + 1), xr = 0, xwant = 0;
        double dv = gr % 2 ? -2.0 : 0.5, dr = 0, dwant = 1;
        int32_t lv[4] = {gr == 1 ? 0 : 5, (int32_t)gr, gr % 2 ? -3 : 0, 0}, lr[4];
        for (uint32_t r = 0; r < gs; r++) {
            pwant *= r % 3 + 1;
            xwant ^= 0x9E3779B97F4A7C15ull * (r + 1);
            dwant *= r % 2 ? -2.0 : 0.5;
        }
        OK(outboard_allreduce(g, &p, &pr, 1, OUTBOARD_INT64, OUTBOARD_PROD));
        CHECK(pr == pwant);
        OK(outboard_allreduce(g, &xv, &xr, 1, OUTBOARD_UINT64, OUTBOARD_BXOR));
        CHECK(xr == xwant);
        OK(outboard_allreduce(g, &dv, &dr, 1, OUTBOARD_DOUBLE, OUTBOARD_PROD));
        CHECK(dr == dwant);
        int ops[3] = {OUTBOARD_LAND, OUTBOARD_LOR, OUTBOARD_LXOR};
        for (int k = 0; k < 3; k++) {
            int32_t want[4];
            for (int e = 0; e < 4; e++) {
                for (uint32_t r = 0; r < gs; r++) {
                    int32_t v = e == 0 ? (r == 1 ? 0 : 5) : e == 1 ? (int32_t)r : e == 2 ? (r % 2 ? -3 : 0) : 0;
                    if (r == 0) want[e] = v;
                    else if (k == 0) want[e] = want[e] != 0 && v != 0;
                    else if (k == 1) want[e] = want[e] != 0 || v != 0;
                    else want[e] = (want[e] != 0) != (v != 0);
                }
            }
            for (uint32_t root = 0; root < gs; root++) {
                memset(lr, 0x55, sizeof lr);
                OK(outboard_reduce(g, lv, lr, 4, OUTBOARD_INT32, ops[k], root));
                if (gr == root) CHECK(memcmp(lr, want, sizeof want) == 0);
            }
        }
        CHECK(outboard_allreduce(g, &dv, &dr, 1, OUTBOARD_DOUBLE, OUTBOARD_LAND) == OUTBOARD_ERR_ARG);
        CHECK(outboard_allreduce(g, &dv, &dr, 1, OUTBOARD_DOUBLE, 11) == OUTBOARD_ERR_ARG);
    }
    /* Split-phase: two collectives under way at once, finished by test
     * then wait, in either order. */
    int64_t x = gr + 1, sum = 0;
    outboard_request *r1 = NULL, *r2 = NULL;
    OK(outboard_allreduce_start(g, &x, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM, &r1));
    OK(outboard_barrier_start(g, &r2));
    CHECK(r1 != NULL && r2 != NULL);
    int done = 0;
    while (!done) OK(outboard_test(&r1, &done, NULL));
    CHECK(r1 == NULL);
    CHECK(sum == (int64_t)gs * (gs + 1) / 2);
    outboard_status st;
    OK(outboard_wait(&r2, &st));
    CHECK(r2 == NULL && st.error == OUTBOARD_OK);
    OK(outboard_wait(&r2, NULL)); /* a null request is finished */
    /* More under way than a node's shared memory keeps records for
     * (finished newest first), and a broadcast and a reduce among them. */
    outboard_request *many[20];
    for (int k = 0; k < 20; k++) OK(outboard_barrier_start(g, &many[k]));
    uint32_t root = gs - 1;
    char msg[16];
    memset(msg, gr == root % gs ? 'm' : 0, sizeof msg);
    int64_t part = 2 * (int64_t)gr + 1, total = -1;
    OK(outboard_bcast_start(g, msg, sizeof msg, root, &r1));
    OK(outboard_reduce_start(g, &part, &total, 1, OUTBOARD_INT64, OUTBOARD_SUM, 0, &r2));
    for (int k = 19; k >= 0; k--) OK(outboard_wait(&many[k], NULL));
    OK(outboard_wait(&r2, NULL));
    OK(outboard_wait(&r1, NULL));
    for (size_t k = 0; k < sizeof msg; k++) CHECK(msg[k] == 'm');
    if (gr == 0) CHECK(total == (int64_t)gs * gs);
    /* Longer than a flat call (within a node: through the first rank). */
    enum { BIG = 5000 };
    int64_t *bin = malloc(BIG * sizeof *bin), *bout = malloc(BIG * sizeof *bout);
    for (int e = 0; e < BIG; e++) bin[e] = (int64_t)gr * e;
    OK(outboard_allreduce_start(g, bin, bout, BIG, OUTBOARD_INT64, OUTBOARD_SUM, &r1));
    OK(outboard_wait(&r1, NULL));
    for (int e = 0; e < BIG; e++) CHECK(bout[e] == (int64_t)e * gs * (gs - 1) / 2);
    free(bin);
    free(bout);
    /* A datatype the engine does not know, and a bitwise op on floats. */
    CHECK(outboard_allreduce(g, &x, &sum, 1, 99, OUTBOARD_SUM) == OUTBOARD_ERR_ARG);
    CHECK(strlen(outboard_last_error()) > 0);
    double dd = 1.0;
    CHECK(outboard_allreduce(g, &dd, &dd, 1, OUTBOARD_DOUBLE, OUTBOARD_BAND) == OUTBOARD_ERR_ARG);
    printf("%s: collectives of %u ranks ok\n", label, gs);
}

static void messages(outboard_world *w) {
    uint32_t next = (rank + 1) % size, prev = (rank + size - 1) % size;
    /* A ring of tagged messages; the receive is posted before the send. */
    char in[64] = {0}, out[64];
    snprintf(out, sizeof out, "from %u", rank);
    outboard_request *rq;
    OK(outboard_recv_start(w, (int32_t)prev, 42, UINT64_MAX, in, sizeof in, &rq));
    OK(outboard_send(w, next, 42, out, strlen(out) + 1));
    outboard_status st;
    OK(outboard_wait(&rq, &st));
    char want[64];
    snprintf(want, sizeof want, "from %u", prev);
    CHECK(strcmp(in, want) == 0);
    CHECK(st.source == (int32_t)prev && st.tag == 42 && st.len == strlen(want) + 1);
    /* Any source, a masked tag: rank 0 hears from everyone else. */
    if (rank == 0) {
        uint32_t seen = 0;
        for (uint32_t i = 1; i < size; i++) {
            uint32_t v;
            OK(outboard_recv(w, OUTBOARD_ANY_SOURCE, 0x700, 0xF00, &v, sizeof v, &st));
            CHECK(st.source >= 1 && (uint32_t)st.source < size && v == (uint32_t)st.source * 10);
            CHECK((st.tag & 0xF00) == 0x700 && st.tag == 0x700 + (uint64_t)st.source);
            seen |= 1u << st.source;
        }
        CHECK(seen == ((1u << size) - 2));
    } else {
        uint32_t v = rank * 10;
        OK(outboard_send(w, 0, 0x700 + rank, &v, sizeof v));
    }
    /* A message longer than the buffer: truncated, its start kept. */
    if (rank == 1) {
        char big[100];
        memset(big, 'x', sizeof big);
        OK(outboard_send(w, 0, 7, big, sizeof big));
    } else if (rank == 0) {
        char small[10] = {0};
        int rc = outboard_recv(w, 1, 7, UINT64_MAX, small, sizeof small, &st);
        CHECK(rc == OUTBOARD_ERR_TRUNCATED && st.error == OUTBOARD_ERR_TRUNCATED);
        CHECK(st.len == 100 && small[0] == 'x' && small[9] == 'x');
    }
    /* Bad arguments are refused with a message, not a crash. */
    CHECK(outboard_send(w, size, 1, out, 1) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "outside") != NULL);
    CHECK(outboard_send(NULL, 0, 1, out, 1) == OUTBOARD_ERR_ARG);
    CHECK(outboard_recv(w, -5, 1, 0, in, 1, NULL) == OUTBOARD_ERR_ARG);
    printf("messages ok\n");
}

static void rdma(outboard_world *w, outboard_group *all) {
    uint32_t next = (rank + 1) % size;
    outboard_mem *mine, *scratch;
    OK(outboard_mem_alloc(w, 4096, &mine));
    OK(outboard_mem_alloc(w, 4096, &scratch));
    uint64_t key;
    OK(outboard_mem_register(mine, &key));
    uint64_t *keys = calloc(size, 8);
    keys[rank] = key;
    OK(outboard_allreduce(all, NULL, keys, size, OUTBOARD_UINT64, OUTBOARD_BOR));
    /* Write 1000 bytes into the next rank's region at offset 100. */
    unsigned char pat[1000];
    for (int i = 0; i < 1000; i++) pat[i] = (unsigned char)(rank * 31 + i);
    OK(outboard_mem_write(scratch, 0, pat, sizeof pat));
    OK(outboard_rdma_write(w, next, keys[next], 100, scratch, 0, sizeof pat));
    OK(outboard_barrier(all));
    uint32_t prev = (rank + size - 1) % size;
    unsigned char got[1000];
    OK(outboard_mem_read(mine, 100, got, sizeof got));
    for (int i = 0; i < 1000; i++) CHECK(got[i] == (unsigned char)(prev * 31 + i));
    /* Read it back from the next rank. */
    outboard_request *rq;
    OK(outboard_rdma_read_start(w, next, keys[next], 100, scratch, 2000, sizeof pat, &rq));
    OK(outboard_wait(&rq, NULL));
    OK(outboard_mem_read(scratch, 2000, got, sizeof got));
    CHECK(memcmp(got, pat, sizeof pat) == 0);
    /* A wrong key and an access out of bounds are refused. */
    CHECK(outboard_rdma_write(w, next, keys[next] ^ 0x5555, 0, scratch, 0, 8) == OUTBOARD_ERR_RDMA);
    CHECK(outboard_rdma_read(w, next, keys[next], 4090, scratch, 0, 100) == OUTBOARD_ERR_RDMA);
    CHECK(outboard_mem_write(scratch, 4090, pat, 100) == OUTBOARD_ERR_ARG);
    OK(outboard_barrier(all));
    OK(outboard_mem_free(scratch));
    OK(outboard_mem_free(mine));
    free(keys);
    printf("rdma ok\n");
}

int main(void) {
    outboard_world *w;
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    /* The rank the launcher gave, in Outboard's order of choice: outboard
       run's, Open MPI's, Hydra's (or Slurm's PMI), Slurm's. */
    const char *env_rank = getenv("OUTBOARD_RANK");
    if (env_rank == NULL) env_rank = getenv("OMPI_COMM_WORLD_RANK");
    if (env_rank == NULL) env_rank = getenv("PMI_RANK");
    if (env_rank == NULL) env_rank = getenv("SLURM_PROCID");
    CHECK(env_rank != NULL && (uint32_t)atoi(env_rank) == rank);
    CHECK(size >= 2);
    outboard_group *all;
    OK(outboard_world_group(w, &all));
    collectives(all, "world offloaded");
    /* The same group, host-based. */
    outboard_group *hb;
    OK(outboard_world_group(w, &hb));
    OK(outboard_group_set_mode(hb, OUTBOARD_MODE_HOST_BASED));
    collectives(hb, "world host-based");
    CHECK(outboard_group_set_mode(hb, 7) == OUTBOARD_ERR_ARG);
    OK(outboard_group_free(hb));
    /* Split by parity, reversed order; rank 1 opts out of it. */
    outboard_group *half;
    uint32_t color = rank == 1 ? OUTBOARD_UNDEFINED : rank % 2;
    OK(outboard_split(all, color, size - rank, &half));
    if (rank == 1) {
        CHECK(half == NULL);
    } else {
        uint32_t hr, hs;
        OK(outboard_group_rank(half, &hr));
        OK(outboard_group_size(half, &hs));
        uint32_t members = 0;
        for (uint32_t r = 0; r < size; r++) members += r != 1 && r % 2 == rank % 2;
        CHECK(hs == members);
        int64_t mine = rank, max = -1;
        OK(outboard_allreduce(half, &mine, &max, 1, OUTBOARD_INT64, OUTBOARD_MAX));
        int64_t want = 0;
        for (uint32_t r = 0; r < size; r++) if (r != 1 && r % 2 == rank % 2 && r > want) want = r;
        CHECK(max == want);
        CHECK(hr == 0 || mine < max); /* ordered by key = size - rank: the highest rank first */
        collectives(half, "split");
        OK(outboard_group_free(half));
    }
    /* A group made from a member list: every rank, reversed. */
    uint32_t *rev = malloc(size * 4);
    for (uint32_t r = 0; r < size; r++) rev[r] = size - 1 - r;
    outboard_group *reversed;
    OK(outboard_group_create(w, 5, size, rev, &reversed));
    uint32_t rr;
    OK(outboard_group_rank(reversed, &rr));
    CHECK(rr == size - 1 - rank);
    collectives(reversed, "created");
    OK(outboard_group_free(reversed));
    CHECK(outboard_group_create(w, OUTBOARD_GROUP_ID_LIMIT, size, rev, &reversed) == OUTBOARD_ERR_ARG);
    uint32_t other = (rank + 1) % size;
    CHECK(outboard_group_create(w, 6, 1, &other, &reversed) == OUTBOARD_ERR_ARG); /* not a member */
    free(rev);
    messages(w);
    rdma(w, all);
    OK(outboard_group_free(all));
    CHECK(outboard_group_free(NULL) == OUTBOARD_ERR_ARG);
    CHECK(strcmp(outboard_strerror(OUTBOARD_ERR_PEER), "a peer is unreachable") == 0);
    CHECK(strcmp(outboard_strerror(12345), "unknown error code") == 0);
    OK(outboard_finalize(w));
    printf("rank %u: all %d checks passed\n", rank, checks);
    return 0;
}
