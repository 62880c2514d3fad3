//! Split-phase overlap in the OSU style (`osu_ibarrier`, `osu_iallreduce`),
//! host-based and offloaded, in virtual time.
//!
//! OSU's method: the pure latency is the mean of start + wait with nothing
//! between them; then every iteration starts the collective, computes for
//! the pure latency outside the library, and waits; overlap % = max(0, 1 -
//! (overall - compute) / pure) x 100. A host-based collective advances only
//! while its host is inside the library, so its overlap is what its first
//! step (sent at start) buys; an offloaded one runs on the NICs while the
//! host computes. `outboard bench overlap` measures the same on real
//! processes; on a machine without a core per engine the runtime cannot
//! show the offloaded figure, which is why the simulator prints it.

use outboard_host::{AllreduceAlgorithm, BarrierAlgorithm, Mode};

use super::coll::{contribution, mean_us_per_collective, sum_of, MODES};
use super::{ExperimentError, Outcome, Params, Row, XAxis};
use crate::profile::Profile;
use crate::time::Dur;

/// The collectives measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Pairwise-exchange barrier (`osu_ibarrier`).
    Barrier,
    /// Recursive-doubling allreduce of one i64 (`osu_iallreduce`, 8 B).
    Allreduce,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Barrier => "barrier",
            Op::Allreduce => "allreduce",
        }
    }
}

/// Mean microseconds per iteration (over processes and iterations) of
/// `iters` split-phase collectives, each with `compute` of computation
/// between its start and its wait.
pub fn per_iteration(
    profile: &Profile,
    n: u32,
    mode: Mode,
    op: Op,
    compute: Dur,
    iters: u32,
    seed: u64,
) -> Result<f64, ExperimentError> {
    let red = sum_of(false);
    mean_us_per_collective(profile, n, seed, iters, compute, move |port, g, rank, it| match op {
        Op::Barrier => port.start_barrier(g, mode, BarrierAlgorithm::PairwiseExchange),
        Op::Allreduce => port.start_allreduce(g, mode, AllreduceAlgorithm::RecursiveDoubling, red, &contribution(false, rank, it)),
    })
}

/// OSU's overlap percentage from the pure latency and the overall time
/// per iteration with `pure` of computation in it.
pub fn overlap_percent(pure: f64, overall: f64) -> f64 {
    if pure <= 0.0 {
        return 0.0;
    }
    (1.0 - (overall - pure) / pure).max(0.0) * 100.0
}

/// `outboard sim overlap`: for each profile, node count and collective,
/// pure latency, overall time and overlap, host-based beside offloaded.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = if p.nodes.is_empty() { vec![2, 4, 8, 16] } else { p.nodes.clone() };
    if let Some(n) = nodes.iter().find(|&&n| n < 2) {
        return Err(ExperimentError::Param(format!("overlap needs at least 2 nodes, got {n}")));
    }
    let ops = [Op::Barrier, Op::Allreduce];
    let total = p.profiles.len() * nodes.len() * ops.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for profile in &p.profiles {
        for &n in &nodes {
            for op in ops {
                let series = format!("{} {}", profile.name, op.name());
                let size = if op == Op::Allreduce { 8 } else { 0 };
                for mode in MODES {
                    let pure = per_iteration(profile, n, mode, op, Dur::ZERO, p.iters, p.seed)?;
                    let overall = per_iteration(profile, n, mode, op, Dur::from_us(pure), p.iters, p.seed)?;
                    let [pm, om, vm] = match mode {
                        Mode::HostBased => ["host pure", "host overall", "host overlap"],
                        Mode::Offloaded => ["nic pure", "nic overall", "nic overlap"],
                    };
                    rows.push(Row::new(series.clone(), n, size, pm, pure, "us"));
                    rows.push(Row::new(series.clone(), n, size, om, overall, "us"));
                    rows.push(Row::new(series.clone(), n, size, vm, overlap_percent(pure, overall), "%"));
                }
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "OSU-style split-phase overlap: start, compute for the pure latency, wait".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "overlap % = max(0, 1 - (overall - pure) / pure) x 100 (OSU); barrier = pairwise exchange, allreduce = recursive doubling of one i64".into(),
            "no paper figure: the dissertation argues the overlap (3.1, 4.1) but does not measure it; the issue asks for offloaded close to 100 %".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloaded_collectives_overlap_computation_and_host_based_do_not() {
        let profile = Profile::builtin("gm-lanai43");
        for op in [Op::Barrier, Op::Allreduce] {
            let mut overlap = [0.0; 2];
            for (i, mode) in MODES.into_iter().enumerate() {
                let pure = per_iteration(&profile, 8, mode, op, Dur::ZERO, 10, 1).unwrap();
                let overall = per_iteration(&profile, 8, mode, op, Dur::from_us(pure), 10, 1).unwrap();
                assert!(overall >= pure - 1e-9, "{op:?} {mode:?}: computing for {pure} us cannot take less ({overall})");
                overlap[i] = overlap_percent(pure, overall);
            }
            let [host, nic] = overlap;
            assert!(nic > 85.0, "{op:?}: offloaded overlap {nic:.1} %");
            assert!(host < 50.0, "{op:?}: host-based overlap {host:.1} %");
        }
    }

    #[test]
    fn overlap_formula_follows_osu() {
        assert_eq!(overlap_percent(10.0, 10.0), 100.0);
        assert_eq!(overlap_percent(10.0, 20.0), 0.0);
        assert_eq!(overlap_percent(10.0, 25.0), 0.0);
        assert!((overlap_percent(10.0, 15.0) - 50.0).abs() < 1e-12);
    }
}
