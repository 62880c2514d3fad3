#!/usr/bin/env bash
# Outboard's test command: installs what it needs on a bare Debian machine,
# then runs every test of the workspace and smoke-runs the main commands.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cargo >/dev/null 2>&1 || need_apt+=(cargo rustc)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" \
            || echo "warning: could not install ${need_apt[*]}; tests that need them skip with a message"
    else
        echo "warning: not root, cannot install ${need_apt[*]}; tests that need them skip with a message"
    fi
fi

export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
cargo test --workspace --locked
cargo run -q --locked -p outboard-cli -- demo -n 4 --messages 5
cargo run -q --locked -p outboard-cli -- sim closed-form
