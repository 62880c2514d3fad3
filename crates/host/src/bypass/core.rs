//! The state an application-bypass port keeps and the progress that moves
//! it, shared by the library's calls and the interrupt handler.
//!
//! Everything the handler runs (`Core::progress`) is free of allocation:
//! fixed slots of DMA-reachable memory, receives kept posted in them,
//! operation names that encode the slot they belong to, the tree computed
//! by iteration. Only a library call (never the handler) adds a slot, when
//! every receive slot of a kind holds a value of a later collective than
//! the one the call needs (values of different roots can overtake each
//! other): the bound is the configured slot count plus the application's
//! own lag.

use outboard_engine::{Command, CommandError, Completion, Endpoint, Event, GroupId, HostBuf, OpId, RecvMatch, Reduction};

use crate::coll::tree::{binomial_children, binomial_parent};
use super::{BypassError, BypassStats};
use crate::{HostError, Port, PortIo};

/// Operation names of bypass traffic: far above any the port hands out.
const OP_BIT: u64 = 1 << 62;
/// Of a send-pool slot (else a receive slot).
const POOL_BIT: u64 = 1 << 61;
/// A send (else the slot's receive).
const SEND_BIT: u64 = 1 << 60;
/// Where an operation name carries its group's index in the port's set
/// (12 bits, between the slot's 16 and the flag bits).
const INDEX_SHIFT: u32 = 48;
/// How many bypass groups one port can hold.
pub(crate) const MAX_GROUPS: usize = 1 << 12;
const EPOCH_MASK: u32 = (1 << 23) - 1;
const ROOT_MASK: u64 = 0x7FFF;

/// The largest value a bypass collective carries: MPICH-GM's eager limit
/// (6.2.3). A rendezvous value's destination is unknown until the call, so
/// holding it in a temporary buffer would cost the copies rendezvous
/// avoids; larger values are refused ([`BypassError::TooLong`]).
pub const MAX_LEN: u32 = 16 * 1024;

/// Whether an event belongs to bypass traffic.
pub(crate) fn is_bypass(op: OpId) -> bool {
    op.0 & OP_BIT != 0
}

/// Which of the port's bypass groups an operation of bypass traffic is of.
pub(crate) fn index_of(op: OpId) -> u16 {
    ((op.0 >> INDEX_SHIFT) as usize % MAX_GROUPS) as u16
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bcast = 0,
    Reduce = 1,
}

/// The tag: the host-based collectives' layout (bit 63, group, epoch) with
/// the round field holding kind and root.
fn tag(group: GroupId, kind: Kind, epoch: u32, root: u32) -> u64 {
    (1 << 63) | (group.0 << 40) | (u64::from(epoch & EPOCH_MASK) << 16) | ((kind as u64) << 15) | (u64::from(root) & ROOT_MASK)
}

/// Receives of one kind, any epoch, any root.
fn kind_match(group: GroupId, kind: Kind) -> RecvMatch {
    RecvMatch { source: None, tag: tag(group, kind, 0, 0), tag_mask: !((u64::from(EPOCH_MASK) << 16) | ROOT_MASK) }
}

fn decode(tag: u64) -> (u32, u32) {
    (((tag >> 16) as u32) & EPOCH_MASK, (tag & ROOT_MASK) as u32)
}

/// The root's reduce call under way: its accumulator's slot, how many
/// children fold into it, and the value's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceCall {
    slot: usize,
    children: u32,
    len: usize,
}

/// Where a broadcast call is (see [`Core::bcast_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BcastStage {
    /// Not yet served: the root looks for a send slot (`tries` so far),
    /// others wait for the value.
    Start { tries: u32 },
    /// The value was copied out of receive slot `.0`; its forwards may
    /// still wait for send tokens.
    Copied(usize),
    Done,
}

/// A broadcast call under way, for a driver that cannot block (see
/// [`super::Bypass::hold`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BcastCall {
    epoch: u32,
    root: u32,
    stage: BcastStage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecvState {
    /// No receive posted (refused for want of a token, or just freed).
    Idle,
    /// A receive posted under this name (which a detach cancels).
    Posted(OpId),
    /// A value arrived: for a broadcast, forwarded to `next` children so
    /// far with `pending` sends unconfirmed, copied out once `consumed`;
    /// for a reduce, held until its epoch's accumulator takes it (in its
    /// turn: `from`, the sender's group rank, says which child it is).
    Full { epoch: u32, root: u32, len: u32, next: u32, pending: u32, consumed: bool, from: u32 },
}

#[derive(Debug)]
struct RecvSlot {
    buf: HostBuf,
    kind: Kind,
    state: RecvState,
    /// Added by a call beyond the configured count (counted in stats).
    #[allow(dead_code)]
    extra: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendState {
    Free,
    /// A root's broadcast value, sent to `next` children so far.
    Root { epoch: u32, root: u32, len: u32, next: u32, pending: u32 },
    /// A reduce's accumulator: this member's contribution folded with
    /// `folded` of its `children` so far; sent up once all are in.
    Acc { epoch: u32, root: u32, red: Reduction, len: u32, children: u32, folded: u32, sent: bool, pending: u32 },
}

#[derive(Debug)]
struct SendSlot {
    buf: HostBuf,
    local: Vec<u8>,
    state: SendState,
    /// A reduce's children's contributions taken out of their receive
    /// slots as they arrive, child `k` (in folding order) at `k * len`,
    /// so that slots never stay full waiting for an earlier child; sized
    /// by the call, so that handlers allocate nothing.
    held: Vec<u8>,
    /// Which children's contributions `held` has.
    have: Vec<bool>,
}

pub(crate) struct Core {
    /// Which of its port's bypass groups this is: carried in every
    /// operation name, so the port hands each completion to its group.
    index: u16,
    members: Vec<Endpoint>,
    rank: u32,
    group: GroupId,
    recvs: Vec<RecvSlot>,
    sends: Vec<SendSlot>,
    next_op: u64,
    pub bcast_epoch: u32,
    pub reduce_epoch: u32,
    pub error: Option<HostError>,
    pub stats: BypassStats,
}

impl Core {
    pub fn new<P: PortIo>(port: &mut Port<P>, index: u16, members: Vec<Endpoint>, rank: u32, group: GroupId, slots: usize) -> Result<Self, BypassError> {
        let mut core = Core {
            index,
            members,
            rank,
            group,
            recvs: Vec::with_capacity(4 * slots),
            sends: Vec::with_capacity(2 * slots),
            next_op: 0,
            bcast_epoch: 0,
            reduce_epoch: 0,
            error: None,
            stats: BypassStats::default(),
        };
        for i in 0..2 * slots {
            let kind = if i % 2 == 0 { Kind::Bcast } else { Kind::Reduce };
            if let Err(e) = core.add_recv(port, kind, false) {
                core.release(port);
                return Err(e.into());
            }
        }
        for _ in 0..slots {
            if let Err(e) = core.add_send(port) {
                core.release(port);
                return Err(e.into());
            }
        }
        Ok(core)
    }

    fn n(&self) -> u32 {
        self.members.len() as u32
    }

    /// How many receive slots the group has (each a receive kept posted).
    pub fn recv_slots(&self) -> usize {
        self.recvs.len()
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    fn add_recv<P: PortIo>(&mut self, port: &mut Port<P>, kind: Kind, extra: bool) -> Result<(), HostError> {
        let buf = port.buffer(MAX_LEN)?;
        self.recvs.push(RecvSlot { buf, kind, state: RecvState::Idle, extra });
        self.pump(port);
        Ok(())
    }

    fn add_send<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<usize, HostError> {
        let buf = port.buffer(MAX_LEN)?;
        self.sends.push(SendSlot { buf, local: vec![0; MAX_LEN as usize], state: SendState::Free, held: Vec::new(), have: Vec::new() });
        Ok(self.sends.len() - 1)
    }

    fn op(&mut self, pool: bool, send: bool, slot: usize) -> OpId {
        self.next_op = (self.next_op + 1) & 0xFFFF_FFFF;
        let mut id = OP_BIT | (u64::from(self.index) << INDEX_SHIFT) | ((slot as u64) << 32) | self.next_op;
        if pool {
            id |= POOL_BIT;
        }
        if send {
            id |= SEND_BIT;
        }
        OpId(id)
    }

    fn fail(&mut self, e: HostError) {
        self.error.get_or_insert(e);
    }

    /// Takes every completion and does whatever can be done now, for this
    /// group (out of its port's set while a call runs on it) and the
    /// port's other bypass groups. Free of allocation.
    pub fn progress<P: PortIo>(&mut self, port: &mut Port<P>) {
        loop {
            while let Some(e) = port.next_event() {
                if is_bypass(e.op) && index_of(e.op) == self.index {
                    self.on_event(e);
                } else {
                    port.record(e);
                }
            }
            let mine = self.pump(port);
            if !(port.bypass_pump() | mine) {
                break;
            }
        }
    }

    /// The port's completion `e` of this group's traffic.
    pub fn on_event(&mut self, e: Event) {
        let id = e.op.0;
        let slot = ((id >> 32) & 0xFFFF) as usize;
        if id & POOL_BIT != 0 {
            if let Err(err) = e.result {
                self.fail(err.into());
            }
            let s = &mut self.sends[slot];
            match &mut s.state {
                SendState::Root { pending, .. } | SendState::Acc { pending, .. } => *pending -= 1,
                SendState::Free => {}
            }
            return;
        }
        if id & SEND_BIT != 0 {
            if let Err(err) = e.result {
                self.fail(err.into());
            }
            if let RecvState::Full { pending, .. } = &mut self.recvs[slot].state {
                *pending -= 1;
            }
            return;
        }
        match e.result {
            Ok(Completion::Received { tag, len, src }) => {
                let (epoch, root) = decode(tag);
                let from = self.members.iter().position(|m| m.node == src.node && m.port == src.port).map_or(u32::MAX, |i| i as u32);
                let r = &mut self.recvs[slot];
                r.state = RecvState::Full { epoch, root, len, next: 0, pending: 0, consumed: false, from };
                if r.kind == Kind::Bcast {
                    self.stats.received += 1;
                }
            }
            Ok(other) => unreachable!("a receive completed as {other:?}"),
            Err(err) => {
                self.recvs[slot].state = RecvState::Idle;
                self.fail(err.into());
            }
        }
    }

    /// Posts what can be posted, folds what can be folded, frees what is
    /// done. Whether anything changed.
    pub fn pump<P: PortIo>(&mut self, port: &mut Port<P>) -> bool {
        let mut changed = false;
        let n = self.n();
        let me = self.rank;
        for i in 0..self.recvs.len() {
            let r = &self.recvs[i];
            match r.state {
                RecvState::Idle => {
                    let op = self.op(false, false, i);
                    let r = &mut self.recvs[i];
                    let cmd = Command::Recv { op, matching: kind_match(self.group, r.kind), buf: r.buf };
                    match port.io().post(cmd) {
                        Ok(()) => {
                            self.recvs[i].state = RecvState::Posted(op);
                            changed = true;
                        }
                        Err(CommandError::NoRecvToken) => {}
                        Err(e) => self.fail(e.into()),
                    }
                }
                RecvState::Full { epoch, root, len, next, pending, consumed, from } if r.kind == Kind::Bcast => {
                    let kids = binomial_children(n, root, me).count() as u32;
                    if next < kids {
                        let child = binomial_children(n, root, me).rev().nth(next as usize).expect("counted");
                        let buf = HostBuf { addr: r.buf.addr, len };
                        let t = tag(self.group, Kind::Bcast, epoch, root);
                        let op = self.op(false, true, i);
                        if self.post_send(port, op, child, t, buf, root) {
                            self.stats.forwarded += 1;
                            self.recvs[i].state = RecvState::Full { epoch, root, len, next: next + 1, pending: pending + 1, consumed, from };
                            changed = true;
                        }
                    } else if consumed && pending == 0 {
                        self.recvs[i].state = RecvState::Idle;
                        changed = true;
                    }
                }
                _ => {}
            }
        }
        for i in 0..self.sends.len() {
            match self.sends[i].state {
                SendState::Free => {}
                SendState::Root { epoch, root, len, next, pending } => {
                    let kids = binomial_children(n, root, me).count() as u32;
                    if next < kids {
                        let child = binomial_children(n, root, me).rev().nth(next as usize).expect("counted");
                        let buf = HostBuf { addr: self.sends[i].buf.addr, len };
                        let op = self.op(true, true, i);
                        if self.post_send(port, op, child, tag(self.group, Kind::Bcast, epoch, root), buf, root) {
                            self.sends[i].state = SendState::Root { epoch, root, len, next: next + 1, pending: pending + 1 };
                            changed = true;
                        }
                    } else if pending == 0 {
                        self.sends[i].state = SendState::Free;
                        changed = true;
                    }
                }
                SendState::Acc { epoch, root, red, len, children, folded, sent, pending } => {
                    let mut folded = folded;
                    // Take the children's contributions that arrived out
                    // of their slots, then fold them each in its turn:
                    // nearest child first, as every reduction of the host
                    // library folds (`Tree::children`), so floating-point
                    // results do not depend on arrival order.
                    for j in 0..self.recvs.len() {
                        let r = &self.recvs[j];
                        let RecvState::Full { epoch: e, root: ro, len: l, from, .. } = r.state else { continue };
                        if r.kind != Kind::Reduce || e != epoch & EPOCH_MASK || ro != root {
                            continue;
                        }
                        let addr = r.buf.addr;
                        self.recvs[j].state = RecvState::Idle;
                        changed = true;
                        let k = binomial_children(n, root, me).position(|c| c == from);
                        match k {
                            Some(k) if l == len => {
                                let at = k * len as usize..(k + 1) * len as usize;
                                let s = &mut self.sends[i];
                                match port.io_ref().read(addr, &mut s.held[at]) {
                                    Ok(()) => s.have[k] = true,
                                    Err(e) => self.fail(HostError::from(e)),
                                }
                            }
                            Some(_) => self.fail(HostError::Coll(crate::CollectiveError::Engine(outboard_engine::CollError::LengthMismatch { expected: len, got: l }))),
                            None => self.fail(HostError::Coll(crate::CollectiveError::Engine(outboard_engine::CollError::Malformed("a reduce contribution from a rank that is not a child")))),
                        }
                    }
                    while folded < children && self.sends[i].have[folded as usize] {
                        let s = &mut self.sends[i];
                        let l = len as usize;
                        let at = folded as usize * l;
                        let (local, held) = (&mut s.local[..l], &s.held[at..at + l]);
                        if let Err(e) = red.fold(local, held, false) {
                            self.error.get_or_insert(HostError::Coll(crate::CollectiveError::Engine(e)));
                        }
                        self.stats.combined += 1;
                        folded += 1;
                        changed = true;
                    }
                    self.sends[i].state = SendState::Acc { epoch, root, red, len, children, folded, sent, pending };
                    if folded == children && !sent {
                        if let Some(parent) = binomial_parent(n, root, me) {
                            let buf = HostBuf { addr: self.sends[i].buf.addr, len };
                            let l = len as usize;
                            let data_ok = port.io().write(buf.addr, &self.sends[i].local[..l]).is_ok();
                            let op = self.op(true, true, i);
                            if data_ok && self.post_send(port, op, parent, tag(self.group, Kind::Reduce, epoch, root), buf, root) {
                                self.sends[i].state = SendState::Acc { epoch, root, red, len, children, folded, sent: true, pending: pending + 1 };
                                changed = true;
                            }
                        }
                    } else if sent && pending == 0 {
                        self.sends[i].state = SendState::Free;
                        changed = true;
                    }
                }
            }
        }
        changed
    }

    /// Posts one send of bypass traffic: marked when its receiver is an
    /// inner member other than the root (its host acts on it in the
    /// handler; a root or a leaf acts only in its own call). False when
    /// the port has no send token now.
    fn post_send<P: PortIo>(&mut self, port: &mut Port<P>, op: OpId, to: u32, tag: u64, buf: HostBuf, root: u32) -> bool {
        let n = self.n();
        let dest = self.members[to as usize];
        let reduce = tag & (1 << 15) != 0;
        let needs_host = if reduce { to != root } else { binomial_children(n, root, to).next().is_some() };
        let cmd = if needs_host {
            Command::SendMarked { op, dest, tag, buf }
        } else {
            Command::Send { op, dest, tag, buf }
        };
        match port.io().post(cmd) {
            Ok(()) => true,
            Err(CommandError::NoSendToken) => false,
            Err(e) => {
                self.fail(e.into());
                false
            }
        }
    }

    // ---- what the library's calls use (may allocate) ----

    fn take(&mut self) -> Result<(), BypassError> {
        match self.error.take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// A free send slot, waiting for one (or adding one after a while).
    fn free_send<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<usize, BypassError> {
        for _ in 0..1000 {
            self.progress(port);
            if let Some(i) = self.sends.iter().position(|s| s.state == SendState::Free) {
                return Ok(i);
            }
            port.io().idle();
        }
        Ok(self.add_send(port)?)
    }

    pub fn bcast<P: PortIo>(&mut self, port: &mut Port<P>, root: u32, data: &mut [u8]) -> Result<(), BypassError> {
        let mut call = self.bcast_call(root, data.len())?;
        loop {
            if self.bcast_step(port, &mut call, data)? {
                return Ok(());
            }
            port.io().idle();
        }
    }

    /// Starts a broadcast call: checks it and takes its epoch.
    pub fn bcast_call(&mut self, root: u32, len: usize) -> Result<BcastCall, BypassError> {
        self.check(root, len)?;
        let epoch = self.bcast_epoch;
        self.bcast_epoch = self.bcast_epoch.wrapping_add(1);
        Ok(BcastCall { epoch, root, stage: BcastStage::Start { tries: 0 } })
    }

    /// One non-blocking step of a broadcast call: true once it is done
    /// (the root's value copied and its sends posted; elsewhere the value
    /// copied into `data` and this member's forwards posted). A caller
    /// that gets false waits for the port and steps again.
    pub fn bcast_step<P: PortIo>(&mut self, port: &mut Port<P>, call: &mut BcastCall, data: &mut [u8]) -> Result<bool, BypassError> {
        let (epoch, root) = (call.epoch, call.root);
        if self.rank == root {
            let BcastStage::Start { tries } = call.stage else { return Ok(true) };
            // A free send slot (or, after a while, a new one).
            self.progress(port);
            let i = match self.sends.iter().position(|s| s.state == SendState::Free) {
                Some(i) => i,
                None if tries + 1 >= 1000 => self.add_send(port)?,
                None => {
                    call.stage = BcastStage::Start { tries: tries + 1 };
                    return Ok(false);
                }
            };
            let addr = self.sends[i].buf.addr;
            port.io().write(addr, data).map_err(HostError::from)?;
            self.sends[i].state = SendState::Root { epoch, root, len: data.len() as u32, next: 0, pending: 0 };
            call.stage = BcastStage::Done;
            self.progress(port);
            self.take()?;
            return Ok(true);
        }
        if let BcastStage::Start { .. } = call.stage {
            // Waiting for the value.
            self.progress(port);
            self.take()?;
            let found = self.recvs.iter().position(|r| {
                r.kind == Kind::Bcast && matches!(r.state, RecvState::Full { epoch: e, root: ro, consumed: false, .. } if e == epoch & EPOCH_MASK && ro == root)
            });
            let Some(i) = found else {
                if !self.recvs.iter().any(|r| r.kind == Kind::Bcast && matches!(r.state, RecvState::Posted(_) | RecvState::Idle)) {
                    // Every slot holds a later value: this call's may sit in the
                    // engine's unexpected queue. Give it a slot.
                    self.add_recv(port, Kind::Bcast, true)?;
                    self.stats.slots_added += 1;
                }
                return Ok(false);
            };
            let RecvState::Full { len, .. } = self.recvs[i].state else { unreachable!("found full") };
            if len as usize != data.len() {
                return Err(BypassError::LengthMismatch { expected: data.len() as u32, got: len });
            }
            port.io_ref().read(self.recvs[i].buf.addr, data).map_err(HostError::from)?;
            self.stats.copied_out += 1;
            if let RecvState::Full { consumed, .. } = &mut self.recvs[i].state {
                *consumed = true;
            }
            call.stage = BcastStage::Copied(i);
        }
        let BcastStage::Copied(i) = call.stage else { return Ok(true) };
        // Leave only once the forwards are posted: nothing else may be
        // there to post them.
        self.progress(port);
        match self.recvs[i].state {
            RecvState::Full { root: ro, next, .. } if next < binomial_children(self.n(), ro, self.rank).count() as u32 => Ok(false),
            _ => {
                call.stage = BcastStage::Done;
                self.take()?;
                Ok(true)
            }
        }
    }

    pub fn reduce<P: PortIo>(&mut self, port: &mut Port<P>, root: u32, red: Reduction, data: &[u8], out: &mut [u8]) -> Result<(), BypassError> {
        let Some(mut call) = self.reduce_call(port, root, red, data, out.len())? else { return Ok(()) };
        loop {
            if self.reduce_step(port, &mut call, out)? {
                return Ok(());
            }
            port.io().idle();
        }
    }

    /// Starts a reduce call: this member's contribution goes into an
    /// accumulator, whose children's values and send up are the
    /// handler's (or a later call's) work. `None` at a non-root, which is
    /// done; the root steps the call ([`Core::reduce_step`]) until its
    /// children are in. `out_len` is the root's result buffer's.
    pub fn reduce_call<P: PortIo>(&mut self, port: &mut Port<P>, root: u32, red: Reduction, data: &[u8], out_len: usize) -> Result<Option<ReduceCall>, BypassError> {
        self.check(root, data.len())?;
        red.validate().map_err(|e| HostError::Coll(crate::CollectiveError::Engine(e)))?;
        red.check_len(data.len()).map_err(|e| HostError::Coll(crate::CollectiveError::Engine(e)))?;
        if self.rank == root && out_len != data.len() {
            return Err(BypassError::LengthMismatch { expected: data.len() as u32, got: out_len as u32 });
        }
        let epoch = self.reduce_epoch;
        self.reduce_epoch = self.reduce_epoch.wrapping_add(1);
        let children = binomial_children(self.n(), root, self.rank).count() as u32;
        let i = self.free_send(port)?;
        let s = &mut self.sends[i];
        s.local[..data.len()].copy_from_slice(data);
        // Room for every child's contribution, made here, not in a
        // handler (grown only: what it held before is overwritten).
        let room = children as usize * data.len();
        if s.held.len() < room {
            s.held.resize(room, 0);
        }
        s.have.clear();
        s.have.resize(children as usize, false);
        self.sends[i].state = SendState::Acc { epoch, root, red, len: data.len() as u32, children, folded: 0, sent: false, pending: 0 };
        self.progress(port);
        self.take()?;
        Ok((self.rank == root).then_some(ReduceCall { slot: i, children, len: data.len() }))
    }

    /// One non-blocking step of the root's reduce call: true once every
    /// child's value is folded and the result is in `out`. On false, wait
    /// until the port has a completion and step again.
    pub fn reduce_step<P: PortIo>(&mut self, port: &mut Port<P>, call: &mut ReduceCall, out: &mut [u8]) -> Result<bool, BypassError> {
        self.progress(port);
        self.take()?;
        let i = call.slot;
        if let SendState::Acc { folded, .. } = self.sends[i].state {
            if folded == call.children {
                out[..call.len].copy_from_slice(&self.sends[i].local[..call.len]);
                self.sends[i].state = SendState::Free;
                return Ok(true);
            }
        }
        if !self.recvs.iter().any(|r| r.kind == Kind::Reduce && matches!(r.state, RecvState::Posted(_) | RecvState::Idle)) {
            self.add_recv(port, Kind::Reduce, true)?;
            self.stats.slots_added += 1;
        }
        Ok(false)
    }

    fn check(&self, root: u32, len: usize) -> Result<(), BypassError> {
        if len > MAX_LEN as usize {
            return Err(BypassError::TooLong { len, max: MAX_LEN });
        }
        if root >= self.n() || u64::from(root) > ROOT_MASK {
            return Err(BypassError::BadRoot(root));
        }
        Ok(())
    }

    /// Whether nothing of this member's is under way: every value sent and
    /// confirmed, every accumulator sent up.
    pub fn quiet(&self) -> bool {
        self.sends.iter().all(|s| s.state == SendState::Free)
            && self.recvs.iter().all(|r| match r.state {
                RecvState::Full { pending, root, next, .. } if r.kind == Kind::Bcast => {
                    pending == 0 && next >= binomial_children(self.n(), root, self.rank).count() as u32
                }
                _ => true,
            })
    }

    /// Waits until [`Core::quiet`].
    pub fn quiesce<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), BypassError> {
        loop {
            self.progress(port);
            self.take()?;
            if self.quiet() {
                return Ok(());
            }
            if !self.recvs.iter().any(|r| r.kind == Kind::Reduce && matches!(r.state, RecvState::Posted(_) | RecvState::Idle)) {
                self.add_recv(port, Kind::Reduce, true)?;
            }
            port.io().idle();
        }
    }

    /// Gives back what the group holds at `port` once it is quiet: its
    /// posted receives cancelled (their buffers are the engine's until
    /// then), then every buffer freed. Errors are the port's: the group is
    /// gone either way.
    pub fn release<P: PortIo>(self, port: &mut Port<P>) {
        for r in &self.recvs {
            if let RecvState::Posted(target) = r.state {
                // A receive that matched meanwhile cannot be cancelled;
                // its completion is then dropped with the group.
                if let Ok(req) = port.start(|op| Command::Cancel { op, target }) {
                    let _ = port.wait(req);
                }
            }
        }
        for b in self.recvs.iter().map(|r| r.buf).chain(self.sends.iter().map(|s| s.buf)) {
            let _ = port.free(b);
        }
    }
}
