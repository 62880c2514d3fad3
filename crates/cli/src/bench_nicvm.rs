//! `outboard bench nicvm -n N`: the NICVM paper's Figure 2 module broadcast
//! beside the engine's built-in offloaded broadcast and a host-based one,
//! across real processes, in one run.
//!
//! The command launches `outboard run -n N` of this binary in worker mode.
//! Every rank loads the module (compiled and verified in the process, the
//! bytecode verified again by its engine); per size, the three broadcasts
//! alternate iteration by iteration (so noise on a shared machine hits them
//! alike), each followed by an untimed barrier (as OSU's `osu_bcast`: a
//! root returns before its receivers have the data). Each rank times its
//! own part of every broadcast; a figure is the median of a rank's samples,
//! averaged over the ranks. Every rank checks every broadcast's bytes, and
//! at the end that its module ran once per module broadcast with no error.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use outboard_host::nicvm::LoadOptions;
use outboard_host::{BarrierAlgorithm, BcastMode, Mode, TreeShape};

use crate::stats::median;

const BCAST: &str = include_str!("../../nicvm/modules/bcast.nvm");
const MODES: [&str; 3] = ["module", "offloaded", "host"];

/// Arguments of `outboard bench nicvm`.
#[derive(clap::Args, Clone)]
pub struct NicvmArgs {
    /// Ranks (processes on this machine), spelled as in the other
    /// benchmarks and `outboard run`.
    #[arg(short = 'n', long = "np", alias = "ranks", default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: u32,
    /// Message sizes in bytes, comma-separated, with optional K suffixes
    /// (at most one packet: 4K by default).
    #[arg(long, value_delimiter = ',', default_value = "32,1024,4096", value_parser = crate::bench_coll::parse_bytes)]
    sizes: Vec<u32>,
    /// Timed broadcasts per size and mode.
    #[arg(long, default_value_t = 200)]
    iters: u32,
    /// Untimed broadcasts first.
    #[arg(long, default_value_t = 20)]
    warmup: u32,
    /// Seconds before the job is killed.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// (internal) run as one rank of the job.
    #[arg(long, hide = true)]
    worker: bool,
}

fn data(size: u32, k: u32) -> Vec<u8> {
    (0..size).map(|i| (i.wrapping_mul(13) ^ k) as u8).collect()
}

/// One rank: times every case, prints `@nicvm SIZE MODE MEDIAN_US`.
fn worker(a: &NicvmArgs) -> anyhow::Result<()> {
    let mut world = outboard_runtime::init()?;
    let r = worker_cases(a, &mut world);
    if let Err(e) = r {
        bail!(world.failure_report(&*e));
    }
    world.finalize()?;
    Ok(())
}

fn worker_cases(a: &NicvmArgs, world: &mut outboard_runtime::World) -> Result<(), Box<dyn std::error::Error>> {
    let rank = world.rank();
    let mut g = world.group()?;
    let port = world.port();
    let m = port.nicvm_load(&mut g, "bcast", BCAST, LoadOptions::default())?;
    let barrier = |port: &mut outboard_host::Port<outboard_runtime::RtPort>, g: &mut outboard_host::Group| {
        port.barrier(g, Mode::Offloaded, BarrierAlgorithm::Dissemination)
    };
    barrier(port, &mut g)?;
    let mut module_runs = 0u64;
    for &size in &a.sizes {
        let mut samples: [Vec<f64>; 3] = Default::default();
        for it in 0..a.warmup + a.iters {
            for (mi, mode) in MODES.iter().enumerate() {
                let want = data(size, it * 3 + mi as u32);
                let start = Instant::now();
                let got = match *mode {
                    "module" => {
                        module_runs += 1;
                        if rank == 0 {
                            if port.nicvm_send(&mut g, &m, 0, 0, &want)? {
                                return Err("the root's module failed".into());
                            }
                            want.clone()
                        } else {
                            let d = port.nicvm_recv(&m, size.max(1))?;
                            if d.failed {
                                return Err(format!("rank {rank}: a module failed on the way").into());
                            }
                            d.data
                        }
                    }
                    "offloaded" => port.bcast(&mut g, BcastMode::Offloaded, TreeShape::Binomial, 0, &want)?,
                    _ => port.bcast(&mut g, BcastMode::HostBased, TreeShape::Binomial, 0, &want)?,
                };
                let us = start.elapsed().as_secs_f64() * 1e6;
                if got != want {
                    return Err(format!("rank {rank}: {mode} broadcast of {size} B delivered other bytes").into());
                }
                if it >= a.warmup {
                    samples[mi].push(us);
                }
                barrier(port, &mut g)?;
            }
        }
        for (mi, mode) in MODES.iter().enumerate() {
            println!("@nicvm {size} {mode} {:.3}", median(&samples[mi]));
        }
    }
    let rep = port.nicvm_list()?.into_iter().find(|r| r.name == "bcast").ok_or("the module is gone")?;
    if rep.invocations != module_runs || rep.errors() != 0 {
        return Err(format!("rank {rank}: module report {rep:?}").into());
    }
    println!("@instr {}", rep.instructions);
    Ok(())
}

/// `outboard bench nicvm`.
pub fn run(a: NicvmArgs) -> anyhow::Result<()> {
    if a.worker {
        return worker(&a);
    }
    if let Some(s) = a.sizes.iter().find(|&&s| s > 4096) {
        bail!("--sizes: {s} B is more than one module packet (4,096 B)");
    }
    let exe = std::env::current_exe().context("finding the outboard binary")?;
    let sizes = a.sizes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let out = Command::new(&exe)
        .args(["run", "-n", &a.ranks.to_string(), "--timeout", &a.timeout.to_string(), "--"])
        .arg(&exe)
        .args(["bench", "nicvm", "--worker", &format!("--sizes={sizes}"), &format!("--iters={}", a.iters), &format!("--warmup={}", a.warmup)])
        .stdin(Stdio::null())
        .output()
        .context("starting the benchmark job")?;
    let so = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("the {}-rank job failed:\n{so}{}", a.ranks, String::from_utf8_lossy(&out.stderr));
    }
    // (size, mode) -> per-rank medians.
    let mut figs: std::collections::BTreeMap<(u32, &str), Vec<f64>> = Default::default();
    let mut instr = 0u64;
    for l in so.lines() {
        let mut w = l.split_whitespace().skip_while(|w| !w.starts_with('@'));
        match w.next() {
            Some("@nicvm") => {
                let (Some(size), Some(mode), Some(us)) = (w.next(), w.next(), w.next()) else { continue };
                let Some(mode) = MODES.iter().copied().find(|m| *m == mode) else { continue };
                figs.entry((size.parse()?, mode)).or_default().push(us.parse()?);
            }
            Some("@instr") => instr += w.next().unwrap_or("0").parse::<u64>()?,
            _ => {}
        }
    }
    println!("bench nicvm: broadcast from rank 0 to {} ranks, {} iterations, median per rank averaged over ranks (us)", a.ranks, a.iters);
    println!("{:>8} {:>12} {:>12} {:>12} {:>14}", "bytes", "module", "offloaded", "host", "host/module");
    for &size in &a.sizes {
        let avg = |mode| figs.get(&(size, mode)).map(|v| v.iter().sum::<f64>() / v.len() as f64);
        let (Some(m), Some(o), Some(h)) = (avg("module"), avg("offloaded"), avg("host")) else { bail!("missing figures for {size} B") };
        println!("{size:>8} {m:>12.1} {o:>12.1} {h:>12.1} {:>14.2}", h / m);
    }
    println!("module: Figure 2 binary tree (engines forward); offloaded: the engine's binomial broadcast; host: host-based binomial");
    println!("VM instructions executed by the module, all ranks: {instr}");
    Ok(())
}
