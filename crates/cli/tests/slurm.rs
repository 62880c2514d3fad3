//! Outboard under a real Slurm: each test starts a one-node cluster on this
//! machine ([`cluster::Cluster`]: `munged`, `slurmctld` and `slurmd` as
//! child processes, with a configuration, key, ports and directories of its
//! own) and runs 4-task jobs with `srun -n 4`, with no `OUTBOARD_*`
//! variable set (the ranks find each other through Slurm alone):
//!
//! - under `--mpi=pmix` (Debian's Slurm has the plugin): the runtime's
//!   examples, the launcher's store through the `Bootstrap` trait, the C
//!   ABI's test programs, and the PMPI library preloaded into an Open MPI
//!   program (Open MPI starts straight from `srun`, through the same PMIx);
//! - under `--mpi=pmi2`: Slurm's plugin also answers PMI-1's wire protocol
//!   on `PMI_FD`, which Outboard's client speaks, so the `collectives`
//!   example and the store run there too, and the PMPI library preloaded
//!   into an MPICH program.
//!
//! Skipped, and listed at the end of `scripts/test.sh`, where Slurm or munge
//! is not installed; a cluster that is installed but does not come up is a
//! failure that shows the daemons' logs.
//!
//! As in `launchers.rs`, the rank program of some jobs is this test binary:
//! `rank_program` does nothing in an ordinary run and plays the scenario
//! named by `OB_SCENARIO` when `srun` starts it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../runtime/examples/collectives.rs"]
#[allow(dead_code)]
mod collectives;

#[path = "../../runtime/tests/jobs/launcher_jobs.rs"]
mod launcher_jobs;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// One cluster at a time: each test's cluster has its own ports and
/// directories, but 4-task jobs side by side on a small machine would test
/// the scheduler, not Outboard.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A one-node Slurm cluster on this machine, for one test.
mod cluster {
    use std::io::Read as _;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// The programs a cluster needs, with the Debian packages that have them.
    const PROGRAMS: [(&str, &str); 6] = [
        ("munged", "munge"),
        ("slurmctld", "slurmctld"),
        ("slurmd", "slurmd"),
        ("srun", "slurm-client"),
        ("sinfo", "slurm-client"),
        ("squeue", "slurm-client"),
    ];

    /// Where `prog` is: on `PATH`, or in the sbin directories a non-root
    /// `PATH` leaves out (Debian puts the daemons in /usr/sbin).
    fn find(prog: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
            .map(|d| d.join(prog))
            .find(|p| p.is_file())
    }

    /// Why no cluster can start here, if none can: the programs that are
    /// missing and the packages to install.
    pub fn unavailable() -> Option<String> {
        let missing: Vec<_> = PROGRAMS.iter().filter(|(p, _)| find(p).is_none()).collect();
        if missing.is_empty() {
            return None;
        }
        let mut packages: Vec<&str> = missing.iter().map(|(_, pkg)| *pkg).collect();
        packages.dedup();
        Some(format!(
            "{} not found (apt-get install -y {})",
            missing.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", "),
            packages.join(" ")
        ))
    }

    /// A port nobody listens on now: the kernel picks one and it is given
    /// back at once. A second cluster, or a system Slurm on the default
    /// ports 6817 and 6818, does not clash with this one.
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    fn short_hostname() -> String {
        let out = Command::new("hostname").arg("-s").output().expect("running hostname -s");
        let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(out.status.success() && !name.is_empty(), "hostname -s said nothing: {}", String::from_utf8_lossy(&out.stderr));
        name
    }

    fn user_name() -> String {
        let out = Command::new("id").arg("-un").output().expect("running id -un");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    struct Daemon {
        name: &'static str,
        child: Child,
        log: PathBuf,
    }

    /// `munged`, `slurmctld` and `slurmd`, stopped (and their directory
    /// removed) when dropped, a panicking test's included.
    pub struct Cluster {
        dir: PathBuf,
        conf: PathBuf,
        daemons: Vec<Daemon>,
    }

    /// How long the daemons get to bring the node up; seconds on an idle
    /// machine, more while the rest of the test suite compiles beside it.
    const UP_WITHIN: Duration = Duration::from_secs(90);

    impl Cluster {
        /// Starts the cluster and waits until its node is idle; panics with
        /// the daemons' logs when it does not come up.
        pub fn start() -> Cluster {
            static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("outboard-slurm-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            for sub in ["", "state", "spool"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            // munged refuses a socket in a directory others may write to or
            // cannot enter, and a key others may read.
            set_mode(&dir, 0o755);
            let key = dir.join("munge.key");
            let mut bytes = vec![0u8; 1024];
            std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).unwrap();
            std::fs::write(&key, &bytes).unwrap();
            set_mode(&key, 0o600);
            let socket = dir.join("munge.sock");
            let conf = dir.join("slurm.conf");
            let mut cluster = Cluster { dir: dir.clone(), conf: conf.clone(), daemons: Vec::new() };
            cluster.spawn(
                "munged",
                &[
                    "--foreground".into(),
                    format!("--key-file={}", key.display()),
                    format!("--socket={}", socket.display()),
                    format!("--pid-file={}", dir.join("munged.pid").display()),
                    format!("--seed-file={}", dir.join("munged.seed").display()),
                ],
            );
            cluster.wait_for("munged's socket", |_| socket.exists());

            let host = short_hostname();
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let user = user_name();
            let text = format!(
                "# A one-node cluster for Outboard's tests (crates/cli/tests/slurm.rs).\n\
                 ClusterName=outboardtest\n\
                 SlurmctldHost={host}(127.0.0.1)\n\
                 SlurmctldPort={ctld_port}\n\
                 SlurmdPort={slurmd_port}\n\
                 SlurmUser={user}\n\
                 SlurmdUser={user}\n\
                 AuthType=auth/munge\n\
                 CredType=cred/munge\n\
                 AuthInfo=socket={socket}\n\
                 StateSaveLocation={dir}/state\n\
                 SlurmdSpoolDir={dir}/spool\n\
                 SlurmctldPidFile={dir}/slurmctld.pid\n\
                 SlurmdPidFile={dir}/slurmd.pid\n\
                 MailProg=/bin/true\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core\n\
                 MpiDefault=none\n\
                 ReturnToService=2\n\
                 # The node claims at least 4 CPUs, for 4 tasks on a smaller machine;\n\
                 # slurmd takes the configured count over the hardware's.\n\
                 SlurmdParameters=config_overrides\n\
                 NodeName={host} NodeAddr=127.0.0.1 CPUs={node_cpus} State=UNKNOWN\n\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
                ctld_port = free_port(),
                slurmd_port = free_port(),
                socket = socket.display(),
                dir = dir.display(),
                node_cpus = cpus.max(4),
            );
            std::fs::write(&conf, text).unwrap();
            cluster.spawn("slurmctld", &["-D".into(), "-i".into()]);
            cluster.spawn("slurmd", &["-D".into()]);
            cluster.wait_for("the node to be idle in sinfo", |cluster| {
                let out = cluster.command("sinfo").args(["-h", "-N", "-o", "%T"]).output();
                out.is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "idle")
            });
            cluster
        }

        /// Starts daemon `name` with `args`, its output to a log file of
        /// its own.
        fn spawn(&mut self, name: &'static str, args: &[String]) {
            let log = self.dir.join(format!("{name}.log"));
            let file = std::fs::File::create(&log).unwrap();
            let program = find(name).unwrap_or_else(|| panic!("{name} not found"));
            let child = self
                .command(&program.display().to_string())
                .args(args)
                .stdin(Stdio::null())
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
            self.daemons.push(Daemon { name, child, log });
        }

        /// Polls `ready` until it holds; panics with the logs when a daemon
        /// exits first or [`UP_WITHIN`] passes.
        fn wait_for(&mut self, what: &str, mut ready: impl FnMut(&Cluster) -> bool) {
            let start = Instant::now();
            loop {
                if ready(self) {
                    return;
                }
                let exited = self.daemons.iter_mut().find_map(|d| d.child.try_wait().ok().flatten().map(|status| (d.name, status)));
                if let Some((name, status)) = exited {
                    panic!("{name} exited ({status}) while waiting for {what}\n{}", self.logs());
                }
                if start.elapsed() > UP_WITHIN {
                    panic!("no {what} after {UP_WITHIN:?}\n{}", self.logs());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }

        /// The daemons' logs, for a failure message.
        pub fn logs(&self) -> String {
            let mut text = format!("slurm.conf:\n{}\n", std::fs::read_to_string(&self.conf).unwrap_or_default());
            for d in &self.daemons {
                let log = std::fs::read_to_string(&d.log).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                text += &format!("--- {} ({}), last {} lines:\n{}\n", d.name, d.log.display(), tail.len(), tail.join("\n"));
            }
            text
        }

        /// `program` with this cluster's configuration, and without the
        /// variables of a job this test may itself run in (another
        /// cluster's allocation, an MPI launcher's rank) or Outboard's own.
        pub fn command(&self, program: &str) -> Command {
            let mut c = Command::new(program);
            for (k, _) in std::env::vars_os() {
                let k = k.to_string_lossy().into_owned();
                if ["SLURM_", "SLURMD_", "SRUN_", "SALLOC_", "SBATCH_", "PMI_", "PMIX_", "OMPI_", "OUTBOARD_"].iter().any(|p| k.starts_with(p)) {
                    c.env_remove(k);
                }
            }
            c.env("SLURM_CONF", &self.conf);
            c
        }

        /// `srun -n <tasks> --label --mpi=<mpi>` of `program`, which a hang
        /// cannot block: `srun` is ended after `limit_s` seconds.
        pub fn srun(&self, tasks: u32, mpi: &str, limit_s: u32) -> Command {
            let mut c = self.command("timeout");
            c.args([limit_s.to_string(), "srun".into(), "-n".into(), tasks.to_string(), "--label".into(), format!("--mpi={mpi}")]);
            c
        }
    }

    fn set_mode(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    impl Drop for Cluster {
        fn drop(&mut self) {
            // Jobs a timed-out srun left behind, so that no task outlives
            // the test.
            if let Ok(o) = self.command("squeue").args(["-h", "-o", "%i"]).output() {
                let ids: Vec<String> = String::from_utf8_lossy(&o.stdout).split_whitespace().map(String::from).collect();
                if !ids.is_empty() {
                    let _ = self.command("scancel").args(&ids).status();
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
            // Last started, first stopped: slurmd, slurmctld, munged.
            for d in self.daemons.iter_mut().rev() {
                unsafe { libc::kill(d.child.id() as libc::pid_t, libc::SIGTERM) };
                let start = Instant::now();
                while matches!(d.child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = d.child.kill();
                let _ = d.child.wait();
            }
            if std::thread::panicking() {
                eprintln!("the cluster's configuration and logs are kept in {}", self.dir.display());
            } else {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }
    }
}

use cluster::Cluster;

/// The cluster, or `None` (and a recorded skip) where Slurm or munge is not
/// installed.
fn cluster_or_skip(test: &str) -> Option<Cluster> {
    if let Some(why) = cluster::unavailable() {
        common::skip(test, &why);
        return None;
    }
    Some(Cluster::start())
}

#[test]
#[ignore = "a rank's entry point, not a test: the tests of this file start it under srun with OB_SCENARIO set"]
fn rank_program() {
    launcher_jobs::run_scenario();
}

/// What a job printed, for assertions and failure messages.
struct Job {
    out: Output,
    stdout: String,
    stderr: String,
    what: String,
}

impl Job {
    fn run(mut c: Command, what: &str) -> Job {
        let t = std::time::Instant::now();
        let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        println!("{what}: {} in {:.1} s", out.status, t.elapsed().as_secs_f64());
        Job { out, stdout, stderr, what: what.to_string() }
    }

    /// The job succeeded and task `r`'s output (`srun --label`'s `r: `
    /// prefix) has a line that starts with `start`, for every task `r` in
    /// `tasks`.
    fn expect(&self, cluster: &Cluster, tasks: std::ops::Range<u32>, start: impl Fn(u32) -> String) {
        assert!(self.out.status.success(), "{}: {}\n{}", self.what, self.out.status, self.context(cluster));
        for r in tasks {
            let want = format!("{r}: {}", start(r));
            assert!(self.stdout.lines().any(|l| l.trim_start().starts_with(&want)), "{}: no line {want:?}\n{}", self.what, self.context(cluster));
        }
    }

    fn context(&self, cluster: &Cluster) -> String {
        format!("stdout:\n{}\nstderr:\n{}\n{}", self.stdout, self.stderr, cluster.logs())
    }
}

/// This test binary's `rank_program` under `srun`, playing `scenario`.
fn rank_job(cluster: &Cluster, mpi: &str, scenario: &str) -> Job {
    let mut c = cluster.srun(4, mpi, 240);
    c.arg(std::env::current_exe().unwrap());
    c.args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"]);
    c.env("OB_SCENARIO", scenario);
    Job::run(c, &format!("srun --mpi={mpi}: {scenario}"))
}

/// The runtime's example binaries, built for the profile `outboard` was
/// built with (a no-op when `cargo test --workspace` built them already).
fn examples() -> PathBuf {
    if let Some(d) = outboard_settings::registry::EXAMPLES_DIR.get(&outboard_settings::ProcessEnv).unwrap() {
        return PathBuf::from(d);
    }
    let exe = PathBuf::from(OUTBOARD);
    let profile_dir = exe.parent().unwrap();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "-p", "outboard-runtime", "--examples", "--target-dir"]).arg(profile_dir.parent().unwrap());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "building the runtime's examples: {}", String::from_utf8_lossy(&out.stderr));
    profile_dir.join("examples")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh directory for one test's programs.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("outboard-slurm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn srun_with_pmix_runs_the_runtime_examples_without_outboard_variables() {
    let test = "srun_with_pmix_runs_the_runtime_examples_without_outboard_variables";
    let _serial = serial();
    let Some(cluster) = cluster_or_skip(test) else { return };
    let examples = examples();
    if let Err(why) = outboard_runtime::bootstrap::pmix::available() {
        return common::skip(test, &format!("{why} (apt-get install -y libpmix2)"));
    }

    let job = rank_job(&cluster, "pmix", "collectives");
    job.expect(&cluster, 0..1, |_| "bootstrap: the launcher's PMIx".into());
    job.expect(&cluster, 0..4, |r| format!("rank {r}: all collectives correct in both modes"));

    let job = rank_job(&cluster, "pmix", "store");
    job.expect(&cluster, 0..4, |r| format!("rank {r}: store intact"));

    let example = |name: &str, args: &[&str]| {
        let mut c = cluster.srun(4, "pmix", 240);
        c.arg(examples.join(name)).args(args);
        Job::run(c, &format!("srun --mpi=pmix: {name} {}", args.join(" ")))
    };
    example("ring", &["5"]).expect(&cluster, 0..1, |_| "lap 4: token 10 came back intact".into());
    example("rdma_write", &[]).expect(&cluster, 0..1, |_| "3 slices written by RDMA, all intact; ".into());
    let job = example("nicvm_allreduce", &["20", "16"]);
    job.expect(&cluster, 0..1, |_| "4 ranks, 20 allreduces of 16 x i64, all equal to the reference".into());
    job.expect(&cluster, 0..4, |r| format!("rank {r}: "));
    example("nicvm_bcast", &["20", "64"]).expect(&cluster, 0..4, |r| format!("rank {r}: 20 x 64 B through the module"));
}

#[test]
fn srun_with_pmi2_runs_the_collectives_example_through_pmi1() {
    let test = "srun_with_pmi2_runs_the_collectives_example_through_pmi1";
    let _serial = serial();
    let Some(cluster) = cluster_or_skip(test) else { return };
    let job = rank_job(&cluster, "pmi2", "collectives");
    job.expect(&cluster, 0..1, |_| "bootstrap: the launcher's PMI-1 (PMI_FD=".into());
    job.expect(&cluster, 0..4, |r| format!("rank {r}: all collectives correct in both modes"));
    let job = rank_job(&cluster, "pmi2", "store");
    job.expect(&cluster, 0..4, |r| format!("rank {r}: store intact"));
}

/// The C ABI's test programs, compiled with gcc against `outboard.h` and
/// `liboutboard_capi.so` as `capi.rs` does.
#[test]
fn srun_with_pmix_runs_the_c_tests() {
    let test = "srun_with_pmix_runs_the_c_tests";
    let _serial = serial();
    if Command::new("gcc").arg("--version").output().map_or(true, |o| !o.status.success()) {
        return common::skip(test, "gcc not found (apt-get install -y gcc)");
    }
    let Some(cluster) = cluster_or_skip(test) else { return };
    let lib = common::capi_lib_dir();
    let dir = scratch("c");
    for (src, done) in [("capi_test", "all "), ("atomic_test", "atomics and lock: all "), ("nicvm_test", "nicvm modules: all ")] {
        let exe = dir.join(src);
        let o = Command::new("gcc")
            .args(["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE"])
            .arg(repo().join(format!("crates/capi/c/{src}.c")))
            .arg("-o")
            .arg(&exe)
            .arg(format!("-I{}", repo().join("crates/capi/include").display()))
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .args(["-loutboard_capi", "-pthread"])
            .output()
            .unwrap();
        assert!(o.status.success(), "gcc {src}.c:\n{}", String::from_utf8_lossy(&o.stderr));
        let mut c = cluster.srun(4, "pmix", 300);
        // cargo's LD_LIBRARY_PATH (which outranks the run path) may name a
        // directory with an older build of the library first.
        c.arg(&exe).env("LD_LIBRARY_PATH", &lib);
        let job = Job::run(c, &format!("srun --mpi=pmix: {src}"));
        job.expect(&cluster, 0..4, |r| format!("rank {r}: {done}"));
        if src == "capi_test" {
            job.expect(&cluster, 0..4, |_| "world host-based: collectives of 4 ranks ok".into());
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The PMPI library, built for `cc`'s MPI with `outboard mpi-lib`'s recipe,
/// preloaded into `bindings/mpi/tests/compare.c` (every taken-over
/// collective compared with PMPI's result) started by `srun --mpi=<mpi>`.
fn pmpi_under_srun(test: &str, name: &str, cc: &str, mpi: &str, env: &[(&str, &str)]) {
    let _serial = serial();
    let dir = scratch(&format!("pmpi-{name}"));
    let lib = match outboard_cli::mpi_lib::build(Path::new(cc), &dir, &common::capi_lib_dir()) {
        Ok(built) => built.path,
        Err(e) if e.mpi_missing() => return common::skip(test, &e.to_string()),
        Err(e) => panic!("{e}"),
    };
    let prog = dir.join("compare");
    let o = Command::new(cc)
        .args(["-O1", "-Wall", "-Wextra", "-Werror"])
        .arg(repo().join("bindings/mpi/tests/compare.c"))
        .arg("-o")
        .arg(&prog)
        .output()
        .unwrap();
    assert!(o.status.success(), "{cc} compare.c:\n{}", String::from_utf8_lossy(&o.stderr));
    let Some(cluster) = cluster_or_skip(test) else { return };
    let mut c = cluster.srun(4, mpi, 600);
    // Preloaded in the tasks only, not in srun.
    c.arg("env").arg(format!("LD_PRELOAD={}", lib.display())).arg("OUTBOARD_MPI_VERBOSE=1");
    for (k, v) in env {
        c.arg(format!("{k}={v}"));
    }
    // Counts up to 20000 and the quick set of datatypes and operations: the
    // launcher is under test here; mpi_preload.rs runs the full set and the
    // size thresholds.
    c.arg(&prog).args(["20000", "quick"]).env("LD_LIBRARY_PATH", common::capi_lib_dir());
    let job = Job::run(c, &format!("srun --mpi={mpi}: compare ({name}) with liboutboard_mpi preloaded"));
    job.expect(&cluster, 0..4, |r| format!("rank {r}: "));
    for r in 0..4 {
        assert!(job.stdout.contains(&format!("{r}: rank {r}: ")) && job.stdout.contains("comparisons with PMPI equal"), "rank {r}\n{}", job.context(&cluster));
    }
    assert!(job.stderr.contains("Outboard up on 4 ranks"), "{}", job.context(&cluster));
    for call in ["MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Iallreduce"] {
        let line = format!("rank 0: {call} on MPI_COMM_WORLD: taken over (offloaded)");
        assert!(job.stderr.contains(&line), "no \"{line}\"\n{}", job.context(&cluster));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn srun_with_pmix_starts_open_mpi_programs_with_the_pmpi_library_preloaded() {
    // Open MPI as the runtime tests use it: TCP between ranks.
    pmpi_under_srun("srun_with_pmix_starts_open_mpi_programs_with_the_pmpi_library_preloaded", "openmpi", "mpicc.openmpi", "pmix", &[("OMPI_MCA_btl", "tcp,self")]);
}

#[test]
fn srun_with_pmi2_starts_mpich_programs_with_the_pmpi_library_preloaded() {
    // MPICH 4.0.2's device-level (shared-memory) reduce crashes on
    // MPI_IN_PLACE at a root other than 0, with or without this library
    // (mpi_preload.rs): its generic collectives are used instead.
    pmpi_under_srun("srun_with_pmi2_starts_mpich_programs_with_the_pmpi_library_preloaded", "mpich", "mpicc.mpich", "pmi2", &[("MPIR_CVAR_DEVICE_COLLECTIVES", "none")]);
}
