//! `outboard install --prefix DIR`, then everything used from the prefix
//! alone, as a user would: a C program built with nothing but `pkg-config
//! --cflags --libs outboard` and run under the installed `outboard run`; an
//! MPI program with the installed liboutboard_mpi preloaded (its node
//! engine found beside the installed C library); the Python package
//! pip-installed into a fresh venv, offline, running under the installed
//! `outboard run`; the man pages and profiles. No command sees cargo's
//! LD_LIBRARY_PATH, OUTBOARD_LIB or CARGO_TARGET_DIR, and no installed
//! library's run path names anything but the prefix.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");
const TEST: &str = "an_install_serves_c_mpi_and_python_from_the_prefix_alone";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Whether `tool --version` (or `tool --help`) runs.
fn have(tool: &str) -> bool {
    ["--version", "--help"].iter().any(|a| Command::new(tool).arg(a).output().is_ok_and(|o| o.status.success()))
}

/// PATH without the directories holding an `outboard` (a cargo build's),
/// so that only the install can be found; with `first` in front.
fn path_without_outboard(first: Option<&Path>) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = first.map(Path::to_path_buf).into_iter().chain(std::env::split_paths(&path).filter(|d| !d.join("outboard").exists()));
    std::env::join_paths(dirs).unwrap()
}

/// `cmd` as a user's shell would start it: no trace of the build tree
/// (cargo's LD_LIBRARY_PATH, which outranks run paths, and the settings
/// that point the Python package at a build) and PATH as given.
fn user(mut cmd: Command, path: &std::ffi::OsStr) -> Command {
    for k in ["LD_LIBRARY_PATH", "OUTBOARD_LIB", "CARGO_TARGET_DIR", "PYTHONPATH", "OUTBOARD_NODE_PROGRAM", "OUTBOARD_ENGINE"] {
        cmd.env_remove(k);
    }
    cmd.env("PATH", path).env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

fn install(prefix: &Path, extra: &[&str]) -> String {
    let o = Command::new(OUTBOARD)
        .args(["install", "--prefix"])
        .arg(prefix)
        .arg("--from")
        .arg(common::capi_lib_dir())
        .args(extra)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "outboard install {extra:?} failed:\nstdout:\n{so}\nstderr:\n{se}");
    so
}

#[test]
fn an_install_serves_c_mpi_and_python_from_the_prefix_alone() {
    let scratch = std::env::temp_dir().join(format!("outboard-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let prefix = scratch.join("prefix");
    let said = install(&prefix, &[]);
    let prefix = prefix.canonicalize().unwrap();
    let lib = prefix.join("lib");
    for f in ["bin/outboard", "lib/liboutboard_capi.so", "include/outboard.h", "lib/pkgconfig/outboard.pc"] {
        assert!(prefix.join(f).is_file(), "{f} not installed:\n{said}");
    }
    assert!(said.contains("outboard install: C library: "), "{said}");

    // A second install over the first replaces the files.
    let again = install(&prefix, &["--no-mpi"]);
    assert!(again.contains("MPI library: skipped (--no-mpi)"), "{again}");

    profiles_and_man_pages(&prefix);
    run_paths_name_only_the_prefix(&lib);
    c_program_with_pkg_config(&prefix, &scratch);
    mpi_program_preloaded(&prefix, &said, &scratch);
    python_from_a_venv(&prefix, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The profiles are the repository's; outboard.1 and a page per
/// subcommand are man pages.
fn profiles_and_man_pages(prefix: &Path) {
    let profiles = prefix.join("share/outboard/profiles");
    let mut n = 0;
    for e in std::fs::read_dir(repo().join("profiles")).unwrap() {
        let e = e.unwrap();
        let installed = std::fs::read_to_string(profiles.join(e.file_name())).unwrap_or_default();
        assert_eq!(installed, std::fs::read_to_string(e.path()).unwrap(), "{:?} not installed as it is", e.file_name());
        n += 1;
    }
    assert!(n >= 10, "only {n} profiles in the repository?");
    let man = prefix.join("share/man/man1");
    for page in ["outboard.1", "outboard-run.1", "outboard-install.1", "outboard-mpi-lib.1", "outboard-bench-pingpong.1"] {
        let text = std::fs::read_to_string(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.lines().any(|l| l.starts_with(".TH ")), "{page} has no .TH line:\n{text}");
    }
    assert!(!man.join("outboard-node.1").exists(), "the hidden node subcommand got a man page");
    if have("man") {
        let o = Command::new("man").args(["-P", "cat", "-l"]).arg(man.join("outboard-install.1")).env("MANWIDTH", "100").output().unwrap();
        let (so, se) = text(&o);
        assert!(o.status.success() && so.contains("--prefix"), "man -l outboard-install.1:\n{so}\n{se}");
    }
}

/// Every RUNPATH or RPATH of an installed library is the prefix's lib or
/// $ORIGIN.
fn run_paths_name_only_the_prefix(lib: &Path) {
    if !have("readelf") {
        common::skip(TEST, "readelf not found (apt-get install -y binutils): run paths not checked");
        return;
    }
    for e in std::fs::read_dir(lib).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "so") {
            continue;
        }
        let o = Command::new("readelf").arg("-d").arg(&p).output().unwrap();
        let (so, _) = text(&o);
        for line in so.lines().filter(|l| l.contains("(RUNPATH)") || l.contains("(RPATH)")) {
            let paths = line.split_once('[').and_then(|(_, r)| r.split_once(']')).map(|(p, _)| p).unwrap_or("");
            for dir in paths.split(':') {
                assert!(dir == "$ORIGIN" || Path::new(dir) == lib, "{} has run path {dir}, outside the prefix:\n{line}", p.display());
            }
        }
    }
}

/// example.c built with only pkg-config's flags, run on 2 ranks by the
/// installed `outboard run`; its C library is the installed one.
fn c_program_with_pkg_config(prefix: &Path, scratch: &Path) {
    if !have("cc") || !have("pkg-config") {
        common::skip(TEST, "cc or pkg-config not found (apt-get install -y gcc pkg-config): the C program part did not run");
        return;
    }
    let path = path_without_outboard(None);
    let o = user(Command::new("pkg-config"), &path).args(["--cflags", "--libs", "outboard"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .unwrap();
    let (flags, se) = text(&o);
    assert!(o.status.success(), "pkg-config refused the installed outboard.pc: {se}");
    let exe = scratch.join("example");
    let o = user(Command::new("cc"), &path)
        .arg(repo().join("crates/capi/c/example.c"))
        .args(flags.split_whitespace())
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "cc example.c {flags}:\n{so}\n{se}");
    if have("ldd") {
        let o = user(Command::new("ldd"), &path).arg(&exe).output().unwrap();
        let (so, _) = text(&o);
        let want = format!("liboutboard_capi.so => {}", prefix.join("lib/liboutboard_capi.so").display());
        assert!(so.contains(&want), "the example does not load the installed library ({want}):\n{so}");
    }
    let o = user(Command::new(prefix.join("bin/outboard")), &path).args(["run", "-n", "2", "--timeout", "120", "--"]).arg(&exe).output().unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "installed outboard run -n 2 example:\nstdout:\n{so}\nstderr:\n{se}");
    for r in 0..2 {
        assert!(so.contains(&format!("[{r}] rank {r} of 2: sum of ranks 1")), "{so}\n{se}");
    }
}

const MPI_ALLREDUCE: &str = r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: allreduce %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"#;

/// A tiny MPI allreduce under Open MPI's mpirun with the installed
/// liboutboard_mpi preloaded, on node engines: the collective is taken
/// over, and the ranks start the installed `outboard node` (found beside
/// the installed C library: PATH holds no outboard).
fn mpi_program_preloaded(prefix: &Path, said: &str, scratch: &Path) {
    let preload = prefix.join("lib/liboutboard_mpi_openmpi.so");
    if !have("mpicc.openmpi") || !have("mpirun.openmpi") {
        common::skip(TEST, "mpicc.openmpi or mpirun.openmpi not found (apt-get install -y openmpi-bin libopenmpi-dev): the MPI part did not run");
        assert!(!preload.exists() || said.contains("Open MPI"), "{said}");
        return;
    }
    if let Err(why) = common::mpicc_works() {
        common::skip(TEST, &format!("{why}: the MPI part did not run"));
        return;
    }
    assert!(preload.is_file() && said.contains("MPI library for Open MPI: "), "Open MPI is here but no library for it was installed:\n{said}");
    let src = scratch.join("allreduce.c");
    std::fs::write(&src, MPI_ALLREDUCE).unwrap();
    let exe = scratch.join("allreduce");
    let path = path_without_outboard(None);
    let o = user(Command::new("mpicc.openmpi"), &path).arg(&src).arg("-o").arg(&exe).output().unwrap();
    assert!(o.status.success(), "mpicc.openmpi allreduce.c: {}", text(&o).1);
    let preload = preload.display().to_string();
    let env = [("LD_PRELOAD", preload.as_str()), ("OUTBOARD_MPI_VERBOSE", "1"), ("OUTBOARD_ENGINE", "node")];
    let o = user(common::mpirun::mpirun("openmpi", 2, &env, &exe, 120), &path).output().unwrap();
    let (so, se) = text(&o);
    let ctx = format!("mpirun.openmpi -np 2 with {preload}:\nstdout:\n{so}\nstderr:\n{se}");
    assert!(o.status.success(), "{ctx}");
    for r in 0..2 {
        assert!(so.contains(&format!("rank {r} of 2: allreduce 1")), "{ctx}");
        assert!(se.contains(&format!("rank {r}: MPI_Allreduce on MPI_COMM_WORLD: taken over")), "not taken over: {ctx}");
        assert!(se.contains(&format!("rank {r}: engine: node 0's engine process")), "no node engine: {ctx}");
    }
}

/// bindings/python pip-installed (offline) into a fresh venv; a one-liner
/// under the installed `outboard run` allreduces with the library the
/// package found beside the `outboard` on PATH.
fn python_from_a_venv(prefix: &Path, scratch: &Path) {
    let venv = scratch.join("venv");
    let path = path_without_outboard(Some(&prefix.join("bin")));
    match user(Command::new("python3"), &path).args(["-m", "venv"]).arg(&venv).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            common::skip(TEST, &format!("python3 -m venv failed (apt-get install -y python3-venv): {}; the Python part did not run", text(&o).1.trim()));
            return;
        }
        Err(e) => {
            common::skip(TEST, &format!("python3 not found ({e}; apt-get install -y python3 python3-venv): the Python part did not run"));
            return;
        }
    }
    // From a copy: pip builds in the directory it is given.
    let src = scratch.join("python-src");
    copy_dir(&repo().join("bindings/python"), &src);
    let o = user(Command::new(venv.join("bin/pip")), &path).args(["install", "--no-index", "--disable-pip-version-check"]).arg(&src).output().unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "pip install bindings/python (offline):\n{so}\n{se}");
    let program = "import outboard, outboard._lib as L\n\
                   with outboard.World() as w:\n    \
                   print(f'rank {w.rank} of {w.size}: allreduce {w.allreduce(w.rank + 1)} version {outboard.__version__} library {L.lib()._name}')";
    let o = user(Command::new(prefix.join("bin/outboard")), &path).args(["run", "-n", "2", "--timeout", "120", "--"]).arg(venv.join("bin/python")).args(["-c", program])
        .current_dir(scratch)
        .output()
        .unwrap();
    let (so, se) = text(&o);
    assert!(o.status.success(), "installed outboard run -n 2 python:\nstdout:\n{so}\nstderr:\n{se}");
    let lib = prefix.join("lib/liboutboard_capi.so");
    for r in 0..2 {
        let want = format!("[{r}] rank {r} of 2: allreduce 3 version {} library {}", env!("CARGO_PKG_VERSION"), lib.display());
        assert!(so.contains(&want), "wanted {want:?}:\nstdout:\n{so}\nstderr:\n{se}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "__pycache__" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Without the C library beside the binary, or with --from a directory
/// without one, the command says what to build or pass.
#[test]
fn install_names_the_fix_when_the_c_library_is_missing() {
    let empty = std::env::temp_dir().join(format!("outboard-install-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let o = Command::new(OUTBOARD).args(["install", "--no-mpi", "--prefix"]).arg(empty.join("prefix")).arg("--from").arg(&empty).output().unwrap();
    let (_, se) = text(&o);
    assert!(!o.status.success(), "{se}");
    assert!(se.contains(&format!("--from {}: there is no liboutboard_capi.so in it", empty.display())), "{se}");
    // A copy of the binary alone, as if the library had not been built.
    let bin = empty.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(OUTBOARD, bin.join("outboard")).unwrap();
    let o = Command::new(bin.join("outboard")).args(["install", "--no-mpi", "--prefix"]).arg(empty.join("prefix")).output().unwrap();
    let (_, se) = text(&o);
    assert!(!o.status.success(), "{se}");
    assert!(se.contains("cargo build --release -p outboard-capi"), "{se}");
    let _ = std::fs::remove_dir_all(&empty);
}
