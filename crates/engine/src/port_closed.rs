//! Port-closure notices: a receive naming a port that closed fails instead
//! of waiting forever.
//!
//! A node's death is announced (module `notice`), but a port can close on a
//! live node: its process finished its part and left, or closed the port to
//! open another. A peer that posted a receive naming that port would wait
//! for a message that can never come. So [`Engine::close_port`] queues a
//! [`wire::PortClosed`] notice (slot and incarnation) as a control record on
//! the reliable connection to every live peer it has heard from or has
//! something queued to. The
//! connection is in order, so every message the port sent before closing
//! (or the abort of one it gave up part-way) reaches the peer first: the
//! notice never overtakes data.
//!
//! A peer heard from for the first time after the close (it had never
//! talked to this node: its keepalive probe for a receive naming the port
//! is then the first packet) is told of every closed slot at that point.
//!
//! The receiving engine:
//!
//! - fails every receive posted on any of its ports whose match names
//!   exactly that node and port with `OpError::SourceClosed`; receives from
//!   any source are left alone (a closed port is not a failed process:
//!   nothing it sent was lost, so there is no ULFM "pending" failure);
//! - remembers the closed incarnation, one entry per (node, port) slot, so
//!   a receive naming that slot posted later fails at once - unless a
//!   message from it already waits, which it takes as usual;
//! - forgets the entry when a message from a newer incarnation of the slot
//!   arrives (it reopened: its messages match as usual), or when the node
//!   restarts or dies (its slots start over; death fails receives itself).
//!   A receive posted after the close and before the reopened slot's first
//!   message arrives fails: until then, nothing tells this engine the slot
//!   lives again.
//!
//! An engine built before this notice existed does not know its kind and
//! drops the datagram as malformed without acknowledging it, so mixing
//! builds in one job is not supported (the closing side would retransmit it
//! until the peer timeout).

use outboard_wire as wire;

use crate::conn::TxRecord;
use crate::port::PostedRecv;
use crate::{Dma, Endpoint, Engine, Generation, Instant, NodeId, OpError, PortId};

impl<D: Dma> Engine<D> {
    /// Port `port`, incarnation `gen`, just closed: tells every live peer
    /// heard from or with something queued to it, after what the port
    /// already queued there. (Not a peer never heard from and owed
    /// nothing: it may have exited, and a notice to it would only be
    /// retransmitted until it is declared dead.)
    pub(crate) fn announce_port_closed(&mut self, port: PortId, gen: Generation, now: Instant) {
        let body = wire::BodyRepr::PortClosed(wire::PortClosed { port: port.0, gen });
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if c.dead || (c.heard_at.is_none() && c.is_quiet()) {
                continue;
            }
            self.conns[ci].push(TxRecord::Control(body), now);
            self.stats.port_closures_sent += 1;
            self.mark_ready(ci);
        }
    }

    /// The peer of connection `ci` is heard from for the first time (or
    /// for the first time since it restarted): announces every slot closed
    /// before, so a receive it posted naming one fails instead of waiting
    /// on probes this engine answers forever. One record per closed slot
    /// (slots never opened have incarnation 0 and are skipped).
    pub(crate) fn announce_closed_ports_to(&mut self, ci: usize, now: Instant) {
        let mut any = false;
        for pi in 0..self.ports.len() {
            let p = &self.ports[pi];
            if p.open || p.gen == 0 {
                continue;
            }
            let body = wire::BodyRepr::PortClosed(wire::PortClosed { port: pi as u8, gen: p.gen });
            self.conns[ci].push(TxRecord::Control(body), now);
            self.stats.port_closures_sent += 1;
            any = true;
        }
        if any {
            self.mark_ready(ci);
        }
    }

    /// A notice from `from` that its port slot closed: fails the receives
    /// naming it and remembers the incarnation for receives posted later.
    pub(crate) fn on_port_closed_notice(&mut self, from: NodeId, n: wire::PortClosed) {
        self.stats.port_closures_received += 1;
        let slot = PortId(n.port);
        let entry = self.closed_sources.entry((from, slot)).or_insert(n.gen);
        *entry = (*entry).max(n.gen);
        let src = Endpoint { node: from, port: slot, gen: *entry };
        self.fail_posted_recvs(|r| (r.matching.source == Some((from, slot))).then_some(OpError::SourceClosed(src)));
        self.coll_member_closed(Endpoint { node: from, port: slot, gen: n.gen });
    }

    /// A message from `(node, port)` of incarnation `gen` arrived: a newer
    /// incarnation than the one recorded closed means the slot reopened.
    #[inline]
    pub(crate) fn source_seen(&mut self, node: NodeId, port: u8, gen: Generation) {
        if self.closed_sources.is_empty() {
            return;
        }
        let key = (node, PortId(port));
        if self.closed_sources.get(&key).is_some_and(|&closed| gen > closed) {
            self.closed_sources.remove(&key);
        }
    }

    /// Forgets what was recorded closed on `node` (it restarted or died).
    pub(crate) fn forget_closed_sources(&mut self, node: NodeId) {
        if !self.closed_sources.is_empty() {
            self.closed_sources.retain(|(n, _), _| *n != node);
        }
    }

    /// The closed incarnation that a receive about to wait names, if any:
    /// it must fail at once rather than wait.
    pub(crate) fn closed_source_of(&self, recv: &PostedRecv) -> Option<Endpoint> {
        let (node, port) = recv.matching.source?;
        let &gen = self.closed_sources.get(&(node, port))?;
        Some(Endpoint { node, port, gen })
    }
}
