//! `outboard bench skew`: process skew measured for real (dissertation
//! 6.3's method on this machine). Before each broadcast or reduce every
//! rank busy-waits a random 0..max microseconds, then calls; the figure is
//! the mean time a rank spends inside the call, averaged over the ranks,
//! with the handler's total time per call beside it for the
//! application-bypass columns (the time the chapter's Figure 6.5 adds).
//!
//! Columns: offloaded (the engines run the tree), application bypass with
//! signal delivery and with a progress thread (`outboard_host::bypass`,
//! `outboard_runtime::interrupt`), host-based (the tree advances only
//! inside the library), and Open MPI's `MPI_Bcast` / `MPI_Reduce` over TCP
//! (`mpi_skew.c`, the same loop). An untimed barrier precedes every call,
//! as the chapter's benchmark did (a bypass barrier - reduce to rank 0,
//! then broadcast - which also moves what a non-root's reduce left to its
//! handler, then the offloaded one, whose ranks leave together). Every broadcast's bytes and every
//! reduce's result are checked.
//!
//! The parent also measures the cost of one interrupt in the signal form:
//! `tgkill` to the handler's entry on a busy thread, and a signal to
//! oneself (send, delivery, handler entry and return).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use outboard_engine::{Datatype, Endpoint, GroupId, PortId, ReduceOp, Reduction};
use outboard_host::bypass::{Bypass, BypassStats};
use outboard_host::{BarrierAlgorithm, BcastMode, Mode, Port, RecvMatch, TreeShape};
use outboard_runtime::interrupt::{deliver_by_signal, deliver_by_thread, measure_signal_cost};
use outboard_runtime::{Options, Progress, World};

/// Arguments of `outboard bench skew`.
#[derive(clap::Args, Clone, Debug)]
pub struct SkewArgs {
    /// Ranks (processes on this machine). Application bypass needs inner
    /// members: at least 3.
    #[arg(short = 'n', long = "np", default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: u32,
    /// Bytes broadcast, and reduced (i64 sums; a multiple of 8), at most
    /// 16 KiB (application bypass is eager only).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(8..=16384))]
    size: u32,
    /// Calls per operation, skew and column.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Maximum skews in microseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,200,1000")]
    skews: Vec<u64>,
    /// Progress policy (default spin-then-block: signal delivery needs an
    /// engine thread; host-assisted leaves the signal column empty).
    #[arg(long)]
    progress: Option<String>,
    /// Seed of the random waits.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Leave Open MPI out.
    #[arg(long)]
    no_mpi: bool,
    /// Seconds the job may take.
    #[arg(long, default_value_t = 900.0)]
    timeout: f64,
    /// Internal: one rank of the job.
    #[arg(long, hide = true)]
    worker: bool,
}

/// The columns, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Offloaded,
    Signal,
    Thread,
    Host,
}

const COLS: [Col; 4] = [Col::Offloaded, Col::Signal, Col::Thread, Col::Host];
const OPS: [&str; 2] = ["bcast", "reduce"];
const SUM_I64: Reduction = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
const TAG_GATHER: u64 = 0x0b_5e37;

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::Offloaded => "offloaded",
            Col::Signal => "bypass-signal",
            Col::Thread => "bypass-thread",
            Col::Host => "host-based",
        }
    }
}

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The root's broadcast value of call `i`.
fn bcast_value(size: u32, i: u32) -> Vec<u8> {
    (0..size).map(|k| (k.wrapping_mul(31).wrapping_add(i)) as u8).collect()
}

fn contribution(rank: u32, size: u32, i: u32) -> Vec<u8> {
    (0..size / 8).flat_map(|k| (i64::from(rank) * 1000 + i64::from(k) + i64::from(i)).to_ne_bytes()).collect()
}

fn reduced(n: u32, size: u32, i: u32) -> Vec<u8> {
    (0..size / 8)
        .flat_map(|k| (0..n).map(|r| i64::from(r) * 1000 + i64::from(k) + i64::from(i)).sum::<i64>().to_ne_bytes())
        .collect()
}

/// Every rank's endpoint of port `mine.port`, through rank 0.
fn allgather_endpoints(world: &mut World, mine: Endpoint) -> anyhow::Result<Vec<Endpoint>> {
    let (rank, n) = (world.rank(), world.size());
    let enc = |e: Endpoint| [u64::from(e.node.0), u64::from(e.port.0), u64::from(e.gen)].map(u64::to_le_bytes).concat();
    let dec = |b: &[u8]| {
        let w = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Endpoint { node: outboard_engine::NodeId(w(0) as u32), port: PortId(w(1) as u8), gen: w(2) as u32 }
    };
    if rank == 0 {
        let mut all = vec![mine];
        for r in 1..n {
            let ep = world.endpoint(r);
            let (_, _, b) = world.port().recv(RecvMatch::from(ep.node, ep.port, TAG_GATHER), 24)?;
            all.push(dec(&b));
        }
        let bytes: Vec<u8> = all.iter().flat_map(|&e| enc(e)).collect();
        for r in 1..n {
            let ep = world.endpoint(r);
            world.port().send(ep, TAG_GATHER, &bytes)?;
        }
        Ok(all)
    } else {
        let root = world.endpoint(0);
        world.port().send(root, TAG_GATHER, &enc(mine))?;
        let (_, _, b) = world.port().recv(RecvMatch::from(root.node, root.port, TAG_GATHER), 24 * n)?;
        Ok(b.chunks_exact(24).map(dec).collect())
    }
}

/// One rank: every skew, operation and column; figures gathered at rank 0,
/// which prints `@ OP COL SKEW MEAN_US HANDLER_US` lines.
fn worker(a: &SkewArgs) -> anyhow::Result<()> {
    let mut opts = Options::from_env()?;
    opts.progress = Some(match &a.progress {
        Some(p) => Progress::parse(p)?,
        None => Progress::SPIN_THEN_BLOCK,
    });
    let mut world = outboard_runtime::init_with(opts)?;
    let (rank, n) = (world.rank(), world.size());
    let mut g = world.group()?;
    let node = world.node().ok_or_else(|| anyhow::anyhow!("the skew benchmark opens a second port on its own engine: run it with OUTBOARD_ENGINE=process"))?;
    let bport = Port::new(node.open_port(PortId(1))?);
    let members = allgather_endpoints(&mut world, bport.endpoint())?;
    let bypass = Arc::new(Bypass::new(bport, members, rank, GroupId(0x5e), 8)?);
    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(rank) + 1) << 20);
    let mut mine: Vec<f64> = Vec::new();
    for &skew in &a.skews {
        for op in OPS {
            for col in COLS {
                let _sig = match col {
                    Col::Signal => match deliver_by_signal(&bypass) {
                        Ok(g) => Some(g),
                        Err(e) => {
                            if rank == 0 {
                                eprintln!("# bypass-signal skipped: {e}");
                            }
                            mine.extend([f64::NAN, f64::NAN]);
                            continue;
                        }
                    },
                    _ => None,
                };
                let _thr = if col == Col::Thread { Some(deliver_by_thread(&bypass)?) } else { None };
                let before: BypassStats = bypass.stats();
                let mut total = 0.0;
                for i in 0..a.iters {
                    // First through the bypass port (a barrier on the world's
                    // port alone would not move a reduce a non-root left to
                    // its handler), then the world's offloaded barrier, whose
                    // ranks leave together (the bypass one lets its root go
                    // first).
                    bypass.barrier()?;
                    bypass.exclusive(|| world.port().barrier(&mut g, Mode::Offloaded, BarrierAlgorithm::Dissemination))?;
                    busy(Duration::from_micros(rng.below(skew + 1)));
                    let want = bcast_value(a.size, i);
                    let data = contribution(rank, a.size, i);
                    let (dt, got) = match col {
                        Col::Offloaded | Col::Host => {
                            let (bmode, mode) = if col == Col::Offloaded { (BcastMode::Offloaded, Mode::Offloaded) } else { (BcastMode::HostBased, Mode::HostBased) };
                            bypass.exclusive(|| -> anyhow::Result<(f64, Vec<u8>)> {
                                let t = Instant::now();
                                let got = if op == "bcast" {
                                    let v = if rank == 0 { want.clone() } else { vec![0; a.size as usize] };
                                    world.port().bcast(&mut g, bmode, TreeShape::Binomial, 0, &v)?
                                } else {
                                    world.port().reduce(&mut g, mode, TreeShape::Binomial, 0, SUM_I64, &data)?
                                };
                                Ok((t.elapsed().as_secs_f64(), got))
                            })?
                        }
                        Col::Signal | Col::Thread => {
                            let t = Instant::now();
                            if op == "bcast" {
                                let mut v = if rank == 0 { want.clone() } else { vec![0; a.size as usize] };
                                bypass.bcast(0, &mut v)?;
                                (t.elapsed().as_secs_f64(), v)
                            } else {
                                let mut out = vec![0; a.size as usize];
                                bypass.reduce(0, SUM_I64, &data, &mut out)?;
                                (t.elapsed().as_secs_f64(), out)
                            }
                        }
                    };
                    total += dt;
                    let ok = if op == "bcast" { got == want } else { rank != 0 || got == reduced(n, a.size, i) };
                    if !ok {
                        bail!("rank {rank}: {} {op} {i} at skew {skew} delivered a wrong value", col.name());
                    }
                }
                bypass.quiesce()?;
                let after = bypass.stats();
                let handler_ns = (after.handler_ns - before.handler_ns) as f64;
                mine.push(total / f64::from(a.iters) * 1e6);
                mine.push(handler_ns / 1e3 / f64::from(a.iters));
            }
        }
    }
    let (st, _) = bypass.with_io(|io| io.stats());
    let bs = bypass.stats();
    eprintln!(
        "# rank {rank}: {} marked messages delivered, {} interrupts raised, {} suppressed (flag off: inside the library); handler ran {} times, found the library busy {} times; {} values forwarded, {} contributions combined, {} slots added",
        st.marked_delivered, st.interrupts_raised, st.interrupts_suppressed, bs.handler_runs, bs.handler_busy, bs.forwarded, bs.combined, bs.slots_added
    );
    let bytes: Vec<u8> = mine.iter().flat_map(|x| x.to_le_bytes()).collect();
    bypass.exclusive(|| -> anyhow::Result<()> {
        if rank == 0 {
            let mut sum = mine.clone();
            for r in 1..n {
                let ep = world.endpoint(r);
                let (_, _, got) = world.port().recv(RecvMatch::from(ep.node, ep.port, TAG_GATHER), bytes.len() as u32)?;
                for (s, c) in sum.iter_mut().zip(got.chunks_exact(8)) {
                    *s += f64::from_le_bytes(c.try_into().expect("8 bytes"));
                }
            }
            let mut it = sum.iter().map(|s| s / f64::from(n));
            for &skew in &a.skews {
                for op in OPS {
                    for col in COLS {
                        let (m, h) = (it.next().unwrap_or(f64::NAN), it.next().unwrap_or(f64::NAN));
                        println!("@ {op} {} {skew} {m:.3} {h:.3}", col.name());
                    }
                }
            }
        } else {
            let root = world.endpoint(0);
            world.port().send(root, TAG_GATHER, &bytes)?;
        }
        Ok(())
    })?;
    drop(bypass);
    world.finalize()?;
    Ok(())
}

/// (op, column, skew) -> (mean us in the call, handler us per call).
type Figures = HashMap<(String, String, u64), (f64, f64)>;

fn parse(text: &str, prefix: &str) -> Figures {
    let mut f = Figures::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix).and_then(|l| l.strip_prefix("@ ")) else { continue };
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() < 4 {
            continue;
        }
        let (Ok(skew), Ok(m)) = (w[2].parse(), w[3].parse()) else { continue };
        let h = w.get(4).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
        f.insert((w[0].to_string(), w[1].to_string(), skew), (m, h));
    }
    f
}

fn worker_args(a: &SkewArgs) -> Vec<String> {
    let mut v = vec![
        "bench".into(),
        "skew".into(),
        "--worker".into(),
        format!("--size={}", a.size),
        format!("--iters={}", a.iters),
        format!("--skews={}", a.skews.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
        format!("--seed={}", a.seed),
    ];
    if let Some(p) = &a.progress {
        v.push(format!("--progress={p}"));
    }
    v
}

fn run_mpi(a: &SkewArgs) -> Result<Figures, String> {
    let skews = a.skews.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let args = [a.size.to_string(), a.iters.to_string(), skews, a.seed.to_string()];
    let out = crate::bench_coll::run_program("mpi_skew.c", include_str!("mpi_skew.c"), "ob_mpi_skew", a.ranks, &[], &args)?;
    Ok(parse(&out, ""))
}

fn cell(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.1}"),
        _ => "-".into(),
    }
}

/// Runs `outboard bench skew`.
pub fn run(a: SkewArgs) -> anyhow::Result<()> {
    if a.worker {
        return worker(&a);
    }
    if a.size % 8 != 0 {
        bail!("--size must be a multiple of 8 (i64 sums)");
    }
    let (cross, own) = measure_signal_cost(2000).context("measuring the interrupt's cost")?;
    let launcher = ["-n".to_string(), a.ranks.to_string(), "--timeout".into(), a.timeout.to_string()];
    let (so, se) = crate::bench_job::run(&launcher, &worker_args(&a), &format!("the {}-rank job", a.ranks))?;
    let fig = parse(&so, "[0] ");
    let mpi = if a.no_mpi { Err("left out (--no-mpi)".to_string()) } else { run_mpi(&a) };
    println!(
        "# outboard bench skew: {} ranks, {}-byte values, {} calls per point, root 0, binomial tree; before each call (after an untimed barrier) every rank busy-waits a random 0..max us",
        a.ranks, a.size, a.iters
    );
    println!(
        "# one interrupt (signal form, median of 2000): {:.2} us from tgkill to the handler's entry on a busy thread; {:.2} us for a signal to oneself (system call, delivery, handler, return)",
        cross.as_secs_f64() * 1e6,
        own.as_secs_f64() * 1e6
    );
    for l in se.lines().filter(|l| l.contains("# rank ") || l.contains("skipped")) {
        println!("{}", l.trim_start_matches(|c: char| c != '#'));
    }
    match &mpi {
        Ok(_) => println!("# Open MPI: mpirun --oversubscribe --mca btl tcp,self, the same loop (mpi_skew.c)"),
        Err(e) => println!("# Open MPI: {e}"),
    }
    println!("# mean us per rank inside the call; [handler us per call, per rank]");
    println!(
        "{:<7} {:>9} {:>10} {:>20} {:>20} {:>11} {:>9}",
        "op", "max skew", "offloaded", "bypass (signal)", "bypass (thread)", "host-based", "Open MPI"
    );
    for &skew in &a.skews {
        for op in OPS {
            let get = |c: Col| fig.get(&(op.to_string(), c.name().to_string(), skew)).copied();
            let with_handler = |c: Col| match get(c) {
                Some((m, h)) if m.is_finite() => format!("{m:.1} [{h:.1}]"),
                _ => "-".into(),
            };
            let m = mpi.as_ref().ok().and_then(|f| f.get(&(op.to_string(), "mpi".to_string(), skew))).map(|x| x.0);
            println!(
                "{:<7} {:>6} us {:>10} {:>20} {:>20} {:>11} {:>9}",
                op,
                skew,
                cell(get(Col::Offloaded).map(|x| x.0)),
                with_handler(Col::Signal),
                with_handler(Col::Thread),
                cell(get(Col::Host).map(|x| x.0)),
                cell(m)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zero_lines_parse_and_others_do_not() {
        let f = parse("[0] @ bcast bypass-signal 200 3.500 1.250\n[1] @ bcast offloaded 0 9 9\n[0] # rank 0\n", "[0] ");
        assert_eq!(f.len(), 1);
        assert_eq!(f[&("bcast".to_string(), "bypass-signal".to_string(), 200)], (3.5, 1.25));
    }

    #[test]
    fn the_reduce_oracle_sums_every_rank() {
        let r = reduced(3, 16, 2);
        let v: Vec<i64> = r.chunks(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(v, [3000 + 3 * 2, 3000 + 3 * 3]);
    }
}
