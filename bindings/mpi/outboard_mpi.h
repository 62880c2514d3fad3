/* outboard_mpi.h: what liboutboard_mpi adds to MPI - NICVM modules (user
 * code the Outboard engines run) as reduction operators of MPI_Reduce and
 * MPI_Allreduce.
 *
 * `outboard mpi-lib` copies this header beside the libraries it builds.
 * A program that calls these functions links the library built for its
 * MPI (preloading it alone does not satisfy the linker):
 *
 *   mpicc.openmpi app.c -I$DIR -L$DIR -loutboard_mpi_openmpi -Wl,-rpath,$DIR
 *   mpirun.openmpi -np 4 ./app
 *
 * Example, an element-wise maximum of absolute values:
 *
 *   MPIX_Outboard_module_load("absmax", source, MPI_COMM_WORLD);
 *   MPI_Op op;
 *   MPIX_Outboard_op_create("absmax", &op);
 *   MPI_Allreduce(in, out, n, MPI_LONG_LONG, op, MPI_COMM_WORLD);
 *   MPI_Op_free(&op);
 *
 * The module's language and its calling convention as an operator are in
 * docs/nicvm.md: it is run once per contribution, with the contribution
 * as its packet and the running value as its accumulator, and must be
 * commutative and associative (MPI may combine in any order). */
#ifndef OUTBOARD_MPI_H
#define OUTBOARD_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compiles the module `source` under `name` (1 to 64 of A-Z a-z 0-9 _ . -)
 * and loads it on the Outboard engines of `comm`'s ranks. Collective over
 * `comm`: every rank passes the same name and source. A source that does
 * not compile fails at every rank with an error whose MPI_Error_string
 * names the module, the line and the column (through `comm`'s error
 * handler). When Outboard is not running, `comm` is not one it maps, or
 * an engine refuses the module, the module is still compiled and its
 * operators reduce on the hosts, with the same results. A name may be
 * loaded once per program. */
int MPIX_Outboard_module_load(const char *name, const char *source, MPI_Comm comm);

/* An MPI_Op whose combine step is module `name` (loaded before with
 * MPIX_Outboard_module_load). MPI_Reduce, MPI_Allreduce and their
 * non-blocking forms with it, on the communicator the module was loaded
 * on, with a predefined contiguous datatype, within the size thresholds,
 * are carried out by the engines with the module combining; anything else
 * with it (another communicator, MPI_Reduce_local, a derived datatype,
 * OUTBOARD_MPI=off) is carried out by MPI, the module run on the host
 * for each combine step. A module that runs out of fuel, traps or reports
 * failure on the engines fails the collective with an error naming the
 * module; on the host it aborts the job with that message (an MPI
 * operator cannot return an error). Free it with MPI_Op_free. */
int MPIX_Outboard_op_create(const char *name, MPI_Op *op);

#ifdef __cplusplus
}
#endif

#endif
