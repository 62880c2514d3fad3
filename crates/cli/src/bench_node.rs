//! `outboard bench pingpong --ranks-per-node R`: the two ranks as a real
//! job of `outboard run` with node engines, so the figures are what a
//! program of the job pays: each rank a process attached to its node's
//! engine process through a port, both ranks on one node (R = 2: the
//! engine moves messages between its own ports, no datagram) or on two
//! (R = 1: two engines, UDP over loopback between them).
//!
//! The parent starts `outboard run -n 2 --ranks-per-node R -- outboard
//! bench pingpong --worker ...`; rank 0 runs the ping and stream half of
//! the plan and prints its times, rank 1 the pong and sink half; both
//! print their copy counters. The parent reads rank 0's and rank 1's
//! lines (`outboard run` prefixes them `[0] ` and `[1] `), and with
//! `OUTBOARD_STATS=stderr` shows each node engine's datagram counts.

use anyhow::{bail, Context};

use crate::bench::{plan, run_a, run_b, Copies, EngineSide, Measured, PingpongArgs, Step};

/// Runs the job and gathers what its two ranks measured.
pub(crate) fn job(args: &PingpongArgs, ranks_per_node: u32, steps: &[Step]) -> anyhow::Result<Measured> {
    let launcher = ["-n", "2", "--ranks-per-node", &ranks_per_node.to_string()].map(String::from);
    let worker = ["bench", "pingpong", "--worker", "--max-size", &args.max_size.to_string(), "--rounds", &args.rounds.to_string(), "--scale", &args.scale.to_string()]
        .map(String::from);
    let (so, se) = crate::bench_job::run(&launcher, &worker, "the benchmark job")?;
    // With OUTBOARD_STATS=stderr, each node engine's traffic: on one node
    // the ranks' messages are packets between its ports, no datagram.
    for l in se.lines().filter(|l| l.contains("node engine") && l.contains("datagrams")) {
        println!("# {l}");
    }
    let times = lines(&so, "[0] time ")?;
    let copies_a = copies(&lines(&so, "[0] copies ")?);
    let copies_b = copies(&lines(&so, "[1] copies ")?);
    if times.len() != steps.len() || copies_a.len() != steps.len() || copies_b.len() != steps.len() {
        bail!("the benchmark job printed {} of {} steps:\n{so}", times.len(), steps.len());
    }
    let copies = copies_a.into_iter().zip(copies_b).map(|((ao, ai), (bo, bi))| (ao + bo, ai + bi)).collect();
    Ok(Measured { times, copies })
}

/// The numbers of every line of `text` that starts with `prefix`.
fn lines(text: &str, prefix: &str) -> anyhow::Result<Vec<Vec<f64>>> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| rest.split_whitespace().map(|w| w.parse::<f64>().with_context(|| format!("bad number {w:?} in {rest:?}"))).collect())
        .collect()
}

fn copies(v: &[Vec<f64>]) -> Copies {
    v.iter().map(|c| (c.first().copied().unwrap_or(0.0) as u64, c.get(1).copied().unwrap_or(0.0) as u64)).collect()
}

/// One rank of the job: joins it, runs its half of the plan on its port.
pub(crate) fn rank(args: &PingpongArgs) -> anyhow::Result<()> {
    let steps = plan(args);
    let mut world = outboard_runtime::init()?;
    let (rank, size) = (world.rank(), world.size());
    if size != 2 {
        bail!("the ping-pong job has 2 ranks, not {size}");
    }
    let peer = world.endpoint(1 - rank);
    let mut side = EngineSide::new(world.port(), peer, args.max_size as usize)?;
    let copies = if rank == 0 {
        let (times, copies) = run_a(&mut side, &steps, args.rounds)?;
        for t in times {
            println!("time {}", t.iter().map(f64::to_string).collect::<Vec<_>>().join(" "));
        }
        copies
    } else {
        run_b(&mut side, &steps, args.rounds)?
    };
    for (o, i) in copies {
        println!("copies {o} {i}");
    }
    world.finalize()?;
    Ok(())
}
