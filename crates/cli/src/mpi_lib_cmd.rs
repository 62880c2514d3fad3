//! `outboard mpi-lib`: builds liboutboard_mpi for the MPIs installed here
//! and prints where, so that using Outboard from MPI takes no hand-typed
//! compiler line.

use std::path::PathBuf;

use anyhow::Context;
use outboard_cli::mpi_lib::{self, Built};

/// Arguments of `outboard mpi-lib`.
#[derive(clap::Args)]
pub struct MpiLibArgs {
    /// The MPI C compiler wrapper to build with (e.g. mpicc.openmpi).
    /// Default: each of mpicc.openmpi, mpicc.mpich and mpicc found on PATH,
    /// one library per MPI.
    #[arg(long, value_name = "PATH")]
    mpicc: Option<PathBuf>,
    /// Where to put the libraries (and outboard_mpi.h, the header of the
    /// functions they add to MPI). Default: the directory of the
    /// liboutboard_capi.so they link against (beside this binary).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Builds, then prints each library's path on stdout (one per line, for
/// `LD_PRELOAD=$(...)`) and which MPI it is for on stderr.
pub fn run(a: MpiLibArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot tell where this outboard binary is")?;
    let capi = mpi_lib::capi_dir_beside(&exe)?;
    let out = a.out.unwrap_or_else(|| capi.clone());
    let built = match &a.mpicc {
        Some(mpicc) => vec![mpi_lib::build(mpicc, &out, &capi)?],
        None => {
            let all = mpi_lib::build_all(&out, &capi)?;
            for skipped in &all.skipped {
                eprintln!("outboard mpi-lib: skipped: {skipped}");
            }
            all.built
        }
    };
    for Built { kind, mpicc, path } in &built {
        eprintln!(
            "outboard mpi-lib: {} ({}): {}",
            kind.name(),
            mpicc.display(),
            path.display()
        );
        println!("{}", path.display());
    }
    Ok(())
}
