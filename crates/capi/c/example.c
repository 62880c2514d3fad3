/* The smallest Outboard C program: every rank contributes its rank, every
 * rank prints the sum. Build and run:
 *   cc example.c $(pkg-config --cflags --libs outboard) -o example
 *   outboard run -n 4 ./example
 */
#include <stdio.h>
#include <outboard.h>

static int check(int rc, const char *what) {
    if (rc != OUTBOARD_OK)
        fprintf(stderr, "%s: %s (%s)\n", what, outboard_strerror(rc), outboard_last_error());
    return rc;
}

int main(void) {
    outboard_world *world;
    outboard_group *all;
    uint32_t rank, size;
    if (check(outboard_init(&world), "outboard_init")) return 1;
    outboard_rank(world, &rank);
    outboard_size(world, &size);
    if (check(outboard_world_group(world, &all), "outboard_world_group")) return 1;
    int64_t mine = rank, sum = 0;
    if (check(outboard_allreduce(all, &mine, &sum, 1, OUTBOARD_INT64, OUTBOARD_SUM), "outboard_allreduce")) return 1;
    printf("rank %u of %u: sum of ranks %lld\n", rank, size, (long long)sum);
    if (check(outboard_group_free(all), "outboard_group_free")) return 1;
    return check(outboard_finalize(world), "outboard_finalize") ? 1 : 0;
}
