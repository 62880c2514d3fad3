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
# The library is built by `outboard mpi-lib`, the project's one recipe.
cargo build -q --release -p outboard-cli
outboard=$PWD/target/release/outboard
[ -n "${CARGO_TARGET_DIR:-}" ] && outboard=$CARGO_TARGET_DIR/release/outboard
tmp=$(mktemp -d -t outboard-bench-mpi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=()
for k in $(env | grep -o '^OUTBOARD_[A-Z_]*' || true); do pass+=("$k"); done
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" >/dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "$outboard" mpi-lib --mpicc "mpicc.$mpi" --out "$tmp" > /dev/null 2> "$tmp/mpi-lib.err" || { cat "$tmp/mpi-lib.err" >&2; exit 1; }
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_bench.c -o "$tmp/bench_$mpi"
    if [ "$mpi" = openmpi ]; then
        run() { mpirun.openmpi --oversubscribe --mca btl tcp,self -np "$n" "$@"; }
        pre=(-x "LD_PRELOAD=$tmp/liboutboard_mpi_$mpi.so"); for k in "${pass[@]}"; do pre+=(-x "$k"); done
    else
        run() { mpiexec.mpich -launcher fork -n "$n" "$@"; }
        pre=(-env LD_PRELOAD "$tmp/liboutboard_mpi_$mpi.so"); for k in "${pass[@]}"; do pre+=(-env "$k" "${!k}"); done
    fi
    run "$tmp/bench_$mpi" "$iters" > "$tmp/plain"
    run "${pre[@]}" "$tmp/bench_$mpi" "$iters" > "$tmp/outboard"
    echo "# $mpi, $n ranks on one machine, $iters iterations; latency in us (largest mean over the ranks), overlap in %"
    printf '%-11s %7s %12s %12s %10s %10s\n' op bytes "$mpi" "+outboard" overlap "+outboard"
    paste -d' ' "$tmp/plain" "$tmp/outboard" | awk '{ printf "%-11s %7s %12s %12s %10s %10s\n", $1, $2, $3, $7, $4, $8 }'
done
