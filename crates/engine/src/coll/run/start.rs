//! Starting collectives: a host's `Collective` command becomes the
//! group's next collective, one per piece when it is longer than one
//! packet, or takes over the collective its engine already started on its
//! own (see [`super::pool`]).

use super::super::{CollError, GroupId, Reduction, ScheduleId, MAX_COLL_PIECES};
use super::out::Lazy;
use super::Running;
use crate::{Dma, Endpoint, Engine, HostBuf, Instant, OpError, OpId, PortId};

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

impl<D: Dma> Engine<D> {
    /// Largest contribution a collective carries (one packet).
    pub fn max_collective_len(&self) -> u32 {
        super::super::max_collective_len_for(self.cfg.mtu)
    }

    /// Largest contribution one `Collective` command takes: that many
    /// packets' worth, run as consecutive one-packet collectives.
    pub fn max_collective_command_len(&self) -> u32 {
        self.max_collective_len() * MAX_COLL_PIECES
    }

    /// Starts a collective. Errors found before anything is sent complete
    /// the command at once (with its token back).
    ///
    /// A command longer than one packet (up to [`MAX_COLL_PIECES`]
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
            // A mismatch found there runs the rest of its steps at once.
            self.coll_advance(now, port, group);
            return;
        }
        let sched = g.schedules.get(&schedule.0).cloned().expect("checked by the caller");
        // From here on the collective takes its epoch whatever happens, so
        // this member stays in step with its peers.
        let mut outcome = None;
        // The group may have lost a member already, or (a group created
        // since) a member it must hear from may be known dead: no packet
        // would ever tell this collective so.
        let awaited: Vec<Endpoint> =
            sched.schedule.steps.iter().flat_map(|s| s.recv_from.iter().map(|&r| g.members.get(r).expect("validated rank"))).collect();
        let mut lost = g.lost;
        if lost.is_none() {
            if let Some(ep) = awaited.iter().find(|ep| self.conn_index.get(&ep.node).is_some_and(|&ci| self.conns[ci].dead)) {
                lost = Some(OpError::PeerUnreachable(ep.node));
            } else if let Some(&ep) = awaited.iter().find(|&&ep| self.coll_member_is_closed(ep)) {
                // Or a member whose port closed on a node that lives on.
                lost = Some(OpError::SourceClosed(ep));
            }
        }
        // A piece sent unchanged is read per packet as it goes out; a value
        // the first packet replaces is never read at all.
        let lazy = (multi && sched.sends_host_value && send.len > 0 && lost.is_none()).then(|| Lazy::new(send));
        let value = if lost.is_some() || lazy.is_some() || sched.forwards_alone {
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
        let mut failed = None;
        let arrived = self.coll_take_pooled(port, group, epoch, &sched, &mut failed);
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked above");
        g.running.push_back(Running {
            op: Some(op),
            reduction,
            value,
            recv,
            outcome,
            last,
            lazy,
            failed,
            lost,
            ..Running::new(epoch, sched, arrived)
        });
        self.coll_advance(now, port, group);
        // Still waiting for packets, some of which the full pool may have
        // refused: the refused peers are told at once (a running
        // collective takes its packets whatever the pool holds).
        if !self.coll.refused.is_empty() {
            if let Some(g) = self.coll.groups.get(&(port, group)) {
                if let Some(r) = g.running.iter().find(|r| r.epoch == epoch && r.is_waiting()) {
                    for node in r.awaited_ranks().filter_map(|rank| g.members.get(rank)).map(|m| m.node) {
                        if self.coll.refused.contains_key(&node) {
                            self.coll.resume_now.insert(node);
                        }
                    }
                }
            }
        }
        // Packets pooled for the next epochs may start them now.
        self.coll_start_pooled(now, port, group);
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
            // The members disagree on which collective this is: it fails,
            // still telling the members its (the peers') schedule sends to
            // if it is under way.
            let err = CollError::ScheduleMismatch { ours: schedule.0, theirs: r.sched.id };
            match r.outcome {
                None => r.failed = Some(err),
                Some(Ok(())) => r.outcome = Some(Err(err.into())),
                Some(Err(_)) => {}
            }
        }
        let held = std::mem::take(&mut r.held);
        self.coll.pool_bytes -= held;
        self.coll_complete_front(port, group);
    }
}
