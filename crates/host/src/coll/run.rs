//! [`CollRun`]: what the port's collective bookkeeping (`api`) asks of one
//! collective under way, whichever way it runs - offloaded (`offload`),
//! host-based (`hostbased`) or NIC-assisted (`nicassist`) - and how a
//! call's mode starts the run that carries it out. The bookkeeping (start
//! order, backlog, results handed back once) is the same for all three;
//! only what is behind this trait differs.

use std::fmt::Debug;
use std::sync::Arc;

use outboard_engine::coll::rounds;
use outboard_engine::Reduction;

use super::blocks::{self, BlockRun, BlocksRun};
use super::group::{tree_for, ScheduleKey};
use super::hostbased::HostRun;
use super::nicassist::{packet_payload, NicRun};
use super::offload::OffRun;
use super::{AllreduceAlgorithm, BcastMode, Group};
use crate::{HostError, Port, PortIo};

/// One collective under way at one member. `Send + Sync` so a [`Port`]
/// over a `Send` transport stays `Send` (and `Sync`) while it holds runs.
pub(crate) trait CollRun<P: PortIo>: Debug + Send + Sync {
    /// How many engine commands this run leaves to the port's backlog,
    /// which posts them in start order across runs as tokens allow
    /// (offloaded chunks). 0 for a run that posts its own commands while it
    /// advances.
    fn backlog(&self) -> usize {
        0
    }

    /// Posts backlog entry `i`. `Ok(false)`: no token now, try later.
    fn post(&mut self, _port: &mut Port<P>, _i: usize) -> Result<bool, HostError> {
        Ok(true)
    }

    /// After a failed [`CollRun::post`]: forgets the commands already
    /// posted (their buffers are leaked: the engine may still use them).
    fn abandon_posted(&mut self, _port: &mut Port<P>) {}

    /// Does whatever can be done now. `Some` once finished: the result
    /// bytes, or the first error.
    fn advance(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>>;

    /// Whether the run needs its group and schedule installed at the
    /// engine, so that a failed installation explains its failure better
    /// than the engine's consequent "no such group".
    fn needs_install(&self) -> bool {
        false
    }
}

/// What one kind of collective asks of the common start path.
#[derive(Clone, Copy)]
pub(super) struct Spec<'a> {
    pub key: ScheduleKey,
    pub reduction: Option<Reduction>,
    pub data: &'a [u8],
    pub want_result: bool,
}

/// The piece a run of `mode` moves at a time, before the message's own
/// length caps it: the whole message host-based, one engine collective's
/// payload offloaded, the chunk NIC-assisted.
pub(super) fn piece_len<P: PortIo>(io: &P, mode: BcastMode) -> u32 {
    match mode {
        BcastMode::HostBased => u32::MAX,
        BcastMode::Offloaded => io.coll_max_len(),
        BcastMode::NicAssisted {
            chunk: BcastMode::PACKET,
        } => packet_payload(io),
        BcastMode::NicAssisted { chunk } => chunk,
    }
}

impl<P: PortIo> Port<P> {
    /// The run that carries out `spec` at `g` in `mode` (nothing posted
    /// yet but what the run's constructor sets up).
    pub(super) fn start_run(
        &mut self,
        g: &mut Group,
        mode: BcastMode,
        spec: &Spec<'_>,
    ) -> Result<Box<dyn CollRun<P>>, HostError> {
        // Block trees of one block are the tree allreduce or reduce itself:
        // it runs, and is counted in `Group::taken` as that, with no blocks
        // around it. So is a reduce among two (nodes): its blocks would
        // carry half the data to the other member and back, 1.5 times the
        // one tree's bytes, for no root to relieve.
        let spec = &match spec.key {
            ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(shape)) if self.block_count(g, spec) == 1 => {
                Spec { key: ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(shape)), ..*spec }
            }
            ScheduleKey::ReduceBlocks(shape, root) if g.network_ranks() <= 2 || self.block_count(g, spec) == 1 => {
                Spec { key: ScheduleKey::Reduce(shape, root), ..*spec }
            }
            _ => *spec,
        };
        let run: Box<dyn CollRun<P>> = match (mode, spec.key) {
            (_, ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(_)) | ScheduleKey::ReduceBlocks(..)) => {
                Box::new(self.start_blocks(g, mode, spec)?)
            }
            (BcastMode::Offloaded, _) => Box::new(self.start_offloaded(g, spec)?),
            (BcastMode::HostBased, _) => Box::new(start_host_based(g, spec)?),
            (BcastMode::NicAssisted { .. }, _) => {
                let chunk = piece_len(self.io_ref(), mode);
                Box::new(self.start_nic_assisted(g, spec, chunk)?)
            }
        };
        g.note_taken(mode, spec.key);
        Ok(run)
    }

    /// What a reduce or allreduce on block trees of `spec` is cut by
    /// ([`blocks::cut`]'s arguments after the length): its element size,
    /// the ranks that may root a block (the node leaders where members
    /// share nodes), and a packet's worth, the least a block holds.
    fn block_terms(&self, g: &Group, spec: &Spec<'_>) -> (usize, u32, usize) {
        (spec.reduction.map_or(1, |r| r.dtype.size()), g.network_ranks(), self.io_ref().coll_max_len() as usize)
    }

    /// How many blocks [`blocks::cut`] makes of `spec`'s data.
    fn block_count(&self, g: &Group, spec: &Spec<'_>) -> usize {
        let (elem, roots, unit) = self.block_terms(g, spec);
        blocks::count(spec.data.len(), elem, roots, unit)
    }

    /// A reduce or allreduce on block trees: the data cut into blocks
    /// ([`blocks::cut`], by [`Port::block_terms`]), each a tree reduce or
    /// allreduce rooted at a member of its own, started in block order as
    /// consecutive collectives of the group.
    fn start_blocks(&mut self, g: &mut Group, mode: BcastMode, spec: &Spec<'_>) -> Result<BlocksRun, HostError> {
        let (elem, roots, unit) = self.block_terms(g, spec);
        let cut = blocks::cut(spec.data.len(), elem, roots, unit);
        let mut runs = Vec::with_capacity(cut.len());
        for (b, range) in cut.into_iter().enumerate() {
            // Block 0's tree is the plain collective's (rooted at rank 0
            // for an allreduce, at the root for a reduce): its own
            // schedule and number, so that data of one block runs exactly
            // as the plain tree collective does.
            let b = b as u32;
            let key = match spec.key {
                ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(shape)) if b == 0 => {
                    ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(shape))
                }
                ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(shape)) => ScheduleKey::AllreduceAt(shape, b),
                ScheduleKey::ReduceBlocks(shape, root) if b == 0 => ScheduleKey::Reduce(shape, root),
                ScheduleKey::ReduceBlocks(shape, root) => ScheduleKey::ReduceAt(shape, root, b),
                k => unreachable!("only collectives on block trees start blocks: {k:?}"),
            };
            let part = Spec {
                key,
                data: &spec.data[range],
                ..*spec
            };
            runs.push(self.block_run(g, mode, &part)?);
        }
        Ok(BlocksRun::new::<P>(runs))
    }

    /// One part of a run of several collectives ([`BlocksRun`]): the
    /// usual host-based run of `spec` in that mode, the offloaded one
    /// otherwise.
    pub(super) fn block_run(&mut self, g: &mut Group, mode: BcastMode, spec: &Spec<'_>) -> Result<BlockRun, HostError> {
        Ok(match mode {
            BcastMode::HostBased => BlockRun::HostBased(Box::new(start_host_based(g, spec)?)),
            _ => BlockRun::Offloaded(self.start_offloaded(g, spec)?),
        })
    }

    fn start_offloaded(&mut self, g: &mut Group, spec: &Spec<'_>) -> Result<OffRun, HostError> {
        let sched = self.install(g, spec.key)?;
        let bcast_root = match spec.key {
            ScheduleKey::Bcast(_, root) => Some(root == g.rank()),
            _ => None,
        };
        let mut run = OffRun::new(
            self,
            g.id(),
            sched,
            spec.reduction,
            spec.data,
            spec.want_result,
            bcast_root,
        )?;
        run.nic_protocol = matches!(spec.key, ScheduleKey::Barrier(_))
            && g.barrier_protocol() == super::BarrierProtocol::NicCollective;
        Ok(run)
    }

    fn start_nic_assisted(
        &mut self,
        g: &mut Group,
        spec: &Spec<'_>,
        chunk: u32,
    ) -> Result<NicRun, HostError> {
        let ScheduleKey::Bcast(shape, root) = spec.key else {
            unreachable!("only broadcasts take BcastMode::NicAssisted")
        };
        let tree = tree_for(shape, g.size(), root)?;
        let epoch = g.nic_epoch;
        g.nic_epoch = g.nic_epoch.wrapping_add(1);
        let members = g.members().clone();
        NicRun::new(
            self,
            g.id(),
            epoch,
            g.rank(),
            &members,
            &tree,
            chunk,
            spec.data,
        )
    }
}

fn start_host_based(g: &mut Group, spec: &Spec<'_>) -> Result<HostRun, HostError> {
    let slot = g.slot(spec.key)?;
    let rounds = match &slot.rounds {
        Some(r) => Arc::clone(r),
        None => {
            let r = Arc::new(rounds(&slot.schedule).map_err(super::CollectiveError::from)?);
            slot.rounds = Some(Arc::clone(&r));
            r
        }
    };
    let schedule = (slot.schedule.clone(), slot.id);
    let epoch = g.host_epoch;
    g.host_epoch = g.host_epoch.wrapping_add(1);
    Ok(HostRun::new(
        g.id(),
        epoch,
        g.rank(),
        g.members().clone(),
        schedule,
        rounds,
        spec.reduction,
        spec.data,
    ))
}

impl<P: PortIo> CollRun<P> for OffRun {
    fn backlog(&self) -> usize {
        self.chunks.len()
    }

    fn post(&mut self, port: &mut Port<P>, i: usize) -> Result<bool, HostError> {
        OffRun::post(self, port, i)
    }

    fn abandon_posted(&mut self, port: &mut Port<P>) {
        for c in &self.chunks {
            if let Some(r) = c.req {
                port.forget(r);
            }
        }
    }

    fn advance(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        OffRun::advance(self, port)
    }

    fn needs_install(&self) -> bool {
        true
    }
}

impl<P: PortIo> CollRun<P> for HostRun {
    /// Also hands the sends still unconfirmed at the end to the port,
    /// which frees their buffers as they complete.
    fn advance(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        let r = HostRun::advance(self, port);
        if r.is_some() {
            let t = self.take_trailing();
            port.coll.trailing.extend(t);
        }
        r
    }
}

impl<P: PortIo> CollRun<P> for NicRun {
    fn advance(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        NicRun::advance(self, port)
    }
}
