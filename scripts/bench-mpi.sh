#!/usr/bin/env bash
# Latency and overlap of barrier, bcast, reduce, allreduce, ibarrier and
# iallreduce under each installed MPI, without and with liboutboard_mpi
# preloaded, in one run (bindings/mpi/bench/mpi_bench.c). Usage:
#   bash scripts/bench-mpi.sh [ranks=4] [iterations=200]
# Extra settings for the preloaded runs come from the environment
# (OUTBOARD_MPI=host, OUTBOARD_PROGRESS=..., ...).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
iters=${2:-200}
cargo build -q --release -p outboard-capi
lib=$PWD/target/release
[ -n "${CARGO_TARGET_DIR:-}" ] && lib=$CARGO_TARGET_DIR/release
tmp=$(mktemp -d -t outboard-bench-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=()
for k in $(env | grep -o '^OUTBOARD_[A-Z_]*' || true); do pass+=("$k"); done
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" >/dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "mpicc.$mpi" -shared -fPIC -O2 -Icrates/capi/include bindings/mpi/outboard_mpi.c -L"$lib" -Wl,-rpath,"$lib" -loutboard_capi -o "$tmp/lib_$mpi.so"
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_bench.c -o "$tmp/bench_$mpi"
    if [ "$mpi" = openmpi ]; then
        run() { mpirun.openmpi --oversubscribe --mca btl tcp,self -np "$n" "$@"; }
        pre=(-x "LD_PRELOAD=$tmp/lib_$mpi.so"); for k in "${pass[@]}"; do pre+=(-x "$k"); done
    else
        run() { mpiexec.mpich -launcher fork -n "$n" "$@"; }
        pre=(-env LD_PRELOAD "$tmp/lib_$mpi.so"); for k in "${pass[@]}"; do pre+=(-env "$k" "${!k}"); done
    fi
    run "$tmp/bench_$mpi" "$iters" > "$tmp/plain"
    run "${pre[@]}" "$tmp/bench_$mpi" "$iters" > "$tmp/outboard"
    echo "# $mpi, $n ranks on one machine, $iters iterations; latency in us (largest mean over the ranks), overlap in %"
    printf '%-11s %7s %12s %12s %10s %10s\n' op bytes "$mpi" "+outboard" overlap "+outboard"
    paste -d' ' "$tmp/plain" "$tmp/outboard" | awk '{ printf "%-11s %7s %12s %12s %10s %10s\n", $1, $2, $3, $7, $4, $8 }'
done
