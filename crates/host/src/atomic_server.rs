//! Host-based atomic operations: the dissertation's comparison point
//! (5.1, 5.4.1). A server, run by a thread of the target process on a port
//! of its own, receives atomic requests as tagged messages, performs them
//! on the process's memory with the host's own atomics
//! ([`PortIo::atomic`], the same ones the engine's offloaded operations
//! serialise with) and sends the old value back in a tagged reply. The
//! engines only carry the messages (reliably, exactly once each).
//!
//! The server waits for requests in one of the paper's three ways
//! ([`ServerWait`], GM's `gm_receive`, `gm_blocking_receive` and
//! `gm_blocking_receive_no_spin`): polling without pause, polling a while
//! and then blocking, or blocking at once. Waiting is the port's
//! [`PortIo::idle`], which in the runtime is what the node's progress
//! policy does while a host waits (under spin-then-block, a sleep in the
//! kernel until the engine wakes it; under dedicated or host-assisted
//! progress, a spin that also drives the engine). So today the three modes
//! differ as the paper's do: `Poll` calls `idle` on every poll (the node's
//! policy: a spin, or driving a host-assisted engine), `SpinThenBlock`
//! spins on the event queue (calling `idle` every 16th poll, so a
//! host-driven engine still runs) and then blocks, and `Block` blocks at
//! once. Blocking is [`PortIo::block`]: in the runtime the thread parks in
//! the kernel until the engine publishes an event for its port, whatever
//! the node's progress policy (a host-assisted node's engine thread takes
//! over meanwhile).

use std::collections::BTreeMap;

use outboard_engine::{AtomicOp, AtomicWidth, Completion, Endpoint, HostBuf, OpError, RecvMatch};

use crate::{HostError, Port, PortIo, Request};

/// Tag of a request to an atomic server.
pub const REQUEST_TAG: u64 = 0x4154_4f4d_0000_0000;
/// Replies carry this tag plus the client's request number.
const REPLY_TAG: u64 = 0x4154_5250_0000_0000;
const REQUEST_LEN: u32 = 48;
const REPLY_LEN: u32 = 16;

/// How a server waits for its next request (dissertation 5.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerWait {
    /// Poll without pause (`gm_receive`): the fastest answer, a whole CPU
    /// (each poll also calls `idle`, which drives a host-driven engine).
    Poll,
    /// Poll this many times, then block (`gm_blocking_receive`).
    SpinThenBlock {
        /// Polls before blocking.
        spins: u32,
    },
    /// Block at once (`gm_blocking_receive_no_spin`).
    Block,
}

fn op_code(op: AtomicOp) -> (u8, u64, u64) {
    match op {
        AtomicOp::FetchAdd(v) => (1, v, 0),
        AtomicOp::Swap(v) => (2, v, 0),
        AtomicOp::CompareSwap { compare, new } => (3, new, compare),
    }
}

fn error_code(e: OpError) -> u64 {
    match e {
        OpError::BadKey => 1,
        OpError::OutOfBounds => 2,
        OpError::Misaligned => 3,
        _ => 4,
    }
}

fn error_of(code: u64) -> OpError {
    match code {
        1 => OpError::BadKey,
        2 => OpError::OutOfBounds,
        3 => OpError::Misaligned,
        _ => OpError::DmaFault,
    }
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Serves atomic requests on the regions it exposes. Split-phase, as every
/// operation of the library is: [`AtomicServer::arrived`] looks for a
/// request without waiting and [`AtomicServer::serve_arrived`] performs
/// it and starts the reply, so a driver that cannot block (the
/// simulator's processes) waits in its own way between the two, and
/// [`AtomicServer::serve_one`] is the blocking loop over them.
#[derive(Debug, Default)]
pub struct AtomicServer {
    regions: BTreeMap<u64, HostBuf>,
    /// The receive kept posted for the next request.
    posted: Option<(Request, HostBuf)>,
    /// A request that arrived and is not served yet: its completion and
    /// buffer.
    arrived: Option<(Result<Completion, HostError>, HostBuf)>,
    /// Replies under way, each with its buffer (freed once sent).
    replies: Vec<(Request, HostBuf)>,
    /// Requests served (for benchmarks and tests).
    pub served: u64,
}

impl AtomicServer {
    /// A server exposing nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exposes `buf` under `key` (the key its registration returned, so
    /// clients name a word the same way for both kinds of atomics).
    pub fn expose(&mut self, key: u64, buf: HostBuf) {
        self.regions.insert(key, buf);
    }

    /// Whether a request has arrived (never waits): posts the receive for
    /// the next one if none is posted, and frees the replies that went.
    /// A request that arrived stays until [`AtomicServer::serve_arrived`].
    pub fn arrived<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, HostError> {
        self.reap_replies(port)?;
        if self.arrived.is_some() {
            return Ok(true);
        }
        let (req, buf) = match self.posted.take() {
            Some(p) => p,
            None => {
                let buf = port.buffer(REQUEST_LEN)?;
                (port.start_recv(RecvMatch::tag(REQUEST_TAG), buf)?, buf)
            }
        };
        match port.test(req) {
            Some(done) => {
                self.arrived = Some((done, buf));
                Ok(true)
            }
            None => {
                self.posted = Some((req, buf));
                Ok(false)
            }
        }
    }

    /// Performs the request that arrived and starts its reply; `false`
    /// if none had arrived ([`AtomicServer::arrived`]). A request the
    /// engine could not deliver whole is an error; one naming a region
    /// not exposed, or a word outside it, is answered with the error.
    pub fn serve_arrived<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, HostError> {
        let Some((done, buf)) = self.arrived.take() else { return Ok(false) };
        let src = match done {
            Ok(Completion::Received { src, len: REQUEST_LEN, .. }) => src,
            other => {
                port.free(buf)?;
                return Err(match other {
                    Ok(Completion::Received { src, tag, len }) => HostError::Op(OpError::Truncated { src, tag, len }),
                    Err(e) => e,
                    Ok(_) => HostError::Op(OpError::DmaFault),
                });
            }
        };
        let m = port.read_buffer(buf);
        port.free(buf)?;
        let m = m?;
        let (status, value) = match self.perform(port, &m) {
            Ok(v) => (0, v),
            Err(e) => (error_code(e), 0),
        };
        let mut reply = [0u8; REPLY_LEN as usize];
        reply[..8].copy_from_slice(&status.to_le_bytes());
        reply[8..].copy_from_slice(&value.to_le_bytes());
        let rb = port.buffer_from(&reply)?;
        match port.start_send(src, REPLY_TAG | (word(&m, 40) & 0xFFFF_FFFF), rb) {
            Ok(s) => self.replies.push((s, rb)),
            Err(e) => {
                port.free(rb)?;
                return Err(e);
            }
        }
        self.served += 1;
        Ok(true)
    }

    /// Frees the buffers of the replies that went; the first reply that
    /// failed is an error.
    fn reap_replies<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), HostError> {
        let mut failed = None;
        let mut i = 0;
        while i < self.replies.len() {
            let (s, b) = self.replies[i];
            match port.test(s) {
                Some(r) => {
                    let _ = self.replies.swap_remove(i);
                    port.free(b)?;
                    if let Err(e) = r {
                        failed.get_or_insert(e);
                    }
                }
                None => i += 1,
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Whether every reply started has gone (never waits); frees their
    /// buffers.
    pub fn replies_sent<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, HostError> {
        self.reap_replies(port)?;
        Ok(self.replies.is_empty())
    }

    /// Waits for one request as `wait` says, performs it and starts the
    /// reply. Returns `false` without serving if `stop` became true while
    /// waiting.
    pub fn serve_one<P: PortIo>(&mut self, port: &mut Port<P>, wait: ServerWait, stop: &dyn Fn() -> bool) -> Result<bool, HostError> {
        let mut polls = 0u32;
        while !self.arrived(port)? {
            if stop() {
                return Ok(false);
            }
            polls = polls.saturating_add(1);
            match wait {
                // Spinning must still let a host-driven engine run: only
                // `idle` drives it under host-assisted progress.
                ServerWait::SpinThenBlock { spins } if polls < spins && polls % 16 != 0 => std::hint::spin_loop(),
                ServerWait::SpinThenBlock { spins } if polls < spins => port.io().idle(),
                ServerWait::Poll => port.io().idle(),
                ServerWait::SpinThenBlock { .. } | ServerWait::Block => port.io().block(),
            }
        }
        self.serve_arrived(port)
    }

    /// Withdraws the receive the server keeps posted between requests and
    /// waits for the replies under way, so that its port can serve again
    /// under another server, or close, without a stale receive. Nobody
    /// may send to it any more: a request that came meanwhile is dropped
    /// unanswered.
    pub fn withdraw<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), HostError> {
        if let Some((req, buf)) = self.posted.take() {
            // A receive that already matched cannot be cancelled; either
            // way it completes, and the wait reaps it.
            let _ = port.cancel(req);
            let _ = port.wait(req);
            port.free(buf)?;
        }
        if let Some((_, buf)) = self.arrived.take() {
            port.free(buf)?;
        }
        let mut failed = None;
        for (s, b) in std::mem::take(&mut self.replies) {
            if let Err(e) = port.wait(s).map(drop).and(port.free(b)) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    fn perform<P: PortIo>(&self, port: &mut Port<P>, m: &[u8]) -> Result<u64, OpError> {
        let width = match m[1] {
            4 => AtomicWidth::W32,
            8 => AtomicWidth::W64,
            _ => return Err(OpError::DmaFault),
        };
        let (data, compare) = (word(m, 24), word(m, 32));
        let op = match m[0] {
            1 => AtomicOp::FetchAdd(data),
            2 => AtomicOp::Swap(data),
            3 => AtomicOp::CompareSwap { compare, new: data },
            _ => return Err(OpError::DmaFault),
        };
        let buf = *self.regions.get(&word(m, 8)).ok_or(OpError::BadKey)?;
        match port.local_atomic(buf, word(m, 16), width, op) {
            Ok(v) => Ok(v),
            Err(HostError::Op(e)) => Err(e),
            Err(_) => Err(OpError::DmaFault),
        }
    }
}

/// A host-based atomic under way ([`Port::start_hb_atomic`]): its request
/// going to the server and the receive its reply comes into.
#[derive(Debug)]
#[must_use = "a host-based atomic must be tested until it completes"]
pub struct HbAtomic {
    /// The request's send and buffer, until sent.
    request: Option<(Request, HostBuf)>,
    /// The reply's receive, until it completes.
    reply: Option<Request>,
    reply_buf: HostBuf,
    /// The reply's status and value, once read.
    answer: Option<(u64, u64)>,
    /// Why it failed, once it has: the reply's receive, cancelled, is
    /// still reaped before the buffer is freed.
    failed: Option<HostError>,
    /// Its result was handed back (its buffers are freed).
    done: bool,
}

impl<P: PortIo> Port<P> {
    /// Starts `op` on the word `offset` of region `key` through the atomic
    /// server at `server` (host-based); [`Port::test_hb_atomic`] gives the
    /// old value.
    pub fn start_hb_atomic(&mut self, server: Endpoint, key: u64, offset: u64, width: AtomicWidth, op: AtomicOp) -> Result<HbAtomic, HostError> {
        let reply_buf = self.buffer(REPLY_LEN)?;
        // Names the reply: unique among this process's live buffers.
        let n = reply_buf.addr & 0xFFFF_FFFF;
        let reply = match self.start_recv(RecvMatch::from(server.node, server.port, REPLY_TAG | n), reply_buf) {
            Ok(r) => r,
            Err(e) => {
                self.free(reply_buf)?;
                return Err(e);
            }
        };
        let (code, data, compare) = op_code(op.truncated(width));
        let mut m = [0u8; REQUEST_LEN as usize];
        m[0] = code;
        m[1] = width as u8;
        for (i, v) in [(8, key), (16, offset), (24, data), (32, compare), (40, n)] {
            m[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
        let mut a = HbAtomic { request: None, reply: Some(reply), reply_buf, answer: None, failed: None, done: false };
        let sent = self.buffer_from(&m).and_then(|b| match self.start_send(server, REQUEST_TAG, b) {
            Ok(s) => Ok((s, b)),
            Err(e) => self.free(b).and(Err(e)),
        });
        match sent {
            Ok(s) => a.request = Some(s),
            Err(e) => self.fail_hb_atomic(&mut a, e),
        }
        Ok(a)
    }

    /// Whether a host-based atomic finished (its request sent and its
    /// reply in); its old value (or error) if so, once. Never waits,
    /// except that a failed one cancels its reply's receive
    /// ([`Port::cancel`]).
    pub fn test_hb_atomic(&mut self, a: &mut HbAtomic) -> Option<Result<u64, HostError>> {
        if a.done {
            return Some(Err(HostError::UnknownRequest));
        }
        if let Some((s, b)) = a.request {
            if let Some(r) = self.test(s) {
                a.request = None;
                let freed = self.free(b);
                match r {
                    // The request never reached the server: no reply comes.
                    Err(e) => self.fail_hb_atomic(a, e),
                    // It did: the reply still comes, and is awaited.
                    Ok(_) => {
                        if let Err(e) = freed {
                            a.failed.get_or_insert(e);
                        }
                    }
                }
            }
        }
        if let Some(r) = a.reply {
            if let Some(done) = self.test(r) {
                a.reply = None;
                match done {
                    Ok(_) if a.failed.is_none() => match self.read_buffer(a.reply_buf) {
                        Ok(b) => a.answer = Some((word(&b, 0), word(&b, 8))),
                        Err(e) => a.failed = Some(e),
                    },
                    Ok(_) => {}
                    Err(e) => {
                        a.failed.get_or_insert(e);
                    }
                }
            }
        }
        if a.request.is_some() || a.reply.is_some() {
            return None;
        }
        a.done = true;
        let freed = self.free(a.reply_buf);
        Some(match (a.failed.take(), a.answer.take(), freed) {
            (Some(e), _, _) | (None, _, Err(e)) => Err(e),
            (None, Some((0, value)), Ok(())) => Ok(value),
            (None, Some((code, _)), Ok(())) => Err(HostError::Op(error_of(code))),
            (None, None, Ok(())) => Err(HostError::Op(OpError::DmaFault)),
        })
    }

    /// Records why `a` failed and cancels its reply's receive, which then
    /// completes (cancelled, or received if the reply was already in).
    fn fail_hb_atomic(&mut self, a: &mut HbAtomic, e: HostError) {
        if a.failed.is_none() {
            a.failed = Some(e);
            if let Some(r) = a.reply {
                let _ = self.cancel(r);
            }
        }
    }

    /// Performs `op` on the word `offset` of region `key` through the atomic
    /// server at `server` (host-based), and returns the old value.
    pub fn hb_atomic(&mut self, server: Endpoint, key: u64, offset: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, HostError> {
        let mut a = self.start_hb_atomic(server, key, offset, width, op)?;
        loop {
            if let Some(r) = self.test_hb_atomic(&mut a) {
                return r;
            }
            self.io().idle();
        }
    }
}
