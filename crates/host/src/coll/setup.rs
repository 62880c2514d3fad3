//! Groups and schedules at this port and at its engine: registering a
//! group with the port (its id checked against the others), installing it
//! and its schedules at the engine for offloaded collectives without
//! waiting, collecting those installations, and freeing a group.

use outboard_engine::{
    CollError, Command, Endpoint, GroupId, HostBuf, MemberList, OpId, ScheduleId,
};

use super::api::Registered;
use super::group::{ScheduleKey, LEADERS_GROUP_FIRST};
use super::{CollectiveError, Group};
use crate::{HostError, Port, PortIo};

impl<P: PortIo> Port<P> {
    /// A group with an application-chosen id, checked against this port at
    /// once (see [`Group::new`]).
    pub fn new_group(
        &mut self,
        id: GroupId,
        rank: u32,
        members: Vec<Endpoint>,
    ) -> Result<Group, HostError> {
        let g = Group::new(id, rank, members)?;
        self.register_group(&g)?;
        Ok(g)
    }

    /// The group of `g`'s node leaders ([`Group::node_leaders`]) when this
    /// port is one, else `None`: id [`LEADERS_GROUP_FIRST`] plus `g`'s,
    /// `g`'s defaults. Local, like [`Self::new_group`]: every leader
    /// makes the same group from the same `g`.
    pub fn leaders_group(&mut self, g: &Group) -> Result<Option<Group>, HostError> {
        let leaders = g.node_leaders();
        let Some(me) = leaders.iter().position(|&r| r == g.rank()) else { return Ok(None) };
        let members: Vec<Endpoint> = leaders.iter().map(|&r| g.member(r).expect("a member's rank")).collect();
        let mut lg = Group::build(GroupId(LEADERS_GROUP_FIRST + g.id().0), me as u32, MemberList::from_endpoints(members))?;
        lg.set_defaults(g.defaults());
        self.register_group(&lg)?;
        Ok(Some(lg))
    }

    /// Removes a group: destroys it at the engine if it was installed there
    /// and frees its id at this port (ids from `split` become reusable once
    /// every member freed the group). Refused while collectives of the group
    /// are under way or not yet handed back.
    pub fn free_group(&mut self, g: Group) -> Result<(), HostError> {
        self.progress();
        if self.coll.busy(g.id()) {
            return Err(CollectiveError::Engine(CollError::GroupBusy).into());
        }
        if g.installed {
            let group = g.id();
            let r = self.start(|op| Command::DestroyGroup { op, group })?;
            self.wait(r)?;
        }
        self.coll.groups.remove(&g.id());
        self.coll.ids.give(g.id());
        Ok(())
    }

    /// Checks that `g` names this port at its rank and that its id is not
    /// used by another group here; records it.
    pub(crate) fn register_group(&mut self, g: &Group) -> Result<(), HostError> {
        if g.member(g.rank()) != Some(self.endpoint()) {
            return Err(CollectiveError::NotMember.into());
        }
        match self.coll.groups.get(&g.id()) {
            Some(r) if r.members != *g.members() => {
                Err(CollectiveError::GroupIdInUse(g.id()).into())
            }
            Some(_) => Ok(()),
            None => {
                self.coll.groups.insert(
                    g.id(),
                    Registered {
                        members: g.members().clone(),
                    },
                );
                Ok(())
            }
        }
    }

    /// Installs the group (no schedule) at the engine if not there yet, as
    /// [`Self::install`] does; for NICVM modules, which run over groups.
    pub(crate) fn install_group(&mut self, g: &mut Group) -> Result<(), HostError> {
        if !g.installed {
            let (group, rank) = (g.id(), g.rank());
            self.post_setup(group, &g.members().encode(), |op, members| {
                Command::CreateGroup {
                    op,
                    group,
                    rank,
                    members,
                }
            })?;
            g.installed = true;
        }
        Ok(())
    }

    /// Installs the group and the schedule `key` at the engine if not there
    /// yet. Nothing waits: the engine takes a port's commands in order, so
    /// the collective posted next finds them installed; their completions
    /// are collected by [`Self::reap_setup`]. (A wait here would also stop
    /// virtual time in the simulator.)
    pub(super) fn install(&mut self, g: &mut Group, key: ScheduleKey) -> Result<ScheduleId, HostError> {
        self.install_group(g)?;
        let slot = g.slot(key)?;
        let schedule = slot.id;
        if !slot.installed {
            let bytes = slot.schedule.encode();
            let group = g.id();
            self.post_setup(group, &bytes, |op, buf| Command::SetSchedule {
                op,
                group,
                schedule,
                buf,
            })?;
            g.slot(key)?.installed = true;
        }
        Ok(schedule)
    }

    /// Posts a local set-up command that reads `bytes` from host memory.
    fn post_setup(
        &mut self,
        group: GroupId,
        bytes: &[u8],
        make: impl FnOnce(OpId, HostBuf) -> Command,
    ) -> Result<(), HostError> {
        let buf = self.buffer_from(bytes)?;
        match self.start(|op| make(op, buf)) {
            Ok(r) => {
                self.coll.setup.push((r, buf, group));
                Ok(())
            }
            Err(e) => {
                self.free(buf)?;
                Err(e)
            }
        }
    }

    /// Frees the buffers of finished set-up commands and remembers failures.
    pub(super) fn reap_setup(&mut self) {
        let mut i = 0;
        while i < self.coll.setup.len() {
            let (r, buf, group) = self.coll.setup[i];
            match self.take(r) {
                None => i += 1,
                Some(result) => {
                    let _taken = self.coll.setup.swap_remove(i);
                    let _ = self.free(buf);
                    if let Err(e) = result {
                        self.coll.setup_failed.entry(group).or_insert(e);
                    }
                }
            }
        }
    }}
