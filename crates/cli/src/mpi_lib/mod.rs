//! Builds liboutboard_mpi, the PMPI interposition library (bindings/mpi),
//! for an MPI: one recipe for `outboard mpi-lib` and the tests.
//!
//! The library must be compiled by the MPI's own compiler wrapper, against
//! its mpi.h (Open MPI's and MPICH's handles differ in type and value), and
//! linked against liboutboard_capi with an rpath, so that a job needs only
//! `LD_PRELOAD`. Each MPI gets its own file name, so that both can sit in
//! one directory.

mod error;
pub mod sources;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub use error::{MpiLibError, DEFAULT_COMPILERS};

/// Which MPI a compiler wrapper compiles for, as its mpi.h says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiKind {
    OpenMpi,
    /// MPICH and the MPIs built on it (they define MPICH_VERSION).
    Mpich,
    /// Neither: the library still builds (it uses only standard MPI), and
    /// its Fortran calls go to the MPI's own Fortran bindings.
    Other,
}

impl MpiKind {
    /// The part of the file name that tells the MPIs' libraries apart.
    pub fn file_tag(self) -> &'static str {
        match self {
            MpiKind::OpenMpi => "openmpi",
            MpiKind::Mpich => "mpich",
            MpiKind::Other => "other",
        }
    }

    /// The MPI's name, for people.
    pub fn name(self) -> &'static str {
        match self {
            MpiKind::OpenMpi => "Open MPI",
            MpiKind::Mpich => "MPICH",
            MpiKind::Other => "an MPI other than Open MPI and MPICH",
        }
    }
}

/// A built library.
#[derive(Debug, Clone)]
pub struct Built {
    pub kind: MpiKind,
    /// The compiler wrapper that built it.
    pub mpicc: PathBuf,
    /// liboutboard_mpi_<tag>.so in the output directory.
    pub path: PathBuf,
}

/// What [`build_all`] did: the libraries built, and the compilers found
/// that could not build one (a wrapper without its MPI's headers).
#[derive(Debug)]
pub struct BuiltAll {
    pub built: Vec<Built>,
    pub skipped: Vec<MpiLibError>,
}

/// The compiler flags: warnings are errors, so that a change to the
/// sources that one MPI's headers object to fails here, not in a job.
const CFLAGS: [&str; 6] = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"];

/// Builds liboutboard_mpi with `mpicc` (given by the user: `--mpicc`) into
/// `out`, linked against the liboutboard_capi.so in `capi_dir`.
pub fn build(mpicc: &Path, out: &Path, capi_dir: &Path) -> Result<Built, MpiLibError> {
    let work = WorkDir::new()?;
    let kind = identify(mpicc, true, &work)?;
    compile(mpicc, true, kind, out, capi_dir, &work)
}

/// Builds liboutboard_mpi for every MPI whose compiler wrapper is on PATH
/// ([`DEFAULT_COMPILERS`]; a plain `mpicc` that is one of the others is
/// not built twice).
pub fn build_all(out: &Path, capi_dir: &Path) -> Result<BuiltAll, MpiLibError> {
    let work = WorkDir::new()?;
    let found: Vec<PathBuf> = DEFAULT_COMPILERS
        .iter()
        .filter_map(|c| on_path(c))
        .collect();
    if found.is_empty() {
        return Err(MpiLibError::NoCompiler);
    }
    let mut all = BuiltAll {
        built: Vec::new(),
        skipped: Vec::new(),
    };
    for mpicc in found {
        let kind = match identify(&mpicc, false, &work) {
            Ok(k) => k,
            Err(e) if e.mpi_missing() => {
                all.skipped.push(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        if all.built.iter().any(|b| b.kind == kind) {
            continue;
        }
        all.built
            .push(compile(&mpicc, false, kind, out, capi_dir, &work)?);
    }
    if all.built.is_empty() {
        return Err(all.skipped.remove(0));
    }
    Ok(all)
}

/// The directory of the liboutboard_capi.so built with the binary `exe`
/// (cargo puts it in the binary's target directory or its deps/; `outboard
/// install` puts it in the lib/ beside the binary's bin/). Where
/// both hold one, the newer: building the cli refreshes only deps/, so the
/// other may be a stale library from an earlier `cargo build -p
/// outboard-capi`, missing functions the library now calls.
pub fn capi_dir_beside(exe: &Path) -> Result<PathBuf, MpiLibError> {
    let dir = exe.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut looked_in = vec![dir.clone(), dir.join("deps")];
    if let Some(up) = dir.parent().filter(|_| dir.file_name().is_some_and(|n| n == "bin")) {
        looked_in.push(up.join("lib"));
    }
    let modified = |d: &PathBuf| std::fs::metadata(d.join("liboutboard_capi.so")).and_then(|m| m.modified()).ok();
    if let Some(found) = looked_in.iter().filter(|d| modified(d).is_some()).max_by_key(|d| modified(d)) {
        return Ok(found.clone());
    }
    let release = dir.file_name().is_some_and(|n| n == "release");
    let cargo = format!(
        "cargo build{} -p outboard-capi",
        if release { " --release" } else { "" }
    );
    Err(MpiLibError::NoCapi { looked_in, cargo })
}

/// `name`'s path if an executable file of that name is on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Which MPI `mpicc` compiles for: its preprocessor's view of mpi.h.
fn identify(mpicc: &Path, named: bool, work: &WorkDir) -> Result<MpiKind, MpiLibError> {
    let probe = work.file(
        "probe.c",
        "#include <mpi.h>\n\
         #if defined(OMPI_MAJOR_VERSION)\noutboard_mpi_kind openmpi\n\
         #elif defined(MPICH_VERSION)\noutboard_mpi_kind mpich\n\
         #else\noutboard_mpi_kind other\n#endif\n",
    )?;
    let o = Command::new(mpicc).arg("-E").arg(&probe).output();
    let o = o.map_err(|source| MpiLibError::CannotRun {
        mpicc: mpicc.to_path_buf(),
        named,
        source,
    })?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let kind = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("outboard_mpi_kind "));
    match (o.status.success(), kind.map(str::trim)) {
        (true, Some("openmpi")) => Ok(MpiKind::OpenMpi),
        (true, Some("mpich")) => Ok(MpiKind::Mpich),
        (true, Some(_)) => Ok(MpiKind::Other),
        _ => Err(MpiLibError::NoMpiHeader {
            mpicc: mpicc.to_path_buf(),
            named,
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }),
    }
}

/// Compiles the embedded sources with `mpicc` into
/// `out`/liboutboard_mpi_<tag>.so, replacing any older one atomically (a
/// running job may have the old one mapped).
fn compile(
    mpicc: &Path,
    named: bool,
    kind: MpiKind,
    out: &Path,
    capi_dir: &Path,
    work: &WorkDir,
) -> Result<Built, MpiLibError> {
    let out_err = |source| MpiLibError::OutDir {
        dir: out.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(out).map_err(out_err)?;
    let out = out.canonicalize().map_err(out_err)?;
    // The rpath must not depend on the job's working directory.
    let capi_dir = match capi_dir.canonicalize() {
        Ok(d) if d.join("liboutboard_capi.so").is_file() => d,
        _ => {
            return Err(MpiLibError::NoCapi {
                looked_in: vec![capi_dir.to_path_buf()],
                cargo: "cargo build -p outboard-capi".into(),
            })
        }
    };
    let src = work.dir.join(kind.file_tag());
    std::fs::create_dir_all(&src).map_err(|source| MpiLibError::Temp {
        path: src.clone(),
        source,
    })?;
    sources::write_to(&src).map_err(|source| MpiLibError::Temp {
        path: src.clone(),
        source,
    })?;
    let path = out.join(format!("liboutboard_mpi_{}.so", kind.file_tag()));
    let partial = out.join(format!(
        ".liboutboard_mpi_{}.so.{}",
        kind.file_tag(),
        work.id
    ));
    let mut cc = Command::new(mpicc);
    cc.args(CFLAGS).arg(format!("-I{}", src.display()));
    cc.args(sources::C_FILES.iter().map(|(name, _)| src.join(name)));
    cc.arg(format!("-L{}", capi_dir.display()))
        .arg(format!("-Wl,-rpath,{}", capi_dir.display()));
    cc.args(["-loutboard_capi", "-ldl", "-o"]).arg(&partial);
    let o = cc.output().map_err(|source| MpiLibError::CannotRun {
        mpicc: mpicc.to_path_buf(),
        named,
        source,
    })?;
    if !o.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(MpiLibError::Compile {
            mpicc: mpicc.to_path_buf(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        });
    }
    std::fs::rename(&partial, &path).map_err(out_err)?;
    // The library's own functions' header, for the programs that call
    // them and link it.
    let header = sources::HEADERS.iter().find(|(n, _)| *n == sources::INSTALLED_HEADER).expect("outboard_mpi.h is embedded").1;
    std::fs::write(out.join(sources::INSTALLED_HEADER), header).map_err(out_err)?;
    Ok(Built {
        kind,
        mpicc: mpicc.to_path_buf(),
        path,
    })
}

/// A private temporary directory, removed when dropped.
struct WorkDir {
    dir: PathBuf,
    /// Unique in this machine while it exists (process id and a counter:
    /// tests build from several threads at once).
    id: String,
}

impl WorkDir {
    fn new() -> Result<WorkDir, MpiLibError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(format!("outboard-mpi-lib-{id}"));
        std::fs::create_dir_all(&dir).map_err(|source| MpiLibError::Temp {
            path: dir.clone(),
            source,
        })?;
        Ok(WorkDir { dir, id })
    }

    fn file(&self, name: &str, text: &str) -> Result<PathBuf, MpiLibError> {
        let path = self.dir.join(name);
        std::fs::write(&path, text).map_err(|source| MpiLibError::Temp {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
