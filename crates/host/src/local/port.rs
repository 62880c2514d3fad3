//! The port's side of the shared-memory path: sends waiting for room,
//! receives waiting here, messages no receive took yet, and the
//! arbitration with the engine for receives posted to both.

use std::collections::VecDeque;

use outboard_engine::{Command, Completion, Endpoint, HostBuf, OpError, OpId, PortId, RecvMatch};
use rustc_hash::FxHashMap;

use super::{Fragment, LinkError, PeerState, Sink, ENGINE_TAGS};
use crate::{HostError, Port, PortIo, Request};

/// Fragments one progress call takes at most, so that a flood from one
/// peer does not keep the caller from its own work.
const FRAGMENTS_PER_PROGRESS: usize = 64;

/// How often receives waiting here on one peer, and sends to it, look
/// whether it is still there (a process's death is found by looking).
const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Or this many progress calls, where time stands still (a simulated
/// network with nothing in flight).
const LIVENESS_CALLS: u32 = 1024;

/// Progress calls between two looks at the clock.
const CLOCK_EVERY: u32 = 32;

/// A send whose fragments are not all in the link yet.
#[derive(Debug)]
struct Outgoing {
    op: OpId,
    dest: Endpoint,
    tag: u64,
    buf: HostBuf,
    /// Bytes already in the link.
    sent: u32,
    /// Whether the first fragment is in (a 0-byte message is one empty
    /// fragment).
    started: bool,
}

/// A receive waiting here.
#[derive(Debug)]
struct Posted {
    op: OpId,
    matching: RecvMatch,
    buf: HostBuf,
    /// Also posted to the engine (it may be satisfied either way).
    in_engine: bool,
}

/// A message from the link that no receive took yet.
#[derive(Debug)]
struct Unexpected {
    id: u64,
    src: Endpoint,
    tag: u64,
    total: u32,
    data: Vec<u8>,
}

/// Where the rest of a peer's message in progress goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    Posted { op: OpId, buf: HostBuf, src: Endpoint, tag: u64, total: u32 },
    Unexpected(u64),
    /// The rest of a message whose receive already failed.
    Discard,
}

/// A receive's way to its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Engine,
    Link,
    Both,
}

/// What a port keeps for its shared-memory path (empty without a link).
#[derive(Debug, Default)]
pub(crate) struct LocalState {
    outbox: Vec<Outgoing>,
    posted: VecDeque<Posted>,
    unexpected: VecDeque<Unexpected>,
    current: FxHashMap<PortId, Target>,
    next_id: u64,
    /// Inside `local_progress` (a cancel's wait must not re-enter it).
    busy: bool,
    /// When peers were last looked at, and progress calls since.
    checked: Option<outboard_engine::Instant>,
    calls: u32,
}

/// The completion of a receive of a `total`-byte message into `cap` bytes.
fn received(src: Endpoint, tag: u64, total: u32, cap: u32) -> Result<Completion, OpError> {
    if total > cap {
        Err(OpError::Truncated { src, tag, len: total })
    } else {
        Ok(Completion::Received { src, tag, len: total })
    }
}

fn link_error(e: LinkError) -> OpError {
    match e {
        LinkError::PeerGone => OpError::PortGone,
        LinkError::Memory(_) | LinkError::Corrupt => OpError::DmaFault,
    }
}

impl<P: PortIo> Port<P> {
    /// Whether a send to `dest` with `tag` goes through the link.
    pub(crate) fn local_sends_to(&mut self, dest: Endpoint, tag: u64) -> bool {
        tag & ENGINE_TAGS == 0 && self.io.local_link().is_some_and(|l| l.peer(dest.node, dest.port).is_some())
    }

    /// Starts a send through the link (see the module docs).
    pub(crate) fn local_send(&mut self, dest: Endpoint, tag: u64, buf: HostBuf) -> Result<Request, HostError> {
        let op = self.fresh_op();
        self.pending.insert(op, None);
        self.local.outbox.push(Outgoing { op, dest, tag, buf, sent: 0, started: false });
        self.local_flush();
        Ok(Request(op))
    }

    fn route(&mut self, m: &RecvMatch) -> Route {
        let Some(link) = self.io.local_link() else { return Route::Engine };
        let low = m.tag_mask & ENGINE_TAGS == 0 || m.tag & ENGINE_TAGS == 0;
        let high = m.tag_mask & ENGINE_TAGS == 0 || m.tag & ENGINE_TAGS != 0;
        match m.source {
            _ if !low => Route::Engine,
            None => Route::Both,
            Some((node, port)) if link.peer(node, port).is_some() => {
                if high {
                    Route::Both
                } else {
                    Route::Link
                }
            }
            Some(_) => Route::Engine,
        }
    }

    /// Starts a receive that the link may satisfy, or hands `None` back
    /// when only the engine can.
    pub(crate) fn local_recv(&mut self, matching: RecvMatch, buf: HostBuf) -> Result<Option<Request>, HostError> {
        let route = self.route(&matching);
        if route == Route::Engine {
            return Ok(None);
        }
        self.local_progress();
        if let Some(r) = self.take_unexpected(&matching, buf)? {
            return Ok(Some(r));
        }
        let (op, in_engine) = match route {
            Route::Both => (self.start_engine_recv(matching, buf)?.0, true),
            _ => {
                let op = self.fresh_op();
                self.pending.insert(op, None);
                (op, false)
            }
        };
        self.local.posted.push_back(Posted { op, matching, buf, in_engine });
        Ok(Some(Request(op)))
    }

    /// A kept message for a new receive: copied in (what came of it so
    /// far; the rest follows straight into `buf`).
    fn take_unexpected(&mut self, m: &RecvMatch, buf: HostBuf) -> Result<Option<Request>, HostError> {
        let Some(i) = self.local.unexpected.iter().position(|u| m.accepts(u.src, u.tag)) else { return Ok(None) };
        let u = self.local.unexpected.remove(i).expect("found");
        let n = u.data.len().min(buf.len as usize);
        self.io.write(buf.addr, &u.data[..n])?;
        let op = self.fresh_op();
        if u.data.len() == u.total as usize {
            self.pending.insert(op, Some(received(u.src, u.tag, u.total, buf.len)));
        } else {
            self.pending.insert(op, None);
            self.local.current.insert(u.src.port, Target::Posted { op, buf, src: u.src, tag: u.tag, total: u.total });
        }
        Ok(Some(Request(op)))
    }

    /// Cancels a request of the shared-memory path: `None` when `req` is
    /// not one (or is also the engine's, which cancels it).
    pub(crate) fn local_cancel(&mut self, req: Request) -> Option<Result<(), HostError>> {
        if self.local.current.values().any(|t| matches!(t, Target::Posted { op, .. } if *op == req.0)) {
            return Some(Err(OpError::NotCancellable.into()));
        }
        if let Some(i) = self.local.posted.iter().position(|p| p.op == req.0) {
            let p = self.local.posted.remove(i).expect("found");
            if p.in_engine {
                return None;
            }
            self.pending.insert(req.0, Some(Err(OpError::Cancelled)));
            return Some(Ok(()));
        }
        if let Some(i) = self.local.outbox.iter().position(|o| o.op == req.0) {
            if self.local.outbox[i].started {
                return Some(Err(OpError::NotCancellable.into()));
            }
            self.local.outbox.remove(i);
            self.pending.insert(req.0, Some(Err(OpError::Cancelled)));
            return Some(Ok(()));
        }
        None
    }

    /// Moves fragments: sends waiting for room, and what peers sent.
    pub(crate) fn local_progress(&mut self) {
        if self.local.busy || self.io.local_link().is_none() {
            return;
        }
        self.local.busy = true;
        self.local_flush();
        for _ in 0..FRAGMENTS_PER_PROGRESS {
            let Some(f) = self.io.local_link().and_then(|l| l.peek()) else { break };
            self.local_fragment(f);
        }
        // The clock is read every few calls only: a waiting loop calls
        // this back to back, and a clock read costs as much as the rest.
        self.local.calls += 1;
        if self.local.calls % CLOCK_EVERY == 0 {
            let now = self.io.now();
            let checked = *self.local.checked.get_or_insert(now);
            if now - checked >= LIVENESS_EVERY || self.local.calls >= LIVENESS_CALLS {
                (self.local.checked, self.local.calls) = (Some(now), 0);
                self.local_check_peers();
            }
        }
        self.local.busy = false;
    }

    /// Puts as many waiting fragments into the link as it has room for;
    /// sends to one destination stay in order.
    fn local_flush(&mut self) {
        let mut blocked: Vec<PortId> = Vec::new();
        let mut i = 0;
        while i < self.local.outbox.len() {
            let o = &self.local.outbox[i];
            if blocked.contains(&o.dest.port) {
                i += 1;
                continue;
            }
            let (op, dest, tag, buf) = (o.op, o.dest, o.tag, o.buf);
            let (mut sent, mut started) = (o.sent, o.started);
            let link = self.io.local_link().expect("sends through the link have one");
            let max = link.fragment_max();
            let mut failed = None;
            while !started || sent < buf.len {
                let n = (buf.len - sent).min(max);
                match link.push(dest, tag, buf.len, sent, HostBuf { addr: buf.addr + u64::from(sent), len: n }) {
                    Ok(true) => {
                        sent += n;
                        started = true;
                    }
                    Ok(false) => break,
                    Err(e) => {
                        failed = Some(link_error(e));
                        break;
                    }
                }
            }
            let done = failed.is_some() || (started && sent == buf.len);
            if done {
                self.local.outbox.remove(i);
                if let Some(slot) = self.pending.get_mut(&op) {
                    *slot = Some(failed.map_or(Ok(Completion::Sent), Err));
                }
            } else {
                let o = &mut self.local.outbox[i];
                (o.sent, o.started) = (sent, started);
                blocked.push(dest.port);
                i += 1;
            }
        }
    }

    /// Takes one fragment into the receive or kept message it belongs to.
    fn local_fragment(&mut self, f: Fragment) {
        let target = if f.offset == 0 {
            match self.first_match(f.src, f.tag) {
                Some(p) => Target::Posted { op: p.op, buf: p.buf, src: f.src, tag: f.tag, total: f.total },
                None => {
                    let id = self.local.next_id;
                    self.local.next_id += 1;
                    self.local.unexpected.push_back(Unexpected { id, src: f.src, tag: f.tag, total: f.total, data: Vec::with_capacity(f.total as usize) });
                    Target::Unexpected(id)
                }
            }
        } else {
            match self.local.current.get(&f.src.port) {
                Some(t) => *t,
                None => {
                    // A fragment of no message under way: the peer broke the
                    // format. Dropped; its next message starts afresh.
                    let _ = self.io.local_link().expect("peeked").take(Sink::Append(&mut Vec::new()));
                    return;
                }
            }
        };
        let last = f.offset.saturating_add(f.len) >= f.total;
        match target {
            Target::Posted { op, buf, src, tag, total } => {
                let room = buf.len.saturating_sub(f.offset);
                let sink = Sink::Memory { addr: buf.addr + u64::from(f.offset.min(buf.len)), len: f.len.min(room) };
                let took = self.io.local_link().expect("peeked").take(sink);
                let result = match took {
                    Err(e) => Some(Err(link_error(e))),
                    Ok(()) if last => Some(received(src, tag, total, buf.len)),
                    Ok(()) => None,
                };
                if let Some(r) = result {
                    self.local.current.remove(&f.src.port);
                    if let Some(slot) = self.pending.get_mut(&op) {
                        *slot = Some(r);
                    }
                    if r.is_err() && !last {
                        // The rest of the message is dropped as it comes.
                        self.local.current.insert(f.src.port, Target::Discard);
                    }
                } else {
                    self.local.current.insert(f.src.port, target);
                }
            }
            Target::Unexpected(_) | Target::Discard => {
                let link = self.io.local_link().expect("peeked");
                let id = match target {
                    Target::Unexpected(id) => Some(id),
                    _ => None,
                };
                let kept = self.local.unexpected.iter_mut().find(|u| Some(u.id) == id);
                let _ = match kept {
                    Some(u) => link.take(Sink::Append(&mut u.data)),
                    None => link.take(Sink::Append(&mut Vec::new())),
                };
                if last {
                    self.local.current.remove(&f.src.port);
                } else {
                    self.local.current.insert(f.src.port, target);
                }
            }
        }
    }

    /// The first receive waiting here that takes a message from `src` with
    /// `tag`, taken out; one also posted to the engine only once the engine
    /// gave it up.
    fn first_match(&mut self, src: Endpoint, tag: u64) -> Option<Posted> {
        let mut i = 0;
        while i < self.local.posted.len() {
            let p = &self.local.posted[i];
            if !matches!(self.pending.get(&p.op), Some(None)) {
                // Completed by the engine (or forgotten).
                self.local.posted.remove(i);
                continue;
            }
            if !p.matching.accepts(src, tag) {
                i += 1;
                continue;
            }
            let p = self.local.posted.remove(i).expect("in range");
            if !p.in_engine || self.withdraw_from_engine(p.op) {
                return Some(p);
            }
        }
        None
    }

    /// Cancels the engine's copy of a receive posted to both: true when
    /// the engine gave it up (it is the link's now), false when the engine
    /// matched it first (its completion comes from the engine).
    fn withdraw_from_engine(&mut self, target: OpId) -> bool {
        if self.rndv_reading(target) {
            return false;
        }
        let Ok(c) = self.start(|op| Command::Cancel { op, target }) else { return false };
        // Called from `local_progress`, which the wait's progress does not
        // re-enter (`busy`).
        let cancelled = self.wait(c).is_ok();
        if cancelled {
            // The engine completed the receive as cancelled; it is under way again.
            self.pending.insert(target, None);
        }
        cancelled
    }

    /// Fails what waits on a peer that closed or died: receives waiting
    /// only here for it, and sends to it.
    fn local_check_peers(&mut self) {
        let mut gone: Vec<Endpoint> = Vec::new();
        let peers: Vec<Endpoint> = {
            let waiting = self.local.posted.iter().filter(|p| !p.in_engine).filter_map(|p| p.matching.source);
            let link = self.io.local_link().expect("checked by the caller");
            let mut v: Vec<Endpoint> = waiting.filter_map(|(n, p)| link.peer(n, p)).collect();
            v.extend(self.local.outbox.iter().map(|o| o.dest));
            // Messages part-way into a receive (one from any source too).
            v.extend(self.local.current.values().filter_map(|t| match t {
                Target::Posted { src, .. } => Some(*src),
                Target::Unexpected(_) | Target::Discard => None,
            }));
            v.sort_unstable_by_key(|e| (e.node.0, e.port.0));
            v.dedup();
            v
        };
        for ep in peers {
            let state = self.io.local_link().expect("checked").peer_state(ep);
            if state != PeerState::Open {
                gone.push(ep);
            }
        }
        for ep in gone {
            let from = |m: &RecvMatch| m.source == Some((ep.node, ep.port));
            let mid_message = self.local.current.remove(&ep.port);
            if let Some(Target::Posted { op, .. }) = mid_message {
                if let Some(slot) = self.pending.get_mut(&op) {
                    *slot = Some(Err(OpError::SenderAborted));
                }
            }
            let (failed, kept): (Vec<Posted>, Vec<Posted>) = std::mem::take(&mut self.local.posted).into_iter().partition(|p| !p.in_engine && from(&p.matching));
            self.local.posted = kept.into();
            // A process that died closed its port, as the engine sees it.
            for p in failed {
                if let Some(slot) = self.pending.get_mut(&p.op) {
                    *slot = Some(Err(OpError::SourceClosed(ep)));
                }
            }
            let (stuck, rest): (Vec<Outgoing>, Vec<Outgoing>) = std::mem::take(&mut self.local.outbox).into_iter().partition(|o| o.dest.port == ep.port);
            self.local.outbox = rest;
            for o in stuck {
                if let Some(slot) = self.pending.get_mut(&o.op) {
                    *slot = Some(Err(OpError::PortGone));
                }
            }
        }
    }
}
