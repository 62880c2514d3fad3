//! `outboard node`: one node's engine, started by the node's first rank
//! under `OUTBOARD_ENGINE=node` (module `outboard_runtime::node_engine`).

use std::time::Duration;

use anyhow::Context;
use outboard_runtime::node_engine::server::{serve, ServeOptions};

/// Arguments of `outboard node`.
#[derive(clap::Args)]
pub struct NodeArgs {
    /// The abstract Unix socket name to serve the node's processes on.
    #[arg(long)]
    listen: String,
    /// Milliseconds to wait for the configuring rank, and then for the
    /// first port, before giving up.
    #[arg(long, default_value_t = 60_000)]
    attach_timeout_ms: u64,
    /// Go on in a child process and return at once: the rank that starts
    /// the engine then reaps this command straight away, and needs no
    /// thread of its own to reap the engine when it ends (the engine is
    /// inherited by the system's reaper).
    #[arg(long)]
    detach: bool,
}

pub fn run(a: NodeArgs) -> anyhow::Result<()> {
    if a.detach {
        // SAFETY: nothing has started a thread in this process yet (clap
        // parsed the command line, nothing else ran), so the child may do
        // anything the parent could.
        match unsafe { nix::unistd::fork() }.context("detaching the node engine (fork)")? {
            nix::unistd::ForkResult::Parent { .. } => std::process::exit(0),
            nix::unistd::ForkResult::Child => {}
        }
    }
    outboard_settings::check(&outboard_settings::ProcessEnv)?;
    let print_stats = outboard_settings::registry::STATS.get(&outboard_settings::ProcessEnv)? == "stderr";
    serve(&ServeOptions { name: a.listen.clone(), attach_timeout: Duration::from_millis(a.attach_timeout_ms), print_stats })
        .with_context(|| format!("node engine {:?}", a.listen))
}
