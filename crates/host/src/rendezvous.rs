//! Rendezvous: large tagged messages moved zero-copy by RDMA read.
//!
//! Below the eager threshold a tagged send is one engine message: its bytes
//! land straight in a posted receive, or wait in the receiving engine's
//! unexpected pool (a copy in, a copy out) until one is posted. Above it the
//! sender registers its buffer and sends an *announcement*
//! ([`Command::Announce`]): a small message, matched like any tagged
//! message and in the same stream order, that names the buffer's key, offset
//! and length. The receiving library, once a receive took the announcement,
//! pulls the payload with one RDMA read straight into the receive's buffer
//! (the engine streams the response over its reliable window: pipelined,
//! not a request per packet) and answers with a *finish*, a message under a
//! library tag ([`LIBRARY_TAG_PREFIX`]) that no application receive can
//! take. The sender's request completes when the finish arrives: from then
//! on its buffer is its own again. No byte of the payload is copied on
//! either side outside the two DMA transfers.
//!
//! This is the read-based protocol (MVAPICH's "RGET", UCX's `get_zcopy`),
//! the default. Its alternative - the receiver answers with a clear-to-send
//! naming its buffer and the sender RDMA-writes, then sends a finish - is
//! in [`write`], selected by [`RendezvousConfig::protocol`]; a receiver
//! takes either kind of announcement whatever its own setting.
//!
//! Buffers are registered through a bounded cache ([`RegCache`]): repeated
//! sends from the same buffer register once; entries not in use are
//! deregistered least recently used first, and freeing or deregistering a
//! buffer drops its entries, so a key never outlives its memory.
//!
//! Failure: the sender's finish receive names the receiver, so the engine's
//! keepalive probes it and a dead receiver fails the send
//! (`PeerUnreachable`); the receiver's read fails the receive the same way
//! if the sender dies mid-transfer.

use std::collections::VecDeque;

use outboard_engine::{Command, CommandError, Completion, Endpoint, HostBuf, OpError, OpId, RecvMatch, LIBRARY_TAG_PREFIX};
use rustc_hash::FxHashMap;

use crate::{HostError, Port, PortIo, Request};

pub mod write;
pub use write::RendezvousProtocol;

/// Bytes of an announcement: magic, length, key, offset, cookie.
pub const ANNOUNCE_LEN: u32 = 32;
/// Bytes of a finish: a status word.
const FINISH_LEN: u32 = 8;
const ANNOUNCE_MAGIC: u32 = 0x5254_5331; // "RTS1"
/// Library tags of finishes: the prefix, a kind byte, then the cookie.
const FINISH_TAG: u64 = LIBRARY_TAG_PREFIX | 0x00F1_0000_0000_0000;
const STATUS_OK: u32 = 0;
const STATUS_READ_FAILED: u32 = 1;

/// How a port moves large tagged messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RendezvousConfig {
    /// Messages longer than this many bytes go by rendezvous; `None` sends
    /// every message eagerly. (Receiving announcements works either way.)
    pub threshold: Option<u32>,
    /// Most registrations the cache keeps that no send is using.
    pub cache_entries: usize,
    /// Which protocol this port's rendezvous sends use.
    pub protocol: RendezvousProtocol,
}

impl Default for RendezvousConfig {
    fn default() -> Self {
        RendezvousConfig { threshold: None, cache_entries: 64, protocol: RendezvousProtocol::Read }
    }
}

/// What the rendezvous path did, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RendezvousStats {
    /// Messages this port sent by rendezvous.
    pub sends: u64,
    /// Rendezvous messages this port received (their data read).
    pub receives: u64,
    /// Payload bytes pulled by RDMA read straight into receive buffers.
    pub bytes_read: u64,
    /// Buffers the registration cache already held: sends' (read
    /// protocol) and receives' (write protocol).
    pub cache_hits: u64,
    /// Payload bytes this port RDMA-wrote straight into receive buffers
    /// (write protocol).
    pub bytes_written: u64,
    /// Sends or receives that had to register their buffer.
    pub cache_misses: u64,
    /// Cache entries deregistered to stay within the bound.
    pub cache_evictions: u64,
}

/// A registration the cache holds.
#[derive(Debug, Clone, Copy)]
struct CacheEntry {
    addr: u64,
    len: u32,
    key: u64,
    /// Rendezvous sends under way from it.
    uses: u32,
    /// Registered by the application (`Port::register`): never evicted,
    /// removed only by its deregistration.
    explicit: bool,
    /// Its memory was freed while a send still used it: deregister at the
    /// last release.
    stale: bool,
    last_used: u64,
}

/// Registrations of buffers that rendezvous sends read from, bounded.
#[derive(Debug, Default)]
pub(crate) struct RegCache {
    entries: Vec<CacheEntry>,
    tick: u64,
}

impl RegCache {
    /// The key and offset of a registration covering `buf`, counted as in use.
    fn acquire(&mut self, buf: HostBuf) -> Option<(u64, u64)> {
        self.tick += 1;
        let tick = self.tick;
        let end = buf.addr + u64::from(buf.len);
        let e = self
            .entries
            .iter_mut()
            .find(|e| !e.stale && e.addr <= buf.addr && end <= e.addr + u64::from(e.len))?;
        e.uses += 1;
        e.last_used = tick;
        Some((e.key, buf.addr - e.addr))
    }

    fn insert(&mut self, buf: HostBuf, key: u64, explicit: bool) {
        self.tick += 1;
        let uses = u32::from(!explicit);
        self.entries.push(CacheEntry { addr: buf.addr, len: buf.len, key, uses, explicit, stale: false, last_used: self.tick });
    }

    /// A send from `key` finished; returns the key if it must now be
    /// deregistered (its memory was freed meanwhile).
    fn release(&mut self, key: u64) -> Option<u64> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        let e = &mut self.entries[i];
        e.uses = e.uses.saturating_sub(1);
        if e.stale && e.uses == 0 {
            self.entries.swap_remove(i);
            return Some(key);
        }
        None
    }

    /// Keys to deregister so that at most `cap` unused, cached (not
    /// explicit) entries stay: least recently used first.
    fn evict(&mut self, cap: usize) -> Vec<u64> {
        let mut out = Vec::new();
        loop {
            let idle = self.entries.iter().filter(|e| !e.explicit && e.uses == 0).count();
            if idle <= cap {
                return out;
            }
            let (i, _) = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !e.explicit && e.uses == 0)
                .min_by_key(|(_, e)| e.last_used)
                .expect("counted above");
            out.push(self.entries.swap_remove(i).key);
        }
    }

    /// `buf` is being freed: keys of cached registrations inside it to
    /// deregister now (unused ones); used ones are marked and go at release.
    fn invalidate(&mut self, buf: HostBuf) -> Vec<u64> {
        let (lo, hi) = (buf.addr, buf.addr + u64::from(buf.len));
        let mut out = Vec::new();
        self.entries.retain_mut(|e| {
            let overlaps = e.addr < hi && lo < e.addr + u64::from(e.len);
            if !overlaps || e.explicit {
                return true;
            }
            if e.uses == 0 {
                out.push(e.key);
                return false;
            }
            e.stale = true;
            true
        });
        out
    }

    /// The application withdrew `key`: forget it (the caller deregisters).
    fn forget(&mut self, key: u64) {
        self.entries.retain(|e| e.key != key);
    }
}

/// A rendezvous send under way.
#[derive(Debug)]
struct SendState {
    /// The announcement and the finish receive, once posted (after the
    /// registration, if the buffer needed one).
    rts_op: Option<OpId>,
    fin_op: Option<OpId>,
    rts_buf: HostBuf,
    fin_buf: HostBuf,
    /// The registration it reads from, once known.
    key: Option<u64>,
    rts_done: bool,
    fin_done: bool,
    /// The first failure, reported once both halves are in.
    error: Option<OpError>,
    /// Where its bytes lie (key, offset) once registered, while its
    /// announcement is held back.
    ready: Option<(u64, u64)>,
}

/// A receive that took an announcement and is reading the payload.
#[derive(Debug, Clone, Copy)]
struct ReadState {
    user: OpId,
    src: Endpoint,
    tag: u64,
    /// The announced length (may exceed what is read: truncation).
    len: u32,
    /// What the receive's buffer holds.
    cap: u32,
    cookie: u32,
}

/// A receive the library watches for announcements: its buffer.
#[derive(Debug, Clone, Copy)]
struct RecvSlot {
    buf: HostBuf,
}

impl Rendezvous {
    /// The keys the registration cache holds.
    #[cfg(test)]
    pub(crate) fn cached_keys(&self) -> Vec<u64> {
        self.cache.entries.iter().map(|e| e.key).collect()
    }
}

/// Where a rendezvous send goes, kept while its buffer is registered.
#[derive(Debug, Clone, Copy)]
struct SendTo {
    user: OpId,
    dest: Endpoint,
    tag: u64,
    buf: HostBuf,
    cookie: u32,
}

/// A send held back in [`Rendezvous::held`].
#[derive(Debug, Clone, Copy)]
enum Held {
    /// An application's command, its request already handed out.
    Command(Command),
    /// A rendezvous send's announcement, sent once its buffer is
    /// registered.
    Announce(SendTo),
}

/// Whether a command sends a tagged message (the commands whose order
/// the non-overtaking rule is about).
fn sends_message(cmd: &Command) -> bool {
    matches!(cmd, Command::Send { .. } | Command::SendMarked { .. } | Command::Announce { .. } | Command::MultiSend { .. })
}

/// What an engine operation of the library's own is for.
#[derive(Debug, Clone, Copy)]
enum LibOp {
    /// Registering the buffer of a send.
    Register(SendTo),
    /// The announcement of the send whose user request is this.
    Announce(OpId),
    /// The finish receive of that send.
    Finish(OpId),
    /// The read of a receive.
    Read(ReadState),
    /// A finish being sent: free its buffer when done. While it waits in
    /// the retry queue it carries the receive's result: the receive
    /// completes only once its finish is with the engine, so that an
    /// application that leaves the library after its receive does not
    /// leave the sender waiting on a finish nobody will post.
    FinishSent(HostBuf, Option<(OpId, Result<Completion, OpError>)>),
    /// An operation of the write protocol.
    W(write::WOp),
    /// Nothing waits for it (a cancel, a deregistration, a withdrawn
    /// receive): free `buf` if there is one.
    Discard(Option<HostBuf>),
}

/// The rendezvous state of one port.
#[derive(Debug, Default)]
pub(crate) struct Rendezvous {
    pub(crate) cfg: RendezvousConfig,
    pub(crate) stats: RendezvousStats,
    cache: RegCache,
    next_cookie: u32,
    // Fx hash maps (never iterated in an order that matters): every
    // completion of the port is looked up in `lib` and `recvs`.
    sends: FxHashMap<OpId, SendState>,
    recvs: FxHashMap<OpId, RecvSlot>,
    lib: FxHashMap<OpId, LibOp>,
    /// Library commands refused for want of a token, with what they serve.
    retry: VecDeque<(Command, LibOp)>,
    /// The application's sends held back, in the order it started them,
    /// behind a rendezvous announcement that waits for its buffer's
    /// registration (or behind library commands waiting for a token): a
    /// later send must not overtake an earlier one that a receive could
    /// take too (MPI's non-overtaking rule), and the engine sends in the
    /// order it is given.
    held: VecDeque<Held>,
    /// The write protocol's sends and receives.
    w: write::WriteState,
}

fn encode_announce(len: u32, key: u64, offset: u64, cookie: u32) -> [u8; ANNOUNCE_LEN as usize] {
    let mut b = [0u8; ANNOUNCE_LEN as usize];
    b[0..4].copy_from_slice(&ANNOUNCE_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b[8..16].copy_from_slice(&key.to_le_bytes());
    b[16..24].copy_from_slice(&offset.to_le_bytes());
    b[24..28].copy_from_slice(&cookie.to_le_bytes());
    b
}

/// An announcement's (length, key, offset, cookie), if well formed.
fn decode_announce(b: &[u8]) -> Option<(u32, u64, u64, u32)> {
    if b.len() < ANNOUNCE_LEN as usize || b[0..4] != ANNOUNCE_MAGIC.to_le_bytes() {
        return None;
    }
    let word = |r: std::ops::Range<usize>| -> u64 {
        let mut w = [0u8; 8];
        w[..r.len()].copy_from_slice(&b[r]);
        u64::from_le_bytes(w)
    };
    Some((word(4..8) as u32, word(8..16), word(16..24), word(24..28) as u32))
}

impl<P: PortIo> Port<P> {
    /// Sets how this port sends large messages (see [`RendezvousConfig`]).
    pub fn set_rendezvous(&mut self, cfg: RendezvousConfig) {
        self.rndv.cfg = cfg;
    }

    /// How this port sends large messages.
    pub fn rendezvous(&self) -> RendezvousConfig {
        self.rndv.cfg
    }

    /// What the rendezvous path did so far.
    pub fn rendezvous_stats(&self) -> RendezvousStats {
        self.rndv.stats
    }

    /// Whether a send of `len` bytes goes by rendezvous.
    pub(crate) fn by_rendezvous(&self, len: u32) -> bool {
        self.rndv.cfg.threshold.is_some_and(|t| len > t)
    }

    /// Posts a library command the port needs done whatever happens (a
    /// read, a finish, a cleanup): queued and retried at the next progress
    /// if no token is free now.
    fn post_lib_or_queue(&mut self, cmd: Command, what: LibOp) -> OpId {
        let op = self.fresh_op();
        let cmd = with_op(cmd, op);
        // Behind anything already queued, so commands keep their order.
        if !self.rndv.retry.is_empty() {
            self.rndv.retry.push_back((cmd, what));
            return op;
        }
        match self.io.post(cmd) {
            Ok(()) => self.posted(op, what),
            Err(CommandError::NoSendToken | CommandError::NoRecvToken) => self.rndv.retry.push_back((cmd, what)),
            // Refused for good (the port closed, a bad length): what it
            // served fails now rather than waiting for a token forever.
            Err(e) => self.lib_event(what, Err(OpError::Refused(e))),
        }
        op
    }

    /// A library command is with the engine: remember what it serves, and
    /// release a receive's result that waited for its finish to go.
    fn posted(&mut self, op: OpId, what: LibOp) {
        let what = match what {
            LibOp::FinishSent(b, Some((user, result))) => {
                self.finish_user(user, result);
                LibOp::FinishSent(b, None)
            }
            other => other,
        };
        self.rndv.lib.insert(op, what);
    }

    /// Whether the rendezvous send `req` still needs this library before
    /// its peer can finish it: its buffer's registration has not come back
    /// or its announcement waits for a token (read protocol), or its
    /// clear-to-send has not been answered with the data (write protocol). Until then nothing has left
    /// for the receiver, so a caller that returns to the application (a
    /// blocking collective whose last sends are still under way) must
    /// first drive the port; after it, the engine serves the receiver's
    /// read on its own.
    pub(crate) fn rndv_send_needs_host(&self, req: Request) -> bool {
        let read = self.rndv.sends.get(&req.0).is_some_and(|s| match s.rts_op {
            None => true,
            Some(op) => !s.rts_done && !self.rndv.lib.contains_key(&op),
        });
        read || self.write_send_needs_host(req)
    }

    /// Retries library commands that found no token.
    /// Sends what was held back, in order, as far as announcements are
    /// registered and no library command waits for a token before it.
    pub(crate) fn release_held(&mut self) {
        while let Some(&front) = self.rndv.held.front() {
            if !self.rndv.retry.is_empty() {
                return;
            }
            match front {
                Held::Announce(to) => match self.rndv.sends.get(&to.user).map(|s| s.ready) {
                    Some(None) => return,
                    Some(Some((key, offset))) => {
                        self.rndv.held.pop_front();
                        self.announce(to, key, offset);
                    }
                    // Abandoned (its registration failed).
                    None => {
                        self.rndv.held.pop_front();
                    }
                },
                Held::Command(cmd) => match self.io.post(cmd) {
                    Ok(()) => {
                        self.rndv.held.pop_front();
                    }
                    Err(CommandError::NoSendToken | CommandError::NoRecvToken) => return,
                    Err(e) => {
                        self.rndv.held.pop_front();
                        if let Some(slot) = self.pending.get_mut(&cmd.op()) {
                            *slot = Some(Err(OpError::Refused(e)));
                        }
                    }
                },
            }
        }
    }

    /// Holds an application's command back behind earlier sends that wait
    /// (see [`Rendezvous::held`]); `false`: nothing waits, post it.
    pub(crate) fn hold_behind_earlier_sends(&mut self, cmd: Command) -> bool {
        if !sends_message(&cmd) || (self.rndv.held.is_empty() && self.rndv.retry.is_empty()) {
            return false;
        }
        self.rndv.held.push_back(Held::Command(cmd));
        true
    }

    /// Cancels an application's send still held back: `None` when `op`
    /// is not one.
    pub(crate) fn cancel_held(&mut self, op: OpId) -> Option<()> {
        let i = self.rndv.held.iter().position(|h| matches!(h, Held::Command(c) if c.op() == op))?;
        self.rndv.held.remove(i);
        if let Some(slot) = self.pending.get_mut(&op) {
            *slot = Some(Err(OpError::Cancelled));
        }
        Some(())
    }

    pub(crate) fn rndv_retry(&mut self) {
        for _ in 0..self.rndv.retry.len() {
            let Some((cmd, what)) = self.rndv.retry.pop_front() else { break };
            let op = cmd.op();
            match self.io.post(cmd) {
                Ok(()) => self.posted(op, what),
                Err(CommandError::NoSendToken | CommandError::NoRecvToken) => {
                    self.rndv.retry.push_front((cmd, what));
                    break;
                }
                Err(e) => self.lib_event(what, Err(OpError::Refused(e))),
            }
        }
        self.release_held();
    }

    /// Starts a rendezvous send of `buf` to `dest` with `tag`. Nothing
    /// here waits: a buffer the cache does not hold is registered by a
    /// command whose completion then sends the announcement.
    pub(crate) fn start_rendezvous_send(&mut self, dest: Endpoint, tag: u64, buf: HostBuf) -> Result<Request, HostError> {
        if self.rndv.cfg.protocol == RendezvousProtocol::Write {
            return self.start_write_send(dest, tag, buf);
        }
        let max = self.io.max_message();
        if buf.len > max {
            return Err(CommandError::TooLong { len: u64::from(buf.len), max }.into());
        }
        let fin_buf = self.io.alloc(FINISH_LEN)?;
        let rts_buf = match self.io.alloc(ANNOUNCE_LEN) {
            Ok(b) => b,
            Err(e) => {
                let _ = self.io.free(fin_buf);
                return Err(e.into());
            }
        };
        let user = self.fresh_op();
        let cookie = self.rndv.next_cookie;
        self.rndv.next_cookie = cookie.wrapping_add(1);
        let state = SendState { rts_op: None, fin_op: None, rts_buf, fin_buf, key: None, rts_done: false, fin_done: false, error: None, ready: None };
        self.rndv.sends.insert(user, state);
        self.pending.insert(user, None);
        self.rndv.stats.sends += 1;
        let to = SendTo { user, dest, tag, buf, cookie };
        match self.rndv.cache.acquire(buf) {
            Some((key, offset)) => {
                self.rndv.stats.cache_hits += 1;
                if self.rndv.held.is_empty() {
                    self.announce(to, key, offset);
                } else {
                    self.rndv.sends.get_mut(&user).expect("inserted above").ready = Some((key, offset));
                    self.rndv.held.push_back(Held::Announce(to));
                }
            }
            None => {
                self.rndv.stats.cache_misses += 1;
                // The announcement waits for the registration, and every
                // later send to anyone waits behind it.
                self.rndv.held.push_back(Held::Announce(to));
                self.post_lib_or_queue(Command::Register { op: OpId(0), buf }, LibOp::Register(to));
                // An engine that registers on the spot (the simulator's,
                // the test network's) has answered already: send the
                // announcement now rather than at the next progress.
                self.poll_events();
            }
        }
        Ok(Request(user))
    }

    /// Sends the announcement of a send whose buffer is registered under
    /// `key`.
    fn announce(&mut self, to: SendTo, key: u64, offset: u64) {
        let Some(s) = self.rndv.sends.get_mut(&to.user) else { return };
        s.key = Some(key);
        let (rts_buf, fin_buf) = (s.rts_buf, s.fin_buf);
        if self.io.write(rts_buf.addr, &encode_announce(to.buf.len, key, offset, to.cookie)).is_err() {
            self.abandon_send(to.user, OpError::DmaFault);
            return;
        }
        // The finish receive first: the engine takes commands in order, so
        // it is posted before the announcement can even leave.
        let fin_match = RecvMatch::from(to.dest.node, to.dest.port, FINISH_TAG | u64::from(to.cookie));
        let fin_op = self.post_lib_or_queue(Command::Recv { op: OpId(0), matching: fin_match, buf: fin_buf }, LibOp::Finish(to.user));
        let (dest, tag) = (to.dest, to.tag);
        let rts_op = self.post_lib_or_queue(Command::Announce { op: OpId(0), dest, tag, buf: rts_buf }, LibOp::Announce(to.user));
        let s = self.rndv.sends.get_mut(&to.user).expect("present");
        s.fin_op = Some(fin_op);
        s.rts_op = Some(rts_op);
    }

    /// A send failed before its announcement left: free what it holds.
    fn abandon_send(&mut self, user: OpId, err: OpError) {
        let Some(s) = self.rndv.sends.remove(&user) else { return };
        let _ = self.io.free(s.rts_buf);
        let _ = self.io.free(s.fin_buf);
        if let Some(key) = s.key {
            self.release_key(key);
        }
        self.finish_user(user, Err(err));
    }

    /// A send stopped using `key`: deregister what the cache no longer
    /// keeps.
    fn release_key(&mut self, key: u64) {
        let mut drop = Vec::new();
        drop.extend(self.rndv.cache.release(key));
        let cap = self.rndv.cfg.cache_entries;
        let evicted = self.rndv.cache.evict(cap);
        self.rndv.stats.cache_evictions += evicted.len() as u64;
        drop.extend(evicted);
        for key in drop {
            self.post_lib_or_queue(Command::Deregister { op: OpId(0), key }, LibOp::Discard(None));
        }
    }

    /// An explicit registration: rendezvous sends from inside it use its
    /// key.
    pub(crate) fn rndv_registered(&mut self, buf: HostBuf, key: u64) {
        self.rndv.cache.insert(buf, key, true);
    }

    /// The application deregistered `key`.
    pub(crate) fn rndv_deregistered(&mut self, key: u64) {
        self.rndv.cache.forget(key);
    }

    /// `buf` is being freed: cached registrations inside it go.
    pub(crate) fn rndv_freed(&mut self, buf: HostBuf) {
        for key in self.rndv.cache.invalidate(buf) {
            self.post_lib_or_queue(Command::Deregister { op: OpId(0), key }, LibOp::Discard(None));
        }
    }

    /// Notes a receive so that an announcement it takes is followed up.
    pub(crate) fn rndv_watch_recv(&mut self, op: OpId, buf: HostBuf) {
        self.rndv.recvs.insert(op, RecvSlot { buf });
    }

    /// Cancels a rendezvous send if its announcement has not been taken
    /// (it waits to be retried at a port that refused it); otherwise
    /// `None` (not a rendezvous send) or the engine's refusal.
    pub(crate) fn rndv_cancel(&mut self, req: Request) -> Option<Result<(), HostError>> {
        if let Some(r) = self.write_cancel(req) {
            return Some(r);
        }
        let Some(rts_op) = self.rndv.sends.get(&req.0)?.rts_op else {
            return Some(Err(OpError::NotCancellable.into()));
        };
        let r = match self.start(|op| Command::Cancel { op, target: rts_op }) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.wait(r).map(|_| ()))
    }

    /// Whether operations of the library's own (reads, finishes; not the
    /// application's sends) hold a token of the kind `refusal` lacks.
    pub(crate) fn rndv_holds(&self, refusal: CommandError) -> bool {
        match refusal {
            CommandError::NoSendToken => {
                self.rndv.lib.values().any(|l| match l {
                    LibOp::Read(_) | LibOp::FinishSent(..) => true,
                    LibOp::W(w) => w.holds_send_token(),
                    _ => false,
                }) || !self.rndv.retry.is_empty()
            }
            _ => false,
        }
    }

    /// Whether `op` is a receive that took an announcement: reading its
    /// payload or posting its finish, with the engine or queued for a
    /// token (it can no longer be cancelled).
    pub(crate) fn rndv_reading(&self, op: OpId) -> bool {
        let serves = |l: &LibOp| match l {
            LibOp::Read(s) => s.user == op,
            LibOp::FinishSent(_, Some((user, _))) => *user == op,
            _ => false,
        };
        self.rndv.lib.values().any(serves) || self.rndv.retry.iter().any(|(_, l)| serves(l)) || self.write_receiving(op)
    }

    /// Takes an engine event the rendezvous path is waiting for; hands any
    /// other back.
    pub(crate) fn rndv_event(&mut self, op: OpId, result: Result<Completion, OpError>) -> Option<Result<Completion, OpError>> {
        if let Some(what) = self.rndv.lib.remove(&op) {
            self.lib_event(what, result);
            return None;
        }
        let Some(slot) = self.rndv.recvs.remove(&op) else { return Some(result) };
        match result {
            Ok(Completion::Announced { src, tag, len, info }) => {
                if let Some((total, cookie)) = write::decode_rtw(&info).filter(|_| len == ANNOUNCE_LEN) {
                    self.write_announced(op, slot, src, tag, total, cookie);
                    return None;
                }
                let parsed = if len == ANNOUNCE_LEN { decode_announce(&info) } else { None };
                match parsed {
                    Some(a) => self.announced(op, slot, src, tag, a),
                    None => self.finish_user(op, Err(OpError::BadAnnouncement)),
                }
                None
            }
            other => Some(other),
        }
    }

    /// A watched receive took an announcement: read the payload.
    fn announced(&mut self, user: OpId, slot: RecvSlot, src: Endpoint, tag: u64, a: (u32, u64, u64, u32)) {
        let (total, key, offset, cookie) = a;
        let state = ReadState { user, src, tag, len: total, cap: slot.buf.len, cookie };
        let n = total.min(slot.buf.len);
        if n == 0 {
            self.read_done(state, Ok(Completion::Read));
            return;
        }
        let buf = HostBuf { addr: slot.buf.addr, len: n };
        self.post_lib_or_queue(Command::RdmaRead { op: OpId(0), dest: src, key, offset, buf }, LibOp::Read(state));
    }

    /// The payload is in (or the read failed): tell the sender, complete
    /// the receive - once the finish is with the engine (see
    /// [`LibOp::FinishSent`]).
    fn read_done(&mut self, s: ReadState, result: Result<Completion, OpError>) {
        let status = if result.is_ok() { STATUS_OK } else { STATUS_READ_FAILED };
        let sender_alive = !matches!(result, Err(OpError::PeerUnreachable(_)));
        let user = match result {
            Ok(_) => {
                self.rndv.stats.receives += 1;
                self.rndv.stats.bytes_read += u64::from(s.len);
                if s.len > s.cap {
                    Err(OpError::Truncated { src: s.src, tag: s.tag, len: s.len })
                } else {
                    Ok(Completion::Received { src: s.src, tag: s.tag, len: s.len })
                }
            }
            Err(e) => Err(e),
        };
        if sender_alive {
            // Without memory for eight bytes no finish goes: the sender
            // learns of it by its finish receive failing when this port
            // closes.
            if let Ok(b) = self.io.alloc(FINISH_LEN) {
                let _ = self.io.write(b.addr, &u64::from(status).to_le_bytes());
                let tag = FINISH_TAG | u64::from(s.cookie);
                let what = LibOp::FinishSent(b, Some((s.user, user)));
                self.post_lib_or_queue(Command::Send { op: OpId(0), dest: s.src, tag, buf: b }, what);
                return;
            }
        }
        self.finish_user(s.user, user);
    }

    fn finish_user(&mut self, user: OpId, result: Result<Completion, OpError>) {
        if let Some(slot) = self.pending.get_mut(&user) {
            *slot = Some(result);
        }
    }

    fn lib_event(&mut self, what: LibOp, result: Result<Completion, OpError>) {
        match what {
            LibOp::Register(to) => {
                match result {
                    Ok(Completion::Registered { key }) => {
                        self.rndv.cache.insert(to.buf, key, false);
                        if let Some(s) = self.rndv.sends.get_mut(&to.user) {
                            s.ready = Some((key, 0));
                        }
                    }
                    Ok(other) => unreachable!("register completed as {other:?}"),
                    Err(e) => self.abandon_send(to.user, e),
                }
                self.release_held();
            }
            LibOp::Announce(user) => self.send_half_done(user, true, result),
            LibOp::Finish(user) => self.send_half_done(user, false, result),
            LibOp::Read(s) => self.read_done(s, result),
            LibOp::FinishSent(b, waiting) => {
                let _ = self.io.free(b);
                // Refused for good before it went: the receive's data is
                // in all the same.
                if let Some((user, result)) = waiting {
                    self.finish_user(user, result);
                }
            }
            LibOp::Discard(Some(b)) => {
                let _ = self.io.free(b);
            }
            LibOp::Discard(None) => {}
            LibOp::W(w) => self.write_event(w, result),
        }
    }

    /// One half of a rendezvous send (its announcement, its finish) is in.
    fn send_half_done(&mut self, user: OpId, announce: bool, result: Result<Completion, OpError>) {
        let Some(s) = self.rndv.sends.get_mut(&user) else { return };
        if announce {
            s.rts_done = true;
        } else {
            s.fin_done = true;
        }
        if let Err(e) = result {
            s.error.get_or_insert(e);
        }
        // A failed announcement will get no finish: withdraw its receive.
        let withdraw = announce && result.is_err() && !s.fin_done;
        let (fin_op, rts_buf, fin_buf) = (s.fin_op.expect("posted with the announcement"), s.rts_buf, s.fin_buf);
        if announce {
            let _ = self.io.free(rts_buf);
        }
        if withdraw {
            let s = self.rndv.sends.get_mut(&user).expect("present");
            s.fin_done = true;
            self.rndv.lib.remove(&fin_op);
            self.rndv.lib.insert(fin_op, LibOp::Discard(Some(fin_buf)));
            self.post_lib_or_queue(Command::Cancel { op: OpId(0), target: fin_op }, LibOp::Discard(None));
        } else if !announce {
            let _ = self.io.free(fin_buf);
        }
        let s = self.rndv.sends.get(&user).expect("present");
        if !(s.rts_done && s.fin_done) {
            return;
        }
        let s = self.rndv.sends.remove(&user).expect("present");
        if let Some(key) = s.key {
            self.release_key(key);
        }
        let out = match s.error {
            Some(e) => Err(e),
            None => Ok(Completion::Sent),
        };
        self.finish_user(user, out);
    }
}

/// `cmd` under operation name `op`.
fn with_op(cmd: Command, op: OpId) -> Command {
    match cmd {
        Command::Recv { matching, buf, .. } => Command::Recv { op, matching, buf },
        Command::Register { buf, .. } => Command::Register { op, buf },
        Command::Announce { dest, tag, buf, .. } => Command::Announce { op, dest, tag, buf },
        Command::Send { dest, tag, buf, .. } => Command::Send { op, dest, tag, buf },
        Command::RdmaRead { dest, key, offset, buf, .. } => Command::RdmaRead { op, dest, key, offset, buf },
        Command::RdmaWrite { dest, key, offset, buf, .. } => Command::RdmaWrite { op, dest, key, offset, buf },
        Command::Deregister { key, .. } => Command::Deregister { op, key },
        Command::Cancel { target, .. } => Command::Cancel { op, target },
        other => unreachable!("the rendezvous path does not queue {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_round_trip_and_reject_garbage() {
        let b = encode_announce(1 << 20, 0xDEAD_BEEF_0123_4567, 4096, 77);
        assert_eq!(decode_announce(&b), Some((1 << 20, 0xDEAD_BEEF_0123_4567, 4096, 77)));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(decode_announce(&bad), None);
        assert_eq!(decode_announce(&b[..31]), None);
        const _: () = assert!(ANNOUNCE_LEN <= outboard_engine::ANNOUNCE_MAX);
    }

    #[test]
    fn cache_reuses_covering_registrations_and_bounds_idle_ones() {
        let mut c = RegCache::default();
        let big = HostBuf { addr: 1000, len: 100 };
        c.insert(big, 1, false);
        assert_eq!(c.acquire(HostBuf { addr: 1010, len: 50 }), Some((1, 10)));
        assert_eq!(c.acquire(HostBuf { addr: 1090, len: 20 }), None, "not covered");
        assert_eq!(c.release(1), None);
        assert_eq!(c.release(1), None);
        for k in 2..6 {
            c.insert(HostBuf { addr: k * 1000, len: 10 }, k, false);
            c.release(k);
        }
        // Five idle entries, two allowed: the three least recently used go.
        assert_eq!(c.evict(2), vec![1, 2, 3]);
        assert_eq!(c.evict(2), Vec::<u64>::new());
    }

    #[test]
    fn freeing_memory_drops_idle_keys_and_defers_busy_ones() {
        let mut c = RegCache::default();
        c.insert(HostBuf { addr: 0, len: 10 }, 1, false);
        c.release(1);
        c.insert(HostBuf { addr: 100, len: 10 }, 2, false); // in use
        c.insert(HostBuf { addr: 200, len: 10 }, 3, true); // explicit
        assert_eq!(c.invalidate(HostBuf { addr: 0, len: 300 }), vec![1]);
        assert_eq!(c.acquire(HostBuf { addr: 100, len: 10 }), None, "stale entries are not handed out");
        assert_eq!(c.release(2), Some(2), "the last use of freed memory deregisters it");
        assert_eq!(c.acquire(HostBuf { addr: 200, len: 10 }), Some((3, 0)), "explicit registrations stay");
    }
}
