/* Skew tolerance of MPI_Bcast and MPI_Reduce, the method of application
 * bypass's evaluation (OSU-style): each iteration every rank first
 * computes for a random time, uniform in 0..max_skew us, then calls the
 * collective; what is timed is the time inside the call only. A broadcast
 * or reduce that tolerates skew lets a non-root rank return without
 * waiting for late ranks, so its time inside the call stays small as the
 * skew grows; one that does not makes early ranks wait for late ones.
 * A plain MPI program, run with and without the library by
 * scripts/bench-mpi-skew.sh. Usage:
 *   mpi_skew [iterations=200] [bytes=8] [skews=0,200,1000]
 * Rank 0 prints a table, "call bytes skew_us mean_us median_us worst_us":
 * the mean over ranks and iterations, the median over iterations of the
 * mean over ranks, and the largest mean of one rank. Every result is
 * checked; a wrong one aborts the job. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WARMUP = 20, MAX_SKEWS = 64 };
enum call { BCAST, REDUCE };
static const char *names[] = {"MPI_Bcast", "MPI_Reduce"};

static int rank, size;

/* A generator of our own (xorshift64*), not rand(): the same sequence
 * under every C library, so runs of one MPI and another are comparable. */
static uint64_t rng_state;

static double uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Computing, not sleeping: a sleeping rank would leave its core to the
 * others (and to an engine), which a computing application does not. */
static void busy(double secs) {
    double end = MPI_Wtime() + secs;
    while (MPI_Wtime() < end) {
    }
}

static void fail(const char *what, int iter, long at, double got, double want) {
    fprintf(stderr, "mpi_skew: rank %d: %s, iteration %d: wrong result at element %ld: %g, expected %g\n", rank,
            what, iter, at, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The root's broadcast pattern for iteration `iter`: it changes every
 * iteration, so a stale buffer from the one before does not pass. */
static unsigned char pattern(int iter, long j) { return (unsigned char)(iter * 31 + j * 7 + 1); }

/* One broadcast; returns the time inside the call. Every byte is checked;
 * non-roots first fill the buffer with something other than the pattern. */
static double bcast_once(unsigned char *buf, long bytes, int iter) {
    for (long j = 0; j < bytes; j++) buf[j] = rank == 0 ? pattern(iter, j) : (unsigned char)~pattern(iter, j);
    double t0 = MPI_Wtime();
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    for (long j = 0; j < bytes; j++)
        if (buf[j] != pattern(iter, j)) fail("MPI_Bcast", iter, j, buf[j], pattern(iter, j));
    return t;
}

/* One sum to rank 0; returns the time inside the call. Rank r gives
 * r + iter + j at element j, small integers whose sum is exact. */
static double reduce_once(double *in, double *out, long n, int iter) {
    for (long j = 0; j < n; j++) {
        in[j] = rank + iter + j;
        out[j] = -1;
    }
    double t0 = MPI_Wtime();
    MPI_Reduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (rank == 0)
        for (long j = 0; j < n; j++) {
            double want = (double)size * (iter + j) + (double)size * (size - 1) / 2;
            if (out[j] != want) fail("MPI_Reduce", iter, j, out[j], want);
        }
    return t;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct bufs {
    unsigned char *bytes;
    double *in, *out;
    long nbytes, ndoubles;
};

/* One row of the table: warm-up, then `iters` timed iterations of `call`
 * with skews up to `skew_us`, each after a barrier (untimed) so that one
 * iteration's skew does not carry into the next. `iter` numbers the
 * iterations across rows, so the expected results change throughout. */
static void row(enum call call, struct bufs *b, int iters, int skew_us, int *iter, double *times) {
    for (int i = -WARMUP; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        busy(uniform() * skew_us * 1e-6);
        double t = call == BCAST ? bcast_once(b->bytes, b->nbytes, *iter) : reduce_once(b->in, b->out, b->ndoubles, *iter);
        ++*iter;
        if (i >= 0) times[i] = t;
    }
    /* Per-iteration means over the ranks (at rank 0), and each rank's mean. */
    double mine = 0, worst = 0;
    for (int i = 0; i < iters; i++) mine += times[i];
    mine /= iters;
    double *sums = malloc(iters * sizeof *sums);
    if (!sums) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Reduce(times, sums, iters, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double mean = 0;
        for (int i = 0; i < iters; i++) mean += (sums[i] /= size);
        mean /= iters;
        qsort(sums, iters, sizeof *sums, by_value);
        double median = iters % 2 ? sums[iters / 2] : (sums[iters / 2 - 1] + sums[iters / 2]) / 2;
        long bytes = call == BCAST ? b->nbytes : b->ndoubles * 8;
        printf("%-10s %8ld %7d %10.1f %10.1f %10.1f\n", names[call], bytes, skew_us, mean * 1e6, median * 1e6,
               worst * 1e6);
        fflush(stdout);
    }
    free(sums);
}

/* "0,200,1000" into skews; the count, or -1 when it does not parse. */
static int parse_skews(const char *arg, int *skews) {
    int n = 0;
    const char *p = arg;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 10000000 || n == MAX_SKEWS || (*end && *end != ',')) return -1;
        skews[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    long bytes = argc > 2 ? atol(argv[2]) : 8;
    int skews[MAX_SKEWS], nskews = parse_skews(argc > 3 ? argv[3] : "0,200,1000", skews);
    if (iters < 1 || bytes < 0 || bytes > (1L << 30) || nskews < 1) {
        if (rank == 0) fprintf(stderr, "usage: mpi_skew [iterations=200] [bytes=8] [skews=0,200,1000]\n");
        MPI_Finalize();
        return 2;
    }
    rng_state = 12345 + (uint64_t)rank * 7919;
    /* The reduce sums bytes/8 doubles, at least one. */
    struct bufs b = {.nbytes = bytes, .ndoubles = bytes / 8 > 0 ? bytes / 8 : 1};
    b.bytes = malloc(bytes > 0 ? bytes : 1);
    b.in = malloc(b.ndoubles * sizeof *b.in);
    b.out = malloc(b.ndoubles * sizeof *b.out);
    double *times = malloc(iters * sizeof *times);
    if (!b.bytes || !b.in || !b.out || !times) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) {
        printf("# mpi_skew: %d ranks, %d iterations (+%d warm-up); before each call every rank computes for a uniform"
               " 0..skew_us; time inside the call in us: mean over ranks and iterations, median over iterations of"
               " the mean over ranks, worst: the largest mean of one rank\n",
               size, iters, WARMUP);
        printf("# call bytes skew_us mean_us median_us worst_us\n");
    }
    int iter = 0;
    for (int s = 0; s < nskews; s++)
        for (int call = BCAST; call <= REDUCE; call++) row(call, &b, iters, skews[s], &iter, times);
    free(b.bytes);
    free(b.in);
    free(b.out);
    free(times);
    MPI_Finalize();
    return 0;
}
