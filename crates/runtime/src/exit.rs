//! How a program's `main` ends on an error: with the error's sentence.
//! Returned from `main`, a `Result`'s error is printed in its `Debug` form
//! (`Progress(ParseProgressError("fast"))`); [`Exit`] prints `error: ` and
//! the sentence instead, and exits with status 1.

use std::error::Error;
use std::process::{ExitCode, Termination};

/// The end of a program's `main`: `fn main() -> Exit { job().into() }`.
pub struct Exit(Result<(), Box<dyn Error>>);

impl<E: Into<Box<dyn Error>>> From<Result<(), E>> for Exit {
    fn from(r: Result<(), E>) -> Exit {
        Exit(r.map_err(Into::into))
    }
}

impl Termination for Exit {
    fn report(self) -> ExitCode {
        match self.0 {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}
