//! Standard output that a closed pipe ends quietly, and errors printed as
//! sentences.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader has gone
//! (`outboard sim pingpong | head -1`) fails with EPIPE, on which
//! `println!` panics. Every command's output goes through [`write_out`]
//! instead (`main.rs` shadows `print!` and `println!` with macros that
//! call it): a broken pipe unwinds the thread with the [`BrokenPipe`]
//! payload, without the panic message, and [`run`] turns it into a quiet
//! exit with status 0 - the reader stopped reading because it had what it
//! wanted. Unwinding, unlike `exit`, still runs destructors: a launcher's
//! ranks are killed, the fault suite's namespaces removed.
//!
//! Restoring SIGPIPE's default action instead would also kill the process
//! on a write to a child's stdin or a socket whose peer died, where an
//! error should say what happened.

use std::io::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

/// The unwinding payload of a write to a closed standard output.
pub struct BrokenPipe;

/// Writes `args` to standard output; a closed pipe unwinds with
/// [`BrokenPipe`], any other failure panics as `print!` does.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => panic::resume_unwind(Box::new(BrokenPipe)),
        Err(e) => panic!("failed printing to stdout: {e}"),
    }
}

/// Runs a command: status 0 when it succeeds or its reader closed the
/// pipe, 1 with its error printed as a sentence when it fails. A panic
/// stays a panic (its message, and its backtrace when `RUST_BACKTRACE`
/// asks for one).
pub fn run(command: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    match panic::catch_unwind(AssertUnwindSafe(command)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("Error: {}", sentence(&e));
            ExitCode::FAILURE
        }
        Err(payload) if payload.is::<BrokenPipe>() => ExitCode::SUCCESS,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// An error and its causes, outermost first, joined by ": " - never its
/// `Debug` form, which prints a backtrace under `RUST_BACKTRACE=1` (an
/// error is an expected outcome with a cause in words, not a bug to
/// locate in the code).
pub fn sentence(e: &anyhow::Error) -> String {
    format!("{e:#}")
}
