#!/usr/bin/env bash
# Latency and overlap of barrier, bcast, reduce, allreduce, allgather,
# gather, scatter, alltoall, reduce-scatter, scan, ibarrier, iallreduce and
# iallgather under each installed MPI in its normal configuration (shared
# memory within the machine), without and with liboutboard_mpi preloaded,
# in one run (bindings/mpi/bench/mpi_bench.c); then what an idle engine
# costs a program of point-to-point calls only (mpi_idle.c). Usage:
#   bash scripts/bench-mpi.sh [ranks=4] [iterations=200] [baseline-revision]
# With a baseline revision (a commit, tag or branch), the library and C ABI
# of that revision are built too (in a temporary worktree, into
# target/bench-base, kept between runs: minutes the first time) and run
# between the plain MPI and the current library, so a change is compared
# before and after on the same machine, in the same run and order.
# Extra settings for the preloaded runs come from the environment
# (OUTBOARD_MPI=host, OUTBOARD_PROGRESS=..., ...).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
iters=${2:-200}
base=${3:-}
# The library is built by `outboard mpi-lib`, the project's one recipe.
cargo build -q --release -p outboard-cli
outboard=$PWD/target/release/outboard
[ -n "${CARGO_TARGET_DIR:-}" ] && outboard=$CARGO_TARGET_DIR/release/outboard
tmp=$(mktemp -d -t outboard-bench-mpi.XXXXXX)
cleanup() {
    [ -d "$tmp/base" ] && git worktree remove --force "$tmp/base" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
base_target=$PWD/target/bench-base
if [ -n "$base" ]; then
    git worktree add -q --detach "$tmp/base" "$base"
    (cd "$tmp/base" && CARGO_TARGET_DIR="$base_target" cargo build -q --release -p outboard-capi -p outboard-cli)
fi
# The baseline's library for MPI $1 into $2: its own recipe where it has
# `outboard mpi-lib`, else the one file it then had.
base_lib() {
    local capi=$base_target/release
    if "$capi/outboard" mpi-lib --help > /dev/null 2>&1; then
        "$capi/outboard" mpi-lib --mpicc "mpicc.$1" --out "$2" > /dev/null
    else
        "mpicc.$1" -shared -fPIC -O2 -I"$tmp/base/crates/capi/include" "$tmp/base/bindings/mpi/outboard_mpi.c" \
            -L"$capi" -Wl,-rpath,"$capi" -loutboard_capi -o "$2/liboutboard_mpi_$1.so"
    fi
}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=()
for k in $(env | grep -o '^OUTBOARD_[A-Z_]*' || true); do pass+=("$k"); done
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" >/dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "$outboard" mpi-lib --mpicc "mpicc.$mpi" --out "$tmp" > /dev/null 2> "$tmp/mpi-lib.err" || { cat "$tmp/mpi-lib.err" >&2; exit 1; }
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_bench.c -o "$tmp/bench_$mpi"
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_idle.c -o "$tmp/idle_$mpi"
    if [ "$mpi" = openmpi ]; then
        # Open MPI's normal configuration: shared memory within the node.
        run() { mpirun.openmpi --oversubscribe --mca btl self,vader,tcp -np "$n" "$@"; }
        preload() { local p=(-x "LD_PRELOAD=$1"); for k in "${pass[@]}"; do p+=(-x "$k"); done; echo "${p[@]}"; }
    else
        run() { mpiexec.mpich -launcher fork -n "$n" "$@"; }
        preload() { local p=(-env LD_PRELOAD "$1"); for k in "${pass[@]}"; do p+=(-env "$k" "${!k}"); done; echo "${p[@]}"; }
    fi
    run "$tmp/bench_$mpi" "$iters" > "$tmp/plain"
    if [ -n "$base" ]; then
        mkdir -p "$tmp/base-lib"
        base_lib "$mpi" "$tmp/base-lib"
        # shellcheck disable=SC2046
        run $(preload "$tmp/base-lib/liboutboard_mpi_$mpi.so") "$tmp/bench_$mpi" "$iters" > "$tmp/before"
    fi
    # shellcheck disable=SC2046
    run $(preload "$tmp/liboutboard_mpi_$mpi.so") "$tmp/bench_$mpi" "$iters" > "$tmp/with-outboard"
    echo "# $mpi, $n ranks on one machine, $iters iterations; latency in us (largest mean over the ranks), overlap in %"
    if [ -n "$base" ]; then
        printf '%-11s %7s %12s %12s %12s %8s %8s %8s\n' op bytes "$mpi" "+$base" "+outboard" overlap "+$base" "+outboard"
        paste -d' ' "$tmp/plain" "$tmp/before" "$tmp/with-outboard" |
            awk '{ printf "%-11s %7s %12s %12s %12s %8s %8s %8s\n", $1, $2, $3, $7, $11, $4, $8, $12 }'
    else
        printf '%-11s %7s %12s %12s %10s %10s\n' op bytes "$mpi" "+outboard" overlap "+outboard"
        paste -d' ' "$tmp/plain" "$tmp/with-outboard" | awk '{ printf "%-11s %7s %12s %12s %10s %10s\n", $1, $2, $3, $7, $4, $8 }'
    fi
    # What an idle engine costs: a program of point-to-point calls only,
    # which the library passes through; three alternating runs each.
    plain=() ob=()
    for _ in 1 2 3; do
        plain+=("$(run "$tmp/idle_$mpi" 2000 | awk '/^idle/ { print $2 }')")
        # shellcheck disable=SC2046
        ob+=("$(run $(preload "$tmp/liboutboard_mpi_$mpi.so") "$tmp/idle_$mpi" 2000 | awk '/^idle/ { print $2 }')")
    done
    echo "# $mpi, point-to-point only (mpi_idle.c, 2000 iterations): ${plain[*]} s plain, ${ob[*]} s with the library preloaded"
done
