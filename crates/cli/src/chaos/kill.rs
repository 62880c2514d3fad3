//! One kill trial: a job runs, one rank - or, with node engines, one
//! node's engine - gets SIGKILL at a chosen moment, and each survivor is
//! watched until it exits or the cap passes (a hang). What each
//! survivor's error names is read from its output.

use std::time::{Duration, Instant};

use anyhow::bail;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::job::{Job, JobSpec, RankEnd};
use crate::netns::Net;
use super::nft::Faults;
use super::report::{self, debug_formatted, ranks_named};
use super::workload::{Length, Programs};
use super::{run_job, set_faults, spec, verdict, ChaosArgs, KillTarget, Tally};

/// What a trial kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// A rank's process.
    Rank(u32),
    /// A node's engine process.
    Engine(u32),
}

impl std::fmt::Display for Victim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Victim::Rank(r) => write!(f, "rank {r}"),
            Victim::Engine(n) => write!(f, "node {n}'s engine"),
        }
    }
}

/// What a survivor's exit said about the death.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Its error names the killed rank first (for a killed node engine,
    /// one of that node's ranks).
    Victim,
    /// A rank of the killed engine's node: its error says its node engine
    /// is gone.
    EngineGone,
    /// Its error names the killed rank, but another rank before it.
    NotFirst,
    /// Its error shows Rust's debug formatting (`NodeId(3)`).
    DebugForm,
    /// The killed rank was 0, which serves the rendezvous, and its error
    /// is the rendezvous being lost (no rank number in it).
    Rendezvous,
    /// Its error names other ranks only.
    Other,
    /// It failed without naming any rank.
    Nothing,
    /// It exited with status 0 (its part was done before it needed the
    /// killed rank).
    Finished,
    /// It had exited before the kill.
    Before,
    /// It was still running at the cap and was killed: a hang.
    Hung,
}

/// One survivor.
#[derive(Debug, Clone)]
pub struct Survivor {
    /// Its rank.
    pub rank: u32,
    /// Seconds from the kill to its exit (`None`: hung, or exited before).
    pub exit_after: Option<f64>,
    /// What its error named.
    pub named: Named,
    /// The last line of its stderr (for the report), and for a hung rank
    /// what its threads were doing.
    pub last_error: String,
}

/// One trial's outcome.
#[derive(Debug)]
pub struct KillOutcome {
    /// Whether the victim was still running when killed.
    pub landed: bool,
    /// Seconds after the job started that the kill came.
    pub at: f64,
    /// The survivors.
    pub survivors: Vec<Survivor>,
}

/// Runs `spec` on `net`, SIGKILLs `victim` `at` after the start, and
/// waits at most `cap` after the kill for the survivors.
pub fn trial(net: &Net, spec: &JobSpec, victim: Victim, at: Duration, cap: Duration) -> anyhow::Result<KillOutcome> {
    let mut job = Job::start(net, spec)?;
    let kill_at = job.started + at;
    job.wait_until(kill_at);
    let (landed, killed) = match victim {
        Victim::Rank(r) if job.running(r) => (true, job.kill(r)),
        Victim::Rank(_) => (false, Instant::now()),
        Victim::Engine(n) => match job.kill_engine(spec.job_key, n) {
            Some(t) => (true, t),
            None => (false, Instant::now()),
        },
    };
    job.wait_until(killed + cap);
    let ends = job.finish();
    let survivors = ends.iter().filter(|e| victim != Victim::Rank(e.rank)).map(|e| survivor(e, spec, victim, killed)).collect();
    Ok(KillOutcome { landed, at: at.as_secs_f64(), survivors })
}

fn survivor(e: &RankEnd, spec: &JobSpec, victim: Victim, killed: Instant) -> Survivor {
    // The ranks whose death the survivors should name first.
    let victims = match victim {
        Victim::Rank(r) => r..r + 1,
        Victim::Engine(n) => spec.ranks_of(n),
    };
    let own_engine_killed = matches!(victim, Victim::Engine(n) if spec.node_of(e.rank) == n);
    let mut last_error = e.stderr.lines().rfind(|l| !report::is_report(l) && !l.trim().is_empty()).unwrap_or("").trim().to_string();
    if !e.threads.is_empty() {
        last_error = format!("threads at the cap: {} | printed after the job was killed: {last_error}", e.threads);
    }
    let (exit_after, named) = match e.ended {
        None => (None, Named::Hung),
        Some((t, _)) if t < killed => (None, Named::Before),
        Some((t, status)) => {
            let after = Some(t.duration_since(killed).as_secs_f64());
            if status.success() {
                (after, Named::Finished)
            } else {
                let named = ranks_named(&e.stderr, e.rank);
                let named = if debug_formatted(&e.stderr) {
                    Named::DebugForm
                } else if own_engine_killed && e.stderr.contains("node engine is gone") {
                    Named::EngineGone
                } else if named.first().is_some_and(|r| victims.contains(r)) {
                    Named::Victim
                } else if named.iter().any(|r| victims.contains(r)) {
                    Named::NotFirst
                } else if victims.contains(&0) && named.is_empty() && e.stderr.to_lowercase().contains("rendezvous") {
                    Named::Rendezvous
                } else if named.is_empty() {
                    Named::Nothing
                } else {
                    Named::Other
                };
                (after, named)
            }
        }
    };
    Survivor { rank: e.rank, exit_after, named, last_error }
}

/// `--trials` kill trials, each of a random workload (its length
/// measured first, undisturbed), victim and moment; prints each and a summary.
pub(super) fn scenario(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    let pt = Duration::from_millis(a.peer_timeout_ms);
    let margin = Duration::from_millis(a.margin_ms.unwrap_or(a.peer_timeout_ms / 4 + 500));
    let bound = (pt + margin).as_secs_f64();
    let cap = 4 * pt + Duration::from_secs(5);
    // How long each workload runs undisturbed: kills land uniformly within
    // its first four fifths, since a trial may run faster than the run
    // measured (a clean run also shows the set-up works).
    let mut length = Vec::new();
    for &w in &a.workloads {
        let (secs, ends) = run_job(net, &spec(a, p, w, Length::Long, rng.gen(), None), Duration::from_secs_f64(a.job_limit))?;
        if let Some((_, why)) = verdict(&ends) {
            bail!("{} does not pass without faults: {why}", w.name());
        }
        println!("kill: {} runs {secs:.2} s undisturbed", w.name());
        length.push((w, secs));
    }
    let (mut after, mut after0, mut landed) = (Vec::new(), Vec::new(), 0);
    // When the kills that hung a survivor came, after the job's start.
    let mut hang_moments = Vec::new();
    let mut named = std::collections::BTreeMap::<&str, u32>::new();
    for i in 0..a.trials {
        let (w, secs) = length[rng.gen_range(0..length.len())];
        let s = spec(a, p, w, Length::Long, rng.gen(), None);
        let nodes = a.ranks.div_ceil(a.ranks_per_node.unwrap_or(1));
        let engine = match a.kill {
            KillTarget::Rank => false,
            KillTarget::Engine => true,
            KillTarget::Either => rng.gen_bool(0.5),
        };
        let victim = if engine {
            Victim::Engine(rng.gen_range(0..nodes))
        } else {
            Victim::Rank(a.victim.unwrap_or_else(|| rng.gen_range(0..a.ranks)))
        };
        let at = match a.kill_at_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs_f64(rng.gen_range(0.0..(secs * 0.8).max(0.01))),
        };
        let o = trial(net, &s, victim, at, cap)?;
        landed += u32::from(o.landed);
        let mut notes = Vec::new();
        for s in &o.survivors {
            let key = match s.named {
                Named::Victim => "named the killed rank first",
                Named::EngineGone => "were told their node engine is gone",
                Named::NotFirst => {
                    t.wrong_rank += 1;
                    notes.push(format!("rank {} names another rank before the killed one: {}", s.rank, s.last_error));
                    "named another rank first"
                }
                Named::DebugForm => {
                    t.wrong_rank += 1;
                    notes.push(format!("rank {} prints debug formatting: {}", s.rank, s.last_error));
                    "printed debug formatting"
                }
                Named::Rendezvous => "lost the rendezvous (served by the killed rank 0)",
                Named::Other => {
                    t.wrong_rank += 1;
                    notes.push(format!("rank {} names another rank: {}", s.rank, s.last_error));
                    "named another rank"
                }
                Named::Nothing => "failed naming no rank",
                Named::Finished => "finished cleanly",
                Named::Before => "had exited before the kill",
                Named::Hung => {
                    t.hangs += 1;
                    notes.push(format!("HANG: rank {} still running {} s after the kill (killed)", s.rank, cap.as_secs_f64()));
                    "HUNG"
                }
            };
            *named.entry(key).or_default() += 1;
            if let Some(x) = s.exit_after {
                if x > bound {
                    t.late += 1;
                    notes.push(format!("LATE: rank {} exited {x:.2} s after the kill", s.rank));
                }
                if o.landed {
                    after.push(x);
                    if victim == Victim::Rank(0) {
                        after0.push(x);
                    }
                }
            }
        }
        if o.survivors.iter().any(|s| s.named == Named::Hung) {
            hang_moments.push(o.at);
        }
        let exits: Vec<String> = o.survivors.iter().map(|s| s.exit_after.map_or("-".to_string(), |x| format!("{x:.2}"))).collect();
        let kinds: Vec<String> = o.survivors.iter().map(|s| format!("{:?}", s.named)).collect();
        println!(
            "kill {}/{}: {}, {victim} {} at {:.3} s; survivors exit after [{}] s ({}){}",
            i + 1,
            a.trials,
            w.name(),
            if o.landed { "killed" } else { "had already exited" },
            o.at,
            exits.join(", "),
            kinds.join(", "),
            if notes.is_empty() { String::new() } else { format!("; {}", notes.join("; ")) }
        );
        if a.verbose {
            for s in &o.survivors {
                println!("    rank {}: {}", s.rank, s.last_error);
            }
        }
    }
    let dist = |v: &mut Vec<f64>| match report::spread(v) {
        Some([lo, med, p90, hi]) => format!("min {lo:.3} / median {med:.3} / p90 {p90:.3} / max {hi:.3} s over {} survivors", v.len()),
        None => "no survivors".to_string(),
    };
    println!(
        "kill summary: {} trials ({landed} kills landed mid-run), peer timeout {} ms + margin {} ms = bound {bound:.2} s, cap {} s",
        a.trials,
        a.peer_timeout_ms,
        margin.as_millis(),
        cap.as_secs_f64()
    );
    println!("kill summary: survivors' exit after the kill: {}", dist(&mut after));
    println!("kill summary: of these, rank 0 killed: {}", dist(&mut after0));
    let n: Vec<String> = named.iter().map(|(k, v)| format!("{v} {k}")).collect();
    println!("kill summary: survivors {}; {} hangs, {} beyond the bound", n.join(", "), named.get("HUNG").copied().unwrap_or(0), after.iter().filter(|&&x| x > bound).count());
    if let Some([lo, med, _, hi]) = report::spread(&mut hang_moments) {
        println!("kill summary: {} trials hung a survivor; their kills came {lo:.3} / {med:.3} / {hi:.3} s (min / median / max) after the job started", hang_moments.len());
    }
    Ok(())
}
