//! `outboard bench atomics`: latency of the engines' atomic remote memory
//! operations (dissertation chapter 5), in the manner of OSU's
//! `osu_fop_latency` / `osu_cas_latency`: one rank issues an operation on a
//! word of the other's registered memory, waits for the old value, and
//! repeats; latency = time / iterations (a whole round trip, as OSU
//! reports for these).
//!
//! Two ranks in one process (threads, each with its own engine, socket and
//! port) over UDP on 127.0.0.1, like `bench pingpong`. The target's host
//! does nothing but let its engine run (it only drives it under
//! host-assisted progress). Forms: the value in the completion event, and
//! the paper's direct form (value and flag written into the initiator's
//! memory); beside them the host-based counterpart, a server thread at the
//! target serving requests sent as tagged messages
//! (`outboard_host::atomic_server`), waiting by polling, spinning then
//! blocking, or blocking. Each figure is the median of several rounds.
//!
//! Not measured yet: Open MPI's `MPI_Fetch_and_op` /
//! `MPI_Compare_and_swap`.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use anyhow::{anyhow, bail};
use outboard_engine::PortId;
use outboard_host::atomic_server::{AtomicServer, ServerWait};
use outboard_host::{AtomicOp, AtomicWidth, Port, RemoteWord};
use outboard_runtime::{machine_cores, Progress, RtPort};

use crate::stats::median;

/// Arguments of `outboard bench atomics`.
#[derive(clap::Args, Clone)]
pub struct AtomicArgs {
    /// Ranks; the benchmark is between two.
    #[arg(short = 'n', long, default_value_t = 2)]
    ranks: u32,
    /// Progress policy: dedicated, host-assisted or spin-then-block
    /// (default: OUTBOARD_PROGRESS, else chosen from this machine's cores).
    #[arg(long)]
    progress: Option<String>,
    /// Iterations per round.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    iters: u32,
    /// Rounds per figure; the median is printed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

/// The operations measured, as OSU names them: the word starts at 0 and a
/// CAS hit compares with 0 and writes 0 (so it hits every time), a miss
/// compares with 1.
const OPS: [(&str, AtomicOp); 4] = [
    ("fetch-add", AtomicOp::FetchAdd(1)),
    ("swap", AtomicOp::Swap(0)),
    ("cas-hit", AtomicOp::CompareSwap { compare: 0, new: 0 }),
    ("cas-miss", AtomicOp::CompareSwap { compare: 1, new: 2 }),
];

/// The columns: offloaded event and direct forms, then the host-based
/// server in each waiting mode.
const FORMS: [&str; 5] = ["event", "direct", "hb-poll", "hb-spinblk", "hb-block"];
const WAITS: [ServerWait; 3] = [ServerWait::Poll, ServerWait::SpinThenBlock { spins: 10_000 }, ServerWait::Block];

/// Times `iters` back-to-back operations, `rounds` times, per operation
/// and form: `[op][form]` -> seconds per round. `mode` tells the target's
/// server how to wait (the host-based forms).
fn measure(port: &mut Port<RtPort>, w: RemoteWord, mode: &AtomicU8, iters: u32, rounds: u32) -> anyhow::Result<Vec<[Vec<f64>; 5]>> {
    let warm = (iters / 10).max(10);
    // A fresh connection's first exchanges settle its retransmission
    // timer; without this the first row pays for it.
    for _ in 0..iters {
        port.atomic(w, AtomicOp::FetchAdd(0))?;
    }
    let mut out = Vec::new();
    for (_, op) in OPS {
        let mut forms: [Vec<f64>; 5] = Default::default();
        for (f, times) in forms.iter_mut().enumerate() {
            // The offloaded forms leave the server blocked: it must not
            // take the CPU from the engines they measure.
            mode.store(if f >= 2 { (f - 2) as u8 } else { 2 }, Ordering::SeqCst);
            let one = |port: &mut Port<RtPort>| -> anyhow::Result<()> {
                match f {
                    0 => {
                        port.atomic(w, op)?;
                    }
                    1 => {
                        let d = port.start_atomic_direct(w, op)?;
                        port.wait_direct(d)?;
                    }
                    _ => {
                        port.hb_atomic(w.ep, w.key, w.offset, w.width, op)?;
                    }
                }
                Ok(())
            };
            for _ in 0..warm {
                one(port)?;
            }
            for _ in 0..rounds {
                let t = Instant::now();
                for _ in 0..iters {
                    one(port)?;
                }
                times.push(t.elapsed().as_secs_f64());
            }
            // Fetch-add moved the word; the CAS rows expect it at 0.
            port.swap(w, 0)?;
        }
        out.push(forms);
    }
    Ok(out)
}

/// Runs `outboard bench atomics`.
pub fn run(a: AtomicArgs) -> anyhow::Result<()> {
    if a.ranks != 2 {
        bail!("bench atomics runs between 2 ranks (-n 2)");
    }
    let (progress, why) = match &a.progress {
        Some(p) => (Progress::parse(p)?, "set by --progress".to_string()),
        None => Progress::from_env(2)?,
    };
    let nodes = crate::bench::loopback_pair(progress, |_| {})?;
    let mut pa = Port::new(nodes[0].open_port(PortId(0))?);
    let mut pb = Port::new(nodes[1].open_port(PortId(0))?);
    let region = pb.buffer(64)?;
    let rkey = pb.register(region)?;
    let w = RemoteWord { ep: pb.endpoint(), key: rkey, offset: 8, width: AtomicWidth::W64 };
    // The target's thread is the host-based server; for the offloaded
    // forms it only waits (and so lets its engine run).
    let stop = Arc::new(AtomicBool::new(false));
    let mode = Arc::new(AtomicU8::new(2));
    let (tx, rx) = mpsc::channel();
    let target = {
        let (stop, mode) = (stop.clone(), mode.clone());
        std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut server = AtomicServer::new();
            server.expose(rkey, region);
            let stopped = || stop.load(Ordering::Relaxed);
            while !stopped() {
                let wait = WAITS[usize::from(mode.load(Ordering::SeqCst))];
                server.serve_one(&mut pb, wait, &stopped)?;
            }
            let _ = tx.send(pb);
            Ok(server.served)
        })
    };
    println!("# outboard bench atomics: 2 ranks (threads of one process), UDP over 127.0.0.1, {} cores", machine_cores());
    println!("# progress policy: {progress} ({why})");
    println!("# latency of one 64-bit atomic on the other rank's registered word, issued back to back (OSU fop/cas latency)");
    println!("# event: old value in the completion event; direct: old value and a flag written into the initiator's memory");
    println!("# hb-*: host-based, a server thread at the target performs it (requests and replies as tagged messages), waiting by polling / spinning 10,000 polls then blocking / blocking");
    println!("# each figure: median of {} rounds of {} operations", a.rounds, a.iters);
    let t = measure(&mut pa, w, &mode, a.iters, a.rounds);
    stop.store(true, Ordering::Relaxed);
    let served = target.join().map_err(|_| anyhow!("target thread panicked"))??;
    let pb = rx.recv()?;
    let t = t?;
    let mut head = format!("{:<12}", "# Operation");
    for f in FORMS {
        head += &format!("{:>16}", format!("{f} (us)"));
    }
    println!("{head}{:>12}", "hb/event");
    for ((name, _), forms) in OPS.iter().zip(&t) {
        let us = |v: &Vec<f64>| median(v) / f64::from(a.iters) * 1e6;
        let mut line = format!("{name:<12}");
        for v in forms {
            line += &format!("{:>16.2}", us(v));
        }
        // The best host-based figure against the offloaded event form (the
        // paper's 1.25x compares these).
        let best_hb = forms[2..].iter().map(us).fold(f64::INFINITY, f64::min);
        println!("{line}{:>12.2}", best_hb / us(&forms[0]));
    }
    print_mpi(a.iters, a.rounds);
    let (s, _) = nodes[1].stats();
    eprintln!(
        "# target engine: {} atomics executed, {} duplicates answered from the reply table, {} retransmits; host-based server: {served} served",
        s.atomics_executed, s.atomic_duplicates, s.retransmits
    );
    drop(pb);
    Ok(())
}

/// Open MPI's MPI-3 RMA figures for the same operations (`mpi_atomic.c`,
/// over the network: see `run_osc_program`), printed after Outboard's
/// table, or why they are missing.
fn print_mpi(iters: u32, rounds: u32) {
    let args = [iters.to_string(), rounds.to_string()];
    let so = match crate::bench_coll::run_osc_program("mpi_atomic.c", include_str!("mpi_atomic.c"), "ob_mpi_atomic", 2, &args) {
        Ok(so) => so,
        Err(why) => {
            println!("# Open MPI: {why}");
            return;
        }
    };
    println!("# Open MPI: MPI_Fetch_and_op / MPI_Compare_and_swap, passive target (lock_all, flush per operation), osc pt2pt over btl tcp; lock = uncontended MPI_Win_lock(EXCLUSIVE) + unlock");
    println!("{:<12}{:>16}", "# Operation", "ompi (us)");
    for line in so.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let ["@", op, "mpi", us] = f[..] {
            println!("{op:<12}{us:>16}");
        }
    }
}
