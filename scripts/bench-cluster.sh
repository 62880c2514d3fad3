#!/usr/bin/env bash
# One node of a cluster, measured on a many-core machine in one go (under
# ten minutes on 16 cores): the collectives an MPI program calls (barrier,
# bcast, reduce, allreduce at 8 B, 1 KiB, 64 KiB and 1 MiB, and the
# OSU-style overlap of ibarrier and iallreduce), run by
# bindings/mpi/bench/mpi_bench.c under Open MPI
#   - alone, in its normal configuration (shared memory between the ranks
#     of a machine),
#   - with liboutboard_mpi preloaded and an engine thread per process
#     (OUTBOARD_ENGINE=process),
#   - with liboutboard_mpi preloaded and one node engine process for the
#     machine's ranks (OUTBOARD_ENGINE=node), on a core of its own,
# for 2, 4 and 8 ranks on one machine; then 12 ranks as 4 nodes of 3
# (node engines named per rank with OUTBOARD_NODE_NAME), beside Open MPI
# over TCP alone - what it would use between real nodes - and in its
# normal configuration, which between these emulated nodes uses shared
# memory that real nodes do not have; Outboard both as it runs by default
# (blocking calls node by node: shared memory within a node, the leaders
# through the engines) and with every call through the engines; then, by
# bindings/mpi/bench/mpi_sweep.c, where Open MPI over TCP and Outboard
# cross, size by size from 1 KiB to 1 MiB; then, by
# bindings/mpi/bench/mpi_skew.c, 8 ranks' time inside MPI_Bcast and
# MPI_Reduce of 8 B after a random 0..skew us of computing (0, 200, 1000),
# Open MPI alone beside the library offloaded and by application bypass
# (signal and thread delivery).
#
# Usage: bash scripts/bench-cluster.sh [iterations=100] [largest-bytes=1048576]
# Needs Open MPI's mpicc and mpirun. The outboard command and
# liboutboard_capi.so come from this checkout's release build, or from
# the directory OUTBOARD_BIN names (a machine without Rust); where that
# directory also holds liboutboard_mpi_openmpi.so and mpi_bench, built
# elsewhere against the same Open MPI, no C compiler is needed either
# (a machine with Open MPI's runtime alone). Latency in us
# (the largest mean over the ranks), overlap in %.
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-100}
largest=${2:-1048576}
if [ -n "${OUTBOARD_BIN:-}" ]; then
    bin=$OUTBOARD_BIN
    # Not a setting of Outboard's: the ranks would refuse it.
    unset OUTBOARD_BIN
else
    cargo build -q --release -p outboard-cli -p outboard-capi
    bin=$PWD/target/release
fi
mpirun=$(command -v mpirun.openmpi || command -v mpirun)
tmp=$(mktemp -d -t outboard-bench-cluster.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -f "$bin/liboutboard_mpi_openmpi.so" ] && [ -x "$bin/mpi_bench" ] && [ -x "$bin/mpi_sweep" ] && [ -x "$bin/mpi_skew" ]; then
    lib=$bin/liboutboard_mpi_openmpi.so
    cp "$bin/mpi_bench" "$tmp/bench"
    cp "$bin/mpi_sweep" "$tmp/sweep"
    cp "$bin/mpi_skew" "$tmp/skew"
else
    mpicc=$(command -v mpicc.openmpi || command -v mpicc)
    "$bin/outboard" mpi-lib --mpicc "$mpicc" --out "$tmp" > /dev/null
    lib=$(ls "$tmp"/liboutboard_mpi_*.so)
    "$mpicc" -O2 bindings/mpi/bench/mpi_bench.c -o "$tmp/bench"
    "$mpicc" -O2 bindings/mpi/bench/mpi_sweep.c -o "$tmp/sweep"
    "$mpicc" -O2 bindings/mpi/bench/mpi_skew.c -o "$tmp/skew"
fi
# Each rank names its node (ranks 3k..3k+2 on node k) before the program
# starts, and the core its node's engine takes: the machine's last cores,
# one per node, while the ranks are bound to the first ones.
cat > "$tmp/on_node" <<'EOF'
#!/bin/sh
node=$((OMPI_COMM_WORLD_RANK / ${RANKS_PER_NODE:-3}))
OUTBOARD_NODE_NAME=node$node OUTBOARD_ENGINE_CPU=$(($(nproc --all) - 1 - node)) exec "$@"
EOF
chmod +x "$tmp/on_node"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "# $(nproc) cores ($cpu), $("$mpirun" --version | head -1), $iters iterations, ranks bound to cores 0.."

table() {
    printf '%-11s %8s' op bytes
    for h in "$@"; do printf ' %11s' "$h"; done
    printf '   overlap:'
    for h in "$@"; do printf ' %11s' "$h"; done
    echo
    local files=() h
    for h in "$@"; do files+=("$tmp/$h"); done
    paste -d' ' "${files[@]}" | awk -v k=$# '{
        printf "%-11s %8s", $1, $2
        for (i = 0; i < k; i++) printf " %11s", $(3 + 4 * i)
        printf "   overlap:"
        for (i = 0; i < k; i++) printf " %11s", $(4 + 4 * i)
        printf "\n" }'
}

# Every run binds rank i to core i (Open MPI's default for 2 ranks), so
# that the figures compare the libraries, not the scheduler's placement;
# a node engine takes one of the cores left.
mpirun() { "$mpirun" --oversubscribe --map-by core --bind-to core "$@"; }
# Outboard's own path at every size: by default the library passes calls
# between nodes (engines) above its thresholds through to the MPI, which
# here, between emulated nodes, would use shared memory.
all=(-x OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES=1M -x OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES=1M -x OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES=1M)
for n in 2 4 8; do
    [ "$n" -lt "$(nproc)" ] || continue
    mpirun -np "$n" "$tmp/bench" "$iters" "$largest" > "$tmp/openmpi"
    mpirun -np "$n" -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=process "${all[@]}" "$tmp/bench" "$iters" "$largest" > "$tmp/process"
    mpirun -np "$n" -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node "$tmp/bench" "$iters" "$largest" > "$tmp/node"
    echo "# 1 node x $n ranks: Open MPI (shared memory), +Outboard engine per process, +Outboard node engine"
    table openmpi process node
done

if [ "$(nproc)" -ge 16 ]; then
    mpirun -np 12 --mca btl self,tcp "$tmp/bench" "$iters" "$largest" > "$tmp/openmpi-tcp"
    mpirun -np 12 "$tmp/bench" "$iters" "$largest" > "$tmp/openmpi-shm"
    mpirun -np 12 -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node "${all[@]}" -x RANKS_PER_NODE=3 "$tmp/on_node" "$tmp/bench" "$iters" "$largest" > "$tmp/node4x3"
    mpirun -np 12 -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node -x OUTBOARD_SHM_COLL=off "${all[@]}" -x RANKS_PER_NODE=3 "$tmp/on_node" "$tmp/bench" "$iters" "$largest" > "$tmp/engines4x3"
    echo "# 4 nodes x 3 ranks on one machine: Open MPI over TCP (as between nodes), Open MPI with shared memory between all 12, +Outboard node engines (UDP between the 4; blocking calls node by node), +Outboard with every call through the engines (OUTBOARD_SHM_COLL=off)"
    table openmpi-tcp openmpi-shm node4x3 engines4x3
    # Where they cross: every power of two from 1 KiB to 1 MiB.
    mpirun -np 12 --mca btl self,tcp "$tmp/sweep" "$iters" > "$tmp/sweep-tcp"
    mpirun -np 12 -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node "${all[@]}" -x RANKS_PER_NODE=3 "$tmp/on_node" "$tmp/sweep" "$iters" > "$tmp/sweep-node"
    echo "# 4 nodes x 3 ranks, blocking calls on doubles by size: Open MPI over TCP, +Outboard node engines taking every size"
    printf '%-11s %8s %11s %11s\n' op bytes openmpi-tcp node4x3
    paste -d' ' "$tmp/sweep-tcp" "$tmp/sweep-node" | awk '{ printf "%-11s %8s %11s %11s\n", $1, $2, $3, $6 }'
fi

# Skew tolerance: 8 ranks on one node, a core each, the node engine on
# another (columns: call bytes skew_us, then each run's mean us inside).
if [ "$(nproc)" -gt 8 ]; then
    skew() { mpirun -np 8 "$@" "$tmp/skew" 200 8 0,200,1000 | grep -v '^#'; }
    skew > "$tmp/skew-openmpi"
    skew -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node > "$tmp/skew-offloaded"
    skew -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node -x OUTBOARD_MPI_BCAST=bypass -x OUTBOARD_MPI_REDUCE=bypass -x OUTBOARD_BYPASS_DELIVERY=signal > "$tmp/skew-signal"
    skew -x LD_PRELOAD="$lib" -x OUTBOARD_ENGINE=node -x OUTBOARD_MPI_BCAST=bypass -x OUTBOARD_MPI_REDUCE=bypass -x OUTBOARD_BYPASS_DELIVERY=thread > "$tmp/skew-thread"
    echo "# 1 node x 8 ranks, time inside the call (mean us) after a random 0..skew us of computing: Open MPI, +Outboard offloaded, +application bypass (signal), +application bypass (thread)"
    printf '%-11s %6s %8s %11s %11s %11s %11s\n' op bytes skew_us openmpi offloaded bypass-sig bypass-thr
    paste -d' ' "$tmp/skew-openmpi" "$tmp/skew-offloaded" "$tmp/skew-signal" "$tmp/skew-thread" |
        awk '{ printf "%-11s %6s %8s %11s %11s %11s %11s\n", $1, $2, $3, $4, $10, $16, $22 }'
fi
