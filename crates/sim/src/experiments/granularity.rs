//! Granularity of computation (dissertation 3.5.4, Figure 3.11) and the
//! synthetic applications (3.5.6, Figure 3.14), with the PE barrier.
//!
//! Granularity: a loop of `compute(c)` then a barrier. The paper's
//! figures obey c = b / (1 - e) exactly (the 0.9 figures are five times
//! the 0.5 ones), b being the barrier time per loop; so for each efficiency
//! e we find c with c = b(c) / (1 - e), b(c) measured in that loop (the
//! loop time less c), by fixed-point iteration from b(0).
//!
//! Which level the paper's figures belong to: its text says MPI, but the
//! barrier times its figures imply (c x (1 - e): 183.20 / 102.38 us at 16
//! nodes on LANai 4.3, 89.59 / 60.31 us at 8 nodes on LANai 7.2) are its
//! *GM-level* latencies (181.81, 102.14, 90.24 us) within 1 % for three of
//! the four, and 13-15 % below its MPI_Barrier latencies for both
//! host-based points (216.70, 102.86 us), where the MPI layer's cost shows
//! most; the fourth (60.31) matches neither level (49.25 GM, 46.41 MPI).
//! So the paper ids are compared with the GM-level series; the MPI-level
//! series (`+mpi`) is printed beside it without ids (docs/simulator.md).
//!
//! Synthetic applications: steps of computation, each followed by a
//! barrier; step k's mean is 10 k us, and each node's time varies
//! uniformly by +-10 % of the mean (drawn from the seed). Two
//! applications: 8 steps (360 us of computation) and 20 steps (2,100 us).
//! The figure is the execution time of one run of the application
//! (averaged over `iters` runs, as the last process sees it).

use std::cell::RefCell;
use std::rc::Rc;

use outboard_host::{BarrierAlgorithm, Mode};

use super::coll::{barrier, run_all, side_by_side, MODES};
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::time::{Dur, Time};

const PE: BarrierAlgorithm = BarrierAlgorithm::PairwiseExchange;

/// Barrier time per loop (us) of `iters` loops of compute(`c_us`) +
/// barrier: the mean over processes of loop time less `c_us`.
pub fn barrier_time_with_compute(
    profile: &Profile,
    n: u32,
    mode: Mode,
    c_us: f64,
    iters: u32,
    seed: u64,
) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let spans: Shared<Vec<f64>> = Rc::new(RefCell::new(Vec::new()));
    run_all(profile, n, seed, |p, _r, mut port, mut g| {
        let spans = spans.clone();
        async move {
            barrier(&p, &mut port, &mut g, mode, PE).await?;
            let t0 = p.now();
            for _ in 0..iters {
                p.compute(Dur::from_us(c_us)).await;
                barrier(&p, &mut port, &mut g, mode, PE).await?;
            }
            spans.borrow_mut().push(p.now().since(t0).as_us());
            Ok(())
        }
    })?;
    let s = spans.borrow();
    Ok(s.iter().sum::<f64>() / s.len() as f64 / f64::from(iters) - c_us)
}

/// Computation per barrier for efficiency `e` (see the module doc).
pub fn compute_for_efficiency(
    profile: &Profile,
    n: u32,
    mode: Mode,
    e: f64,
    iters: u32,
    seed: u64,
) -> Result<f64, ExperimentError> {
    let mut c = barrier_time_with_compute(profile, n, mode, 0.0, iters, seed)? / (1.0 - e);
    for _ in 0..3 {
        c = barrier_time_with_compute(profile, n, mode, c, iters, seed)? / (1.0 - e);
    }
    Ok(c)
}

fn gran_ids(profile: &str, n: u32, e: f64) -> [Option<&'static [&'static str]>; 3] {
    let pct = (e * 100.0).round() as u32;
    match (profile, n, pct) {
        ("gm-lanai43", 16, 50) => [
            Some(&["gran-eff50-hb-16-l43"]),
            Some(&["gran-eff50-nb-16-l43"]),
            Some(&["gran-eff50-hb-16-l43", "/", "gran-eff50-nb-16-l43"]),
        ],
        ("gm-lanai43", 16, 90) => [
            Some(&["gran-eff90-hb-16-l43"]),
            Some(&["gran-eff90-nb-16-l43"]),
            Some(&["gran-eff90-hb-16-l43", "/", "gran-eff90-nb-16-l43"]),
        ],
        ("gm-lanai72", 8, 50) => [
            Some(&["gran-eff50-hb-8-l72"]),
            Some(&["gran-eff50-nb-8-l72"]),
            Some(&["gran-eff50-hb-8-l72", "/", "gran-eff50-nb-8-l72"]),
        ],
        ("gm-lanai72", 8, 90) => [
            Some(&["gran-eff90-hb-8-l72"]),
            Some(&["gran-eff90-nb-8-l72"]),
            Some(&["gran-eff90-hb-8-l72", "/", "gran-eff90-nb-8-l72"]),
        ],
        _ => [None, None, None],
    }
}

/// The paper's node count for a profile (16 LANai 4.3 cards, 8 LANai 7.2).
fn paper_nodes(p: &Params, profile: &Profile) -> Vec<u32> {
    if !p.nodes.is_empty() {
        p.nodes.clone()
    } else if profile.name == "gm-lanai43" {
        vec![16]
    } else {
        vec![8]
    }
}

/// `outboard sim granularity`.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let effs = [0.25, 0.5, 0.75, 0.9];
    let total: usize = p.profiles.iter().map(|pr| 2 * paper_nodes(p, pr).len() * effs.len()).sum();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        // The paper's figures are compared with the GM level (see the
        // module doc: they imply its GM-level barrier latencies); the MPI
        // level its text names is printed beside them without ids.
        for (level, ids) in [(prof.clone(), true), (prof.at_mpi_level(), false)] {
            for n in paper_nodes(p, prof) {
                for e in effs {
                    let h = compute_for_efficiency(&level, n, Mode::HostBased, e, p.iters, p.seed)?;
                    let o = compute_for_efficiency(&level, n, Mode::Offloaded, e, p.iters, p.seed)?;
                    let size = (e * 100.0).round() as u32;
                    let ids = if ids { gran_ids(&prof.name, n, e) } else { [None, None, None] };
                    rows.extend(side_by_side(&level.name, n, size, "compute", "us", h, o, ids));
                    done += 1;
                    progress(done, total);
                }
            }
        }
    }
    Ok(Outcome {
        title: "Granularity (dissertation 3.5.4): computation per barrier for an efficiency factor (GM and MPI level, PE)".into(),
        x: XAxis::Column("efficiency (%)"),
        rows,
        notes: vec![
            "the bytes column holds the efficiency in percent".into(),
            "c = b / (1 - e), b = barrier time per loop with c of computation before each barrier (the relation the paper's figures follow)".into(),
            "series without +mpi: the GM level, compared with the paper (its figures imply its GM-level barrier latencies, not its MPI ones); +mpi: through the MPI layer its text names, no ids".into(),
        ],
    })
}

/// Execution time (us) of one run of a synthetic application whose step
/// k (1-based) computes 10 k us +-10 %, averaged over `iters` runs.
pub fn synthetic_time(
    profile: &Profile,
    n: u32,
    mode: Mode,
    steps: u32,
    iters: u32,
    seed: u64,
) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let end: Shared<Time> = Rc::new(RefCell::new(Time::ZERO));
    let start: Shared<Time> = Rc::new(RefCell::new(Time(u64::MAX)));
    run_all(profile, n, seed, |p, _r, mut port, mut g| {
        let (end, start) = (end.clone(), start.clone());
        async move {
            barrier(&p, &mut port, &mut g, mode, PE).await?;
            {
                let mut s = start.borrow_mut();
                *s = (*s).min(p.now());
            }
            for _ in 0..iters {
                for k in 1..=steps {
                    let mean = 10.0 * f64::from(k);
                    let c = Dur::from_us(0.9 * mean) + p.skew(Dur::from_us(0.2 * mean));
                    p.compute(c).await;
                    barrier(&p, &mut port, &mut g, mode, PE).await?;
                }
            }
            let mut e = end.borrow_mut();
            *e = (*e).max(p.now());
            Ok(())
        }
    })?;
    let (s, e) = (*start.borrow(), *end.borrow());
    Ok(e.since(s).as_us() / f64::from(iters))
}

/// `outboard sim synthetic`.
pub(super) fn run_synthetic(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let apps = [(8u32, 360u32), (20, 2_100)];
    let total: usize = p.profiles.iter().map(|pr| paper_nodes(p, pr).len() * apps.len()).sum();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        let mpi = prof.at_mpi_level();
        for n in paper_nodes(p, prof) {
            for (steps, compute) in apps {
                let mut t = [0.0; 2];
                for (i, m) in MODES.into_iter().enumerate() {
                    t[i] = synthetic_time(&mpi, n, m, steps, p.iters, p.seed)?;
                }
                let id: Option<&'static [&'static str]> = match (prof.name.as_str(), n, compute) {
                    ("gm-lanai43", 16, 360) => Some(&["synth-360-16-l43"]),
                    ("gm-lanai43", 16, 2_100) => Some(&["synth-2100-16-l43"]),
                    ("gm-lanai72", 8, 360) => Some(&["synth-360-8-l72"]),
                    ("gm-lanai72", 8, 2_100) => Some(&["synth-2100-8-l72"]),
                    _ => None,
                };
                let series = mpi.name.clone();
                rows.extend(side_by_side(&series, n, compute, "time", "us", t[0], t[1], [None, None, id]));
                let c = f64::from(compute);
                rows.push(Row::new(series, n, compute, "sync factor", (t[0] - c) / (t[1] - c), "x"));
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "Synthetic applications (dissertation 3.5.6): execution time, host-based vs offloaded barrier (MPI level, PE)".into(),
        x: XAxis::Column("computation per application run (us)"),
        rows,
        notes: vec![
            "the bytes column holds the application's total computation in us".into(),
            "sync factor = (host time - computation) / (offloaded time - computation): the time outside computation only".into(),
        ],
    })
}
