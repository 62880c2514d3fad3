//! `outboard chaos`: real processes under faults.
//!
//! Builds one network namespace per rank on a bridge (see [`netns`]), runs
//! every rank of a job in its own namespace with a foreign launcher's
//! variables and `OUTBOARD_RENDEZVOUS` (see [`job`]), and plays scenarios:
//!
//! - **kill**: a random rank (rank 0 included) gets SIGKILL at a random
//!   moment of a random workload; every survivor must exit within
//!   `peer_timeout` plus the margin (late exits are counted), and one still
//!   running at the cap (4 x `peer_timeout` + 5 s) is a hang;
//! - **loss**: every workload at each loss rate with duplication (nftables
//!   in every namespace, see [`nft`]); every result check must pass;
//! - **replay**: every datagram captured from one job, and forged,
//!   truncated and bit-flipped ones, sent at a later job with the same job
//!   key from its ranks' addresses (see [`replay`]); the job must pass.
//!
//! Prints a line per trial and a summary; fails when a job hangs, a result
//! check fails, or (kill) a survivor's error names another rank than the
//! one killed (with `--strict`, also when a survivor is late).

mod job;
mod kill;
mod netns;
mod nft;
mod replay;
mod report;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use job::{Job, JobSpec, LauncherVars, RankEnd};
use kill::Named;
use netns::Net;
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
    /// Ranks per job, one namespace each.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: u32,
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

/// What went wrong across the trials.
#[derive(Debug, Default)]
struct Tally {
    hangs: u32,
    failures: u32,
    wrong_rank: u32,
    late: u32,
}

/// Runs `outboard chaos`.
pub fn run(a: ChaosArgs) -> anyhow::Result<()> {
    if let Some(v) = a.victim {
        if v >= a.ranks {
            bail!("--victim {v} is not a rank of {}", a.ranks);
        }
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
    let net = Net::create("c", a.ranks).context("building the namespaces")?;
    println!(
        "# outboard chaos: {} ranks, one network namespace each (veth to a bridge, MTU 9000), {:?} variables + OUTBOARD_RENDEZVOUS; peer timeout {} ms; seed {seed}",
        a.ranks, a.launcher, a.peer_timeout_ms
    );
    let mut tally = Tally::default();
    let all = a.scenario == Scenario::All;
    if all || a.scenario == Scenario::Loss {
        loss(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    if all || a.scenario == Scenario::Kill {
        kills(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    if all || a.scenario == Scenario::Replay {
        replays(&a, &net, &programs, &mut rng, &mut tally)?;
    }
    println!("chaos: {} hangs, {} failed result checks, {} errors naming another rank, {} late survivors", tally.hangs, tally.failures, tally.wrong_rank, tally.late);
    if tally.hangs + tally.failures + tally.wrong_rank > 0 || (a.strict && tally.late > 0) {
        bail!("chaos found faults the job did not survive (seed {seed})");
    }
    Ok(())
}

fn spec(a: &ChaosArgs, p: &Programs, w: Workload, len: Length, job_key: u64, secret: Option<String>) -> JobSpec {
    let (program, args) = w.command(p, len);
    JobSpec { program, args, peer_timeout_ms: a.peer_timeout_ms, job_key, secret, launcher: a.launcher }
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
    let last = |t: &str| t.lines().rfind(|l| !l.starts_with("outboard stats") && !l.trim().is_empty()).map(str::to_string);
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

fn loss(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    let limit = Duration::from_secs_f64(a.job_limit);
    let (mut runs, mut bad) = (0, 0);
    for round in 0..a.trials {
        for &loss in &a.loss {
            let f = Faults { loss, dup: a.dup };
            for &w in &a.workloads {
                set_faults(net, f)?;
                let (secs, ends) = run_job(net, &spec(a, p, w, Length::Short, rng.gen(), None), limit)?;
                let (mut dropped, mut duplicated) = (0, 0);
                for ns in &net.ranks {
                    let (d, u) = nft::counted(ns)?;
                    dropped += d;
                    duplicated += u;
                }
                runs += 1;
                let (c, lines) = counters(&ends);
                let what = match verdict(&ends) {
                    None => format!("ok in {secs:.2} s"),
                    Some((hang, why)) => {
                        bad += 1;
                        if hang {
                            t.hangs += 1;
                        } else {
                            t.failures += 1;
                        }
                        why
                    }
                };
                println!(
                    "loss {}/{}: {loss}% loss, {}% dup, {}: {what} (nftables dropped {dropped}, duplicated {duplicated} datagrams; {})",
                    round + 1,
                    a.trials,
                    a.dup,
                    w.name(),
                    fmt_counters(&c, lines)
                );
            }
        }
    }
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    println!("loss summary: {runs} runs ({} workloads x loss {:?} % with {} % duplication x {} rounds), {bad} failed or hung", a.workloads.len(), a.loss, a.dup, a.trials);
    Ok(())
}

fn kills(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    let pt = Duration::from_millis(a.peer_timeout_ms);
    let margin = Duration::from_millis(a.margin_ms.unwrap_or(a.peer_timeout_ms / 4 + 500));
    let bound = (pt + margin).as_secs_f64();
    let cap = 4 * pt + Duration::from_secs(5);
    // How long each workload runs undisturbed: kills land uniformly within
    // it (a clean run also shows the set-up works).
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
        let victim = a.victim.unwrap_or_else(|| rng.gen_range(0..a.ranks));
        let at = match a.kill_at_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs_f64(rng.gen_range(0.0..secs.max(0.01))),
        };
        let o = kill::trial(net, &spec(a, p, w, Length::Long, rng.gen(), None), victim, at, cap)?;
        landed += u32::from(o.landed);
        let mut notes = Vec::new();
        for s in &o.survivors {
            let key = match s.named {
                Named::Victim => "named the killed rank",
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
                    if victim == 0 {
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
            "kill {}/{}: {}, rank {victim} {} at {:.3} s; survivors exit after [{}] s ({}){}",
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

fn random_secret(rng: &mut ChaCha8Rng) -> String {
    format!("{:016x}{:016x}", rng.gen::<u64>(), rng.gen::<u64>())
}

fn replays(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    let limit = Duration::from_secs_f64(a.job_limit);
    let header = outboard_wire::HEADER_LEN;
    let mut bad = 0;
    for i in 0..a.trials {
        let w = a.workloads[i as usize % a.workloads.len()];
        let job_key: u64 = rng.gen();
        let shared = random_secret(rng);
        let secret = |rng: &mut ChaCha8Rng| Some(if a.same_secret { shared.clone() } else { random_secret(rng) });
        // The first job, every datagram captured.
        let cap = replay::Capture::start(net)?;
        let (_, ends) = run_job(net, &spec(a, p, w, Length::Long, job_key, secret(rng)), limit)?;
        let old = cap.stop();
        if let Some((_, why)) = verdict(&ends) {
            bail!("replay: the first {} job failed without faults: {why}", w.name());
        }
        let old_ports = replay::ports(&old, a.ranks);
        // The second job, same key; once every rank's engine has sent
        // something its port is known, and the injection starts.
        let cap = replay::Capture::start(net)?;
        let injector = replay::Injector::open(net)?;
        let mut job = Job::start(net, &spec(a, p, w, Length::Long, job_key, secret(rng)))?;
        let deadline = job.started + limit;
        let new_ports = loop {
            let seen = cap.engine_ports(a.ranks);
            if seen.iter().all(Option::is_some) {
                break Some(seen.into_iter().flatten().collect::<Vec<u16>>());
            }
            if job.poll() || Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let Some(new_ports) = new_ports else {
            bail!("replay: the second {} job ended before every rank had sent a datagram", w.name());
        };
        let (plan, n) = replay::plan(&old, &old_ports, &new_ports, header, a.forged, rng);
        let mut while_running = 0;
        let sending = Instant::now();
        // Polling the ranks costs a system call each: once per batch.
        for batch in plan.chunks(32) {
            for d in batch {
                injector.send(d)?;
            }
            job.poll();
            if (0..a.ranks).all(|r| job.running(r)) {
                while_running += batch.len();
            }
        }
        let sent_in = sending.elapsed().as_secs_f64();
        job.wait_until(deadline);
        let ends = job.finish();
        drop(cap);
        let (c, lines) = counters(&ends);
        let total = plan.len();
        let what = match verdict(&ends) {
            // A job that ended before the datagrams reached it proves
            // nothing.
            None if while_running < total => {
                bad += 1;
                t.failures += 1;
                format!("INCONCLUSIVE: the job ended before {} of the datagrams were sent", total - while_running)
            }
            None => "ok: every result check passed".to_string(),
            Some((hang, why)) => {
                bad += 1;
                if hang {
                    t.hangs += 1;
                } else {
                    t.failures += 1;
                }
                why
            }
        };
        println!(
            "replay {}/{}: {}, {} secret: {} captured datagrams replayed + {} forged + {} truncated + {} bit-flipped (sent in {sent_in:.2} s, {while_running} while every rank ran): {what} ({})",
            i + 1,
            a.trials,
            w.name(),
            if a.same_secret { "same" } else { "fresh" },
            n.replayed,
            n.forged,
            n.truncated,
            n.flipped,
            fmt_counters(&c, lines)
        );
    }
    println!("replay summary: {} trials, {bad} failed or hung", a.trials);
    Ok(())
}
