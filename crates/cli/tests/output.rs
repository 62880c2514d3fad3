//! What `outboard` prints, whatever it prints to: a pipe its reader
//! closed ends it quietly, and its errors are sentences, without Rust's
//! debug formatting or a backtrace.

use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// Runs `outboard args` with its standard output a pipe whose reader has
/// already gone (what `| head -1` becomes once `head` has its line):
/// it must end as `cat` would, with status 0 or SIGPIPE, and print no
/// panic.
fn into_a_closed_pipe(args: &[&str]) {
    let mut child = Command::new(OUTBOARD).args(args).stdout(closed_pipe()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert!(status.success() || status.signal() == Some(libc_sigpipe()), "outboard {args:?} ended with {status}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "outboard {args:?}:\n{stderr}");
    assert!(stderr.is_empty(), "outboard {args:?} printed to stderr:\n{stderr}");
}

/// The write end of a pipe whose read end is closed before the child
/// starts: closing it after the spawn would race with a child quick
/// enough to write all its output into the pipe's buffer first.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // SAFETY: pipe(2) just opened both, and nothing else owns them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// SIGPIPE's number on Linux.
fn libc_sigpipe() -> i32 {
    libc::SIGPIPE
}

#[test]
fn a_closed_pipe_ends_the_simulator_quietly() {
    into_a_closed_pipe(&["sim", "pingpong"]);
    into_a_closed_pipe(&["sim", "--list-profiles"]);
}

#[test]
fn a_closed_pipe_ends_the_demo_quietly() {
    into_a_closed_pipe(&["demo", "-n", "2", "--messages", "1"]);
}

#[test]
fn a_failed_job_is_one_sentence_even_under_rust_backtrace() {
    let out = Command::new(OUTBOARD).args(["run", "-n", "2", "false"]).env("RUST_BACKTRACE", "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line, no backtrace:\n{stderr}");
    assert!(lines[0].starts_with("Error: rank ") && lines[0].ends_with(" of 2 failed: exit status 1"), "{stderr}");
}

/// The runtime's `ring` example, built for the profile `outboard` was
/// built with (a no-op when it is built already).
fn ring_example() -> PathBuf {
    let exe = PathBuf::from(OUTBOARD);
    let profile_dir = exe.parent().unwrap();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "-p", "outboard-runtime", "--example", "ring", "--target-dir"]).arg(profile_dir.parent().unwrap());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "building the ring example: {}", String::from_utf8_lossy(&out.stderr));
    profile_dir.join("examples").join("ring")
}

#[test]
fn a_bad_environment_variable_is_named_with_the_accepted_values() {
    let out = Command::new(OUTBOARD).args(["run", "-n", "1"]).arg(ring_example()).env("OUTBOARD_PROGRESS", "fast").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("[0] error: OUTBOARD_PROGRESS=\"fast\" is not an accepted name: use dedicated, host-assisted or spin-then-block"),
        "{stderr}"
    );
    assert!(!stderr.contains("ParseProgressError") && !stderr.contains("Progress("), "{stderr}");
}

#[test]
fn outboard_stats_prints_a_table_per_rank() {
    let out = Command::new(OUTBOARD).args(["run", "-n", "2"]).arg(ring_example()).env("OUTBOARD_STATS", "stderr").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for rank in 0..2 {
        assert!(stderr.contains(&format!("[{rank}] outboard stats rank {rank}: engine counters that are not 0")), "{stderr}");
        // And the bytes copied: the ring's messages went through both the
        // engine and the host library.
        let line = stderr.lines().find(|l| l.starts_with(&format!("[{rank}] outboard copies rank {rank}: "))).unwrap_or_else(|| panic!("no copies line of rank {rank}:\n{stderr}"));
        let numbers: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        assert!(numbers.len() == 3 && numbers.iter().all(|&b| b > 0), "{line}");
    }
    assert!(!stderr.contains("Stats {"), "{stderr}");
}

/// An engine binds the address of the interface `OUTBOARD_IFACE` names: a
/// job on `lo` runs; an interface the machine lacks stops every rank with
/// a sentence that names the variable and the interfaces there are.
#[test]
fn outboard_iface_names_the_interface_the_engines_bind() {
    let out = Command::new(OUTBOARD).args(["run", "-n", "2"]).arg(ring_example()).env("OUTBOARD_IFACE", "lo").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(OUTBOARD).args(["run", "-n", "2"]).arg(ring_example()).env("OUTBOARD_IFACE", "nosuch0").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for rank in 0..2 {
        assert!(
            stderr.contains(&format!("[{rank}] error: OUTBOARD_IFACE=\"nosuch0\" is not an interface of this machine with an IP address: use one of lo")),
            "{stderr}"
        );
    }
}
