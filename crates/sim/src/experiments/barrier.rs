//! Barrier latency against nodes, host-based and offloaded, for the
//! pairwise-exchange (PE) and gather-and-broadcast (GB) algorithms
//! (dissertation 3.5.1, Figure 3.6, at the GM level; 3.5.2-3.5.3, Figures
//! 3.7-3.8, at the MPI level).
//!
//! Each process runs one barrier (which also installs the group and its
//! schedule at the engine), then `iters` consecutive barriers; the figure
//! is the mean over processes of (end - start) / iters, as the paper
//! averages consecutive barriers at each node. GB is reported at its best
//! tree degree, as the paper did (every degree 1..n-1 and the binomial tree
//! up to 32 nodes; above that, binomial and degrees 2..64 in powers of two).

use std::cell::RefCell;
use std::rc::Rc;

use outboard_host::{BarrierAlgorithm, Mode};

use super::coll::{barrier, run_all, side_by_side};
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::time::Time;

/// Mean barrier latency in microseconds over `iters` consecutive barriers.
pub fn latency(profile: &Profile, n: u32, mode: Mode, algo: BarrierAlgorithm, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let spans: Shared<Vec<f64>> = Rc::new(RefCell::new(Vec::new()));
    run_all(profile, n, seed, |p, _rank, mut port, mut g| {
        let spans = spans.clone();
        async move {
            barrier(&p, &mut port, &mut g, mode, algo).await?;
            let t0 = p.now();
            for _ in 0..iters {
                barrier(&p, &mut port, &mut g, mode, algo).await?;
            }
            spans.borrow_mut().push(p.now().since(t0).as_us());
            Ok(())
        }
    })?;
    let s = spans.borrow();
    Ok(s.iter().sum::<f64>() / s.len() as f64 / f64::from(iters))
}

/// The tree degrees the GB search tries for `n` nodes (0 = binomial).
pub fn gb_degrees(n: u32) -> Vec<u32> {
    if n <= 32 {
        (0..n.max(2)).collect()
    } else {
        let mut d = vec![0];
        let mut k = 2;
        while k <= 64 && k < n {
            d.push(k);
            k *= 2;
        }
        d
    }
}

/// GB at its best degree: (latency, degree).
pub fn best_gb(profile: &Profile, n: u32, mode: Mode, iters: u32, seed: u64) -> Result<(f64, u32), ExperimentError> {
    let mut best = (f64::INFINITY, 0);
    for d in gb_degrees(n) {
        let us = latency(profile, n, mode, BarrierAlgorithm::GatherBroadcast { degree: d }, iters, seed)?;
        if us < best.0 {
            best = (us, d);
        }
    }
    Ok(best)
}

type Ids = [Option<&'static [&'static str]>; 3];

/// Paper ids (host, nic, factor) of a GM-level point.
fn gm_ids(profile: &str, n: u32, pe: bool) -> Ids {
    match (profile, n, pe) {
        ("gm-lanai43", 16, true) => [
            Some(&["barrier-gm-pe-nic-16", "barrier-gm-pe-foi-16"]),
            Some(&["barrier-gm-pe-nic-16"]),
            Some(&["barrier-gm-pe-foi-16"]),
        ],
        ("gm-lanai43", 16, false) => [
            Some(&["barrier-gm-gb-nic-16", "barrier-gm-gb-foi-16"]),
            Some(&["barrier-gm-gb-nic-16"]),
            Some(&["barrier-gm-gb-foi-16"]),
        ],
        ("gm-lanai43", 8, true) => [None, None, Some(&["barrier-gm-pe-foi-8-l43"])],
        ("gm-lanai72", 8, true) => [
            Some(&["barrier-gm-pe-host-8-l72"]),
            Some(&["barrier-gm-pe-nic-8-l72"]),
            Some(&["barrier-gm-pe-host-8-l72", "/", "barrier-gm-pe-nic-8-l72"]),
        ],
        _ => [None, None, None],
    }
}

/// Paper ids (host, nic, factor) of an MPI-level PE point.
fn mpi_ids(profile: &str, n: u32) -> Ids {
    match (profile, n) {
        ("gm-lanai43", 16) => [
            Some(&["barrier-mpi-hb-16-l43"]),
            Some(&["barrier-mpi-nb-16-l43"]),
            Some(&["barrier-mpi-hb-16-l43", "/", "barrier-mpi-nb-16-l43"]),
        ],
        ("gm-lanai72", 8) => [
            Some(&["barrier-mpi-hb-8-l72"]),
            Some(&["barrier-mpi-nb-8-l72"]),
            Some(&["barrier-mpi-hb-8-l72", "/", "barrier-mpi-nb-8-l72"]),
        ],
        _ => [None, None, None],
    }
}

fn default_nodes(p: &Params) -> Vec<u32> {
    if p.nodes.is_empty() {
        vec![2, 4, 8, 16]
    } else {
        p.nodes.clone()
    }
}

fn check_nodes(nodes: &[u32]) -> Result<(), ExperimentError> {
    match nodes.iter().find(|&&n| n < 2) {
        Some(n) => Err(ExperimentError::Param(format!("a barrier needs at least 2 nodes, got {n}"))),
        None => Ok(()),
    }
}

/// `outboard sim barrier`: GM level, PE and GB.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = default_nodes(p);
    check_nodes(&nodes)?;
    // A profile that prices the NIC collective protocol selects its
    // comparison instead (issue 20 part 4).
    if p.profiles.iter().any(|prof| prof.coll_proto.is_some()) {
        return super::nic_barrier::run(p, &nodes, progress);
    }
    let total = p.profiles.len() * nodes.len();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        for &n in &nodes {
            let pe = BarrierAlgorithm::PairwiseExchange;
            let h = latency(prof, n, Mode::HostBased, pe, p.iters, p.seed)?;
            let o = latency(prof, n, Mode::Offloaded, pe, p.iters, p.seed)?;
            rows.extend(side_by_side(&format!("{} PE", prof.name), n, 0, "latency", "us", h, o, gm_ids(&prof.name, n, true)));
            let (h, hd) = best_gb(prof, n, Mode::HostBased, p.iters, p.seed)?;
            let (o, od) = best_gb(prof, n, Mode::Offloaded, p.iters, p.seed)?;
            rows.extend(side_by_side(&format!("{} GB", prof.name), n, 0, "latency", "us", h, o, gm_ids(&prof.name, n, false)));
            notes.push(format!(
                "{} {n} nodes: best GB degree host {}, nic {}",
                prof.name,
                BarrierAlgorithm::GatherBroadcast { degree: hd }.short_name(),
                BarrierAlgorithm::GatherBroadcast { degree: od }.short_name()
            ));
            done += 1;
            progress(done, total);
        }
    }
    notes.push("factor = host-based / offloaded latency; host figures marked a*b are the paper's NIC latency times its factor".into());
    Ok(Outcome {
        title: "Barrier latency, GM level (dissertation 3.5.1, Figure 3.6): host-based vs offloaded".into(),
        x: XAxis::Nodes,
        rows,
        notes,
    })
}

/// `outboard sim barrier-mpi`: the PE barrier through the MPI layer
/// (profile `[mpi]` costs), and the layer's overhead on the offloaded
/// barrier.
pub(super) fn run_mpi(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = default_nodes(p);
    check_nodes(&nodes)?;
    let total = p.profiles.len() * nodes.len();
    let mut rows = Vec::new();
    let mut done = 0;
    let pe = BarrierAlgorithm::PairwiseExchange;
    for prof in &p.profiles {
        let mpi = prof.at_mpi_level();
        for &n in &nodes {
            let h = latency(&mpi, n, Mode::HostBased, pe, p.iters, p.seed)?;
            let o = latency(&mpi, n, Mode::Offloaded, pe, p.iters, p.seed)?;
            rows.extend(side_by_side(&format!("{} PE", mpi.name), n, 0, "latency", "us", h, o, mpi_ids(&prof.name, n)));
            let gm = latency(prof, n, Mode::Offloaded, pe, p.iters, p.seed)?;
            let mut over =
                Row::new(format!("{} PE", mpi.name), n, 0, "mpi overhead", o - gm, "us");
            match (prof.name.as_str(), n) {
                ("gm-lanai43", 16) => over = over.with_paper(&["barrier-mpi-overhead-16-l43"]),
                ("gm-lanai72", 8) => over = over.with_paper(&["barrier-mpi-overhead-8-l72"]),
                _ => {}
            }
            rows.push(over);
            done += 1;
            progress(done, total);
        }
    }
    Ok(Outcome {
        title: "MPI_Barrier latency (dissertation 3.5.2-3.5.3, Figures 3.7-3.8): host-based vs offloaded PE".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec!["mpi overhead = offloaded PE through the MPI layer minus the same at the GM level".into()],
    })
}

/// When each process entered and left each barrier (for tests): rows of
/// (enter, leave) per process, in iteration order.
pub fn entries_and_exits(
    profile: &Profile,
    n: u32,
    mode: Mode,
    algo: BarrierAlgorithm,
    iters: u32,
    max_skew_us: f64,
    seed: u64,
) -> Result<Vec<Vec<(Time, Time)>>, ExperimentError> {
    let log: Shared<Vec<Vec<(Time, Time)>>> = Rc::new(RefCell::new(vec![Vec::new(); n as usize]));
    run_all(profile, n, seed, |p, rank, mut port, mut g| {
        let log = log.clone();
        async move {
            for _ in 0..iters {
                let d = p.skew(crate::time::Dur::from_us(max_skew_us));
                p.compute(d).await;
                let enter = p.now();
                barrier(&p, &mut port, &mut g, mode, algo).await?;
                log.borrow_mut()[rank as usize].push((enter, p.now()));
            }
            Ok(())
        }
    })?;
    let v = log.borrow().clone();
    Ok(v)
}
