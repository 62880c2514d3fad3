//! Why liboutboard_mpi could not be built, as sentences a user can act on:
//! each names the flag involved (`--mpicc`, `--out`) and what it accepts.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The compilers tried when `--mpicc` is not given, in order.
pub const DEFAULT_COMPILERS: [&str; 3] = ["mpicc.openmpi", "mpicc.mpich", "mpicc"];

/// A failure of [`super::build`] or [`super::build_all`].
#[derive(Debug)]
pub enum MpiLibError {
    /// No `--mpicc`, and none of [`DEFAULT_COMPILERS`] is on PATH.
    NoCompiler,
    /// The compiler could not be started; `named`: it was given with
    /// `--mpicc` (rather than found on PATH).
    CannotRun {
        mpicc: PathBuf,
        named: bool,
        source: io::Error,
    },
    /// The compiler runs but cannot compile a program including mpi.h
    /// (a wrapper installed without its MPI's development files).
    NoMpiHeader {
        mpicc: PathBuf,
        named: bool,
        stderr: String,
    },
    /// The library did not compile or link.
    Compile { mpicc: PathBuf, stderr: String },
    /// liboutboard_capi.so is not beside the running binary.
    NoCapi {
        looked_in: Vec<PathBuf>,
        cargo: String,
    },
    /// The output directory cannot be created or written.
    OutDir { dir: PathBuf, source: io::Error },
    /// A temporary file or directory could not be made.
    Temp { path: PathBuf, source: io::Error },
}

impl MpiLibError {
    /// Whether the MPI itself is missing here (a test skips then, rather
    /// than failing as it must when the library does not compile).
    pub fn mpi_missing(&self) -> bool {
        matches!(
            self,
            MpiLibError::NoCompiler
                | MpiLibError::CannotRun { .. }
                | MpiLibError::NoMpiHeader { .. }
        )
    }
}

impl fmt::Display for MpiLibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MpiLibError::NoCompiler => write!(
                f,
                "no MPI C compiler found: none of {} is on PATH. Install Open MPI or MPICH with its development files \
                 (Debian: apt-get install libopenmpi-dev, or libmpich-dev), or name the compiler with --mpicc PATH.",
                DEFAULT_COMPILERS.join(", ")
            ),
            MpiLibError::CannotRun { mpicc, named: true, source } => write!(
                f,
                "--mpicc {}: cannot run it ({source}). --mpicc takes the name or path of an MPI C compiler wrapper, \
                 such as mpicc.openmpi, mpicc.mpich or mpicc.",
                mpicc.display()
            ),
            MpiLibError::CannotRun { mpicc, named: false, source } => {
                write!(f, "{}, found on PATH, cannot run ({source}).", mpicc.display())
            }
            MpiLibError::NoMpiHeader { mpicc, named, stderr } => {
                let why = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim();
                if *named {
                    write!(
                        f,
                        "--mpicc {}: it cannot compile a program that includes mpi.h ({why}). --mpicc takes an MPI C \
                         compiler wrapper whose MPI has its development files installed (Debian: libopenmpi-dev or \
                         libmpich-dev).",
                        mpicc.display()
                    )
                } else {
                    write!(
                        f,
                        "{}, found on PATH, cannot compile a program that includes mpi.h ({why}); its MPI's development \
                         files are missing (Debian: libopenmpi-dev or libmpich-dev).",
                        mpicc.display()
                    )
                }
            }
            MpiLibError::Compile { mpicc, stderr } => {
                write!(f, "{} could not build liboutboard_mpi:\n{}", mpicc.display(), stderr.trim_end())
            }
            MpiLibError::NoCapi { looked_in, cargo } => write!(
                f,
                "liboutboard_capi.so, which liboutboard_mpi links against, is not beside this outboard binary \
                 (looked in {}). Build it with `{cargo}` and run the outboard binary of that same target directory.",
                looked_in.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" and ")
            ),
            MpiLibError::OutDir { dir, source } => write!(
                f,
                "--out {}: cannot create or write to it ({source}). --out takes a directory to put the libraries in.",
                dir.display()
            ),
            MpiLibError::Temp { path, source } => write!(f, "cannot write the sources to {} ({source}).", path.display()),
        }
    }
}

/// The underlying I/O errors are part of the sentences (`Display`), so no
/// `source` is reported apart: a chain would print them twice.
impl std::error::Error for MpiLibError {}
