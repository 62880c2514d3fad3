//! What the collective experiments share: one group of all nodes (port 0 of
//! each), blocking wrappers that poll the host library as its own blocking
//! calls would, a runner that spawns one process per node and collects the
//! first error, and the side-by-side rows (host-based, offloaded, factor).

use std::future::Future;

use outboard_engine::{Datatype, GroupId, MemberList, ReduceOp, Reduction};
use outboard_host::{BarrierAlgorithm, CollRequest, Group, HostError, Mode, Port, TreeShape};

use super::common::first_port;
use super::{ExperimentError, FirstError, Row};
use crate::process::{Proc, SimIo};
use crate::profile::Profile;
use crate::sim::{RunReport, Simulation};
use crate::time::Dur;

/// The group every collective experiment uses.
pub const GROUP: GroupId = GroupId(1);

/// Both modes, host-based first (the order of the printed columns).
pub const MODES: [Mode; 2] = [Mode::HostBased, Mode::Offloaded];

/// Short name of a mode in series names.
pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::HostBased => "host",
        Mode::Offloaded => "nic",
    }
}

/// Element type of the reduction experiments: the dissertation reduced one
/// 64-bit element, integer or double (4.2).
pub fn sum_of(float: bool) -> Reduction {
    let dtype = if float { Datatype::F64 } else { Datatype::I64 };
    Reduction::new(ReduceOp::Sum, dtype).expect("SUM applies to every type")
}

/// `rank`'s contribution in the reduction experiments (iteration `it`).
pub fn contribution(float: bool, rank: u32, it: u32) -> Vec<u8> {
    if float {
        (f64::from(rank) * 0.5 + f64::from(it) * 0.25 + 0.1).to_ne_bytes().to_vec()
    } else {
        (i64::from(rank) * 1_000 + i64::from(it)).to_ne_bytes().to_vec()
    }
}

/// The group of all `n` nodes, seen from `rank`.
pub fn world(n: u32, rank: u32) -> Group {
    let first = first_port(0);
    let members = MemberList::contiguous(first.node, n, first.port, first.gen).expect("node numbers fit");
    Group::with_members(GROUP, rank, members).expect("a valid group of all nodes")
}

/// A blocking barrier.
pub async fn barrier(p: &Proc, port: &mut Port<SimIo>, g: &mut Group, mode: Mode, algo: BarrierAlgorithm) -> Result<(), HostError> {
    let r = port.start_barrier(g, mode, algo)?;
    p.coll_wait(port, r).await.map(|_| ())
}

/// A blocking reduce; the result at the root, empty elsewhere.
#[allow(clippy::too_many_arguments)]
pub async fn reduce(
    p: &Proc,
    port: &mut Port<SimIo>,
    g: &mut Group,
    mode: Mode,
    tree: TreeShape,
    root: u32,
    red: Reduction,
    data: &[u8],
) -> Result<Vec<u8>, HostError> {
    let r = port.start_reduce(g, mode, tree, root, red, data)?;
    p.coll_wait(port, r).await
}

/// Runs one process per node of an `n`-node simulation: `body(proc, rank,
/// port, group)`; any host-library error of any process is the result.
pub fn run_all<F, Fut>(profile: &Profile, n: u32, seed: u64, body: F) -> Result<RunReport, ExperimentError>
where
    F: Fn(Proc, u32, Port<SimIo>, Group) -> Fut,
    Fut: Future<Output = Result<(), HostError>> + 'static,
{
    let sim = Simulation::with_config(profile, n, seed, |c| c.max_ports = 1)?;
    run_all_in(sim, n, body)
}

/// Mean over members of the microseconds per collective of `iters`
/// collectives back to back on `n` nodes ([`us_per_collective_each`]).
pub fn mean_us_per_collective<S>(profile: &Profile, n: u32, seed: u64, iters: u32, compute: Dur, start: S) -> Result<f64, ExperimentError>
where
    S: Fn(&mut Port<SimIo>, &mut Group, u32, u32) -> Result<CollRequest, HostError> + Clone + 'static,
{
    let each = us_per_collective_each(profile, n, seed, iters, compute, start)?;
    Ok(each.iter().sum::<f64>() / each.len() as f64)
}

/// Each member's microseconds per collective (in no particular order) of
/// `iters` collectives back to back on `n` nodes, after an untimed first
/// one (it installs the group and its schedules, and lines the members
/// up), with `compute` of computation between each start and its wait.
/// `start(port, group, rank, it)` starts iteration `it` (0: the untimed
/// one).
pub fn us_per_collective_each<S>(profile: &Profile, n: u32, seed: u64, iters: u32, compute: Dur, start: S) -> Result<Vec<f64>, ExperimentError>
where
    S: Fn(&mut Port<SimIo>, &mut Group, u32, u32) -> Result<CollRequest, HostError> + Clone + 'static,
{
    let iters = iters.max(1);
    let spans: std::rc::Rc<std::cell::RefCell<Vec<f64>>> = Default::default();
    run_all(profile, n, seed, |p, rank, mut port, mut g| {
        let (spans, start) = (spans.clone(), start.clone());
        async move {
            let r = start(&mut port, &mut g, rank, 0)?;
            p.coll_wait(&mut port, r).await?;
            let t0 = p.now();
            for it in 1..=iters {
                let r = start(&mut port, &mut g, rank, it)?;
                if compute > Dur::ZERO {
                    p.compute(compute).await;
                }
                p.coll_wait(&mut port, r).await?;
            }
            spans.borrow_mut().push(p.now().since(t0).as_us() / f64::from(iters));
            Ok::<(), HostError>(())
        }
    })?;
    let each = spans.borrow().clone();
    Ok(each)
}

/// [`run_all`] on a simulation of `n` nodes the caller built (with
/// [`Simulation::compact_payloads`], say), one port per engine.
pub fn run_all_in<F, Fut>(mut sim: Simulation, n: u32, body: F) -> Result<RunReport, ExperimentError>
where
    F: Fn(Proc, u32, Port<SimIo>, Group) -> Fut,
    Fut: Future<Output = Result<(), HostError>> + 'static,
{
    let err = FirstError::default();
    for rank in 0..n {
        let err = err.clone();
        let fut = {
            let body = &body;
            move |p: Proc| {
                let port = p.open_port(0).expect("a fresh port");
                let g = world(n, rank);
                let f = body(p, rank, port, g);
                async move { err.record(f.await) }
            }
        };
        sim.spawn(rank, fut);
    }
    // A process's host-library error comes first: the processes it left
    // waiting are its consequence, not the cause.
    let report = sim.run();
    err.check()?;
    Ok(report?)
}

/// Rows for one point measured both ways: host-based, offloaded, and the
/// factor of improvement (host / offloaded), each with the paper's figure
/// where `ids` names one (host, nic, factor).
#[allow(clippy::too_many_arguments)]
pub fn side_by_side(
    series: &str,
    nodes: u32,
    size: u32,
    what: &'static str,
    unit: &'static str,
    host: f64,
    nic: f64,
    ids: [Option<&[&str]>; 3],
) -> Vec<Row> {
    let row = |metric: &'static str, value: f64, unit: &'static str, id: Option<&[&str]>| {
        let r = Row::new(series, nodes, size, metric, value, unit);
        match id {
            Some(ids) => r.with_paper(ids),
            None => r,
        }
    };
    let (h, n) = match what {
        "latency" => ("host", "nic"),
        "cpu" => ("host cpu", "nic cpu"),
        "compute" => ("host compute", "nic compute"),
        "time" => ("host time", "nic time"),
        _ => ("host", "nic"),
    };
    vec![row(h, host, unit, ids[0]), row(n, nic, unit, ids[1]), row("factor", host / nic, "x", ids[2])]
}
