//! Running collectives inside the engine: installing groups and schedules,
//! starting collectives, filing arriving packets, folding, sending, and
//! completing in order.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use outboard_wire::{self as wire, RejectReason};

use super::{decode_members, CollError, Fold, GroupId, Reduction, Schedule, ScheduleId};
use crate::conn::TxRecord;
use crate::{Completion, Dma, Endpoint, Engine, Generation, HostBuf, Instant, NodeId, OpError, OpId, PortId};

/// Collective packet keys carry this bit, so a refusal can tell them from
/// the keys of point-to-point operations.
pub(crate) const COLL_KEY_BIT: u32 = 1 << 31;
/// Pool bookkeeping charged per unexpected packet.
const ARRIVAL_OVERHEAD: usize = 32;
/// Bookkeeping charged per unconfirmed outgoing packet against
/// `EngineConfig::coll_send_bytes` (about the size of a [`CollOut`]).
const OUT_OVERHEAD: usize = 96;

/// A schedule prepared for running: each send and receive knows its round
/// (its ordinal among the packets between the same two members).
#[derive(Debug)]
pub(crate) struct Compiled {
    /// Its number in the group (carried by its packets).
    pub id: u16,
    pub schedule: Schedule,
    /// Whether the engine may run it before the host starts it: it begins
    /// by taking one packet's value whole (Replace) before sending
    /// anything and never combines, so the host's contribution is never
    /// read - a non-root member of a broadcast. Such a collective is
    /// started by its first packet; the host's command later only collects
    /// the result.
    pub forwards_alone: bool,
    /// Whether its value is sent exactly as the host gave it: it sends
    /// first and never takes a packet's value (a broadcast root). Such a
    /// member's pieces of a multi-piece command are read from host memory
    /// packet by packet ([`Lazy`]).
    pub sends_host_value: bool,
    /// `send_round[step][i]` for `steps[step].send_to[i]`.
    pub send_round: Vec<Vec<u16>>,
    /// `recv_round[step][i]` for `steps[step].recv_from[i]`.
    pub recv_round: Vec<Vec<u16>>,
}

impl Compiled {
    fn new(id: u16, schedule: Schedule) -> Result<Compiled, CollError> {
        let mut sent: HashMap<u32, u32> = HashMap::new();
        let mut got: HashMap<u32, u32> = HashMap::new();
        let next = |m: &mut HashMap<u32, u32>, r: u32| -> Result<u16, CollError> {
            let c = m.entry(r).or_insert(0);
            let v = u16::try_from(*c).map_err(|_| CollError::Malformed("more than 65,536 packets between two members"))?;
            *c += 1;
            Ok(v)
        };
        let mut send_round = Vec::with_capacity(schedule.steps.len());
        let mut recv_round = Vec::with_capacity(schedule.steps.len());
        for s in &schedule.steps {
            send_round.push(s.send_to.iter().map(|&r| next(&mut sent, r)).collect::<Result<Vec<_>, _>>()?);
            recv_round.push(s.recv_from.iter().map(|&r| next(&mut got, r)).collect::<Result<Vec<_>, _>>()?);
        }
        let forwards_alone = schedule.steps.first().is_some_and(|s| {
            s.send_to.is_empty() && s.recv_from.len() == 1 && s.fold() == Fold::Replace
        }) && schedule.steps.iter().all(|s| s.fold() != Fold::Combine);
        let sends_host_value = schedule.steps.first().is_some_and(|s| !s.send_to.is_empty())
            && schedule.steps.iter().all(|s| s.recv_from.is_empty() || s.fold() == Fold::Ignore);
        Ok(Compiled { id, schedule, send_round, recv_round, forwards_alone, sends_host_value })
    }

    /// Whether a packet from `src` numbered `round` can start this
    /// collective without its host.
    fn starts_on(&self, src: u32, round: u16) -> bool {
        self.forwards_alone && self.schedule.steps[0].recv_from[0] == src && self.recv_round[0][0] == round
    }

    /// Whether some receive of this schedule expects (src, round).
    fn expects(&self, src: u32, round: u16) -> bool {
        self.schedule
            .steps
            .iter()
            .zip(&self.recv_round)
            .any(|(s, rr)| s.recv_from.iter().zip(rr).any(|(&r, &n)| r == src && n == round))
    }
}

/// A collective packet held at the receiver until its step folds it.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub src_rank: u32,
    pub round: u16,
    /// The sender's schedule number.
    pub schedule: u16,
    pub data: Vec<u8>,
}

/// A host's `Collective` command as the engine starts it: the fields of
/// [`crate::Command::Collective`], passed whole (and, per piece, with the
/// piece's slices of `send` and `recv`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CollRequest {
    pub op: OpId,
    pub group: GroupId,
    pub schedule: ScheduleId,
    pub reduction: Option<Reduction>,
    pub send: HostBuf,
    pub recv: HostBuf,
}

/// A piece's value still in host memory: the engine reads it when its
/// first packet is transmitted (not at command time), so a root's piece
/// i+1 is read while piece i is on the wire. Every copy of the piece shares
/// the cell, so the host buffer is read once.
#[derive(Debug, Clone)]
pub(crate) struct Lazy {
    pub buf: HostBuf,
    pub cell: Arc<OnceLock<Arc<[u8]>>>,
}

/// An outgoing packet's payload: in engine memory, or still in the host's
/// (see [`Lazy`]).
#[derive(Debug, Clone)]
pub(crate) enum OutData {
    Ready(Arc<[u8]>),
    Host(Lazy),
}

impl OutData {
    fn len(&self) -> usize {
        match self {
            OutData::Ready(d) => d.len(),
            OutData::Host(l) => l.buf.len as usize,
        }
    }
}

/// What the earlier pieces of a multi-piece command came to, kept until its
/// last piece completes (pieces complete in epoch order, so one per group).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Partial {
    pub op: OpId,
    /// The first piece's epoch (the one the completion reports).
    pub epoch: u32,
    pub len: u32,
    pub err: Option<OpError>,
}

/// One collective under way at one member.
///
/// The packets it sends are not waited for: their value lives in engine
/// memory and the connection delivers it reliably, so the host gets its
/// result as soon as its own steps are done (a leaf of a reduction returns
/// at once, as an eager send does). A packet that fails after the
/// collective completed is counted in `Stats::coll_abandoned`.
#[derive(Debug)]
pub(crate) struct Running {
    pub epoch: u32,
    /// The host's command; `None` while the engine runs it on its own
    /// (see [`Compiled::forwards_alone`]).
    pub op: Option<OpId>,
    pub sched: Arc<Compiled>,
    pub reduction: Option<Reduction>,
    pub value: Vec<u8>,
    pub recv: HostBuf,
    pub step: usize,
    pub sent: bool,
    pub next_recv: usize,
    pub arrived: Vec<Arrival>,
    pub outcome: Option<Result<(), OpError>>,
    /// Pool bytes it holds while no host command owns it.
    pub held: usize,
    /// Whether it is the last piece of its host command (a command longer
    /// than one packet runs as consecutive collectives, one per piece, and
    /// completes once, with its last piece).
    pub last: bool,
    /// Its value, when it is sent unchanged from host memory and read per
    /// packet (the pieces of a multi-piece command's root).
    pub lazy: Option<Lazy>,
}

/// A group installed at one port incarnation.
#[derive(Debug)]
pub(crate) struct Group {
    pub gen: Generation,
    pub rank: u32,
    pub members: Vec<Endpoint>,
    pub schedules: HashMap<u16, Arc<Compiled>>,
    /// The epoch the next collective started here takes (by the host or,
    /// for a broadcast, by its first packet).
    pub next_epoch: u32,
    /// The epoch the host's next collective command takes; below
    /// `next_epoch` when the engine started collectives on its own.
    pub host_epoch: u32,
    /// In epoch order; completed from the front.
    pub running: VecDeque<Running>,
    /// The earlier pieces of the multi-piece command now completing.
    pub partial: Option<Partial>,
}

/// An outgoing collective packet, kept (payload included: it lives in
/// engine memory, not the host's) until its receiver confirms it.
#[derive(Debug, Clone)]
pub(crate) struct CollOut {
    pub port: PortId,
    pub port_gen: Generation,
    pub group: GroupId,
    pub epoch: u32,
    pub src_rank: u32,
    pub round: u16,
    pub schedule: u16,
    /// Not the first packet of its step: the same value the step already
    /// sent to another rank (a NIC re-sends a prepared packet with another
    /// destination).
    pub copy: bool,
    pub dest: Endpoint,
    pub data: OutData,
    pub attempt: u32,
    pub retry_at: Option<Instant>,
    pub first_refused: Option<Instant>,
}

/// Engine-wide collective state.
#[derive(Debug, Default)]
pub(crate) struct CollState {
    pub groups: HashMap<(PortId, GroupId), Group>,
    /// Packets for collectives not started (or groups not created) yet.
    pub pool: HashMap<(PortId, GroupId, u32), Vec<Arrival>>,
    pub pool_bytes: usize,
    pub out: HashMap<u32, CollOut>,
    pub next_key: u32,
    /// Refused packets waiting to be retried (keys).
    pub parked: std::collections::BTreeSet<u32>,
    /// When to next probe the peers that running collectives wait for.
    pub keepalive_at: Option<Instant>,
    /// Per port: bytes its entries in `out` hold (payload + bookkeeping).
    pub out_bytes: HashMap<PortId, usize>,
    /// Groups with a collective whose sends wait for room under their
    /// port's send bound.
    pub blocked: std::collections::BTreeSet<(PortId, GroupId)>,
    /// Whether packets left `out` since blocked groups were last looked at.
    pub drain_due: bool,
}

/// Packets a collective's step sends, before they become [`CollOut`]s.
struct PendingSends {
    epoch: u32,
    schedule: u16,
    data: OutData,
    /// (rank, round) of each receiver.
    to: Vec<(u32, u16)>,
    /// The value came (in part) from the network: see `Work::coll_relays_out`.
    relay: bool,
}

fn out_cost(o: &CollOut) -> usize {
    o.data.len() + OUT_OVERHEAD
}

fn epoch_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl<D: Dma> Engine<D> {
    /// Largest contribution a collective carries (one packet).
    pub fn max_collective_len(&self) -> u32 {
        super::max_collective_len_for(self.cfg.mtu)
    }

    /// Largest contribution one `Collective` command takes: that many
    /// packets' worth, run as consecutive one-packet collectives.
    pub fn max_collective_command_len(&self) -> u32 {
        self.max_collective_len() * super::MAX_COLL_PIECES
    }

    fn read_host(&mut self, port: PortId, buf: HostBuf) -> Result<Vec<u8>, OpError> {
        if buf.len > self.cfg.max_message {
            return Err(OpError::Collective(CollError::TooLong { len: buf.len, max: self.cfg.max_message }));
        }
        let mut v = vec![0; buf.len as usize];
        if buf.len == 0 {
            return Ok(v);
        }
        self.dma.read(port, buf.addr, &mut v).map_err(|_| OpError::DmaFault)?;
        self.work.dma_read += u64::from(buf.len);
        Ok(v)
    }

    pub(crate) fn coll_create_group(
        &mut self,
        port: PortId,
        gen: Generation,
        group: GroupId,
        rank: u32,
        members: HostBuf,
    ) -> Result<Completion, OpError> {
        if self.coll.groups.contains_key(&(port, group)) {
            return Err(CollError::GroupExists.into());
        }
        let bytes = self.read_host(port, members)?;
        let members = decode_members(&bytes)?;
        let size = members.len() as u32;
        let me = *members.get(rank as usize).ok_or(CollError::RankOutOfRange { rank, size })?;
        if me != (Endpoint { node: self.cfg.node, port, gen }) {
            return Err(CollError::NotMember.into());
        }
        self.coll.groups.insert(
            (port, group),
            Group {
                gen,
                rank,
                members,
                schedules: HashMap::new(),
                next_epoch: 0,
                host_epoch: 0,
                running: VecDeque::new(),
                partial: None,
            },
        );
        Ok(Completion::GroupCreated)
    }

    pub(crate) fn coll_destroy_group(&mut self, port: PortId, group: GroupId) -> Result<Completion, OpError> {
        let g = self.coll.groups.get(&(port, group)).ok_or(CollError::NoSuchGroup)?;
        if g.running.iter().any(|r| r.op.is_some()) {
            return Err(CollError::GroupBusy.into());
        }
        // Broadcasts the engine forwarded on its own that the host never
        // collected go with the group.
        let held: usize = g.running.iter().map(|r| r.held).sum();
        self.coll.pool_bytes -= held;
        self.coll.groups.remove(&(port, group));
        // Early packets for it would otherwise wait for a group of the same
        // id created later.
        let mut freed = 0;
        self.coll.pool.retain(|(p, gr, _), v| {
            let gone = *p == port && *gr == group;
            if gone {
                freed += v.iter().map(|a| a.data.len() + ARRIVAL_OVERHEAD).sum::<usize>();
            }
            !gone
        });
        self.coll.pool_bytes -= freed;
        self.coll.blocked.remove(&(port, group));
        Ok(Completion::GroupDestroyed)
    }

    pub(crate) fn coll_set_schedule(
        &mut self,
        port: PortId,
        group: GroupId,
        id: ScheduleId,
        buf: HostBuf,
    ) -> Result<Completion, OpError> {
        if !self.coll.groups.contains_key(&(port, group)) {
            return Err(CollError::NoSuchGroup.into());
        }
        let bytes = self.read_host(port, buf)?;
        let sched = Schedule::decode(&bytes)?;
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked above");
        sched.validate(g.rank, g.members.len() as u32)?;
        g.schedules.insert(id.0, Arc::new(Compiled::new(id.0, sched)?));
        // Broadcast packets that came before their schedule can start now.
        self.coll_start_pooled(self.now, port, group);
        Ok(Completion::ScheduleSet)
    }

    /// Starts a collective. Errors found before anything is sent complete
    /// the command at once (with its token back).
    ///
    /// A command longer than one packet (up to [`super::MAX_COLL_PIECES`]
    /// packets) runs as consecutive collectives, one per piece of at most
    /// one packet (a whole number of elements), each taking the group's
    /// next epoch; the command completes once, when its last piece does.
    /// So one command, one token and one completion carry a whole
    /// broadcast, and its pieces pipeline: piece i+1 is read (at a root) or
    /// forwarded (at an inner member) while piece i is on the wire.
    pub(crate) fn coll_start(&mut self, now: Instant, port: PortId, req: CollRequest) -> Result<(), OpError> {
        let CollRequest { group, schedule, reduction, send, recv, .. } = req;
        let one = self.max_collective_len();
        let max = self.max_collective_command_len();
        if send.len > max || recv.len > max {
            return Err(CollError::TooLong { len: send.len.max(recv.len), max }.into());
        }
        if let Some(r) = reduction {
            r.validate()?;
            r.check_len(send.len as usize)?;
        }
        let g = self.coll.groups.get(&(port, group)).ok_or(CollError::NoSuchGroup)?;
        if !g.schedules.contains_key(&schedule.0) {
            return Err(CollError::NoSuchSchedule.into());
        }
        let elem = reduction.map_or(1, |r| r.dtype.size() as u32);
        let piece = (one / elem * elem).max(elem);
        let pieces = send.len.max(recv.len).div_ceil(piece).max(1);
        let slice = |b: HostBuf, j: u32| {
            let off = j * piece;
            HostBuf { addr: b.addr + u64::from(off.min(b.len)), len: b.len.saturating_sub(off).min(piece) }
        };
        for j in 0..pieces {
            let last = j + 1 == pieces;
            self.coll_start_piece(now, port, CollRequest { send: slice(send, j), recv: slice(recv, j), ..req }, last, pieces > 1);
        }
        Ok(())
    }

    /// Starts (or, if its engine started it already, takes over) one piece
    /// of a host command as the group's next collective: `req` carries the
    /// piece's own slices of the command's buffers.
    fn coll_start_piece(&mut self, now: Instant, port: PortId, req: CollRequest, last: bool, multi: bool) {
        let CollRequest { op, group, schedule, reduction, send, recv } = req;
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked by the caller");
        if g.host_epoch != g.next_epoch {
            self.coll_attach(port, group, op, schedule, recv, last);
            return;
        }
        let sched = g.schedules.get(&schedule.0).cloned().expect("checked by the caller");
        // From here on the collective takes its epoch whatever happens, so
        // this member stays in step with its peers.
        let mut outcome = None;
        // A member it must hear from may already be known dead: no packet
        // would ever tell this collective so.
        let awaited: Vec<NodeId> =
            sched.schedule.steps.iter().flat_map(|s| s.recv_from.iter().map(|&r| g.members[r as usize].node)).collect();
        if let Some(node) = awaited.into_iter().find(|n| self.conn_index.get(n).is_some_and(|&ci| self.conns[ci].dead)) {
            outcome = Some(Err(OpError::PeerUnreachable(node)));
        }
        // A piece sent unchanged is read per packet as it goes out; a value
        // the first packet replaces is never read at all.
        let lazy = (multi && sched.sends_host_value && send.len > 0 && outcome.is_none())
            .then(|| Lazy { buf: send, cell: Arc::new(OnceLock::new()) });
        let value = if outcome.is_some() || lazy.is_some() || sched.forwards_alone {
            Vec::new()
        } else {
            self.read_host(port, send).unwrap_or_else(|e| {
                outcome = Some(Err(e));
                Vec::new()
            })
        };
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked above");
        let epoch = g.next_epoch;
        g.next_epoch = g.next_epoch.wrapping_add(1);
        g.host_epoch = g.next_epoch;
        let arrived = self.coll_take_pooled(port, group, epoch, &sched, &mut outcome);
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked above");
        g.running.push_back(Running {
            epoch,
            op: Some(op),
            sched,
            reduction,
            value,
            recv,
            step: 0,
            sent: false,
            next_recv: 0,
            arrived,
            outcome,
            held: 0,
            last,
            lazy,
        });
        self.coll_advance(now, port, group);
        // Packets pooled for the next epochs may start them now.
        self.coll_start_pooled(now, port, group);
    }

    /// Takes the packets pooled for `epoch` of the group into the
    /// collective that now runs it. One sent under another schedule means
    /// the members disagree on what this collective is: it fails.
    fn coll_take_pooled(
        &mut self,
        port: PortId,
        group: GroupId,
        epoch: u32,
        sched: &Compiled,
        outcome: &mut Option<Result<(), OpError>>,
    ) -> Vec<Arrival> {
        let mut arrived = Vec::new();
        for a in self.coll.pool.remove(&(port, group, epoch)).unwrap_or_default() {
            self.coll.pool_bytes -= a.data.len() + ARRIVAL_OVERHEAD;
            if a.schedule != sched.id {
                let err = CollError::ScheduleMismatch { ours: sched.id, theirs: a.schedule };
                outcome.get_or_insert(Err(err.into()));
            } else if sched.expects(a.src_rank, a.round) {
                arrived.push(a);
            } else {
                self.stats.coll_unmatched += 1;
            }
        }
        arrived
    }

    fn coll_port_full(&self, port: PortId) -> bool {
        self.coll.out_bytes.get(&port).copied().unwrap_or(0) >= self.cfg.coll_send_bytes
    }

    /// Runs on the collectives whose sends waited for room, for every
    /// port that has room again. Runs at the end of an engine input, never
    /// inside the handling of a packet, so it cannot interleave with the
    /// bookkeeping that freed the room.
    pub(crate) fn coll_drain(&mut self, now: Instant) {
        // Advancing can free room again (a send to a dead peer fails at
        // once), so look until nothing changes.
        while std::mem::take(&mut self.coll.drain_due) {
            let ready: Vec<(PortId, GroupId)> =
                self.coll.blocked.iter().copied().filter(|(p, _)| !self.coll_port_full(*p)).collect();
            for (port, group) in ready {
                self.coll.blocked.remove(&(port, group));
                self.coll_advance(now, port, group);
            }
        }
    }

    /// The host's command for a collective its engine already started on
    /// its own: it takes over the collective (and its result, if done).
    fn coll_attach(&mut self, port: PortId, group: GroupId, op: OpId, schedule: ScheduleId, recv: HostBuf, last: bool) {
        let g = self.coll.groups.get_mut(&(port, group)).expect("caller checked");
        let epoch = g.host_epoch;
        g.host_epoch = g.host_epoch.wrapping_add(1);
        let r = g.running.iter_mut().find(|r| r.epoch == epoch).expect("epochs below next_epoch are running or done");
        r.op = Some(op);
        r.recv = recv;
        r.last = last;
        if r.sched.id != schedule.0 {
            // The members disagree on which collective this is.
            r.outcome = Some(Err(CollError::ScheduleMismatch { ours: schedule.0, theirs: r.sched.id }.into()));
        }
        let held = std::mem::take(&mut r.held);
        self.coll.pool_bytes -= held;
        self.coll_complete_front(port, group);
    }

    /// Starts, without its host, the group's next collective from packet
    /// `a` if its schedule allows and there is room: a broadcast's packet
    /// is forwarded down the tree as it arrives, whether or not this
    /// member's host has got to the broadcast yet. Returns the packet back
    /// if it cannot start anything. Then does the same for packets already
    /// pooled for the collectives after it.
    fn coll_start_early(&mut self, now: Instant, port: PortId, group: GroupId, a: Arrival) -> Result<(), Arrival> {
        let Some(g) = self.coll.groups.get(&(port, group)) else { return Err(a) };
        let Some(sched) = g.schedules.get(&a.schedule).filter(|c| c.starts_on(a.src_rank, a.round)).cloned() else {
            return Err(a);
        };
        let cost = a.data.len() + ARRIVAL_OVERHEAD;
        if self.coll.pool_bytes + cost > self.cfg.coll_unexpected_bytes {
            return Err(a);
        }
        self.coll.pool_bytes += cost;
        self.coll_run_early(port, group, sched, a);
        self.coll_start_pooled(now, port, group);
        self.coll_advance(now, port, group);
        Ok(())
    }

    /// Starts the group's next collectives from packets already pooled for
    /// them (they hold their room already), as long as one of them can
    /// start one: after the host started the epoch before, or after the
    /// schedule they name was installed.
    pub(crate) fn coll_start_pooled(&mut self, now: Instant, port: PortId, group: GroupId) {
        let mut started = false;
        while let Some(g) = self.coll.groups.get(&(port, group)) {
            let next = g.next_epoch;
            let Some(pooled) = self.coll.pool.get_mut(&(port, group, next)) else { break };
            let starter = pooled.iter().position(|p| g.schedules.get(&p.schedule).is_some_and(|c| c.starts_on(p.src_rank, p.round)));
            let Some(i) = starter else { break };
            let a = pooled.swap_remove(i);
            let sched = g.schedules.get(&a.schedule).cloned().expect("checked by position");
            self.coll_run_early(port, group, sched, a);
            started = true;
        }
        if started {
            self.coll_advance(now, port, group);
        }
    }

    /// Runs `sched` as the group's next collective, started by packet `a`
    /// (whose pool room it keeps until the host takes it over).
    fn coll_run_early(&mut self, port: PortId, group: GroupId, sched: Arc<Compiled>, a: Arrival) {
        let held = a.data.len() + ARRIVAL_OVERHEAD;
        let g = self.coll.groups.get_mut(&(port, group)).expect("caller checked");
        let epoch = g.next_epoch;
        g.next_epoch = g.next_epoch.wrapping_add(1);
        let mut outcome = None;
        let mut arrived = self.coll_take_pooled(port, group, epoch, &sched, &mut outcome);
        arrived.push(a);
        let g = self.coll.groups.get_mut(&(port, group)).expect("caller checked");
        g.running.push_back(Running {
            epoch,
            op: None,
            sched,
            reduction: None,
            value: Vec::new(),
            recv: HostBuf { addr: 0, len: 0 },
            step: 0,
            sent: false,
            next_recv: 0,
            arrived,
            outcome,
            held,
            last: false,
            lazy: None,
        });
        self.stats.coll_forwarded_early += 1;
    }

    /// Runs every collective of the group as far as its arrivals allow,
    /// then completes finished ones from the front, in epoch order.
    pub(crate) fn coll_advance(&mut self, now: Instant, port: PortId, group: GroupId) {
        let mut held = self.coll.out_bytes.get(&port).copied().unwrap_or(0);
        let bound = self.cfg.coll_send_bytes;
        let Some(g) = self.coll.groups.get_mut(&(port, group)) else { return };
        let rank = g.rank;
        let mut sends: Vec<PendingSends> = Vec::new();
        let mut blocked = false;
        let mut front = true;
        for r in g.running.iter_mut() {
            if r.outcome.is_some() {
                continue;
            }
            // The oldest unfinished collective of a group does not wait for
            // room taken by packets of later epochs or other groups: those
            // may be refused by receivers that wait for this very
            // collective (every member runs a group's epochs in order).
            // Room taken by its own earlier epochs it does wait for - that
            // is a member running ahead. So the bound is exceeded by at most
            // one step per group.
            let is_front = std::mem::take(&mut front);
            let out = &self.coll.out;
            let behind_others = |epoch: u32| {
                out.values().any(|o| o.port == port && (o.group != group || epoch_before(epoch, o.epoch)))
            };
            loop {
                let steps = &r.sched.schedule.steps;
                if r.step == steps.len() {
                    r.outcome = Some(Ok(()));
                    break;
                }
                let st = &steps[r.step];
                if !r.sent {
                    if !st.send_to.is_empty() && held >= bound && !(is_front && behind_others(r.epoch)) {
                        // The port's unconfirmed packets fill its bound:
                        // this step's sends (and so the collective) wait;
                        // its receives are still taken as they come.
                        blocked = true;
                        break;
                    }
                    r.sent = true;
                    let len = r.lazy.as_ref().map_or(r.value.len(), |l| l.buf.len as usize);
                    held += st.send_to.len() * (len + OUT_OVERHEAD);
                    if !st.send_to.is_empty() {
                        let to = st.send_to.iter().copied().zip(r.sched.send_round[r.step].iter().copied()).collect();
                        let data = match &r.lazy {
                            Some(l) => OutData::Host(l.clone()),
                            None => OutData::Ready(Arc::from(&r.value[..])),
                        };
                        let relay = steps[..r.step].iter().any(|s| !s.recv_from.is_empty());
                        sends.push(PendingSends { epoch: r.epoch, schedule: r.sched.id, data, to, relay });
                    }
                }
                while r.next_recv < st.recv_from.len() {
                    let src = st.recv_from[r.next_recv];
                    let round = r.sched.recv_round[r.step][r.next_recv];
                    let Some(i) = r.arrived.iter().position(|a| a.src_rank == src && a.round == round) else { break };
                    let a = r.arrived.swap_remove(i);
                    let folded = match st.fold() {
                        Fold::Ignore => Ok(()),
                        Fold::Replace => {
                            r.value = a.data;
                            Ok(())
                        }
                        Fold::Combine => match r.reduction {
                            None => Err(CollError::BadReduction),
                            Some(red) => {
                                let n = (r.value.len() / red.dtype.size()) as u64;
                                if red.dtype.is_float() {
                                    self.work.combine_float += n;
                                } else {
                                    self.work.combine_int += n;
                                }
                                red.fold(&mut r.value, &a.data, src < rank)
                            }
                        },
                    };
                    if let Err(e) = folded {
                        r.outcome = Some(Err(e.into()));
                        break;
                    }
                    r.next_recv += 1;
                }
                if r.outcome.is_some() || r.next_recv < st.recv_from.len() {
                    break;
                }
                r.step += 1;
                r.sent = false;
                r.next_recv = 0;
            }
        }
        let (gen, members) = (g.gen, g.members.clone());
        if blocked {
            self.stats.coll_deferred += 1;
            self.coll.blocked.insert((port, group));
        }
        for PendingSends { epoch, schedule, data, to, relay } in sends {
            if relay {
                self.work.coll_relays_out += to.len() as u64;
            }
            for (i, (dst_rank, round)) in to.into_iter().enumerate() {
                let key = self.coll_alloc_key();
                let out = CollOut {
                    port,
                    port_gen: gen,
                    group,
                    epoch,
                    src_rank: rank,
                    round,
                    schedule,
                    copy: i > 0,
                    dest: members[dst_rank as usize],
                    data: data.clone(),
                    attempt: 0,
                    retry_at: None,
                    first_refused: None,
                };
                *self.coll.out_bytes.entry(port).or_default() += out_cost(&out);
                self.coll.out.insert(key, out);
                self.coll_launch(now, key);
            }
        }
        if self.coll.keepalive_at.is_none() {
            let waiting = self.coll.groups.get(&(port, group)).is_some_and(|g| g.running.iter().any(|r| r.outcome.is_none()));
            if waiting {
                self.coll.keepalive_at = Some(now + self.keepalive_interval());
            }
        }
        self.coll_complete_front(port, group);
    }

    /// Queues a (new) attempt of collective packet `key`.
    fn coll_launch(&mut self, now: Instant, key: u32) {
        let Some(o) = self.coll.out.get_mut(&key) else { return };
        o.attempt = o.attempt.wrapping_add(1);
        o.retry_at = None;
        let (node, attempt) = (o.dest.node, o.attempt);
        let ci = self.conn_for(node, now);
        if self.conns[ci].dead {
            self.coll_fail_packet(now, key, OpError::PeerUnreachable(node));
            return;
        }
        self.conns[ci].push(TxRecord::Coll { key, attempt }, now);
        self.mark_ready(ci);
    }

    fn coll_alloc_key(&mut self) -> u32 {
        loop {
            let k = COLL_KEY_BIT | (self.coll.next_key & !COLL_KEY_BIT);
            self.coll.next_key = self.coll.next_key.wrapping_add(1);
            if !self.coll.out.contains_key(&k) {
                return k;
            }
        }
    }

    /// Completes the group's finished collectives from the front. A piece
    /// read per packet ([`Lazy`]) is finished only once it has been read:
    /// until then the host must keep its buffer. A multi-piece command's
    /// earlier pieces only add to its [`Partial`]; its last completes it.
    fn coll_complete_front(&mut self, port: PortId, group: GroupId) {
        loop {
            let Some(g) = self.coll.groups.get_mut(&(port, group)) else { return };
            let gen = g.gen;
            // One the engine runs on its own waits, done or not, for its
            // host's command.
            let ready = g.running.front().is_some_and(|r| {
                r.op.is_some()
                    && match &r.outcome {
                        None => false,
                        Some(Err(_)) => true,
                        Some(Ok(())) => r.lazy.as_ref().is_none_or(|l| l.cell.get().is_some()),
                    }
            });
            if !ready {
                return;
            }
            let r = g.running.pop_front().expect("checked");
            let op = r.op.expect("checked");
            let value: &[u8] = match &r.lazy {
                Some(l) => l.cell.get().map_or(&[][..], |d| &d[..]),
                None => &r.value,
            };
            let result = match r.outcome.expect("checked") {
                Err(e) => Err(e),
                Ok(()) if r.recv.len == 0 => Ok(0),
                Ok(()) if value.len() > r.recv.len as usize => {
                    Err(OpError::Collective(CollError::LengthMismatch { expected: r.recv.len, got: value.len() as u32 }))
                }
                Ok(()) => match self.dma.write(port, r.recv.addr, value) {
                    Ok(()) => {
                        self.work.dma_written += value.len() as u64;
                        Ok(value.len() as u32)
                    }
                    Err(_) => Err(OpError::DmaFault),
                },
            };
            if result.is_err() {
                // Its packets still in flight are of no use any more.
                self.coll_out_retain(|o| !(o.port == port && o.group == group && o.epoch == r.epoch));
            }
            let g = self.coll.groups.get_mut(&(port, group)).expect("looked up above");
            let mut acc = g.partial.take().filter(|p| p.op == op).unwrap_or(Partial { op, epoch: r.epoch, len: 0, err: None });
            match result {
                Ok(n) => acc.len += n,
                Err(e) => {
                    acc.err.get_or_insert(e);
                }
            }
            if !r.last {
                g.partial = Some(acc);
                continue;
            }
            let result = match acc.err {
                Some(e) => Err(e),
                None => Ok(Completion::Collective { epoch: acc.epoch, len: acc.len }),
            };
            self.complete(port, gen, op, result, crate::TokenClass::Coll);
        }
    }

    /// Reads the payload of packet `key` from host memory if it is still
    /// there (its first copy going out): see [`Lazy`]. A fault fails its
    /// collective. Called by the transmit path just before it builds the
    /// packet, so the read is charged with the packet it goes out in.
    pub(crate) fn coll_fill(&mut self, now: Instant, key: u32) {
        let Some(o) = self.coll.out.get(&key) else { return };
        let OutData::Host(l) = &o.data else { return };
        if l.cell.get().is_some() {
            return;
        }
        let (port, group, buf, cell) = (o.port, o.group, l.buf, l.cell.clone());
        let mut v = vec![0; buf.len as usize];
        if self.dma.read(port, buf.addr, &mut v).is_err() {
            self.coll_fail_packet(now, key, OpError::DmaFault);
            return;
        }
        self.work.dma_read += u64::from(buf.len);
        let _first = cell.set(Arc::from(v));
        self.coll_complete_front(port, group);
    }

    /// Ends the collective a packet belongs to with `err`.
    fn coll_fail_packet(&mut self, _now: Instant, key: u32, err: OpError) {
        let Some(o) = self.coll_out_remove(key) else { return };
        let mut owner_told = false;
        if let Some(g) = self.coll.groups.get_mut(&(o.port, o.group)) {
            if g.gen == o.port_gen {
                if let Some(r) = g.running.iter_mut().find(|r| r.epoch == o.epoch) {
                    // A piece still to be read from host memory is not
                    // finished even if its steps are.
                    let unread = r.lazy.as_ref().is_some_and(|l| l.cell.get().is_none());
                    if r.outcome.is_none() || (unread && r.outcome == Some(Ok(()))) {
                        r.outcome = Some(Err(err));
                        owner_told = true;
                    }
                }
            }
        }
        if !owner_told {
            self.stats.coll_abandoned += 1;
        }
        self.coll_complete_front(o.port, o.group);
    }

    /// A collective packet arrived (in order, once, from a live peer).
    pub(crate) fn on_coll(&mut self, now: Instant, from: NodeId, h: wire::CollHeader, payload: &[u8]) {
        if h.offset != 0 || h.total_len as usize != payload.len() {
            // Contributions are single packets; an honest sender never
            // splits one.
            self.stats.malformed += 1;
            return;
        }
        if let Err(reason) = self.admit_port(h.dst_port, h.dst_gen) {
            self.reject(now, from, h.src_port, h.src_gen, h.msg_id, reason);
            return;
        }
        let port = PortId(h.dst_port);
        let group = GroupId(h.group);
        let arrival = Arrival { src_rank: h.src_rank, round: h.round, schedule: h.schedule, data: payload.to_vec() };
        if let Some(g) = self.coll.groups.get_mut(&(port, group)) {
            let src_ok = g.members.get(h.src_rank as usize).is_some_and(|m| {
                m.node == from && m.port.0 == h.src_port && m.gen == h.src_gen
            });
            if !src_ok {
                self.stats.coll_unmatched += 1;
                return;
            }
            if let Some(r) = g.running.iter_mut().find(|r| r.epoch == h.epoch) {
                if r.outcome.is_none() && h.schedule != r.sched.id {
                    // The members disagree on what this collective is.
                    let err = CollError::ScheduleMismatch { ours: r.sched.id, theirs: h.schedule };
                    r.outcome = Some(Err(err.into()));
                    self.coll_advance(now, port, group);
                } else if r.outcome.is_none() && r.sched.expects(h.src_rank, h.round) {
                    r.arrived.push(arrival);
                    self.coll_advance(now, port, group);
                } else {
                    self.stats.coll_unmatched += 1;
                }
                return;
            }
            if epoch_before(h.epoch, g.next_epoch) {
                // Its collective is over here (it failed): nothing to do.
                self.stats.coll_unmatched += 1;
                return;
            }
        }
        let next = self.coll.groups.get(&(port, group)).map(|g| g.next_epoch);
        let arrival = if next == Some(h.epoch) {
            match self.coll_start_early(now, port, group, arrival) {
                Ok(()) => return,
                Err(a) => a,
            }
        } else {
            arrival
        };
        let cost = arrival.data.len() + ARRIVAL_OVERHEAD;
        if self.coll.pool_bytes + cost > self.cfg.coll_unexpected_bytes {
            self.stats.coll_refused += 1;
            self.reject(now, from, h.src_port, h.src_gen, h.msg_id, RejectReason::NotReady);
            return;
        }
        self.coll.pool_bytes += cost;
        self.stats.coll_unexpected += 1;
        self.coll.pool.entry((port, group, h.epoch)).or_default().push(arrival);
    }

    /// A receiver refused collective packet `key`.
    pub(crate) fn on_coll_reject(&mut self, now: Instant, from: NodeId, r: wire::Reject) {
        let Some(o) = self.coll.out.get_mut(&r.msg_id) else { return };
        if o.dest.node != from || o.port.0 != r.port || o.port_gen != r.gen || o.retry_at.is_some() {
            return;
        }
        let err = match r.reason {
            RejectReason::NotReady => {
                let since = *o.first_refused.get_or_insert(now);
                if now.saturating_since(since) >= self.cfg.retry_timeout {
                    OpError::NotReadyTimeout
                } else {
                    o.retry_at = Some(now + self.cfg.retry_interval);
                    self.coll.parked.insert(r.msg_id);
                    return;
                }
            }
            RejectReason::Stale => OpError::PortGone,
            RejectReason::NoSuchPort => OpError::NoSuchPort,
            RejectReason::BadKey | RejectReason::OutOfBounds => OpError::PortGone,
        };
        self.coll_fail_packet(now, r.msg_id, err);
    }

    /// A collective packet's record was confirmed by its receiver: it is
    /// delivered and need not be kept.
    pub(crate) fn on_coll_confirmed(&mut self, key: u32, attempt: u32) {
        let live = self.coll.out.get(&key).is_some_and(|o| o.attempt == attempt && o.retry_at.is_none());
        if live {
            self.coll_out_remove(key);
        }
    }

    /// The next retry deadline of a refused collective packet, or the next
    /// keepalive probe.
    pub(crate) fn coll_deadline(&self) -> Option<Instant> {
        let retry = self.coll.parked.iter().filter_map(|k| self.coll.out.get(k).and_then(|o| o.retry_at)).min();
        retry.into_iter().chain(self.coll.keepalive_at).min()
    }

    /// How often a waiting collective probes the peers it waits for.
    fn keepalive_interval(&self) -> std::time::Duration {
        self.cfg.peer_timeout / 4
    }

    /// Nodes that running collectives are waiting to hear from.
    fn coll_awaited_nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for g in self.coll.groups.values() {
            for r in g.running.iter().filter(|r| r.outcome.is_none()) {
                if let Some(st) = r.sched.schedule.steps.get(r.step) {
                    nodes.extend(st.recv_from[r.next_recv..].iter().map(|&x| g.members[x as usize].node));
                }
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// A collective waiting for a packet from a peer it sends nothing to
    /// would never notice that peer's death (only unacknowledged packets
    /// do): while it waits, an idle connection to that peer carries a
    /// `Nop` every quarter peer timeout, so a dead peer fails the
    /// collective within the peer timeout.
    fn coll_keepalive(&mut self, now: Instant) {
        match self.coll.keepalive_at {
            Some(t) if t <= now => {}
            _ => return,
        }
        let nodes = self.coll_awaited_nodes();
        for node in &nodes {
            let ci = self.conn_for(*node, now);
            if !self.conns[ci].dead && self.conns[ci].is_quiet() {
                self.conns[ci].push(TxRecord::Control(wire::BodyRepr::Nop), now);
                self.mark_ready(ci);
            }
        }
        self.coll.keepalive_at = (!nodes.is_empty()).then(|| now + self.keepalive_interval());
    }

    /// Retries refused collective packets whose time has come.
    pub(crate) fn coll_retry_due(&mut self, now: Instant) {
        self.coll_keepalive(now);
        let due: Vec<u32> = self
            .coll
            .parked
            .iter()
            .copied()
            .filter(|k| self.coll.out.get(k).and_then(|o| o.retry_at).is_some_and(|t| t <= now))
            .collect();
        for k in due {
            self.coll.parked.remove(&k);
            self.stats.retries += 1;
            self.coll_launch(now, k);
        }
    }

    /// Peer `node` is gone: every collective of a group with a member there
    /// fails (the group can no longer complete anything).
    pub(crate) fn coll_peer_failed(&mut self, node: NodeId) {
        let err = OpError::PeerUnreachable(node);
        let mut touched = Vec::new();
        for (&(port, group), g) in self.coll.groups.iter_mut() {
            if !g.members.iter().any(|m| m.node == node) {
                continue;
            }
            for r in g.running.iter_mut().filter(|r| r.outcome.is_none()) {
                r.outcome = Some(Err(err));
            }
            touched.push((port, group));
        }
        self.coll_out_retain(|o| o.dest.node != node);
        for (port, group) in touched {
            self.coll_complete_front(port, group);
        }
    }

    /// The port closed: its groups, pooled packets and outgoing packets go.
    pub(crate) fn coll_port_closed(&mut self, port: PortId) {
        let mut freed: usize = self
            .coll
            .groups
            .iter()
            .filter(|((p, _), _)| *p == port)
            .flat_map(|(_, g)| g.running.iter().map(|r| r.held))
            .sum();
        self.coll.groups.retain(|(p, _), _| *p != port);
        self.coll.pool.retain(|(p, _, _), v| {
            if *p == port {
                freed += v.iter().map(|a| a.data.len() + ARRIVAL_OVERHEAD).sum::<usize>();
                false
            } else {
                true
            }
        });
        self.coll.pool_bytes -= freed;
        self.coll_out_retain(|o| o.port != port);
        self.coll.out_bytes.remove(&port);
        self.coll.blocked.retain(|(p, _)| *p != port);
    }

    /// Removes outgoing packet `key`, returning its room to its port.
    fn coll_out_remove(&mut self, key: u32) -> Option<CollOut> {
        let o = self.coll.out.remove(&key)?;
        self.coll.parked.remove(&key);
        self.coll_out_freed(o.port, out_cost(&o));
        Some(o)
    }

    /// Keeps the outgoing packets `keep` accepts.
    fn coll_out_retain(&mut self, mut keep: impl FnMut(&CollOut) -> bool) {
        let mut freed: Vec<(PortId, usize)> = Vec::new();
        self.coll.out.retain(|_, o| {
            let k = keep(o);
            if !k {
                freed.push((o.port, out_cost(o)));
            }
            k
        });
        self.coll.parked.retain(|k| self.coll.out.contains_key(k));
        for (port, bytes) in freed {
            self.coll_out_freed(port, bytes);
        }
    }

    fn coll_out_freed(&mut self, port: PortId, bytes: usize) {
        if let Some(b) = self.coll.out_bytes.get_mut(&port) {
            *b -= bytes;
            if *b == 0 {
                self.coll.out_bytes.remove(&port);
            }
        }
        self.coll.drain_due = true;
    }

    /// Bytes port `port`'s unconfirmed outgoing collective packets hold
    /// (payload plus bookkeeping), as bounded by
    /// [`EngineConfig::coll_send_bytes`](crate::EngineConfig::coll_send_bytes).
    pub fn coll_send_bytes(&self, port: PortId) -> usize {
        self.coll.out_bytes.get(&port).copied().unwrap_or(0)
    }

    /// Builds the body of collective packet `key`, if it is still live.
    pub(crate) fn coll_body(&self, key: u32, attempt: u32) -> Option<(wire::BodyRepr, Arc<[u8]>, bool)> {
        let o = self.coll.out.get(&key).filter(|o| o.attempt == attempt && o.retry_at.is_none())?;
        let data = match &o.data {
            OutData::Ready(d) => d.clone(),
            OutData::Host(l) => l.cell.get()?.clone(),
        };
        let h = wire::CollHeader {
            src_port: o.port.0,
            dst_port: o.dest.port.0,
            src_gen: o.port_gen,
            dst_gen: o.dest.gen,
            msg_id: key,
            group: o.group.0,
            epoch: o.epoch,
            round: o.round,
            src_rank: o.src_rank,
            total_len: o.data.len() as u32,
            offset: 0,
            schedule: o.schedule,
        };
        Some((wire::BodyRepr::Coll(h), data, o.copy))
    }

    /// Whether no collective is under way and nothing is pooled or queued.
    pub(crate) fn coll_is_quiet(&self) -> bool {
        self.coll.out.is_empty()
            && self.coll.groups.values().all(|g| g.running.is_empty())
    }

    /// Bytes held for collective packets that arrived early.
    pub fn coll_unexpected_bytes(&self) -> usize {
        self.coll.pool_bytes
    }
}
