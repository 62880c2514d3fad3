//! Atomic operations for applications: remote ones the engines perform
//! (split-phase and blocking, the value returned in the event or written
//! straight into host memory - the dissertation's two forms, 5.2.2), and
//! local ones on a word of this process's own registered memory, atomic
//! with respect to the remote ones.

use outboard_engine::{AtomicOp, AtomicReturn, AtomicWidth, Command, Completion, Endpoint, HostBuf, OpError};

use crate::{HostError, Port, PortIo, Request};

/// A word of a remote registered region: the dissertation's (node, port,
/// address) triple, with the region's key and the word's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteWord {
    /// The port owning the region.
    pub ep: Endpoint,
    /// The region's key.
    pub key: u64,
    /// Offset of the word inside the region (a multiple of its width).
    pub offset: u64,
    /// 32 or 64 bits.
    pub width: AtomicWidth,
}

/// A direct-form atomic under way: its old value and a flag land in
/// `result` (value at 0, flag at 8), where the host polls its own memory.
#[derive(Debug)]
#[must_use = "a direct atomic must be waited for"]
pub struct DirectAtomic {
    req: Request,
    result: HostBuf,
}

impl DirectAtomic {
    /// The engine-level request behind it.
    pub fn request(&self) -> Request {
        self.req
    }
}

pub(crate) fn value_of(c: Completion) -> u64 {
    match c {
        Completion::Atomic { value } => value,
        other => unreachable!("an atomic completed as {other:?}"),
    }
}

impl<P: PortIo> Port<P> {
    /// Starts `op` on the remote word `w`; the old value comes with the
    /// completion ([`Port::atomic_result`]). The request's `OpId` is the
    /// tag that matches the value to the call.
    pub fn start_atomic(&mut self, w: RemoteWord, op: AtomicOp) -> Result<Request, HostError> {
        self.start(|id| Command::Atomic {
            op: id,
            dest: w.ep,
            key: w.key,
            offset: w.offset,
            width: w.width,
            atomic: op,
            ret: AtomicReturn::Event,
        })
    }

    /// The old value of a finished atomic request (`None` while under way).
    pub fn atomic_result(&mut self, req: Request) -> Option<Result<u64, HostError>> {
        self.test(req).map(|r| r.map(value_of))
    }

    /// Performs `op` on `w` and returns the word's old value.
    pub fn atomic(&mut self, w: RemoteWord, op: AtomicOp) -> Result<u64, HostError> {
        let r = self.start_atomic(w, op)?;
        self.wait(r).map(value_of)
    }

    /// Blocking fetch-and-add.
    pub fn fetch_add(&mut self, w: RemoteWord, add: u64) -> Result<u64, HostError> {
        self.atomic(w, AtomicOp::FetchAdd(add))
    }

    /// Blocking swap (fetch-and-write).
    pub fn swap(&mut self, w: RemoteWord, value: u64) -> Result<u64, HostError> {
        self.atomic(w, AtomicOp::Swap(value))
    }

    /// Blocking compare-and-swap: `w` becomes `new` if it held `compare`;
    /// returns the old value (equal to `compare` when it swapped).
    pub fn compare_swap(&mut self, w: RemoteWord, compare: u64, new: u64) -> Result<u64, HostError> {
        self.atomic(w, AtomicOp::CompareSwap { compare, new })
    }

    /// Starts `op` on `w` in the direct form: the engine writes the old
    /// value into this process's memory and then sets a flag there, which
    /// [`Port::test_direct`] reads without going through the event queue.
    pub fn start_atomic_direct(&mut self, w: RemoteWord, op: AtomicOp) -> Result<DirectAtomic, HostError> {
        let result = self.buffer(16)?;
        let ret = AtomicReturn::Direct { value: result.addr, flag: result.addr + 8 };
        let started = self.start(|id| Command::Atomic {
            op: id,
            dest: w.ep,
            key: w.key,
            offset: w.offset,
            width: w.width,
            atomic: op,
            ret,
        });
        match started {
            Ok(req) => Ok(DirectAtomic { req, result }),
            Err(e) => {
                self.free(result)?;
                Err(e)
            }
        }
    }

    /// The old value, once the flag is set. A failed operation never sets
    /// it: its error comes from the request ([`Port::wait_direct`]).
    pub fn test_direct(&mut self, d: &DirectAtomic) -> Result<Option<u64>, HostError> {
        let mut b = [0u8; 16];
        self.io_ref().read(d.result.addr, &mut b)?;
        let (value, flag) = b.split_at(8);
        if u64::from_ne_bytes(flag.try_into().expect("8 bytes")) == 0 {
            return Ok(None);
        }
        Ok(Some(u64::from_ne_bytes(value.try_into().expect("8 bytes"))))
    }

    /// One look at a direct-form atomic, for callers that cannot block
    /// the port while it is under way (the C ABI's split-phase requests):
    /// `None` while the flag is unset and no failure was reported; once it
    /// finished, its old value or error, with the result buffer freed and
    /// the request's event reaped, after which `d` must not be looked at
    /// again.
    pub fn poll_direct(&mut self, d: &DirectAtomic) -> Option<Result<u64, HostError>> {
        let out = match self.test_direct(d) {
            // The event follows the flag; reap it so the token returns.
            Ok(Some(v)) => self.wait(d.req).map(|_| v),
            Ok(None) => match self.test(d.req)? {
                Ok(_) => self.test_direct(d).and_then(|v| v.ok_or(HostError::Op(OpError::DmaFault))),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let freed = self.free(d.result);
        Some(out.and_then(|v| freed.map(|()| v)))
    }

    /// Waits for a direct-form atomic: polls the flag in host memory (the
    /// request's event is reaped once the flag is seen, or reports the
    /// failure).
    pub fn wait_direct(&mut self, d: DirectAtomic) -> Result<u64, HostError> {
        loop {
            if let Some(r) = self.poll_direct(&d) {
                return r;
            }
            self.io().idle();
        }
    }

    /// Performs `op` on the `width` word at `offset` of `buf`, a buffer of
    /// this process (registered or about to be), atomically with respect to
    /// the engine's remote atomics on it; returns the old value.
    pub fn local_atomic(&mut self, buf: HostBuf, offset: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, HostError> {
        let end = offset.checked_add(width.bytes()).ok_or(OpError::OutOfBounds)?;
        if end > u64::from(buf.len) {
            return Err(OpError::OutOfBounds.into());
        }
        let addr = buf.addr + offset;
        if addr % width.bytes() != 0 {
            return Err(OpError::Misaligned.into());
        }
        Ok(self.io().atomic(addr, width, op.truncated(width))?)
    }
}
