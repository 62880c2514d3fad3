//! Atomic remote memory operations (dissertation chapter 5): fetch-and-add,
//! swap (the paper's fetch&write) and compare-and-swap on an aligned 32- or
//! 64-bit word of a registered region, performed by the target's engine
//! without its host.
//!
//! **Initiator.** A [`Command::Atomic`](crate::Command::Atomic) takes a send
//! token and gets the next request number (`seq`) toward its target node.
//! At most [`ATOMIC_WINDOW`] requests to one node are under way, counted
//! from the oldest unanswered one: a request numbered `s` leaves only once
//! every request before `s - ATOMIC_WINDOW` has its reply; later commands
//! wait in order. The request travels on the reliable connection; its
//! reply is its completion (nothing else acknowledges it at this level).
//! The old value goes to the host in the event
//! ([`Completion::Atomic`](crate::Completion::Atomic), whose `OpId` is the
//! caller's tag), and in the paper's *direct* form also straight into host
//! memory, value first and then a flag the host can spin on
//! ([`AtomicReturn::Direct`]). A port that is not open yet refuses without
//! executing, and the request is retried like a refused message.
//!
//! **Target.** Each request is executed exactly once: the outcome is kept in
//! a reply table per requesting node, keyed by `seq`, and a request that
//! arrives again (a retransmission above the connection, a replayed packet)
//! is answered from the table, never executed again. Because of the
//! initiator's window, an entry `ATOMIC_WINDOW` numbers below the newest
//! request seen can never be asked for again, so the table holds at most
//! `ATOMIC_WINDOW` entries per peer. Port, key, bounds and alignment are
//! checked before memory is touched; a violation is answered with a fault,
//! counted in [`Stats`](crate::Stats), and leaves the word alone. The
//! read-modify-write itself is [`Dma::atomic`], which the runtime performs
//! atomically against its host's own accesses.

use std::collections::{BTreeMap, HashMap, VecDeque};

use outboard_wire::{self as wire, AtomicFault, BodyRepr};

use crate::conn::TxRecord;
use crate::{Completion, Dma, Endpoint, Engine, Generation, Instant, NodeId, OpError, OpId, PortId, TokenClass};

pub use outboard_wire::{AtomicOp, AtomicWidth};

/// Requests under way from one engine to one node, and reply-table entries
/// one engine keeps per requesting node. The same constant on both sides is
/// what lets the target forget old replies safely.
pub const ATOMIC_WINDOW: u32 = 64;

/// How the old value of an atomic operation reaches the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicReturn {
    /// In the completion event only (the paper's receive-token form).
    Event,
    /// The paper's direct form: the engine writes the old value (8 bytes,
    /// native byte order, whatever the width) at `value`, then the 8-byte
    /// word 1 at `flag`, before the event. A host that cleared `flag` can
    /// spin on its own memory instead of polling events.
    Direct {
        /// Where the old value goes.
        value: u64,
        /// The flag set after the value is in place.
        flag: u64,
    },
}

/// An atomic command waiting for, or holding, a place in its node's window.
#[derive(Debug, Clone, Copy)]
struct Pending {
    port: PortId,
    port_gen: Generation,
    op: OpId,
    dest: Endpoint,
    key: u64,
    offset: u64,
    width: AtomicWidth,
    atomic: AtomicOp,
    ret: AtomicReturn,
    /// Set while waiting to retry after a not-ready refusal.
    retry_at: Option<Instant>,
    first_refused: Option<Instant>,
}

/// The outcomes of one peer's executed requests (see the module doc).
#[derive(Debug, Default)]
struct ReplyTable {
    /// The newest request number seen, unwrapped to 64 bits.
    newest: Option<u64>,
    replies: BTreeMap<u64, Result<u64, AtomicFault>>,
}

impl ReplyTable {
    /// The 64-bit number closest to the newest seen whose low half is
    /// `seq`; `None` for one before the first number (never sent).
    fn unwrap(&self, seq: u32) -> Option<u64> {
        let Some(newest) = self.newest else { return Some(u64::from(seq)) };
        let diff = seq.wrapping_sub(newest as u32) as i32;
        newest.checked_add_signed(i64::from(diff))
    }

    /// Whether request `s` is so old that its initiator cannot be waiting
    /// for it any more (an honest one never sends it).
    fn is_stale(&self, s: u64) -> bool {
        self.newest.is_some_and(|n| s + u64::from(ATOMIC_WINDOW) <= n)
    }

    fn saw(&mut self, s: u64) {
        let newest = self.newest.map_or(s, |n| n.max(s));
        self.newest = Some(newest);
        // Entries the window puts out of reach.
        let keep_from = newest.saturating_sub(u64::from(ATOMIC_WINDOW) - 1);
        self.replies = self.replies.split_off(&keep_from);
    }
}

/// The engine's atomic-operation state, both roles.
#[derive(Debug, Default)]
pub(crate) struct AtomicState {
    /// Requests sent and not answered, by (target node, request number).
    out: BTreeMap<(NodeId, u64), Pending>,
    /// Commands waiting for a place in their node's window, in order.
    queued: HashMap<NodeId, VecDeque<Pending>>,
    /// The next request number per target node.
    next_seq: HashMap<NodeId, u64>,
    /// Reply tables per requesting node.
    tables: HashMap<NodeId, ReplyTable>,
}

impl AtomicState {
    /// Whether no atomic operation is under way.
    pub(crate) fn is_quiet(&self) -> bool {
        self.out.is_empty() && self.queued.values().all(VecDeque::is_empty)
    }

    /// Nodes an outstanding request waits on.
    pub(crate) fn awaited_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.out.keys().map(|(n, _)| *n)
    }

    /// The earliest retry of a refused request.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.out.values().filter_map(|p| p.retry_at).min()
    }

    /// Requests to `node` not yet answered.
    fn outstanding(&self, node: NodeId) -> impl Iterator<Item = (&(NodeId, u64), &Pending)> {
        self.out.range((node, 0)..=(node, u64::MAX))
    }

    /// Entries in the reply table for `node` (for tests and diagnostics).
    fn table_len(&self, node: NodeId) -> usize {
        self.tables.get(&node).map_or(0, |t| t.replies.len())
    }
}

fn fault_error(f: AtomicFault) -> OpError {
    match f {
        AtomicFault::NotReady => OpError::NotReadyTimeout,
        AtomicFault::Stale => OpError::PortGone,
        AtomicFault::NoSuchPort => OpError::NoSuchPort,
        AtomicFault::BadKey => OpError::BadKey,
        AtomicFault::OutOfBounds => OpError::OutOfBounds,
        AtomicFault::Misaligned => OpError::Misaligned,
        AtomicFault::DmaFault => OpError::DmaFault,
    }
}

impl<D: Dma> Engine<D> {
    /// Starts an atomic command (the send token is already taken).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn atomic_start(
        &mut self,
        now: Instant,
        port: PortId,
        gen: Generation,
        op: OpId,
        dest: Endpoint,
        key: u64,
        offset: u64,
        width: AtomicWidth,
        atomic: AtomicOp,
        ret: AtomicReturn,
    ) {
        let p = Pending {
            port,
            port_gen: gen,
            op,
            dest,
            key,
            offset,
            width,
            atomic: atomic.truncated(width),
            ret,
            retry_at: None,
            first_refused: None,
        };
        self.atomics.queued.entry(dest.node).or_default().push_back(p);
        self.atomic_pump(now, dest.node);
    }

    /// Sends queued commands to `node` while its window has room.
    fn atomic_pump(&mut self, now: Instant, node: NodeId) {
        loop {
            let next = *self.atomics.next_seq.get(&node).unwrap_or(&0);
            let oldest = self.atomics.outstanding(node).next().map_or(next, |((_, s), _)| *s);
            if next >= oldest + u64::from(ATOMIC_WINDOW) {
                return;
            }
            let Some(p) = self.atomics.queued.get_mut(&node).and_then(VecDeque::pop_front) else { return };
            self.atomics.next_seq.insert(node, next + 1);
            self.atomics.out.insert((node, next), p);
            self.keepalive_arm(now);
            self.atomic_send(now, node, next);
        }
    }

    /// Puts request `s` to `node` on the connection (again, for a retry).
    fn atomic_send(&mut self, now: Instant, node: NodeId, s: u64) {
        let Some(p) = self.atomics.out.get_mut(&(node, s)) else { return };
        p.retry_at = None;
        let p = *p;
        let ci = self.conn_for(node, now);
        if self.conns[ci].dead {
            self.atomic_finish(now, node, s, Err(OpError::PeerUnreachable(node)));
            return;
        }
        let req = wire::AtomicRequest {
            src_port: p.port.0,
            dst_port: p.dest.port.0,
            src_gen: p.port_gen,
            dst_gen: p.dest.gen,
            seq: s as u32,
            key: p.key,
            offset: p.offset,
            width: p.width,
            op: p.atomic,
        };
        self.conns[ci].push(TxRecord::Control(BodyRepr::AtomicRequest(req)), now);
        self.mark_ready(ci);
    }

    /// Ends request `s` to `node`: reports to the host, frees its place in
    /// the window and lets the next command go.
    fn atomic_finish(&mut self, now: Instant, node: NodeId, s: u64, result: Result<Completion, OpError>) {
        let Some(p) = self.atomics.out.remove(&(node, s)) else { return };
        self.complete(p.port, p.port_gen, p.op, result, TokenClass::Send);
        self.atomic_pump(now, node);
    }

    /// The target side: executes a request once, answers every copy of it.
    pub(crate) fn on_atomic_request(&mut self, now: Instant, from: NodeId, r: wire::AtomicRequest) {
        let table = self.atomics.tables.entry(from).or_default();
        let Some(s) = table.unwrap(r.seq) else {
            self.stats.atomic_stale += 1;
            return;
        };
        let result = if let Some(&kept) = table.replies.get(&s) {
            self.stats.atomic_duplicates += 1;
            kept
        } else if table.is_stale(s) {
            self.stats.atomic_stale += 1;
            return;
        } else {
            table.saw(s);
            let result = self.atomic_execute(&r);
            if result != Err(AtomicFault::NotReady) {
                // Not executed and to be retried: no outcome to keep.
                self.atomics.tables.get_mut(&from).expect("entered above").replies.insert(s, result);
            }
            result
        };
        let reply = wire::AtomicReply { dst_port: r.src_port, dst_gen: r.src_gen, seq: r.seq, result };
        let ci = self.conn_for(from, now);
        self.conns[ci].push(TxRecord::Control(BodyRepr::AtomicReply(reply)), now);
        self.mark_ready(ci);
    }

    /// Checks port, key, bounds and alignment, then performs the operation.
    fn atomic_execute(&mut self, r: &wire::AtomicRequest) -> Result<u64, AtomicFault> {
        use wire::RejectReason as R;
        let checked = self.admit_port(r.dst_port, r.dst_gen).map_err(|reason| match reason {
            R::NotReady => AtomicFault::NotReady,
            R::Stale => AtomicFault::Stale,
            R::NoSuchPort => AtomicFault::NoSuchPort,
            R::BadKey => AtomicFault::BadKey,
            R::OutOfBounds => AtomicFault::OutOfBounds,
        });
        let checked = checked.and_then(|()| {
            let p = &self.ports[usize::from(r.dst_port)];
            let region = *p.regions.get(&r.key).ok_or(AtomicFault::BadKey)?;
            let w = r.width.bytes();
            let end = r.offset.checked_add(w).ok_or(AtomicFault::OutOfBounds)?;
            if end > u64::from(region.len) {
                return Err(AtomicFault::OutOfBounds);
            }
            let addr = region.addr + r.offset;
            if addr % w != 0 {
                return Err(AtomicFault::Misaligned);
            }
            Ok(addr)
        });
        let addr = match checked {
            Ok(a) => a,
            Err(f) => {
                match f {
                    AtomicFault::NotReady => self.stats.rejected_not_ready += 1,
                    AtomicFault::Stale | AtomicFault::NoSuchPort => self.stats.rejected_port += 1,
                    _ => self.stats.access_violations += 1,
                }
                return Err(f);
            }
        };
        let w = r.width.bytes();
        self.work.dma_read += w;
        let old = self.dma.atomic(PortId(r.dst_port), addr, r.width, r.op).map_err(|_| AtomicFault::DmaFault)?;
        if r.op.apply(r.width, old) != old {
            self.work.dma_written += w;
        }
        self.stats.atomics_executed += 1;
        self.work.atomics += 1;
        Ok(old)
    }

    /// The initiator side: a reply completes its request.
    pub(crate) fn on_atomic_reply(&mut self, now: Instant, from: NodeId, r: wire::AtomicReply) {
        let found = self
            .atomics
            .outstanding(from)
            .find(|((_, s), _)| *s as u32 == r.seq)
            .map(|((_, s), p)| (*s, *p));
        let Some((s, p)) = found else {
            // Its port closed meanwhile, or a copy of a reply already used.
            return;
        };
        if p.port.0 != r.dst_port || p.port_gen != r.dst_gen {
            self.stats.malformed += 1;
            return;
        }
        if p.retry_at.is_some() {
            // Already refused and waiting to be sent again.
            return;
        }
        let result = match r.result {
            Ok(value) => match self.atomic_deliver(p, value) {
                Ok(()) => Ok(Completion::Atomic { value }),
                Err(e) => Err(e),
            },
            Err(AtomicFault::NotReady) => {
                let p = self.atomics.out.get_mut(&(from, s)).expect("found above");
                let since = *p.first_refused.get_or_insert(now);
                if now.saturating_since(since) < self.cfg.retry_timeout {
                    p.retry_at = Some(now + self.cfg.retry_interval);
                    return;
                }
                Err(OpError::NotReadyTimeout)
            }
            Err(f) => Err(fault_error(f)),
        };
        self.atomic_finish(now, from, s, result);
    }

    /// Writes the old value and then the flag, for the direct form.
    fn atomic_deliver(&mut self, p: Pending, value: u64) -> Result<(), OpError> {
        let AtomicReturn::Direct { value: at, flag } = p.ret else { return Ok(()) };
        self.dma.write(p.port, at, &value.to_ne_bytes()).map_err(|_| OpError::DmaFault)?;
        self.dma.write(p.port, flag, &1u64.to_ne_bytes()).map_err(|_| OpError::DmaFault)?;
        self.work.dma_written += 16;
        self.work.atomic_direct += 1;
        Ok(())
    }

    /// Resends refused requests whose retry time came.
    pub(crate) fn atomic_retry_due(&mut self, now: Instant) {
        let due: Vec<(NodeId, u64)> =
            self.atomics.out.iter().filter(|(_, p)| p.retry_at.is_some_and(|t| t <= now)).map(|(k, _)| *k).collect();
        for (node, s) in due {
            self.stats.retries += 1;
            self.atomic_send(now, node, s);
        }
    }

    /// A port closed: its atomic operations are dropped without events.
    pub(crate) fn atomic_port_closed(&mut self, now: Instant, port: PortId) {
        let gen = self.ports[usize::from(port.0)].gen;
        let mine = |p: &Pending| p.port == port && p.port_gen == gen;
        self.atomics.out.retain(|_, p| !mine(p));
        let mut nodes: Vec<NodeId> = Vec::new();
        for (node, q) in &mut self.atomics.queued {
            q.retain(|p| !mine(p));
            nodes.push(*node);
        }
        nodes.sort_unstable();
        for node in nodes {
            self.atomic_pump(now, node);
        }
    }

    /// A peer died or restarted: operations on it fail, and what it asked
    /// of this engine is forgotten (a restarted peer numbers from zero).
    pub(crate) fn atomic_peer_failed(&mut self, node: NodeId) {
        self.atomics.tables.remove(&node);
        let mut failed: Vec<Pending> = self.atomics.outstanding(node).map(|(_, p)| *p).collect();
        self.atomics.out.retain(|(n, _), _| *n != node);
        failed.extend(self.atomics.queued.remove(&node).unwrap_or_default());
        for p in failed {
            self.complete(p.port, p.port_gen, p.op, Err(OpError::PeerUnreachable(node)), TokenClass::Send);
        }
    }

    /// Entries this engine keeps in its reply table for `node`: never more
    /// than [`ATOMIC_WINDOW`].
    pub fn atomic_table_len(&self, node: NodeId) -> usize {
        self.atomics.table_len(node)
    }

    /// Atomic requests to `node` sent and not yet answered: never more
    /// than [`ATOMIC_WINDOW`].
    pub fn atomics_outstanding(&self, node: NodeId) -> usize {
        self.atomics.outstanding(node).count()
    }
}
