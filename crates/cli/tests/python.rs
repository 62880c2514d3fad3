//! The Python bindings (`bindings/python`, ctypes over the C ABI): their
//! single-process unit tests, and `bindings/python/tests/ranks.py` under
//! `outboard run` with 2 and 4 ranks, against the `liboutboard_capi.so`
//! cargo built for this test.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tests_dir() -> PathBuf {
    repo().join("bindings/python/tests")
}

/// python3, or a recorded skip.
fn python3(test: &str) -> bool {
    match Command::new("python3").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            common::skip(test, "python3 not found (apt-get install -y python3)");
            false
        }
    }
}

/// `cmd` with the library this build made (not an older one elsewhere),
/// no bytecode written into the source tree, and development mode, whose
/// warnings show any handle the bindings leave unclosed.
fn python_env(cmd: &mut Command) -> &mut Command {
    cmd.env("OUTBOARD_LIB", common::capi_lib_dir().join("liboutboard_capi.so"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONDEVMODE", "1")
        .env_remove("PYTHONPATH")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Dtype and op mapping, argument checks, buffers, error classes, finding
/// the library, and a world of one rank (handles freed once, use after
/// close refused, an exception abandoning the world).
#[test]
fn the_python_unit_tests_pass() {
    if !python3("the_python_unit_tests_pass") {
        return;
    }
    let o = python_env(Command::new("python3").args(["-m", "unittest", "discover", "-v", "-p", "test_*.py", "-s"]).arg(tests_dir())).output().unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    let ran: u32 = se
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no test count in:\n{se}"));
    assert!(ran >= 20, "only {ran} Python unit tests ran:\n{se}");
    // The library is there, so nothing may skip; nothing may leak.
    assert!(se.lines().last() == Some("OK"), "not a plain OK (skips?):\n{se}");
    assert!(!se.contains("ResourceWarning"), "{se}");
}

#[test]
fn the_python_program_passes_with_two_and_four_ranks() {
    if !python3("the_python_program_passes_with_two_and_four_ranks") {
        return;
    }
    ranks_pass(&[]);
}

/// The same on node engines: two ranks on one node, and two nodes of two.
#[test]
fn the_python_program_passes_on_node_engines() {
    if !python3("the_python_program_passes_on_node_engines") {
        return;
    }
    ranks_pass(&["--ranks-per-node", "2"]);
}

fn ranks_pass(launcher: &[&str]) {
    for n in [2, 4] {
        let o = python_env(Command::new(OUTBOARD).args(["run", "-n", &n.to_string(), "--timeout", "300"]).args(launcher).args(["--", "python3"]).arg(tests_dir().join("ranks.py")))
            .output()
            .unwrap();
        let (so, se) = text(&o);
        assert!(o.status.success(), "{n} ranks:\nstdout:\n{so}\nstderr:\n{se}");
        for r in 0..n {
            assert!(so.contains(&format!("[{r}] rank {r}: python: all ")), "rank {r} of {n} did not finish:\n{so}\n{se}");
            for part in ["world offloaded: collectives of", "world host-based: collectives of", "created: collectives of"] {
                assert!(so.contains(&format!("[{r}] {part} {n} ranks ok")), "rank {r} of {n}: no {part:?}:\n{so}");
            }
            assert!(so.contains(&format!("[{r}] messages ok")) && so.contains(&format!("[{r}] rdma and atomics ok")), "{so}");
            assert!(so.contains(&format!("[{r}] movement ok")), "rank {r} of {n}: no movement:\n{so}");
            assert!(so.contains(&format!("[{r}] allreduce with spin failed: ")) && so.contains(&format!("[{r}] modules ok")), "{so}");
        }
        assert!(!se.contains("ResourceWarning"), "a handle left unclosed:\n{se}");
    }
}

/// The README's example, taken from it as a reader copies it: the first
/// `python` block of `bindings/python/README.md`.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(repo().join("bindings/python/README.md")).unwrap();
    let start = readme.find("```python\n").expect("a python block in the README") + "```python\n".len();
    readme[start..].split("```").next().unwrap().to_string()
}

/// The README says a program alone is a job of one rank, and that it runs
/// under `outboard run`: its example must do both.
#[test]
fn the_readme_example_runs_alone_and_with_two_ranks() {
    if !python3("the_readme_example_runs_alone_and_with_two_ranks") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("outboard-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("prog.py");
    std::fs::write(&prog, readme_example()).unwrap();
    let bindings = repo().join("bindings/python");
    let alone = python_env(Command::new("python3").arg(&prog)).env("PYTHONPATH", &bindings).output().unwrap();
    let (so, se) = text(&alone);
    assert!(alone.status.success(), "alone:\nstdout:\n{so}\nstderr:\n{se}");
    assert_eq!(so.lines().next(), Some("0 1"), "{so}");
    let two = python_env(Command::new(OUTBOARD).args(["run", "-n", "2", "--timeout", "120", "--", "python3"]).arg(&prog))
        .env("PYTHONPATH", &bindings)
        .output()
        .unwrap();
    let (so, se) = text(&two);
    assert!(two.status.success(), "2 ranks:\nstdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[0] 0 2") && so.contains("[1] 1 2"), "{so}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An exception that no one catches ends a rank; the bindings tell the
/// other ranks as the interpreter exits, so those waiting on it in a
/// collective fail at once naming it - not after the peer timeout, here
/// set far beyond the bound checked.
#[test]
fn an_uncaught_exception_fails_the_other_ranks_at_once_naming_its_rank() {
    if !python3("an_uncaught_exception_fails_the_other_ranks_at_once_naming_its_rank") {
        return;
    }
    let prog = r#"
import sys, time
import outboard
w = outboard.World()
t0 = time.monotonic()
try:
    # The first barrier can finish at rank 1 before it does at the others,
    # so they may learn of its death inside it as well as after.
    w.barrier()
    if w.rank == 1:
        raise RuntimeError("deliberate failure of rank 1")
    while True:
        w.barrier()
except outboard.OutboardError as e:
    print(f"rank {w.rank} failed after {time.monotonic() - t0:.3f} s: {e}", flush=True)
    sys.exit(3)
"#;
    let dir = std::env::temp_dir().join(format!("outboard-pyexc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fail.py");
    std::fs::write(&file, prog).unwrap();
    // Engines per process, then node engines of two ranks each (rank 1
    // shares its engine with rank 0).
    for launcher in [&[][..], &["--ranks-per-node", "2"][..]] {
        let o = python_env(Command::new(OUTBOARD).args(["run", "-n", "4", "--timeout", "120"]).args(launcher).args(["--", "python3"]).arg(&file))
            .env("PYTHONPATH", repo().join("bindings/python"))
            .env("OUTBOARD_PEER_TIMEOUT_MS", "60000")
            .output()
            .unwrap();
        survivors_fail_at_once_naming_rank_1(launcher, &o);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn survivors_fail_at_once_naming_rank_1(launcher: &[&str], o: &Output) {
    let (so, se) = text(o);
    assert!(!o.status.success(), "{launcher:?}: the job must fail:\n{so}\n{se}");
    assert!(se.contains("deliberate failure of rank 1"), "the traceback is printed:\n{se}");
    for r in [0, 2, 3] {
        let line = so
            .lines()
            .find(|l| l.starts_with(&format!("[{r}] rank {r} failed after ")))
            .unwrap_or_else(|| panic!("{launcher:?}: rank {r} did not fail with an error:\nstdout:\n{so}\nstderr:\n{se}"));
        let secs: f64 = line.split("failed after ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok()).unwrap();
        assert!(secs < 20.0, "{launcher:?}: rank {r} waited {secs} s, as if for the 60 s peer timeout:\n{so}");
        assert!(line.contains("rank 1"), "{launcher:?}: rank {r}'s error does not name rank 1: {line}");
    }
}

/// The first of `python3` (the one on the PATH) and Debian's
/// `/usr/bin/python3` that can import `module`.
fn python_with(module: &str) -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
    })
}

/// The package's type hints hold under `mypy --strict` (it ships a
/// `py.typed` marker, so its users' checkers read them).
#[test]
fn the_python_package_type_checks_strictly() {
    let Some(py) = python_with("mypy") else {
        common::skip("the_python_package_type_checks_strictly", "mypy not found (apt-get install -y python3-mypy)");
        return;
    };
    let o = Command::new(py)
        .args(["-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", "outboard"])
        .current_dir(repo().join("bindings/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "mypy --strict:\n{so}{se}");
}

/// numpy arrays are buffers like any other: reduced and broadcast in
/// place, and read as contributions (numpy stays optional).
#[test]
fn numpy_arrays_are_taken_where_buffers_are() {
    let Some(py) = python_with("numpy") else {
        common::skip("numpy_arrays_are_taken_where_buffers_are", "numpy not found (apt-get install -y python3-numpy)");
        return;
    };
    let prog = r#"
import numpy as np, outboard
with outboard.World() as w:
    a = np.arange(8, dtype=np.float64)
    w.group.allreduce_into(a)
    assert a.tolist() == [float(i) for i in range(8)], a
    b = np.full(4, 7, dtype=np.int64)
    w.bcast(b, root=0)
    assert b.tolist() == [7, 7, 7, 7], b
    assert list(w.reduce(np.ones(3, dtype=np.float32), outboard.Op.SUM, root=0)) == [1.0, 1.0, 1.0]
print("numpy ok")
"#;
    let o = python_env(Command::new(py).args(["-c", prog])).env("PYTHONPATH", repo().join("bindings/python")).output().unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success() && so.contains("numpy ok"), "{so}\n{se}");
}
