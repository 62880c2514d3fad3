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

use outboard_engine::{AtomicOp, AtomicWidth, Datatype, Endpoint, HostBuf, ReduceOp, Reduction};
use thiserror::Error;

use crate::coll::Group;
use crate::{HostError, Port, PortIo, RemoteWord};

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

/// One rank's handle on a distributed MCS lock.
#[derive(Debug)]
pub struct McsLock {
    table: Vec<LockSlot>,
    rank: u32,
    home: u32,
    words: HostBuf,
    key: u64,
    held: bool,
    /// Queued behind another rank, waiting for its hand-over.
    waiting: bool,
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
        Ok(McsLock { table, rank, home, words, key, held: false, waiting: false, queued_behind: None, servers: None })
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

    /// Whether this rank holds the lock.
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

    /// `op` on word `at` of `rank`'s words: locally for this rank's own,
    /// through the engines otherwise.
    fn on<P: PortIo>(&self, port: &mut Port<P>, rank: u32, at: u64, op: AtomicOp) -> Result<u64, HostError> {
        if rank == self.rank {
            return port.local_atomic(self.words, at, AtomicWidth::W64, op);
        }
        let s = self.table[rank as usize];
        if let Some(servers) = &self.servers {
            return port.hb_atomic(servers[rank as usize], s.key, s.offset + at, AtomicWidth::W64, op);
        }
        port.atomic(RemoteWord { ep: s.ep, key: s.key, offset: s.offset + at, width: AtomicWidth::W64 }, op)
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

    /// Waits until one of this rank's own words satisfies `done`, driving
    /// the port meanwhile.
    fn poll_own<P: PortIo>(&self, port: &mut Port<P>, at: u64, done: impl Fn(u64) -> bool) -> Result<u64, HostError> {
        loop {
            let v = self.own(port, at)?;
            if done(v) {
                return Ok(v);
            }
            port.progress();
            port.io().idle();
        }
    }

    /// Blocks until this rank holds the lock.
    pub fn acquire<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        if !self.enqueue(port)? {
            self.poll_own(port, LOCKED, |v| v == 0)?;
            self.took_over();
        }
        Ok(())
    }

    /// Joins the lock's queue: `true` when the lock is this rank's at
    /// once, `false` when its predecessor still holds it and this rank
    /// must wait for the hand-over ([`McsLock::handed_over`]). Split so
    /// that a caller can wait without blocking the port for others (the C
    /// ABI's other threads).
    pub fn enqueue<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        if self.held {
            return Err(LockError::AlreadyHeld);
        }
        if self.waiting {
            return Ok(false);
        }
        let me = self.me();
        self.on(port, self.rank, NEXT, AtomicOp::Swap(NIL))?;
        let pred = self.on(port, self.home, LOCK, AtomicOp::Swap(me))?;
        self.queued_behind = None;
        if pred == NIL {
            self.held = true;
            return Ok(true);
        }
        let pred = self.rank_in(pred)?;
        self.queued_behind = Some(pred);
        // Set before linking: the predecessor may release as soon as it
        // sees the link.
        self.on(port, self.rank, LOCKED, AtomicOp::Swap(1))?;
        self.on(port, pred, NEXT, AtomicOp::Swap(me))?;
        self.waiting = true;
        Ok(false)
    }

    /// After [`McsLock::enqueue`] said to wait: whether the predecessor
    /// has handed the lock over (one look at this rank's own word, after
    /// driving the port once). Then this rank holds it.
    pub fn handed_over<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        if self.held {
            return Ok(true);
        }
        if !self.waiting {
            return Err(LockError::NotHeld);
        }
        port.progress();
        if self.own(port, LOCKED)? != 0 {
            return Ok(false);
        }
        self.took_over();
        Ok(true)
    }

    fn took_over(&mut self) {
        self.held = true;
        self.waiting = false;
    }

    /// Takes the lock if nobody holds or awaits it; never waits.
    pub fn try_lock<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, LockError> {
        if self.held {
            return Err(LockError::AlreadyHeld);
        }
        self.on(port, self.rank, NEXT, AtomicOp::Swap(NIL))?;
        let old = self.on(port, self.home, LOCK, AtomicOp::CompareSwap { compare: NIL, new: self.me() })?;
        self.held = old == NIL;
        self.queued_behind = None;
        Ok(self.held)
    }

    /// Releases the lock, handing it to the next waiter if there is one.
    pub fn release<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), LockError> {
        if !self.held {
            return Err(LockError::NotHeld);
        }
        let mut next = self.own(port, NEXT)?;
        if next == NIL {
            let me = self.me();
            let old = self.on(port, self.home, LOCK, AtomicOp::CompareSwap { compare: me, new: NIL })?;
            if old == me {
                self.held = false;
                return Ok(());
            }
            // A rank swapped itself in after us and is about to link.
            next = self.poll_own(port, NEXT, |v| v != NIL)?;
        }
        let succ = self.rank_in(next)?;
        self.on(port, succ, LOCKED, AtomicOp::Swap(0))?;
        self.held = false;
        Ok(())
    }
}
