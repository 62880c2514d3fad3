//! Failure detection that does not depend on having something to send.
//!
//! A connection notices its peer's death only through its own packets: one
//! left unacknowledged for `EngineConfig::peer_timeout` declares the peer
//! dead, and every operation that needs it fails
//! ([`Engine::peer_failed`]). An operation that only *waits* on a peer
//! sends it nothing: a receive naming its source, an RDMA read whose
//! request was acknowledged but whose response has not come, a message
//! half received, a collective waiting for a member's packet. Without a
//! probe, such an operation would wait for a dead peer forever.
//!
//! So while anything waits on a known peer, one deadline is armed (an
//! interval after the wait began, then whenever an awaited peer will have
//! been silent for an interval); when it passes, each awaited peer not
//! heard from for an interval, whose connection has nothing unacknowledged
//! already, gets a `Nop`. A `Nop` occupies a sequence number, so it needs
//! the peer's acknowledgement: a live peer's engine answers it (its host
//! need not do anything), a dead one does not and the connection declares
//! it dead a peer timeout later. Traffic from a peer is as good as an
//! answer: a peer that keeps sending is never probed.
//! The probe interval is a quarter of the peer timeout, so a waiting
//! operation fails at most `peer_timeout` plus one interval after its peer
//! was last heard from (or after it began waiting, if later).
//!
//! A receive that accepts any source cannot know whom it waits for: it is
//! never failed for a peer's death (a message of another peer may still
//! match it). The exception is a message from the dead peer that it had
//! already begun to take: that message is dropped and the receive goes
//! back to waiting.
//!
//! When nothing waits, no deadline is armed: an idle engine has no timer.

use std::time::Duration;

use outboard_wire as wire;

use crate::conn::TxRecord;
use crate::{Dma, Engine, Instant, NodeId};

impl<D: Dma> Engine<D> {
    /// How often a waiting operation's peers are probed.
    pub(crate) fn keepalive_interval(&self) -> Duration {
        self.cfg.peer_timeout / 4
    }

    /// An operation began waiting on a peer: arms the probe deadline if it
    /// is not armed already.
    pub(crate) fn keepalive_arm(&mut self, now: Instant) {
        if self.keepalive_at.is_none() {
            self.keepalive_at = Some(now + self.keepalive_interval());
        }
    }

    /// The probe deadline, if anything waits on a peer.
    pub(crate) fn keepalive_deadline(&self) -> Option<Instant> {
        self.keepalive_at
    }

    /// Drops the deadline once nothing waits on a peer any more (called at
    /// the end of every input, so `poll_timeout` never reports a deadline
    /// for an engine with nothing waiting). The cheap tests come first:
    /// while an operation is under way the deadline stays.
    pub(crate) fn keepalive_settle(&mut self) {
        if self.keepalive_at.is_some() && !self.awaits_any() {
            self.keepalive_at = None;
        }
    }

    /// Whether any operation waits on a known peer.
    fn awaits_any(&self) -> bool {
        !self.ops.is_empty()
            || !self.inbound.is_empty()
            || self.ports.iter().any(|p| p.open && p.posted.iter().any(|r| r.matching.source.is_some()))
            || self.coll_awaits_any()
            || self.nic_coll_awaits_any()
            || !self.atomics.is_quiet()
    }

    /// Nodes that operations wait on, sorted, without repeats: the sources
    /// named by posted receives, the far ends of outgoing operations (an
    /// RDMA read waits for its response; a send for the confirmation of
    /// its last packet), senders of messages under way, and the members
    /// running collectives wait to hear from.
    pub(crate) fn awaited_nodes(&self) -> Vec<NodeId> {
        let mut nodes: Vec<NodeId> = self.ops.values().map(|o| o.dest.node).collect();
        nodes.extend(self.inbound.keys().map(|(n, _)| *n));
        for p in self.ports.iter().filter(|p| p.open) {
            nodes.extend(p.posted.iter().filter_map(|r| r.matching.source.map(|(n, _)| n)));
            // A receive bound to a message still arriving waits on its
            // sender, which `inbound` already names.
        }
        nodes.extend(self.coll_awaited_nodes());
        nodes.extend(self.nic_coll_awaited_nodes());
        nodes.extend(self.atomics.awaited_nodes());
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The probe deadline passed: probes each awaited peer that has been
    /// silent for an interval and has nothing unacknowledged (anything
    /// unacknowledged already probes it), then re-arms while anything
    /// waits: for when the first awaited peer will have been silent for an
    /// interval.
    pub(crate) fn keepalive_due(&mut self, now: Instant) {
        match self.keepalive_at {
            Some(t) if t <= now => {}
            _ => return,
        }
        let interval = self.keepalive_interval();
        let nodes = self.awaited_nodes();
        let mut next = now + interval;
        for &node in &nodes {
            let ci = self.conn_for(node, now);
            let c = &self.conns[ci];
            if c.dead {
                continue;
            }
            match c.heard_at.map(|h| h + interval) {
                Some(due) if due > now => next = next.min(due),
                _ if c.nothing_unacked() => {
                    self.conns[ci].push(TxRecord::Control(wire::BodyRepr::Nop), now);
                    self.stats.keepalives += 1;
                    self.mark_ready(ci);
                }
                _ => {}
            }
        }
        self.keepalive_at = (!nodes.is_empty()).then_some(next);
    }
}
