//! Application-bypass broadcast and reduce-to-root (dissertation chapter
//! 6): host-based trees whose inner members act when a message arrives,
//! not when their application gets round to calling.
//!
//! A value for an inner member travels in a marked message
//! ([`outboard_engine::Command::SendMarked`]); its engine interrupts the
//! process (selective interrupts, the engine's `interrupt` module) unless
//! the port's interrupt flag is off. The runtime delivers the interrupt -
//! a realtime signal to the application thread, or a wake-up of a
//! progress thread - and calls [`Bypass::on_interrupt`], which forwards a
//! broadcast value to the children and keeps it in a bounded temporary
//! slot until the application's [`Bypass::bcast`] copies it out, and folds
//! a reduce's children into the accumulator once this member's own
//! contribution is known (a non-root's [`Bypass::reduce`] returns as soon
//! as its contribution is copied; the rest happens in handlers). Children
//! fold nearest first, whatever order they arrive in - the order of every
//! reduction of the host library, so a float sum is the same from run to
//! run and as the other modes give; a contribution that arrives ahead of
//! its turn leaves its receive slot for room the call set aside.
//!
//! # The lock and the flag (6.2.3)
//!
//! Every call takes the progress lock, stores 0 to the flag (no
//! interrupts while the library polls), does its work, stores 1, polls
//! once more and releases. The handler only *tries* the lock; if the
//! library holds it, the handler sets `missed` and returns. The call, after
//! releasing, re-polls while `missed` was set: the chapter's loop around
//! the progress engine, so a signal that found the library busy is never
//! lost. The engine reads the flag only after it handed the port its
//! completions, so a flag stored just before the last poll cannot hide a
//! delivery either.
//!
//! What the handler runs allocates nothing and takes no lock but the
//! try-lock: fixed slots of DMA-reachable memory, receives kept posted,
//! operation names that say which slot they belong to, a tree computed by
//! iteration. The port's memory accesses take that memory's own
//! short locks, which only the engine thread (another thread) can hold
//! while the handler runs - the library, the only other user on this
//! thread, is excluded by the progress lock.

mod core;
mod set;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use outboard_engine::{Endpoint, GroupId, HostBuf, Reduction};
use thiserror::Error;

pub use self::core::{BcastCall, ReduceCall, MAX_LEN};
pub(crate) use self::core::is_bypass;
pub(crate) use self::set::BypassSet;
pub use self::set::{BypassId, BYPASS_GROUP_FIRST, RECV_BUDGET};
use crate::{HostError, Port, PortIo, Request};

/// Why a bypass call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BypassError {
    /// Larger than the eager limit ([`MAX_LEN`]): a value the application
    /// has not asked for yet cannot go by rendezvous.
    #[error("{len} bytes exceed the application-bypass (eager) limit of {max}")]
    TooLong {
        /// Requested length.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// No such rank (or beyond the tag's 15-bit root field).
    #[error("root {0} is not a member")]
    BadRoot(u32),
    /// The value that arrived is not as long as the call's buffer.
    #[error("expected {expected} bytes, got {got}")]
    LengthMismatch {
        /// The call's length.
        expected: u32,
        /// What arrived.
        got: u32,
    },
    /// This member is not in the member list.
    #[error("this port is not member {0} of the list")]
    NotMember(u32),
    /// The port holds as many bypass groups as operation names can tell
    /// apart.
    #[error("a port holds at most {0} application-bypass groups")]
    TooManyGroups(usize),
    /// Attaching would keep more receives posted than the port's bypass
    /// groups may hold ([`RECV_BUDGET`]).
    #[error("application bypass would keep {asked} more receives posted on this port beside {posted}, beyond its budget of {budget}: free a group that uses it first")]
    ReceiveBudget {
        /// Receives the port's bypass groups keep posted now.
        posted: usize,
        /// What the new group would add.
        asked: usize,
        /// The budget.
        budget: usize,
    },
    /// The bypass group was detached (or is not this port's).
    #[error("no such application-bypass group on this port")]
    NoSuchGroup,
    /// The port or engine failed.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// What a member's bypass traffic and handlers did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BypassStats {
    /// Broadcast values received.
    pub received: u64,
    /// Broadcast values forwarded to children (one per child).
    pub forwarded: u64,
    /// Children's reduce contributions folded.
    pub combined: u64,
    /// Values a call copied out of a temporary slot.
    pub copied_out: u64,
    /// Receive slots added because every slot held a later value.
    pub slots_added: u64,
    /// Interrupts that ran the handler's progress.
    pub handler_runs: u64,
    /// Interrupts that found the library busy (the call re-polled).
    pub handler_busy: u64,
    /// Time the handler's progress took, in total (ns).
    pub handler_ns: u64,
}

/// One process's application-bypass port over a group of members: a
/// port given over to one bypass group (its own collectives' tags; the
/// group id must not also name a [`crate::Group`] of the same port), and
/// the progress lock its interrupt handler tries. Shared with the
/// interrupt handler: hold it in an `Arc`. A port that also runs the
/// program's other traffic holds its bypass groups itself
/// ([`Port::bypass_attach_group`]); its driver then plays this type's
/// part with a lock of its own.
pub struct Bypass<P: PortIo> {
    port: Mutex<Port<P>>,
    id: BypassId,
    missed: AtomicBool,
    handler_runs: AtomicU64,
    handler_busy: AtomicU64,
    handler_ns: AtomicU64,
}

impl<P: PortIo> Bypass<P> {
    /// Takes over `port` for the members `members` (this port is
    /// `members[rank]`), with `slots` temporary slots per kind of
    /// collective (receive) plus `slots` for values this member sends.
    /// Names the port's interrupt flag to the engine and enables it.
    pub fn new(mut port: Port<P>, members: Vec<Endpoint>, rank: u32, group: GroupId, slots: usize) -> Result<Self, BypassError> {
        port.name_bypass_flag()?;
        Bypass::attached(port, members, rank, group, slots)
    }

    /// The first half of [`Bypass::new`] for a driver that cannot block
    /// (the simulator): allocates the port's interrupt flag word and names
    /// it to the engine. Wait for the request, then call
    /// [`Bypass::with_flag`].
    pub fn start_flag(port: &mut Port<P>) -> Result<(HostBuf, Request), BypassError> {
        port.start_bypass_flag()
    }

    /// The second half of [`Bypass::new`]: `word` is the flag
    /// [`Bypass::start_flag`] named, its request completed.
    pub fn with_flag(mut port: Port<P>, word: HostBuf, members: Vec<Endpoint>, rank: u32, group: GroupId, slots: usize) -> Result<Self, BypassError> {
        port.bypass_flag_named(word);
        Bypass::attached(port, members, rank, group, slots)
    }

    fn attached(mut port: Port<P>, members: Vec<Endpoint>, rank: u32, group: GroupId, slots: usize) -> Result<Self, BypassError> {
        let id = port.bypass_attach(group, members, rank, slots)?;
        let b = Bypass {
            port: Mutex::new(port),
            id,
            missed: AtomicBool::new(false),
            handler_runs: AtomicU64::new(0),
            handler_busy: AtomicU64::new(0),
            handler_ns: AtomicU64::new(0),
        };
        let g = b.enter();
        b.leave(g);
        Ok(b)
    }

    fn enter(&self) -> MutexGuard<'_, Port<P>> {
        let mut g = self.port.lock().unwrap_or_else(PoisonError::into_inner);
        g.bypass_enter();
        g
    }

    fn leave(&self, mut g: MutexGuard<'_, Port<P>>) {
        g.bypass_leave();
        drop(g);
        // The lost-signal loop: an interrupt that found the lock held.
        while self.missed.swap(false, Ordering::SeqCst) {
            let mut g = self.port.lock().unwrap_or_else(PoisonError::into_inner);
            g.bypass_progress();
        }
    }

    /// Broadcast from `root` ([`Port::bypass_bcast`]).
    pub fn bcast(&self, root: u32, data: &mut [u8]) -> Result<(), BypassError> {
        let mut g = self.enter();
        let r = g.bypass_bcast(self.id, root, data);
        self.leave(g);
        r
    }

    /// Reduce to `root` ([`Port::bypass_reduce`]).
    pub fn reduce(&self, root: u32, red: Reduction, data: &[u8], out: &mut [u8]) -> Result<(), BypassError> {
        let mut g = self.enter();
        let r = g.bypass_reduce(self.id, root, red, data, out);
        self.leave(g);
        r
    }

    /// A barrier over the members as bypass traffic
    /// ([`Port::bypass_barrier`]).
    pub fn barrier(&self) -> Result<(), BypassError> {
        let mut g = self.enter();
        let r = g.bypass_barrier(self.id);
        self.leave(g);
        r
    }

    /// Waits until everything this member sends is out and confirmed (call
    /// it before dropping, so that no member still waits on this one).
    pub fn quiesce(&self) -> Result<(), BypassError> {
        let mut g = self.enter();
        let r = g.bypass_quiesce(self.id);
        self.leave(g);
        r
    }

    /// The interrupt handler's work: async-signal-safe (a try-lock, then
    /// allocation-free progress). Returns at once if the library is busy;
    /// the library then re-polls before it leaves.
    pub fn on_interrupt(&self) {
        // Noted before the try: a holder that lets the lock go between a
        // failed try and a later note would leave it unserved.
        self.missed.store(true, Ordering::SeqCst);
        let mut g = match self.port.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.handler_busy.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        self.missed.store(false, Ordering::SeqCst);
        let t0 = g.io_ref().now();
        g.bypass_progress();
        let t1 = g.io_ref().now();
        // Counted before the lock goes: `stats` takes it, so a caller
        // that sees what this run did sees the run counted too.
        self.handler_runs.fetch_add(1, Ordering::Relaxed);
        self.handler_ns.fetch_add((t1 - t0).as_nanos() as u64, Ordering::Relaxed);
        drop(g);
    }

    /// Opens a library call that a driver which cannot block (the
    /// simulator, whose processes wait by awaiting) holds across its
    /// waits: the progress lock held and interrupts off until the
    /// [`Held`] is dropped, which leaves as every blocking call does (flag
    /// on, a last poll, the lost-signal loop). The blocking calls are
    /// these steps with the transport's `idle` between them.
    pub fn hold(&self) -> Held<'_, P> {
        Held { b: self, g: Some(self.enter()) }
    }

    /// The counters.
    pub fn stats(&self) -> BypassStats {
        let g = self.port.lock().unwrap_or_else(PoisonError::into_inner);
        BypassStats {
            handler_runs: self.handler_runs.load(Ordering::Relaxed),
            handler_busy: self.handler_busy.load(Ordering::Relaxed),
            handler_ns: self.handler_ns.load(Ordering::Relaxed),
            ..g.bypass_stats(self.id).unwrap_or_default()
        }
    }

    /// This member's rank.
    pub fn rank(&self) -> u32 {
        self.port.lock().unwrap_or_else(PoisonError::into_inner).bypass_rank(self.id).expect("attached for the bypass's life")
    }

    /// Runs `f` as a library call: the progress lock held and interrupts
    /// off. Every other use of the host library in this process (another
    /// port of the same node shares its memory) must run inside it, so
    /// that no handler runs while the library is in the middle of
    /// something - the signal would otherwise find memory locks held by
    /// the very thread it interrupted. Bypass traffic does not move while
    /// `f` runs (the handler is kept out and `f` does not poll it), so `f`
    /// must not wait for a peer that may be waiting on this member's bypass
    /// traffic - a barrier after a non-root's reduce returned would: use
    /// [`Bypass::barrier`] for that.
    pub fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let g = self.enter();
        let r = f();
        self.leave(g);
        r
    }

    /// Runs `f` on the transport with the library's lock held and
    /// interrupts off (statistics, memory of the port's node).
    pub fn with_io<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        let mut g = self.enter();
        let r = f(g.io());
        self.leave(g);
        r
    }
}

/// A library call held open by [`Bypass::hold`].
pub struct Held<'a, P: PortIo> {
    b: &'a Bypass<P>,
    g: Option<MutexGuard<'a, Port<P>>>,
}

impl<P: PortIo> Held<'_, P> {
    fn port(&mut self) -> &mut Port<P> {
        self.g.as_mut().expect("held until dropped")
    }

    /// Starts a broadcast from `root` of a `len`-byte value; step it with
    /// [`Held::bcast_step`].
    pub fn bcast_call(&mut self, root: u32, len: usize) -> Result<BcastCall, BypassError> {
        let id = self.b.id;
        self.port().bypass_bcast_call(id, root, len)
    }

    /// One non-blocking step of `call` ([`Bypass::bcast`]'s semantics for
    /// `data`): true once the call is done. On false, wait until the port
    /// has a completion and step again.
    pub fn bcast_step(&mut self, call: &mut BcastCall, data: &mut [u8]) -> Result<bool, BypassError> {
        let id = self.b.id;
        self.port().bypass_bcast_step(id, call, data)
    }

    /// Moves bypass traffic as a library polling elsewhere would (MPICH's
    /// progress engine handles bypass messages whatever call polls).
    pub fn progress(&mut self) {
        self.port().bypass_progress();
    }

    /// The transport (the driver's own waits need it).
    pub fn io(&mut self) -> &mut P {
        self.port().io()
    }
}

impl<P: PortIo> Drop for Held<'_, P> {
    fn drop(&mut self) {
        if let Some(g) = self.g.take() {
            self.b.leave(g);
        }
    }
}

#[cfg(test)]
mod tests;
