//! Barriers, reductions and allreduces across the job's processes, each
//! offloaded (the engines run it) and host-based (the hosts run it over
//! point-to-point messages), with every result checked; exits non-zero on
//! the first mismatch.
//!
//! ```text
//! cargo build --release -p outboard-cli -p outboard-runtime --examples
//! target/release/outboard run -n 4 target/release/examples/collectives
//! ```
//!
//! What it checks, in both modes:
//!
//! - every barrier algorithm (pairwise exchange, dissemination,
//!   gather-and-broadcast of degree 2 and 3) holds every rank until the
//!   last one (which arrives 30 ms late) has entered;
//! - reduce to every root and allreduce with every algorithm: sum of
//!   ranks (i64, u64), min and max (i32, f32), band/bor (u64) equal their
//!   closed forms; f64 sums of values whose order matters are bit-identical
//!   between the two modes and from run to run;
//! - 200 consecutive collectives of mixed kinds and modes, and several
//!   split-phase allreduces started before the first is waited for, each
//!   with its own correct result;
//! - broadcast from every root in all three broadcast modes (offloaded,
//!   NIC-assisted with and without pipelining, host-based), on binomial,
//!   chain and postal-optimal trees (lambda given and derived from link
//!   costs), of 0 bytes to several packets, and NIC-assisted broadcasts
//!   started back to back before any is waited for: every rank gets the
//!   root's bytes.
//!
//! The crate's multi-process tests (`crates/cli/tests/collectives.rs`)
//! run this same code under `outboard run -n 4`.

use std::error::Error;
use std::time::{Duration, Instant};

use outboard_engine::{Datatype, ReduceOp, Reduction};
use outboard_host::{AllreduceAlgorithm, BarrierAlgorithm, BcastMode, Group, Lambda, LinkCosts, Mode, Port, TreeShape};
use outboard_runtime::{RtPort, World};

type Res<T> = Result<T, Box<dyn Error>>;

const MODES: [Mode; 2] = [Mode::Offloaded, Mode::HostBased];

fn red(op: ReduceOp, dtype: Datatype) -> Reduction {
    Reduction { op, dtype }
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn mismatch(what: &str, got: &[u8], want: &[u8]) -> Res<()> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {:02x?}, expected {:02x?}", &got[..got.len().min(32)], &want[..want.len().min(32)]).into())
    }
}

fn barrier_algorithms() -> [(&'static str, BarrierAlgorithm); 4] {
    [
        ("pairwise exchange", BarrierAlgorithm::PairwiseExchange),
        ("dissemination", BarrierAlgorithm::Dissemination),
        ("gather-broadcast(2)", BarrierAlgorithm::GatherBroadcast { degree: 2 }),
        ("gather-broadcast(3)", BarrierAlgorithm::GatherBroadcast { degree: 3 }),
    ]
}

fn allreduce_algorithms() -> [(&'static str, AllreduceAlgorithm); 4] {
    [
        ("binomial tree", AllreduceAlgorithm::Tree(TreeShape::Binomial)),
        ("3-ary tree", AllreduceAlgorithm::Tree(TreeShape::Kary(3))),
        ("chain", AllreduceAlgorithm::Tree(TreeShape::Chain)),
        ("recursive doubling", AllreduceAlgorithm::RecursiveDoubling),
    ]
}

/// Values whose f64 sum depends on the order of combination.
fn order_sensitive(rank: u32, len: usize) -> Vec<f64> {
    (0..len).map(|i| {
        let r = f64::from(rank);
        match i % 4 {
            0 => 1e16 * if rank % 2 == 0 { 1.0 } else { -1.0 } + r,
            1 => 0.1 * (r + 1.0) + 1e-7 * i as f64,
            2 => (r + 1.0).sqrt() * 1e8,
            _ => 1.0 / (r + 3.0),
        }
    })
    .collect()
}

/// Wall-clock time in nanoseconds (one clock for every process of the
/// machine).
fn now_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// Every barrier algorithm in both modes holds the early ranks until the
/// late one arrives (30 ms after the others).
fn barriers(port: &mut Port<RtPort>, g: &mut Group, rank: u32, n: u32) -> Res<()> {
    const LATE: Duration = Duration::from_millis(30);
    for (name, alg) in barrier_algorithms() {
        for mode in MODES {
            // Line up first, so only the deliberate delay separates ranks.
            port.barrier(g, mode, alg)?;
            if rank == n - 1 {
                std::thread::sleep(LATE);
            }
            // The processes share the machine's clock: the late rank's
            // entry time, broadcast afterwards, orders every exit against
            // it exactly, however the scheduler delayed anyone.
            let entered = now_ns();
            port.barrier(g, mode, alg)?;
            let left = now_ns();
            let late = port.bcast(g, Mode::HostBased, TreeShape::Binomial, n - 1, &entered.to_le_bytes())?;
            let late = u128::from_le_bytes(late.try_into().map_err(|_| "entry time of 16 bytes")?);
            if rank != n - 1 && left < late {
                return Err(format!("{name} {mode:?} barrier let rank {rank} through {} us before the late rank entered", (late - left) / 1000).into());
            }
        }
    }
    Ok(())
}

/// Reduce to every root: sums, minima, maxima and bitwise results.
fn reductions(port: &mut Port<RtPort>, g: &mut Group, rank: u32, n: u32) -> Res<()> {
    let (r, n64) = (i64::from(rank), i64::from(n));
    let sum_ranks = n64 * (n64 - 1) / 2;
    for root in 0..n {
        for (shape_name, shape) in [("binomial", TreeShape::Binomial), ("2-ary", TreeShape::Kary(2)), ("chain", TreeShape::Chain)] {
            for mode in MODES {
                let what = |op: &str| format!("reduce {op} to {root} ({shape_name}, {mode:?})");
                let cases: [(Reduction, Vec<u8>, Vec<u8>, &str); 4] = [
                    (red(ReduceOp::Sum, Datatype::I64), i64s(&[r, -r, 1000 * r + 7]), i64s(&[sum_ranks, -sum_ranks, 1000 * sum_ranks + 7 * n64]), "sum i64"),
                    (red(ReduceOp::Min, Datatype::I32), i32s(&[rank as i32 - 5, 100]), i32s(&[-5, 100]), "min i32"),
                    (red(ReduceOp::Max, Datatype::F32), f32s(&[rank as f32 * 1.5, -(rank as f32) - 1.0]), f32s(&[(n - 1) as f32 * 1.5, -1.0]), "max f32"),
                    (red(ReduceOp::Bor, Datatype::U64), u64s(&[1 << rank]), u64s(&[(1u64 << n) - 1]), "bor u64"),
                ];
                for (reduction, data, want, op) in cases {
                    let got = port.reduce(g, mode, shape, root, reduction, &data)?;
                    if rank == root {
                        mismatch(&what(op), &got, &want)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Allreduce with every algorithm: closed forms for integers and min/max,
/// and floating-point sums identical between the modes.
fn allreduces(port: &mut Port<RtPort>, g: &mut Group, rank: u32, n: u32) -> Res<()> {
    let (r, n64) = (i64::from(rank), i64::from(n));
    let sum_ranks = n64 * (n64 - 1) / 2;
    for (name, alg) in allreduce_algorithms() {
        let mut float_bits: Vec<Vec<u8>> = Vec::new();
        for mode in MODES {
            let what = |op: &str| format!("allreduce {op} ({name}, {mode:?})");
            // 512 i64 = 4 KiB: the largest contribution the issue asks for.
            let big: Vec<i64> = (0..512).map(|i| r * i).collect();
            let big_want: Vec<i64> = (0..512).map(|i| sum_ranks * i).collect();
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Sum, Datatype::I64), &i64s(&big))?;
            mismatch(&what("sum i64 x 512"), &got, &i64s(&big_want))?;
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Sum, Datatype::U64), &u64s(&[u64::from(rank)]))?;
            mismatch(&what("sum u64"), &got, &u64s(&[sum_ranks as u64]))?;
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Min, Datatype::I64), &i64s(&[r, -r]))?;
            mismatch(&what("min i64"), &got, &i64s(&[0, 1 - n64]))?;
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Max, Datatype::I32), &i32s(&[rank as i32, -(rank as i32)]))?;
            mismatch(&what("max i32"), &got, &i32s(&[n as i32 - 1, 0]))?;
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Min, Datatype::F64), &f64s(&[f64::from(rank) + 0.5]))?;
            mismatch(&what("min f64"), &got, &f64s(&[0.5]))?;
            let got = port.allreduce(g, mode, alg, red(ReduceOp::Band, Datatype::U64), &u64s(&[!(1u64 << rank)]))?;
            mismatch(&what("band u64"), &got, &u64s(&[!((1u64 << n) - 1)]))?;
            let fl = f64s(&order_sensitive(rank, 64));
            let a = port.allreduce(g, mode, alg, red(ReduceOp::Sum, Datatype::F64), &fl)?;
            let b = port.allreduce(g, mode, alg, red(ReduceOp::Sum, Datatype::F64), &fl)?;
            mismatch(&what("sum f64, run to run"), &b, &a)?;
            float_bits.push(a);
        }
        mismatch(&format!("allreduce sum f64 ({name}): offloaded vs host-based bits"), &float_bits[0], &float_bits[1])?;
    }
    Ok(())
}

/// Collectives back to back, of mixed kinds and modes, and split-phase
/// allreduces overlapping one another.
fn consecutive(port: &mut Port<RtPort>, g: &mut Group, rank: u32, n: u32) -> Res<()> {
    let n64 = i64::from(n);
    for i in 0..200i64 {
        let mode = MODES[(i % 2) as usize];
        match i % 4 {
            0 => port.barrier(g, mode, BarrierAlgorithm::Dissemination)?,
            1 | 2 => {
                let got = port.allreduce(g, mode, AllreduceAlgorithm::RecursiveDoubling, red(ReduceOp::Sum, Datatype::I64), &i64s(&[i64::from(rank) + i]))?;
                mismatch(&format!("consecutive allreduce {i} ({mode:?})"), &got, &i64s(&[n64 * (n64 - 1) / 2 + n64 * i]))?;
            }
            _ => {
                let got = port.reduce(g, mode, TreeShape::Binomial, (i as u32) % n, red(ReduceOp::Max, Datatype::I64), &i64s(&[i64::from(rank) * i]))?;
                if rank == (i as u32) % n {
                    mismatch(&format!("consecutive reduce {i} ({mode:?})"), &got, &i64s(&[(n64 - 1) * i]))?;
                }
            }
        }
    }
    for mode in MODES {
        let reqs = (0..8i64)
            .map(|k| port.start_allreduce(g, mode, AllreduceAlgorithm::Tree(TreeShape::Binomial), red(ReduceOp::Sum, Datatype::I64), &i64s(&[k * 100 + i64::from(rank)])))
            .collect::<Result<Vec<_>, _>>()?;
        for (k, req) in reqs.into_iter().enumerate().rev() {
            let got = port.coll_wait(req)?;
            mismatch(&format!("split-phase allreduce {k} ({mode:?})"), &got, &i64s(&[k as i64 * 100 * n64 + n64 * (n64 - 1) / 2]))?;
        }
    }
    Ok(())
}

/// The bytes `root` broadcasts in case `k`.
fn bcast_data(root: u32, k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(root * 7 + k as u32) as u8).collect()
}

/// Broadcast from every root in every broadcast mode and tree, and
/// NIC-assisted broadcasts in flight together.
fn broadcasts(port: &mut Port<RtPort>, g: &mut Group, rank: u32, n: u32) -> Res<()> {
    let link = LinkCosts { send_overhead_us: 2.0, send_per_byte_us: 0.002, latency_us: 10.0, latency_per_byte_us: 0.004 };
    let shapes = [TreeShape::Binomial, TreeShape::Chain, TreeShape::Postal(Lambda::Given(2.0)), TreeShape::Postal(Lambda::Link(link))];
    let modes = [BcastMode::Offloaded, BcastMode::nic_assisted(), BcastMode::NicAssisted { chunk: 3000 }, BcastMode::nic_assisted_whole(), BcastMode::HostBased];
    for root in 0..n {
        for (k, len) in [0usize, 1, 8108, 20_000].into_iter().enumerate() {
            let want = bcast_data(root, k, len);
            let mine = if rank == root { want.clone() } else { vec![0; len] };
            for shape in shapes {
                for mode in modes {
                    let got = port.bcast(g, mode, shape, root, &mine)?;
                    mismatch(&format!("bcast of {len} B from {root} ({shape:?}, {mode:?})"), &got, &want)?;
                }
            }
        }
    }
    let reqs = (0..8usize)
        .map(|k| {
            let root = k as u32 % n;
            let want = bcast_data(root, k, 5000 + k * 1000);
            let mine = if rank == root { want } else { vec![0; 5000 + k * 1000] };
            port.start_bcast(g, BcastMode::NicAssisted { chunk: 2048 }, TreeShape::Binomial, root, &mine)
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (k, req) in reqs.into_iter().enumerate().rev() {
        let got = port.coll_wait(req)?;
        mismatch(&format!("split-phase NIC-assisted bcast {k}"), &got, &bcast_data(k as u32 % n, k, 5000 + k * 1000))?;
    }
    Ok(())
}

/// Runs every check on `world`'s group of all ranks; returns a summary.
pub fn check_all(world: &mut World) -> Res<String> {
    let (rank, n) = (world.rank(), world.size());
    let mut g = world.group()?;
    let port = world.port();
    let t = Instant::now();
    barriers(port, &mut g, rank, n)?;
    reductions(port, &mut g, rank, n)?;
    allreduces(port, &mut g, rank, n)?;
    consecutive(port, &mut g, rank, n)?;
    broadcasts(port, &mut g, rank, n)?;
    Ok(format!("rank {rank}: all collectives correct in both modes ({} ms)", t.elapsed().as_millis()))
}

#[allow(dead_code)]
fn main() -> outboard_runtime::Exit {
    job().into()
}

/// Joins the job, runs this rank's part, leaves the job.
#[allow(dead_code)]
fn job() -> Res<()> {
    let mut world = outboard_runtime::init()?;
    let line = match check_all(&mut world) {
        Ok(line) => line,
        Err(e) => {
            eprintln!("{}", world.failure_report(&*e));
            // Tell the live ranks at once, so none waits a timeout on this one.
            world.abort(1);
        }
    };
    println!("{line}");
    world.finalize()?;
    Ok(())
}
