//! Completion: a group's finished collectives complete from the front, in
//! epoch order (a multi-piece command once, with its last piece); and the
//! failures that end collectives early (a packet that cannot be
//! delivered, a dead peer).

use super::super::{CollError, GroupId};
use crate::{Completion, Dma, Endpoint, Engine, NodeId, OpError, OpId, PortId, TokenClass};

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

impl<D: Dma> Engine<D> {
    /// Completes the group's finished collectives from the front. A piece
    /// read per packet ([`Lazy`](super::out::Lazy)) is finished only once
    /// it has been read: until then the host must keep its buffer. A
    /// multi-piece command's earlier pieces only add to its [`Partial`];
    /// its last completes it.
    pub(super) fn coll_complete_front(&mut self, port: PortId, group: GroupId) {
        loop {
            let Some(g) = self.coll.groups.get_mut(&(port, group)) else { return };
            let gen = g.gen;
            if !g.running.front().is_some_and(|r| r.can_complete()) {
                return;
            }
            let r = g.running.pop_front().expect("checked");
            let op = r.op.expect("checked");
            let value = r.result_value();
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
            let flagged = r.lost.is_some()
                || matches!(
                    result,
                    Err(OpError::Collective(
                        CollError::ModuleFailed { .. } | CollError::FailedUpstream { .. } | CollError::ScheduleMismatch { .. }
                    ))
                );
            if result.is_err() && !flagged {
                // Its packets still in flight are of no use any more (those
                // flagged failed are: they tell the members waiting for
                // them that the collective failed).
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
            self.complete(port, gen, op, result, TokenClass::Coll);
        }
    }

    /// Ends the collective a packet belongs to with `err`.
    pub(super) fn coll_fail_packet(&mut self, key: u32, err: OpError) {
        let Some(o) = self.coll_out_remove(key) else { return };
        let mut owner_told = false;
        if let Some(g) = self.coll.groups.get_mut(&(o.port, o.group)) {
            if g.gen == o.port_gen {
                if let Some(r) = g.running.iter_mut().find(|r| r.epoch == o.epoch) {
                    owner_told = r.fail(err);
                }
            }
        }
        if !owner_told {
            self.stats.coll_abandoned += 1;
        }
        self.coll_complete_front(o.port, o.group);
    }

    /// Peer `node` is gone: every collective of a group with a member there
    /// fails, those under way and those started later (the group can no
    /// longer complete anything: see `Group::lost`). Groups complete
    /// in (port, group id) order, the same on every run.
    pub(crate) fn coll_peer_failed(&mut self, node: NodeId) {
        let err = OpError::PeerUnreachable(node);
        self.coll_forget_refused(node, None);
        let mut touched = Vec::new();
        for (&(port, group), g) in self.coll.groups.iter_mut() {
            if !g.members.has_node(node) {
                continue;
            }
            g.lost.get_or_insert(err);
            // Also one whose steps are done but whose value the packets
            // read from host memory as they go out (`Lazy`): those packets
            // are dropped below, so it would wait for the read forever.
            for r in g.running.iter_mut() {
                r.fail(err);
            }
            touched.push((port, group));
        }
        self.coll_out_retain(|o| o.dest.node != node);
        for (port, group) in touched {
            self.coll_complete_front(port, group);
        }
    }

    /// Member `closed` left while its node lives on (its process ended, or
    /// gave the job up, on a node engine): every collective of a group it
    /// belongs to fails naming it, under way or started later, as a dead
    /// node's would, since it will never contribute again. Its node's
    /// other ports go on.
    pub(crate) fn coll_member_closed(&mut self, closed: Endpoint) {
        let err = OpError::SourceClosed(closed);
        let mut touched = Vec::new();
        for (&(port, group), g) in self.coll.groups.iter_mut() {
            if g.members.rank_of(closed).is_none() {
                continue;
            }
            g.lost.get_or_insert(err);
            // Also one whose steps are done but whose value the packets
            // read from host memory as they go out (`Lazy`): those packets
            // are dropped below, so it would wait for the read forever.
            for r in g.running.iter_mut() {
                r.fail(err);
            }
            touched.push((port, group));
        }
        self.coll_out_retain(|o| o.dest != closed);
        for (port, group) in touched {
            self.coll_complete_front(port, group);
        }
    }

    /// Whether member `ep` is known to have closed: a port of this node no
    /// longer open at that incarnation, or one a peer announced closed.
    pub(crate) fn coll_member_is_closed(&self, ep: Endpoint) -> bool {
        if ep.node == self.cfg.node {
            return self.ports.get(usize::from(ep.port.0)).is_none_or(|p| !p.open || p.gen != ep.gen);
        }
        self.closed_sources.get(&(ep.node, ep.port)).is_some_and(|&gen| gen >= ep.gen)
    }
}
