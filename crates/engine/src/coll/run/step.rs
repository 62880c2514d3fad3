//! Step handling: filing an arriving packet with the collective it is for
//! (or in the pool), and running a group's collectives as far as their
//! packets allow, sending what their steps return.

use std::mem;

use outboard_wire as wire;

use super::super::{CollError, GroupId};
use super::collective::Room;
use super::{epoch_before, Arrival};
use crate::{Dma, Engine, Instant, NodeId, PortId};

impl<D: Dma> Engine<D> {
    /// A collective packet arrived (in order, once, from a live peer).
    pub(crate) fn on_coll(&mut self, now: Instant, from: NodeId, mut h: wire::CollHeader, payload: &[u8]) {
        let failed = h.round & wire::COLL_ROUND_FAILED != 0;
        h.round &= !wire::COLL_ROUND_FAILED;
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
        // A packet refused before comes again: whatever becomes of it now
        // (a new refusal records it again).
        let relaunched = !self.coll.refused.is_empty() && self.coll_forget_refused(from, Some(h.msg_id));
        let port = PortId(h.dst_port);
        let group = GroupId(h.group);
        let me = self.cfg.node.0;
        let failure = failed.then(|| match wire::CollFailure::parse(payload) {
            // This node is alive, and its own ports' closures are its own
            // to announce: a peer that says otherwise (relaying a partial
            // view) tells only that the collective failed.
            Ok(wire::CollFailure::NodeDied { node } | wire::CollFailure::PortClosed { node, .. }) if node == me => wire::CollFailure::Other,
            Ok(c) => c,
            Err(_) => {
                // Still a failure, with a cause this engine cannot read.
                self.stats.malformed += 1;
                wire::CollFailure::Other
            }
        });
        let data = if failed { Vec::new() } else { payload.to_vec() };
        let arrival = Arrival { src_rank: h.src_rank, round: h.round, schedule: h.schedule, data, failure };
        if let Some(g) = self.coll.groups.get_mut(&(port, group)) {
            let src_ok = g.members.get(h.src_rank).is_some_and(|m| {
                m.node == from && m.port.0 == h.src_port && m.gen == h.src_gen
            });
            if !src_ok {
                self.stats.coll_unmatched += 1;
                return;
            }
            if let Some(r) = g.running.iter_mut().find(|r| r.epoch == h.epoch) {
                if r.outcome.is_none() && h.schedule != r.sched.id {
                    // The members disagree on what this collective is: it
                    // fails, still telling the members it sends to.
                    if !r.mismatched() {
                        r.failed = Some(CollError::ScheduleMismatch { ours: r.sched.id, theirs: h.schedule });
                    }
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
        self.coll_pool_arrival(now, from, &h, arrival, relaunched);
    }

    /// Runs every collective of the group as far as its arrivals allow,
    /// then completes finished ones from the front, in epoch order.
    pub(crate) fn coll_advance(&mut self, now: Instant, port: PortId, group: GroupId) {
        let mut room = Room { held: self.coll.out_bytes.get(&port).copied().unwrap_or(0), bound: self.cfg.coll_send_bytes };
        let Some(g) = self.coll.groups.get_mut(&(port, group)) else { return };
        let rank = g.rank;
        let mut comb = crate::nicvm::Combiner { nicvm: &mut self.nicvm, job_key: self.cfg.job_key, stats: &mut self.stats, size: g.members.len() };
        let mut sends = Vec::new();
        let mut blocked = false;
        let mut front = true;
        for r in g.running.iter_mut().filter(|r| r.is_waiting()) {
            // The oldest unfinished collective of a group does not wait for
            // room taken by packets of later epochs or other groups: those
            // may be refused by receivers that wait for this very
            // collective (every member runs a group's epochs in order).
            // Room taken by its own earlier epochs it does wait for - that
            // is a member running ahead. So the bound is exceeded by at most
            // one step per group.
            let is_front = mem::take(&mut front);
            let out = &self.coll.out;
            let behind_others = |epoch: u32| {
                is_front && out.values().any(|o| o.port == port && (o.group != group || epoch_before(epoch, o.epoch)))
            };
            blocked |= r.run_steps(rank, &mut room, behind_others, &mut self.work, &mut comb, &mut sends);
        }
        if blocked {
            self.stats.coll_deferred += 1;
            self.coll.blocked.insert((port, group));
        }
        self.coll_send(now, port, group, sends);
        let waiting = self.coll.groups.get(&(port, group)).is_some_and(|g| g.running.iter().any(|r| r.is_waiting()));
        if waiting {
            self.keepalive_arm(now);
        }
        self.coll_complete_front(port, group);
    }
}
