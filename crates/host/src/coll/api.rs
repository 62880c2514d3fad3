//! The collective calls on [`Port`]: split-phase `start_*` returning a
//! [`CollRequest`], `coll_test` / `coll_wait`, and blocking wrappers. Each
//! call names its mode (offloaded or host-based) and algorithm, so the two
//! modes can be compared like for like.
//!
//! Requests of one group and one mode hand their results back in start
//! order: `coll_test` reports a request only once every earlier one of the
//! same group and mode has finished. What runs a request is a
//! [`CollRun`] (`run`); the bookkeeping here is the same for every mode.

use std::collections::{BTreeMap, HashMap, VecDeque};

use outboard_engine::{GroupId, HostBuf, MemberList, Reduction};

use super::group::{IdPool, ScheduleKey};
use super::movement::View;
use super::run::{piece_len, CollRun, Spec};
use super::{
    AllreduceAlgorithm, BarrierAlgorithm, BcastMode, CollectiveError, Group, Mode, ReduceAlgorithm, TreeShape,
};
use crate::{HostError, Port, PortIo, Request};

/// A collective under way, returned by the `start_*` calls; hand it to
/// [`Port::coll_test`] or [`Port::coll_wait`] of the same port.
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a collective request must be tested or waited for"]
pub struct CollRequest {
    id: u64,
}

impl CollRequest {
    /// The port-local sequence number of the request.
    pub fn id(&self) -> u64 {
        self.id
    }
}

#[derive(Debug)]
struct CollOp<P: PortIo> {
    group: GroupId,
    /// Requests hand their results back in start order per group and mode.
    mode: BcastMode,
    want_result: bool,
    /// The part of the run's result the caller gets.
    view: View,
    /// What runs it; `None` once finished.
    run: Option<Box<dyn CollRun<P>>>,
    result: Option<Result<Vec<u8>, HostError>>,
}

/// A group as registered at this port (first use).
#[derive(Debug)]
pub(super) struct Registered {
    pub members: MemberList,
}

/// The collective state of one port.
#[derive(Debug)]
pub(crate) struct CollState<P: PortIo> {
    next_id: u64,
    ops: BTreeMap<u64, CollOp<P>>,
    /// Offloaded chunks not yet posted (no token), in start order.
    backlog: VecDeque<(u64, usize)>,
    pub(super) groups: HashMap<GroupId, Registered>,
    pub(crate) ids: IdPool,
    /// Group and schedule installations posted and not yet completed, with
    /// the buffer the engine reads (freed on completion).
    pub(super) setup: Vec<(Request, HostBuf, GroupId)>,
    /// Why installing something of a group failed: reported by that group's
    /// collectives instead of the engine's consequent "no such group".
    pub(super) setup_failed: HashMap<GroupId, HostError>,
    /// Receives and multi-sends NIC-assisted broadcasts have posted and
    /// not seen complete, over all of them (bounded by
    /// [`super::nicassist`]'s port shares).
    pub(crate) nic_recvs: u32,
    pub(crate) nic_sends: u32,
    /// Sends of finished host-based collectives not confirmed yet, with
    /// their buffers (freed on completion).
    pub(super) trailing: Vec<(Request, HostBuf)>,
    /// Of those, how many failed after their collective had completed.
    pub(crate) trailing_failed: u64,
    /// The ids `coll_advance` goes through, kept to reuse its allocation.
    advancing: Vec<u64>,
}

impl<P: PortIo> Default for CollState<P> {
    fn default() -> Self {
        CollState {
            next_id: 0,
            ops: BTreeMap::new(),
            backlog: VecDeque::new(),
            groups: HashMap::new(),
            ids: IdPool::default(),
            setup: Vec::new(),
            setup_failed: HashMap::new(),
            nic_recvs: 0,
            nic_sends: 0,
            trailing: Vec::new(),
            trailing_failed: 0,
            advancing: Vec::new(),
        }
    }
}

impl<P: PortIo> CollState<P> {
    /// Collectives of `group` still under way or not handed back.
    pub(super) fn busy(&self, group: GroupId) -> bool {
        self.ops.values().any(|o| o.group == group)
    }
}

impl<P: PortIo> Port<P> {
    pub(super) fn start_coll(
        &mut self,
        g: &mut Group,
        mode: BcastMode,
        spec: Spec<'_>,
    ) -> Result<CollRequest, HostError> {
        self.start_coll_viewed(g, mode, spec, View::Whole)
    }

    /// [`Port::start_coll`], handing back only `view` of the result.
    pub(super) fn start_coll_viewed(
        &mut self,
        g: &mut Group,
        mode: BcastMode,
        spec: Spec<'_>,
        view: View,
    ) -> Result<CollRequest, HostError> {
        self.register_group(g)?;
        let spec = Spec {
            key: self.key_for_len(g.size(), mode, spec.key, spec.data.len()),
            ..spec
        };
        self.check_reduction(mode, &spec)?;
        let run = self.start_run(g, mode, &spec)?;
        Ok(self.enqueue(g, mode, run, spec.want_result, view))
    }

    /// Refuses a reduction the engine would refuse, or one a host-based
    /// run cannot combine, before any member waits.
    pub(super) fn check_reduction(&self, mode: BcastMode, spec: &Spec<'_>) -> Result<(), HostError> {
        if let Some(r) = spec.reduction {
            r.validate().map_err(CollectiveError::from)?;
            if matches!(r.op, outboard_engine::ReduceOp::Module { .. }) && mode != BcastMode::Offloaded {
                // Only engines run modules: refused before any member waits.
                return Err(CollectiveError::from(outboard_engine::CollError::EngineOnly).into());
            }
            r.check_len(spec.data.len())
                .map_err(CollectiveError::from)?;
        }
        Ok(())
    }

    /// Takes `run` into the port's bookkeeping as a new request of `g`.
    pub(super) fn enqueue(&mut self, g: &Group, mode: BcastMode, run: Box<dyn CollRun<P>>, want_result: bool, view: View) -> CollRequest {
        let id = self.coll.next_id;
        self.coll.next_id += 1;
        self.coll.backlog.extend((0..run.backlog()).map(|i| (id, i)));
        self.coll.ops.insert(
            id,
            CollOp {
                group: g.id(),
                mode,
                want_result,
                view,
                run: Some(run),
                result: None,
            },
        );
        // Post what can be posted now: a host-based collective sends its
        // first messages at once.
        self.progress();
        CollRequest { id }
    }

    /// `key` with a link-derived postal tree resolved for the unit the
    /// tree forwards in `mode`: the whole message host-based, one piece
    /// offloaded or NIC-assisted.
    pub(super) fn key_for_len(&self, n: u32, mode: BcastMode, key: ScheduleKey, len: usize) -> ScheduleKey {
        let piece = piece_len(self.io_ref(), mode);
        let unit = u32::try_from(len).unwrap_or(u32::MAX).min(piece);
        match key {
            ScheduleKey::Reduce(s, root) => ScheduleKey::Reduce(s.for_len(n, unit), root),
            ScheduleKey::ReduceBlocks(s, root) => ScheduleKey::ReduceBlocks(s.for_len(n, unit), root),
            ScheduleKey::Bcast(s, root) => ScheduleKey::Bcast(s.for_len(n, unit), root),
            ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(s)) => {
                ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(s.for_len(n, unit)))
            }
            ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(s)) => {
                ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(s.for_len(n, unit)))
            }
            ScheduleKey::Allreduce(a @ AllreduceAlgorithm::Auto(_)) => {
                let a = a.for_len(len, self.io_ref().allreduce_doubling_max());
                self.key_for_len(n, mode, ScheduleKey::Allreduce(a), len)
            }
            k => k,
        }
    }

    /// Posts backlogged offloaded chunks in order, then advances every
    /// collective under way. Called by [`Port::progress`].
    pub(crate) fn coll_advance(&mut self) {
        self.reap_setup();
        self.reap_trailing();
        while let Some(&(id, i)) = self.coll.backlog.front() {
            let Some(mut op) = self.coll.ops.remove(&id) else {
                self.coll.backlog.pop_front();
                continue;
            };
            let posted = match &mut op.run {
                Some(run) if op.result.is_none() => run.post(self, i),
                _ => Ok(true),
            };
            let stop = match posted {
                Ok(true) => {
                    self.coll.backlog.pop_front();
                    false
                }
                Ok(false) => true,
                Err(e) => {
                    if let Some(mut run) = op.run.take() {
                        run.abandon_posted(self);
                    }
                    op.result = Some(Err(e));
                    self.coll.backlog.retain(|&(o, _)| o != id);
                    false
                }
            };
            self.coll.ops.insert(id, op);
            if stop {
                break;
            }
        }
        // The ids into a list kept between calls (this runs on every test
        // and wait), and each run taken out of its entry while it advances
        // (it needs the whole port), not the entry out of the map: both
        // were allocator and tree work on every progress call.
        let mut ids = std::mem::take(&mut self.coll.advancing);
        ids.clear();
        ids.extend(self.coll.ops.iter().filter(|(_, o)| o.result.is_none()).map(|(&k, _)| k));
        for &id in &ids {
            let Some(mut run) = self.coll.ops.get_mut(&id).and_then(|o| o.run.take()) else {
                continue;
            };
            let done = run.advance(self).map(|r| (r, run.needs_install()));
            let op = self.coll.ops.get_mut(&id).expect("runs do not hand results back");
            match done {
                None => op.run = Some(run),
                Some((r, needs_install)) => {
                    let r = match (r, self.coll.setup_failed.get(&op.group)) {
                        (Err(_), Some(setup)) if needs_install => Err(*setup),
                        (r, _) => r,
                    };
                    op.result = Some(r.map(|v| if op.want_result { op.view.of(v) } else { Vec::new() }));
                }
            }
        }
        self.coll.advancing = ids;
    }

    /// Sends of host-based collectives that failed after their collective
    /// had completed (the host-based twin of the engine's
    /// `Stats::coll_abandoned`): a collective completes when its own steps
    /// are done, before its last sends are confirmed.
    pub fn coll_late_failures(&self) -> u64 {
        self.coll.trailing_failed
    }

    /// Frees the buffers of finished host-based collectives' sends as they
    /// complete.
    fn reap_trailing(&mut self) {
        let mut i = 0;
        while i < self.coll.trailing.len() {
            let (req, buf) = self.coll.trailing[i];
            match self.take(req) {
                None => i += 1,
                Some(r) => {
                    let _done = self.coll.trailing.swap_remove(i);
                    // A buffer the library allocated; freeing it fails
                    // only if the port's memory is gone, which the
                    // failed send already says.
                    if r.is_err() || self.free(buf).is_err() {
                        self.coll.trailing_failed += 1;
                    }
                }
            }
        }
    }

    /// Whether the collective finished; hands its result back (once) if so:
    /// the result bytes at the reduce root, at every allreduce and broadcast
    /// member, empty otherwise.
    pub fn coll_test(&mut self, req: &mut CollRequest) -> Option<Result<Vec<u8>, HostError>> {
        self.progress();
        let op = match self.coll.ops.get(&req.id) {
            None => return Some(Err(HostError::UnknownRequest)),
            Some(op) => op,
        };
        op.result.as_ref()?;
        let (group, mode) = (op.group, std::mem::discriminant(&op.mode));
        let earlier_open = self.coll.ops.range(..req.id).any(|(_, o)| {
            o.group == group && std::mem::discriminant(&o.mode) == mode && o.result.is_none()
        });
        if earlier_open {
            return None;
        }
        self.coll.ops.remove(&req.id).and_then(|o| o.result)
    }

    /// Blocks until the collective finishes.
    pub fn coll_wait(&mut self, mut req: CollRequest) -> Result<Vec<u8>, HostError> {
        loop {
            if let Some(r) = self.coll_test(&mut req) {
                return r;
            }
            self.io().idle();
        }
    }

    pub(super) fn check_root(g: &Group, root: u32) -> Result<(), HostError> {
        if root >= g.size() {
            return Err(CollectiveError::RootOutOfRange {
                root,
                size: g.size(),
            }
            .into());
        }
        Ok(())
    }

    /// Starts a barrier.
    pub fn start_barrier(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: BarrierAlgorithm,
    ) -> Result<CollRequest, HostError> {
        let spec = Spec {
            key: ScheduleKey::Barrier(algo),
            reduction: None,
            data: &[],
            want_result: false,
        };
        self.start_coll(g, mode.into(), spec)
    }

    /// Starts a reduction of every member's `data` to `root` by `algo`: a
    /// [`TreeShape`] names a tree of that shape rooted there
    /// ([`ReduceAlgorithm::Tree`]).
    pub fn start_reduce(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: impl Into<ReduceAlgorithm>,
        root: u32,
        red: Reduction,
        data: &[u8],
    ) -> Result<CollRequest, HostError> {
        Self::check_root(g, root)?;
        let want_result = g.rank() == root;
        let key = match algo.into() {
            ReduceAlgorithm::Tree(t) => ScheduleKey::Reduce(t, root),
            ReduceAlgorithm::BlockTrees(t) => ScheduleKey::ReduceBlocks(t, root),
        };
        let spec = Spec {
            key,
            reduction: Some(red),
            data,
            want_result,
        };
        self.start_coll(g, mode.into(), spec)
    }

    /// Starts an allreduce: every member gets the combination of all
    /// members' `data`.
    pub fn start_allreduce(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: AllreduceAlgorithm,
        red: Reduction,
        data: &[u8],
    ) -> Result<CollRequest, HostError> {
        let spec = Spec {
            key: ScheduleKey::Allreduce(algo),
            reduction: Some(red),
            data,
            want_result: true,
        };
        self.start_coll(g, mode.into(), spec)
    }

    /// Starts a broadcast of `root`'s `data`; the other members pass a slice
    /// of the same length (its contents are ignored). `mode` is a [`Mode`]
    /// or a [`BcastMode`] (which adds NIC-assisted broadcast); all members
    /// must pass the same mode, chunk size and tree.
    pub fn start_bcast(
        &mut self,
        g: &mut Group,
        mode: impl Into<BcastMode>,
        tree: TreeShape,
        root: u32,
        data: &[u8],
    ) -> Result<CollRequest, HostError> {
        Self::check_root(g, root)?;
        let spec = Spec {
            key: ScheduleKey::Bcast(tree, root),
            reduction: None,
            data,
            want_result: true,
        };
        self.start_coll(g, mode.into(), spec)
    }

    /// Blocking barrier.
    pub fn barrier(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: BarrierAlgorithm,
    ) -> Result<(), HostError> {
        let r = self.start_barrier(g, mode, algo)?;
        self.coll_wait(r).map(|_| ())
    }

    /// Blocking reduce: the result at `root`, empty elsewhere.
    pub fn reduce(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: impl Into<ReduceAlgorithm>,
        root: u32,
        red: Reduction,
        data: &[u8],
    ) -> Result<Vec<u8>, HostError> {
        let r = self.start_reduce(g, mode, algo, root, red, data)?;
        self.coll_wait(r)
    }

    /// Blocking allreduce.
    pub fn allreduce(
        &mut self,
        g: &mut Group,
        mode: Mode,
        algo: AllreduceAlgorithm,
        red: Reduction,
        data: &[u8],
    ) -> Result<Vec<u8>, HostError> {
        let r = self.start_allreduce(g, mode, algo, red, data)?;
        self.coll_wait(r)
    }

    /// Blocking broadcast: `root`'s data at every member.
    pub fn bcast(
        &mut self,
        g: &mut Group,
        mode: impl Into<BcastMode>,
        tree: TreeShape,
        root: u32,
        data: &[u8],
    ) -> Result<Vec<u8>, HostError> {
        let r = self.start_bcast(g, mode, tree, root, data)?;
        self.coll_wait(r)
    }
}
