//! The data-movement collectives - allgather, gather, scatter, alltoall,
//! reduce-scatter - and the scans, built on the engine's one collective
//! model: a member's value goes to some ranks at each step, and packets
//! received are folded into it.
//!
//! # How each one runs
//!
//! Up to the allreduce's recursive-doubling length of assembled data
//! (`PortIo::allreduce_doubling_max`), a member's block travels in a
//! buffer the size of the whole result (the [`Layout`]'s extent), zero
//! everywhere but where the member's own block lies:
//!
//! - **allgather** is an allreduce of those buffers with bitwise or on
//!   64-bit words: blocks do not overlap, so or-ing places each one, bit
//!   for bit, whatever the order of combination (recursive doubling, the
//!   allgather's own short-data algorithm: log2 n steps).
//! - **gather** is the reduce of the same buffers to the root.
//! - **scatter** is a broadcast of the root's whole buffer; each member
//!   keeps its block.
//! - **alltoall** is an allgather of every member's row of the n x n
//!   matrix of blocks; each member keeps its column.
//!
//! Beyond that length each runs as one collective per block, all under
//! way at once, so that each member moves each block once: a broadcast of
//! each block from its member (allgather), a step of the pairwise
//! exchange per shift (alltoall), a move of each block between its member
//! and the root (gather, scatter).
//! - **reduce-scatter**: short data is an allreduce of which each member
//!   keeps its block; long data is one tree reduce per block, rooted at
//!   the block's owner, all started at once, so every member sends each
//!   block once.
//! - **scan** and **exclusive scan** run on a chain in rank order
//!   ([`super::schedules::scan_chain`]), each rank folding its
//!   predecessor's prefix in as the left operand.
//!
//! Both modes run these same schedules, offloaded (the engines place,
//! combine and forward without the hosts) or host-based.
//!
//! # What it costs
//!
//! Short calls carry the whole buffer in every message, which costs
//! nothing while it fits a packet or two; long ones take `n` epochs of the
//! group's order per call, and every member passes a buffer per block
//! (members must cut alike). The engine has no step that forwards part of
//! its value, so there is no ring or recursive-halving form.

use std::ops::Range;

use outboard_engine::{CollError, Datatype, ReduceOp, Reduction};

use super::blocks::{BlockRun, BlocksRun};
use super::group::MovementForm::{self, PerBlock, ReduceScatterWhole, Whole};
use super::group::ScheduleKey;
use super::run::Spec;
use super::{AllreduceAlgorithm, BcastMode, CollRequest, CollectiveError, Group, Mode, ReduceAlgorithm, TreeShape};
use crate::{HostError, Port, PortIo};

/// Bitwise or on 64-bit words: combining zero-padded blocks that do not
/// overlap ([`Layout::placed`]) places each block whatever the order.
pub const PLACE: Reduction = Reduction { op: ReduceOp::Bor, dtype: Datatype::U64 };

/// Where each member's block lies in a collective's assembled buffer, in
/// bytes (MPI's counts and displacements times the element size). Blocks
/// may leave gaps but never overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    blocks: Vec<Range<usize>>,
}

impl Layout {
    /// `members` blocks of `len` bytes each, one after the other.
    ///
    /// # Panics
    /// If they span more than the address space ([`Layout::try_even`]
    /// says so instead).
    pub fn even(members: u32, len: usize) -> Layout {
        Layout::try_even(members, len).expect("blocks within the address space")
    }

    /// [`Layout::even`], or an error when the blocks would span more than
    /// the address space.
    pub fn try_even(members: u32, len: usize) -> Result<Layout, CollectiveError> {
        len.checked_mul(members as usize).ok_or(CollectiveError::BadLayout("the blocks end beyond the address space"))?;
        Ok(Layout { blocks: (0..members as usize).map(|r| r * len..(r + 1) * len).collect() })
    }

    /// Blocks of `counts[r]` bytes at offset `displs[r]`, one per member.
    /// An empty block's displacement is ignored (it lies at 0): it takes
    /// no room, so it neither overlaps nor stretches the extent.
    pub fn new(counts: &[usize], displs: &[usize]) -> Result<Layout, CollectiveError> {
        if counts.len() != displs.len() {
            return Err(CollectiveError::BadLayout("as many counts as displacements are needed"));
        }
        let mut blocks = Vec::with_capacity(counts.len());
        for (&c, &d) in counts.iter().zip(displs) {
            if c == 0 {
                blocks.push(0..0);
                continue;
            }
            let end = d.checked_add(c).ok_or(CollectiveError::BadLayout("a block ends beyond the address space"))?;
            blocks.push(d..end);
        }
        let mut sorted: Vec<&Range<usize>> = blocks.iter().filter(|b| !b.is_empty()).collect();
        sorted.sort_by_key(|b| b.start);
        if sorted.windows(2).any(|w| w[0].end > w[1].start) {
            return Err(CollectiveError::BadLayout("two members' blocks overlap"));
        }
        Ok(Layout { blocks })
    }

    /// Consecutive blocks of `counts[r]` bytes (a reduce-scatter's).
    pub fn packed(counts: &[usize]) -> Result<Layout, CollectiveError> {
        let mut displs = Vec::with_capacity(counts.len());
        let mut at = 0usize;
        for &c in counts {
            displs.push(at);
            at = at.checked_add(c).ok_or(CollectiveError::BadLayout("the blocks end beyond the address space"))?;
        }
        Layout::new(counts, &displs)
    }

    /// Bytes the assembled buffer spans: the end of its last block.
    pub fn extent(&self) -> usize {
        self.blocks.iter().map(|b| b.end).max().unwrap_or(0)
    }

    /// Member `rank`'s block.
    pub fn block(&self, rank: u32) -> Range<usize> {
        self.blocks[rank as usize].clone()
    }

    /// Members it has blocks for.
    pub fn members(&self) -> u32 {
        self.blocks.len() as u32
    }

    fn check(&self, g: &Group) -> Result<(), CollectiveError> {
        if self.members() != g.size() {
            return Err(CollectiveError::BadLayout("the layout needs one block per member of the group"));
        }
        Ok(())
    }

    /// The zero buffer of the extent, rounded up to whole words, with
    /// `data` in member `rank`'s block: what a member contributes to the
    /// [`PLACE`] reduction that assembles the blocks.
    pub fn placed(&self, rank: u32, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let block = self.block(rank);
        if data.len() != block.len() {
            return Err(length_mismatch(block.len(), data.len()));
        }
        let mut buf = vec![0u8; self.extent().next_multiple_of(PLACE.dtype.size())];
        buf[block].copy_from_slice(data);
        Ok(buf)
    }
}

/// The part of a run's result a call hands back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum View {
    /// All of it.
    Whole,
    /// These ranges of it, joined in order.
    Ranges(Vec<Range<usize>>),
    /// A buffer of `extent` zero bytes with each `moves` range of the
    /// result copied to its offset, and this member's own block (`own`)
    /// at its: the long-data forms, whose parts arrive one after the
    /// other in an order of their own.
    Assemble { extent: usize, moves: Vec<(Range<usize>, usize)>, own: Option<(Vec<u8>, usize)> },
}

impl View {
    /// One range of the result.
    pub(crate) fn range(r: Range<usize>) -> View {
        View::Ranges(std::iter::once(r).collect())
    }

    pub(crate) fn of(&self, v: Vec<u8>) -> Vec<u8> {
        match self {
            View::Whole => v,
            View::Ranges(rs) if rs.len() == 1 && rs[0].start == 0 => {
                let mut v = v;
                v.truncate(rs[0].end);
                v
            }
            View::Ranges(rs) => {
                let mut out = Vec::with_capacity(rs.iter().map(|r| r.len()).sum());
                for r in rs {
                    out.extend_from_slice(v.get(r.clone()).unwrap_or_default());
                }
                out
            }
            View::Assemble { extent, moves, own } => {
                let mut out = vec![0u8; *extent];
                for (r, at) in moves {
                    if let Some(part) = v.get(r.clone()) {
                        out[*at..*at + part.len()].copy_from_slice(part);
                    }
                }
                if let Some((data, at)) = own {
                    out[*at..*at + data.len()].copy_from_slice(data);
                }
                out
            }
        }
    }
}

/// A contribution of `got` bytes where `expected` were due.
fn length_mismatch(expected: usize, got: usize) -> HostError {
    let clip = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    CollectiveError::from(CollError::LengthMismatch { expected: clip(expected), got: clip(got) }).into()
}

/// Where the blocks of `members`, joined one after the other in that
/// order, go in `layout`'s buffer.
fn packed_moves(layout: &Layout, members: impl IntoIterator<Item = u32>) -> Vec<(Range<usize>, usize)> {
    let mut at = 0;
    members
        .into_iter()
        .map(|b| {
            let r = layout.block(b);
            let m = (at..at + r.len(), r.start);
            at += r.len();
            m
        })
        .collect()
}

/// Starts a data-movement call with `start` and, once it is under
/// way, counts it in `g`'s record of what ran ([`Group::taken`]) as `form`.
fn noted<P: PortIo>(
    g: &mut Group,
    mode: Mode,
    form: MovementForm,
    start: impl FnOnce(&mut Port<P>, &mut Group) -> Result<CollRequest, HostError>,
    port: &mut Port<P>,
) -> Result<CollRequest, HostError> {
    let r = start(port, g)?;
    g.note_call(mode.into(), form);
    Ok(r)
}

impl<P: PortIo> Port<P> {
    /// Starts an allgather: every member gets every member's `data`, each
    /// at its block of `layout` (an allgatherv when the blocks differ), in
    /// a buffer of the layout's extent (gaps zero). `algo` is the
    /// allreduce's ([`AllreduceAlgorithm::Auto`] chooses by length).
    pub fn start_allgather(&mut self, g: &mut Group, mode: Mode, algo: AllreduceAlgorithm, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        layout.check(g)?;
        if self.long(g, layout.extent()) {
            return noted(g, mode, PerBlock("allgather"), |p, g| p.allgather_by_broadcasts(g, mode, layout, data), self);
        }
        let buf = layout.placed(g.rank(), data)?;
        let spec = Spec { key: ScheduleKey::Allreduce(algo), reduction: Some(PLACE), data: &buf, want_result: true };
        noted(g, mode, Whole("allgather"), |p, g| p.start_coll_viewed(g, mode.into(), spec, View::range(0..layout.extent())), self)
    }

    /// Starts a gather to `root`: the root gets every member's `data` at
    /// its block of `layout` (a gatherv when the blocks differ), the
    /// others nothing. `algo` is the reduce's.
    pub fn start_gather(&mut self, g: &mut Group, mode: Mode, algo: impl Into<ReduceAlgorithm>, root: u32, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        Self::check_root(g, root)?;
        layout.check(g)?;
        if self.long(g, layout.extent()) {
            return noted(g, mode, PerBlock("gather"), |p, g| p.gather_by_transfers(g, mode, root, layout, data), self);
        }
        let buf = layout.placed(g.rank(), data)?;
        let key = match algo.into() {
            ReduceAlgorithm::Tree(t) => ScheduleKey::Reduce(t, root),
            ReduceAlgorithm::BlockTrees(t) => ScheduleKey::ReduceBlocks(t, root),
        };
        let spec = Spec { key, reduction: Some(PLACE), data: &buf, want_result: g.rank() == root };
        noted(g, mode, Whole("gather"), |p, g| p.start_coll_viewed(g, mode.into(), spec, View::range(0..layout.extent())), self)
    }

    /// Starts a scatter from `root`: each member gets its block of
    /// `layout` out of the root's `data` (the layout's extent; ignored
    /// elsewhere, where it may be empty). A scatterv when the blocks differ.
    pub fn start_scatter(&mut self, g: &mut Group, mode: Mode, tree: TreeShape, root: u32, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        Self::check_root(g, root)?;
        layout.check(g)?;
        let extent = layout.extent();
        if g.rank() == root && data.len() != extent {
            return Err(length_mismatch(extent, data.len()));
        }
        if self.long(g, extent) {
            return noted(g, mode, PerBlock("scatter"), |p, g| p.scatter_by_transfers(g, mode, root, layout, data), self);
        }
        let zeros;
        let data = if g.rank() == root {
            data
        } else {
            zeros = vec![0u8; extent];
            &zeros[..]
        };
        let spec = Spec { key: ScheduleKey::Bcast(tree, root), reduction: None, data, want_result: true };
        let mine = layout.block(g.rank());
        noted(g, mode, Whole("scatter"), |p, g| p.start_coll_viewed(g, mode.into(), spec, View::range(mine)), self)
    }

    /// Starts an alltoall: `data` is this member's `n` blocks of `block`
    /// bytes, block `j` for member `j`; the result is the `n` blocks the
    /// members sent this one, in rank order.
    pub fn start_alltoall(&mut self, g: &mut Group, mode: Mode, algo: AllreduceAlgorithm, block: usize, data: &[u8]) -> Result<CollRequest, HostError> {
        let n = g.size() as usize;
        let row = block.checked_mul(n).ok_or(CollectiveError::BadLayout("an alltoall's blocks span beyond the address space"))?;
        row.checked_mul(n).ok_or(CollectiveError::BadLayout("an alltoall's blocks span beyond the address space"))?;
        if self.long(g, row * n) {
            if data.len() != row {
                return Err(length_mismatch(row, data.len()));
            }
            return noted(g, mode, PerBlock("alltoall"), |p, g| p.alltoall_by_shifts(g, mode, block, data), self);
        }
        let matrix = Layout::even(g.size(), row);
        let buf = matrix.placed(g.rank(), data)?;
        let me = g.rank() as usize;
        let column = (0..n).map(|i| i * row + me * block..i * row + (me + 1) * block).collect();
        let spec = Spec { key: ScheduleKey::Allreduce(algo), reduction: Some(PLACE), data: &buf, want_result: true };
        noted(g, mode, Whole("alltoall"), |p, g| p.start_coll_viewed(g, mode.into(), spec, View::Ranges(column)), self)
    }

    /// Starts a reduce-scatter: every member passes the layout's extent
    /// of `red`'s elements, and each gets the combination of all members'
    /// block of `layout` at its own rank (`Layout::packed` of the counts,
    /// for MPI's reduce-scatter). Data up to the allreduce's recursive
    /// doubling length runs as an allreduce of which each member keeps its
    /// block; longer data as one reduce per block on a `tree` rooted at its
    /// owner, all under way at once.
    pub fn start_reduce_scatter(&mut self, g: &mut Group, mode: Mode, tree: TreeShape, red: Reduction, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        layout.check(g)?;
        let extent = layout.extent();
        if data.len() != extent {
            return Err(length_mismatch(extent, data.len()));
        }
        let elem = red.dtype.size();
        if (0..g.size()).any(|r| layout.block(r).start % elem != 0 || layout.block(r).len() % elem != 0) {
            return Err(CollectiveError::BadLayout("a reduce-scatter's blocks must hold whole elements").into());
        }
        let mine = layout.block(g.rank());
        if !self.long(g, extent) {
            let spec = Spec { key: ScheduleKey::Allreduce(AllreduceAlgorithm::Auto(tree)), reduction: Some(red), data, want_result: true };
            return noted(g, mode, ReduceScatterWhole, |p, g| p.start_coll_viewed(g, mode.into(), spec, View::range(mine)), self);
        }
        let me = g.rank();
        let parts: Vec<(ScheduleKey, &[u8], bool)> = (0..g.size()).map(|b| (ScheduleKey::Reduce(tree, b), &data[layout.block(b)], b == me)).collect();
        noted(g, mode, PerBlock("reduce-scatter"), |p, g| p.start_parts(g, mode, &parts, Some(red), Some(me as usize), true, View::Whole), self)
    }

    /// Starts an inclusive scan: member `r` gets the combination of members
    /// 0 to `r`'s `data`, left to right.
    pub fn start_scan(&mut self, g: &mut Group, mode: Mode, red: Reduction, data: &[u8]) -> Result<CollRequest, HostError> {
        let spec = Spec { key: ScheduleKey::Scan, reduction: Some(red), data, want_result: true };
        self.start_coll(g, mode.into(), spec)
    }

    /// Starts an exclusive scan: member `r` gets the combination of members
    /// 0 to `r - 1`'s `data`; member 0 gets nothing (MPI leaves its result
    /// undefined).
    pub fn start_exscan(&mut self, g: &mut Group, mode: Mode, red: Reduction, data: &[u8]) -> Result<CollRequest, HostError> {
        let spec = Spec { key: ScheduleKey::Exscan, reduction: Some(red), data, want_result: g.rank() > 0 };
        self.start_coll(g, mode.into(), spec)
    }

    /// Whether an assembled buffer of `extent` bytes is long: past the
    /// allreduce's recursive-doubling length, where carrying it whole in
    /// every message costs more than a collective per block. The same at
    /// every member (they pass the same layout and share the transport).
    fn long(&self, g: &Group, extent: usize) -> bool {
        g.size() > 1 && extent > self.io_ref().allreduce_doubling_max()
    }

    /// Starts one collective per part of `parts` (its schedule and this
    /// member's data), all under way at once as consecutive collectives of
    /// the group; the run hands back their results joined in order (only
    /// part `keep`'s, if given), seen through `view`.
    /// Each part says whether this member wants its result: the engine
    /// writes only those back.
    #[allow(clippy::too_many_arguments)]
    fn start_parts(
        &mut self,
        g: &mut Group,
        mode: Mode,
        parts: &[(ScheduleKey, &[u8], bool)],
        reduction: Option<Reduction>,
        keep: Option<usize>,
        want_result: bool,
        view: View,
    ) -> Result<CollRequest, HostError> {
        self.register_group(g)?;
        let mode: BcastMode = mode.into();
        let mut runs: Vec<BlockRun> = Vec::with_capacity(parts.len());
        for &(key, data, wanted) in parts {
            let part = Spec { key: self.key_for_len(g.size(), mode, key, data.len()), reduction, data, want_result: wanted };
            self.check_reduction(mode, &part)?;
            runs.push(self.block_run(g, mode, &part)?);
            g.note_taken(mode, part.key);
        }
        let run = match keep {
            Some(k) => BlocksRun::keeping::<P>(runs, k),
            None => BlocksRun::new::<P>(runs),
        };
        Ok(self.enqueue(g, mode, Box::new(run), want_result, view))
    }

    /// A long allgather: a broadcast of each member's block from that
    /// member, on binomial trees, all under way at once: each member takes
    /// in every other block once.
    fn allgather_by_broadcasts(&mut self, g: &mut Group, mode: Mode, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        let me = g.rank();
        if data.len() != layout.block(me).len() {
            return Err(length_mismatch(layout.block(me).len(), data.len()));
        }
        let zeros: Vec<Vec<u8>> = (0..g.size()).map(|b| if b == me { Vec::new() } else { vec![0u8; layout.block(b).len()] }).collect();
        let parts: Vec<(ScheduleKey, &[u8], bool)> =
            (0..g.size()).map(|b| (ScheduleKey::Bcast(TreeShape::Binomial, b), if b == me { data } else { &zeros[b as usize][..] }, true)).collect();
        let view = View::Assemble { extent: layout.extent(), moves: packed_moves(layout, 0..g.size()), own: None };
        self.start_parts(g, mode, &parts, None, None, true, view)
    }

    /// A long gather: each block moved from its member to the root, all
    /// under way at once.
    fn gather_by_transfers(&mut self, g: &mut Group, mode: Mode, root: u32, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        let me = g.rank();
        if data.len() != layout.block(me).len() {
            return Err(length_mismatch(layout.block(me).len(), data.len()));
        }
        let others: Vec<u32> = (0..g.size()).filter(|&b| b != root).collect();
        let zeros: Vec<Vec<u8>> = others.iter().map(|&b| if b == me { Vec::new() } else { vec![0u8; layout.block(b).len()] }).collect();
        let parts: Vec<(ScheduleKey, &[u8], bool)> =
            others.iter().zip(&zeros).map(|(&b, z)| (ScheduleKey::Transfer(b, root), if b == me { data } else { &z[..] }, me == root)).collect();
        let view = View::Assemble { extent: layout.extent(), moves: packed_moves(layout, others.iter().copied()), own: Some((data.to_vec(), layout.block(root).start)) };
        self.start_parts(g, mode, &parts, None, None, me == root, view)
    }

    /// A long scatter: each block moved from the root to its member, all
    /// under way at once; a member keeps its own.
    fn scatter_by_transfers(&mut self, g: &mut Group, mode: Mode, root: u32, layout: &Layout, data: &[u8]) -> Result<CollRequest, HostError> {
        let me = g.rank();
        let others: Vec<u32> = (0..g.size()).filter(|&b| b != root).collect();
        let zeros: Vec<Vec<u8>> = others.iter().map(|&b| if me == root { Vec::new() } else { vec![0u8; layout.block(b).len()] }).collect();
        let parts: Vec<(ScheduleKey, &[u8], bool)> = others
            .iter()
            .zip(&zeros)
            .map(|(&b, z)| (ScheduleKey::Transfer(root, b), if me == root { &data[layout.block(b)] } else { &z[..] }, b == me))
            .collect();
        if me == root {
            let own = data[layout.block(root)].to_vec();
            // The root's result is its own block: the parts' results (what
            // it sent) are not looked at.
            let view = View::Assemble { extent: own.len(), moves: Vec::new(), own: Some((own, 0)) };
            return self.start_parts(g, mode, &parts, None, None, true, view);
        }
        let mine = others.iter().position(|&b| b == me).expect("a member other than the root");
        self.start_parts(g, mode, &parts, None, Some(mine), true, View::Whole)
    }

    /// A long alltoall: the pairwise exchange, one collective per shift
    /// `s` (each member sends its block for `rank + s` and takes the one
    /// from `rank - s`), all under way at once.
    fn alltoall_by_shifts(&mut self, g: &mut Group, mode: Mode, block: usize, data: &[u8]) -> Result<CollRequest, HostError> {
        let (n, me) = (g.size(), g.rank());
        let at = |b: u32| b as usize * block..(b as usize + 1) * block;
        let parts: Vec<(ScheduleKey, &[u8], bool)> = (1..n).map(|s| (ScheduleKey::Shift(s), &data[at((me + s) % n)], true)).collect();
        let moves = (1..n).map(|s| ((s as usize - 1) * block..s as usize * block, at((me + n - s) % n).start)).collect();
        let view = View::Assemble { extent: n as usize * block, moves, own: Some((data[at(me)].to_vec(), at(me).start)) };
        self.start_parts(g, mode, &parts, None, None, true, view)
    }

    /// Blocking allgather ([`Port::start_allgather`]).
    pub fn allgather(&mut self, g: &mut Group, mode: Mode, algo: AllreduceAlgorithm, layout: &Layout, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_allgather(g, mode, algo, layout, data)?;
        self.coll_wait(r)
    }

    /// Blocking gather ([`Port::start_gather`]).
    pub fn gather(&mut self, g: &mut Group, mode: Mode, algo: impl Into<ReduceAlgorithm>, root: u32, layout: &Layout, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_gather(g, mode, algo, root, layout, data)?;
        self.coll_wait(r)
    }

    /// Blocking scatter ([`Port::start_scatter`]).
    pub fn scatter(&mut self, g: &mut Group, mode: Mode, tree: TreeShape, root: u32, layout: &Layout, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_scatter(g, mode, tree, root, layout, data)?;
        self.coll_wait(r)
    }

    /// Blocking alltoall ([`Port::start_alltoall`]).
    pub fn alltoall(&mut self, g: &mut Group, mode: Mode, algo: AllreduceAlgorithm, block: usize, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_alltoall(g, mode, algo, block, data)?;
        self.coll_wait(r)
    }

    /// Blocking reduce-scatter ([`Port::start_reduce_scatter`]).
    pub fn reduce_scatter(&mut self, g: &mut Group, mode: Mode, tree: TreeShape, red: Reduction, layout: &Layout, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_reduce_scatter(g, mode, tree, red, layout, data)?;
        self.coll_wait(r)
    }

    /// Blocking inclusive scan ([`Port::start_scan`]).
    pub fn scan(&mut self, g: &mut Group, mode: Mode, red: Reduction, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_scan(g, mode, red, data)?;
        self.coll_wait(r)
    }

    /// Blocking exclusive scan ([`Port::start_exscan`]).
    pub fn exscan(&mut self, g: &mut Group, mode: Mode, red: Reduction, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_exscan(g, mode, red, data)?;
        self.coll_wait(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_refuse_overlap_and_measure_their_extent() {
        // An empty block's displacement takes no room.
        let l = Layout::new(&[4, 0, 8], &[8, 100, 0]).unwrap();
        assert_eq!(l.extent(), 12);
        assert_eq!(l.block(0), 8..12);
        assert_eq!(l.block(1), 0..0);
        assert!(Layout::try_even(4, usize::MAX / 2).is_err(), "beyond the address space");
        assert!(Layout::new(&[4, 8], &[0, 2]).is_err(), "overlap");
        assert!(Layout::new(&[4], &[0, 2]).is_err(), "counts and displacements differ in number");
        assert_eq!(Layout::packed(&[3, 0, 5]).unwrap().block(2), 3..8);
        assert_eq!(Layout::even(3, 2).extent(), 6);
    }

    #[test]
    fn views_join_their_ranges() {
        let v: Vec<u8> = (0..10).collect();
        assert_eq!(View::Whole.of(v.clone()), v);
        assert_eq!(View::range(0..3).of(v.clone()), vec![0, 1, 2]);
        assert_eq!(View::Ranges(vec![1..2, 8..10]).of(v), vec![1, 8, 9]);
    }
}
