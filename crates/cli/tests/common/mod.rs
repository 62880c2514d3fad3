//! What the cli's integration tests share.
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

pub mod mpirun;

use std::io::Write as _;

/// Records that `test` did not run, and why.
///
/// Cargo captures a passing test's output, so a test that returns early
/// reads as `ok`; a reader of the output could not tell what did not run.
/// So besides printing, the reason is appended to the file named by
/// `OUTBOARD_SKIP_LOG` (set by `scripts/test.sh`, which lists the file's
/// lines when the run ends), one `test: reason` line per skip.
pub fn skip(test: &str, why: &str) {
    println!("SKIPPED {test}: {why}");
    let path = match outboard_settings::registry::SKIP_LOG.get(&outboard_settings::ProcessEnv) {
        Ok(Some(path)) => path,
        Ok(None) => return,
        Err(e) => panic!("{test} skipped ({why}) and the skip could not be recorded: {e}"),
    };
    let line = format!("{}::{test}: {why}\n", env!("CARGO_CRATE_NAME"));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("{test} skipped ({why}) and the skip could not be recorded in {path}: {e}");
    }
}

/// Whether `mpicc` can compile a program that includes `mpi.h`: the
/// compiler wrapper (openmpi-bin) can exist without the header
/// (libopenmpi-dev), and then the Open MPI columns of the benches are empty.
pub fn mpicc_works() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("outboard-mpicc-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let src = dir.join("probe.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\nint main(void) { return MPI_VERSION > 0 ? 0 : 1; }\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let out = std::process::Command::new("mpicc.openmpi")
        .arg(&src)
        .arg("-o")
        .arg(dir.join("probe"))
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Err(e) => Err(format!(
            "mpicc not found ({e}); apt-get install -y openmpi-bin libopenmpi-dev"
        )),
        Ok(o) if !o.status.success() => Err(format!(
            "mpicc cannot compile against mpi.h (apt-get install -y libopenmpi-dev): {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
        Ok(_) => Ok(()),
    }
}

/// The directory holding `liboutboard_capi.so`, the C ABI: cargo builds it
/// (outboard-capi is a dev-dependency of outboard-cli) beside the test
/// executable or one level up.
pub fn capi_lib_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let profile = deps.parent().unwrap().to_path_buf();
    [deps, profile]
        .into_iter()
        .find(|d| d.join("liboutboard_capi.so").is_file())
        .expect("liboutboard_capi.so next to the test executable (outboard-capi is a dev-dependency of outboard-cli)")
}
