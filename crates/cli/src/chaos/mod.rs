//! `outboard chaos`: real processes under faults.
//!
//! Builds one network namespace per rank on a bridge (see [`crate::netns`]), runs
//! every rank of a job in its own namespace with a foreign launcher's
//! variables and `OUTBOARD_RENDEZVOUS` (see [`job`]), and plays scenarios:
//!
//! - **kill** ([`kill`]): a random rank (rank 0 included) gets SIGKILL at a random
//!   moment of a random workload; every survivor must exit within
//!   `peer_timeout` plus the margin (late exits are counted), and one still
//!   running at the cap (4 x `peer_timeout` + 5 s) is a hang;
//! - **loss** ([`loss`]): every workload at each loss rate with duplication (nftables
//!   in every namespace, see [`nft`]); every result check must pass;
//! - **replay** ([`replay`]): every datagram captured from one job, and forged,
//!   truncated and bit-flipped ones, sent at a later job with the same job
//!   key from its ranks' addresses (see [`capture`]); the job must pass.
//!
//! Prints a line per trial and a summary; fails when a job hangs, a result
//! check fails, or (kill) a survivor's error names another rank than the
//! one killed (with `--strict`, also when a survivor is late).

mod capture;
mod job;
mod kill;
mod loss;
mod nft;
mod replay;
mod report;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use job::{Job, JobSpec, LauncherVars, RankEnd};
use crate::netns::Net;
use nft::Faults;
use report::Counters;
use workload::{Length, Programs, Workload};

/// Which scenarios to play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// SIGKILL of a random rank at a random moment.
    Kill,
    /// Loss and duplication with every workload.
    Loss,
    /// Replayed and forged datagrams at a running job.
    Replay,
    /// All three.
    All,
}

/// Arguments of `outboard chaos`.
#[derive(clap::Args, Debug)]
pub struct ChaosArgs {
    /// Trials per scenario (loss: rounds of the whole matrix of workloads
    /// and loss rates).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    trials: u32,
    /// Ranks per job, one namespace each (with --ranks-per-node, one
    /// namespace per node).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: u32,
    /// Node engines: group the ranks into nodes of this many (ranks
    /// 0..R-1 on node 0, ...), one namespace and one `outboard node`
    /// process per node, as `outboard run --ranks-per-node R --netns` does.
    /// Default: an engine per rank.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    ranks_per_node: Option<u32>,
    /// What the kill scenario kills: a rank, a node engine (needs
    /// --ranks-per-node), or either at random.
    #[arg(long, value_enum, default_value = "rank")]
    kill: KillTarget,
    /// What to play.
    #[arg(long, value_enum, default_value = "all")]
    scenario: Scenario,
    /// Seed of every random choice (default: random; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// `OUTBOARD_PEER_TIMEOUT_MS` of every rank.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    peer_timeout_ms: u64,
    /// Margin past the peer timeout within which a survivor must exit
    /// (default: a quarter of the peer timeout, the keepalive interval,
    /// plus 500 ms).
    #[arg(long)]
    margin_ms: Option<u64>,
    /// Loss rates of the loss scenario, in percent.
    #[arg(long, value_delimiter = ',', default_value = "0,10,30", value_parser = clap::value_parser!(u32).range(0..=90))]
    loss: Vec<u32>,
    /// Duplication rate of the loss scenario, in percent.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100))]
    dup: u32,
    /// Workloads to draw from.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ring,collectives,rdma-write,bcast-offloaded,bcast-nic,bcast-host")]
    workloads: Vec<Workload>,
    /// Kill this rank in every kill trial instead of a random one.
    #[arg(long)]
    victim: Option<u32>,
    /// Kill at this many milliseconds after the job starts instead of a
    /// random moment.
    #[arg(long)]
    kill_at_ms: Option<u64>,
    /// The launcher whose variables the ranks get.
    #[arg(long, value_enum, default_value = "slurm")]
    launcher: LauncherVars,
    /// Replay: give both jobs the same `OUTBOARD_JOB_SECRET` (default: a
    /// fresh one each), so the replay is authentic and must be dropped as
    /// an older incarnation.
    #[arg(long)]
    same_secret: bool,
    /// Datagrams of each kind (forged, truncated, bit-flipped) the replay
    /// adds to the captured ones.
    #[arg(long, default_value_t = 300)]
    forged: usize,
    /// Directory of the runtime's example binaries (default:
    /// `OUTBOARD_EXAMPLES_DIR`, else `examples/` beside this binary).
    #[arg(long)]
    examples_dir: Option<PathBuf>,
    /// Seconds a loss or replay job may run before it counts as a hang.
    #[arg(long, default_value_t = 180.0)]
    job_limit: f64,
    /// Print each survivor's last line of stderr.
    #[arg(short, long)]
    verbose: bool,
    /// Fail when a survivor exits later than the peer timeout plus margin.
    #[arg(long)]
    strict: bool,
}

/// What the kill scenario kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KillTarget {
    /// A rank's process.
    Rank,
    /// A node's engine process (`outboard node`).
    Engine,
    /// A rank or a node engine, at random.
    Either,
}

/// What went wrong across the trials.
#[derive(Debug, Default)]
struct Tally {
    hangs: u32,
    failures: u32,
    wrong_rank: u32,
    late: u32,
}

impl Tally {
    /// Counts a job that did not pass: a hang, or a failure.
    fn job_failed(&mut self, hang: bool) {
        if hang {
            self.hangs += 1;
        } else {
            self.failures += 1;
        }
    }
}

/// Runs `outboard chaos`.
pub fn run(a: ChaosArgs) -> anyhow::Result<()> {
    if let Some(v) = a.victim {
        if v >= a.ranks {
            bail!("--victim {v} is not a rank of {}", a.ranks);
        }
    }
    if let Some(r) = a.ranks_per_node {
        if r > a.ranks {
            bail!("--ranks-per-node {r} is more than the job's {} ranks", a.ranks);
        }
        if matches!(a.scenario, Scenario::Replay | Scenario::All) {
            bail!("the replay scenario runs with an engine per rank: with --ranks-per-node choose --scenario kill or loss");
        }
    } else if a.kill != KillTarget::Rank {
        bail!("--kill engine and --kill either need node engines: add --ranks-per-node R");
    }
    if a.workloads.is_empty() || !a.job_limit.is_finite() || a.job_limit <= 0.0 {
        bail!("need at least one workload and a positive --job-limit");
    }
    let programs = Programs::locate(a.examples_dir.as_deref())?;
    if !nft::available() {
        bail!("nft not found (Debian package nftables)");
    }
    let seed = a.seed.unwrap_or_else(outboard_runtime::random_u64);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = a.ranks.div_ceil(a.ranks_per_node.unwrap_or(1));
    let net = Net::create("c", nodes).context("building the namespaces")?;
    let placement = match a.ranks_per_node {
        Some(r) => format!("{nodes} nodes of {r} ranks sharing a node engine, one network namespace per node"),
        None => "one network namespace each".to_string(),
    };
    println!(
        "# outboard chaos: {} ranks, {placement} (veth to a bridge, MTU 9000), {:?} variables + OUTBOARD_RENDEZVOUS; peer timeout {} ms; seed {seed}",
        a.ranks, a.launcher, a.peer_timeout_ms
    );
    let mut tally = Tally::default();
    let all = a.scenario == Scenario::All;
    if all || a.scenario == Scenario::Loss {
        loss::scenario(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    if all || a.scenario == Scenario::Kill {
        kill::scenario(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    if all || a.scenario == Scenario::Replay {
        replay::scenario(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    println!("chaos: {} hangs, {} failed result checks, {} errors naming another rank, {} late survivors", tally.hangs, tally.failures, tally.wrong_rank, tally.late);
    if tally.hangs + tally.failures + tally.wrong_rank > 0 || (a.strict && tally.late > 0) {
        bail!("chaos found faults the job did not survive (seed {seed})");
    }
    Ok(())
}

fn spec(a: &ChaosArgs, p: &Programs, w: Workload, len: Length, job_key: u64, secret: Option<String>) -> JobSpec {
    let (program, args) = w.command(p, len);
    JobSpec { program, args, peer_timeout_ms: a.peer_timeout_ms, job_key, secret, launcher: a.launcher, ranks: a.ranks, ranks_per_node: a.ranks_per_node }
}

fn set_faults(net: &Net, f: Faults) -> anyhow::Result<()> {
    net.ranks.iter().try_for_each(|ns| nft::apply(ns, f))
}

/// Runs a job to its end or `limit`: how long it took, and how each rank
/// ended (a rank still running at the limit was killed: `ended` is None).
fn run_job(net: &Net, s: &JobSpec, limit: Duration) -> anyhow::Result<(f64, Vec<RankEnd>)> {
    let mut job = Job::start(net, s)?;
    let start = job.started;
    job.wait_until(start + limit);
    let ends = job.finish();
    let last = ends.iter().filter_map(|e| e.ended.map(|(t, _)| t)).max().unwrap_or(start);
    Ok((last.duration_since(start).as_secs_f64(), ends))
}

/// A job's verdict: `None` if every rank exited 0, else what went wrong,
/// and whether that was a hang.
fn verdict(ends: &[RankEnd]) -> Option<(bool, String)> {
    let hung: Vec<u32> = ends.iter().filter(|e| e.ended.is_none()).map(|e| e.rank).collect();
    if !hung.is_empty() {
        return Some((true, format!("HANG: ranks {hung:?} still running at the limit")));
    }
    let bad = ends.iter().find(|e| !e.ended.is_some_and(|(_, s)| s.success()))?;
    let last = |t: &str| t.lines().rfind(|l| !report::is_report(l) && !l.trim().is_empty()).map(str::to_string);
    let why = last(&bad.stderr).or_else(|| last(&bad.stdout)).unwrap_or_else(|| "(no message)".to_string());
    Some((false, format!("FAILED: rank {} {}: {}", bad.rank, bad.ended.map(|(_, s)| s.to_string()).unwrap_or_default(), why.trim())))
}

fn counters(ends: &[RankEnd]) -> (Counters, usize) {
    let mut c = Counters::new();
    let lines = ends.iter().map(|e| report::add_stats(&e.stderr, &mut c)).sum();
    (c, lines)
}

fn fmt_counters(c: &Counters, lines: usize) -> String {
    if lines == 0 {
        return "no engine counters (OUTBOARD_STATS not supported by this build)".to_string();
    }
    let v: Vec<String> = report::drop_counters(c).iter().map(|(k, v)| format!("{k} {v}")).collect();
    let re = c.get("retransmits").copied().unwrap_or(0);
    format!("retransmits {re}; drops: {}", if v.is_empty() { "none".to_string() } else { v.join(", ") })
}
