//! One job: every rank started in its own namespace the way a foreign
//! launcher would (Slurm's or PMI's rank variables, rank 0 serving the
//! rendezvous on its address), watched until each exits, with the moment
//! each one did.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::netns::{rank_ip, Net};

/// The rendezvous port (rank 0 serves it on its own address; each
/// namespace has its own ports).
pub const RENDEZVOUS_PORT: u16 = 29500;

/// Which launcher's variables the ranks get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LauncherVars {
    /// `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_NTASKS_PER_NODE` (srun).
    Slurm,
    /// `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALNRANKS` (MPICH's Hydra).
    Pmi,
}

/// What a job runs and how.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// `OUTBOARD_PEER_TIMEOUT_MS`.
    pub peer_timeout_ms: u64,
    /// `OUTBOARD_JOB_KEY`.
    pub job_key: u64,
    /// `OUTBOARD_JOB_SECRET` (hex), if any.
    pub secret: Option<String>,
    /// The launcher variables.
    pub launcher: LauncherVars,
    /// Ranks in the job.
    pub ranks: u32,
    /// Node engines of this many ranks each, a namespace per node (ranks
    /// `0..R-1` on node 0, ...); `None`: an engine per rank, a namespace
    /// per rank.
    pub ranks_per_node: Option<u32>,
}

impl JobSpec {
    /// The namespace index (node) of `rank`.
    pub fn node_of(&self, rank: u32) -> u32 {
        rank / self.ranks_per_node.unwrap_or(1)
    }

    /// The ranks of node `node`.
    pub fn ranks_of(&self, node: u32) -> std::ops::Range<u32> {
        let per = self.ranks_per_node.unwrap_or(1);
        node * per..((node + 1) * per).min(self.ranks)
    }
}

/// Variables of launchers the ranks must not inherit from whoever runs
/// the chaos command (the runtime would take them over the ones set here).
const INHERITED: [&str; 9] = [
    "OUTBOARD_RANK",
    "OUTBOARD_SIZE",
    "OUTBOARD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
];

struct Rank {
    child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
    ended: Option<(Instant, ExitStatus)>,
}

/// A running job.
pub struct Job {
    ranks: Vec<Rank>,
    /// When the first rank was started.
    pub started: Instant,
}

/// How one rank ended.
#[derive(Debug)]
pub struct RankEnd {
    /// The rank.
    pub rank: u32,
    /// When it exited on its own, with its status; `None`: it was still
    /// running when the job was given up on (a hang), and was killed.
    pub ended: Option<(Instant, ExitStatus)>,
    /// Its standard output.
    pub stdout: String,
    /// For a rank that hung: each of its threads' name, state and kernel
    /// wait channel, read from /proc before any rank was killed (its
    /// stderr may end with what it printed after the others were killed).
    pub threads: String,
    /// Its standard error.
    pub stderr: String,
}

fn collect(mut from: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = from.read_to_end(&mut v);
        v
    })
}

impl Job {
    /// Starts every rank of `spec` in its node's namespace of `net`.
    pub fn start(net: &Net, spec: &JobSpec) -> anyhow::Result<Job> {
        let n = spec.ranks;
        let mut job = Job { ranks: Vec::new(), started: Instant::now() };
        let me = std::env::current_exe().context("finding the outboard command for the node engines")?;
        for r in 0..n {
            let node = spec.node_of(r);
            let ns = &net.ranks[node as usize];
            let mut c = crate::netns::command_in(ns, &spec.program);
            c.args(&spec.args);
            for k in INHERITED {
                c.env_remove(k);
            }
            let (rank_var, size_var, local_var) = match spec.launcher {
                LauncherVars::Slurm => ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"),
                LauncherVars::Pmi => ("PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"),
            };
            match spec.ranks_per_node {
                // A node of node-engine ranks: the first spawns the engine.
                Some(per) => {
                    crate::launch::emulated_placement(n, per).apply(&mut c, node);
                    c.env("OUTBOARD_ENGINE", "node")
                        .env("OUTBOARD_NODE_NAME", format!("node{node}"))
                        .env("OUTBOARD_NODE_PROGRAM", &me)
                        .env(local_var, per.to_string())
                }
                // All ranks share this machine's cores: the progress policy
                // must know.
                None => c.env(local_var, n.to_string()),
            };
            c.env(rank_var, r.to_string())
                .env(size_var, n.to_string())
                .env("OUTBOARD_RENDEZVOUS", format!("{}:{RENDEZVOUS_PORT}", rank_ip(0)))
                .env("OUTBOARD_ADDR", rank_ip(node).to_string())
                .env_remove("OUTBOARD_IFACE")
                .env("OUTBOARD_PEER_TIMEOUT_MS", spec.peer_timeout_ms.to_string())
                // A rank killed before it reached the rendezvous is noticed
                // at the join deadline, rank 0's bootstrap timeout: as long
                // as the peer timeout here (at least 1 s), so a kill at
                // start-up is bounded like any other. Ranks here start in
                // well under a second.
                .env("OUTBOARD_BOOTSTRAP_TIMEOUT_MS", spec.peer_timeout_ms.max(1_000).to_string())
                .env("OUTBOARD_JOB_KEY", format!("{:016x}", spec.job_key))
                .env("OUTBOARD_STATS", "stderr")
                // One datagram per packet on the wire: the scenarios' drop
                // rules count, and their captures replay, single datagrams
                // (a UDP GSO run crosses the veth as one packet).
                .env("OUTBOARD_UDP_GSO", "off")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            match &spec.secret {
                Some(s) => c.env("OUTBOARD_JOB_SECRET", s),
                None => c.env_remove("OUTBOARD_JOB_SECRET"),
            };
            let mut child = c.spawn().with_context(|| format!("starting rank {r} ({})", spec.program.display()))?;
            let out = child.stdout.take().map(collect);
            let err = child.stderr.take().map(collect);
            job.ranks.push(Rank { child, out, err, ended: None });
        }
        Ok(job)
    }

    /// Notes every rank that has exited; whether all have.
    pub fn poll(&mut self) -> bool {
        let now = Instant::now();
        for r in &mut self.ranks {
            if r.ended.is_none() {
                if let Ok(Some(s)) = r.child.try_wait() {
                    r.ended = Some((now, s));
                }
            }
        }
        self.ranks.iter().all(|r| r.ended.is_some())
    }

    /// Whether `rank` is still running (as of the last poll).
    pub fn running(&self, rank: u32) -> bool {
        self.ranks[rank as usize].ended.is_none()
    }

    /// Polls until every rank exited or `deadline`; whether all exited.
    pub fn wait_until(&mut self, deadline: Instant) -> bool {
        loop {
            if self.poll() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILLs `rank`; when.
    pub fn kill(&mut self, rank: u32) -> Instant {
        let _ = self.ranks[rank as usize].child.kill();
        Instant::now()
    }

    /// SIGKILLs the node engine of node `node` of a job of node engines
    /// with key `job_key` (the `outboard node` process whose listening
    /// socket names the job and node); when, or `None` if none runs.
    pub fn kill_engine(&mut self, job_key: u64, node: u32) -> Option<Instant> {
        let socket = format!("outboard-{job_key:016x}-node-{node}");
        let pid = std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let words: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            (words.contains(&&b"node"[..]) && words.contains(&socket.as_bytes())).then_some(pid)
        })?;
        let killed = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        killed.then(Instant::now)
    }

    /// Kills what still runs (those ranks' `ended` stays `None`), and
    /// returns how each rank ended, with its output.
    pub fn finish(mut self) -> Vec<RankEnd> {
        self.poll();
        // What every hung rank was doing, before any is killed (killing
        // rank 0 ends its rendezvous, and the others then print errors).
        let threads: Vec<String> = self.ranks.iter().map(|r| if r.ended.is_none() { thread_states(r.child.id()) } else { String::new() }).collect();
        for r in &mut self.ranks {
            if r.ended.is_none() {
                let _ = r.child.kill();
            }
        }
        let mut ends = Vec::new();
        for ((i, mut r), threads) in self.ranks.drain(..).enumerate().zip(threads) {
            let _ = r.child.wait();
            let text = |h: Option<JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or_default();
            ends.push(RankEnd { rank: i as u32, ended: r.ended, stdout: text(r.out), stderr: text(r.err), threads });
        }
        ends
    }
}

/// `name state wchan` of each thread of process `pid`, from /proc.
fn thread_states(pid: u32) -> String {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return "(gone)".to_string() };
    let mut v = Vec::new();
    for t in dir.flatten() {
        let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default().trim().to_string();
        let state = read("status").lines().find_map(|l| l.strip_prefix("State:").map(|x| x.trim().to_string())).unwrap_or_default();
        v.push(format!("{} [{}] in {}", read("comm"), state, read("wchan")));
    }
    v.join("; ")
}

impl Drop for Job {
    fn drop(&mut self) {
        for r in &mut self.ranks {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}
