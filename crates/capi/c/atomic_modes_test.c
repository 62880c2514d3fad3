/* The other forms of the atomics and the lock through the C ABI, run by
 * crates/cli/tests/capi.rs under `outboard run -n 4` (engines per
 * process): direct-form atomics, host-based atomics served by each rank's
 * atomic server in each of its three waits, the MCS lock over the
 * servers, and a lock wait in one thread that leaves the world to the
 * process's other thread, with the engines' lock and the served one.
 * Every result is checked against what it must be; the first failure
 * exits non-zero naming the line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <outboard.h>

#include "check.h"

/* Word offsets in every rank's 64-byte region. */
enum { DIRECT = 0, DIRECT32 = 8, SERVED = 16, SERVED_CAS = 24 };
#define ADDS 50

static outboard_world *w;
static outboard_group *all;

static uint64_t sum_u64(uint64_t v) {
    uint64_t s = 0;
    OK(outboard_allreduce(all, &v, &s, 1, OUTBOARD_UINT64, OUTBOARD_SUM));
    return s;
}

/* A second thread of rank 0 that joins a barrier after its first thread
 * is already waiting for the lock. */
static void *barrier_thread(void *arg) {
    (void)arg;
    usleep(50000); /* the first thread waits in outboard_lock_acquire by now */
    OK(outboard_barrier(all));
    return NULL;
}

/* Rank 1 holds the lock and will release it only after a barrier that
 * needs rank 0's second thread; rank 0's first thread meanwhile waits for
 * the lock. Were the wait to keep the world to itself, rank 0's second
 * thread could not start the barrier, rank 1 would never release, and
 * nothing would ever end. */
static void lock_wait_leaves_the_world(outboard_lock *lock, const char *what) {
    /* Everyone is done with the lock first: a rank still queueing from an
     * earlier loop would wait behind rank 1, which releases only after
     * barriers that rank never reaches. */
    OK(outboard_barrier(all));
    if (rank == 1) OK(outboard_lock_acquire(lock));
    OK(outboard_barrier(all)); /* everyone knows rank 1 holds it */
    if (rank == 0) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, barrier_thread, NULL) == 0);
        OK(outboard_lock_acquire(lock)); /* ends only after rank 1's barrier */
        OK(outboard_lock_release(lock));
        CHECK(pthread_join(t, NULL) == 0);
    } else {
        OK(outboard_barrier(all));
        if (rank == 1) OK(outboard_lock_release(lock));
    }
    OK(outboard_barrier(all));
    printf("rank %u: %s lock: waited in one thread while the other joined the barrier\n", rank, what);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines survive a kill */
    OK(outboard_init(&w));
    OK(outboard_rank(w, &rank));
    OK(outboard_size(w, &size));
    CHECK(size >= 2);
    OK(outboard_world_group(w, &all));
    outboard_mem *mem;
    OK(outboard_mem_alloc(w, 64, &mem));
    uint64_t key;
    OK(outboard_mem_register(mem, &key));
    /* Rank 0's key: the other ranks pass 0. */
    uint64_t key0 = sum_u64(rank == 0 ? key : 0);

    /* Direct form: every rank adds to rank 0's words, split-phase and
     * blocking; the old values are distinct and the sum exact. */
    for (int i = 0; i < ADDS; i++) {
        uint64_t old = ~0ull;
        outboard_request *r;
        OK(outboard_atomic_direct_start(w, 0, key0, DIRECT, 64, OUTBOARD_FETCH_ADD, 1, 0, &old, &r));
        OK(outboard_wait(&r, NULL));
        CHECK(r == NULL);
        CHECK(old < (uint64_t)size * ADDS);
        uint64_t old32 = ~0ull;
        OK(outboard_atomic_direct(w, 0, key0, DIRECT32, 32, OUTBOARD_FETCH_ADD, 3, 0, &old32));
        CHECK(old32 < 3ull * size * ADDS && old32 % 3 == 0);
    }
    /* A test loop finishes a direct atomic too. */
    {
        uint64_t old = ~0ull;
        outboard_request *r;
        int done = 0;
        OK(outboard_atomic_direct_start(w, 0, key0, DIRECT, 64, OUTBOARD_FETCH_ADD, 0, 0, &old, &r));
        while (!done) OK(outboard_test(&r, &done, NULL));
        CHECK(old >= (uint64_t)ADDS); /* at least this rank's adds */
    }
    /* Misaligned: refused by the target's engine, reported by the wait. */
    {
        uint64_t old;
        CHECK(outboard_atomic_direct(w, 0, key0, 3, 64, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_RDMA);
        CHECK(outboard_atomic_direct(w, 0, key0, 0, 16, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_ARG);
        CHECK(outboard_atomic_direct(w, size, key0, 0, 64, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_ARG);
        outboard_request *r;
        CHECK(outboard_atomic_direct_start(NULL, 0, key0, 0, 64, OUTBOARD_SWAP, 1, 0, &old, &r) == OUTBOARD_ERR_ARG);
        CHECK(outboard_atomic_direct_start(w, 0, key0, 0, 64, OUTBOARD_SWAP, 1, 0, &old, NULL) == OUTBOARD_ERR_ARG);
    }
    OK(outboard_barrier(all));
    if (rank == 0) {
        uint64_t v = 0, v32 = 0;
        OK(outboard_mem_read(mem, DIRECT, &v, 8));
        OK(outboard_mem_read(mem, DIRECT32, &v32, 8));
        CHECK(v == (uint64_t)size * ADDS);
        CHECK((uint32_t)v32 == 3u * size * ADDS);
    }
    printf("rank %u: direct-form atomics exact\n", rank);

    /* Host-based atomics, once per way the servers wait: every rank adds
     * to rank 0's word through rank 0's server; one compare-and-swap wins;
     * the sum is exact and rank 0's server counts every request. */
    const int waits[3] = { OUTBOARD_SERVER_POLL, OUTBOARD_SERVER_SPIN_THEN_BLOCK, OUTBOARD_SERVER_BLOCK };
    const char *names[3] = { "polling", "spin-then-block", "blocking" };
    CHECK(outboard_atomic_server_create(all, 7, 0, NULL) == OUTBOARD_ERR_ARG);
    {
        outboard_atomic_server *bad = NULL;
        CHECK(outboard_atomic_server_create(NULL, OUTBOARD_SERVER_BLOCK, 0, &bad) == OUTBOARD_ERR_ARG);
        CHECK(outboard_atomic_server_create(all, 7, 0, &bad) == OUTBOARD_ERR_ARG);
        CHECK(strstr(outboard_last_error(), "OUTBOARD_SERVER_BLOCK") != NULL);
        CHECK(bad == NULL);
    }
    for (int m = 0; m < 3; m++) {
        outboard_atomic_server *srv;
        OK(outboard_atomic_server_create(all, waits[m], 1000, &srv));
        OK(outboard_atomic_server_expose(srv, mem));
        CHECK(outboard_atomic_server_expose(srv, NULL) == OUTBOARD_ERR_ARG);
        uint64_t zero = 0;
        OK(outboard_mem_write(mem, SERVED, &zero, 8));
        OK(outboard_mem_write(mem, SERVED_CAS, &zero, 8));
        OK(outboard_barrier(all));
        for (int i = 0; i < ADDS; i++) {
            uint64_t old = ~0ull;
            OK(outboard_server_atomic(srv, 0, key0, SERVED, 64, OUTBOARD_FETCH_ADD, 2, 0, &old));
            CHECK(old % 2 == 0 && old < 2ull * size * ADDS);
        }
        uint64_t cas = ~0ull;
        OK(outboard_server_atomic(srv, 0, key0, SERVED_CAS, 64, OUTBOARD_COMPARE_SWAP, rank + 1, 0, &cas));
        CHECK(sum_u64(cas == 0) == 1);
        /* A key the server does not serve, and a misaligned word. */
        uint64_t old;
        CHECK(outboard_server_atomic(srv, 0, key0 ^ 1, SERVED, 64, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_RDMA);
        CHECK(outboard_server_atomic(srv, 0, key0, 4, 64, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_RDMA);
        CHECK(outboard_server_atomic(srv, size, key0, 0, 64, OUTBOARD_SWAP, 1, 0, &old) == OUTBOARD_ERR_ARG);
        OK(outboard_barrier(all));
        uint64_t served = 0;
        OK(outboard_atomic_server_served(srv, &served));
        if (rank == 0) {
            uint64_t v = 0;
            OK(outboard_mem_read(mem, SERVED, &v, 8));
            CHECK(v == 2ull * size * ADDS);
            /* Every request reached the server, refused ones too. */
            CHECK(served == (uint64_t)size * (ADDS + 3));
        } else {
            CHECK(served == 0);
        }
        OK(outboard_atomic_server_free(srv));
        printf("rank %u: host-based atomics (%s servers) exact\n", rank, names[m]);
    }
    CHECK(outboard_atomic_server_free(NULL) == OUTBOARD_ERR_ARG);

    /* The engines' lock: a wait in one thread leaves the world to the
     * other. */
    outboard_lock *lock;
    OK(outboard_lock_create(all, size - 1, &lock));
    lock_wait_leaves_the_world(lock, "offloaded");
    OK(outboard_lock_free(lock));

    /* The lock over blocking servers: the home's server performs every
     * other rank's swap of the lock word; the same wait. */
    outboard_atomic_server *srv;
    OK(outboard_atomic_server_create(all, OUTBOARD_SERVER_BLOCK, 0, &srv));
    CHECK(outboard_lock_create_served(all, 0, NULL, &lock) == OUTBOARD_ERR_ARG);
    OK(outboard_lock_create_served(all, 0, srv, &lock));
    for (int i = 0; i < 20; i++) {
        OK(outboard_lock_acquire(lock));
        OK(outboard_lock_release(lock));
    }
    lock_wait_leaves_the_world(lock, "served");
    uint64_t served = 0;
    OK(outboard_atomic_server_served(srv, &served));
    /* Rank 0 is home: each of the other ranks' 20 acquires swaps the lock
     * word through its server (their releases may too). */
    if (rank == 0) CHECK(served >= 20ull * (size - 1));
    OK(outboard_barrier(all));
    OK(outboard_lock_free(lock));
    OK(outboard_barrier(all));
    OK(outboard_atomic_server_free(srv));

    OK(outboard_mem_free(mem));
    OK(outboard_group_free(all));
    OK(outboard_finalize(w));
    printf("rank %u: atomic modes: all %d checks passed\n", rank, checks);
    return 0;
}
