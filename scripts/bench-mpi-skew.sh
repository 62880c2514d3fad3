#!/usr/bin/env bash
# Skew tolerance of MPI_Bcast and MPI_Reduce (application bypass's
# evaluation): every rank computes for a random time, uniform in 0..skew us,
# before each call, and the time inside the call is measured
# (bindings/mpi/bench/mpi_skew.c). Under each installed MPI in its normal
# configuration (shared memory within the machine): the MPI alone, then
# with liboutboard_mpi preloaded, offloaded (the default), host-based, and
# with application bypass, its messages delivered by a signal and by a
# thread. Usage:
#   bash scripts/bench-mpi-skew.sh [ranks=4] [iterations=200] [bytes=8] [skews=0,200,1000]
# Extra settings for the preloaded runs come from the environment
# (OUTBOARD_PROGRESS=..., ...); a variant's own settings override them.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4}
iters=${2:-200}
bytes=${3:-8}
skews=${4:-0,200,1000}
# The library is built by `outboard mpi-lib`, the project's one recipe.
cargo build -q --release -p outboard-cli
outboard=$PWD/target/release/outboard
[ -n "${CARGO_TARGET_DIR:-}" ] && outboard=$CARGO_TARGET_DIR/release/outboard
tmp=$(mktemp -d -t outboard-bench-mpi-skew.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The preloaded variants: a column label, then its settings.
labels=(offloaded host bypass-signal bypass-thread)
declare -A settings=(
    [offloaded]=""
    [host]="OUTBOARD_MPI_BCAST=host OUTBOARD_MPI_REDUCE=host"
    [bypass-signal]="OUTBOARD_MPI_BCAST=bypass OUTBOARD_MPI_REDUCE=bypass OUTBOARD_BYPASS_DELIVERY=signal"
    [bypass-thread]="OUTBOARD_MPI_BCAST=bypass OUTBOARD_MPI_REDUCE=bypass OUTBOARD_BYPASS_DELIVERY=thread"
)
# The environment's OUTBOARD_* settings and then variant $1's, as KEY=VALUE
# lines (a later one wins).
variant_env() {
    env | grep '^OUTBOARD_[A-Z_]*=' || true
    local kv
    for kv in ${settings[$1]}; do echo "$kv"; done
}
cpu=$(grep -m1 -E '^(model name|Model|cpu model)[[:space:]]*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)
cores=$(nproc)
# Under an MPI program the library runs one node engine, or one engine per
# rank with OUTBOARD_ENGINE=process.
engines=1
if [ "${OUTBOARD_ENGINE:-node}" = process ]; then engines=$n; fi
echo "# $cores cores, $(uname -m), ${cpu:-CPU model unknown}; $n ranks, $iters iterations, $bytes bytes"
echo "# time inside the call in us (mean over ranks and iterations) after a uniform 0..skew_us of computing on every rank"
echo "# where the machine has fewer cores than ranks plus engines, the offloaded figures are not evidence of offload: the engines and the ranks share cores"
if [ "$cores" -lt $((n + engines)) ]; then echo "# NOTE: that is the case here: $cores cores for $n ranks and $engines engine(s)"; fi
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" >/dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "$outboard" mpi-lib --mpicc "mpicc.$mpi" --out "$tmp" > /dev/null 2> "$tmp/mpi-lib.err" || { cat "$tmp/mpi-lib.err" >&2; exit 1; }
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_skew.c -o "$tmp/skew_$mpi"
    lib=$tmp/liboutboard_mpi_$mpi.so
    if [ "$mpi" = openmpi ]; then
        # Open MPI's normal configuration: shared memory within the node.
        run() { mpirun.openmpi --oversubscribe --mca btl self,vader,tcp -np "$n" "$@"; }
        preload() { local p=(-x "LD_PRELOAD=$lib") kv; while read -r kv; do p+=(-x "$kv"); done < <(variant_env "$1"); echo "${p[@]}"; }
    else
        run() { mpiexec.mpich -launcher fork -n "$n" "$@"; }
        preload() { local p=(-env LD_PRELOAD "$lib") kv; while read -r kv; do p+=(-env "${kv%%=*}" "${kv#*=}"); done < <(variant_env "$1"); echo "${p[@]}"; }
    fi
    run "$tmp/skew_$mpi" "$iters" "$bytes" "$skews" | grep -v '^#' > "$tmp/plain"
    cols=("$tmp/plain")
    for v in "${labels[@]}"; do
        # A variant that fails (a setting this build does not know, a wrong
        # result) shows as "-" and says why; the others still run.
        # shellcheck disable=SC2046
        if run $(preload "$v") "$tmp/skew_$mpi" "$iters" "$bytes" "$skews" > "$tmp/$v.out" 2> "$tmp/$v.err"; then
            grep -v '^#' "$tmp/$v.out" > "$tmp/$v"
        else
            echo "# $mpi +$v failed:"
            { grep -i -m3 'outboard\|error\|abort' "$tmp/$v.err" || grep -m1 . "$tmp/$v.err" || echo 'no message'; } | sed 's/^/#   /'
            awk '{ print $1, $2, $3, "-" }' "$tmp/plain" > "$tmp/$v"
        fi
        cols+=("$tmp/$v")
    done
    echo "# $mpi, $n ranks on one machine; +variant: with the library preloaded (${labels[*]})"
    printf '%-10s %7s %7s %10s %10s %10s %14s %14s\n' call bytes skew_us "$mpi" "${labels[@]/#/+}"
    # Each file's rows are "call bytes skew_us mean_us ..." in the same
    # order: the first three fields once, then each file's mean.
    means=()
    for c in "${cols[@]}"; do awk '{ print $4 }' "$c" > "$c.mean"; means+=("$c.mean"); done
    paste -d' ' <(awk '{ print $1, $2, $3 }' "$tmp/plain") "${means[@]}" |
        awk '{ printf "%-10s %7s %7s %10s %10s %10s %14s %14s\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
done
