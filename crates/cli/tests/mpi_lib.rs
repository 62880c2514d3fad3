//! `outboard mpi-lib`: the command builds liboutboard_mpi for each MPI
//! installed, prints the paths, and the libraries export the C and Fortran
//! entry points; a bad `--mpicc` or `--out` is refused with a sentence
//! naming the flag.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn outboard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outboard"))
        .arg("mpi-lib")
        .args(args)
        .output()
        .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "outboard-mpi-lib-test-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The dynamic symbols `lib` defines.
fn defined_symbols(lib: &Path) -> Vec<String> {
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm (binutils)");
    assert!(
        o.status.success(),
        "nm {}: {}",
        lib.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect()
}

#[test]
fn builds_one_library_per_mpi_with_c_and_fortran_entry_points() {
    let test = "builds_one_library_per_mpi_with_c_and_fortran_entry_points";
    let out = tmp("all");
    let o = outboard(&["--out", out.to_str().unwrap()]);
    let (so, se) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    if !o.status.success() && se.contains("no MPI C compiler found") {
        return common::skip(test, &se);
    }
    assert!(o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    let printed: Vec<PathBuf> = so.lines().map(PathBuf::from).collect();
    for mpi in ["openmpi", "mpich"] {
        let lib = out
            .canonicalize()
            .unwrap()
            .join(format!("liboutboard_mpi_{mpi}.so"));
        if !lib.exists() {
            let installed = Command::new("sh")
                .arg("-c")
                .arg(format!("command -v mpicc.{mpi}"))
                .output()
                .unwrap()
                .status
                .success();
            let skipped = se.lines().any(|l| {
                l.starts_with("outboard mpi-lib: skipped:") && l.contains(&format!("mpicc.{mpi}"))
            });
            assert!(
                !installed || skipped,
                "mpicc.{mpi} is installed but no library was built for it:\n{so}\n{se}"
            );
            common::skip(
                test,
                &format!("mpicc.{mpi} not installed or without its headers: {se}"),
            );
            continue;
        }
        assert!(
            printed.contains(&lib),
            "{} not printed:\n{so}\n{se}",
            lib.display()
        );
        let symbols = defined_symbols(&lib);
        // The mpi_f08 names each MPI's module calls that bypass its C layer.
        let f08 = if mpi == "openmpi" {
            "mpi_bcast_f08_"
        } else {
            "mpi_wait_f08_"
        };
        assert!(
            symbols.iter().any(|d| d == f08),
            "{} does not export {f08}",
            lib.display()
        );
        for s in [
            "MPI_Bcast",
            "MPI_Allreduce",
            "MPI_Init",
            "mpi_bcast_",
            "mpi_bcast",
            "mpi_bcast__",
            "MPI_BCAST",
            "mpi_wait_",
        ] {
            assert!(
                symbols.iter().any(|d| d == s),
                "{} does not export {s}",
                lib.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bad_mpicc_is_refused_with_a_sentence_naming_it() {
    let out = tmp("bad");
    let o = outboard(&[
        "--mpicc",
        "/nonexistent/mpicc",
        "--out",
        out.to_str().unwrap(),
    ]);
    let se = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        se.contains("--mpicc /nonexistent/mpicc: cannot run it"),
        "{se}"
    );
    assert!(
        se.contains("such as mpicc.openmpi, mpicc.mpich or mpicc"),
        "{se}"
    );
    // A C compiler without an MPI: no mpi.h.
    let o = outboard(&["--mpicc", "gcc", "--out", out.to_str().unwrap()]);
    let se = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        se.contains("--mpicc gcc: it cannot compile a program that includes mpi.h"),
        "{se}"
    );
    assert!(!out.join("liboutboard_mpi_other.so").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn an_out_that_is_a_file_is_refused_with_a_sentence_naming_it() {
    let file = tmp("file");
    std::fs::write(&file, "not a directory").unwrap();
    let o = outboard(&["--mpicc", "mpicc.openmpi", "--out", file.to_str().unwrap()]);
    let se = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    if se.contains("cannot run it") || se.contains("cannot compile a program that includes mpi.h") {
        return common::skip(
            "an_out_that_is_a_file_is_refused_with_a_sentence_naming_it",
            "mpicc.openmpi missing",
        );
    }
    assert!(
        se.contains(&format!(
            "--out {}: cannot create or write to it",
            file.display()
        )),
        "{se}"
    );
    assert!(se.contains("--out takes a directory"), "{se}");
    let _ = std::fs::remove_file(&file);
}

/// Every C file and header of bindings/mpi (the tests and benchmarks
/// apart) is embedded in the binary: a new file the list forgets would
/// leave the library unlinkable or missing its entry points.
#[test]
fn every_c_file_of_the_library_is_built() {
    use outboard_cli::mpi_lib::sources::{C_FILES, HEADERS};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bindings/mpi");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".c") {
            assert!(C_FILES.iter().any(|(n, _)| *n == name), "bindings/mpi/{name} is not in mpi_lib::sources::C_FILES");
        } else if name.ends_with(".h") {
            assert!(HEADERS.iter().any(|(n, _)| *n == name), "bindings/mpi/{name} is not in mpi_lib::sources::HEADERS");
        }
    }
}
