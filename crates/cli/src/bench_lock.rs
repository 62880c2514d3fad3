//! `outboard bench lock`: the MCS queue lock of dissertation 5.3 over the
//! engines' atomics and over host-based atomic servers (5.4.2), and the
//! home-node utilisation test of 5.4.3.
//!
//! `-n N` ranks, threads of one process each with its own engine, socket
//! and port, over UDP on 127.0.0.1 (like `bench atomics`). The lock's home
//! is rank 0, which does not contend. Every rank also runs an atomic
//! server thread on port 1 (`outboard_host::atomic_server`) for the
//! host-based forms; for the offloaded form it stays blocked.
//!
//! Latency: ranks 1..=c (c = 1 .. N-1) lock and unlock back to back; the
//! figure is rank 1's mean lock+unlock time over `iters` cycles (median of
//! `rounds`). Utilisation: rank 0 counts loop iterations for 1,000 us
//! while rank 1 locks and unlocks with a delay after each; the figure is
//! rank 0's count against the lock rate, offloaded and host-based (server
//! blocking), beside the idle count.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use outboard_engine::{Endpoint, EngineConfig, NodeId, PortId};
use outboard_host::atomic_server::{AtomicServer, ServerWait};
use outboard_host::lock::McsLock;
use outboard_host::Port;
use outboard_runtime::{bind_udp, machine_cores, random_u64, Node, Progress, RtPort};

use crate::stats::median;

/// Arguments of `outboard bench lock`.
#[derive(clap::Args, Clone)]
pub struct LockArgs {
    /// Ranks (the home and up to N-1 contenders).
    #[arg(short = 'n', long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: u32,
    /// Progress policy (default: OUTBOARD_PROGRESS, else from the cores).
    #[arg(long)]
    progress: Option<String>,
    /// Lock+unlock cycles of rank 1 per round.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    iters: u32,
    /// Rounds per figure; the median is printed.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Delays (us) after each lock and each unlock in the utilisation test.
    #[arg(long, value_delimiter = ',', default_values_t = [0u32, 20, 100, 500])]
    delays: Vec<u32>,
}

/// The forms: offloaded, then host-based with the server polling (an SMP
/// kernel's choice) and blocking (a uniprocessor's).
const FORMS: [&str; 3] = ["offloaded", "hb-poll", "hb-block"];
const WAITS: [ServerWait; 3] = [ServerWait::Poll, ServerWait::Block, ServerWait::Block];

/// One rank: its lock (offloaded and host-based views) and its port.
struct Rank {
    port: Port<RtPort>,
    nic: McsLock,
    hb: McsLock,
}

impl Rank {
    fn cycle(&mut self, form: usize, delay: Duration) -> anyhow::Result<()> {
        let lock = if form == 0 { &mut self.nic } else { &mut self.hb };
        lock.acquire(&mut self.port)?;
        spin(delay);
        lock.release(&mut self.port)?;
        spin(delay);
        Ok(())
    }
}

fn spin(d: Duration) {
    if d.is_zero() {
        return;
    }
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Iterations of a counting loop in `d` (5.4.3's counter process).
fn count_for(d: Duration) -> u64 {
    let t = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..64 {
            n = std::hint::black_box(n + 1);
        }
        if t.elapsed() >= d {
            return n;
        }
    }
}

/// Runs `outboard bench lock`.
pub fn run(a: LockArgs) -> anyhow::Result<()> {
    let n = a.ranks as usize;
    let (progress, why) = match &a.progress {
        Some(p) => (Progress::parse(p)?, "set by --progress".to_string()),
        None => Progress::from_env(2 * n)?,
    };
    let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let sockets = (0..n).map(|_| bind_udp(ip)).collect::<Result<Vec<_>, _>>()?;
    let addrs: Vec<_> = sockets.iter().map(|s| s.local_addr()).collect::<Result<_, _>>()?;
    let (key, secret) = (random_u64(), outboard_runtime::random_secret()?);
    let mut nodes = Vec::new();
    for (i, s) in sockets.into_iter().enumerate() {
        let mut c = EngineConfig::new(NodeId(i as u32), key, random_u64());
        c.secret = secret.clone();
        outboard_runtime::udp_engine_defaults(&mut c);
        nodes.push(Node::start(c, s, &addrs, progress)?);
    }
    // Every rank's words, and its server on port 1 exposing them.
    let stop = Arc::new(AtomicBool::new(false));
    let mode = Arc::new(AtomicU8::new(2));
    let mut prepared = Vec::new();
    let mut servers = Vec::new();
    for node in &nodes {
        let mut port = Port::new(node.open_port(PortId(0))?);
        let (words, wkey, slot) = McsLock::prepare(&mut port)?;
        let mut sp = Port::new(node.open_port(PortId(1))?);
        let server_ep = sp.endpoint();
        let (stop, mode) = (stop.clone(), mode.clone());
        servers.push((
            server_ep,
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let mut s = AtomicServer::new();
                s.expose(wkey, words);
                let stopped = || stop.load(Ordering::Relaxed);
                while !stopped() {
                    s.serve_one(&mut sp, WAITS[usize::from(mode.load(Ordering::SeqCst))], &stopped)?;
                }
                Ok(s.served)
            }),
        ));
        prepared.push((port, words, wkey, slot));
    }
    let table: Vec<_> = prepared.iter().map(|p| p.3).collect();
    let server_eps: Vec<Endpoint> = servers.iter().map(|s| s.0).collect();
    let mut ranks = Vec::new();
    for (r, (port, words, wkey, _)) in prepared.into_iter().enumerate() {
        let nic = McsLock::from_table(table.clone(), r as u32, 0, words, wkey)?;
        let hb = McsLock::from_table(table.clone(), r as u32, 0, words, wkey)?.over_servers(server_eps.clone())?;
        ranks.push(Rank { port, nic, hb });
    }
    println!("# outboard bench lock: {n} ranks (threads of one process), UDP over 127.0.0.1, {} cores", machine_cores());
    println!("# progress policy: {progress} ({why})");
    println!("# MCS lock (dissertation 5.3), home rank 0 (not contending); rank 1's lock+unlock time with ranks 1..c contending");
    println!("# offloaded: the engines' atomics; hb-poll / hb-block: a server thread per rank (polling / blocking) performs them");
    println!("# each figure: median of {} rounds of {} cycles of rank 1", a.rounds, a.iters);
    let mut head = format!("{:<14}", "# Contenders");
    for f in FORMS {
        head += &format!("{:>16}", format!("{f} (us)"));
    }
    println!("{head}{:>12}", "hb/offl");
    let result = (|| -> anyhow::Result<()> {
        for c in 1..n {
            let mut line = format!("{c:<14}");
            let mut figs = [0.0; 3];
            for (form, fig) in figs.iter_mut().enumerate() {
                mode.store(if form == 0 { 2 } else { form as u8 - 1 }, Ordering::SeqCst);
                let mut times = Vec::new();
                for _ in 0..a.rounds {
                    times.push(contend(&mut ranks, c, form, a.iters, Duration::ZERO)?);
                }
                *fig = median(&times) * 1e6;
                line += &format!("{:>16.2}", *fig);
            }
            println!("{line}{:>12.2}", figs[1].min(figs[2]) / figs[0]);
        }
        // 5.4.3: the home's counter against rank 1's lock rate.
        println!("# utilisation: iterations rank 0 counts in 1,000 us while rank 1 locks and unlocks with a delay after each (median of {} windows)", a.rounds);
        let idle: Vec<f64> = (0..a.rounds).map(|_| count_for(Duration::from_micros(1000)) as f64).collect();
        println!("# idle: {:.0} iterations", median(&idle));
        println!("{:<12}{:>14}{:>18}{:>14}{:>18}", "# Delay (us)", "offl (1/ms)", "offl (iters)", "hb (1/ms)", "hb-block (iters)");
        for &d in &a.delays {
            let mut line = format!("{d:<12}");
            for form in [0usize, 2] {
                mode.store(if form == 0 { 2 } else { 1 }, Ordering::SeqCst);
                let (rate, iters) = utilisation(&mut ranks, form, Duration::from_micros(u64::from(d)), a.rounds)?;
                line += &format!("{rate:>14.1}{iters:>18.0}");
            }
            println!("{line}");
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    let mut served = 0;
    for (_, h) in servers {
        served += h.join().map_err(|_| anyhow!("server thread panicked"))??;
    }
    result?;
    let (s, _) = nodes[0].stats();
    eprintln!("# home engine: {} atomics executed, {} retransmits; host-based servers: {served} served", s.atomics_executed, s.retransmits);
    drop(ranks);
    print_mpi(n as u32, a.iters, a.rounds);
    Ok(())
}

/// Open MPI's exclusive window lock at rank 0 with the same contenders
/// (`mpi_lock.c`; passive target, `osc pt2pt` over `btl tcp` so the lock
/// travels the network as Outboard's does), or why it is missing.
/// OpenSHMEM's `shmem_set_lock` is not measured: Debian's Open MPI 4.1.4
/// ships `oshcc`/`oshrun`, but its oshmem crashes here (a segmentation
/// fault in `shmem_finalize` with 2 PEs, mid-run with 3) and runs over
/// UCX shared memory, not a network path.
fn print_mpi(n: u32, iters: u32, rounds: u32) {
    let args = [iters.to_string(), rounds.to_string()];
    let so = match crate::bench_coll::run_osc_program("mpi_lock.c", include_str!("mpi_lock.c"), "ob_mpi_lock", n, &args) {
        Ok(so) => so,
        Err(why) => {
            println!("# Open MPI: {why}");
            return;
        }
    };
    println!("# Open MPI: MPI_Win_lock(MPI_LOCK_EXCLUSIVE) + MPI_Win_unlock at rank 0, osc pt2pt over btl tcp; rank 1's time per cycle");
    println!("{:<14}{:>16}", "# Contenders", "ompi (us)");
    for line in so.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let ["@", "lock", c, "mpi", us] = f[..] {
            println!("{c:<14}{us:>16}");
        }
    }
}

/// Ranks 1..=c lock and unlock; returns rank 1's mean seconds per cycle
/// over `iters` cycles (the others keep going until rank 1 is done).
fn contend(ranks: &mut Vec<Rank>, c: usize, form: usize, iters: u32, delay: Duration) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(c));
    let mut taken: Vec<Rank> = ranks.drain(1..=c).collect();
    let mut handles = Vec::new();
    for (i, mut r) in taken.drain(..).enumerate() {
        let (done, start) = (done.clone(), start.clone());
        handles.push(std::thread::spawn(move || -> (Rank, anyhow::Result<f64>) {
            start.wait();
            let t = Instant::now();
            let mut k = 0u32;
            let res = loop {
                if i == 0 && k == iters {
                    done.store(true, Ordering::SeqCst);
                    break Ok(t.elapsed().as_secs_f64() / f64::from(iters));
                }
                if i != 0 && done.load(Ordering::SeqCst) {
                    break Ok(0.0);
                }
                if let Err(e) = r.cycle(form, delay) {
                    done.store(true, Ordering::SeqCst);
                    break Err(e);
                }
                k += 1;
            };
            (r, res)
        }));
    }
    let mut out = Ok(0.0);
    let mut back = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let (r, res) = h.join().map_err(|_| anyhow!("contender panicked"))?;
        back.push(r);
        match res {
            Err(e) => out = Err(e),
            Ok(v) if i == 0 => out = out.map(|_| v),
            Ok(_) => {}
        }
    }
    let rest = ranks.split_off(1);
    ranks.extend(back);
    ranks.extend(rest);
    if ranks.iter().any(|r| r.nic.is_held() || r.hb.is_held()) {
        bail!("a lock is still held after the run");
    }
    out
}

/// Rank 1 locks and unlocks with `delay` after each while rank 0 counts
/// for 1,000 us, `rounds` times; returns rank 1's rate (cycles per ms) and
/// rank 0's median count.
fn utilisation(ranks: &mut Vec<Rank>, form: usize, delay: Duration, rounds: u32) -> anyhow::Result<(f64, f64)> {
    let done = Arc::new(AtomicBool::new(false));
    if ranks.len() < 2 {
        bail!("the utilisation test needs 2 ranks");
    }
    let rank1 = ranks.remove(1);
    let d2 = done.clone();
    let h = std::thread::spawn(move || -> (Rank, anyhow::Result<(u64, f64)>) {
        let mut r = rank1;
        let t = Instant::now();
        let mut k = 0u64;
        let res = loop {
            if d2.load(Ordering::SeqCst) {
                break Ok((k, t.elapsed().as_secs_f64()));
            }
            if let Err(e) = r.cycle(form, delay) {
                break Err(e);
            }
            k += 1;
        };
        (r, res)
    });
    // Let the locker get going, then count.
    std::thread::sleep(Duration::from_millis(5));
    let counts: Vec<f64> = (0..rounds).map(|_| count_for(Duration::from_micros(1000)) as f64).collect();
    done.store(true, Ordering::SeqCst);
    let (r, res) = h.join().map_err(|_| anyhow!("locker panicked"))?;
    ranks.insert(1, r);
    let (k, secs) = res?;
    Ok((k as f64 / secs / 1000.0, median(&counts)))
}
