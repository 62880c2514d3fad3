//! Multi-send: one message to many destinations, handed to the engine once.
//!
//! The host writes the payload and the destination list once; the engine
//! sends a copy to each destination back to back (the dissertation's 2.1
//! and 2.5: the host's per-copy send cost is what a multi-send saves). An
//! application reaches it through these calls, as it reaches sends and
//! receives through [`Port`]'s, and never posts the engine's
//! `Command::MultiSend` itself: the library owns the buffers the engine
//! reads (the encoded destination list and the payload copy) and the
//! operation name, so it frees them when the multi-send completes and keeps
//! its request table whole.

use outboard_engine::{encode_members, Command, Completion, Endpoint, HostBuf};

use crate::port::{HostError, Port, Request};
use crate::PortIo;

/// A multi-send under way, from [`Port::start_multi_send`]: its request
/// and the two buffers the engine reads until it completes.
#[derive(Debug)]
#[must_use = "a multi-send must be tested or waited for (its buffers are freed then)"]
pub struct MultiSend {
    req: Request,
    list: HostBuf,
    data: HostBuf,
}

impl MultiSend {
    /// The request the engine completes once every copy was accepted.
    pub fn request(&self) -> Request {
        self.req
    }
}

impl<P: PortIo> Port<P> {
    /// Starts sending `data` with `tag` to every endpoint of `dests` by one
    /// engine multi-send: the payload and the destination list are copied
    /// into buffers the engine reads, once. Uses one send token; refused
    /// like a send when none is left (the buffers are freed then).
    pub fn start_multi_send(
        &mut self,
        dests: &[Endpoint],
        tag: u64,
        data: &[u8],
    ) -> Result<MultiSend, HostError> {
        let list = self.buffer_from(&encode_members(dests))?;
        let buf = match self.buffer_from(data) {
            Ok(b) => b,
            Err(e) => {
                self.free(list)?;
                return Err(e);
            }
        };
        match self.start(|op| Command::MultiSend {
            op,
            dests: list,
            tag,
            buf,
        }) {
            Ok(req) => Ok(MultiSend {
                req,
                list,
                data: buf,
            }),
            Err(e) => {
                self.free(buf)?;
                self.free(list)?;
                Err(e)
            }
        }
    }

    /// Whether multi-send `ms` finished; if so, frees its buffers and hands
    /// its result back (once: a later call answers
    /// [`HostError::UnknownRequest`]).
    ///
    /// It takes the engine's completions up to this multi-send's and no
    /// further (the others wait in the request table as [`Port::test`]
    /// leaves them): a caller that found its completion pays no empty poll
    /// after it. Collectives under way advance as in every test.
    pub fn test_multi_send(&mut self, ms: &MultiSend) -> Option<Result<(), HostError>> {
        let taken = self.poll_until(ms.req);
        self.coll_advance();
        let result = taken?;
        let freed = self.free(ms.data).and_then(|()| self.free(ms.list));
        Some(match result {
            Ok(Completion::Sent) => freed,
            Ok(other) => unreachable!("multi-send completed as {other:?}"),
            Err(e) => Err(e),
        })
    }

    /// Blocks until multi-send `ms` finishes; frees its buffers.
    pub fn wait_multi_send(&mut self, ms: MultiSend) -> Result<(), HostError> {
        loop {
            if let Some(r) = self.test_multi_send(&ms) {
                return r;
            }
            self.io().idle();
        }
    }

    /// Moves the engine's completions into the request table until `req`'s
    /// is among them or none is left; takes `req`'s if it is there.
    fn poll_until(&mut self, req: Request) -> Option<Result<Completion, HostError>> {
        if let Some(r) = self.take(req) {
            return Some(r);
        }
        while let Some(e) = self.io().poll_event() {
            let found = e.op == req.op();
            self.record(e);
            if found {
                return self.take(req);
            }
        }
        None
    }
}
