//! Refusals and retries of outgoing collective packets, and the keepalive
//! probes that let a waiting collective notice a dead peer.

use outboard_wire::{self as wire, RejectReason};

use crate::conn::TxRecord;
use crate::{Dma, Engine, Instant, NodeId, OpError};

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
                    o.retry_at = Some(now + self.cfg.retry_interval);
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

    /// The next retry deadline of a refused collective packet, or the next
    /// keepalive probe.
    pub(crate) fn coll_deadline(&self) -> Option<Instant> {
        let retry = self.coll.parked.iter().filter_map(|k| self.coll.out.get(k).and_then(|o| o.retry_at)).min();
        retry.into_iter().chain(self.coll.keepalive_at).min()
    }

    /// How often a waiting collective probes the peers it waits for.
    pub(super) fn keepalive_interval(&self) -> std::time::Duration {
        self.cfg.peer_timeout / 4
    }

    /// Nodes that running collectives are waiting to hear from.
    fn coll_awaited_nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for g in self.coll.groups.values() {
            for r in g.running.iter().filter(|r| r.is_waiting()) {
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
}
