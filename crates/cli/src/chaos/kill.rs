//! One kill trial: a job runs, one rank gets SIGKILL at a chosen moment,
//! and each survivor is watched until it exits or the cap passes (a hang).
//! What each survivor's error names is read from its output.

use std::time::{Duration, Instant};

use super::job::{Job, JobSpec, RankEnd};
use super::netns::Net;
use super::report::ranks_named;

/// What a survivor's exit said about the death.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Its error names the killed rank.
    Victim,
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
pub fn trial(net: &Net, spec: &JobSpec, victim: u32, at: Duration, cap: Duration) -> anyhow::Result<KillOutcome> {
    let mut job = Job::start(net, spec)?;
    let kill_at = job.started + at;
    job.wait_until(kill_at);
    let landed = job.running(victim);
    let killed = if landed { job.kill(victim) } else { Instant::now() };
    job.wait_until(killed + cap);
    let ends = job.finish();
    let survivors = ends.iter().filter(|e| e.rank != victim).map(|e| survivor(e, victim, killed)).collect();
    Ok(KillOutcome { landed, at: at.as_secs_f64(), survivors })
}

fn survivor(e: &RankEnd, victim: u32, killed: Instant) -> Survivor {
    let mut last_error = e.stderr.lines().rfind(|l| !l.starts_with("outboard stats") && !l.trim().is_empty()).unwrap_or("").trim().to_string();
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
                let named = if named.contains(&victim) {
                    Named::Victim
                } else if victim == 0 && named.is_empty() && e.stderr.to_lowercase().contains("rendezvous") {
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
