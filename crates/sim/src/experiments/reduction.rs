//! Reduction to one (dissertation chapter 4), host-based and offloaded,
//! one 64-bit element, integer or double SUM, on a tree rooted at rank 0.
//!
//! - `reduce` (4.3.1, Figure 4.3): latency against nodes on the binomial
//!   tree: from when the leaf furthest from the root starts until the root
//!   has the result, averaged over `iters` reductions. The paper timed it
//!   in a loop where every other member ran free and only that leaf waited
//!   for the root's reply before starting again, so in its steady state the
//!   other contributions were in before the timed leaf started and only the
//!   timed leaf's path was critical. We reproduce that steady state: every
//!   iteration starts at a set simulated time, once everything of the one
//!   before is over (no barrier, whose packets would meet the reduction
//!   still under way: see [`latency_with_lead`]); the others start at once
//!   and the timed leaf starts a lead later, the lead being twice the
//!   latency of the same reduction with everybody starting together (by
//!   then everything that does not wait for the timed leaf is done: a
//!   longer lead gives the same figure, which a test checks).
//!   [`latency_lined_up`] gives the all-start-together figure.
//! - `reduce-chain` (4.3.2, Figure 4.4): the same on a chain of depth
//!   nodes-1; the slope of (host - offloaded) per level.
//! - `reduce-degree` (4.3.2, Figure 4.5): depth-1 trees of degree
//!   nodes-1; the mean gap (offloaded - host) and the offloaded latency's
//!   growth per degree.
//! - `reduce-cpu` (4.3.3, Figure 4.6): host time per reduction, averaged
//!   over processes: the time inside the library, in the paper's loop of a
//!   barrier followed by a reduction. A host-based member is inside it
//!   until its part is done; an offloaded non-root member only posts its
//!   contribution and collects the completion later (after the next
//!   barrier, the last one too), as the dissertation's non-root hosts did;
//!   the offloaded root waits for the result. A first, untimed iteration
//!   sets the group up, so that without skew the figure does not depend
//!   on the iteration count (the paper averaged 10,000).
//! - `reduce-skew` (4.3.4, Figure 4.7): the same on 16 nodes with a random
//!   delay in 0..=max before each reduction (drawn from the seed).

use std::cell::RefCell;
use std::rc::Rc;

use outboard_host::coll::tree::Tree;
use outboard_host::{BarrierAlgorithm, CollRequest, HostError, Mode, TreeShape};

use super::coll::{barrier, contribution, reduce, run_all, side_by_side, sum_of, MODES};
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::time::{Dur, Time};

const SYNC: BarrierAlgorithm = BarrierAlgorithm::PairwiseExchange;
const ROOT: u32 = 0;

/// The tree of `shape` over `n` ranks rooted at rank 0, for the
/// experiments' one 8-byte element.
pub fn tree(shape: TreeShape, n: u32) -> Tree {
    shape.tree(n, ROOT, 8).expect("a valid tree")
}

/// The deepest rank of the tree (the highest of equals): the leaf whose
/// start the latency is counted from.
pub fn furthest_leaf(t: &Tree) -> u32 {
    let depth = |mut r: u32| {
        let mut d = 0;
        while let Some(p) = t.parent(r) {
            r = p;
            d += 1;
        }
        d
    };
    (0..t.size()).max_by_key(|&r| (depth(r), r)).unwrap_or(ROOT)
}

/// What a latency run measured.
#[derive(Debug, Clone)]
pub struct LatencyRun {
    /// Mean latency in microseconds.
    pub us: f64,
    /// The root's result of each reduction, in order.
    pub results: Vec<Vec<u8>>,
}

/// Reduction latency as the paper measured it (see the module doc): the
/// timed leaf starts after the rest of the tree has taken in the other
/// contributions. Also returns the root's results.
pub fn latency(
    profile: &Profile,
    n: u32,
    mode: Mode,
    shape: TreeShape,
    float: bool,
    iters: u32,
    seed: u64,
) -> Result<LatencyRun, ExperimentError> {
    let together = latency_lined_up(profile, n, mode, shape, float, iters, seed)?;
    let lead = Dur::from_us((2.0 * together.us).ceil());
    latency_with_lead(profile, n, mode, shape, float, iters, seed, lead)
}

/// Reduction latency when every member starts at the same time: the timed
/// leaf's contribution then queues behind its siblings' at their parent.
pub fn latency_lined_up(
    profile: &Profile,
    n: u32,
    mode: Mode,
    shape: TreeShape,
    float: bool,
    iters: u32,
    seed: u64,
) -> Result<LatencyRun, ExperimentError> {
    latency_with_lead(profile, n, mode, shape, float, iters, seed, Dur::ZERO)
}

/// Poll step of a member waiting for the next iteration's start.
const PACE_POLL: Dur = Dur::from_ns(1_000);

/// Out-of-band pacing of the latency runs' iterations (no traffic): every
/// member reports when its part of an iteration is done; the last one to
/// report fixes when the trailing completions are taken in and when the
/// next iteration starts, each one iteration length later. A barrier
/// between iterations would not do: a member that is done enters it while
/// the reduction still runs, and its barrier packets queue at NICs on the
/// timed path (the paper's timed leaf waited for the root's message and
/// sent nothing meanwhile).
struct Pace {
    n: u32,
    left: u32,
    last: Time,
    /// Per iteration: (take completions in, start the next iteration).
    next: Vec<Option<(Time, Time)>>,
}

impl Pace {
    fn new(n: u32, iters: u32) -> Self {
        Self { n, left: n, last: Time::ZERO, next: vec![None; iters as usize] }
    }

    /// Member done with iteration `it`, which started at `start`.
    fn done(&mut self, it: usize, start: Time, now: Time) {
        self.last = self.last.max(now);
        self.left -= 1;
        if self.left == 0 {
            let d = Dur(self.last.since(start).0.max(PACE_POLL.0));
            self.next[it] = Some((self.last + d, self.last + d + d));
            self.left = self.n;
            self.last = Time::ZERO;
        }
    }
}

/// Reduction latency with the timed leaf starting `lead` after the others;
/// the latency is counted from the timed leaf's start. Every member starts
/// an iteration at the same simulated time, once everything of the one
/// before is over ([`Pace`]); one untimed iteration first installs the
/// group and its schedule (the paper averaged 10,000 iterations).
#[allow(clippy::too_many_arguments)]
pub fn latency_with_lead(
    profile: &Profile,
    n: u32,
    mode: Mode,
    shape: TreeShape,
    float: bool,
    iters: u32,
    seed: u64,
    lead: Dur,
) -> Result<LatencyRun, ExperimentError> {
    let iters = iters.max(1);
    let runs = iters + 1;
    let leaf = furthest_leaf(&tree(shape, n));
    let starts: Shared<Vec<Time>> = Rc::new(RefCell::new(vec![Time::ZERO; iters as usize]));
    let ends: Shared<Vec<Time>> = Rc::new(RefCell::new(vec![Time::ZERO; iters as usize]));
    let results: Shared<Vec<Vec<u8>>> = Rc::new(RefCell::new(Vec::new()));
    let pace: Shared<Pace> = Rc::new(RefCell::new(Pace::new(n, runs)));
    let red = sum_of(float);
    run_all(profile, n, seed, |p, rank, mut port, mut g| {
        let (starts, ends, results, pace) = (starts.clone(), ends.clone(), results.clone(), pace.clone());
        async move {
            let mut start = p.now();
            // The untimed first run contributes as iteration `iters` would.
            for (i, timed) in std::iter::once(None).chain((0..iters).map(Some)).enumerate() {
                p.sleep_until(start).await;
                if rank == leaf {
                    p.compute(lead).await;
                    if let Some(k) = timed {
                        starts.borrow_mut()[k as usize] = p.now();
                    }
                }
                let data = contribution(float, rank, timed.unwrap_or(iters));
                let v = reduce(&p, &mut port, &mut g, mode, shape, ROOT, red, &data).await?;
                if let (ROOT, Some(k)) = (rank, timed) {
                    ends.borrow_mut()[k as usize] = p.now();
                    results.borrow_mut().push(v);
                }
                pace.borrow_mut().done(i, start, p.now());
                let (reap, next) = loop {
                    let next = pace.borrow().next[i];
                    match next {
                        Some(t) => break t,
                        None => p.sleep_until(p.now() + PACE_POLL).await,
                    }
                };
                p.sleep_until(reap).await;
                port.progress();
                start = next;
            }
            Ok(())
        }
    })?;
    let (s, e) = (starts.borrow(), ends.borrow());
    let us = s.iter().zip(e.iter()).map(|(s, e)| e.since(*s).as_us()).sum::<f64>() / f64::from(iters);
    let results = results.borrow().clone();
    Ok(LatencyRun { us, results })
}

/// Mean host time per reduction per process (see the module doc), with a
/// random delay in 0..=`max_delay_us` before each reduction.
pub fn cpu(
    profile: &Profile,
    n: u32,
    mode: Mode,
    float: bool,
    max_delay_us: f64,
    iters: u32,
    seed: u64,
) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let total: Shared<f64> = Rc::new(RefCell::new(0.0));
    let red = sum_of(float);
    let shape = TreeShape::Binomial;
    run_all(profile, n, seed, |p, rank, mut port, mut g| {
        let total = total.clone();
        async move {
            // (request, whether its iteration is timed)
            let mut pending: Option<(CollRequest, bool)> = None;
            let mut mine = 0.0;
            // Iteration 0 is untimed: it installs the group and schedule.
            for it in 0..=iters {
                barrier(&p, &mut port, &mut g, Mode::Offloaded, SYNC).await?;
                if let Some((r, timed)) = pending.take() {
                    let t = p.now();
                    p.coll_wait(&mut port, r).await?;
                    if timed {
                        mine += p.now().since(t).as_us();
                    }
                }
                let d = p.skew(Dur::from_us(max_delay_us));
                p.compute(d).await;
                let t = p.now();
                let data = contribution(float, rank, it);
                if mode == Mode::Offloaded && rank != ROOT {
                    pending = Some((port.start_reduce(&mut g, mode, shape, ROOT, red, &data)?, it > 0));
                    p.settle().await;
                } else {
                    reduce(&p, &mut port, &mut g, mode, shape, ROOT, red, &data).await?;
                }
                if it > 0 {
                    mine += p.now().since(t).as_us();
                }
            }
            // The last contribution is collected after a barrier too.
            barrier(&p, &mut port, &mut g, Mode::Offloaded, SYNC).await?;
            if let Some((r, _)) = pending.take() {
                let t = p.now();
                p.coll_wait(&mut port, r).await?;
                mine += p.now().since(t).as_us();
            }
            *total.borrow_mut() += mine;
            Ok::<(), HostError>(())
        }
    })?;
    let t = *total.borrow();
    Ok(t / f64::from(n) / f64::from(iters))
}

fn dname(float: bool) -> &'static str {
    if float {
        "float"
    } else {
        "int"
    }
}

fn nodes_or(p: &Params, default: Vec<u32>) -> Result<Vec<u32>, ExperimentError> {
    let v = if p.nodes.is_empty() { default } else { p.nodes.clone() };
    match v.iter().find(|&&n| n < 2) {
        Some(n) => Err(ExperimentError::Param(format!("a reduction experiment needs at least 2 nodes, got {n}"))),
        None => Ok(v),
    }
}

fn is_l91(profile: &Profile) -> bool {
    profile.name == "gm-lanai91"
}

/// Host-based and offloaded latency of one point.
fn both(profile: &Profile, n: u32, shape: TreeShape, float: bool, p: &Params) -> Result<[f64; 2], ExperimentError> {
    let mut t = [0.0; 2];
    for (i, m) in MODES.into_iter().enumerate() {
        t[i] = latency(profile, n, m, shape, float, p.iters, p.seed)?.us;
    }
    Ok(t)
}

/// Least-squares slope of y against x.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

fn extra(series: String, n: u32, metric: &'static str, value: f64, unit: &'static str, id: Option<&str>) -> Row {
    let r = Row::new(series, n, 8, metric, value, unit);
    match id {
        Some(id) => r.with_paper(&[id]),
        None => r,
    }
}

/// `outboard sim reduce`.
pub(super) fn run_latency(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = nodes_or(p, vec![2, 4, 8, 16])?;
    let total = p.profiles.len() * nodes.len() * 2;
    let (mut rows, mut done) = (Vec::new(), 0);
    for prof in &p.profiles {
        for float in [false, true] {
            for &n in &nodes {
                let [h, o] = both(prof, n, TreeShape::Binomial, float, p)?;
                let id: Option<&'static [&'static str]> = match (is_l91(prof), n, float) {
                    (true, 16, false) => Some(&["reduce-int-foi-16"]),
                    (true, 16, true) => Some(&["reduce-float-foi-16"]),
                    _ => None,
                };
                rows.extend(side_by_side(
                    &format!("{} {}", prof.name, dname(float)),
                    n,
                    8,
                    "latency",
                    "us",
                    h,
                    o,
                    [None, None, id],
                ));
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "Reduction latency, binomial tree, one 64-bit SUM (dissertation 4.3.1, Figure 4.3)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec!["latency: the furthest leaf's start to the root's result; factor = host / offloaded".into()],
    })
}

/// `outboard sim reduce-chain`.
pub(super) fn run_chain(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = nodes_or(p, (2..=16).collect())?;
    let total = p.profiles.len() * nodes.len() * 2;
    let (mut rows, mut done) = (Vec::new(), 0);
    for prof in &p.profiles {
        for float in [false, true] {
            let mut gaps = Vec::new();
            let series = format!("{} {} chain", prof.name, dname(float));
            for &n in &nodes {
                let [h, o] = both(prof, n, TreeShape::Chain, float, p)?;
                rows.extend(side_by_side(&series, n, 8, "latency", "us", h, o, [None, None, None]));
                gaps.push((f64::from(n - 1), h - o));
                done += 1;
                progress(done, total);
            }
            if gaps.len() >= 2 {
                let id = match (is_l91(prof), float) {
                    (true, false) => Some("reduce-chain-int-slope"),
                    (true, true) => Some("reduce-chain-float-slope"),
                    _ => None,
                };
                rows.push(extra(series, *nodes.last().unwrap_or(&0), "gap slope", slope(&gaps), "us/lvl", id));
            }
        }
    }
    Ok(Outcome {
        title: "Reduction on a chain of depth nodes-1 (dissertation 4.3.2, Figure 4.4)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec!["gap slope: least-squares growth of (host - offloaded) latency per level of depth".into()],
    })
}

/// `outboard sim reduce-degree`.
pub(super) fn run_degree(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = nodes_or(p, (2..=16).collect())?;
    let total = p.profiles.len() * nodes.len() * 2;
    let (mut rows, mut done) = (Vec::new(), 0);
    for prof in &p.profiles {
        for float in [false, true] {
            let mut gap = 0.0;
            let mut nic = Vec::new();
            let series = format!("{} {} depth-1", prof.name, dname(float));
            for &n in &nodes {
                let [h, o] = both(prof, n, TreeShape::Kary(n - 1), float, p)?;
                rows.extend(side_by_side(&series, n, 8, "latency", "us", h, o, [None, None, None]));
                gap += o - h;
                nic.push((f64::from(n - 1), o));
                done += 1;
                progress(done, total);
            }
            let id = match (is_l91(prof), float) {
                (true, false) => Some("reduce-degree-int-gap"),
                (true, true) => Some("reduce-degree-float-gap"),
                _ => None,
            };
            let last = *nodes.last().unwrap_or(&0);
            rows.push(extra(series.clone(), last, "mean gap", gap / nodes.len() as f64, "us", id));
            rows.push(extra(series, last, "nic slope", slope(&nic), "us/deg", None));
        }
    }
    Ok(Outcome {
        title: "Reduction on depth-1 trees of degree nodes-1 (dissertation 4.3.2, Figure 4.5)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "mean gap: offloaded minus host-based latency, averaged over the degrees".into(),
            "nic slope: growth of the offloaded latency per degree (the paper: 0.22 us int, 0.24 us float)".into(),
        ],
    })
}

/// `outboard sim reduce-cpu`.
pub(super) fn run_cpu(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = nodes_or(p, vec![2, 4, 8, 16])?;
    let total = p.profiles.len() * nodes.len() * 2;
    let (mut rows, mut done) = (Vec::new(), 0);
    for prof in &p.profiles {
        for float in [false, true] {
            for &n in &nodes {
                let h = cpu(prof, n, Mode::HostBased, float, 0.0, p.iters, p.seed)?;
                let o = cpu(prof, n, Mode::Offloaded, float, 0.0, p.iters, p.seed)?;
                let id: Option<&'static [&'static str]> = match (is_l91(prof), n, float) {
                    (true, 16, false) => Some(&["reduce-cpu-int-foi"]),
                    (true, 16, true) => Some(&["reduce-cpu-float-foi"]),
                    _ => None,
                };
                rows.extend(side_by_side(
                    &format!("{} {}", prof.name, dname(float)),
                    n,
                    8,
                    "cpu",
                    "us",
                    h,
                    o,
                    [None, None, id],
                ));
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "Host time per reduction, binomial tree (dissertation 4.3.3, Figure 4.6)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "mean over processes of the time inside the library per reduction; factor = host / offloaded".into()
        ],
    })
}

/// `outboard sim reduce-skew`: `--sizes` gives the maximum delays in us.
pub(super) fn run_skew(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = nodes_or(p, vec![16])?;
    let delays = if p.sizes.is_empty() { vec![0, 100, 200, 400, 600, 800, 1_000] } else { p.sizes.clone() };
    let total = p.profiles.len() * nodes.len() * delays.len() * 2;
    let (mut rows, mut done) = (Vec::new(), 0);
    for prof in &p.profiles {
        for float in [false, true] {
            for &n in &nodes {
                let series = format!("{} {}", prof.name, dname(float));
                let mut best: f64 = 0.0;
                for &d in &delays {
                    let h = cpu(prof, n, Mode::HostBased, float, f64::from(d), p.iters, p.seed)?;
                    let o = cpu(prof, n, Mode::Offloaded, float, f64::from(d), p.iters, p.seed)?;
                    let id: Option<&'static [&'static str]> = if is_l91(prof) && n == 16 && d == 200 && !float {
                        Some(&["reduce-skew-foi-200"])
                    } else {
                        None
                    };
                    rows.extend(side_by_side(&series, n, d, "cpu", "us", h, o, [None, None, id]));
                    best = best.max(h / o);
                    done += 1;
                    progress(done, total);
                }
                let id = (is_l91(prof) && n == 16).then_some("reduce-skew-foi");
                let mut r = extra(series, n, "max factor", best, "x", id);
                r.size = *delays.iter().max().unwrap_or(&0);
                rows.push(r);
            }
        }
    }
    Ok(Outcome {
        title: "Host time per reduction under process skew (dissertation 4.3.4, Figure 4.7)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "the bytes column holds the maximum delay in us (a random delay in 0..=max before each reduction)".into()
        ],
    })
}
