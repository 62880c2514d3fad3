//! `coll-size`: allreduce, broadcast and reduce time against message size,
//! offloaded and host-based, each beside its bandwidth bound.
//!
//! Every member runs an untimed collective (it installs the group and the
//! schedules), then `iters` back to back; the figure is the longest of
//! the members' times per collective, each from its own start - a
//! reduce's root, a broadcast's last receiver. (A mean over members would count a
//! reduce's leaves, which return as soon as their data is out, and put a
//! reduce below its own bound.) The bound of a row is what no
//! algorithm can beat on the profile's links: the bytes the busiest link
//! must carry at the link's rate - `2 (n - 1) / n * N` for an allreduce
//! (reduce-scatter plus allgather), `N` for a broadcast (the root sends
//! everything once) and for a reduce (the root takes in everything once) -
//! plus a latency term, the fastest 8-byte time of the same collective in
//! the same run. "of bound" is the time over the bound: 1.0 is the bound.
//!
//! Allreduce runs three ways: reduce and broadcast on one binomial tree,
//! recursive doubling, and block trees (a binomial tree rooted at another
//! member per block, [`AllreduceAlgorithm::BlockTrees`]); reduce two: one
//! binomial tree, and block trees (each block reduced at a member of its
//! own and sent on to the root, [`ReduceAlgorithm::BlockTrees`]);
//! broadcast two: one binomial tree, and a chain, whose packets pipeline
//! down it (each member forwards a packet as the next arrives).

use std::rc::Rc;

use outboard_host::{AllreduceAlgorithm, Mode, ReduceAlgorithm, TreeShape};

use super::coll::{sum_of, us_per_collective_each, MODES};
use super::{ExperimentError, Outcome, Params, Row, XAxis};
use crate::time::Dur;
use crate::profile::Profile;

/// A collective the experiment times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// An allreduce of i64 sums.
    Allreduce(AllreduceAlgorithm),
    /// A broadcast from rank 0 on a tree of this shape.
    Bcast(TreeShape),
    /// A reduce of i64 sums to rank 0.
    Reduce(ReduceAlgorithm),
}

/// Every collective the experiment times, in row order.
pub const OPS: [Op; 8] = [
    Op::Allreduce(AllreduceAlgorithm::Tree(TreeShape::Binomial)),
    Op::Allreduce(AllreduceAlgorithm::RecursiveDoubling),
    Op::Allreduce(AllreduceAlgorithm::BlockTrees(TreeShape::Binomial)),
    Op::Allreduce(AllreduceAlgorithm::Auto(TreeShape::Binomial)),
    Op::Bcast(TreeShape::Binomial),
    Op::Bcast(TreeShape::Chain),
    Op::Reduce(ReduceAlgorithm::Tree(TreeShape::Binomial)),
    Op::Reduce(ReduceAlgorithm::BlockTrees(TreeShape::Binomial)),
];

impl Op {
    /// The series' words for it.
    pub fn label(self) -> &'static str {
        match self {
            Op::Allreduce(AllreduceAlgorithm::Tree(_)) => "allreduce tree",
            Op::Allreduce(AllreduceAlgorithm::RecursiveDoubling) => "allreduce recursive-doubling",
            Op::Allreduce(AllreduceAlgorithm::BlockTrees(_)) => "allreduce block-trees",
            Op::Allreduce(AllreduceAlgorithm::Auto(_)) => "allreduce auto",
            Op::Bcast(TreeShape::Chain) => "bcast chain",
            Op::Bcast(_) => "bcast tree",
            Op::Reduce(ReduceAlgorithm::Tree(_)) => "reduce tree",
            Op::Reduce(ReduceAlgorithm::BlockTrees(_)) => "reduce block-trees",
        }
    }

    /// Bytes the busiest link must carry for `size` bytes among `n`.
    pub fn bound_bytes(self, n: u32, size: u32) -> f64 {
        let size = f64::from(size);
        match self {
            Op::Allreduce(_) => 2.0 * f64::from(n - 1) / f64::from(n) * size,
            Op::Bcast(_) | Op::Reduce(_) => size,
        }
    }

    /// The kind of collective, whatever the algorithm (ops of one kind
    /// share a latency term).
    fn kind(self) -> u8 {
        match self {
            Op::Allreduce(_) => 0,
            Op::Bcast(_) => 1,
            Op::Reduce(_) => 2,
        }
    }
}

/// Microseconds per collective, the longest of the members' (each from
/// its own start), of
/// `iters` back-to-back `op`s of `size` bytes (whole i64 elements) on `n`
/// nodes in `mode`.
pub fn time_us(profile: &Profile, n: u32, mode: Mode, op: Op, size: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    if size % 8 != 0 {
        return Err(ExperimentError::Param(format!("coll-size reduces i64 elements: {size} bytes is no multiple of 8")));
    }
    let red = sum_of(false);
    let data: Rc<Vec<Vec<u8>>> =
        Rc::new((0..n).map(|rank| (0..size / 8).flat_map(|i| (i64::from(rank) + i64::from(i)).to_ne_bytes()).collect()).collect());
    let each = us_per_collective_each(profile, n, seed, iters, Dur::ZERO, move |port, g, rank, _| {
        let data = &data[rank as usize];
        match op {
            Op::Allreduce(a) => port.start_allreduce(g, mode, a, red, data),
            Op::Bcast(t) => port.start_bcast(g, mode, t, 0, data),
            Op::Reduce(a) => port.start_reduce(g, mode, a, 0, red, data),
        }
    })?;
    Ok(each.into_iter().fold(0.0, f64::max))
}

/// The rows of one point against its bound: each mode's time and that
/// time over the bound, then the bound itself.
pub(super) fn push_bound_rows(rows: &mut Vec<Row>, series: &str, n: u32, size: u32, times: &[(Mode, f64)], bound: f64) {
    for &(mode, t) in times {
        let (metric, of) = match mode {
            Mode::Offloaded => ("nic time", "nic of bound"),
            Mode::HostBased => ("host time", "host of bound"),
        };
        rows.push(Row::new(series.to_string(), n, size, metric, t, "us"));
        rows.push(Row::new(series.to_string(), n, size, of, t / bound, "x"));
    }
    rows.push(Row::new(series.to_string(), n, size, "bound", bound, "us"));
}

/// Host-based runs stop here: above it a point takes minutes of
/// simulation, and the offloaded form is what the bound is about.
const HOST_BASED_UP_TO: u32 = 64;

/// The modes measured on `n` nodes.
fn modes_at(n: u32) -> &'static [Mode] {
    if n <= HOST_BASED_UP_TO {
        &MODES
    } else {
        &[Mode::Offloaded]
    }
}

/// The sizes measured when none are given: 8 B to 16 MiB by factors of 8
/// (64 MiB on request: `--sizes`).
const DEFAULT_SIZES: [u32; 5] = [8, 4096, 65_536, 1 << 20, 1 << 24];

/// `outboard sim coll-size`.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = if p.nodes.is_empty() { vec![16] } else { p.nodes.clone() };
    if let Some(n) = nodes.iter().find(|&&n| n < 2) {
        return Err(ExperimentError::Param(format!("coll-size needs at least 2 nodes, got {n}")));
    }
    let sizes = if p.sizes.is_empty() { DEFAULT_SIZES.to_vec() } else { p.sizes.clone() };
    let total = p.profiles.len() * nodes.len() * OPS.len() * (sizes.len() + 1);
    let mut rows = Vec::new();
    let mut done = 0;
    for profile in &p.profiles {
        for &n in &nodes {
            // The latency term per kind: the fastest offloaded 8-byte time.
            let mut latency = [f64::INFINITY; 3];
            for op in OPS {
                let t = time_us(profile, n, Mode::Offloaded, op, 8, p.iters, p.seed)?;
                latency[usize::from(op.kind())] = latency[usize::from(op.kind())].min(t);
                done += 1;
                progress(done, total);
            }
            for op in OPS {
                let series = format!("{} {}", profile.name, op.label());
                for &size in &sizes {
                    let bound = op.bound_bytes(n, size) * profile.wire.link_us_per_byte + latency[usize::from(op.kind())];
                    let times = modes_at(n).iter().map(|&mode| Ok((mode, time_us(profile, n, mode, op, size, p.iters, p.seed)?))).collect::<Result<Vec<_>, ExperimentError>>()?;
                    push_bound_rows(&mut rows, &series, n, size, &times, bound);
                    done += 1;
                    progress(done, total);
                }
            }
        }
    }
    Ok(Outcome {
        title: "Collective time against size, offloaded and host-based, beside the bandwidth bound".into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "bound = bytes the busiest link must carry (allreduce 2(n-1)/n * N, broadcast and reduce N) at the profile's link rate + the fastest offloaded 8-byte time of the collective; i64 SUM, rank 0 the root".into(),
            "no paper figure: the papers measured one-packet collectives; these rows are predictions (P) of the profiles".into(),
            format!("host-based rows only up to {HOST_BASED_UP_TO} nodes"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On 16 nodes of today's profile, a 1 MiB allreduce on block trees
    /// beats one tree and recursive doubling, offloaded: its members share
    /// the load the single tree puts on its root and inner members.
    #[test]
    fn block_trees_beat_one_tree_for_large_allreduces() {
        let profile = Profile::builtin("dpu400");
        let t = |a| time_us(&profile, 16, Mode::Offloaded, Op::Allreduce(a), 1 << 20, 2, 1).unwrap();
        let (tree, rd, blocks) = (
            t(AllreduceAlgorithm::Tree(TreeShape::Binomial)),
            t(AllreduceAlgorithm::RecursiveDoubling),
            t(AllreduceAlgorithm::BlockTrees(TreeShape::Binomial)),
        );
        assert!(blocks < tree && blocks < rd, "block trees {blocks:.1} us, tree {tree:.1}, recursive doubling {rd:.1}");
    }

    /// The allreduce chosen by length follows the profile's measured
    /// crossovers (`[tuning]`): recursive doubling's schedule for short
    /// data, block trees' for long, in both modes.
    #[test]
    fn an_allreduce_by_length_runs_doubling_short_and_block_trees_long() {
        let profile = Profile::builtin("dpu400");
        for mode in [Mode::Offloaded, Mode::HostBased] {
            let t = |a, size| time_us(&profile, 8, mode, Op::Allreduce(a), size, 2, 1).unwrap();
            let auto = AllreduceAlgorithm::Auto(TreeShape::Binomial);
            assert_eq!(t(auto, 8), t(AllreduceAlgorithm::RecursiveDoubling, 8), "{mode:?}, 8 B");
            assert_eq!(t(auto, 1 << 20), t(AllreduceAlgorithm::BlockTrees(TreeShape::Binomial), 1 << 20), "{mode:?}, 1 MiB");
        }
    }

    /// Likewise a 1 MiB reduce on block trees beats one tree: the root's
    /// engine no longer combines the whole data once per child.
    #[test]
    fn block_trees_beat_one_tree_for_large_reduces() {
        let profile = Profile::builtin("dpu400");
        let t = |a| time_us(&profile, 16, Mode::Offloaded, Op::Reduce(a), 1 << 20, 4, 1).unwrap();
        let (tree, blocks) = (t(ReduceAlgorithm::Tree(TreeShape::Binomial)), t(ReduceAlgorithm::BlockTrees(TreeShape::Binomial)));
        assert!(blocks < tree, "block trees {blocks:.1} us, tree {tree:.1}");
    }

    #[test]
    fn bounds_follow_the_bytes_the_busiest_link_carries() {
        assert_eq!(Op::Allreduce(AllreduceAlgorithm::RecursiveDoubling).bound_bytes(4, 1000), 1500.0);
        assert_eq!(Op::Bcast(TreeShape::Chain).bound_bytes(4, 1000), 1000.0);
        assert_eq!(Op::Reduce(ReduceAlgorithm::BlockTrees(TreeShape::Binomial)).bound_bytes(1024, 8), 8.0);
    }
}
