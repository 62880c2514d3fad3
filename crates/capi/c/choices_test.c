/* A group's collective choices through the C ABI, run by
 * crates/cli/tests/capi.rs under `outboard run -n 4`: for each barrier
 * algorithm and protocol, broadcast mode and tree, and reduction tree
 * degree, the results are right and the group's record of what its
 * collectives ran as (outboard_group_taken) shows the choice was taken;
 * bad values are refused with a sentence naming what is accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <outboard.h>

#include "check.h"

#define LEN 10000


/* A broadcast of LEN bytes from the last rank, checked everywhere, then
 * the record must name `what`. */
static void bcast_as(outboard_group *g, const char *what) {
    static unsigned char buf[LEN];
    uint32_t root = size - 1;
    for (int i = 0; i < LEN; i++) buf[i] = rank == root ? (unsigned char)(i * 7 + 3) : 0;
    OK(outboard_bcast(g, buf, LEN, root));
    for (int i = 0; i < LEN; i++) CHECK(buf[i] == (unsigned char)(i * 7 + 3));
    outboard_request *r;
    OK(outboard_bcast_start(g, buf, 100, root, &r));
    OK(outboard_wait(&r, NULL));
    if (!taken(g, what)) {
        char text[8192];
        OK(outboard_group_taken(g, text, sizeof text));
        fprintf(stderr, "rank %u: no \"%s\" among:\n%s", rank, what, text);
        CHECK(0);
    }
}

static void barrier_as(outboard_group *g, const char *what) {
    for (int i = 0; i < 3; i++) OK(outboard_barrier(g));
    CHECK(taken(g, what));
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines survive a kill */
    outboard_world *w;
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    outboard_group *g;
    OK(outboard_world_group(w, &g));
    char text[512];

    /* Defaults. */
    OK(outboard_group_describe(g, text, sizeof text));
    CHECK(strcmp(text, "mode offloaded; barrier dissemination over point-to-point; broadcast offloaded on a binomial tree; reduce on a binomial tree; allreduce by length (recursive doubling, block trees (binomial tree) for long data)") == 0);
    CHECK(outboard_group_describe(g, text, 10) == OUTBOARD_ERR_ARG && text[0] == 0);

    /* Barrier algorithms and protocol. */
    OK(outboard_group_set_barrier(g, OUTBOARD_BARRIER_PAIRWISE_EXCHANGE, 0));
    barrier_as(g, "barrier offloaded pairwise exchange");
    OK(outboard_group_set_barrier(g, OUTBOARD_BARRIER_GATHER_BCAST, 0));
    barrier_as(g, "barrier offloaded gather-broadcast on a binomial tree");
    OK(outboard_group_set_barrier(g, OUTBOARD_BARRIER_GATHER_BCAST, 3));
    barrier_as(g, "barrier offloaded gather-broadcast on a 3-ary tree");
    OK(outboard_group_set_barrier(g, OUTBOARD_BARRIER_DISSEMINATION, 0));
    barrier_as(g, "barrier offloaded dissemination");
    OK(outboard_group_set_barrier_protocol(g, OUTBOARD_BARRIER_NIC_COLLECTIVE));
    barrier_as(g, "barrier offloaded dissemination over the NIC collective protocol");
    OK(outboard_group_set_barrier_protocol(g, OUTBOARD_BARRIER_POINT_TO_POINT));
    CHECK(outboard_group_set_barrier(g, 9, 0) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "OUTBOARD_BARRIER_GATHER_BCAST") != NULL);
    CHECK(outboard_group_set_barrier_protocol(g, 2) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "OUTBOARD_BARRIER_NIC_COLLECTIVE") != NULL);
    CHECK(outboard_group_set_barrier(NULL, 0, 0) == OUTBOARD_ERR_ARG);
    printf("rank %u: barrier choices taken\n", rank);

    /* Broadcast modes. */
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_HOST_BASED, 0));
    bcast_as(g, "broadcast host-based binomial tree");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_NIC_ASSISTED, 0));
    bcast_as(g, "broadcast nic-assisted binomial tree");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_NIC_ASSISTED, 4096));
    bcast_as(g, "broadcast nic-assisted (4096-byte pieces) binomial tree");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_NIC_ASSISTED, UINT32_MAX));
    bcast_as(g, "broadcast nic-assisted (whole) binomial tree");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_OFFLOADED, 0));
    bcast_as(g, "broadcast offloaded binomial tree");
    /* The group's mode, host-based. */
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_GROUP_MODE, 0));
    OK(outboard_group_set_mode(g, OUTBOARD_MODE_HOST_BASED));
    bcast_as(g, "broadcast host-based binomial tree");
    barrier_as(g, "barrier host-based dissemination");
    OK(outboard_group_set_mode(g, OUTBOARD_MODE_OFFLOADED));
    CHECK(outboard_group_set_bcast_mode(g, 9, 0) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "OUTBOARD_BCAST_NIC_ASSISTED") != NULL);
    printf("rank %u: broadcast modes taken\n", rank);

    /* Broadcast trees, offloaded and NIC-assisted. */
    OK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_KARY, 3));
    bcast_as(g, "broadcast offloaded 3-ary tree");
    OK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_CHAIN, 0));
    bcast_as(g, "broadcast offloaded chain");
    OK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_POSTAL, 2.5));
    bcast_as(g, "broadcast offloaded postal tree (lambda 2.5)");
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_NIC_ASSISTED, 0));
    OK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_KARY, 2));
    bcast_as(g, "broadcast nic-assisted 2-ary tree");
    /* A split takes its parent's choices. */
    {
        OK(outboard_group_set_barrier_protocol(g, OUTBOARD_BARRIER_NIC_COLLECTIVE));
        outboard_group *half;
        OK(outboard_split(g, rank % 2, rank, &half));
        OK(outboard_group_set_barrier_protocol(g, OUTBOARD_BARRIER_POINT_TO_POINT));
        unsigned char b[300];
        uint32_t hr;
        OK(outboard_group_rank(half, &hr));
        for (int i = 0; i < 300; i++) b[i] = hr == 0 ? (unsigned char)i : 0;
        OK(outboard_bcast(half, b, sizeof b, 0));
        for (int i = 0; i < 300; i++) CHECK(b[i] == (unsigned char)i);
        CHECK(taken(half, "broadcast nic-assisted 2-ary tree"));
        OK(outboard_barrier(half));
        CHECK(taken(half, "barrier offloaded dissemination over the NIC collective protocol"));
        /* Not freed at once: a member whose last notification was lost
         * asks the others to resend it, which a freed group cannot. */
        int64_t one = 1, two = 0;
        OK(outboard_allreduce(half, &one, &two, 1, OUTBOARD_INT64, OUTBOARD_SUM));
        CHECK(two == 2);
        OK(outboard_group_free(half));
    }
    OK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_BINOMIAL, 0));
    OK(outboard_group_set_bcast_mode(g, OUTBOARD_BCAST_GROUP_MODE, 0));
    CHECK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_KARY, 0) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "degree must be a whole number of at least 1") != NULL);
    CHECK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_KARY, 2.5) == OUTBOARD_ERR_ARG);
    CHECK(outboard_group_set_bcast_tree(g, OUTBOARD_TREE_POSTAL, 0.5) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "lambda must be a finite number of at least 1") != NULL);
    CHECK(outboard_group_set_bcast_tree(g, 7, 0) == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "OUTBOARD_TREE_POSTAL") != NULL);
    printf("rank %u: broadcast trees taken\n", rank);

    /* Reduction tree degree: reduce and allreduce (on block trees, which
     * run data of one packet on the one tree). */
    OK(outboard_group_set_option(g, "allreduce_algorithm", "block-trees"));
    OK(outboard_group_set_reduce_degree(g, 2));
    OK(outboard_group_describe(g, text, sizeof text));
    CHECK(strstr(text, "reduce on a 2-ary tree") != NULL);
    int64_t v = rank + 1, sum = 0;
    OK(outboard_allreduce(g, &v, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM));
    CHECK(sum == (int64_t)size * (size + 1) / 2);
    sum = 0;
    OK(outboard_reduce(g, &v, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM, 0));
    if (rank == 0) CHECK(sum == (int64_t)size * (size + 1) / 2);
    CHECK(taken(g, "allreduce offloaded 2-ary tree"));
    CHECK(taken(g, "reduce offloaded 2-ary tree"));
    OK(outboard_group_set_reduce_degree(g, 0));
    OK(outboard_allreduce(g, &v, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM));
    CHECK(taken(g, "allreduce offloaded binomial tree"));
    OK(outboard_group_set_option(g, "allreduce_algorithm", "auto"));
    printf("rank %u: reduction trees taken\n", rank);

    /* The same choices from text, as the PMPI library's variables and
     * MPI_Info keys write them. */
    OK(outboard_group_set_option(g, "bcast_tree", "kary:4"));
    OK(outboard_group_set_option(g, "bcast_mode", "nic-assisted:2048"));
    bcast_as(g, "broadcast nic-assisted (2048-byte pieces) 4-ary tree");
    OK(outboard_group_set_option(g, "barrier_algorithm", "gather-broadcast:4"));
    OK(outboard_group_set_option(g, "barrier_protocol", "nic-collective"));
    barrier_as(g, "barrier offloaded gather-broadcast on a 4-ary tree over the NIC collective protocol");
    OK(outboard_group_set_option(g, "reduce_degree", "5"));
    /* By length (the default): short data by recursive doubling. */
    int doubled = taken(g, "allreduce offloaded recursive doubling");
    OK(outboard_allreduce(g, &v, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM));
    CHECK(sum == (int64_t)size * (size + 1) / 2);
    CHECK(taken(g, "allreduce offloaded recursive doubling") == doubled + 1);
    /* Block trees run data of one packet on the one tree; more data
     * spreads over trees rooted at every member. By length, data past the
     * crossover (8 KiB offloaded) runs on block trees too. */
    enum { LONG = 3000 };
    static int64_t in[LONG], out[LONG];
    for (int i = 0; i < LONG; i++) in[i] = (int64_t)rank * LONG + i;
    uint32_t nodes = 0;
    OK(outboard_group_nodes(g, &nodes));
    for (int round = 0; round < 2; round++) {
        if (round == 1) OK(outboard_group_set_option(g, "allreduce_algorithm", "block-trees"));
        int trees = taken(g, "allreduce offloaded 5-ary tree");
        OK(outboard_allreduce(g, in, out, LONG, OUTBOARD_INT64, OUTBOARD_SUM));
        for (int i = 0; i < LONG; i++) CHECK(out[i] == (int64_t)LONG * size * (size - 1) / 2 + (int64_t)i * size);
        /* One node engine for all: one block, among one node's leader. */
        if (nodes > 1) CHECK(taken(g, "allreduce offloaded block trees (5-ary tree)") == round + 1);
        else CHECK(taken(g, "allreduce offloaded 5-ary tree") == trees + 1);
    }
    OK(outboard_group_set_option(g, "allreduce_algorithm", "rd"));
    OK(outboard_allreduce(g, &v, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM));
    CHECK(sum == (int64_t)size * (size + 1) / 2);
    CHECK(taken(g, "allreduce offloaded recursive doubling") == doubled + 2);
    OK(outboard_group_describe(g, text, sizeof text));
    CHECK(strstr(text, "; allreduce recursive doubling") != NULL);
    CHECK(outboard_group_set_option(g, "allreduce_algorithm", "ring") == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "auto") && strstr(outboard_last_error(), "block-trees") && strstr(outboard_last_error(), "recursive-doubling"));
    /* The reduce algorithm likewise: block trees (the tree is the default)
     * reduce each block on a tree of its own and send it on to the root -
     * among more than two nodes; between two it is the plain tree reduce. */
    OK(outboard_group_set_option(g, "reduce_algorithm", "block-trees"));
    int reduce_trees = taken(g, "reduce offloaded 5-ary tree");
    for (int root = 0; root < (int)size && root < 2; root++) {
        memset(out, 0, sizeof out);
        OK(outboard_reduce(g, in, out, LONG, OUTBOARD_INT64, OUTBOARD_SUM, (uint32_t)root));
        if ((int)rank == root)
            for (int i = 0; i < LONG; i++) CHECK(out[i] == (int64_t)LONG * size * (size - 1) / 2 + (int64_t)i * size);
    }
    int reduces = size > 1 ? 2 : 1;
    if (nodes > 2) CHECK(taken(g, "reduce offloaded block trees (5-ary tree)") == reduces);
    else CHECK(taken(g, "reduce offloaded 5-ary tree") == reduce_trees + reduces);
    OK(outboard_group_set_option(g, "reduce_algorithm", "tree"));
    OK(outboard_reduce(g, in, out, LONG, OUTBOARD_INT64, OUTBOARD_SUM, 0));
    if (rank == 0)
        for (int i = 0; i < LONG; i++) CHECK(out[i] == (int64_t)LONG * size * (size - 1) / 2 + (int64_t)i * size);
    CHECK(taken(g, "reduce offloaded 5-ary tree") == (nodes > 2 ? reduce_trees + 1 : reduce_trees + reduces + 1));
    OK(outboard_group_describe(g, text, sizeof text));
    CHECK(strstr(text, "; reduce on a 5-ary tree;") != NULL);
    CHECK(outboard_group_set_option(g, "reduce_algorithm", "ring") == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "reduce_algorithm") && strstr(outboard_last_error(), "tree or block-trees"));
    CHECK(outboard_group_set_option(g, "bcast_tree", "postal") == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "binomial, kary:DEGREE, chain or postal:LAMBDA") != NULL);
    CHECK(outboard_group_set_option(g, "reduce_degree", "-1") == OUTBOARD_ERR_ARG);
    CHECK(outboard_group_set_option(g, "bcast_speed", "fast") == OUTBOARD_ERR_ARG);
    CHECK(strstr(outboard_last_error(), "unknown group option") != NULL);
    CHECK(outboard_group_set_option(g, NULL, "x") == OUTBOARD_ERR_ARG);
    printf("rank %u: options from text taken\n", rank);

    OK(outboard_group_describe(g, text, sizeof text));
    printf("rank %u: %s\n", rank, text);
    OK(outboard_group_free(g));
    OK(outboard_finalize(w));
    printf("rank %u: choices: all %d checks passed\n", rank, checks);
    return 0;
}
