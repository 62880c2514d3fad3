//! The `collectives` example's checks under the real launchers, with no
//! `OUTBOARD_*` variable set: Open MPI's `mpirun` (the ranks meet through
//! its PMIx server) and MPICH's `mpiexec` (through Hydra's PMI-1 on
//! `PMI_FD`). Each test is skipped, and says why (`OUTBOARD_SKIP_LOG`),
//! when its launcher is not installed.
//!
//! The ranks are this test binary itself: `rank_program` does nothing in an
//! ordinary test run, and runs the example's `check_all` when a launcher
//! starts the binary as `<this test> rank_program --exact --ignored` with
//! `OB_SCENARIO` set.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

#[path = "../examples/collectives.rs"]
#[allow(dead_code)]
mod collectives;

#[path = "jobs/launcher_jobs.rs"]
mod launcher_jobs;

/// One job at a time: 4-rank jobs side by side on a small machine would
/// test the scheduler.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
#[ignore = "a rank's entry point, not a test: the tests of this file start it under a launcher with OB_SCENARIO set"]
fn rank_program() {
    launcher_jobs::run_scenario();
}

/// Records that `test` did not run, and why (as the cli's tests do: the
/// line goes to `OUTBOARD_SKIP_LOG`, which `scripts/test.sh` lists).
fn skip(test: &str, why: &str) {
    println!("SKIPPED {test}: {why}");
    if let Ok(Some(path)) = outboard_settings::registry::SKIP_LOG.get(&outboard_settings::ProcessEnv) {
        let line = format!("{}::{test}: {why}\n", env!("CARGO_CRATE_NAME"));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .unwrap_or_else(|e| panic!("{test} skipped ({why}) and the skip could not be recorded in {path}: {e}"));
    }
}

fn installed(launcher: &str) -> bool {
    Command::new(launcher).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Runs `launcher` (its arguments before the program) over four ranks of
/// this binary's `rank_program`, within a time only a hang exceeds, with
/// every `OUTBOARD_*` variable removed from the environment.
fn run_under(launcher: &[&str], scenario: &str) -> Output {
    let mut c = Command::new("timeout");
    c.arg("240").args(launcher).arg(std::env::current_exe().unwrap());
    c.args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OUTBOARD_") {
            c.env_remove(k);
        }
    }
    c.env("OB_SCENARIO", scenario).output().unwrap()
}

fn check(out: &Output, bootstrap: &str) {
    let so = String::from_utf8_lossy(&out.stdout);
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}\nstdout:\n{so}\nstderr:\n{se}", out.status);
    assert!(so.contains(&format!("bootstrap: {bootstrap}")), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..4 {
        assert!(so.contains(&format!("rank {r}: all collectives correct in both modes")), "rank {r}\nstdout:\n{so}\nstderr:\n{se}");
    }
}

#[test]
fn collectives_under_open_mpi_mpirun_meet_through_pmix_without_outboard_variables() {
    let test = "collectives_under_open_mpi_mpirun_meet_through_pmix_without_outboard_variables";
    let _serial = serial();
    if !installed("mpirun.openmpi") {
        return skip(test, "mpirun.openmpi not found (apt-get install -y openmpi-bin)");
    }
    if let Err(why) = outboard_runtime::bootstrap::pmix::available() {
        return skip(test, &format!("{why} (apt-get install -y libpmix2)"));
    }
    let out = run_under(&OPEN_MPI, "collectives");
    check(&out, "the launcher's PMIx");
}

const OPEN_MPI: [&str; 10] = ["env", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "mpirun.openmpi", "--oversubscribe", "--mca", "btl", "tcp,self", "-np", "4"];
// Hydra's fork launcher: no ssh on one machine.
const MPICH: [&str; 5] = ["mpiexec.mpich", "-launcher", "fork", "-n", "4"];

fn check_store(out: &Output) {
    let so = String::from_utf8_lossy(&out.stdout);
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "status {:?}\nstdout:\n{so}\nstderr:\n{se}", out.status);
    for r in 0..4 {
        assert!(so.contains(&format!("rank {r}: store intact")), "rank {r}\nstdout:\n{so}\nstderr:\n{se}");
    }
}

#[test]
fn open_mpis_pmix_store_carries_empty_short_and_long_values_and_says_missing_at_once() {
    let test = "open_mpis_pmix_store_carries_empty_short_and_long_values_and_says_missing_at_once";
    let _serial = serial();
    if !installed("mpirun.openmpi") {
        return skip(test, "mpirun.openmpi not found (apt-get install -y openmpi-bin)");
    }
    if let Err(why) = outboard_runtime::bootstrap::pmix::available() {
        return skip(test, &format!("{why} (apt-get install -y libpmix2)"));
    }
    check_store(&run_under(&OPEN_MPI, "store"));
}

#[test]
fn hydras_pmi1_store_carries_empty_short_and_long_values_and_says_missing_at_once() {
    let test = "hydras_pmi1_store_carries_empty_short_and_long_values_and_says_missing_at_once";
    let _serial = serial();
    if !installed("mpiexec.mpich") {
        return skip(test, "mpiexec.mpich not found (apt-get install -y mpich)");
    }
    check_store(&run_under(&MPICH, "store"));
}

#[test]
fn collectives_under_mpich_mpiexec_meet_through_pmi1_without_outboard_variables() {
    let test = "collectives_under_mpich_mpiexec_meet_through_pmi1_without_outboard_variables";
    let _serial = serial();
    if !installed("mpiexec.mpich") {
        return skip(test, "mpiexec.mpich not found (apt-get install -y mpich)");
    }
    let out = run_under(&MPICH, "collectives");
    check(&out, "the launcher's PMI-1");
}
