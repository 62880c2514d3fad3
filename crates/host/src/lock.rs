//! A distributed MCS queue lock over atomic remote memory operations
//! (dissertation 5.3, after Mellor-Crummey and Scott).
//!
//! Waiters form a queue; each spins on a flag in its own memory, so a
//! waiting rank sends nothing while it waits, and the lock passes to the
//! next waiter in the order the waiters swapped themselves into the lock
//! word (FIFO). As in the dissertation, pointers are ranks: every rank
//! owns three 64-bit words in a registered region - `next` (the rank that
//! queued behind it), `locked` (set while it waits) and, at the home rank
//! only, `lock` (the last rank to ask) - and every rank holds a table of
//! each rank's (node, port, region, offset). A rank `r` is stored as
//! `r + 1`; 0 is nil.
//!
//! Acquire: set own `next` to nil; swap self into `lock`; if a predecessor
//! came back, set own `locked`, write self into the predecessor's `next`,
//! and poll own `locked` until it is cleared. Release: if own `next` is
//! set, clear the successor's `locked`; otherwise compare-and-swap `lock`
//! from self to nil, and if that fails (a rank has swapped itself in but
//! not yet linked), wait for `next` and then clear the successor's
//! `locked`. Remote words are reached with the engines' atomics; a rank's
//! own words with local atomics, which are atomic with respect to them.
//!
//! Split-phase, as the collectives are: [`McsLock::start_acquire`] and
//! [`McsLock::start_release`] begin, [`McsLock::test`] advances as far as
//! the completions allow without waiting, and the blocking calls loop over
//! it. A driver that cannot block (the simulator) waits between tests in
//! its own way: for a completion while an atomic is under way, by polling
//! memory while [`McsLock::spinning`] (the words a waiter polls are
//! written by the peers' engines, which tell the host nothing).

use outboard_engine::{AtomicOp, AtomicWidth, CommandError, Datatype, Endpoint, HostBuf, ReduceOp, Reduction};
use thiserror::Error;

use crate::atomic_server::HbAtomic;
use crate::coll::Group;
use crate::{HostError, Port, PortIo, RemoteWord, Request};

/// Offset of `next` in a rank's words.
const NEXT: u64 = 0;
/// Offset of `locked`.
const LOCKED: u64 = 8;
/// Offset of `lock` (meaningful at the home rank).
const LOCK: u64 = 16;
/// Bytes of one rank's words.
pub const LOCK_WORDS_LEN: u32 = 24;
const NIL: u64 = 0;

/// Where one rank's lock words are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockSlot {
    /// The rank's port.
    pub ep: Endpoint,
    /// The key of the region holding its words.
    pub key: u64,
    /// Offset of its words inside the region.
    pub offset: u64,
}

/// Why a lock call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LockError {
    /// `acquire` or `try_lock` while this rank holds the lock.
    #[error("this rank already holds the lock")]
    AlreadyHeld,
    /// `release` while this rank does not hold it.
    #[error("this rank does not hold the lock")]
    NotHeld,
    /// A start while another operation on the lock is under way on this
    /// rank (split-phase calls not yet tested to the end): any start but
    /// an acquire's again during an acquire.
    #[error("another acquire, try or release of this lock is under way on this rank")]
    Busy,
    /// A lock word held something that is not a rank of the table
    /// (the memory was written by something else).
    #[error("lock word holds {0}, not a rank")]
    Corrupt(u64),
    /// The table does not name this rank or the home rank.
    #[error("rank {rank} or home {home} outside a table of {len}")]
    BadTable {
        /// This rank.
        rank: u32,
        /// The home rank.
        home: u32,
        /// Table length.
        len: usize,
    },
    /// An operation underneath failed.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Where an acquire, a try or a release stands: what its last atomic was
/// (its old value ends the step), or which own word it polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Acquire: swapped this rank into the home's `lock`.
    SwapIn,
    /// Acquire: wrote this rank into its predecessor's `next`.
    Link,
    /// Acquire: polls own `locked` until the predecessor clears it.
    AwaitHandOver,
    /// Try: compared-and-swapped this rank into a nil `lock`.
    Try,
    /// Release: compared-and-swapped the home's `lock` from this rank to
    /// nil.
    Free,
    /// Release: polls own `next` until the rank that swapped itself in
    /// links itself.
    AwaitLink,
    /// Release: cleared the successor's `locked`.
    HandOver,
}

/// A remote atomic under way.
#[derive(Debug)]
enum Pending {
    /// Not started yet: the port had no token for it; started on a later
    /// test.
    Unstarted { rank: u32, at: u64, op: AtomicOp },
    /// Performed by the word's engine.
    Engine(Request),
    /// Performed by the word's host-based server; what it performs, so
    /// that a request the port had no send token for starts again.
    Server { a: HbAtomic, rank: u32, at: u64, op: AtomicOp },
}

/// One rank's handle on a distributed MCS lock.
#[derive(Debug)]
pub struct McsLock {
    table: Vec<LockSlot>,
    rank: u32,
    home: u32,
    words: HostBuf,
    key: u64,
    held: bool,
    /// The operation under way, if any.
    step: Option<Step>,
    /// The remote atomic of `step`, until it completes.
    pending: Option<Pending>,
    /// The old value that ends `step`, once there.
    value: Option<u64>,
    queued_behind: Option<u32>,
    /// Host-based: each rank's atomic server, which performs the
    /// operations on its words instead of its engine.
    servers: Option<Vec<Endpoint>>,
}

impl McsLock {
    /// Allocates and registers this rank's words (zeroed); returns them,
    /// their key, and the slot the other ranks need in their tables.
    pub fn prepare<P: PortIo>(port: &mut Port<P>) -> Result<(HostBuf, u64, LockSlot), HostError> {
        let words = port.buffer(LOCK_WORDS_LEN)?;
        let key = port.register(words)?;
        Ok((words, key, LockSlot { ep: port.endpoint(), key, offset: 0 }))
    }

    /// A lock from an agreed table (entry `i` is rank `i`'s slot) and this
    /// rank's words from [`McsLock::prepare`].
    pub fn from_table(table: Vec<LockSlot>, rank: u32, home: u32, words: HostBuf, key: u64) -> Result<McsLock, LockError> {
        if rank as usize >= table.len() || home as usize >= table.len() {
            return Err(LockError::BadTable { rank, home, len: table.len() });
        }
        Ok(McsLock { table, rank, home, words, key, held: false, step: None, pending: None, value: None, queued_behind: None, servers: None })
    }
    /// Creates the lock collectively over `group` (every member calls it,
    /// with the same `home`): each member prepares its words and the
    /// members exchange their slots with an allreduce (a bitwise-or of
    /// tables each filled in at its own rank).
    pub fn create<P: PortIo>(port: &mut Port<P>, group: &mut Group, home: u32) -> Result<McsLock, LockError> {
        let (words, key, slot) = Self::prepare(port)?;
        let n = group.size() as usize;
        let rank = group.rank();
        let mut mine = vec![0u8; n * 16];
        mine[rank as usize * 16..][..8].copy_from_slice(&slot.key.to_ne_bytes());
        mine[rank as usize * 16 + 8..][..8].copy_from_slice(&slot.offset.to_ne_bytes());
        let d = group.defaults();
        let bor = Reduction { op: ReduceOp::Bor, dtype: Datatype::U64 };
        let all = port.allreduce(group, d.mode, d.allreduce, bor, &mine)?;
        let word = |i: usize| u64::from_ne_bytes(all[i * 8..][..8].try_into().expect("8 bytes"));
        let table =
            group.members().iter().enumerate().map(|(i, ep)| LockSlot { ep, key: word(2 * i), offset: word(2 * i + 1) }).collect();
        Self::from_table(table, rank, home, words, key)
    }

    /// The same lock over host-based atomics, for comparison (5.4.2):
    /// `servers[i]` is the port of rank `i`'s
    /// [`AtomicServer`](crate::atomic_server::AtomicServer), which must
    /// expose that rank's words under their key. This rank's own words are
    /// still reached with local atomics.
    pub fn over_servers(mut self, servers: Vec<Endpoint>) -> Result<McsLock, LockError> {
        if servers.len() != self.table.len() {
            return Err(LockError::BadTable { rank: self.rank, home: self.home, len: servers.len() });
        }
        self.servers = Some(servers);
        Ok(self)
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Whether this rank holds the lock (given up as soon as a release
    /// starts).
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// The rank this rank queued behind in its last acquire (`None` if the
    /// lock was free): the lock is FIFO when each holder's predecessor is
    /// the holder before it.
    pub fn queued_behind(&self) -> Option<u32> {
        self.queued_behind
    }

    /// This rank's words and their key (for tests and for freeing).
    pub fn words(&self) -> (HostBuf, u64) {
        (self.words, self.key)
    }

    fn me(&self) -> u64 {
        u64::from(self.rank) + 1
    }

    /// Enters `step` with `op` on word `at` of `rank`'s words: performed
    /// at once for this rank's own (a local atomic), started through the
    /// engines (or the rank's server) otherwise - or on a later test, if
    /// the port has no token for it now. On an error the lock is as
    /// before (no step under way).
    fn go<P: PortIo>(&mut self, port: &mut Port<P>, step: Step, rank: u32, at: u64, op: AtomicOp) -> Result<(), HostError> {
        let started = if rank == self.rank {
            port.local_atomic(self.words, at, AtomicWidth::W64, op).map(|v| {
                self.value = Some(v);
                None
            })
        } else {
            self.start(port, rank, at, op).map(Some)
        };
        match started {
            Ok(pending) => {
                self.pending = pending;
                self.step = Some(step);
                Ok(())
            }
            Err(e) => {
                self.step = None;
                Err(e)
            }
        }
    }

    /// Starts `op` on word `at` of `rank`'s words (another rank's).
    fn start<P: PortIo>(&self, port: &mut Port<P>, rank: u32, at: u64, op: AtomicOp) -> Result<Pending, HostError> {
        let s = self.table[rank as usize];
        let r = match &self.servers {
            Some(servers) => port.start_hb_atomic(servers[rank as usize], s.key, s.offset + at, AtomicWidth::W64, op).map(|a| Pending::Server { a, rank, at, op }),
            None => port.start_atomic(RemoteWord { ep: s.ep, key: s.key, offset: s.offset + at, width: AtomicWidth::W64 }, op).map(Pending::Engine),
        };
        match r {
            // Tokens come back as operations complete: not an error.
            Err(HostError::Command(CommandError::NoSendToken | CommandError::NoRecvToken)) => Ok(Pending::Unstarted { rank, at, op }),
            r => r,
        }
    }

    /// The old value that ends the current step, if its atomic is done.
    fn step_value<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<Option<u64>, HostError> {
        if let Some(v) = self.value.take() {
            return Ok(Some(v));
        }
        if let Some(Pending::Unstarted { rank, at, op }) = self.pending {
            self.pending = Some(self.start(port, rank, at, op)?);
        }
        let done = match self.pending.as_mut() {
            Some(Pending::Engine(r)) => port.test(*r).map(|c| c.map(crate::atomic::value_of)),
            Some(Pending::Server { a, .. }) => port.test_hb_atomic(a),
            Some(Pending::Unstarted { .. }) | None => None,
        };
        let Some(v) = done else { return Ok(None) };
        if let (Err(HostError::Command(CommandError::NoSendToken)), Some(Pending::Server { rank, at, op, .. })) = (&v, &self.pending) {
            // The request never left (its send found no token): the
            // server did nothing, so it starts again on a later test, as
            // an engine atomic without a token does.
            self.pending = Some(Pending::Unstarted { rank: *rank, at: *at, op: *op });
            return Ok(None);
        }
        self.pending = None;
        v.map(Some)
    }

    /// One of this rank's own words, read in place.
    fn own<P: PortIo>(&self, port: &Port<P>, at: u64) -> Result<u64, HostError> {
        let mut b = [0u8; 8];
        port.io_ref().read(self.words.addr + at, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// The rank a non-nil word names.
    fn rank_in(&self, v: u64) -> Result<u32, LockError> {
        match u32::try_from(v.wrapping_sub(1)) {
            Ok(r) if v != NIL && (r as usize) < self.table.len() => Ok(r),
            _ => Err(LockError::Corrupt(v)),
        }
    }

    /// Starts acquiring the lock; [`McsLock::test`] says when this rank
    /// holds it. Starting again while an acquire is under way goes on with
    /// that one.
    pub fn start_acquire<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        match self.step {
            _ if self.held => return Err(LockError::AlreadyHeld),
            Some(Step::SwapIn | Step::Link | Step::AwaitHandOver) => return Ok(()),
            Some(_) => return Err(LockError::Busy),
            None => {}
        }
        self.queued_behind = None;
        port.local_atomic(self.words, NEXT, AtomicWidth::W64, AtomicOp::Swap(NIL))?;
        self.go(port, Step::SwapIn, self.home, LOCK, AtomicOp::Swap(self.me()))?;
        Ok(())
    }

    /// Starts taking the lock if nobody holds or awaits it;
    /// [`McsLock::test`] says when the answer is in ([`McsLock::is_held`]).
    pub fn start_try<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        if self.held {
            return Err(LockError::AlreadyHeld);
        }
        if self.step.is_some() {
            return Err(LockError::Busy);
        }
        self.queued_behind = None;
        port.local_atomic(self.words, NEXT, AtomicWidth::W64, AtomicOp::Swap(NIL))?;
        self.go(port, Step::Try, self.home, LOCK, AtomicOp::CompareSwap { compare: NIL, new: self.me() })?;
        Ok(())
    }

    /// Starts releasing the lock, handing it to the next waiter if there
    /// is one; [`McsLock::test`] says when it is done.
    pub fn start_release<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        if self.step.is_some() {
            return Err(LockError::Busy);
        }
        if !self.held {
            return Err(LockError::NotHeld);
        }
        match self.own(port, NEXT)? {
            NIL => self.go(port, Step::Free, self.home, LOCK, AtomicOp::CompareSwap { compare: self.me(), new: NIL })?,
            next => {
                let succ = self.rank_in(next)?;
                self.go(port, Step::HandOver, succ, LOCKED, AtomicOp::Swap(0))?;
            }
        }
        // Given up from here on (still held if the release could not
        // start): the successor may hold it before this release's last
        // atomic completes.
        self.held = false;
        Ok(())
    }

    /// Advances the operation under way as far as its completions allow,
    /// without waiting: `true` once it is done (and when none is under
    /// way). On an error the operation is abandoned.
    pub fn test<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        let r = self.advance(port);
        if r.is_err() {
            self.step = None;
            self.pending = None;
            self.value = None;
        }
        r
    }

    fn advance<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        loop {
            let Some(step) = self.step else { return Ok(true) };
            match step {
                Step::AwaitHandOver => {
                    port.progress();
                    if self.own(port, LOCKED)? != 0 {
                        return Ok(false);
                    }
                    self.held = true;
                    self.step = None;
                    continue;
                }
                Step::AwaitLink => {
                    port.progress();
                    let next = self.own(port, NEXT)?;
                    if next == NIL {
                        return Ok(false);
                    }
                    let succ = self.rank_in(next)?;
                    self.go(port, Step::HandOver, succ, LOCKED, AtomicOp::Swap(0))?;
                    continue;
                }
                _ => {}
            }
            let Some(old) = self.step_value(port)? else { return Ok(false) };
            self.step = None;
            match step {
                Step::SwapIn if old == NIL => self.held = true,
                Step::SwapIn => {
                    let pred = self.rank_in(old)?;
                    self.queued_behind = Some(pred);
                    // Set before linking: the predecessor may release as
                    // soon as it sees the link.
                    port.local_atomic(self.words, LOCKED, AtomicWidth::W64, AtomicOp::Swap(1))?;
                    self.go(port, Step::Link, pred, NEXT, AtomicOp::Swap(self.me()))?;
                }
                Step::Link => self.step = Some(Step::AwaitHandOver),
                Step::Try => self.held = old == NIL,
                // Nobody queued: the lock is free.
                Step::Free if old == self.me() => {}
                // A rank swapped itself in after us and is about to link.
                Step::Free => self.step = Some(Step::AwaitLink),
                Step::HandOver => {}
                Step::AwaitHandOver | Step::AwaitLink => unreachable!("polling steps end above"),
            }
        }
    }

    /// Whether the operation under way waits on one of this rank's own
    /// words, which the peers' engines write without telling this host: a
    /// driver between tests polls memory then, rather than waiting for a
    /// completion.
    pub fn spinning(&self) -> bool {
        matches!(self.step, Some(Step::AwaitHandOver | Step::AwaitLink))
    }

    /// Tests until the operation under way is done, driving the port.
    fn finish<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        while !self.test(port)? {
            port.io().idle();
        }
        Ok(())
    }

    /// Blocks until this rank holds the lock.
    pub fn acquire<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        self.start_acquire(port)?;
        self.finish(port)
    }

    /// Takes the lock if nobody holds or awaits it; never waits for a
    /// holder (only for its own atomic).
    pub fn try_lock<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        self.start_try(port)?;
        self.finish(port)?;
        Ok(self.held)
    }

    /// Releases the lock, handing it to the next waiter if there is one.
    pub fn release<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        self.start_release(port)?;
        self.finish(port)
    }
}
