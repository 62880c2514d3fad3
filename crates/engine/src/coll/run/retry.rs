//! Refusals and retries of outgoing collective packets, and the peers a
//! waiting collective needs probed.

use outboard_wire::{self as wire, RejectReason};

use crate::{Dma, Engine, Instant, NodeId, OpError};

/// A packet refused as not ready is retried after this many retry
/// intervals if no `CollResume` came first: blind retries of a full
/// pool's refusals are mostly refused again, and overtake the resumed
/// ones.
const RESUME_FALLBACK: u32 = 4;

impl<D: Dma> Engine<D> {
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
                    // A receiver whose pool was full says when it has room
                    // again (`on_coll_resume`); the timer only backs that up
                    // (and serves a port that was not open yet).
                    o.retry_at = Some(now + self.cfg.retry_interval * RESUME_FALLBACK);
                    self.coll.parked.insert(r.msg_id);
                    return;
                }
            }
            RejectReason::Stale => OpError::PortGone,
            RejectReason::NoSuchPort => OpError::NoSuchPort,
            RejectReason::BadKey | RejectReason::OutOfBounds => OpError::PortGone,
        };
        self.coll_fail_packet(r.msg_id, err);
    }

    /// `from`'s pool has `room` bytes for the packets it refused: the
    /// oldest of those parked for it go again now (at least one), in the
    /// order they were first sent, the others keep their timers.
    pub(crate) fn on_coll_resume(&mut self, now: Instant, from: NodeId, r: wire::CollResume) {
        self.stats.coll_resumes_received += 1;
        let mut budget = r.room as usize;
        let waiting: Vec<u32> = self.coll.parked.iter().copied().filter(|k| self.coll.out.get(k).is_some_and(|o| o.dest.node == from)).collect();
        for (i, k) in waiting.into_iter().enumerate() {
            let cost = self.coll.out.get(&k).map_or(0, |o| o.cost());
            if i > 0 && cost > budget {
                break;
            }
            budget = budget.saturating_sub(cost);
            self.coll.parked.remove(&k);
            self.stats.retries += 1;
            self.coll_launch(now, k);
        }
    }

    /// The next retry deadline of a refused collective packet.
    pub(crate) fn coll_deadline(&self) -> Option<Instant> {
        self.coll.parked.iter().filter_map(|k| self.coll.out.get(k).and_then(|o| o.retry_at)).min()
    }

    /// Whether a running collective waits to hear from a member (the
    /// keepalive probes its peers meanwhile: see [`crate::keepalive`]).
    pub(crate) fn coll_awaits_any(&self) -> bool {
        self.coll.groups.values().any(|g| g.running.iter().any(|r| r.is_waiting()))
    }

    /// Nodes that running collectives are waiting to hear from. A
    /// collective waiting for a packet from a peer it sends nothing to
    /// would never notice that peer's death by itself (only unacknowledged
    /// packets do): the keepalive probes these nodes.
    pub(crate) fn coll_awaited_nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for g in self.coll.groups.values() {
            for r in g.running.iter().filter(|r| r.is_waiting()) {
                if let Some(st) = r.sched.schedule.steps.get(r.step) {
                    nodes.extend(st.recv_from[r.next_recv..].iter().map(|&x| g.members.get(x).expect("validated rank").node));
                }
            }
        }
        nodes
    }

    /// Retries refused collective packets whose time has come.
    pub(crate) fn coll_retry_due(&mut self, now: Instant) {
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
}
