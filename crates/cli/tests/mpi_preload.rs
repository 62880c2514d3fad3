//! liboutboard_mpi (bindings/mpi), built here against Open MPI and MPICH,
//! preloaded into an unmodified MPI program (bindings/mpi/tests/compare.c)
//! that compares every taken-over collective with PMPI's result across
//! datatypes, operations, sizes, communicators and in place, with 2 and 4
//! ranks. The verbose mode's lines show what was taken over.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One MPI: its compiler wrapper, the library built for it and how to
/// launch with the library.
struct Mpi {
    name: &'static str,
    cc: &'static str,
    dir: PathBuf,
    lib: PathBuf,
}

impl Mpi {
    /// Builds the library (with `outboard mpi-lib`'s recipe) and the test
    /// program, or says why the MPI is missing here. A library that does
    /// not compile fails the test.
    fn build(name: &'static str, cc: &'static str) -> Result<Mpi, String> {
        // One directory per build: tests run in parallel threads.
        static BUILDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("outboard-mpi-preload-{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let lib = match outboard_cli::mpi_lib::build(Path::new(cc), &dir, &common::capi_lib_dir()) {
            Ok(built) => built.path,
            Err(e) if e.mpi_missing() => return Err(e.to_string()),
            Err(e) => panic!("{e}"),
        };
        let mpi = Mpi { name, cc, dir, lib };
        mpi.cc_run(&[
            "-O1".into(),
            "-Wall".into(),
            "-Wextra".into(),
            "-Werror".into(),
            repo().join("bindings/mpi/tests/compare.c").display().to_string(),
            "-o".into(),
            mpi.prog().display().to_string(),
        ])?;
        Ok(mpi)
    }

    fn cc_run(&self, args: &[String]) -> Result<(), String> {
        let o = Command::new(self.cc).args(args).output().map_err(|e| format!("{}: {e}", self.cc))?;
        if !o.status.success() {
            return Err(format!("{} cannot build ({}): {}", self.cc, args.last().unwrap(), String::from_utf8_lossy(&o.stderr)));
        }
        Ok(())
    }

    fn lib(&self) -> PathBuf {
        self.lib.clone()
    }

    fn prog(&self) -> PathBuf {
        self.dir.join("compare")
    }

    /// Runs the test program on `n` ranks with the library preloaded and
    /// `env` set in every rank.
    fn run(&self, n: u32, env: &[(&str, &str)], args: &[&str]) -> (Output, String, String) {
        self.run_prog(&self.prog(), n, env, args)
    }

    /// Runs `prog` (built with [`Mpi::cc_run`]) as [`Mpi::run`] does.
    fn run_prog(&self, prog: &Path, n: u32, env: &[(&str, &str)], args: &[&str]) -> (Output, String, String) {
        let lib = self.lib().display().to_string();
        // LD_PRELOAD set to nothing in `env`: the program alone.
        let preload = env.iter().find(|(k, _)| *k == "LD_PRELOAD").map_or(lib.as_str(), |(_, v)| *v);
        let mut all: Vec<(&str, &str)> = vec![("LD_PRELOAD", preload), ("OUTBOARD_MPI_VERBOSE", "1")];
        all.extend(env.iter().filter(|(k, _)| *k != "LD_PRELOAD"));
        let ld = common::capi_lib_dir().display().to_string();
        let mut c;
        if self.name == "openmpi" {
            c = Command::new("mpirun.openmpi");
            c.args(["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self", "-np", &n.to_string()]);
            for (k, v) in &all {
                c.arg("-x").arg(format!("{k}={v}"));
            }
            c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        } else {
            c = Command::new("mpiexec.mpich");
            // Hydra's default ssh launcher is not needed on one machine.
            // MPICH 4.0.2's device-level (shared-memory) reduce crashes on
            // MPI_IN_PLACE at a root other than 0, with or without this
            // library: its generic collectives are used instead.
            c.args(["-n", &n.to_string(), "-launcher", "fork", "-env", "MPIR_CVAR_DEVICE_COLLECTIVES", "none"]);
            for (k, v) in &all {
                c.args(["-env", k, v]);
            }
        }
        c.env("LD_LIBRARY_PATH", &ld);
        if let Some((_, per_node)) = env.iter().find(|(k, _)| *k == EMULATED_NODES) {
            // Each rank names its node before the program starts (rank /
            // ranks per node), as on a cluster of that many machines.
            let script = self.dir.join("on_node.sh");
            let text = format!(
                "#!/bin/sh\nr=${{OMPI_COMM_WORLD_RANK:-${{PMI_RANK:-0}}}}\nOUTBOARD_NODE_NAME=node$((r / {per_node})) exec \"$@\"\n"
            );
            std::fs::write(&script, text).unwrap();
            c.arg("sh").arg(&script);
        }
        c.arg(prog).args(args);
        let o = c.output().unwrap();
        let (so, se) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
        (o, so, se)
    }
}

/// Not a variable of Outboard's (the ranks would refuse one): the test
/// runner's own, the ranks per emulated node, each node named from the
/// rank before the program starts.
const EMULATED_NODES: &str = "EMULATED_RANKS_PER_NODE";

impl Drop for Mpi {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs and checks one configuration: every rank compared equal, and the
/// verbose lines say what was taken over (`mode`) and what passed through.
fn check(mpi: &Mpi, n: u32, mode: &str, env: &[(&str, &str)], args: &[&str]) -> String {
    let (o, so, se) = mpi.run(n, env, args);
    let ctx = format!("{} with {n} ranks ({mode}):\nstdout:\n{so}\nstderr:\n{se}", mpi.name);
    assert!(o.status.success(), "{ctx}");
    for r in 0..n {
        assert!(so.contains(&format!("rank {r}: ")) && so.contains("comparisons with PMPI equal"), "rank {r} did not finish: {ctx}");
    }
    assert!(se.contains(&format!("Outboard up on {n} ranks")), "{ctx}");
    // Where the collectives ran: a node engine by default, whose groups
    // within the machine meet in shared memory.
    let set = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let path = match (set("OUTBOARD_ENGINE"), set("OUTBOARD_SHM_COLL")) {
        (Some("process"), _) => "engine: a thread of this process",
        (_, Some("off")) => "every collective goes through the engine (OUTBOARD_SHM_COLL=off)",
        _ => "groups within the node meet in shared memory",
    };
    for r in 0..n {
        assert!(se.lines().any(|l| l.contains(&format!("rank {r}: engine: ")) && l.contains(path)), "rank {r} did not say \"{path}\": {ctx}");
    }
    if set(EMULATED_NODES).is_some() {
        assert!(se.contains("engine: node 1's engine process"), "no second node: {ctx}");
    }
    for comm in ["MPI_COMM_WORLD", "dup", "split", "reversed"] {
        for call in ["MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Ibarrier", "MPI_Ibcast", "MPI_Ireduce", "MPI_Iallreduce"] {
            let line = format!("rank 0: {call} on {comm}: taken over ({mode})");
            assert!(se.contains(&line), "no \"{line}\": {ctx}");
        }
    }
    for op in ["MPI_SUM", "MPI_PROD", "MPI_BXOR", "MPI_LAND", "MPI_LOR", "MPI_LXOR"] {
        let line = format!("rank 0: MPI_Allreduce on op {op}: taken over ({mode})");
        assert!(se.contains(&line), "no \"{line}\": {ctx}");
    }
    for why in [
        "MPI_Allreduce on MPI_COMM_WORLD: operation not offloadable for this datatype",
        "MPI_Allreduce on MPI_COMM_WORLD: datatype not offloadable",
    ] {
        assert!(se.contains(why), "no \"{why}\": {ctx}");
    }
    // Each collective's threshold: its own variable, else the global one,
    // else 1 MiB; the largest messages of the test program exceed it.
    for call in ["MPI_Allreduce", "MPI_Reduce", "MPI_Bcast"] {
        let var = format!("OUTBOARD_MPI_{}_MAX_BYTES", call[4..].to_uppercase());
        let limit = set(&var).or_else(|| set("OUTBOARD_MPI_MAX_BYTES")).unwrap_or("1048576");
        let why = format!("{call} on MPI_COMM_WORLD: message beyond the size threshold ({limit} bytes, {var} or OUTBOARD_MPI_MAX_BYTES)");
        assert!(se.contains(&why), "no \"{why}\": {ctx}");
    }
    se
}

fn mpi_or_skip(test: &str, name: &'static str, cc: &'static str) -> Option<Mpi> {
    match Mpi::build(name, cc) {
        Ok(m) => Some(m),
        Err(why) => {
            common::skip(test, &why);
            None
        }
    }
}

#[test]
fn under_open_mpi_every_taken_over_collective_equals_pmpi() {
    let Some(mpi) = mpi_or_skip("under_open_mpi_every_taken_over_collective_equals_pmpi", "openmpi", "mpicc.openmpi") else { return };
    check(&mpi, 2, "offloaded", &[], &[]);
    check(&mpi, 4, "offloaded", &[], &[]);
    check(&mpi, 4, "host-based", &[("OUTBOARD_MPI", "host")], &["140000", "quick"]);
}

/// The data-movement collectives and the scans
/// (`bindings/mpi/tests/compare_movement.c`) equal PMPI's results under
/// Open MPI and MPICH with 2, 3 and 4 ranks, offloaded (in shared memory
/// and through the engines) and host-based, and the verbose lines show
/// every one of them taken over.
#[test]
fn data_movement_collectives_and_scans_equal_pmpi_under_both_mpis() {
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip("data_movement_collectives_and_scans_equal_pmpi_under_both_mpis", name, cc) else { continue };
        let prog = mpi.dir.join("compare_movement");
        let src = repo().join("bindings/mpi/tests/compare_movement.c").display().to_string();
        mpi.cc_run(&["-O1".into(), "-Wall".into(), "-Wextra".into(), "-Werror".into(), src, "-o".into(), prog.display().to_string()]).unwrap();
        // Shared memory within the machine, then the engines' own paths.
        let engines = [("OUTBOARD_SHM_COLL", "off")];
        for (n, mode, env) in [(2, "offloaded", &[][..]), (3, "offloaded", &[][..]), (3, "offloaded", &engines[..]), (4, "host-based", &[("OUTBOARD_MPI", "host")][..])] {
            let (o, so, se) = mpi.run_prog(&prog, n, env, &[]);
            let ctx = format!("{name} with {n} ranks ({mode}):\nstdout:\n{so}\nstderr:\n{se}");
            assert!(o.status.success(), "{ctx}");
            for r in 0..n {
                assert!(so.contains(&format!("rank {r}: ")) && so.contains("movement comparisons with PMPI equal"), "rank {r} did not finish: {ctx}");
            }
            let calls = [
                "MPI_Allgather", "MPI_Iallgather", "MPI_Allgatherv", "MPI_Gather", "MPI_Igather", "MPI_Gatherv", "MPI_Scatter", "MPI_Iscatter",
                "MPI_Scatterv", "MPI_Alltoall",
                "MPI_Ialltoall", "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", "MPI_Reduce_scatter", "MPI_Scan", "MPI_Iscan",
                "MPI_Exscan", "MPI_Iexscan",
            ];
            for call in calls {
                for comm in ["MPI_COMM_WORLD", "reversed"] {
                    let line = format!("rank 0: {call} on {comm}: taken over ({mode})");
                    assert!(se.contains(&line), "no \"{line}\": {ctx}");
                }
            }
        }
    }
}

/// Per-collective size thresholds: with small ones, the smallest calls are
/// still taken over and larger ones pass through to PMPI (the verbose lines
/// name the threshold and its variable), with the same results.
#[test]
fn per_collective_size_thresholds_pass_larger_calls_through() {
    let Some(mpi) = mpi_or_skip("per_collective_size_thresholds_pass_larger_calls_through", "openmpi", "mpicc.openmpi") else { return };
    let env = [("OUTBOARD_MPI_BCAST_MAX_BYTES", "16"), ("OUTBOARD_MPI_REDUCE_MAX_BYTES", "8"), ("OUTBOARD_MPI_ALLREDUCE_MAX_BYTES", "64")];
    check(&mpi, 2, "offloaded", &env, &["1000", "quick"]);
}

#[test]
fn under_mpich_every_taken_over_collective_equals_pmpi() {
    let Some(mpi) = mpi_or_skip("under_mpich_every_taken_over_collective_equals_pmpi", "mpich", "mpicc.mpich") else { return };
    check(&mpi, 2, "offloaded", &[], &["140000", "quick"]);
    check(&mpi, 4, "offloaded", &[], &["140000", "quick"]);
}

/// The ranks of one machine share one node engine by default and meet in
/// shared memory (the tests above); the same results when the node engine
/// carries every collective (`OUTBOARD_SHM_COLL=off`), with an engine per
/// process (`OUTBOARD_ENGINE=process`), and host-based, under both MPIs.
#[test]
fn through_the_node_engine_or_engines_per_process_every_taken_over_collective_equals_pmpi() {
    let test = "through_the_node_engine_or_engines_per_process_every_taken_over_collective_equals_pmpi";
    let engine = [("OUTBOARD_SHM_COLL", "off")];
    if let Some(mpi) = mpi_or_skip(test, "openmpi", "mpicc.openmpi") {
        check(&mpi, 4, "offloaded", &engine, &["140000", "quick"]);
        // Each rank's engine is a node of its own: every size taken over
        // still, not only what the thresholds between nodes let through.
        let process = [
            ("OUTBOARD_ENGINE", "process"),
            ("OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES", "1M"),
            ("OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES", "1M"),
            ("OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES", "1M"),
        ];
        check(&mpi, 2, "offloaded", &process, &["140000", "quick"]);
        check(&mpi, 2, "host-based", &[("OUTBOARD_MPI", "host")], &["140000", "quick"]);
    }
    if let Some(mpi) = mpi_or_skip(test, "mpich", "mpicc.mpich") {
        check(&mpi, 4, "offloaded", &engine, &["140000", "quick"]);
    }
}

/// Application bypass from an unmodified MPI program
/// (`OUTBOARD_MPI_BCAST=bypass`, `OUTBOARD_MPI_REDUCE=bypass`): the same
/// results as PMPI under both MPIs, with signal delivery on the node
/// engine and thread delivery on engines per process; verbose mode says
/// the blocking calls were taken by bypass and the non-blocking ones
/// offloaded, and the communicators' records count bypass calls.
#[test]
fn application_bypass_broadcasts_and_reduces_equal_pmpi() {
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip("application_bypass_broadcasts_and_reduces_equal_pmpi", name, cc) else { continue };
        for (delivery, engine) in [("signal", "node"), ("thread", "process")] {
            let env = [("OUTBOARD_MPI_BCAST", "bypass"), ("OUTBOARD_MPI_REDUCE", "bypass"), ("OUTBOARD_BYPASS_DELIVERY", delivery), ("OUTBOARD_ENGINE", engine)];
            let (o, so, se) = mpi.run(4, &env, &["140000", "quick"]);
            let ctx = format!("{name}, {delivery} delivery, {engine} engine:\nstdout:\n{so}\nstderr:\n{se}");
            assert!(o.status.success(), "{ctx}");
            for r in 0..4 {
                assert!(so.contains(&format!("rank {r}: ")) && so.contains("comparisons with PMPI equal"), "rank {r} did not finish: {ctx}");
            }
            for (call, how) in [
                ("MPI_Bcast", "application bypass up to 16384 bytes, offloaded beyond"),
                ("MPI_Reduce", "application bypass up to 16384 bytes, offloaded beyond"),
                ("MPI_Ibcast", "offloaded"),
                ("MPI_Allreduce", "offloaded"),
            ] {
                let line = format!("rank 0: {call} on MPI_COMM_WORLD: taken over ({how})");
                assert!(se.contains(&line), "no \"{line}\": {ctx}");
            }
            let ran = se.lines().find(|l| l.contains("rank 0: MPI_COMM_WORLD's blocking collectives ran as: ")).unwrap_or_else(|| panic!("no record of what ran: {ctx}"));
            assert!(ran.contains(" broadcast application bypass") && ran.contains(" reduce application bypass"), "{ran}: {ctx}");
        }
    }
}

/// More live communicators with application bypass than a port's bypass
/// receives allow (`bypass_many.c`): the later ones run offloaded after
/// one sentence saying why, every result is right, and communicators made
/// after the others are freed take bypass again.
#[test]
fn communicators_beyond_the_bypass_budget_run_offloaded_and_freeing_gives_it_back() {
    let test = "communicators_beyond_the_bypass_budget_run_offloaded_and_freeing_gives_it_back";
    for (name, cc, n) in [("openmpi", "mpicc.openmpi", 4), ("mpich", "mpicc.mpich", 2)] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = program(&mpi, "bypass_many");
        let (o, so, se) = mpi.run_prog(&prog, n, &[("OUTBOARD_MPI_BCAST", "bypass"), ("OUTBOARD_MPI_REDUCE", "bypass")], &[]);
        let ctx = format!("{name}, {n} ranks:\nstdout:\n{so}\nstderr:\n{se}");
        assert!(o.status.success() && so.contains("all checks passed"), "{ctx}");
        assert!(se.contains("=bypass: application bypass: application bypass would keep 2 more receives posted"), "no budget sentence: {ctx}");
        let again = se.lines().find(|l| l.starts_with("outboard_mpi: rank 0: again's blocking collectives ran as: ")).unwrap_or_else(|| panic!("no record: {ctx}"));
        assert!(again.contains("1 broadcast application bypass") && again.contains("1 reduce application bypass"), "{again}: {ctx}");
    }
}

/// A communicator spanning machines (2 emulated nodes of 2 ranks, each
/// with its node engine) runs its blocking collectives node by node: the
/// same results as PMPI, under both MPIs, and the same through the
/// engines alone.
#[test]
fn across_emulated_nodes_every_taken_over_collective_equals_pmpi() {
    let test = "across_emulated_nodes_every_taken_over_collective_equals_pmpi";
    // Every size up to 1 MiB taken over, not only what the thresholds
    // between nodes let through by default.
    let all = [
        (EMULATED_NODES, "2"),
        ("OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES", "1M"),
        ("OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES", "1M"),
        ("OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES", "1M"),
    ];
    let mut engines = all.to_vec();
    engines.push(("OUTBOARD_SHM_COLL", "off"));
    if let Some(mpi) = mpi_or_skip(test, "openmpi", "mpicc.openmpi") {
        check(&mpi, 4, "offloaded", &all, &["140000", "quick"]);
        check(&mpi, 4, "offloaded", &engines, &["140000", "quick"]);
        // By default, larger calls between nodes pass through, saying so.
        let se = check(&mpi, 4, "offloaded", &[(EMULATED_NODES, "2")], &["140000", "quick"]);
        for (call, limit, var) in [
            ("MPI_Bcast", 131072, "OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES"),
            ("MPI_Reduce", 16384, "OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES"),
            ("MPI_Iallreduce", 16384, "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES"),
        ] {
            let why = format!("{call} on MPI_COMM_WORLD: message beyond the size threshold between nodes ({limit} bytes on a communicator spanning 2 nodes, {var})");
            assert!(se.contains(&why), "no \"{why}\":\n{se}");
        }
    }
    if let Some(mpi) = mpi_or_skip(test, "mpich", "mpicc.mpich") {
        check(&mpi, 4, "offloaded", &all, &["140000", "quick"]);
    }
}

/// MPI_THREAD_MULTIPLE: three threads per rank run collectives at once on
/// their own communicators (mapped to Outboard groups concurrently), each
/// result equal to PMPI's, under both MPIs with 2 ranks; the library
/// leaves the provided level as the MPI answered it.
#[test]
fn several_threads_run_collectives_on_distinct_communicators() {
    let test = "several_threads_run_collectives_on_distinct_communicators";
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = mpi.dir.join("threads");
        let src = repo().join("bindings/mpi/tests/threads.c").display().to_string();
        mpi.cc_run(&["-O1".into(), "-Wall".into(), "-Wextra".into(), "-Werror".into(), "-pthread".into(), src, "-o".into(), prog.display().to_string()])
            .unwrap();
        let (o, so, se) = mpi.run_prog(&prog, 2, &[], &[]);
        let ctx = format!("{name}:\nstdout:\n{so}\nstderr:\n{se}");
        assert!(o.status.success(), "{ctx}");
        if !so.contains("thread level provided: MPI_THREAD_MULTIPLE") {
            common::skip(test, &format!("{name} does not provide MPI_THREAD_MULTIPLE"));
            continue;
        }
        for r in 0..2 {
            let want = format!("rank {r}: 3 threads, {} comparisons with PMPI equal", (3 + 1) * 40 * 4);
            assert!(so.contains(&want), "no \"{want}\": {ctx}");
        }
        for call in ["MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Barrier", "MPI_Iallreduce", "MPI_Ibarrier"] {
            assert!(se.lines().any(|l| l.contains(&format!("rank 0: {call} on ")) && l.ends_with("taken over (offloaded)")), "{call} not taken over: {ctx}");
        }
    }
}

/// With OUTBOARD_MPI=off nothing is taken over and the program still runs;
/// without the library at all it runs too, making as many comparisons as
/// with it (the same program, unmodified).
#[test]
fn switched_off_everything_passes_through() {
    let Some(mpi) = mpi_or_skip("switched_off_everything_passes_through", "openmpi", "mpicc.openmpi") else { return };
    let (o, so, se) = mpi.run(2, &[("OUTBOARD_MPI", "off")], &["1000", "quick"]);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(so.contains("comparisons with PMPI equal"), "{so}\n{se}");
    assert!(se.contains("everything passes through") && !se.contains("taken over") && !se.contains("Outboard up"), "{se}");
    let (o, plain, se) = mpi.run(2, &[("LD_PRELOAD", "")], &["1000", "quick"]);
    assert!(o.status.success(), "{plain}\n{se}");
    assert!(!se.contains("outboard_mpi"), "{se}");
    let (o, with, se) = mpi.run(2, &[], &["1000", "quick"]);
    assert!(o.status.success() && se.contains("taken over"), "{with}\n{se}");
    let counts = |out: &str| {
        let mut v: Vec<String> = out.lines().filter(|l| l.contains("comparisons with PMPI equal")).map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(counts(&plain), counts(&with), "with and without the library");
    assert_eq!(counts(&plain).len(), 2, "{plain}");
}

/// A rank SIGKILLed mid-job: every survivor's next taken-over allreduce
/// returns an error (MPI_ERRORS_RETURN) within the peer timeout instead of
/// hanging, under Open MPI told to let the survivors run on
/// (--enable-recovery); under MPICH the job ends (Hydra may end the
/// survivors first) and no survivor sees the collective succeed.
#[test]
fn a_killed_rank_makes_the_survivors_collective_fail_not_hang() {
    let test = "a_killed_rank_makes_the_survivors_collective_fail_not_hang";
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = mpi.dir.join("killed");
        mpi.cc_run(&[repo().join("bindings/mpi/tests/killed.c").display().to_string(), "-o".into(), prog.display().to_string()]).unwrap();
        let out = mpi.dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let lib = mpi.lib().display().to_string();
        let env = [("LD_PRELOAD", lib.as_str()), ("OUTBOARD_PEER_TIMEOUT_MS", "500")];
        // `timeout` ends a hung job; 124 says it had to.
        let mut c = Command::new("timeout");
        c.arg("120");
        if name == "openmpi" {
            c.args(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--enable-recovery", "--mca", "btl", "tcp,self", "-np", "4"]);
            for (k, v) in env {
                c.arg("-x").arg(format!("{k}={v}"));
            }
        } else {
            c.args(["mpiexec.mpich", "-n", "4", "-launcher", "fork", "-disable-auto-cleanup"]);
            for (k, v) in env {
                c.args(["-env", k, v]);
            }
        }
        let o = c.env("LD_LIBRARY_PATH", common::capi_lib_dir()).arg(&prog).arg(&out).output().unwrap();
        let ctx = format!("{name}: {}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_ne!(o.status.code(), Some(124), "the job hung: {ctx}");
        for r in 0..3 {
            let got = std::fs::read_to_string(out.join(format!("rank-{r}"))).unwrap_or_default();
            // MPICH defines ULFM's MPIX_ERR_PROC_FAILED; Debian's Open MPI
            // 4.1 is built without it, so the class is MPI_ERR_OTHER there.
            let want = if name == "openmpi" {
                "allreduce after a kill returned an error of class MPI_ERR_OTHER"
            } else {
                "allreduce after a kill returned an error of class MPIX_ERR_PROC_FAILED"
            };
            if name == "openmpi" {
                assert_eq!(got.trim(), want, "rank {r}: {ctx}");
            } else {
                // Hydra, even with -disable-auto-cleanup, often kills the
                // survivors before their peer timeout: a survivor either
                // reported the error or was ended by the launcher, and
                // none saw the collective succeed.
                assert!(got.is_empty() || got.trim() == want, "rank {r}: {got} {ctx}");
            }
        }
        assert!(!out.join("rank-3").exists(), "the killed rank wrote: {ctx}");
    }
}

/// Builds the test program `name` (bindings/mpi/tests/NAME.c) for `mpi`.
fn program(mpi: &Mpi, name: &str) -> PathBuf {
    let prog = mpi.dir.join(name);
    let src = repo().join(format!("bindings/mpi/tests/{name}.c")).display().to_string();
    mpi.cc_run(&["-O1".into(), "-Wall".into(), "-Wextra".into(), "-Werror".into(), src, "-o".into(), prog.display().to_string()]).unwrap();
    prog
}

/// Programs that run under plain MPI must run with the library: a
/// non-blocking barrier on a duplicate started before a receive whose
/// sender starts it only after a synchronous send (the library may not
/// block inside the non-blocking call), and blocking and non-blocking
/// collectives called in crossed orders (matched apart, as Open MPI and
/// MPICH do). Both MPIs, 2 and 4 ranks; `timeout` turns a hang into a
/// failure.
#[test]
fn nonblocking_collectives_add_no_blocking_and_keep_their_own_order() {
    let test = "nonblocking_collectives_add_no_blocking_and_keep_their_own_order";
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = program(&mpi, "nodeadlock");
        for n in [2, 4] {
            let (o, so, se) = mpi.run_prog(Path::new("timeout"), n, &[], &["120", prog.to_str().unwrap()]);
            let ctx = format!("{name}, {n} ranks:\nstdout:\n{so}\nstderr:\n{se}");
            assert!(o.status.success(), "{ctx}");
            for r in 0..n {
                assert!(so.contains(&format!("rank {r}: Ibarrier then Recv completed")), "{ctx}");
                assert!(so.contains(&format!("rank {r}: crossed blocking and non-blocking collectives completed")), "{ctx}");
            }
            assert!(se.contains("rank 0: MPI_Ibarrier on a communicator: taken over"), "{ctx}");
        }
    }
}

/// Every call that makes an intra-communicator maps it inside the call:
/// its collectives are taken over (results equal PMPI's); MPI_Comm_idup's
/// communicator passes through, saying why.
#[test]
fn every_communicator_constructor_maps_its_communicator() {
    let test = "every_communicator_constructor_maps_its_communicator";
    for (name, cc, n) in [("openmpi", "mpicc.openmpi", 4), ("mpich", "mpicc.mpich", 2)] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = program(&mpi, "constructors");
        let (o, so, se) = mpi.run_prog(&prog, n, &[], &[]);
        let ctx = format!("{name}:\nstdout:\n{so}\nstderr:\n{se}");
        assert!(o.status.success(), "{ctx}");
        for r in 0..n {
            assert!(so.contains(&format!("rank {r}: 13 constructors checked")), "{ctx}");
        }
        for made_by in [
            "MPI_Comm_dup",
            "MPI_Comm_dup_with_info",
            "MPI_Comm_split",
            "MPI_Comm_split_type",
            "MPI_Comm_create",
            "MPI_Comm_create_group",
            "MPI_Cart_create",
            "MPI_Cart_sub",
            "MPI_Graph_create",
            "MPI_Dist_graph_create",
            "MPI_Dist_graph_create_adjacent",
            "MPI_Intercomm_merge",
        ] {
            for call in ["MPI_Barrier", "MPI_Allreduce", "MPI_Bcast", "MPI_Ibarrier"] {
                let line = format!("rank 0: {call} on {made_by}: taken over (offloaded)");
                assert!(se.contains(&line), "no \"{line}\": {ctx}");
            }
        }
        assert!(se.contains("rank 0: MPI_Allreduce on MPI_Comm_idup: communicator not mapped"), "{ctx}");
    }
}

/// An erroneous program whose ranks call a barrier and an allreduce in
/// crossed orders: every rank gets an error (MPI_ERR_OTHER) whose string
/// names the two collectives, for both calls, instead of hanging.
/// Offloaded with 2 and 4 ranks (2 under MPICH); host-based with 2 (with
/// more, a host-based mismatch reaches only the members that exchange
/// messages directly: see the README).
#[test]
fn members_calling_different_collectives_get_an_error_not_a_hang() {
    let test = "members_calling_different_collectives_get_an_error_not_a_hang";
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        mismatch_errors(&mpi);
    }
}

fn mismatch_errors(mpi: &Mpi) {
    let prog = program(mpi, "mismatch");
    let runs: &[(u32, &str)] = if mpi.name == "openmpi" { &[(2, "offload"), (4, "offload"), (2, "host")] } else { &[(2, "offload"), (2, "host")] };
    for &(n, mode) in runs {
        let (o, so, se) = mpi.run_prog(Path::new("timeout"), n, &[("OUTBOARD_MPI", mode)], &["120", prog.to_str().unwrap()]);
        let ctx = format!("{} with {n} ranks, {mode}:\nstdout:\n{so}\nstderr:\n{se}", mpi.name);
        assert!(o.status.success(), "{ctx}");
        for r in 0..n {
            // Even ranks called the barrier first, odd ones the allreduce.
            let (first, second) = if r % 2 == 0 { ("a barrier", "an allreduce") } else { ("an allreduce", "a barrier") };
            for (call, mine) in [("first call", first), ("second call", second)] {
                let line = so.lines().find(|l| l.starts_with(&format!("rank {r}: {call}: "))).unwrap_or_else(|| panic!("rank {r} {call}: {ctx}"));
                assert!(line.contains("error (MPI_ERR_OTHER)") && line.contains("different collectives"), "{line}: {ctx}");
                if n == 2 && mode == "offload" {
                    // Both members met the other's collective's packets.
                    assert!(line.contains(&format!("this rank {mine}")), "{line}: {ctx}");
                }
            }
        }
    }
}

/// Settings are read strictly at MPI_Init: a bad value of each kind (a
/// size, a name, a boolean, and a runtime variable) stops the job with a
/// sentence naming the variable and the value, before any collective; a
/// size with a suffix means what it says (1M is 1 MiB).
#[test]
fn a_bad_setting_stops_mpi_init_with_a_sentence_naming_it() {
    let test = "a_bad_setting_stops_mpi_init_with_a_sentence_naming_it";
    let Some(mpi) = mpi_or_skip(test, "openmpi", "mpicc.openmpi") else { return };
    let prog = program(&mpi, "mismatch");
    for (var, value) in [
        ("OUTBOARD_MPI_MAX_BYTES", "1Q"),
        ("OUTBOARD_MPI_BCAST", "fast"),
        ("OUTBOARD_MPI_VERBOSE", "maybe"),
        ("OUTBOARD_UDP_GSO", "sometimes"),
    ] {
        let (o, so, se) = mpi.run_prog(&prog, 2, &[(var, value)], &[]);
        let ctx = format!("{var}={value}:\nstdout:\n{so}\nstderr:\n{se}");
        assert!(!o.status.success(), "{ctx}");
        assert!(!so.contains("first call"), "a collective ran: {ctx}");
        // Whichever rank reads it first aborts the job, and the launcher may
        // kill the other before it prints: one rank's sentence is certain.
        let said: Vec<&str> = se.lines().filter(|l| l.starts_with("outboard_mpi: rank ") && l.contains(var)).collect();
        assert!(!said.is_empty(), "no rank named {var}: {ctx}");
        for line in said {
            assert!(line.contains(&format!("\"{value}\"")), "{line}: {ctx}");
        }
    }
    let (o, so, se) = mpi.run_prog(&prog, 2, &[("OUTBOARD_MPI_MAX_BYTES", "1M"), ("OUTBOARD_MPI_REDUCE_MAX_BYTES", "64K")], &[]);
    assert!(o.status.success(), "{so}\n{se}");
    assert!(se.contains("max bytes bcast 1048576, reduce 65536, allreduce 1048576"), "{se}");
}

/// NICVM modules as MPI operators (`outboard_mpi.h`,
/// bindings/mpi/tests/modules.c, linked against the library and compiled
/// with the header `outboard mpi-lib` puts beside it): a module's MPI_Op
/// in MPI_Allreduce, MPI_Reduce and MPI_Iallreduce equals the reference,
/// combined by the engines on the communicator it was loaded on and by
/// MPI, running the module on the host, on a duplicate, in
/// MPI_Reduce_local and with Outboard switched off; a source that does not
/// compile and a module that runs out of fuel on the engines give errors
/// naming the module. Both MPIs, 2 and 4 ranks.
#[test]
fn a_nicvm_module_is_an_mpi_operator_on_the_engines_and_on_the_hosts() {
    let test = "a_nicvm_module_is_an_mpi_operator_on_the_engines_and_on_the_hosts";
    for (name, cc) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = mpi.dir.join("modules");
        let dir = mpi.dir.display().to_string();
        assert!(mpi.dir.join("outboard_mpi.h").is_file(), "outboard_mpi.h is not beside the library");
        mpi.cc_run(&[
            "-O1".into(),
            "-Wall".into(),
            "-Wextra".into(),
            "-Werror".into(),
            format!("-I{dir}"),
            repo().join("bindings/mpi/tests/modules.c").display().to_string(),
            "-o".into(),
            prog.display().to_string(),
            format!("-L{dir}"),
            format!("-Wl,-rpath,{dir}"),
            format!("-loutboard_mpi_{name}"),
        ])
        .unwrap();
        for n in [2, 4] {
            let (o, so, se) = mpi.run_prog(&prog, n, &[], &["engines"]);
            let ctx = format!("{name}, {n} ranks:\nstdout:\n{so}\nstderr:\n{se}");
            assert!(o.status.success(), "{ctx}");
            for r in 0..n {
                assert!(so.contains(&format!("rank {r}: modules: all ")), "rank {r} did not finish: {ctx}");
            }
            assert!(se.contains("outboard_mpi: module 'absmax' loaded on the engines"), "{ctx}");
            assert!(se.contains("MPI_Allreduce on MPI_COMM_WORLD: taken over"), "{ctx}");
            assert!(se.contains("the operation's module is not loaded on this communicator's engines"), "the duplicate's allreduce was not MPI's: {ctx}");
            assert!(so.contains("module 'spin', the collective's operator, failed to combine a contribution at this rank: out of fuel"), "{ctx}");
            assert!(so.contains("module 'broken' does not compile: line 2"), "{ctx}");
            // Switched off: MPI reduces everything, the module run on the host.
            let (o, so, se) = mpi.run_prog(&prog, n, &[("OUTBOARD_MPI", "off")], &["hosts"]);
            let ctx = format!("{name}, {n} ranks, OUTBOARD_MPI=off:\nstdout:\n{so}\nstderr:\n{se}");
            assert!(o.status.success(), "{ctx}");
            for r in 0..n {
                assert!(so.contains(&format!("rank {r}: modules: all ")), "rank {r} did not finish: {ctx}");
            }
            assert!(se.contains("outboard_mpi: module 'absmax' compiled; its operators reduce on the hosts"), "{ctx}");
        }
    }
}

/// Collective choices through MPI (bindings/mpi/tests/choices.c): a
/// communicator given every choice by MPI_Info keys on MPI_Comm_set_info,
/// and MPI_COMM_WORLD given them by the environment, give right results,
/// and the verbose lines printed when each is freed - the C ABI's record
/// of what its collectives ran as - name each choice; a bad key value is
/// MPI_ERR_INFO_VALUE naming it. Open MPI and MPICH, 4 ranks (MPICH 2).
#[test]
fn collective_choices_from_mpi_info_and_the_environment_are_taken() {
    let test = "collective_choices_from_mpi_info_and_the_environment_are_taken";
    for (name, cc, n) in [("openmpi", "mpicc.openmpi", 4), ("mpich", "mpicc.mpich", 2)] {
        let Some(mpi) = mpi_or_skip(test, name, cc) else { continue };
        let prog = program(&mpi, "choices");
        let env = [
            ("OUTBOARD_MPI_BARRIER_ALGORITHM", "gather-broadcast"),
            ("OUTBOARD_MPI_BCAST_TREE", "chain"),
            ("OUTBOARD_MPI_BCAST_MODE", "offloaded"),
            ("OUTBOARD_MPI_REDUCE_DEGREE", "3"),
            ("OUTBOARD_MPI_REDUCE_ALGORITHM", "block-trees"),
            ("OUTBOARD_MPI_ALLREDUCE_ALGORITHM", "recursive-doubling"),
        ];
        let (o, so, se) = mpi.run_prog(&prog, n, &env, &[]);
        let ctx = format!("{name}:\nstdout:\n{so}\nstderr:\n{se}");
        assert!(o.status.success(), "{ctx}");
        for r in 0..n {
            assert!(so.contains(&format!("rank {r}: choices checked")), "{ctx}");
        }
        let ran = |comm: &str| -> String {
            se.lines().find(|l| l.starts_with(&format!("outboard_mpi: rank 0: {comm}'s blocking collectives ran as: "))).unwrap_or_else(|| panic!("no record of {comm}: {ctx}")).to_string()
        };
        let chosen = ran("chosen");
        for what in [
            "barrier offloaded pairwise exchange over the NIC collective protocol",
            "broadcast nic-assisted 3-ary tree",
            "allreduce offloaded 2-ary tree",
            "reduce offloaded 2-ary tree",
            "barrier offloaded gather-broadcast on a 2-ary tree over the NIC collective protocol",
            "broadcast host-based postal tree (lambda 2)",
        ] {
            assert!(chosen.contains(what), "{what:?} not in {chosen}\n{ctx}");
        }
        assert!(se.contains("rank 0: MPI_Comm_set_info on chosen: collective choices now mode offloaded; barrier pairwise exchange over the NIC collective protocol; broadcast nic-assisted on a 3-ary tree; reduce on a 2-ary tree"), "{ctx}");
        assert!(se.contains("MPI_Comm_set_info failed: MPI_Info key outboard_bcast_tree: "), "{ctx}");
        let world = ran("MPI_COMM_WORLD");
        for what in ["barrier offloaded gather-broadcast on a binomial tree", "broadcast offloaded chain", "allreduce offloaded recursive doubling", "reduce offloaded 3-ary tree"] {
            assert!(world.contains(what), "{what:?} not in {world}\n{ctx}");
        }
        assert!(se.contains("outboard_mpi: collective choices of every communicator: OUTBOARD_MPI_BARRIER_ALGORITHM=gather-broadcast, OUTBOARD_MPI_BCAST_MODE=offloaded, OUTBOARD_MPI_BCAST_TREE=chain, OUTBOARD_MPI_REDUCE_DEGREE=3, OUTBOARD_MPI_REDUCE_ALGORITHM=block-trees, OUTBOARD_MPI_ALLREDUCE_ALGORITHM=recursive-doubling"), "{ctx}");
        assert!(se.contains("rank 0: MPI_Bcast on MPI_COMM_WORLD: taken over (offloaded) [mode offloaded; barrier gather-broadcast on a binomial tree over point-to-point; broadcast offloaded on a chain; reduce on block trees (3-ary tree); allreduce recursive doubling]"), "{ctx}");
    }
}
