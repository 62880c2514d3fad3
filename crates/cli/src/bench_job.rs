//! A benchmark's ranks as a job: `outboard run LAUNCHER -- outboard
//! WORKER...`, this binary started again in worker mode under its own
//! launcher, so the ranks are processes joined as any job's are.

use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Runs `outboard run <launcher> -- outboard <worker>` and returns its
/// standard output and error; fails with both, under `what`, when the
/// job fails.
pub(crate) fn run(launcher: &[String], worker: &[String], what: &str) -> anyhow::Result<(String, String)> {
    let exe = std::env::current_exe().context("finding the outboard binary")?;
    let out = Command::new(&exe)
        .arg("run")
        .args(launcher)
        .arg("--")
        .arg(&exe)
        .args(worker)
        .stdin(Stdio::null())
        .output()
        .context("starting the benchmark job")?;
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("{what} failed:\n{so}{se}");
    }
    Ok((so, se))
}
