//! Programs `outboard run` must not launch: MPI programs.
//!
//! `outboard run` hands its ranks Outboard's bootstrap environment
//! (`OUTBOARD_RANK`, `OUTBOARD_RENDEZVOUS`, ...), which `MPI_Init` does not
//! read: an MPI program started by it initialises as N separate jobs of
//! one rank each and "works", silently wrong. `liboutboard_mpi` brings
//! Outboard up from inside MPI (through `PMPI_Allgather`), so an MPI
//! program belongs under its MPI's launcher, with the library preloaded.
//! Rather than pretend to be a PMIx or PMI-2 server, `outboard run`
//! refuses such a program with the command that launches it.
//!
//! A program is recognised by the MPI library its executable names
//! (`DT_NEEDED`: `libmpi.so` for Open MPI, `libmpich.so` for MPICH) or
//! by `liboutboard_mpi` in its `LD_PRELOAD`. It is looked through `env`
//! (`outboard run -n 2 env LD_PRELOAD=... ./app`). A program that loads
//! MPI later (Python with mpi4py) is not recognised.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::elf;

/// An MPI implementation, by the library a program links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mpi {
    /// Open MPI (`libmpi.so`).
    OpenMpi,
    /// MPICH (`libmpich.so`).
    Mpich,
}

impl Mpi {
    /// The MPI a shared library's name belongs to, if any.
    fn of_library(name: &str) -> Option<Mpi> {
        if name.starts_with("libmpich.so") {
            Some(Mpi::Mpich)
        } else if name.starts_with("libmpi.so") {
            Some(Mpi::OpenMpi)
        } else {
            None
        }
    }

    /// The command that launches `n` ranks of `program` under this MPI,
    /// with `preload` (liboutboard_mpi) preloaded in every rank.
    fn command(self, n: u32, preload: &str, program: &str) -> String {
        match self {
            Mpi::OpenMpi => format!("mpirun.openmpi -n {n} -x LD_PRELOAD={preload} {program}"),
            Mpi::Mpich => format!("mpiexec.mpich -n {n} -env LD_PRELOAD {preload} {program}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "Open MPI",
            Mpi::Mpich => "MPICH",
        }
    }
}

/// Why `outboard run` refuses a program.
#[derive(Debug, thiserror::Error)]
pub enum MpiProgram {
    /// The executable links an MPI library.
    #[error(
        "{program} is an MPI program (it links {library}, {mpi}): outboard run would start {n} separate \
         one-rank MPI jobs, since MPI_Init does not read Outboard's bootstrap; launch it with {mpi}'s launcher, \
         liboutboard_mpi preloaded: {command}",
        mpi = mpi.name()
    )]
    Linked {
        /// The program as given.
        program: String,
        /// The MPI library it names.
        library: String,
        /// Whose library.
        mpi: Mpi,
        /// Ranks asked for.
        n: u32,
        /// The command to use instead.
        command: String,
    },
    /// `LD_PRELOAD` names liboutboard_mpi, and the program's MPI is not
    /// known.
    #[error(
        "LD_PRELOAD names {preload}, Outboard's MPI library, which starts from MPI_Init under an MPI launcher, not under \
         outboard run; launch the program with its MPI's launcher: {openmpi} (Open MPI) or {mpich} (MPICH)"
    )]
    Preloaded {
        /// The preloaded library.
        preload: String,
        /// The Open MPI command.
        openmpi: String,
        /// The MPICH command.
        mpich: String,
    },
}

/// Checks that `command` (program and arguments, as `outboard run` got
/// them) is no MPI program; `our_preload` is `LD_PRELOAD` of this process,
/// which the ranks inherit.
pub fn refuse_mpi_programs(n: u32, command: &[String], our_preload: Option<&OsStr>) -> Result<(), MpiProgram> {
    let target = Target::of(command, our_preload);
    let shown = command.join(" ");
    let outboard_mpi = target.preload.split([':', ' ']).find(|lib| lib.contains("liboutboard_mpi")).map(str::to_string);
    let preload_shown = outboard_mpi.clone().unwrap_or_else(|| "$PWD/liboutboard_mpi.so".to_string());
    let program_shown = target.program_and_args.join(" ");
    let linked = target
        .program
        .as_deref()
        .and_then(resolve)
        .and_then(|p| elf::needed_libraries(&p).ok())
        .and_then(|needed| needed.into_iter().find_map(|lib| Mpi::of_library(&lib).map(|mpi| (lib, mpi))));
    if let Some((library, mpi)) = linked {
        return Err(MpiProgram::Linked {
            program: target.program.unwrap_or(shown),
            library,
            mpi,
            n,
            command: mpi.command(n, &preload_shown, &program_shown),
        });
    }
    if let Some(preload) = outboard_mpi {
        return Err(MpiProgram::Preloaded {
            openmpi: Mpi::OpenMpi.command(n, &preload, &program_shown),
            mpich: Mpi::Mpich.command(n, &preload, &program_shown),
            preload,
        });
    }
    Ok(())
}

/// The program a command line runs and the `LD_PRELOAD` it runs with.
struct Target {
    /// The program, looked through `env`.
    program: Option<String>,
    /// It and its arguments.
    program_and_args: Vec<String>,
    /// Its `LD_PRELOAD` (empty: none).
    preload: String,
}

impl Target {
    fn of(command: &[String], our_preload: Option<&OsStr>) -> Target {
        let mut preload = our_preload.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mut rest = command;
        if rest.first().is_some_and(|p| Path::new(p).file_name().is_some_and(|f| f == "env")) {
            rest = &rest[1..];
            while let Some((arg, after)) = rest.split_first() {
                if let Some(v) = arg.strip_prefix("LD_PRELOAD=") {
                    preload = v.to_string();
                } else if matches!(arg.as_str(), "-i" | "--ignore-environment") {
                    preload.clear();
                } else if matches!(arg.as_str(), "-u" | "--unset" | "-C" | "--chdir" | "-S" | "--split-string") {
                    // Options with a value: skip it too.
                    rest = after.get(1..).unwrap_or(&[]);
                    continue;
                } else if !(arg.starts_with('-') || arg.contains('=')) {
                    break;
                }
                rest = after;
            }
        }
        Target { program: rest.first().cloned(), program_and_args: rest.to_vec(), preload }
    }
}

/// The file `program` names, as `execvp` finds it: a path when it has a
/// slash, else the first match on `PATH`.
fn resolve(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_program_is_found_through_env_with_its_preload() {
        let t = Target::of(&cmd("env -u X LD_PRELOAD=/x/liboutboard_mpi.so A=1 ./app -v"), None);
        assert_eq!((t.program.as_deref(), t.preload.as_str()), (Some("./app"), "/x/liboutboard_mpi.so"));
        assert_eq!(t.program_and_args, cmd("./app -v"));
        let t = Target::of(&cmd("env -i ./app"), Some(OsStr::new("/x/liboutboard_mpi.so")));
        assert_eq!(t.preload, "");
    }

    #[test]
    fn a_preloaded_outboard_mpi_is_refused_naming_both_launchers() {
        let e = refuse_mpi_programs(2, &cmd("true"), Some(OsStr::new("/opt/liboutboard_mpi.so"))).unwrap_err().to_string();
        assert!(e.contains("mpirun.openmpi -n 2 -x LD_PRELOAD=/opt/liboutboard_mpi.so true"), "{e}");
        assert!(e.contains("mpiexec.mpich -n 2 -env LD_PRELOAD /opt/liboutboard_mpi.so true"), "{e}");
        assert!(refuse_mpi_programs(2, &cmd("true"), Some(OsStr::new("/opt/libother.so"))).is_ok());
    }

    #[test]
    fn libraries_name_their_mpi() {
        assert_eq!(Mpi::of_library("libmpi.so.40"), Some(Mpi::OpenMpi));
        assert_eq!(Mpi::of_library("libmpich.so.12"), Some(Mpi::Mpich));
        assert_eq!(Mpi::of_library("libmpfr.so.6"), None);
    }
}
