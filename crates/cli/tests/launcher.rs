//! `outboard run` as an mpirun user types it: `-np N` is the rank count,
//! and an MPI program - linked to Open MPI or MPICH, or with
//! liboutboard_mpi preloaded - is refused with the command that launches
//! it, before any rank starts.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn run(args: &[&str], env: &[(&str, &str)]) -> (Output, String) {
    let out = Command::new(OUTBOARD).arg("run").args(args).envs(env.iter().copied()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out, text)
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("outboard-launcher-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An MPI program that prints a line per rank, built with `mpicc` into
/// `dir`, or why it cannot be built here.
fn mpi_program(mpicc: &str, dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("app.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int r; MPI_Init(&c, &v); \
         MPI_Comm_rank(MPI_COMM_WORLD, &r); printf(\"started rank %d\\n\", r); MPI_Finalize(); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("app");
    match Command::new(mpicc).arg(&src).arg("-o").arg(&exe).output() {
        Err(e) => Err(format!("{mpicc} not found ({e})")),
        Ok(o) if !o.status.success() => Err(format!("{mpicc} failed: {}", String::from_utf8_lossy(&o.stderr))),
        Ok(_) => Ok(exe),
    }
}

#[test]
fn mpiruns_np_spelling_is_the_rank_count() {
    let (out, text) = run(&["-np", "3", "sh", "-c", "echo size=$OUTBOARD_SIZE"], &[]);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.lines().filter(|l| l.ends_with("] size=3")).count(), 3, "{text}");
    // The program's own arguments are its own.
    let (out, text) = run(&["-n", "1", "echo", "-np", "5"], &[]);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("[0] -np 5"), "{text}");
}

/// Runs `outboard run -n 2` on a program built with `mpicc` and checks the
/// refusal names `launcher`.
fn refused_naming(test: &str, mpicc: &str, library: &str, launcher: &str) {
    let dir = scratch(test);
    let app = match mpi_program(mpicc, &dir) {
        Ok(app) => app,
        Err(why) => return common::skip(test, &why),
    };
    let app = app.to_str().unwrap();
    let (out, text) = run(&["-n", "2", app], &[]);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(!text.contains("started rank"), "a rank started:\n{text}");
    assert!(text.contains(&format!("{app} is an MPI program (it links {library}")), "{text}");
    assert!(text.contains(&format!("{launcher} -n 2 ")) && text.trim_end().ends_with(app), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_open_mpi_program_is_refused_naming_mpirun() {
    refused_naming("an_open_mpi_program_is_refused_naming_mpirun", "mpicc.openmpi", "libmpi.so", "mpirun.openmpi");
}

#[test]
fn an_mpich_program_is_refused_naming_mpiexec() {
    refused_naming("an_mpich_program_is_refused_naming_mpiexec", "mpicc.mpich", "libmpich.so", "mpiexec.mpich");
}

#[test]
fn a_preloaded_liboutboard_mpi_is_refused_through_env_and_from_the_environment() {
    let lib = "/opt/outboard/liboutboard_mpi.so";
    let preload = format!("LD_PRELOAD={lib}");
    for (args, env) in [
        (vec!["-n", "2", "env", &preload, "sh", "-c", "echo started"], vec![]),
        (vec!["-n", "2", "sh", "-c", "echo started"], vec![("LD_PRELOAD", lib)]),
    ] {
        let (out, text) = run(&args, &env);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(!text.contains("] started"), "a rank started:\n{text}");
        assert!(text.contains(&format!("mpirun.openmpi -n 2 -x LD_PRELOAD={lib} sh -c echo started")), "{text}");
        assert!(text.contains(&format!("mpiexec.mpich -n 2 -env LD_PRELOAD {lib} sh -c echo started")), "{text}");
    }
}
