//! Installing groups and their schedules (prepared for running as
//! [`Compiled`]), and removing them: one group, or all of a closed port's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::super::{rounds, CollError, Fold, GroupId, MemberList, Schedule, ScheduleId};
use super::complete::Partial;
use super::Running;
use crate::{Completion, Dma, Endpoint, Engine, Generation, HostBuf, OpError, PortId};

/// A schedule prepared for running: each send and receive knows its round
/// (its ordinal among the packets between the same two members, see
/// [`rounds`]).
#[derive(Debug)]
pub(crate) struct Compiled {
    /// Its number in the group (carried by its packets).
    pub id: u16,
    pub schedule: Schedule,
    /// Whether the engine may run it before the host starts it: it begins
    /// by taking one packet's value whole (Replace) before sending
    /// anything and never combines, so the host's contribution is never
    /// read - a non-root member of a broadcast. Such a collective is
    /// started by its first packet; the host's command later only collects
    /// the result.
    pub forwards_alone: bool,
    /// Whether its value is sent exactly as the host gave it: it sends
    /// first and never takes a packet's value (a broadcast root). Such a
    /// member's pieces of a multi-piece command are read from host memory
    /// packet by packet ([`Lazy`](super::out::Lazy)).
    pub sends_host_value: bool,
    /// `send_round[step][i]` for `steps[step].send_to[i]`.
    pub send_round: Vec<Vec<u16>>,
    /// `recv_round[step][i]` for `steps[step].recv_from[i]`.
    pub recv_round: Vec<Vec<u16>>,
}

impl Compiled {
    pub(crate) fn new(id: u16, schedule: Schedule) -> Result<Compiled, CollError> {
        let (send_round, recv_round) = rounds(&schedule)?;
        let forwards_alone = schedule.steps.first().is_some_and(|s| {
            s.send_to.is_empty() && s.recv_from.len() == 1 && s.fold() == Fold::Replace
        }) && schedule.steps.iter().all(|s| s.fold() != Fold::Combine);
        let sends_host_value = schedule.steps.first().is_some_and(|s| !s.send_to.is_empty())
            && schedule.steps.iter().all(|s| s.recv_from.is_empty() || s.fold() == Fold::Ignore);
        Ok(Compiled { id, schedule, send_round, recv_round, forwards_alone, sends_host_value })
    }

    /// Whether a packet from `src` numbered `round` can start this
    /// collective without its host.
    pub(super) fn starts_on(&self, src: u32, round: u16) -> bool {
        self.forwards_alone && self.schedule.steps[0].recv_from[0] == src && self.recv_round[0][0] == round
    }

    /// Whether some receive of this schedule expects (src, round).
    pub(super) fn expects(&self, src: u32, round: u16) -> bool {
        self.schedule
            .steps
            .iter()
            .zip(&self.recv_round)
            .any(|(s, rr)| s.recv_from.iter().zip(rr).any(|(&r, &n)| r == src && n == round))
    }
}

/// A group installed at one port incarnation.
#[derive(Debug)]
pub(crate) struct Group {
    pub gen: Generation,
    pub rank: u32,
    pub members: MemberList,
    pub schedules: BTreeMap<u16, Arc<Compiled>>,
    /// The epoch the next collective started here takes (by the host or,
    /// for a broadcast, by its first packet).
    pub next_epoch: u32,
    /// The epoch the host's next collective command takes; below
    /// `next_epoch` when the engine started collectives on its own.
    pub host_epoch: u32,
    /// In epoch order; completed from the front.
    pub running: VecDeque<Running>,
    /// The earlier pieces of the multi-piece command now completing.
    pub partial: Option<Partial>,
    /// Why the group can complete nothing any more: a member's port
    /// closed, or its node died. Every collective started from then on
    /// fails with it (see [`Running::lost`]), not only those that wait
    /// for the lost member: a root that only sends would otherwise go on
    /// succeeding while the members that stopped calling leave the others
    /// waiting.
    pub lost: Option<OpError>,
}

impl<D: Dma> Engine<D> {
    /// This port's rank in `group` and the group's size (NICVM modules run
    /// over groups).
    pub(crate) fn coll_group_rank_size(&self, port: PortId, group: GroupId) -> Option<(u32, u32)> {
        let g = self.coll.groups.get(&(port, group))?;
        (g.gen == self.ports[usize::from(port.0)].gen).then_some((g.rank, g.members.len()))
    }

    /// The endpoint of `rank` in `group` at this port.
    pub(crate) fn coll_group_member(&self, port: PortId, group: GroupId, rank: u32) -> Option<crate::Endpoint> {
        self.coll.groups.get(&(port, group))?.members.get(rank)
    }

    /// Reads a host buffer the engine keeps a copy of (a member list, a
    /// schedule, a contribution).
    pub(super) fn read_host(&mut self, port: PortId, buf: HostBuf) -> Result<Vec<u8>, OpError> {
        if buf.len > self.cfg.max_message {
            return Err(OpError::Collective(CollError::TooLong { len: buf.len, max: self.cfg.max_message }));
        }
        let mut v = vec![0; buf.len as usize];
        if buf.len == 0 {
            return Ok(v);
        }
        self.dma.read(port, buf.addr, &mut v).map_err(|_| OpError::DmaFault)?;
        self.work.dma_read += u64::from(buf.len);
        Ok(v)
    }

    pub(crate) fn coll_create_group(
        &mut self,
        port: PortId,
        gen: Generation,
        group: GroupId,
        rank: u32,
        members: HostBuf,
    ) -> Result<Completion, OpError> {
        if self.coll.groups.contains_key(&(port, group)) {
            return Err(CollError::GroupExists.into());
        }
        let bytes = self.read_host(port, members)?;
        let members = MemberList::decode(&bytes)?;
        let size = members.len();
        let me = members.get(rank).ok_or(CollError::RankOutOfRange { rank, size })?;
        if me != (Endpoint { node: self.cfg.node, port, gen }) {
            return Err(CollError::NotMember.into());
        }
        self.coll.groups.insert(
            (port, group),
            Box::new(Group {
                gen,
                rank,
                members,
                schedules: BTreeMap::new(),
                next_epoch: 0,
                host_epoch: 0,
                running: VecDeque::new(),
                partial: None,
                lost: None,
            }),
        );
        Ok(Completion::GroupCreated)
    }

    pub(crate) fn coll_destroy_group(&mut self, port: PortId, group: GroupId) -> Result<Completion, OpError> {
        let g = self.coll.groups.get(&(port, group)).ok_or(CollError::NoSuchGroup)?;
        if g.running.iter().any(|r| r.op.is_some()) {
            return Err(CollError::GroupBusy.into());
        }
        // Broadcasts the engine forwarded on its own that the host never
        // collected go with the group.
        let held: usize = g.running.iter().map(|r| r.held).sum();
        self.coll.pool_bytes -= held;
        self.coll.groups.remove(&(port, group));
        // Early packets for it would otherwise wait for a group of the same
        // id created later.
        self.coll_pool_forget(|p, g| p == port && g == group);
        self.coll.blocked.remove(&(port, group));
        Ok(Completion::GroupDestroyed)
    }

    pub(crate) fn coll_set_schedule(
        &mut self,
        port: PortId,
        group: GroupId,
        id: ScheduleId,
        buf: HostBuf,
    ) -> Result<Completion, OpError> {
        if !self.coll.groups.contains_key(&(port, group)) {
            return Err(CollError::NoSuchGroup.into());
        }
        let bytes = self.read_host(port, buf)?;
        let sched = Schedule::decode(&bytes)?;
        let g = self.coll.groups.get_mut(&(port, group)).expect("checked above");
        sched.validate(g.rank, g.members.len())?;
        g.schedules.insert(id.0, Arc::new(Compiled::new(id.0, sched)?));
        // Broadcast packets that came before their schedule can start now.
        self.coll_start_pooled(self.now, port, group);
        Ok(Completion::ScheduleSet)
    }

    /// The port closed: its groups and pooled packets go, and the outgoing
    /// packets of its collectives still under way. Those of collectives
    /// its host completed (or whose group it freed since) go on, as an
    /// eager send's do: the host took the result and left, and they reach
    /// their members before the close notice does, so a member that
    /// needed nothing else from the closed port completes (one still
    /// waiting for others then fails with the notice, see
    /// `coll_member_closed`). They stay charged to the slot until
    /// confirmed.
    pub(crate) fn coll_port_closed(&mut self, port: PortId) {
        let held: usize = self
            .coll
            .groups
            .iter()
            .filter(|((p, _), _)| *p == port)
            .flat_map(|(_, g)| g.running.iter().map(|r| r.held))
            .sum();
        self.coll.pool_bytes -= held;
        let groups = &self.coll.groups;
        let under_way = |o: &super::CollOut| {
            groups.get(&(o.port, o.group)).is_some_and(|g| g.running.iter().any(|r| r.epoch == o.epoch))
        };
        let gone: Vec<u32> = self.coll.out.iter().filter(|(_, o)| o.port == port && under_way(o)).map(|(&k, _)| k).collect();
        for k in gone {
            self.coll_out_remove(k);
        }
        self.coll.groups.retain(|(p, _), _| *p != port);
        self.coll_pool_forget(|p, _| p == port);
        self.coll.blocked.retain(|(p, _)| *p != port);
    }
}
