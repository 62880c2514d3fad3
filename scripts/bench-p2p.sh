#!/usr/bin/env bash
# Point-to-point between two ranks of one machine: Outboard's paths (both
# ranks on one node, through shared memory, and through the node engine
# they attach to, OUTBOARD_SHM_P2P=off; and as two nodes, an engine each,
# UDP over loopback between them) beside Open MPI and MPICH
# in their normal configuration (shared memory within the node), in one
# run and with the same plan (`outboard bench pingpong` and
# bindings/mpi/bench/mpi_pingpong.c): one-way latency in us, streaming
# bandwidth in MB/s. Usage: bash scripts/bench-p2p.sh [largest=1048576]
set -euo pipefail
cd "$(dirname "$0")/.."
largest=${1:-1048576}
cargo build -q --release -p outboard-cli
outboard=${CARGO_TARGET_DIR:-$PWD/target}/release/outboard
tmp=$(mktemp -d -t outboard-bench-p2p.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Outboard's table rows ("SIZE VALUE", latency rows first) as
# "latency|bandwidth BYTES VALUE" lines, the MPI program's format.
tidy() {
    awk '/^# latency/ { k = "latency" } /^# bandwidth/ { k = "bandwidth" }
         /^[0-9]/ { s = $1; if (s ~ /K$/) s *= 1024; else if (s ~ /M$/) s *= 1048576; print k, s + 0, $2 }'
}
"$outboard" bench pingpong --ranks-per-node 2 --max-size "$largest" | tidy > "$tmp/node"
OUTBOARD_SHM_P2P=off "$outboard" bench pingpong --ranks-per-node 2 --max-size "$largest" | tidy > "$tmp/engine"
"$outboard" bench pingpong --ranks-per-node 1 --max-size "$largest" | tidy > "$tmp/nodes"
cols=(node engine nodes)
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" > /dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_pingpong.c -o "$tmp/pp_$mpi"
    if [ "$mpi" = openmpi ]; then
        mpirun.openmpi --mca btl self,vader,tcp -np 2 "$tmp/pp_$mpi" "$largest" > "$tmp/$mpi"
    else
        mpiexec.mpich -launcher fork -n 2 "$tmp/pp_$mpi" "$largest" > "$tmp/$mpi"
    fi
    cols+=("$mpi")
done
echo "# point-to-point between 2 ranks on one machine ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); median of 5 rounds"
echo "# node: Outboard, both ranks on one node, through shared memory; engine: the same through the node engine (OUTBOARD_SHM_P2P=off); nodes: Outboard, two node engines over loopback UDP; the MPIs in their normal configuration (shared memory)"
files=()
for c in "${cols[@]}"; do files+=("$tmp/$c"); done
printf '%-10s %8s' what bytes
for c in "${cols[@]}"; do printf ' %10s' "$c"; done
echo
paste -d' ' "${files[@]}" | awk -v k=${#cols[@]} '{
    printf "%-10s %8s", ($1 == "latency" ? "latency" : "bandwidth"), $2
    for (i = 0; i < k; i++) printf " %10s", $(3 + 3 * i)
    printf "\n" }'
echo "# latency: one-way us; bandwidth: MB/s"
