//! `outboard install`: copies what the build this binary belongs to made
//! into a prefix (bin/, lib/, include/, lib/pkgconfig/, share/), so that C
//! programs, MPI jobs and Python find Outboard without the build tree.
//!
//! Nothing installed names the build tree: the C library has no run path,
//! liboutboard_mpi is linked against the installed C library (its run path
//! is the prefix's lib/), and the C library finds the installed `outboard`
//! for node engines in `../bin` (crates/runtime's node_engine).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use outboard_cli::mpi_lib::{self, sources};

/// The pkg-config template, filled in with the prefix.
const PC_TEMPLATE: &str = include_str!("../../capi/outboard.pc.in");

/// Arguments of `outboard install`.
#[derive(clap::Args)]
pub struct InstallArgs {
    /// The directory to install into (created if need be): bin/outboard,
    /// lib/liboutboard_capi.so, lib/liboutboard_mpi_*.so,
    /// include/outboard.h, include/outboard_mpi.h, lib/pkgconfig/outboard.pc,
    /// share/outboard/profiles/ and share/man/man1/. Files already there
    /// are replaced.
    #[arg(long, value_name = "DIR")]
    prefix: PathBuf,
    /// Do not build liboutboard_mpi (the MPI interposition library).
    /// Without it, one is built for each MPI found (Open MPI, MPICH), and
    /// an MPI that is not installed is skipped.
    #[arg(long)]
    no_mpi: bool,
    /// The directory of the liboutboard_capi.so to install. Default: the
    /// one cargo built with this binary.
    #[arg(long, value_name = "DIR", hide = true)]
    from: Option<PathBuf>,
}

/// Installs, printing one line per group of files.
pub fn run(a: InstallArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot tell where this outboard binary is")?;
    let from = match a.from {
        Some(d) if d.join(LIB).is_file() => d,
        Some(d) => bail!(
            "--from {}: there is no {LIB} in it. --from takes the directory of a built {LIB} \
             (cargo's target/release or target/release/deps).",
            d.display()
        ),
        None => capi_dir(&exe)?,
    };
    let prefix = &a.prefix;
    std::fs::create_dir_all(prefix).with_context(|| {
        format!("--prefix {}: cannot create the directory; name one you can write to", prefix.display())
    })?;
    let prefix = prefix
        .canonicalize()
        .with_context(|| format!("--prefix {}: cannot resolve it to an absolute path", prefix.display()))?;
    let bin = prefix.join("bin");
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    let profiles = prefix.join("share/outboard/profiles");
    let man = prefix.join("share/man/man1");
    for d in [&bin, &lib, &include, &pkgconfig, &profiles, &man] {
        std::fs::create_dir_all(d).with_context(|| {
            format!("--prefix {}: cannot create {}; name a prefix you can write to", prefix.display(), d.display())
        })?;
    }

    let outboard = bin.join("outboard");
    copy(&exe, &outboard)?;
    println!("outboard install: command: {}", outboard.display());

    let mut libs = vec![lib.join(LIB)];
    copy(&from.join(LIB), &libs[0])?;
    let staticlib = from.join("liboutboard_capi.a");
    if staticlib.is_file() {
        libs.push(lib.join("liboutboard_capi.a"));
        copy(&staticlib, &libs[1])?;
    }
    println!("outboard install: C library: {}", join(&libs));

    let header = include.join("outboard.h");
    let text = sources::HEADERS.iter().find(|(n, _)| *n == "outboard.h").expect("outboard.h is embedded").1;
    write(&header, text.as_bytes())?;
    println!("outboard install: C header: {}", header.display());

    let pc = pkgconfig.join("outboard.pc");
    write(&pc, pkg_config(&prefix).as_bytes())?;
    println!("outboard install: pkg-config file: {}", pc.display());

    if a.no_mpi {
        println!("outboard install: MPI library: skipped (--no-mpi)");
    } else {
        mpi(&lib)?;
        let header = include.join(sources::INSTALLED_HEADER);
        let text = sources::HEADERS.iter().find(|(n, _)| *n == sources::INSTALLED_HEADER).expect("outboard_mpi.h is embedded").1;
        write(&header, text.as_bytes())?;
        println!("outboard install: MPI header: {}", header.display());
    }

    for (name, text) in outboard_sim::profile::BUILTIN {
        write(&profiles.join(format!("{name}.toml")), text.as_bytes())?;
    }
    println!(
        "outboard install: simulator profiles: {}/*.toml ({} files)",
        profiles.display(),
        outboard_sim::profile::BUILTIN.len()
    );

    let pages = man_pages(&man)?;
    println!("outboard install: man pages: {}/outboard*.1 ({pages} pages)", man.display());

    println!(
        "outboard install: done. Put {} on PATH; C programs build with \
         PKG_CONFIG_PATH={} pkg-config --cflags --libs outboard; \
         for Python, pip install the bindings/python directory of the source tree.",
        bin.display(),
        pkgconfig.display()
    );
    Ok(())
}

const LIB: &str = "liboutboard_capi.so";

/// The directory of the liboutboard_capi.so of this binary's build, or a
/// sentence saying how to build it.
fn capi_dir(exe: &Path) -> anyhow::Result<PathBuf> {
    match mpi_lib::capi_dir_beside(exe) {
        Ok(d) => Ok(d),
        Err(mpi_lib::MpiLibError::NoCapi { looked_in, .. }) => bail!(
            "{LIB} is not beside this outboard binary (looked in {}). Build both with \
             `cargo build --release -p outboard-cli -p outboard-capi` (`cargo build --release -p outboard-capi` \
             builds the library alone) and run target/release/outboard install --prefix DIR.",
            looked_in.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" and ")
        ),
        Err(e) => Err(e.into()),
    }
}

/// The pkg-config file for `prefix`: the template's fields filled in, its
/// leading comment (how to fill it in by hand) replaced.
fn pkg_config(prefix: &Path) -> String {
    let body: String = PC_TEMPLATE
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "# pkg-config file for Outboard's C ABI, written by outboard install.\nprefix={}\n{}",
        prefix.display(),
        body.replace("@LIBDIR@", "${prefix}/lib")
            .replace("@INCLUDEDIR@", "${prefix}/include")
            .replace("@VERSION@", env!("CARGO_PKG_VERSION"))
    )
}

/// Builds liboutboard_mpi into `lib` for each MPI found, linked against
/// the C library installed there.
fn mpi(lib: &Path) -> anyhow::Result<()> {
    let all = match mpi_lib::build_all(lib, lib) {
        Ok(all) => all,
        Err(e) if e.mpi_missing() => {
            println!("outboard install: MPI library: skipped: {e}");
            return Ok(());
        }
        Err(e) => {
            return Err(anyhow::anyhow!(e)
                .context("building liboutboard_mpi failed; fix the MPI installation, or install without it with --no-mpi"))
        }
    };
    for b in &all.built {
        println!("outboard install: MPI library for {}: {}", b.kind.name(), b.path.display());
    }
    for s in &all.skipped {
        println!("outboard install: MPI library: skipped: {s}");
    }
    Ok(())
}

/// Writes outboard.1 and one page per subcommand (outboard-run.1,
/// outboard-bench-pingpong.1, ...) into `dir`; returns how many.
fn man_pages(dir: &Path) -> anyhow::Result<usize> {
    clap_mangen::generate_to(crate::cli_command(), dir).with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    let n = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("outboard") && n.ends_with(".1")
        })
        .count();
    Ok(n)
}

/// Copies `from` to `to` with its permissions, replacing `to` atomically
/// (a running job may have the old file mapped; `to` may be `from`).
fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    let tmp = temp_beside(to);
    std::fs::copy(from, &tmp).with_context(|| format!("cannot copy {} to {}", from.display(), tmp.display()))?;
    rename(&tmp, to)
}

/// Writes `text` to `to`, replacing it atomically.
fn write(to: &Path, text: &[u8]) -> anyhow::Result<()> {
    let tmp = temp_beside(to);
    let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(text));
    written.with_context(|| format!("cannot write {}", tmp.display()))?;
    rename(&tmp, to)
}

fn temp_beside(to: &Path) -> PathBuf {
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    to.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

fn rename(tmp: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::rename(tmp, to).with_context(|| {
        let _ = std::fs::remove_file(tmp);
        format!("cannot replace {}", to.display())
    })
}

fn join(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
