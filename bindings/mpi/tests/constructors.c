/* Every call that makes an intra-communicator, each communicator then used
 * for a barrier, a broadcast, an allreduce and a non-blocking barrier,
 * results against PMPI's. Each communicator is named after its
 * constructor, so the library's verbose lines say, per constructor, whether
 * its collectives were taken over (they must be: the library maps a
 * communicator inside the call that makes it). MPI_Comm_idup's
 * communicator is used too (it passes through). Needs 2 or more ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize, checked;

#define FAIL(...) do { fprintf(stderr, "rank %d: ", wrank); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); MPI_Abort(MPI_COMM_WORLD, 1); } while (0)

static void use(MPI_Comm c, const char *name) {
    if (c == MPI_COMM_NULL) return;
    MPI_Comm_set_name(c, (char *)name);
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    MPI_Barrier(c);
    long long v[3] = {rank + 1, -rank * 7, wrank}, got[3], want[3];
    MPI_Allreduce(v, got, 3, MPI_LONG_LONG, MPI_SUM, c);
    PMPI_Allreduce(v, want, 3, MPI_LONG_LONG, MPI_SUM, c);
    if (memcmp(got, want, sizeof got)) FAIL("MPI_Allreduce on %s differs from PMPI", name);
    int b = rank == size - 1 ? 4242 : -1;
    MPI_Bcast(&b, 1, MPI_INT, size - 1, c);
    if (b != 4242) FAIL("MPI_Bcast on %s gave %d", name, b);
    MPI_Request r;
    MPI_Ibarrier(c, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    checked++;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm c[16];
    int k = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &c[k]);
    use(c[k++], "MPI_Comm_dup");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &c[k]);
    use(c[k++], "MPI_Comm_dup_with_info");
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &c[k]);
    use(c[k++], "MPI_Comm_split");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &c[k]);
    use(c[k++], "MPI_Comm_split_type");
    MPI_Group wg, g;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int range[1][3] = {{wsize - 1, 0, -1}};
    MPI_Group_range_incl(wg, 1, range, &g); /* every rank, reversed */
    MPI_Comm_create(MPI_COMM_WORLD, g, &c[k]);
    use(c[k++], "MPI_Comm_create");
    MPI_Comm_create_group(MPI_COMM_WORLD, g, 9, &c[k]);
    use(c[k++], "MPI_Comm_create_group");
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(wsize, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &c[k]);
    MPI_Comm cart = c[k];
    use(c[k++], "MPI_Cart_create");
    int remain[2] = {1, 0};
    MPI_Cart_sub(cart, remain, &c[k]);
    use(c[k++], "MPI_Cart_sub");
    int *index = malloc(sizeof(int) * wsize), *edges = malloc(sizeof(int) * wsize);
    for (int i = 0; i < wsize; i++) index[i] = i + 1, edges[i] = (i + 1) % wsize; /* a ring */
    MPI_Graph_create(MPI_COMM_WORLD, wsize, index, edges, 0, &c[k]);
    use(c[k++], "MPI_Graph_create");
    /* Weights given (not MPI_UNWEIGHTED, which gcc 12 takes for a zero-length array). */
    int next = (wrank + 1) % wsize, prev = (wrank + wsize - 1) % wsize, one = 1;
    MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &wrank, &one, &next, &one, MPI_INFO_NULL, 0, &c[k]);
    use(c[k++], "MPI_Dist_graph_create");
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &prev, &one, 1, &next, &one, MPI_INFO_NULL, 0, &c[k]);
    use(c[k++], "MPI_Dist_graph_create_adjacent");
    /* Two halves joined by an inter-communicator, then merged. */
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 77, &inter);
    MPI_Intercomm_merge(inter, wrank % 2, &c[k]);
    use(c[k++], "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    MPI_Request r;
    MPI_Comm_idup(MPI_COMM_WORLD, &c[k], &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    use(c[k++], "MPI_Comm_idup");
    for (int i = 0; i < k; i++)
        if (c[i] != MPI_COMM_NULL) MPI_Comm_free(&c[i]);
    free(index);
    free(edges);
    printf("rank %d: %d constructors checked\n", wrank, checked);
    MPI_Finalize();
    return 0;
}
