/* Remote atomics and the MCS lock through the C ABI, run by
 * crates/cli/tests/capi.rs under `outboard run -n 4`: every result is
 * checked against what it must be; the first failure exits non-zero
 * naming the line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <outboard.h>

#include "check.h"

/* Word offsets in every rank's 64-byte region. */
enum { COUNTER = 0, WRAP32 = 8, CAS = 16, SWAP = 24, SHARED = 32 };
#define ADDS 200
#define LOCKED_INCREMENTS 100

static outboard_world *w;
static outboard_mem *mem;
static uint64_t *keys;

/* `op` on the word at `off` of rank `target`'s region: through the engines
 * from another rank, a local atomic at the target itself. */
static int word_op(uint32_t target, uint64_t off, uint32_t bits, int op, uint64_t operand, uint64_t compare, uint64_t *old) {
    if (target == rank) return outboard_local_atomic(mem, off, bits, op, operand, compare, old);
    return outboard_atomic(w, target, keys[target], off, bits, op, operand, compare, old);
}

static uint64_t sum_u64(outboard_group *all, uint64_t v) {
    uint64_t s = 0;
    OK(outboard_allreduce(all, &v, &s, 1, OUTBOARD_UINT64, OUTBOARD_SUM));
    return s;
}

/* The second thread of rank 1: waits for the lock, then gives it back. */
static void *lock_waiter(void *lock) {
    OK(outboard_lock_acquire(lock));
    OK(outboard_lock_release(lock));
    return NULL;
}

int main(void) {
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    outboard_group *all;
    OK(outboard_world_group(w, &all));
    OK(outboard_mem_alloc(w, 64, &mem));
    uint64_t key;
    OK(outboard_mem_register(mem, &key));
    /* Every rank's key: a table each fills at its own rank, or-ed. */
    keys = calloc(size, 8);
    keys[rank] = key;
    OK(outboard_allreduce(all, NULL, keys, size, OUTBOARD_UINT64, OUTBOARD_BOR));
    if (rank == 0) {
        uint64_t near_top = 0xFFFFFFFEu, old = 1;
        OK(outboard_local_atomic(mem, WRAP32, 32, OUTBOARD_SWAP, near_top, 0, &old));
        CHECK(old == 0);
    }
    OK(outboard_barrier(all));

    /* Fetch-add on rank 0's counter: remote from the others, local at rank
     * 0 (atomic with respect to the remote ones), every fourth split-phase.
     * The old values must be distinct: each rank marks its own in a bitmap,
     * and the or of the bitmaps has every bit while the counts add up. */
    uint64_t total = (uint64_t)size * ADDS, words = (total + 63) / 64;
    uint64_t *seen = calloc(words, 8), prev = 0;
    for (int i = 0; i < ADDS; i++) {
        uint64_t old = UINT64_MAX;
        if (rank == 0) {
            OK(outboard_local_atomic(mem, COUNTER, 64, OUTBOARD_FETCH_ADD, 1, 0, &old));
        } else if (i % 4 == 0) {
            outboard_request *r;
            OK(outboard_atomic_start(w, 0, keys[0], COUNTER, 64, OUTBOARD_FETCH_ADD, 1, 0, &old, &r));
            OK(outboard_wait(&r, NULL));
        } else {
            OK(outboard_fetch_add(w, 0, keys[0], COUNTER, 1, &old));
        }
        CHECK(old < total);
        CHECK(i == 0 || old > prev); /* one rank's adds are in its order */
        prev = old;
        CHECK(!(seen[old / 64] & (1ull << (old % 64))));
        seen[old / 64] |= 1ull << (old % 64);
    }
    OK(outboard_allreduce(all, NULL, seen, words, OUTBOARD_UINT64, OUTBOARD_BOR));
    for (uint64_t b = 0; b < total; b++) CHECK(seen[b / 64] & (1ull << (b % 64)));
    OK(outboard_barrier(all));
    uint64_t counter = 0;
    OK(word_op(0, COUNTER, 64, OUTBOARD_FETCH_ADD, 0, 0, &counter));
    CHECK(counter == total);

    /* A 32-bit fetch-add wraps within its word. */
    uint64_t old32 = 0;
    OK(word_op(0, WRAP32, 32, OUTBOARD_FETCH_ADD, 1, 0, &old32));
    CHECK(old32 >= 0xFFFFFFFEu || old32 < size);
    OK(outboard_barrier(all));
    if (rank == 0) {
        uint32_t v = 0;
        OK(outboard_mem_read(mem, WRAP32, &v, 4));
        CHECK(v == (uint32_t)(0xFFFFFFFEu + size));
    }

    /* Compare-and-swap from 0 at rank 1 (rank 0 with one rank): exactly
     * one rank wins, and the word holds its mark. */
    uint32_t target = size > 1 ? 1 : 0;
    uint64_t was = 7;
    if (target == rank) OK(word_op(target, CAS, 64, OUTBOARD_COMPARE_SWAP, rank + 1, 0, &was));
    else OK(outboard_compare_swap(w, target, keys[target], CAS, 0, rank + 1, &was));
    uint64_t won = was == 0;
    CHECK(sum_u64(all, won) == 1);
    CHECK(was == 0 || (was >= 1 && was <= size));
    uint64_t winner = sum_u64(all, won ? rank + 1 : 0);
    OK(outboard_barrier(all));
    uint64_t now = 0;
    OK(word_op(target, CAS, 64, OUTBOARD_COMPARE_SWAP, 99, 12345, &now)); /* a miss reads */
    CHECK(now == winner);

    /* Swap: the old values and the final one are 0 and every rank's mark. */
    uint64_t got = 0;
    if (rank == 0) OK(word_op(0, SWAP, 64, OUTBOARD_SWAP, rank + 1, 0, &got));
    else OK(outboard_swap(w, 0, keys[0], SWAP, rank + 1, &got));
    CHECK(got <= size);
    uint64_t olds = sum_u64(all, got);
    OK(outboard_barrier(all));
    uint64_t last = 0;
    OK(word_op(0, SWAP, 64, OUTBOARD_FETCH_ADD, 0, 0, &last));
    CHECK(olds + last == (uint64_t)size * (size + 1) / 2);

    /* Refusals (at the next rank's region): memory untouched, the right
     * codes. */
    uint64_t x = 0;
    uint32_t next = (rank + 1) % size;
    if (next != rank) {
        CHECK(outboard_fetch_add(w, next, keys[next] ^ 0x5A5A, COUNTER, 1, &x) == OUTBOARD_ERR_RDMA);
        CHECK(outboard_fetch_add(w, next, keys[next], 4, 1, &x) == OUTBOARD_ERR_RDMA);  /* misaligned */
        CHECK(outboard_fetch_add(w, next, keys[next], 64, 1, &x) == OUTBOARD_ERR_RDMA); /* out of bounds */
    }
    CHECK(outboard_atomic(w, next, keys[next], COUNTER, 16, OUTBOARD_FETCH_ADD, 1, 0, &x) == OUTBOARD_ERR_ARG);
    CHECK(outboard_atomic(w, next, keys[next], COUNTER, 64, 9, 1, 0, &x) == OUTBOARD_ERR_ARG);
    CHECK(outboard_fetch_add(w, size, keys[0], COUNTER, 1, &x) == OUTBOARD_ERR_ARG);
    CHECK(outboard_local_atomic(mem, 60, 64, OUTBOARD_FETCH_ADD, 1, 0, &x) != OUTBOARD_OK);
    CHECK(outboard_local_atomic(mem, 4, 64, OUTBOARD_FETCH_ADD, 1, 0, &x) != OUTBOARD_OK);
    OK(outboard_barrier(all));
    OK(word_op(0, COUNTER, 64, OUTBOARD_FETCH_ADD, 0, 0, &counter));
    CHECK(counter == total);

    /* The MCS lock, home at the last rank: increments of a word at rank 0
     * by plain RDMA read and write (not atomic) inside the lock lose
     * nothing, so the lock excluded. */
    outboard_lock *lock;
    OK(outboard_lock_create(all, size - 1, &lock));
    CHECK(outboard_lock_release(lock) == OUTBOARD_ERR_STATE); /* not held */
    for (int i = 0; i < LOCKED_INCREMENTS; i++) {
        OK(outboard_lock_acquire(lock));
        uint64_t v = 0;
        if (rank != 0) OK(outboard_rdma_read(w, 0, keys[0], SHARED, mem, 56, 8));
        OK(outboard_mem_read(mem, rank == 0 ? SHARED : 56, &v, 8));
        v++;
        OK(outboard_mem_write(mem, rank == 0 ? SHARED : 56, &v, 8));
        if (rank != 0) OK(outboard_rdma_write(w, 0, keys[0], SHARED, mem, 56, 8));
        OK(outboard_lock_release(lock));
    }
    OK(outboard_barrier(all));
    uint64_t shared = 0;
    OK(word_op(0, SHARED, 64, OUTBOARD_FETCH_ADD, 0, 0, &shared));
    CHECK(shared == (uint64_t)size * LOCKED_INCREMENTS);
    /* try: free lock taken; held lock refused without queueing. */
    int acquired = -1;
    if (rank == 0) {
        OK(outboard_lock_try(lock, &acquired));
        CHECK(acquired == 1);
    }
    OK(outboard_barrier(all));
    if (rank != 0) {
        OK(outboard_lock_try(lock, &acquired));
        CHECK(acquired == 0);
    }
    OK(outboard_barrier(all));
    /* Rank 0 still holds the lock. A wait for it does not stop the
     * process's other threads: rank 1's second thread waits for the lock
     * while its first joins the barrier after which rank 0 releases it
     * (were the wait to hold the world, the barrier could not start, and
     * nothing would ever end). */
    if (rank == 1) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, lock_waiter, lock) == 0);
        usleep(20000); /* the second thread is queued by now */
        OK(outboard_barrier(all));
        CHECK(pthread_join(t, NULL) == 0);
    } else {
        OK(outboard_barrier(all));
    }
    if (rank == 0) OK(outboard_lock_release(lock));
    OK(outboard_barrier(all));
    OK(outboard_lock_free(lock));
    CHECK(outboard_lock_free(NULL) == OUTBOARD_ERR_ARG);

    free(keys);
    free(seen);
    OK(outboard_mem_free(mem));
    OK(outboard_group_free(all));
    OK(outboard_finalize(w));
    printf("rank %u: atomics and lock: all %d checks passed\n", rank, checks);
    return 0;
}
