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

use outboard_wire as wire;

use crate::conn::TxRecord;
use crate::{Dma, Engine, Instant, NodeId};

impl<D: Dma> Engine<D> {
    /// The peer of connection `ci` was declared dead by this engine's own
    /// timeout: tells every other peer heard from and still alive.
    pub(crate) fn notify_peer_failed(&mut self, ci: usize, now: Instant) {
        let dead = &self.conns[ci];
        let body = wire::BodyRepr::PeerFailed(wire::PeerFailed { node: dead.peer.0, boot: dead.peer_boot });
        for other in 0..self.conns.len() {
            let c = &self.conns[other];
            if other == ci || c.dead || c.heard_at.is_none() {
                continue;
            }
            self.conns[other].push(TxRecord::Control(body), now);
            self.stats.notices_sent += 1;
            self.mark_ready(other);
        }
    }

    /// A notice from `from`: marks the named node dead unless it is this
    /// node, the sender itself, or an incarnation other than the one known.
    /// Never relayed.
    pub(crate) fn on_peer_failed_notice(&mut self, now: Instant, from: NodeId, n: wire::PeerFailed) {
        self.stats.notices_received += 1;
        let node = NodeId(n.node);
        if node == self.cfg.node {
            self.stats.notices_about_self += 1;
            return;
        }
        if node == from {
            // Its sender is evidently alive: nothing honest sends this.
            self.stats.notices_ignored += 1;
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
