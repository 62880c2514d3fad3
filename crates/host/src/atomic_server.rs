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

/// Serves atomic requests on the regions it exposes.
#[derive(Debug, Default)]
pub struct AtomicServer {
    regions: BTreeMap<u64, HostBuf>,
    posted: Option<(Request, HostBuf)>,
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

    /// Waits for one request as `wait` says, performs it and replies.
    /// Returns `false` without serving if `stop` became true while waiting.
    pub fn serve_one<P: PortIo>(&mut self, port: &mut Port<P>, wait: ServerWait, stop: &dyn Fn() -> bool) -> Result<bool, HostError> {
        let (req, buf) = match self.posted.take() {
            Some(p) => p,
            None => {
                let buf = port.buffer(REQUEST_LEN)?;
                (port.start_recv(RecvMatch::tag(REQUEST_TAG), buf)?, buf)
            }
        };
        let mut polls = 0u32;
        let done = loop {
            if let Some(r) = port.test(req) {
                break r;
            }
            if stop() {
                self.posted = Some((req, buf));
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
        };
        let src = match done? {
            Completion::Received { src, len: REQUEST_LEN, .. } => src,
            other => {
                port.free(buf)?;
                return Err(HostError::Op(match other {
                    Completion::Received { src, tag, len } => OpError::Truncated { src, tag, len },
                    _ => OpError::DmaFault,
                }));
            }
        };
        let m = port.read_buffer(buf)?;
        port.free(buf)?;
        let result = self.perform(port, &m);
        let (status, value) = match result {
            Ok(v) => (0, v),
            Err(e) => (error_code(e), 0),
        };
        let mut reply = [0u8; REPLY_LEN as usize];
        reply[..8].copy_from_slice(&status.to_le_bytes());
        reply[8..].copy_from_slice(&value.to_le_bytes());
        port.send(src, REPLY_TAG | (word(&m, 40) & 0xFFFF_FFFF), &reply)?;
        self.served += 1;
        Ok(true)
    }

    /// Withdraws the receive the server keeps posted between requests, so
    /// that its port can serve again under another server, or close,
    /// without a stale receive. Nobody may send to it any more: a request
    /// that came meanwhile is dropped unanswered.
    pub fn withdraw<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), HostError> {
        if let Some((req, buf)) = self.posted.take() {
            // A receive that already matched cannot be cancelled; either
            // way it completes, and the wait reaps it.
            let _ = port.cancel(req);
            let _ = port.wait(req);
            port.free(buf)?;
        }
        Ok(())
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

impl<P: PortIo> Port<P> {
    /// Performs `op` on the word `offset` of region `key` through the atomic
    /// server at `server` (host-based), and returns the old value.
    pub fn hb_atomic(&mut self, server: Endpoint, key: u64, offset: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, HostError> {
        let reply = self.buffer(REPLY_LEN)?;
        // Names the reply: unique among this process's live buffers.
        let n = reply.addr & 0xFFFF_FFFF;
        let r = self.start_recv(RecvMatch::from(server.node, server.port, REPLY_TAG | n), reply)?;
        let (code, data, compare) = op_code(op.truncated(width));
        let mut m = [0u8; REQUEST_LEN as usize];
        m[0] = code;
        m[1] = width as u8;
        for (i, v) in [(8, key), (16, offset), (24, data), (32, compare), (40, n)] {
            m[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
        let sent = self.send(server, REQUEST_TAG, &m);
        let got = match sent {
            Ok(()) => self.wait(r).and_then(|_| self.read_buffer(reply)),
            Err(e) => {
                let _ = self.cancel(r);
                Err(e)
            }
        };
        self.free(reply)?;
        let b = got?;
        match word(&b, 0) {
            0 => Ok(word(&b, 8)),
            code => Err(HostError::Op(error_of(code))),
        }
    }
}
