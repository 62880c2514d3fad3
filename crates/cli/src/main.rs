//! `outboard`: run, benchmark and simulate Outboard, and work with NICVM
//! modules.

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// `print!` through [`out::write_out`]: a closed pipe ends the command
/// quietly instead of panicking. Defined before the modules, so it is the
/// `print!` they see.
macro_rules! print {
    ($($arg:tt)*) => { $crate::out::write_out(format_args!($($arg)*)) };
}

/// `println!` through [`out::write_out`] (see `print!`).
macro_rules! println {
    () => { $crate::out::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

mod out;

mod bench;
mod bench_atomic;
mod bench_lock;
mod bench_coll;
mod bench_nicvm;
mod bench_skew;
mod bench_job;
mod bench_node;
mod bench_procs;
mod bench_report;
mod chaos;
mod config_cmd;
mod demo;
mod install_cmd;
mod launch;
mod mpi_lib_cmd;
mod netns;
mod nicvm_cmd;
mod node_cmd;
mod reproduce_cmd;
mod sim_cmd;
mod stats;

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
    /// Run a simulator experiment under hardware profiles; prints the
    /// paper's figure beside each simulated one, and its basis.
    Sim(sim_cmd::SimArgs),
    /// Regenerate every figure the project compares with a paper:
    /// figures.md (one table per paper section, with each figure's basis:
    /// calibrated, informed or predicted), CSV and SVG plots.
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// Launch N processes of a program on this machine as one job (the
    /// bootstrap environment set, output prefixed with the rank).
    Run(launch::RunArgs),
    /// Measure the engine path beside bare UDP sockets, and collectives
    /// offloaded vs host-based vs Open MPI.
    Bench(bench::BenchArgs),
    /// Compile, verify, disassemble and run NICVM user modules.
    #[command(subcommand)]
    Nicvm(nicvm_cmd::NicvmCommand),
    /// Run jobs of real processes, one network namespace per rank, under
    /// faults: SIGKILL of a rank, loss and duplication, replayed and forged
    /// datagrams (needs root, iproute2 and nftables).
    Chaos(chaos::ChaosArgs),
    /// List every OUTBOARD_* environment variable: its value here, whether
    /// that value is set in the environment or is the default, its kind
    /// and its default. A bad value, or an OUTBOARD_* variable that
    /// Outboard does not know, is explained and makes the command fail.
    Config(config_cmd::ConfigArgs),
    /// Run one node's engine (started by the node's first rank under
    /// OUTBOARD_ENGINE=node; not for direct use): serves every local
    /// process of the job through shared memory until the last one leaves.
    #[command(hide = true)]
    Node(node_cmd::NodeArgs),
    /// Build liboutboard_mpi, the library that runs an MPI program's
    /// collectives on Outboard (LD_PRELOAD), for each MPI installed, and
    /// print its path.
    MpiLib(mpi_lib_cmd::MpiLibArgs),
    /// Install the command, the C library and header, a pkg-config file,
    /// liboutboard_mpi for each MPI found, the simulator's profiles and man
    /// pages into a prefix (--prefix DIR).
    Install(install_cmd::InstallArgs),
}

/// The command line as users see it (the help, the man pages): `sim`'s
/// help ends with its experiments.
fn cli_command() -> clap::Command {
    Cli::command().mut_subcommand("sim", |c| c.after_help(sim_cmd::experiments_help()))
}

fn main() -> ExitCode {
    let command = cli_command();
    let args = launch::mpirun_spelling(std::env::args_os().collect(), command.find_subcommand("run").expect("run is a subcommand"));
    let matches = command.get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    out::run(|| dispatch(cli.command))
}

fn dispatch(command: Cmd) -> anyhow::Result<()> {
    match command {
        Cmd::Demo(a) => demo::run(a),
        Cmd::Sim(a) => sim_cmd::run(a),
        Cmd::Reproduce(a) => reproduce_cmd::run(a),
        Cmd::Run(a) => launch::run(a),
        Cmd::Bench(a) => bench::run_args(a),
        Cmd::Nicvm(c) => nicvm_cmd::run(c),
        Cmd::Chaos(a) => chaos::run(a),
        Cmd::Config(a) => config_cmd::run(a),
        Cmd::MpiLib(a) => mpi_lib_cmd::run(a),
        Cmd::Node(a) => node_cmd::run(a),
        Cmd::Install(a) => install_cmd::run(a),
    }
}
