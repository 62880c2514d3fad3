//! The engine side of the collective protocol: a host's barrier command,
//! arriving notifications and requests, the request timer, transmission,
//! and the ends of ports, groups and peers.

use std::collections::BTreeSet;
use std::sync::Arc;

use outboard_wire::{self as wire, BodyRepr, Header, Kind, NicCollHeader, NicCollType};

use super::progress::{expects, Progress};
use super::{Barrier, Early, NicCollStats, Prepared, ProtoGroup};
use crate::coll::run::Compiled;
use crate::coll::{CollError, Fold, GroupId, ScheduleId};
use crate::{Completion, Dma, Endpoint, Engine, Instant, NodeId, OpError, OpId, PortId, TokenClass, Transmit};

/// The header of a collective-protocol packet from this member of `g`
/// (on `port`, `group`) to its member `to`, and the node it goes to.
fn header_to(
    g: &crate::coll::run::Group,
    (port, group): (PortId, GroupId),
    to: u32,
    ptype: NicCollType,
    epoch: u32,
    round: u16,
    schedule: u16,
) -> (NodeId, NicCollHeader) {
    let ep = g.members.get(to).expect("validated rank");
    let h = NicCollHeader {
        src_port: port.0,
        dst_port: ep.port.0,
        ptype,
        src_gen: g.gen,
        dst_gen: ep.gen,
        group: group.0,
        epoch,
        src_rank: g.rank,
        round,
        schedule,
    };
    (ep.node, h)
}

/// Whether `d = epoch - done` (wrapping) falls before the window.
fn before(d: u32) -> bool {
    (d as i32) < 0
}

impl<D: Dma> Engine<D> {
    /// What the collective protocol did so far.
    pub fn nic_coll_stats(&self) -> NicCollStats {
        self.nic_coll.stats
    }

    /// The protocol state of `(port, group)`, (re)made for the group's
    /// current incarnation. `None` when the group is not installed.
    fn proto_group(&mut self, port: PortId, group: GroupId) -> Option<&mut ProtoGroup> {
        let gen = self.coll.groups.get(&(port, group))?.gen;
        let pg = self.nic_coll.groups.entry((port, group)).or_insert_with(|| ProtoGroup::new(gen));
        if pg.gen != gen {
            *pg = ProtoGroup::new(gen);
        }
        Some(pg)
    }

    /// A host's [`crate::Command::NicBarrier`]: the group's next protocol
    /// barrier. Errors found before it takes an epoch complete the command
    /// at once (the caller returns its token).
    pub(crate) fn nic_barrier_start(&mut self, now: Instant, port: PortId, op: OpId, group: GroupId, schedule: ScheduleId) -> Result<(), OpError> {
        let g = self.coll.groups.get(&(port, group)).ok_or(CollError::NoSuchGroup)?;
        let sched = g.schedules.get(&schedule.0).cloned().ok_or(CollError::NoSuchSchedule)?;
        if sched.schedule.steps.iter().any(|s| !s.recv_from.is_empty() && s.fold() != Fold::Ignore) {
            return Err(CollError::Malformed("the collective protocol runs barriers only (every fold Ignore)").into());
        }
        let dead = (0..g.members.len()).filter_map(|r| g.members.get(r)).map(|e| e.node).find(|n| self.conn_index.get(n).is_some_and(|&ci| self.conns[ci].dead));
        let prepared = self.prepare(port, group, &sched);
        let pg = self.proto_group(port, group).expect("checked above");
        let epoch = pg.next_epoch;
        pg.next_epoch = pg.next_epoch.wrapping_add(1);
        let early = pg.early.remove(&epoch).unwrap_or(Early { schedule: sched.id, got: BTreeSet::new() });
        let mut outcome = dead.map(OpError::PeerUnreachable);
        if early.schedule != sched.id && !early.got.is_empty() {
            outcome.get_or_insert(CollError::ScheduleMismatch { ours: sched.id, theirs: early.schedule }.into());
        }
        pg.running.push_back(Barrier { op, progress: Progress::new(epoch, sched, early.got), prepared, outcome });
        self.nic_coll_run(now, port, group);
        Ok(())
    }

    /// The prepared notifications of `sched` in `group` (built once).
    fn prepare(&mut self, port: PortId, group: GroupId, sched: &Compiled) -> Arc<Prepared> {
        if let Some(p) = self.nic_coll.groups.get(&(port, group)).and_then(|pg| pg.prepared.get(&sched.id)) {
            return p.clone();
        }
        let g = self.coll.groups.get(&(port, group)).expect("caller checked");
        let sends = sched
            .schedule
            .steps
            .iter()
            .zip(&sched.send_round)
            .map(|(s, rounds)| {
                s.send_to
                    .iter()
                    .zip(rounds)
                    .map(|(&to, &round)| header_to(g, (port, group), to, NicCollType::Notify, 0, round, sched.id))
                    .collect()
            })
            .collect();
        let p = Arc::new(Prepared { sends });
        if let Some(pg) = self.proto_group(port, group) {
            pg.prepared.insert(sched.id, p.clone());
        }
        p
    }

    /// Runs the group's front barrier as far as it goes; completes
    /// finished (or failed) barriers from the front, in epoch order.
    fn nic_coll_run(&mut self, now: Instant, port: PortId, group: GroupId) {
        let interval = self.cfg.rto_initial;
        loop {
            let gen = match self.nic_coll.groups.get(&(port, group)) {
                Some(pg) => pg.gen,
                None => return,
            };
            let pg = self.nic_coll.groups.get_mut(&(port, group)).expect("looked up above");
            let Some(b) = pg.running.front_mut() else {
                pg.retry_at = None;
                return;
            };
            let mut due = Vec::new();
            let finished = b.outcome.is_some() || b.progress.advance(&mut due);
            let epoch = b.progress.epoch;
            for step in due {
                for &(node, h) in &b.prepared.sends[step] {
                    self.nic_coll.tx.push_back((node, NicCollHeader { epoch, ..h }));
                    self.nic_coll.stats.notifications += 1;
                }
            }
            if !finished {
                if pg.retry_at.is_none() {
                    pg.retry_at = Some(now + interval);
                    pg.backoff = interval;
                }
                // It waits on its peers: the keepalive probes the silent.
                self.keepalive_arm(now);
                return;
            }
            let b = pg.running.pop_front().expect("front checked");
            pg.done = pg.done.wrapping_add(1);
            let done = pg.done;
            pg.early.retain(|&e, _| !before(e.wrapping_sub(done)));
            pg.retry_at = None;
            let result = match b.outcome {
                Some(e) => {
                    pg.last = None;
                    Err(e)
                }
                None => {
                    pg.last = Some((b.progress, b.prepared));
                    Ok(Completion::Collective { epoch, len: 0 })
                }
            };
            self.nic_coll.stats.barriers += 1;
            self.complete(port, gen, b.op, result, TokenClass::Coll);
        }
    }

    /// A collective-protocol packet from `from` (its MAC, job and
    /// incarnation already checked by the receive path).
    pub(crate) fn on_nic_coll(&mut self, now: Instant, from: NodeId, h: NicCollHeader) {
        let port = PortId(h.dst_port);
        let group = GroupId(h.group);
        let addressed = self.ports.get(usize::from(h.dst_port)).is_some_and(|p| p.open && p.gen == h.dst_gen)
            && self.coll.groups.get(&(port, group)).is_some_and(|g| {
                g.gen == h.dst_gen && g.members.get(h.src_rank) == Some(Endpoint { node: from, port: PortId(h.src_port), gen: h.src_gen })
            });
        if !addressed {
            self.nic_coll.stats.dropped += 1;
            return;
        }
        match h.ptype {
            NicCollType::Notify => self.on_notify(now, port, group, h),
            NicCollType::Nack => self.on_resend_request(port, group, h),
        }
    }

    fn on_notify(&mut self, now: Instant, port: PortId, group: GroupId, h: NicCollHeader) {
        let early_sched = self.coll.groups.get(&(port, group)).and_then(|g| g.schedules.get(&h.schedule).cloned());
        self.proto_group(port, group).expect("addressed");
        let nc = &mut self.nic_coll;
        let (pg, stats) = (nc.groups.get_mut(&(port, group)).expect("made above"), &mut nc.stats);
        let d = h.epoch.wrapping_sub(pg.done);
        if before(d) {
            stats.stale += 1;
            return;
        }
        if d >= 2 {
            stats.out_of_window += 1;
            return;
        }
        let front = pg.running.front().map(|b| b.progress.epoch) == Some(h.epoch);
        if let Some(b) = pg.running.iter_mut().find(|b| b.progress.epoch == h.epoch) {
            if b.progress.sched.id != h.schedule {
                b.outcome.get_or_insert(CollError::ScheduleMismatch { ours: b.progress.sched.id, theirs: h.schedule }.into());
            } else if !expects(&b.progress.sched, h.src_rank, h.round) {
                stats.dropped += 1;
                return;
            } else if !b.progress.arrive(h.src_rank, h.round) {
                stats.duplicates += 1;
                return;
            }
            if front {
                // Progress: the next request waits a whole first interval.
                pg.retry_at = None;
                self.nic_coll_run(now, port, group);
            }
            return;
        }
        // Its host has not started it: kept (two epochs at most, the
        // schedule's receives at most per epoch) unless it cannot be
        // checked yet, in which case it will be asked for again.
        let e = pg.early.entry(h.epoch).or_insert(Early { schedule: h.schedule, got: BTreeSet::new() });
        match early_sched {
            Some(c) if e.schedule == h.schedule && expects(&c, h.src_rank, h.round) => {
                if !e.got.insert((h.src_rank, h.round)) {
                    stats.duplicates += 1;
                }
            }
            _ => stats.dropped += 1,
        }
        if e.got.is_empty() {
            pg.early.remove(&h.epoch);
        }
    }

    /// A member asks for notification `h.round` of epoch `h.epoch` again:
    /// sent if this member has sent it (in the barrier under way or the
    /// last one completed), else it goes when its step comes.
    fn on_resend_request(&mut self, port: PortId, group: GroupId, h: NicCollHeader) {
        let Some(pg) = self.nic_coll.groups.get(&(port, group)) else {
            self.nic_coll.stats.nacks_ignored += 1;
            return;
        };
        let from_front = pg.running.front().filter(|b| b.progress.epoch == h.epoch && b.outcome.is_none()).map(|b| (&b.progress, &b.prepared));
        let from_last = pg.last.as_ref().filter(|(p, _)| p.epoch == h.epoch).map(|(p, pr)| (p, pr));
        let found = from_front.or(from_last).and_then(|(p, pr)| {
            let (s, i) = p.sent_to(h.src_rank, h.round)?;
            let (node, hdr) = pr.sends[s][i];
            Some((node, NicCollHeader { epoch: h.epoch, ..hdr }))
        });
        match found {
            Some(pkt) => {
                self.nic_coll.tx.push_back(pkt);
                self.nic_coll.stats.resent += 1;
            }
            None => self.nic_coll.stats.nacks_ignored += 1,
        }
    }

    /// The request timer: each group whose front barrier waited an
    /// interval asks every member it still misses to resend, and doubles
    /// its interval (up to `rto_max`).
    pub(crate) fn nic_coll_due(&mut self, now: Instant) {
        let max = self.cfg.rto_max;
        for (&(port, group), pg) in self.nic_coll.groups.iter_mut() {
            match pg.retry_at {
                Some(t) if t <= now => {}
                _ => continue,
            }
            let Some(b) = pg.running.front() else {
                pg.retry_at = None;
                continue;
            };
            let Some(g) = self.coll.groups.get(&(port, group)) else { continue };
            let p = &b.progress;
            for (rank, round) in p.missing() {
                let pkt = header_to(g, (port, group), rank, NicCollType::Nack, p.epoch, round, p.sched.id);
                self.nic_coll.tx.push_back(pkt);
                self.nic_coll.stats.nacks += 1;
            }
            pg.backoff = (pg.backoff * 2).min(max);
            pg.retry_at = Some(now + pg.backoff);
        }
    }

    /// The next collective-protocol datagram, if any: written into `buf`
    /// with its own header (no sequence number, no acknowledgement).
    pub(crate) fn nic_coll_transmit(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        while let Some((node, body)) = self.nic_coll.tx.pop_front() {
            if self.conn_index.get(&node).is_some_and(|&ci| self.conns[ci].dead) {
                continue;
            }
            let h = Header {
                kind: Kind::NicColl,
                flags: 0,
                src_node: self.cfg.node.0,
                dst_node: node.0,
                boot: self.cfg.boot,
                seq: wire::Seq(0),
                ack: wire::Seq(0),
                horizon: wire::Seq(0),
            };
            let len = wire::emit_prefix(&h, &BodyRepr::NicColl(body), 0, buf).expect("buffer checked against the MTU");
            wire::seal(&mut buf[..len], &self.mac);
            self.work.packets_out += 1;
            self.work.bytes_out += len as u64;
            self.work.nic_coll_out += 1;
            return Some(Transmit { dst: node, len });
        }
        None
    }

    /// Whether a protocol barrier waits on a peer (for the keepalive).
    pub(crate) fn nic_coll_awaits_any(&self) -> bool {
        self.nic_coll.groups.values().any(|pg| pg.running.front().is_some_and(|b| b.outcome.is_none()))
    }

    /// The nodes front barriers still miss notifications from.
    pub(crate) fn nic_coll_awaited_nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::new();
        for (key, pg) in &self.nic_coll.groups {
            let (Some(b), Some(g)) = (pg.running.front(), self.coll.groups.get(key)) else { continue };
            nodes.extend(b.progress.missing().into_iter().filter_map(|(r, _)| g.members.get(r)).map(|e| e.node));
        }
        nodes
    }

    /// Whether `group` at `port` has protocol barriers under way.
    pub(crate) fn nic_coll_busy(&self, port: PortId, group: GroupId) -> bool {
        self.nic_coll.groups.get(&(port, group)).is_some_and(|pg| !pg.running.is_empty())
    }

    /// The group is destroyed: its protocol state goes (a group created
    /// later under the same id starts from epoch 0, like its members').
    pub(crate) fn nic_coll_forget(&mut self, port: PortId, group: GroupId) {
        self.nic_coll.groups.remove(&(port, group));
    }

    /// The port closed: its groups' protocol state and queued packets go.
    pub(crate) fn nic_coll_port_closed(&mut self, port: PortId) {
        self.nic_coll.groups.retain(|(p, _), _| *p != port);
        self.nic_coll.tx.retain(|(_, h)| h.src_port != port.0);
    }

    /// This engine declared the peer of connection `ci` dead by its own
    /// timeout: the members of its protocol groups it has not heard from
    /// (the job-wide notice skips those) are told too. A protocol barrier
    /// may wait on a live member that waits on the dead one - a tree's
    /// root on an inner member whose child died - and nothing else would
    /// ever tell it.
    pub(crate) fn nic_coll_notify_members(&mut self, ci: usize, now: Instant) {
        let (dead, boot) = (self.conns[ci].peer, self.conns[ci].peer_boot);
        let mut nodes: Vec<NodeId> = Vec::new();
        for key in self.nic_coll.groups.keys() {
            let Some(g) = self.coll.groups.get(key).filter(|g| g.members.has_node(dead)) else { continue };
            nodes.extend((0..g.members.len()).filter_map(|r| g.members.get(r)).map(|e| e.node));
        }
        nodes.sort_unstable();
        nodes.dedup();
        let body = BodyRepr::PeerFailed(wire::PeerFailed { node: dead.0, boot });
        let me = self.cfg.node;
        for node in nodes.into_iter().filter(|&n| n != dead && n != me) {
            let cj = self.conn_for(node, now);
            let c = &mut self.conns[cj];
            if c.dead || c.heard_at.is_some() {
                continue;
            }
            c.push(crate::conn::TxRecord::Control(body), now);
            self.stats.notices_sent += 1;
            self.mark_ready(cj);
        }
    }

    /// Peer `node` is gone: every protocol barrier of a group with a
    /// member there fails (none of them can complete any more).
    pub(crate) fn nic_coll_peer_failed(&mut self, now: Instant, node: NodeId) {
        let err = OpError::PeerUnreachable(node);
        let mut touched = Vec::new();
        for (key, pg) in self.nic_coll.groups.iter_mut() {
            if !self.coll.groups.get(key).is_some_and(|g| g.members.has_node(node)) {
                continue;
            }
            for b in pg.running.iter_mut() {
                b.outcome.get_or_insert(err);
            }
            pg.last = None;
            touched.push(*key);
        }
        self.nic_coll.tx.retain(|(n, _)| *n != node);
        for (port, group) in touched {
            self.nic_coll_run(now, port, group);
        }
    }
}
