//! `coll-move`: allgather, alltoall, reduce-scatter, gather, scatter and
//! scan time against each member's block size, offloaded and host-based,
//! each beside its bound - the host library's own calls
//! (`outboard_host`'s `Port::start_allgather` and the others) on the
//! simulated engines.
//!
//! Timed as `coll-size` times: an untimed call, then `iters` back to back,
//! the figure the longest of the members' times per call. The bound of a
//! row is what no algorithm can beat on the profile's links: the bytes the
//! busiest member must take in or send out at the link's rate - `(n - 1)`
//! blocks for an allgather, an alltoall, a reduce-scatter, a gather's root
//! and a scatter's root, one block for a scan - plus a latency term, the
//! collective's own offloaded time for 8-byte blocks in the same run.
//! "of bound" is the time over the bound.
//!
//! Outboard's forms carry the whole assembled buffer in every message
//! (the blocks placed and combined by bitwise or), so where the blocks
//! are long these rows measure that cost: the gap to the bound grows with
//! the group (an alltoall's messages carry all `n * n` blocks).

use std::rc::Rc;

use outboard_host::{AllreduceAlgorithm, Layout, Mode, ReduceAlgorithm, TreeShape};

use super::bandwidth::push_bound_rows;
use super::coll::{sum_of, us_per_collective_each, MODES};
use super::{ExperimentError, Outcome, Params, XAxis};
use crate::profile::Profile;
use crate::time::Dur;

/// A collective the experiment times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Allgather, the allreduce chosen by length.
    Allgather,
    /// Alltoall, the allreduce chosen by length.
    Alltoall,
    /// Reduce-scatter of i64 sums (by length: an allreduce, or a tree
    /// reduce per block).
    ReduceScatter,
    /// Gather to rank 0 on a binomial tree.
    Gather,
    /// Scatter from rank 0 on a binomial tree.
    Scatter,
    /// Inclusive scan of i64 sums on the rank-order chain.
    Scan,
}

/// Every collective the experiment times, in row order.
pub const OPS: [Op; 6] = [Op::Allgather, Op::Alltoall, Op::ReduceScatter, Op::Gather, Op::Scatter, Op::Scan];

const BY_LENGTH: AllreduceAlgorithm = AllreduceAlgorithm::Auto(TreeShape::Binomial);

impl Op {
    /// The series' words for it.
    pub fn label(self) -> &'static str {
        match self {
            Op::Allgather => "allgather",
            Op::Alltoall => "alltoall",
            Op::ReduceScatter => "reduce-scatter",
            Op::Gather => "gather",
            Op::Scatter => "scatter",
            Op::Scan => "scan",
        }
    }

    /// Bytes the busiest member must move for blocks of `block` bytes
    /// among `n`.
    pub fn bound_bytes(self, n: u32, block: u32) -> f64 {
        let block = f64::from(block);
        match self {
            Op::Scan => block,
            _ => f64::from(n - 1) * block,
        }
    }

    /// Bytes `rank` passes: one block, or one per member.
    fn input(self, rank: u32, n: u32, block: u32) -> Vec<u8> {
        let blocks = match self {
            Op::Alltoall | Op::ReduceScatter => n,
            Op::Scatter if rank == 0 => n,
            Op::Scatter => 0,
            _ => 1,
        };
        (0..block / 8 * blocks).flat_map(|i| (i64::from(rank) + i64::from(i)).to_ne_bytes()).collect()
    }
}

/// Microseconds per call, the longest of the members' (each from its own
/// start), of `iters` back-to-back `op`s with blocks of `block` bytes
/// (whole i64 elements) on `n` nodes in `mode`.
pub fn time_us(profile: &Profile, n: u32, mode: Mode, op: Op, block: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    if block % 8 != 0 {
        return Err(ExperimentError::Param(format!("coll-move moves i64 elements: {block} bytes is no multiple of 8")));
    }
    let red = sum_of(false);
    let data: Rc<Vec<Vec<u8>>> = Rc::new((0..n).map(|rank| op.input(rank, n, block)).collect());
    let layout = Rc::new(Layout::even(n, block as usize));
    let each = us_per_collective_each(profile, n, seed, iters, Dur::ZERO, move |port, g, rank, _| {
        let data = &data[rank as usize];
        match op {
            Op::Allgather => port.start_allgather(g, mode, BY_LENGTH, &layout, data),
            Op::Alltoall => port.start_alltoall(g, mode, BY_LENGTH, block as usize, data),
            Op::ReduceScatter => port.start_reduce_scatter(g, mode, TreeShape::Binomial, red, &layout, data),
            Op::Gather => port.start_gather(g, mode, ReduceAlgorithm::Tree(TreeShape::Binomial), 0, &layout, data),
            Op::Scatter => port.start_scatter(g, mode, TreeShape::Binomial, 0, &layout, data),
            Op::Scan => port.start_scan(g, mode, red, data),
        }
    })?;
    Ok(each.into_iter().fold(0.0, f64::max))
}

/// Host-based runs stop here, as in `coll-size`.
const HOST_BASED_UP_TO: u32 = 64;

/// Block sizes measured when none are given.
const DEFAULT_SIZES: [u32; 3] = [8, 1024, 65_536];

/// `outboard sim coll-move`.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = if p.nodes.is_empty() { vec![16] } else { p.nodes.clone() };
    if let Some(n) = nodes.iter().find(|&&n| n < 2) {
        return Err(ExperimentError::Param(format!("coll-move needs at least 2 nodes, got {n}")));
    }
    let sizes = if p.sizes.is_empty() { DEFAULT_SIZES.to_vec() } else { p.sizes.clone() };
    let total = p.profiles.len() * nodes.len() * OPS.len() * (sizes.len() + 1);
    let mut rows = Vec::new();
    let mut done = 0;
    for profile in &p.profiles {
        for &n in &nodes {
            let modes: &[Mode] = if n <= HOST_BASED_UP_TO { &MODES } else { &[Mode::Offloaded] };
            for op in OPS {
                let latency = time_us(profile, n, Mode::Offloaded, op, 8, p.iters, p.seed)?;
                done += 1;
                progress(done, total);
                let series = format!("{} {}", profile.name, op.label());
                for &size in &sizes {
                    let bound = op.bound_bytes(n, size) * profile.wire.link_us_per_byte + latency;
                    let time = |mode| if size == 8 && mode == Mode::Offloaded { Ok(latency) } else { time_us(profile, n, mode, op, size, p.iters, p.seed) };
                    let times = modes.iter().map(|&mode| Ok((mode, time(mode)?))).collect::<Result<Vec<_>, ExperimentError>>()?;
                    push_bound_rows(&mut rows, &series, n, size, &times, bound);
                    done += 1;
                    progress(done, total);
                }
            }
        }
    }
    Ok(Outcome {
        title: "Data-movement collectives and scan against block size, offloaded and host-based, beside the bound".into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "size = each member's block; bound = bytes the busiest member must move ((n-1) blocks; a scan one) at the profile's link rate + the collective's own offloaded time for 8-byte blocks; i64 SUM, rank 0 the root".into(),
            "no paper figure: these rows are predictions (P) of the profiles; up to 8 KiB of assembled data every message carries all of it, beyond that a collective runs per block".into(),
            format!("host-based rows only up to {HOST_BASED_UP_TO} nodes"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every collective runs in both modes on a small group, never below
    /// its bound, and a longer block takes longer.
    #[test]
    fn every_collective_runs_at_or_above_its_bound_in_both_modes() {
        let profile = Profile::builtin("dpu400");
        for op in OPS {
            let short = time_us(&profile, 5, Mode::Offloaded, op, 8, 2, 1).unwrap();
            for mode in MODES {
                let long = time_us(&profile, 5, mode, op, 4096, 2, 1).unwrap();
                let bound = op.bound_bytes(5, 4096) * profile.wire.link_us_per_byte;
                assert!(long >= bound, "{op:?} {mode:?}: {long} us below the bound's bandwidth term {bound}");
                if mode == Mode::Offloaded {
                    assert!(long > short, "{op:?}: 4 KiB blocks ({long} us) no slower than 8 B ({short} us)");
                }
            }
        }
    }

    #[test]
    fn bounds_count_the_busiest_member_s_blocks() {
        assert_eq!(Op::Allgather.bound_bytes(4, 100), 300.0);
        assert_eq!(Op::Scan.bound_bytes(4, 100), 100.0);
    }
}
