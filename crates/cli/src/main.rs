//! `outboard`: run, benchmark and simulate Outboard, and work with NICVM
//! modules.

use clap::{Parser, Subcommand};

mod demo;
mod sim_cmd;

#[derive(Parser)]
#[command(name = "outboard", version, about = "Outboard: cluster communication offloaded to the NIC")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Drive N engines over the built-in lossy test network and report
    /// what the engines did (no cluster needed).
    Demo(demo::DemoArgs),
    /// Run a simulator experiment (closed-form, pingpong, dissemination)
    /// under a hardware profile; prints the paper's figure beside each
    /// simulated one.
    Sim(sim_cmd::SimArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Demo(a) => demo::run(a),
        Cmd::Sim(a) => sim_cmd::run(a),
    }
}
