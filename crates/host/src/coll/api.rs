//! The collective calls on [`Port`]: split-phase `start_*` returning a
//! [`CollRequest`], `coll_test` / `coll_wait`, and blocking wrappers. Each
//! call names its mode (offloaded or host-based) and algorithm, so the two
//! modes can be compared like for like.
//!
//! Requests of one group and one mode hand their results back in start
//! order: `coll_test` reports a request only once every earlier one of the
//! same group and mode has finished.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use outboard_engine::{
    encode_members, CollError, Command, Endpoint, GroupId, HostBuf, OpId, Reduction, ScheduleId,
};

use super::group::{IdPool, ScheduleKey};
use super::hostbased::HostRun;
use super::nicassist::{packet_payload, NicRun};
use super::offload::OffRun;
use super::{CollectiveError, Group, Tree};
use crate::postal::{canonical_lambda, Lambda};
use crate::{HostError, Port, PortIo, Request};

/// Where a collective runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// The engines run the schedule (the papers' NIC-based collectives).
    #[default]
    Offloaded,
    /// The hosts run the same schedule over point-to-point messages,
    /// advancing only inside the library.
    HostBased,
}

/// Where a broadcast runs: the two [`Mode`]s every collective has, plus
/// NIC-assisted broadcast, which exists for broadcast only (it is a way
/// for the hosts to *send*, with nothing to combine). A separate type
/// rather than a third [`Mode`] so that asking another collective to run
/// NIC-assisted cannot be written at all, and so code matching on `Mode`
/// is unaffected; every `Mode` converts into it, so `start_bcast` takes
/// either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BcastMode {
    /// The engines forward each chunk down the tree (NIC-based forwarding).
    Offloaded,
    /// The hosts send to each child separately over point-to-point.
    HostBased,
    /// Each host hands every piece to its NIC once, with one multi-send to
    /// all its children (dissertation 2.2, Figure 2.4(b)); intermediate
    /// hosts re-send each piece as it arrives. `chunk` is the piece size in
    /// bytes: [`BcastMode::PACKET`] (0) for one packet's payload (the
    /// dissertation's packet-wise pipelining), [`BcastMode::WHOLE`] (or any
    /// size at least the message's) for no pipelining.
    NicAssisted {
        /// Bytes per pipelined piece; see above.
        chunk: u32,
    },
}

impl BcastMode {
    /// `chunk` value: one point-to-point packet's payload (a little less
    /// than [`crate::PortIo::coll_max_len`]: a data packet's header is
    /// longer than a collective packet's).
    pub const PACKET: u32 = 0;
    /// `chunk` value: the whole message at once (no pipelining).
    pub const WHOLE: u32 = u32::MAX;

    /// NIC-assisted with packet-wise pipelining (the default chunk).
    pub const fn nic_assisted() -> BcastMode {
        BcastMode::NicAssisted {
            chunk: Self::PACKET,
        }
    }

    /// NIC-assisted without pipelining.
    pub const fn nic_assisted_whole() -> BcastMode {
        BcastMode::NicAssisted { chunk: Self::WHOLE }
    }
}

impl From<Mode> for BcastMode {
    fn from(m: Mode) -> BcastMode {
        match m {
            Mode::Offloaded => BcastMode::Offloaded,
            Mode::HostBased => BcastMode::HostBased,
        }
    }
}

/// Barrier algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BarrierAlgorithm {
    /// MPICH's pairwise exchange (recursive doubling), with pre and post
    /// steps for sizes that are not a power of two.
    PairwiseExchange,
    /// Dissemination: ceil(log2 n) rounds for any n.
    #[default]
    Dissemination,
    /// Gather to rank 0 and broadcast back on a tree: a k-ary tree of
    /// `degree`, or the binomial tree for `degree == 0`.
    GatherBroadcast {
        /// Tree degree; 0 for binomial.
        degree: u32,
    },
}

/// Tree shapes for reduce, broadcast and tree allreduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TreeShape {
    /// MPICH's binomial tree.
    #[default]
    Binomial,
    /// A complete k-ary tree of the given degree (at least 1).
    Kary(u32),
    /// A chain (degree 1).
    Chain,
    /// The postal-model optimal tree ([`Tree::postal`]; dissertation 2.3)
    /// for a lambda given, or derived from link costs for each call's
    /// message size - or, where the message travels in pieces (offloaded
    /// collectives, pipelined NIC-assisted broadcast), the piece size, the
    /// unit the tree forwards. Derived values are rounded
    /// ([`crate::postal::canonical_lambda`]), so a group keeps few trees.
    Postal(Lambda),
}

impl TreeShape {
    /// The shape a call uses for messages (or pieces) of `unit` bytes in a
    /// group of `n`: a link-derived postal lambda becomes the rounded value
    /// for that size; other shapes are unchanged.
    pub fn for_len(self, n: u32, unit: u32) -> TreeShape {
        match self {
            TreeShape::Postal(l @ Lambda::Link(_)) => {
                TreeShape::Postal(Lambda::Given(canonical_lambda(l.value(unit), n)))
            }
            s => s,
        }
    }

    /// The tree of this shape over `n` ranks rooted at `root`, for
    /// messages (or pieces) of `unit` bytes.
    pub fn tree(self, n: u32, root: u32, unit: u32) -> Result<Tree, CollectiveError> {
        match self.for_len(n, unit) {
            TreeShape::Binomial => Tree::binomial(n, root),
            TreeShape::Kary(k) => Tree::kary(n, k, root),
            TreeShape::Chain => Tree::chain(n, root),
            TreeShape::Postal(l) => Tree::postal(n, root, l.value(unit)),
        }
    }
}

/// Allreduce algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllreduceAlgorithm {
    /// Reduce to rank 0 on a tree, then broadcast down the same tree.
    Tree(TreeShape),
    /// Recursive doubling, with pre and post steps for sizes that are not a
    /// power of two.
    RecursiveDoubling,
}

impl Default for AllreduceAlgorithm {
    fn default() -> Self {
        AllreduceAlgorithm::Tree(TreeShape::Binomial)
    }
}

/// A group's default choices (see [`Group::set_defaults`]); `split` uses
/// them for its own collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CollDefaults {
    /// Mode.
    pub mode: Mode,
    /// Barrier algorithm.
    pub barrier: BarrierAlgorithm,
    /// Tree for reduce and broadcast.
    pub tree: TreeShape,
    /// Allreduce algorithm.
    pub allreduce: AllreduceAlgorithm,
}

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
enum Body {
    Off(OffRun),
    Host(HostRun),
    Nic(NicRun),
    Done,
}

#[derive(Debug)]
struct CollOp {
    group: GroupId,
    /// Requests hand their results back in start order per group and mode.
    mode: BcastMode,
    want_result: bool,
    body: Body,
    result: Option<Result<Vec<u8>, HostError>>,
}

/// A group as registered at this port (first use).
#[derive(Debug)]
struct Registered {
    members: Arc<[Endpoint]>,
}

/// The collective state of one port.
#[derive(Debug, Default)]
pub(crate) struct CollState {
    next_id: u64,
    ops: BTreeMap<u64, CollOp>,
    /// Offloaded chunks not yet posted (no token), in start order.
    backlog: VecDeque<(u64, usize)>,
    groups: HashMap<GroupId, Registered>,
    pub(crate) ids: IdPool,
    /// Group and schedule installations posted and not yet completed, with
    /// the buffer the engine reads (freed on completion).
    setup: Vec<(Request, HostBuf, GroupId)>,
    /// Why installing something of a group failed: reported by that group's
    /// collectives instead of the engine's consequent "no such group".
    setup_failed: HashMap<GroupId, HostError>,
    /// Receives and multi-sends NIC-assisted broadcasts have posted and
    /// not seen complete, over all of them (bounded by
    /// [`super::nicassist`]'s port shares).
    pub(crate) nic_recvs: u32,
    pub(crate) nic_sends: u32,
    /// Sends of finished host-based collectives not confirmed yet, with
    /// their buffers (freed on completion).
    trailing: Vec<(Request, HostBuf)>,
    /// Of those, how many failed after their collective had completed.
    pub(crate) trailing_failed: u64,
}

impl CollState {
    /// Collectives of `group` still under way or not handed back.
    fn busy(&self, group: GroupId) -> bool {
        self.ops.values().any(|o| o.group == group)
    }
}

/// What one kind of collective asks of the common start path.
struct Spec<'a> {
    key: ScheduleKey,
    reduction: Option<Reduction>,
    data: &'a [u8],
    want_result: bool,
}

impl<P: PortIo> Port<P> {
    /// A group with an application-chosen id, checked against this port at
    /// once (see [`Group::new`]).
    pub fn new_group(
        &mut self,
        id: GroupId,
        rank: u32,
        members: Vec<Endpoint>,
    ) -> Result<Group, HostError> {
        let g = Group::new(id, rank, members)?;
        self.register_group(&g)?;
        Ok(g)
    }

    /// Removes a group: destroys it at the engine if it was installed there
    /// and frees its id at this port (ids from `split` become reusable once
    /// every member freed the group). Refused while collectives of the group
    /// are under way or not yet handed back.
    pub fn free_group(&mut self, g: Group) -> Result<(), HostError> {
        self.progress();
        if self.coll.busy(g.id()) {
            return Err(CollectiveError::Engine(CollError::GroupBusy).into());
        }
        if g.installed {
            let group = g.id();
            let r = self.start(|op| Command::DestroyGroup { op, group })?;
            self.wait(r)?;
        }
        self.coll.groups.remove(&g.id());
        self.coll.ids.give(g.id());
        Ok(())
    }

    /// Checks that `g` names this port at its rank and that its id is not
    /// used by another group here; records it.
    pub(crate) fn register_group(&mut self, g: &Group) -> Result<(), HostError> {
        if g.members()[g.rank() as usize] != self.endpoint() {
            return Err(CollectiveError::NotMember.into());
        }
        match self.coll.groups.get(&g.id()) {
            Some(r) if *r.members != *g.members() => {
                Err(CollectiveError::GroupIdInUse(g.id()).into())
            }
            Some(_) => Ok(()),
            None => {
                self.coll.groups.insert(
                    g.id(),
                    Registered {
                        members: g.members_arc(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Installs the group and the schedule `key` at the engine if not there
    /// yet. Nothing waits: the engine takes a port's commands in order, so
    /// the collective posted next finds them installed; their completions
    /// are collected by [`Self::reap_setup`]. (A wait here would also stop
    /// virtual time in the simulator.)
    fn install(&mut self, g: &mut Group, key: ScheduleKey) -> Result<ScheduleId, HostError> {
        if !g.installed {
            let (group, rank) = (g.id(), g.rank());
            self.post_setup(group, &encode_members(g.members()), |op, members| {
                Command::CreateGroup {
                    op,
                    group,
                    rank,
                    members,
                }
            })?;
            g.installed = true;
        }
        let slot = g.slot(key)?;
        let schedule = slot.id;
        if !slot.installed {
            let bytes = slot.schedule.encode();
            let group = g.id();
            self.post_setup(group, &bytes, |op, buf| Command::SetSchedule {
                op,
                group,
                schedule,
                buf,
            })?;
            g.slot(key)?.installed = true;
        }
        Ok(schedule)
    }

    /// Posts a local set-up command that reads `bytes` from host memory.
    fn post_setup(
        &mut self,
        group: GroupId,
        bytes: &[u8],
        make: impl FnOnce(OpId, HostBuf) -> Command,
    ) -> Result<(), HostError> {
        let buf = self.buffer_from(bytes)?;
        match self.start(|op| make(op, buf)) {
            Ok(r) => {
                self.coll.setup.push((r, buf, group));
                Ok(())
            }
            Err(e) => {
                self.free(buf)?;
                Err(e)
            }
        }
    }

    /// Frees the buffers of finished set-up commands and remembers failures.
    fn reap_setup(&mut self) {
        let mut i = 0;
        while i < self.coll.setup.len() {
            let (r, buf, group) = self.coll.setup[i];
            match self.take(r) {
                None => i += 1,
                Some(result) => {
                    let _taken = self.coll.setup.swap_remove(i);
                    let _ = self.free(buf);
                    if let Err(e) = result {
                        self.coll.setup_failed.entry(group).or_insert(e);
                    }
                }
            }
        }
    }

    fn start_coll(
        &mut self,
        g: &mut Group,
        mode: BcastMode,
        spec: Spec<'_>,
    ) -> Result<CollRequest, HostError> {
        self.register_group(g)?;
        let spec = Spec {
            key: self.key_for_len(g.size(), mode, spec.key, spec.data.len()),
            ..spec
        };
        if let Some(r) = spec.reduction {
            r.validate().map_err(CollectiveError::from)?;
            r.check_len(spec.data.len())
                .map_err(CollectiveError::from)?;
        }
        let body = match mode {
            BcastMode::Offloaded => {
                let sched = self.install(g, spec.key)?;
                let bcast_root = match spec.key {
                    ScheduleKey::Bcast(_, root) => Some(root == g.rank()),
                    _ => None,
                };
                Body::Off(OffRun::new(
                    self,
                    g.id(),
                    sched,
                    spec.reduction,
                    spec.data,
                    spec.want_result,
                    bcast_root,
                )?)
            }
            BcastMode::HostBased => {
                let schedule = g.slot(spec.key)?.schedule.clone();
                let epoch = g.host_epoch;
                g.host_epoch = g.host_epoch.wrapping_add(1);
                let run = HostRun::new(
                    g.id(),
                    epoch,
                    g.rank(),
                    g.members_arc(),
                    schedule,
                    spec.reduction,
                    spec.data.to_vec(),
                )?;
                Body::Host(run)
            }
            BcastMode::NicAssisted { chunk } => {
                let ScheduleKey::Bcast(shape, root) = spec.key else {
                    unreachable!("only broadcasts take BcastMode::NicAssisted")
                };
                let tree = super::group::tree_for(shape, g.size(), root)?;
                let chunk = if chunk == BcastMode::PACKET {
                    packet_payload(self.io_ref())
                } else {
                    chunk
                };
                let epoch = g.nic_epoch;
                g.nic_epoch = g.nic_epoch.wrapping_add(1);
                let members = g.members_arc();
                Body::Nic(NicRun::new(
                    self,
                    g.id(),
                    epoch,
                    g.rank(),
                    &members,
                    &tree,
                    chunk,
                    spec.data,
                )?)
            }
        };
        let id = self.coll.next_id;
        self.coll.next_id += 1;
        if let Body::Off(run) = &body {
            self.coll
                .backlog
                .extend((0..run.chunks.len()).map(|i| (id, i)));
        }
        self.coll.ops.insert(
            id,
            CollOp {
                group: g.id(),
                mode,
                want_result: spec.want_result,
                body,
                result: None,
            },
        );
        // Post what can be posted now: a host-based collective sends its
        // first messages at once.
        self.progress();
        Ok(CollRequest { id })
    }

    /// `key` with a link-derived postal tree resolved for the unit the
    /// tree forwards in `mode`: the whole message host-based, one piece
    /// offloaded or NIC-assisted.
    fn key_for_len(&self, n: u32, mode: BcastMode, key: ScheduleKey, len: usize) -> ScheduleKey {
        let piece = match mode {
            BcastMode::HostBased => u32::MAX,
            BcastMode::Offloaded => self.io_ref().coll_max_len(),
            BcastMode::NicAssisted {
                chunk: BcastMode::PACKET,
            } => packet_payload(self.io_ref()),
            BcastMode::NicAssisted { chunk } => chunk,
        };
        let unit = u32::try_from(len).unwrap_or(u32::MAX).min(piece);
        match key {
            ScheduleKey::Reduce(s, root) => ScheduleKey::Reduce(s.for_len(n, unit), root),
            ScheduleKey::Bcast(s, root) => ScheduleKey::Bcast(s.for_len(n, unit), root),
            ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(s)) => {
                ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(s.for_len(n, unit)))
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
            let posted = match &mut op.body {
                Body::Off(run) if op.result.is_none() => run.post(self, i),
                _ => Ok(true),
            };
            let stop = match posted {
                Ok(true) => {
                    self.coll.backlog.pop_front();
                    false
                }
                Ok(false) => true,
                Err(e) => {
                    // Chunks already posted are forgotten (their buffers
                    // leaked: the engine may still use them).
                    if let Body::Off(run) = &op.body {
                        for c in &run.chunks {
                            if let Some(r) = c.req {
                                self.forget(r);
                            }
                        }
                    }
                    op.body = Body::Done;
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
        let ids: Vec<u64> = self
            .coll
            .ops
            .iter()
            .filter(|(_, o)| o.result.is_none())
            .map(|(&k, _)| k)
            .collect();
        for id in ids {
            let mut op = self.coll.ops.remove(&id).expect("listed above");
            let done = match &mut op.body {
                Body::Off(run) => run.advance(self),
                Body::Host(run) => {
                    let r = run.advance(self);
                    if r.is_some() {
                        let t = run.take_trailing();
                        self.coll.trailing.extend(t);
                    }
                    r
                }
                Body::Nic(run) => run.advance(self),
                Body::Done => None,
            };
            if let Some(r) = done {
                op.body = Body::Done;
                let r = match (r, self.coll.setup_failed.get(&op.group)) {
                    (Err(_), Some(setup)) if op.mode == BcastMode::Offloaded => Err(*setup),
                    (r, _) => r,
                };
                op.result = Some(r.map(|v| if op.want_result { v } else { Vec::new() }));
            }
            self.coll.ops.insert(id, op);
        }
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

    fn check_root(g: &Group, root: u32) -> Result<(), HostError> {
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

    /// Starts a reduction of every member's `data` to `root` on a tree of
    /// `tree`'s shape rooted there.
    pub fn start_reduce(
        &mut self,
        g: &mut Group,
        mode: Mode,
        tree: TreeShape,
        root: u32,
        red: Reduction,
        data: &[u8],
    ) -> Result<CollRequest, HostError> {
        Self::check_root(g, root)?;
        let want_result = g.rank() == root;
        let spec = Spec {
            key: ScheduleKey::Reduce(tree, root),
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
        tree: TreeShape,
        root: u32,
        red: Reduction,
        data: &[u8],
    ) -> Result<Vec<u8>, HostError> {
        let r = self.start_reduce(g, mode, tree, root, red, data)?;
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
