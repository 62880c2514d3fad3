//! A port's bypass groups: application bypass on the port a program
//! already uses for everything else, any number of groups at once.
//!
//! Every operation of bypass traffic names its group's index in the set,
//! so the port hands each completion to its group wherever it was polled:
//! in a bypass call, in the interrupt handler, or in any other call of the
//! host library (whose `Port::progress` moves bypass traffic too, as
//! MPICH's progress engine handled bypass messages whatever call polled).
//!
//! Whoever drives the port serializes these calls with everything else on
//! it (a lock the interrupt handler only tries: [`super::Bypass`] has one,
//! the C ABI uses its world's), and brackets each stretch of library work
//! with [`Port::bypass_enter`] and [`Port::bypass_leave`] so that the engine
//! interrupts only while the library is away.

use outboard_engine::{Command, Completion, Endpoint, Event, GroupId, HostBuf, Reduction};

use super::core::{index_of, is_bypass, Core, MAX_GROUPS};
use super::{BcastCall, BypassError, BypassStats, ReduceCall};
use crate::coll::Group;
use crate::{Port, PortIo, Request};

/// Bypass groups of a group of the host library have this plus the
/// group's id: above every id of a [`Group`] (applications', splits' and
/// node leaders'), within the 23 bits a tag carries, so a group's bypass
/// traffic and its other collectives never match each other's receives.
pub const BYPASS_GROUP_FIRST: u64 = 1 << 22;
const _: () = assert!(2 * crate::coll::LEADERS_GROUP_FIRST <= BYPASS_GROUP_FIRST);
const _: () = assert!(2 * BYPASS_GROUP_FIRST <= 1 << 23);

/// One of a port's bypass groups ([`Port::bypass_attach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BypassId(u16);

/// Completions of other traffic the handler can set aside for the next
/// library call (room reserved when the first group attaches): the
/// library's own handling of them may allocate, which a signal handler
/// must not. A handler that finds the room full stops polling; the rest
/// wait in the engine's queue.
const DEFERRED: usize = 256;

/// Receives a port's bypass groups keep posted, at most, when a group
/// attaches (a quarter of an engine port's 256 receive tokens): every
/// slot holds a token for the group's life, and the port's other traffic
/// needs the rest. A call may add a slot beyond, when every slot holds a
/// later value; those go when the group does.
pub const RECV_BUDGET: usize = 64;

/// The bypass groups of one port.
#[derive(Default)]
pub(crate) struct BypassSet {
    /// By index; `None`: free, or taken out while a call runs on it.
    cores: Vec<Option<Core>>,
    /// The port's interrupt flag, once named to the engine.
    flag: Option<HostBuf>,
    /// Completions of other traffic polled by the handler, oldest first.
    deferred: std::collections::VecDeque<Event>,
}

impl BypassSet {
    /// Hands a completion of bypass traffic to its group (dropped when the
    /// group is gone: a detached group's cancelled receives).
    pub(crate) fn on_event(&mut self, e: Event) {
        if let Some(Some(c)) = self.cores.get_mut(usize::from(index_of(e.op))) {
            c.on_event(e);
        }
    }

    /// Whether the port has any bypass group.
    pub(crate) fn is_empty(&self) -> bool {
        self.cores.iter().all(Option::is_none)
    }
}

impl<P: PortIo> Port<P> {
    /// Starts naming a word of this port's memory to the engine as its
    /// interrupt flag (selective interrupts: the engine interrupts the
    /// process for a marked message only while the word is non-zero).
    /// Wait for the request, then [`Port::bypass_flag_named`].
    pub fn start_bypass_flag(&mut self) -> Result<(HostBuf, Request), BypassError> {
        let word = self.buffer(4)?;
        let r = self.start(|op| Command::SetInterruptFlag { op, word })?;
        Ok((word, r))
    }

    /// The flag of [`Port::start_bypass_flag`] is named (its request
    /// completed): [`Port::bypass_leave`] turns interrupts on from now.
    pub fn bypass_flag_named(&mut self, word: HostBuf) {
        self.bypass.flag = Some(word);
    }

    /// Names the interrupt flag, waiting for the engine.
    pub fn name_bypass_flag(&mut self) -> Result<(), BypassError> {
        if self.bypass.flag.is_some() {
            return Ok(());
        }
        let (word, r) = self.start_bypass_flag()?;
        match self.wait(r)? {
            Completion::InterruptFlagSet => {}
            other => unreachable!("set-flag completed as {other:?}"),
        }
        self.bypass_flag_named(word);
        Ok(())
    }

    /// Makes a bypass group of `members` (this port is `members[rank]`),
    /// its traffic tagged with `group` (which no [`Group`] of this port
    /// may use: see [`Port::bypass_attach_group`]), with `slots`
    /// temporary slots per kind of collective plus `slots` for values
    /// this member sends. Local: no message is exchanged, but every member
    /// must attach before a value for it arrives, or the value waits in
    /// the engine's unexpected queue until it does.
    pub fn bypass_attach(&mut self, group: GroupId, members: Vec<Endpoint>, rank: u32, slots: usize) -> Result<BypassId, BypassError> {
        let me = self.endpoint();
        if members.get(rank as usize).is_none_or(|m| m.node != me.node || m.port != me.port) {
            return Err(BypassError::NotMember(rank));
        }
        let posted: usize = self.bypass.cores.iter().flatten().map(Core::recv_slots).sum();
        if posted + 2 * slots.max(1) > RECV_BUDGET {
            return Err(BypassError::ReceiveBudget { posted, asked: 2 * slots.max(1), budget: RECV_BUDGET });
        }
        self.bypass.deferred.reserve(DEFERRED);
        let index = match self.bypass.cores.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.bypass.cores.len() < MAX_GROUPS => {
                self.bypass.cores.push(None);
                self.bypass.cores.len() - 1
            }
            None => return Err(BypassError::TooManyGroups(MAX_GROUPS)),
        };
        // Reserved while its receives are posted, so that no second attach
        // takes the index meanwhile.
        let core = Core::new(self, index as u16, members, rank, group, slots.max(1))?;
        self.bypass.cores[index] = Some(core);
        Ok(BypassId(index as u16))
    }

    /// [`Port::bypass_attach`] for the members of `g`, tagged apart from
    /// `g`'s own collectives ([`BYPASS_GROUP_FIRST`] plus its id).
    pub fn bypass_attach_group(&mut self, g: &Group, slots: usize) -> Result<BypassId, BypassError> {
        let members = (0..g.size()).filter_map(|r| g.member(r)).collect();
        self.bypass_attach(GroupId(BYPASS_GROUP_FIRST + g.id().0), members, g.rank(), slots)
    }

    /// Ends a bypass group once everything it sends is out and confirmed
    /// (as [`Port::bypass_quiesce`]), giving its memory back.
    pub fn bypass_detach(&mut self, id: BypassId) -> Result<(), BypassError> {
        let r = self.bypass_quiesce(id);
        if let Some(core) = self.bypass.cores.get_mut(usize::from(id.0)).and_then(Option::take) {
            core.release(self);
        }
        r
    }

    /// Runs `f` on group `id`, taken out of the set so that both it and
    /// the port can be borrowed; the set's other groups stay in place.
    fn on_group<R>(&mut self, id: BypassId, f: impl FnOnce(&mut Core, &mut Port<P>) -> Result<R, BypassError>) -> Result<R, BypassError> {
        let i = usize::from(id.0);
        let mut core = self.bypass.cores.get_mut(i).and_then(Option::take).ok_or(BypassError::NoSuchGroup)?;
        let r = f(&mut core, self);
        self.bypass.cores[i] = Some(core);
        r
    }

    /// Broadcast from `root` on bypass group `id`: `data` is the value at
    /// the root and is overwritten with it elsewhere. The root returns
    /// once its value is copied and its sends posted; others once the
    /// value is here (it may have arrived, been forwarded and waited in a
    /// slot long before).
    pub fn bypass_bcast(&mut self, id: BypassId, root: u32, data: &mut [u8]) -> Result<(), BypassError> {
        self.on_group(id, |c, p| c.bcast(p, root, data))
    }

    /// Starts a broadcast call for a driver that cannot block; step it
    /// with [`Port::bypass_bcast_step`].
    pub fn bypass_bcast_call(&mut self, id: BypassId, root: u32, len: usize) -> Result<BcastCall, BypassError> {
        self.on_group(id, |c, _| c.bcast_call(root, len))
    }

    /// One non-blocking step of `call`: true once it is done. On false,
    /// wait until the port has a completion and step again.
    pub fn bypass_bcast_step(&mut self, id: BypassId, call: &mut BcastCall, data: &mut [u8]) -> Result<bool, BypassError> {
        self.on_group(id, |c, p| c.bcast_step(p, call, data))
    }

    /// Reduce to `root` on bypass group `id`: `out` (as long as `data`)
    /// gets the result at the root and is untouched elsewhere. A non-root
    /// returns at once; its children's contributions are folded and the
    /// partial result sent up by the handler or a later call.
    pub fn bypass_reduce(&mut self, id: BypassId, root: u32, red: Reduction, data: &[u8], out: &mut [u8]) -> Result<(), BypassError> {
        self.on_group(id, |c, p| c.reduce(p, root, red, data, out))
    }

    /// Starts a reduce call for a driver that must not hold its port for
    /// the whole wait: `None` at a non-root, which is done; the root steps
    /// the call with [`Port::bypass_reduce_step`].
    pub fn bypass_reduce_call(&mut self, id: BypassId, root: u32, red: Reduction, data: &[u8], out_len: usize) -> Result<Option<ReduceCall>, BypassError> {
        self.on_group(id, |c, p| c.reduce_call(p, root, red, data, out_len))
    }

    /// One non-blocking step of the root's reduce call: true once the
    /// result is in `out`. On false, wait until the port has a completion
    /// and step again.
    pub fn bypass_reduce_step(&mut self, id: BypassId, call: &mut ReduceCall, out: &mut [u8]) -> Result<bool, BypassError> {
        self.on_group(id, |c, p| c.reduce_step(p, call, out))
    }

    /// A barrier as bypass traffic of group `id` (a reduce of nothing to
    /// rank 0, then a broadcast of nothing from it), so that it moves
    /// every bypass collective still under way while it waits.
    pub fn bypass_barrier(&mut self, id: BypassId) -> Result<(), BypassError> {
        const NOTHING: Reduction = Reduction { op: outboard_engine::ReduceOp::Bor, dtype: outboard_engine::Datatype::U64 };
        self.on_group(id, |c, p| c.reduce(p, 0, NOTHING, &[], &mut []).and_then(|()| c.bcast(p, 0, &mut [])))
    }

    /// Waits until everything group `id` sends is out and confirmed (before
    /// the port closes, so that no member still waits on this one).
    pub fn bypass_quiesce(&mut self, id: BypassId) -> Result<(), BypassError> {
        self.on_group(id, |c, p| c.quiesce(p))
    }

    /// Group `id`'s counters (the handler's are its driver's).
    pub fn bypass_stats(&self, id: BypassId) -> Option<BypassStats> {
        self.bypass.cores.get(usize::from(id.0)).and_then(Option::as_ref).map(|c| c.stats)
    }

    /// Group `id`'s rank.
    pub fn bypass_rank(&self, id: BypassId) -> Option<u32> {
        self.bypass.cores.get(usize::from(id.0)).and_then(Option::as_ref).map(Core::rank)
    }

    /// Takes the completions and moves every bypass group as far as it
    /// goes now: what the interrupt handler runs. Free of allocation:
    /// completions of other traffic are set aside for the next library
    /// call ([`Port::next_event`]), not handled here.
    pub fn bypass_progress(&mut self) {
        if self.bypass.is_empty() {
            return;
        }
        loop {
            while self.bypass.deferred.len() < self.bypass.deferred.capacity() {
                let Some(e) = self.io.poll_event() else { break };
                if is_bypass(e.op) {
                    self.bypass.on_event(e);
                } else {
                    self.bypass.deferred.push_back(e);
                }
            }
            if !self.bypass_pump() {
                break;
            }
        }
    }

    /// The next completion for the library: one the handler set aside
    /// first, then the engine's.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        self.bypass.deferred.pop_front().or_else(|| self.io.poll_event())
    }

    /// Posts, folds and frees what each group in the set can now; whether
    /// anything changed.
    pub(crate) fn bypass_pump(&mut self) -> bool {
        if self.bypass.cores.is_empty() {
            return false;
        }
        let mut cores = std::mem::take(&mut self.bypass.cores);
        let mut changed = false;
        for c in cores.iter_mut().flatten() {
            changed |= c.pump(self);
        }
        // Nothing attaches while the set is out (pump adds no group).
        self.bypass.cores = cores;
        changed
    }

    /// The library starts work on this port: no interrupts until
    /// [`Port::bypass_leave`] (6.2.3: the flag is off while the library
    /// polls). A store to the port's memory, not a command.
    pub fn bypass_enter(&mut self) {
        self.store_bypass_flag(false);
    }

    /// The library leaves the port: interrupts on, then one more poll, so
    /// that nothing that came while they were off waits for the next call.
    pub fn bypass_leave(&mut self) {
        self.store_bypass_flag(true);
        self.bypass_progress();
    }

    fn store_bypass_flag(&mut self, on: bool) {
        if let Some(word) = self.bypass.flag {
            let _ = self.io.write(word.addr, &u32::from(on).to_ne_bytes());
        }
    }
}
