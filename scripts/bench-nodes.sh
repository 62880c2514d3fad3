#!/usr/bin/env bash
# Several nodes on one machine, as MPI itself sees them: each node is a
# network namespace with a host name of its own, on a bridge, and the MPI
# launcher starts its per-node daemon in each through a remote-shell agent
# (instead of ssh). So Open MPI and MPICH run in their normal configuration
# for a real multi-node job - shared memory between the ranks of a node,
# TCP between nodes - and liboutboard_mpi gets one node engine per node,
# UDP between them. The collectives of bindings/mpi/bench/mpi_bench.c run
# under each MPI alone, with the library preloaded (node engines), and with
# an engine thread per process (OUTBOARD_ENGINE=process), in one run.
#
# Usage (root, iproute2, util-linux's unshare):
#   bash scripts/bench-nodes.sh [nodes=2] [ranks-per-node=2] [iterations=500] [largest=65536]
# OUTBOARD_BENCH_MTU sets the links' MTU (default 9000, as `outboard run
# --netns`). Extra OUTBOARD_* settings in the environment go to the
# preloaded runs. Latency in us (largest mean over the ranks), overlap in %.
#
# The emulated nodes share the machine's cores, so Open MPI binds nothing
# (--bind-to none): each node's daemon would bind its first rank to core
# 0, all nodes' first ranks to the same core. When the job has more ranks
# than the machine has cores, Open MPI's ranks
# are told to yield when idle (mpi_yield_when_idle, what Open MPI does by
# itself when it knows it is oversubscribed): it cannot know here, because
# each emulated node has as many slots as ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${1:-2}
per=${2:-2}
iters=${3:-500}
largest=${4:-65536}
mtu=${OUTBOARD_BENCH_MTU:-9000}
n=$((nodes * per))
[ "$(id -u)" = 0 ] || { echo "bench-nodes.sh: network namespaces need root" >&2; exit 1; }
[ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] || { echo "bench-nodes.sh: nodes must be 1 to 200, not $nodes" >&2; exit 1; }
cargo build -q --release -p outboard-cli
outboard=${CARGO_TARGET_DIR:-$PWD/target}/release/outboard
tmp=$(mktemp -d -t outboard-bench-nodes.XXXXXX)
chmod 755 "$tmp"
tag=obn$$
hub=$tag-hub
cleanup() {
    for ns in $(ip netns list | awk -v t="$tag-" 'index($1, t) == 1 { print $1 }'); do
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# The network: a hub namespace holding the bridge and the launcher, node k
# at 10.78.0.(k+1). `ip netns exec` mounts /etc/netns/NS/hosts over
# /etc/hosts, so every namespace resolves the node names and nothing of
# the machine's own configuration changes.
hosts="10.78.0.254 hub"
for k in $(seq 0 $((nodes - 1))); do hosts+=$'\n'"10.78.0.$((k + 1)) n$k"; done
ip netns add "$hub"
mkdir -p "/etc/netns/$hub" && echo "$hosts" > "/etc/netns/$hub/hosts"
ip -n "$hub" link add br0 type bridge
ip -n "$hub" addr add 10.78.0.254/24 dev br0
ip -n "$hub" link set lo up
for k in $(seq 0 $((nodes - 1))); do
    ns=$tag-n$k
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns" && echo "$hosts" > "/etc/netns/$ns/hosts"
    ip -n "$hub" link add "e$k" type veth peer name eth0 netns "$ns"
    ip -n "$hub" link set "e$k" mtu "$mtu" master br0 up
    ip -n "$ns" addr add "10.78.0.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 mtu "$mtu" up
    ip -n "$ns" link set lo up
done
ip -n "$hub" link set br0 mtu "$mtu" up

# The remote shell: `agent [options] HOST COMMAND...` runs COMMAND in
# HOST's namespace under HOST's own host name, as ssh would on that node.
cat > "$tmp/agent" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec $tag-\$host unshare --uts sh -c "hostname \$host; \$*"
EOF
chmod +x "$tmp/agent"
hostlist=$(for k in $(seq 0 $((nodes - 1))); do printf 'n%d:%d,' "$k" "$per"; done)
hostlist=${hostlist%,}
in_hub() { ip netns exec "$hub" unshare --uts sh -c 'hostname hub; exec "$@"' sh "$@"; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=()
for k in $(env | grep -o '^OUTBOARD_[A-Z_]*' || true); do
    case $k in OUTBOARD_BENCH_MTU | OUTBOARD_ENGINE) ;; *) pass+=("$k") ;; esac
done
cores=$(nproc)
echo "# $nodes nodes x $per ranks as network namespaces on one machine ($cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), links of MTU $mtu, $iters iterations"
for mpi in openmpi mpich; do
    command -v "mpicc.$mpi" >/dev/null || { echo "# $mpi: mpicc.$mpi not found, skipped"; continue; }
    "$outboard" mpi-lib --mpicc "mpicc.$mpi" --out "$tmp" > /dev/null
    "mpicc.$mpi" -O2 bindings/mpi/bench/mpi_bench.c -o "$tmp/bench_$mpi"
    if [ "$mpi" = openmpi ]; then
        yield=()
        [ "$n" -gt "$cores" ] && yield=(--mca mpi_yield_when_idle 1)
        run() { in_hub mpirun.openmpi --mca plm_rsh_agent "$tmp/agent" --host "$hostlist" -np "$n" --bind-to none --mca btl self,vader,tcp "${yield[@]}" "$@"; }
        with() { local p=(-x "LD_PRELOAD=$tmp/liboutboard_mpi_$mpi.so"); for k in "${pass[@]}" OUTBOARD_ENGINE; do p+=(-x "$k"); done; echo "${p[@]}"; }
        note=${yield:+", ranks yield when idle"}
    else
        run() { in_hub mpiexec.mpich -launcher ssh -launcher-exec "$tmp/agent" -hosts "$hostlist" -n "$n" "$@"; }
        with() { local p=(-genv LD_PRELOAD "$tmp/liboutboard_mpi_$mpi.so"); for k in "${pass[@]}" OUTBOARD_ENGINE; do p+=(-genv "$k" "${!k}"); done; echo "${p[@]}"; }
        # Seen on Debian's MPICH 4.0: with one rank per emulated node a
        # barrier takes 0.2 us, so MPICH still finds the machine's shared
        # memory between the namespaces; those are not real nodes' figures.
        note=", but see the note on MPICH in scripts/bench-nodes.sh"
    fi
    run "$tmp/bench_$mpi" "$iters" "$largest" > "$tmp/plain"
    for engine in node process; do
        # shellcheck disable=SC2046
        OUTBOARD_ENGINE=$engine run $(OUTBOARD_ENGINE=$engine with) "$tmp/bench_$mpi" "$iters" "$largest" > "$tmp/$engine"
    done
    echo "# $mpi alone (shared memory within a node, TCP between$note), with the library and node engines, with an engine per process"
    printf '%-11s %7s %10s %10s %10s %9s %9s %9s\n' op bytes "$mpi" "+node" "+process" overlap "+node" "+process"
    paste -d' ' "$tmp/plain" "$tmp/node" "$tmp/process" |
        awk '{ printf "%-11s %7s %10s %10s %10s %9s %9s %9s\n", $1, $2, $3, $7, $11, $4, $8, $12 }'
done
