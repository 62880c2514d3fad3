//! Failure notices: a dead peer is a fact for the whole job, not a cascade.
//!
//! Each engine learns of a death by its own timeout only when it has
//! something outstanding toward the dead peer (see `keepalive`). Without
//! notices, the others learn it later or never, and a rank whose operations
//! only involve a survivor that has already exited after its own error names
//! that survivor instead of the rank that died first.
//!
//! So when an engine declares a peer dead **by its own timeout**, it queues a
//! [`wire::PeerFailed`] notice (the dead node and the incarnation it knew)
//! as a control record on the ordinary reliable connection to every other
//! peer it has heard from and still considers alive. An engine that receives
//! one marks that node dead exactly as its own timeout would have: every
//! operation that needs it fails with `OpError::PeerUnreachable` naming it
//! (ULFM's `MPI_ERR_PROC_FAILED`), and a later operation naming it fails at
//! once.
//!
//! - **No storms.** Only the engine that detected the death by timeout sends
//!   notices; a notice is never relayed, and marking a peer dead from a
//!   notice sends none. Two engines that both time out send one each.
//! - **A live node told it is dead** ignores the notice and counts it
//!   (`Stats::notices_about_self`): the sender's view was wrong, and the
//!   sender will time out on this node's own traffic if it matters.
//! - **A restarted peer is not killed by a stale notice**: a notice naming
//!   an incarnation other than the one this engine knows for that node is
//!   ignored and counted (`Stats::notices_ignored`). A notice whose sender
//!   never heard from the node carries no incarnation and is taken as is.
//! - A restart (a new incarnation seen on the wire) is not a death and sends
//!   no notice.
//! - **Leaving after a failure.** A process that gives up after an error
//!   (the application's choice, like `MPI_Abort`) would otherwise leave its
//!   peers waiting a whole peer timeout on it, and whoever waited on it
//!   would fail late, one timeout per link of the chain. [`Engine::leave`]
//!   sends a notice naming the sender itself: its receiver takes the sender
//!   for dead at once (`Stats::departures`). Operations on it then fail
//!   naming it, while `Stats::first_failed` keeps the rank that died first.

use outboard_wire as wire;

use crate::conn::TxRecord;
use crate::{Dma, Engine, Instant, NodeId};

impl<D: Dma> Engine<D> {
    /// The peer of connection `ci` was declared dead by this engine's own
    /// timeout: tells every other peer heard from and still alive.
    pub(crate) fn notify_peer_failed(&mut self, ci: usize, now: Instant) {
        let dead = &self.conns[ci];
        let body = wire::BodyRepr::PeerFailed(wire::PeerFailed { node: dead.peer.0, boot: dead.peer_boot });
        self.tell_live_peers(&[body], Some(ci), now);
    }

    /// Queues `bodies`, in order, as reliable control records to every peer
    /// heard from and still alive, but the one of connection `except`.
    fn tell_live_peers(&mut self, bodies: &[wire::BodyRepr], except: Option<usize>, now: Instant) {
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if Some(ci) == except || c.dead || c.heard_at.is_none() {
                continue;
            }
            for body in bodies {
                self.conns[ci].push(TxRecord::Control(*body), now);
                self.stats.notices_sent += 1;
            }
            self.mark_ready(ci);
        }
    }

    /// This engine's process is leaving the job without finishing it (after
    /// a failure): tells every live peer it has heard from, so what waits
    /// on this node there fails at once instead of after the peer timeout.
    /// Reliable like any notice; the driver keeps the engine running a few
    /// retransmission timeouts afterwards to carry it across losses (the
    /// receivers stop answering a node they took for dead, so there is no
    /// acknowledgement to wait for).
    /// The departure follows a notice of the first failure this engine
    /// learned of, so a peer that had not heard of that one yet still names
    /// it, and not the leaver, as the job's first failure.
    pub fn leave(&mut self, now: Instant) {
        self.set_now(now);
        let mut bodies = Vec::with_capacity(2);
        if let Some(first) = self.stats.first_failed {
            let boot = self.conn_index.get(&first).and_then(|&ci| self.conns[ci].peer_boot);
            bodies.push(wire::BodyRepr::PeerFailed(wire::PeerFailed { node: first.0, boot }));
        }
        bodies.push(wire::BodyRepr::PeerFailed(wire::PeerFailed { node: self.cfg.node.0, boot: Some(self.cfg.boot) }));
        self.tell_live_peers(&bodies, None, now);
    }

    /// A notice from `from`: marks the named node dead unless it is this
    /// node or an incarnation other than the one known; a notice naming its
    /// own sender is that sender leaving ([`Engine::leave`]). Never relayed.
    pub(crate) fn on_peer_failed_notice(&mut self, now: Instant, from: NodeId, n: wire::PeerFailed) {
        self.stats.notices_received += 1;
        let node = NodeId(n.node);
        if node == self.cfg.node {
            self.stats.notices_about_self += 1;
            return;
        }
        if node == from {
            // Its sender is leaving the job: dead from now on. (Only a
            // member of the job can send this: the packet authenticated.)
            self.stats.departures += 1;
            let ci = self.conn_for(node, now);
            if !self.conns[ci].dead {
                self.peer_failed(ci, now, false);
            }
            return;
        }
        let ci = self.conn_for(node, now);
        let c = &mut self.conns[ci];
        if c.dead {
            return;
        }
        match (c.peer_boot, n.boot) {
            (Some(known), Some(noticed)) if known != noticed => {
                self.stats.notices_ignored += 1;
                return;
            }
            // Remember the incarnation that died: a packet from another
            // one is then a restart, which revives the connection.
            (None, Some(noticed)) => c.peer_boot = Some(noticed),
            _ => {}
        }
        self.peer_failed(ci, now, false);
    }
}
