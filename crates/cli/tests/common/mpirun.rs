//! Launching an MPI program on this machine under Open MPI or MPICH, with
//! the environment set in every rank.

use std::path::Path;
use std::process::Command;

/// What `timeout` exits with when it had to end the job.
pub const HUNG: i32 = 124;

/// The launcher of MPI `mpi` ("openmpi" or "mpich") for `n` ranks of
/// `prog`, with `env` set in every rank, ended after `limit_s` seconds
/// (exit status [`HUNG`]: a hang fails the test instead of blocking it).
/// Open MPI: oversubscribed, TCP between ranks, as root if need be. MPICH:
/// Hydra's fork launcher (no ssh on one machine), and its generic
/// collectives, because MPICH 4.0.2's device-level reduce crashes on
/// MPI_IN_PLACE at a root other than 0.
pub fn mpirun(mpi: &str, n: u32, env: &[(&str, &str)], prog: &Path, limit_s: u32) -> Command {
    let mut c = Command::new("timeout");
    c.arg(limit_s.to_string());
    if mpi == "openmpi" {
        c.arg("mpirun.openmpi");
        c.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--mca",
            "btl",
            "tcp,self",
            "-np",
            &n.to_string(),
        ]);
        for (k, v) in env {
            c.arg("-x").arg(format!("{k}={v}"));
        }
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    } else {
        c.arg("mpiexec.mpich");
        c.args([
            "-n",
            &n.to_string(),
            "-launcher",
            "fork",
            "-env",
            "MPIR_CVAR_DEVICE_COLLECTIVES",
            "none",
        ]);
        for (k, v) in env {
            c.args(["-env", k, v]);
        }
    }
    c.arg(prog);
    c
}
