//! Allreduce and reduce on block trees ([`AllreduceAlgorithm::BlockTrees`],
//! [`ReduceAlgorithm::BlockTrees`]): the data cut into blocks, each
//! reduced on a tree rooted at a member of its own and broadcast back (or,
//! for a reduce, sent on to the root), as consecutive collectives of the
//! group started at once. [`cut`] fixes the blocks (every member must cut
//! alike: they pass equal lengths and share the packet size);
//! [`BlocksRun`] runs the blocks' collectives, each the usual offloaded or
//! host-based run of a rooted tree collective, and hands back their
//! results joined.
//!
//! Why blocks rather than one tree: on one tree the root receives the
//! whole data from each child and sends it to each, so the busiest member
//! moves `2 * children * N` bytes; rooted at different members, the blocks
//! spread that load, and each member moves about `2 (n - 1) / n * N`, the
//! bound of reduce-scatter plus allgather, while each block still pipelines
//! packet by packet through its tree.
//!
//! [`AllreduceAlgorithm::BlockTrees`]: super::AllreduceAlgorithm::BlockTrees
//! [`ReduceAlgorithm::BlockTrees`]: super::ReduceAlgorithm::BlockTrees

use std::ops::Range;

use super::hostbased::HostRun;
use super::offload::OffRun;
use super::run::CollRun;
use crate::{HostError, Port, PortIo};

/// The blocks an allreduce of `len` bytes in elements of `elem` bytes is
/// cut into among `roots` possible roots: at most one block per root, and
/// no more blocks than units of `unit` bytes the data fills (fewer, larger
/// blocks for small data), whole elements, sizes differing by at most one element,
/// covering the data in order. Empty data is one empty block.
pub(crate) fn cut(len: usize, elem: usize, roots: u32, unit: usize) -> Vec<Range<usize>> {
    let elem = elem.max(1);
    let elems = len / elem;
    let count = count(len, elem, roots, unit);
    let (base, extra) = (elems / count, elems % count);
    let mut start = 0;
    (0..count)
        .map(|b| {
            let n = base + usize::from(b < extra);
            let r = start * elem..(start + n) * elem;
            start += n;
            r
        })
        .collect()
}

/// How many blocks [`cut`] makes of the same data, without cutting it.
pub(crate) fn count(len: usize, elem: usize, roots: u32, unit: usize) -> usize {
    let elem = elem.max(1);
    let per_unit = (unit / elem).max(1);
    (len / elem).div_ceil(per_unit).clamp(1, roots.max(1) as usize)
}

/// One reduce or allreduce on block trees at one member: a run per block.
#[derive(Debug)]
pub(crate) struct BlocksRun {
    parts: Vec<Part>,
    /// The one part whose result the run hands back (a reduce-scatter's
    /// own block); `None`: all of them, joined.
    keep: Option<usize>,
    /// (part, its backlog entry) for each of this run's backlog entries,
    /// parts in order: the port posts them in that order.
    backlog: Vec<(usize, usize)>,
}

/// The run of one block: the allreduce's mode decides which.
#[derive(Debug)]
pub(crate) enum BlockRun {
    Offloaded(OffRun),
    /// Boxed: a host-based run is several times an offloaded one's size.
    HostBased(Box<HostRun>),
}

impl BlockRun {
    fn run<P: PortIo>(&mut self) -> &mut dyn CollRun<P> {
        match self {
            BlockRun::Offloaded(r) => r,
            BlockRun::HostBased(r) => r.as_mut(),
        }
    }
}

#[derive(Debug)]
struct Part {
    run: BlockRun,
    result: Option<Result<Vec<u8>, HostError>>,
}

impl BlocksRun {
    /// The run of the blocks' runs, in block order.
    pub fn new<P: PortIo>(runs: Vec<BlockRun>) -> BlocksRun {
        let mut parts: Vec<Part> = runs.into_iter().map(|run| Part { run, result: None }).collect();
        let backlog = parts.iter_mut().enumerate().flat_map(|(p, part)| (0..part.run.run::<P>().backlog()).map(move |i| (p, i))).collect();
        BlocksRun { parts, backlog, keep: None }
    }

    /// The run of `runs` that hands back only part `keep`'s result (the
    /// first failure in part order all the same).
    pub fn keeping<P: PortIo>(runs: Vec<BlockRun>, keep: usize) -> BlocksRun {
        BlocksRun { keep: Some(keep), ..BlocksRun::new::<P>(runs) }
    }
}

impl<P: PortIo> CollRun<P> for BlocksRun {
    fn backlog(&self) -> usize {
        self.backlog.len()
    }

    fn post(&mut self, port: &mut Port<P>, i: usize) -> Result<bool, HostError> {
        let (p, j) = self.backlog[i];
        self.parts[p].run.run().post(port, j)
    }

    fn abandon_posted(&mut self, port: &mut Port<P>) {
        for p in &mut self.parts {
            p.run.run().abandon_posted(port);
        }
    }

    /// Finished once every block's run is: a block that fails does not
    /// cut the others short (their peers still run them), and the first
    /// failure in block order is the result. Except a mismatch, here or
    /// upstream: members that called different collectives (a reduce to
    /// different roots) number the later blocks' schedules alike by first
    /// use, so those blocks meet packets they do not expect and would wait
    /// for good; the run ends with the failure at once.
    fn advance(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        let mut all = true;
        for p in &mut self.parts {
            if p.result.is_none() {
                p.result = p.run.run().advance(port);
                all &= p.result.is_some();
            }
            if let Some(Err(e)) = &p.result {
                if may_be_mismatch(e) {
                    let e = *e;
                    self.abandon_posted(port);
                    self.parts.clear();
                    return Some(Err(e));
                }
            }
        }
        if !all {
            return None;
        }
        let mut out = Vec::new();
        for (i, p) in std::mem::take(&mut self.parts).into_iter().enumerate() {
            match p.result.expect("all finished") {
                Ok(v) if self.keep.is_none_or(|k| k == i) => out.extend_from_slice(&v),
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(out))
    }

    fn needs_install(&self) -> bool {
        matches!(self.parts.first(), Some(Part { run: BlockRun::Offloaded(_), .. }))
    }
}

/// Whether `e` says the members called different collectives, or that
/// the collective failed upstream (which a mismatch there may be).
fn may_be_mismatch(e: &HostError) -> bool {
    use outboard_engine::CollError;
    matches!(e, HostError::Coll(super::CollectiveError::Mismatch { .. }))
        || matches!(e.coll_error(), Some(CollError::ScheduleMismatch { .. } | CollError::FailedUpstream { .. }))
}

#[cfg(test)]
mod tests {
    use super::cut;
    use proptest::prelude::*;

    proptest! {
        /// Blocks cover the data in order, in whole elements, at most one
        /// per root, at least a unit each where the data allows, and
        /// differ by at most one element.
        #[test]
        fn blocks_cover_the_data_in_whole_elements(elems in 0usize..5000, elem in prop_oneof![Just(1usize), Just(4), Just(8)], roots in 1u32..40, unit in 1usize..3000) {
            let len = elems * elem;
            let b = cut(len, elem, roots, unit);
            prop_assert!(!b.is_empty() && b.len() <= roots as usize);
            prop_assert_eq!(b[0].start, 0);
            prop_assert_eq!(b[b.len() - 1].end, len);
            for w in b.windows(2) {
                prop_assert_eq!(w[0].end, w[1].start);
            }
            let sizes: Vec<usize> = b.iter().map(|r| r.len()).collect();
            prop_assert!(sizes.iter().all(|s| s % elem == 0));
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(hi - lo <= elem);
            // More than one block only where fewer would leave a block
            // over a unit.
            let per_unit = (unit / elem).max(1);
            prop_assert!(b.len() == 1 || elems > (b.len() - 1) * per_unit, "{} blocks of {:?} for a unit of {}", b.len(), sizes, unit);
        }
    }

    #[test]
    fn small_data_is_one_block_and_large_data_one_per_root() {
        assert_eq!(cut(0, 8, 4, 8000), vec![0..0]);
        assert_eq!(cut(800, 8, 4, 8000), vec![0..800]);
        assert_eq!(cut(80_000, 8, 4, 8000).len(), 4);
        assert_eq!(cut(24, 8, 4, 1), vec![0..8, 8..16, 16..24]);
    }
}
