//! The early-packet pool: collective packets that arrive before their
//! collective started here (the dissertation's *unexpected* barrier
//! messages, 3.2.1, and early reduction contributions, 4.2.1) wait in a
//! pool bounded by
//! [`EngineConfig::coll_unexpected_bytes`](crate::EngineConfig::coll_unexpected_bytes);
//! when it is full their sender is refused and retries. A packet that can
//! start its collective without the host (a broadcast's, see
//! [`Compiled::forwards_alone`]) starts it instead, keeping its room until
//! the host's command takes the collective over.

use std::sync::Arc;

use outboard_wire::{self as wire, RejectReason};

use super::super::{CollError, GroupId};
use super::install::Compiled;
use super::Running;
use crate::conn::TxRecord;
use crate::{Dma, Engine, Instant, NodeId, PortId};

/// Pool bookkeeping charged per unexpected packet.
const ARRIVAL_OVERHEAD: usize = 32;

/// A collective packet held at the receiver until its step folds it.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub src_rank: u32,
    pub round: u16,
    /// The sender's schedule number.
    pub schedule: u16,
    pub data: Vec<u8>,
    /// The sender's collective failed, and why
    /// ([`wire::COLL_ROUND_FAILED`](outboard_wire::COLL_ROUND_FAILED)): its
    /// `data` is then empty (the packet carried the cause, not a value).
    pub failure: Option<outboard_wire::CollFailure>,
}

impl Arrival {
    /// The room it takes in the pool.
    pub(super) fn cost(&self) -> usize {
        self.data.len() + ARRIVAL_OVERHEAD
    }
}

impl<D: Dma> Engine<D> {
    /// Keeps packet `a` (for `epoch` of the group, not started here) until
    /// its collective starts, or refuses it when the pool is full.
    /// `relaunched`: it was refused before, and the room promised for
    /// such packets may take it; a packet sent for the first time finds
    /// that room taken, so refused packets are not overtaken by the later
    /// ones of the same runaway sender.
    pub(super) fn coll_pool_arrival(&mut self, now: Instant, from: NodeId, h: &wire::CollHeader, a: Arrival, relaunched: bool) {
        let (port, group) = (PortId(h.dst_port), GroupId(h.group));
        let cost = a.cost();
        let reserved = if relaunched { 0 } else { self.coll.promised };
        if self.coll.pool_bytes + reserved + cost > self.cfg.coll_unexpected_bytes {
            self.stats.coll_refused += 1;
            let r = self.coll.refused.entry(from).or_default();
            r.keys.insert(h.msg_id);
            r.told = false;
            self.reject(now, from, h.src_port, h.src_gen, h.msg_id, RejectReason::NotReady);
            return;
        }
        self.coll.pool_bytes += cost;
        if relaunched {
            self.coll.promised = self.coll.promised.saturating_sub(cost);
        }
        self.stats.coll_unexpected += 1;
        self.coll.pool.entry((port, group, h.epoch)).or_default().push(a);
    }

    /// Tells the peers whose packets the pool refused that it has room
    /// again, once it has an eighth of its bound free (or a packet's worth,
    /// if more), or that a host started a collective (which takes its
    /// packets whatever the pool holds): each may relaunch its refused
    /// packets up to its share of the room (its oldest one at least) at
    /// once, rather than retry blindly on a timer and be refused again
    /// (flow control between a collective's members: the ones that only
    /// send run ahead of the ones that combine by whole calls). Runs at
    /// the end of an engine input.
    pub(crate) fn coll_resume_refused(&mut self, now: Instant) {
        let now_due = std::mem::take(&mut self.coll.resume_now);
        if self.coll.refused.is_empty() {
            return;
        }
        let bound = self.cfg.coll_unexpected_bytes;
        let room = bound.saturating_sub(self.coll.pool_bytes);
        let roomy = room >= (bound / 8).max(self.max_collective_len() as usize + ARRIVAL_OVERHEAD);
        let peers: Vec<NodeId> =
            self.coll.refused.iter().filter(|(n, r)| now_due.contains(n) || (roomy && !r.told)).map(|(&n, _)| n).collect();
        if peers.is_empty() {
            return;
        }
        // The room handed out is kept for the refused packets (see
        // `coll_pool_arrival`); it replaces what was promised before, so a
        // promise a sender did not use (it had fewer packets waiting, or
        // dropped them) lasts only until the next notice.
        let share = u32::try_from(room / peers.len()).unwrap_or(u32::MAX);
        self.coll.promised = room;
        for node in peers {
            if let Some(r) = self.coll.refused.get_mut(&node) {
                r.told = true;
            }
            let ci = self.conn_for(node, now);
            if self.conns[ci].dead {
                continue;
            }
            self.conns[ci].push(TxRecord::Control(wire::BodyRepr::CollResume(wire::CollResume { room: share })), now);
            self.stats.coll_resumes_sent += 1;
            self.mark_ready(ci);
        }
    }

    /// Forgets what `node`'s packets were refused (they came again, or it
    /// died); with nothing refused any more, nothing is promised either.
    pub(super) fn coll_forget_refused(&mut self, node: NodeId, key: Option<u32>) -> bool {
        let mut came_again = false;
        if let Some(r) = self.coll.refused.get_mut(&node) {
            came_again = key.is_some_and(|k| r.keys.remove(&k));
            if came_again {
                // It used the room it was told of: tell it of more.
                r.told = false;
            }
            if key.is_none() || r.keys.is_empty() {
                self.coll.refused.remove(&node);
            }
        }
        if self.coll.refused.is_empty() {
            self.coll.promised = 0;
        }
        came_again
    }

    /// Drops the pooled packets of the groups `gone` names, returning their
    /// room.
    pub(super) fn coll_pool_forget(&mut self, gone: impl Fn(PortId, GroupId) -> bool) {
        let mut freed = 0;
        self.coll.pool.retain(|&(p, g, _), v| {
            if gone(p, g) {
                freed += v.iter().map(Arrival::cost).sum::<usize>();
                false
            } else {
                true
            }
        });
        self.coll.pool_bytes -= freed;
    }

    /// Takes the packets pooled for `epoch` of the group into the
    /// collective that now runs it. One sent under another schedule means
    /// the members disagree on what this collective is: it fails
    /// (`mismatch`, see [`Running::mismatched`]).
    pub(super) fn coll_take_pooled(
        &mut self,
        port: PortId,
        group: GroupId,
        epoch: u32,
        sched: &Compiled,
        mismatch: &mut Option<CollError>,
    ) -> Vec<Arrival> {
        let mut arrived = Vec::new();
        for a in self.coll.pool.remove(&(port, group, epoch)).unwrap_or_default() {
            self.coll.pool_bytes -= a.cost();
            if a.schedule != sched.id {
                mismatch.get_or_insert(CollError::ScheduleMismatch { ours: sched.id, theirs: a.schedule });
            } else if sched.expects(a.src_rank, a.round) {
                arrived.push(a);
            } else {
                self.stats.coll_unmatched += 1;
            }
        }
        arrived
    }

    /// Starts, without its host, the group's next collective from packet
    /// `a` if its schedule allows and there is room: a broadcast's packet
    /// is forwarded down the tree as it arrives, whether or not this
    /// member's host has got to the broadcast yet. Returns the packet back
    /// if it cannot start anything. Then does the same for packets already
    /// pooled for the collectives after it.
    pub(super) fn coll_start_early(&mut self, now: Instant, port: PortId, group: GroupId, a: Arrival) -> Result<(), Arrival> {
        // A group that lost a member starts nothing without its host: the
        // host's command fails it (and tells the members below).
        let Some(g) = self.coll.groups.get(&(port, group)).filter(|g| g.lost.is_none()) else { return Err(a) };
        let Some(sched) = g.schedules.get(&a.schedule).filter(|c| c.starts_on(a.src_rank, a.round)).cloned() else {
            return Err(a);
        };
        let cost = a.cost();
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
        while let Some(g) = self.coll.groups.get(&(port, group)).filter(|g| g.lost.is_none()) {
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
        let held = a.cost();
        let g = self.coll.groups.get_mut(&(port, group)).expect("caller checked");
        let epoch = g.next_epoch;
        g.next_epoch = g.next_epoch.wrapping_add(1);
        let mut failed = None;
        let mut arrived = self.coll_take_pooled(port, group, epoch, &sched, &mut failed);
        arrived.push(a);
        let g = self.coll.groups.get_mut(&(port, group)).expect("caller checked");
        g.running.push_back(Running { failed, held, ..Running::new(epoch, sched, arrived) });
        self.stats.coll_forwarded_early += 1;
    }
}
