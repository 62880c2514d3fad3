#!/usr/bin/env bash
# Outboard's test command: installs what it needs on a bare Debian machine,
# then runs every test of the workspace, smoke-runs the main commands, and
# ends with the list of tests that skipped (and why).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use. Open MPI and MPICH coexist; the tests call
# mpicc.openmpi / mpif90.openmpi / mpirun.openmpi and mpicc.mpich / mpif90.mpich /
# mpiexec.mpich (the mpif90 wrappers need gfortran), never the
# mpicc / mpirun alternatives (which either may own after an install).
# A command can exist without its package's development half (mpicc from openmpi-bin without mpi.h from
# libopenmpi-dev), so packages are checked by name, not by command.
# Slurm's daemons and munge: crates/cli/tests/slurm.rs starts a one-node
# cluster of its own (its configuration, key, ports and directories, never
# the system's) and runs jobs under srun; the packages' services are not used.
packages=(gcc gfortran pkg-config python3 python3-venv python3-mypy python3-numpy openmpi-bin libopenmpi-dev mpich libmpich-dev iproute2 nftables
          munge slurmctld slurmd slurm-client)
need_apt=()
command -v cargo >/dev/null 2>&1 || need_apt+=(cargo rustc)
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "installing: ${need_apt[*]}"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null \
            || echo "warning: could not install ${need_apt[*]}; tests that need them skip and are listed at the end"
    else
        echo "warning: not root, cannot install ${need_apt[*]}; tests that need them skip and are listed at the end"
    fi
fi

# The guide (docs/) is an mdBook; a test builds it (crates/cli/tests/docs.rs).
# Without default features: no web server or file watcher, only the build.
if ! command -v mdbook >/dev/null 2>&1; then
    export PATH="$HOME/.cargo/bin:$PATH"
    command -v mdbook >/dev/null 2>&1 || {
        echo "installing: mdbook (cargo install)"
        cargo install --locked --quiet mdbook --version 0.5.4 --no-default-features --features search \
            || echo "warning: could not install mdbook; the book test skips and is listed at the end"
    }
fi

# Tests that cannot run here append "test: reason" lines to this file
# (crates/cli/tests/common/mod.rs); cargo would otherwise report them as ok.
skip_log=$(mktemp -t outboard-skipped.XXXXXX)
export OUTBOARD_SKIP_LOG=$skip_log
report_skips() {
    echo
    if [ -s "$skip_log" ]; then
        echo "skipped tests ($(wc -l < "$skip_log")):"
        sed 's/^/  /' "$skip_log"
    else
        echo "skipped tests: none"
    fi
    rm -f "$skip_log"
}
trap report_skips EXIT

export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
cargo test --workspace --locked
cargo run -q --locked -p outboard-cli -- demo -n 4 --messages 5
cargo run -q --locked -p outboard-cli -- sim closed-form
