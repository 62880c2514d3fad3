//! The C ABI from C: `crates/capi/c/capi_test.c`, `atomic_test.c`,
//! `atomic_modes_test.c`, `bypass_test.c`, `choices_test.c`,
//! `nicvm_test.c` and the example, compiled with gcc against `include/outboard.h` and `liboutboard_capi.so`, run
//! under `outboard run` with 2 and 4 ranks, and under Open MPI's `mpirun`
//! and MPICH's `mpiexec` with no `OUTBOARD_*` variable (`slurm.rs` runs
//! them under `srun`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh directory for this test's binaries.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("outboard-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// gcc, or a recorded skip.
fn gcc(test: &str) -> bool {
    match Command::new("gcc").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            common::skip(test, "gcc not found (apt-get install -y gcc)");
            false
        }
    }
}

fn compile(src: &Path, out: &Path, flags: &[String]) {
    let o = Command::new("gcc").args(["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE"]).arg(src).arg("-o").arg(out).args(flags).output().unwrap();
    assert!(o.status.success(), "gcc {}:\n{}", src.display(), String::from_utf8_lossy(&o.stderr));
}

fn direct_flags() -> Vec<String> {
    let lib = common::capi_lib_dir();
    vec![
        format!("-I{}", repo().join("crates/capi/include").display()),
        format!("-L{}", lib.display()),
        format!("-Wl,-rpath,{}", lib.display()),
        "-loutboard_capi".into(),
        "-pthread".into(),
    ]
}

fn run(n: u32, prog: &Path) -> (Output, String, String) {
    run_with(n, &[], prog)
}

/// `outboard run -n N` with `launcher` options (`--ranks-per-node R`).
fn run_with(n: u32, launcher: &[&str], prog: &Path) -> (Output, String, String) {
    // cargo's LD_LIBRARY_PATH (which outranks the run path) may name a
    // directory with an older build of the library first.
    let o = Command::new(OUTBOARD)
        .args(["run", "-n", &n.to_string(), "--timeout", "300"])
        .args(launcher)
        .arg("--")
        .arg(prog)
        .env("LD_LIBRARY_PATH", common::capi_lib_dir())
        .output()
        .unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    (o, so, se)
}

#[test]
fn the_c_test_program_passes_with_two_and_four_ranks() {
    if !gcc("the_c_test_program_passes_with_two_and_four_ranks") {
        return;
    }
    let dir = scratch("test");
    let exe = dir.join("capi_test");
    compile(&repo().join("crates/capi/c/capi_test.c"), &exe, &direct_flags());
    for n in [2, 4] {
        let (o, so, se) = run(n, &exe);
        assert!(o.status.success(), "{n} ranks:\nstdout:\n{so}\nstderr:\n{se}");
        for r in 0..n {
            assert!(so.contains(&format!("[{r}] rank {r}: all ")), "rank {r} of {n} did not finish:\n{so}\n{se}");
            assert!(so.contains(&format!("[{r}] world host-based: collectives of {n} ranks ok")), "{so}");
        }
        assert!(so.contains("[0] split: collectives of"), "{so}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The same programs on node engines: two nodes of two ranks, each node's
/// ranks sharing one engine process, and one node of four, whose groups
/// run their blocking collectives in shared memory.
#[test]
fn the_c_test_programs_pass_on_node_engines() {
    if !gcc("the_c_test_programs_pass_on_node_engines") {
        return;
    }
    let dir = scratch("nodes");
    for (src, done) in [("capi_test", "all "), ("atomic_test", "atomics and lock: all ")] {
        let exe = dir.join(src);
        compile(&repo().join(format!("crates/capi/c/{src}.c")), &exe, &direct_flags());
        for per_node in ["2", "4"] {
        let (o, so, se) = run_with(4, &["--ranks-per-node", per_node], &exe);
        assert!(o.status.success(), "{src}, {per_node} ranks per node:\nstdout:\n{so}\nstderr:\n{se}");
        for r in 0..4 {
            assert!(so.contains(&format!("[{r}] rank {r}: {done}")), "{src}: rank {r} did not finish:\n{so}\n{se}");
        }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A failure as C sees it: the survivors of a killed rank get an error
/// that names it - in ranks, never an engine's node id - with engines per
/// process and with node engines (where the dead rank's port closes).
#[test]
fn a_c_programs_errors_name_the_killed_rank() {
    if !gcc("a_c_programs_errors_name_the_killed_rank") {
        return;
    }
    let dir = scratch("killed");
    let exe = dir.join("killed_test");
    compile(&repo().join("crates/capi/c/killed_test.c"), &exe, &direct_flags());
    for (n, launcher, said) in [(3, &[][..], "rank 2 is unreachable"), (4, &["--ranks-per-node", "2"][..], "rank 3 closed its port")] {
        let o = Command::new(OUTBOARD)
            // A long grace: under a loaded CI machine the survivors may
            // take more than the default 5 s to learn of the death and
            // print, and the launcher would kill them first.
            .args(["run", "-n", &n.to_string(), "--timeout", "120", "--grace", "60"])
            .args(launcher)
            .arg("--")
            .arg(&exe)
            .env("LD_LIBRARY_PATH", common::capi_lib_dir())
            .env("OUTBOARD_PEER_TIMEOUT_MS", "500")
            .output()
            .unwrap();
        let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        for r in 0..n - 1 {
            let line = so.lines().find(|l| l.starts_with(&format!("[{r}] rank {r}: receive from rank {}", n - 1))).unwrap_or_else(|| panic!("rank {r}:\n{so}\n{se}"));
            assert!(line.contains(said) && !line.contains("NodeId"), "{n} ranks {launcher:?}: {line}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Remote atomics and the MCS lock from C with 4 ranks: fetch-add old
/// values distinct and the count exact (remote and local adds mixed),
/// 32-bit wrap, one compare-and-swap winner, swap's old values, refusals,
/// and increments by plain RDMA inside the lock that lose nothing.
#[test]
fn the_c_atomics_and_lock_test_passes_with_four_ranks() {
    if !gcc("the_c_atomics_and_lock_test_passes_with_four_ranks") {
        return;
    }
    let dir = scratch("atomic");
    let exe = dir.join("atomic_test");
    compile(&repo().join("crates/capi/c/atomic_test.c"), &exe, &direct_flags());
    let (o, so, se) = run(4, &exe);
    assert!(o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..4 {
        assert!(so.contains(&format!("[{r}] rank {r}: atomics and lock: all ")), "rank {r} did not finish:\n{so}\n{se}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The other forms of the atomics from C with 4 ranks
/// (`atomic_modes_test.c`): direct-form atomics exact, host-based atomics
/// through each rank's atomic server in all three waits (sums exact, one
/// compare-and-swap winner, refusals, the server's count), the MCS lock
/// over the servers, and a lock wait in one thread that leaves the world
/// to the process's other thread, whose barrier is what frees the lock.
#[test]
fn the_c_atomic_modes_test_passes_with_four_ranks() {
    if !gcc("the_c_atomic_modes_test_passes_with_four_ranks") {
        return;
    }
    let dir = scratch("atomic-modes");
    let exe = dir.join("atomic_modes_test");
    compile(&repo().join("crates/capi/c/atomic_modes_test.c"), &exe, &direct_flags());
    let (o, so, se) = run(4, &exe);
    assert!(o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..4 {
        for line in ["direct-form atomics exact", "host-based atomics (blocking servers) exact", "offloaded lock: waited in one thread", "served lock: waited in one thread", "atomic modes: all "] {
            assert!(so.contains(&format!("[{r}] rank {r}: {line}")), "rank {r} did not print {line:?}:\n{so}\n{se}");
        }
    }
    // On node engines the server has no engine of its own to open a port
    // on: refused with a sentence that says why and what to do.
    let (o, so, se) = run_with(2, &["--ranks-per-node", "2"], &exe);
    assert!(!o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(se.contains("an atomic server needs an engine of this process's own"), "stdout:\n{so}\nstderr:\n{se}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A group's collective choices from C with 4 ranks (`choices_test.c`):
/// every barrier algorithm and protocol, broadcast mode and tree, and
/// reduction tree degree gives right results and shows in the group's
/// record of what its collectives ran as; on node engines too (a group
/// with choices goes to the engines, not the node's shared memory).
#[test]
fn the_c_choices_test_passes_with_four_ranks_and_on_node_engines() {
    if !gcc("the_c_choices_test_passes_with_four_ranks_and_on_node_engines") {
        return;
    }
    let dir = scratch("choices");
    let exe = dir.join("choices_test");
    compile(&repo().join("crates/capi/c/choices_test.c"), &exe, &direct_flags());
    for launcher in [&[][..], &["--ranks-per-node", "2"][..], &["--ranks-per-node", "4"][..]] {
        let (o, so, se) = run_with(4, launcher, &exe);
        assert!(o.status.success(), "{launcher:?}: stdout:\n{so}\nstderr:\n{se}");
        for r in 0..4 {
            assert!(so.contains(&format!("[{r}] rank {r}: choices: all ")), "{launcher:?}: rank {r} did not finish:\n{so}\n{se}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Allgather, gather, scatter, alltoall, reduce-scatter and the scans from
/// C (`movement_test.c`), blocking and split-phase, both modes, their
/// v-forms and in place, at lengths of 0, 1, odd and beyond a packet:
/// with 1, 3 and 4 ranks, and with ranks sharing node engines.
#[test]
fn the_c_movement_test_passes_with_one_three_and_four_ranks_and_on_node_engines() {
    if !gcc("the_c_movement_test_passes_with_one_three_and_four_ranks_and_on_node_engines") {
        return;
    }
    let dir = scratch("movement");
    let exe = dir.join("movement_test");
    compile(&repo().join("crates/capi/c/movement_test.c"), &exe, &direct_flags());
    for (n, launcher) in [(1, &[][..]), (3, &[][..]), (4, &[][..]), (4, &["--ranks-per-node", "2"][..]), (3, &["--ranks-per-node", "3"][..])] {
        let (o, so, se) = run_with(n, launcher, &exe);
        assert!(o.status.success(), "{n} ranks {launcher:?}: stdout:\n{so}\nstderr:\n{se}");
        for r in 0..n {
            assert!(so.contains(&format!("[{r}] rank {r}: movement: all ")), "{n} ranks {launcher:?}: rank {r} did not finish:\n{so}\n{se}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Application bypass from C (`bypass_test.c`) with 4 ranks, each
/// delivery, with an engine per rank and on node engines (whose process
/// interrupts the rank's): an inner rank away computing does not hold up
/// the rank below it, and broadcasts and reduces at every root and length
/// are right.
#[test]
fn the_c_bypass_test_passes_with_signal_and_thread_delivery() {
    if !gcc("the_c_bypass_test_passes_with_signal_and_thread_delivery") {
        return;
    }
    let dir = scratch("bypass");
    let exe = dir.join("bypass_test");
    compile(&repo().join("crates/capi/c/bypass_test.c"), &exe, &direct_flags());
    for (delivery, launcher) in [("signal", &[][..]), ("thread", &[][..]), ("signal", &["--ranks-per-node", "2"][..]), ("thread", &["--ranks-per-node", "4"][..])] {
        let o = Command::new(OUTBOARD)
            .args(["run", "-n", "4", "--timeout", "300"])
            .args(launcher)
            .arg("--")
            .arg(&exe)
            .env("LD_LIBRARY_PATH", common::capi_lib_dir())
            .env("OUTBOARD_BYPASS_DELIVERY", delivery)
            .output()
            .unwrap();
        let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{delivery} {launcher:?}: stdout:\n{so}\nstderr:\n{se}");
        for r in 0..4 {
            assert!(so.contains(&format!("[{r}] rank {r}: bypass: all ")), "{delivery} {launcher:?}: rank {r} did not finish:\n{so}\n{se}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// NICVM modules from C (`nicvm_test.c`): loaded, reduced with (results
/// equal to the reference), from bytecode, run on the host, listed, sent
/// to, replaced, purged, freed, and failing operators (out of fuel, a
/// division by zero) reported at every rank as `OUTBOARD_ERR_MODULE`
/// naming the module; with an engine per rank and with ranks sharing node
/// engines.
#[test]
fn the_c_nicvm_test_passes_with_two_and_four_ranks_and_on_node_engines() {
    if !gcc("the_c_nicvm_test_passes_with_two_and_four_ranks_and_on_node_engines") {
        return;
    }
    let dir = scratch("nicvm");
    let exe = dir.join("nicvm_test");
    compile(&repo().join("crates/capi/c/nicvm_test.c"), &exe, &direct_flags());
    for (n, launcher) in [(2, &[][..]), (4, &[][..]), (4, &["--ranks-per-node", "2"][..])] {
        let (o, so, se) = run_with(n, launcher, &exe);
        assert!(o.status.success(), "{n} ranks {launcher:?}:\nstdout:\n{so}\nstderr:\n{se}");
        for r in 0..n {
            assert!(so.contains(&format!("[{r}] rank {r}: nicvm modules: all ")), "rank {r} of {n} {launcher:?} did not finish:\n{so}\n{se}");
            assert!(so.contains(&format!("[{r}] rank {r}: allreduce with spin failed: ")), "{so}");
        }
        // Somewhere the module itself ran out of fuel and said so.
        assert!(so.contains("module 'spin', the collective's operator, failed to combine a contribution at this rank: out of fuel"), "{so}");
        assert!(so.contains("module 'divzero', the collective's operator, failed to combine a contribution at this rank: trapped"), "{so}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The example builds with the flags the pkg-config template gives.
#[test]
fn the_c_example_builds_with_pkg_config_and_sums_the_ranks() {
    let test = "the_c_example_builds_with_pkg_config_and_sums_the_ranks";
    if !gcc(test) {
        return;
    }
    let dir = scratch("example");
    let pc = std::fs::read_to_string(repo().join("crates/capi/outboard.pc.in")).unwrap();
    let pc = pc
        .replace("@LIBDIR@", &common::capi_lib_dir().display().to_string())
        .replace("@INCLUDEDIR@", &repo().join("crates/capi/include").canonicalize().unwrap().display().to_string())
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"));
    std::fs::write(dir.join("outboard.pc"), pc).unwrap();
    let flags = match Command::new("pkg-config").args(["--cflags", "--libs", "outboard"]).env("PKG_CONFIG_PATH", &dir).output() {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().split_whitespace().map(String::from).collect(),
        Ok(o) => panic!("pkg-config refused the filled-in template: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            common::skip(test, "pkg-config not found (apt-get install -y pkg-config); built with direct flags instead");
            direct_flags()
        }
    };
    let exe = dir.join("example");
    compile(&repo().join("crates/capi/c/example.c"), &exe, &flags);
    let (o, so, se) = run(4, &exe);
    assert!(o.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..4 {
        assert!(so.contains(&format!("[{r}] rank {r} of 4: sum of ranks 6")), "{so}\n{se}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A rank killed between two collectives of a loop, with node engines
/// (2 nodes of 2 ranks), where blocking collectives go node by node: no
/// survivor hangs (the launcher's grace would kill it, and its line would
/// be missing), and each names a rank - the dead one, or one that gave
/// up because of it (a broadcast's root's node hears of the death from
/// nobody else, and goes on until that one leaves). Before, a
/// broadcast's root could go on succeeding while the others waited.
#[test]
fn a_death_in_a_loop_of_collectives_fails_every_survivor() {
    if !gcc("a_death_in_a_loop_of_collectives_fails_every_survivor") {
        return;
    }
    let dir = scratch("death-loop");
    let exe = dir.join("death_in_a_loop");
    compile(&repo().join("crates/capi/c/death_in_a_loop.c"), &exe, &direct_flags());
    // Rank 1 is its node's second member, rank 2 the other node's leader.
    // One element goes through a node's lines, 4096 through its slots.
    for (victim, count) in [(1u32, "1"), (2, "1"), (1, "4096"), (2, "4096")] {
        for op in ["barrier", "bcast", "reduce", "allreduce"] {
            let o = Command::new(OUTBOARD)
                .args(["run", "-n", "4", "--ranks-per-node", "2", "--timeout", "120", "--grace", "60", "--"])
                .arg(&exe)
                .args([&victim.to_string(), op, count])
                .env("LD_LIBRARY_PATH", common::capi_lib_dir())
                .env("OUTBOARD_PEER_TIMEOUT_MS", "500")
                .output()
                .unwrap();
            let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            for r in (0..4).filter(|&r| r != victim) {
                let line = so
                    .lines()
                    .find(|l| l.starts_with(&format!("[{r}] rank {r}: {op} failed after")))
                    .unwrap_or_else(|| panic!("victim {victim}, {op} of {count}: rank {r} never failed:\n{so}\n{se}"));
                let names_a_rank = (0..4).any(|n| line.contains(&format!("rank {n} died")) || line.contains(&format!("rank {n} closed its port")));
                assert!(names_a_rank && !line.contains("NodeId"), "victim {victim}, {op} of {count}: {line}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The test programs under Open MPI's `mpirun` (the ranks meet through its
/// PMIx) and MPICH's `mpiexec` (Hydra's PMI-1), with every `OUTBOARD_*`
/// variable removed: the launcher alone brings the job up.
#[test]
fn the_c_test_programs_pass_under_mpirun_and_mpiexec_without_outboard_variables() {
    let test = "the_c_test_programs_pass_under_mpirun_and_mpiexec_without_outboard_variables";
    if !gcc(test) {
        return;
    }
    let dir = scratch("launchers");
    let programs = [("capi_test", "all "), ("atomic_test", "atomics and lock: all "), ("nicvm_test", "nicvm modules: all ")];
    for (src, _) in programs {
        compile(&repo().join(format!("crates/capi/c/{src}.c")), &dir.join(src), &direct_flags());
    }
    for (mpi, launcher) in [("openmpi", "mpirun.openmpi"), ("mpich", "mpiexec.mpich")] {
        if Command::new(launcher).arg("--version").output().is_err() {
            common::skip(test, &format!("{launcher} not found (apt-get install -y {})", if mpi == "openmpi" { "openmpi-bin" } else { "mpich" }));
            continue;
        }
        if mpi == "openmpi" {
            if let Err(why) = outboard_runtime::bootstrap::pmix::available() {
                common::skip(test, &format!("under mpirun.openmpi: {why} (apt-get install -y libpmix2)"));
                continue;
            }
        }
        for (src, done) in programs {
            let mut c = common::mpirun::mpirun(mpi, 4, &[], &dir.join(src), 240);
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("OUTBOARD_") {
                    c.env_remove(k);
                }
            }
            let o = c.env("LD_LIBRARY_PATH", common::capi_lib_dir()).output().unwrap();
            let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            assert!(o.status.success(), "{src} under {launcher}: {}\nstdout:\n{so}\nstderr:\n{se}", o.status);
            for r in 0..4 {
                assert!(so.lines().any(|l| l.starts_with(&format!("rank {r}: {done}"))), "{src} under {launcher}: rank {r} did not finish:\n{so}\n{se}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
