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

use outboard_engine::{Command, Completion, Endpoint, HostBuf, MemberList};

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
        let list = self.buffer_from(&MemberList::from_endpoints(dests.iter().copied()).encode())?;
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
        while let Some(e) = self.next_event() {
            let found = e.op == req.op();
            self.record(e);
            if found {
                return self.take(req);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use outboard_engine::{
        CommandError, Event, Instant, NodeId, OpError, OpId, PortId, VecMemory,
    };

    use super::*;
    use crate::MemoryError;

    /// A port whose engine is a script: it keeps what was posted and hands
    /// out the events the test queued.
    struct Scripted {
        mem: VecMemory,
        posted: Vec<Command>,
        events: VecDeque<Event>,
        refuse: Option<CommandError>,
    }

    impl Scripted {
        fn new() -> Self {
            Scripted {
                mem: VecMemory::new(),
                posted: Vec::new(),
                events: VecDeque::new(),
                refuse: None,
            }
        }
    }

    impl PortIo for Scripted {
        fn endpoint(&self) -> Endpoint {
            ep(0)
        }
        fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
            if let Some(e) = self.refuse {
                return Err(e);
            }
            self.posted.push(cmd);
            Ok(())
        }
        fn poll_event(&mut self) -> Option<Event> {
            self.events.pop_front()
        }
        fn now(&self) -> Instant {
            Instant::ZERO
        }
        fn idle(&mut self) {}
        fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
            Ok(self.mem.alloc(len))
        }
        fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
            self.mem.free(buf);
            Ok(())
        }
        fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
            let b = HostBuf {
                addr,
                len: out.len() as u32,
            };
            out.copy_from_slice(self.mem.bytes(b));
            Ok(())
        }
        fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
            let b = HostBuf {
                addr,
                len: data.len() as u32,
            };
            self.mem.bytes_mut(b).copy_from_slice(data);
            Ok(())
        }
    }

    fn ep(node: u32) -> Endpoint {
        Endpoint {
            node: NodeId(node),
            port: PortId(0),
            gen: 1,
        }
    }

    fn done(op: OpId, result: Result<Completion, OpError>) -> Event {
        Event {
            port: PortId(0),
            op,
            result,
        }
    }

    #[test]
    fn a_multi_send_posts_the_list_and_payload_once_and_frees_them_when_done() {
        let mut port = Port::new(Scripted::new());
        let dests = [ep(1), ep(2), ep(3)];
        let ms = port.start_multi_send(&dests, 5, b"hello").unwrap();
        let Command::MultiSend { op, dests: list, tag, buf } = port.io().posted[0] else {
            panic!("posted {:?}", port.io().posted);
        };
        assert_eq!((op, tag), (ms.request().op(), 5));
        assert_eq!(port.read_buffer(list).unwrap(), MemberList::from_endpoints(dests.iter().copied()).encode());
        assert_eq!(port.read_buffer(buf).unwrap(), b"hello");
        assert_eq!(port.test_multi_send(&ms), None, "not done yet");
        port.io().events.push_back(done(op, Ok(Completion::Sent)));
        assert_eq!(port.test_multi_send(&ms), Some(Ok(())));
        assert_eq!(port.io_ref().mem.live(), 0, "both buffers freed");
        assert_eq!(
            port.test_multi_send(&ms),
            Some(Err(HostError::UnknownRequest)),
            "handed back once"
        );
    }

    #[test]
    fn a_refused_or_failed_multi_send_leaves_no_buffer_behind() {
        let mut port = Port::new(Scripted::new());
        port.io().refuse = Some(CommandError::NoSendToken);
        assert_eq!(
            port.start_multi_send(&[ep(1)], 1, &[0; 64]).unwrap_err(),
            HostError::Command(CommandError::NoSendToken)
        );
        assert_eq!(port.io_ref().mem.live(), 0);
        port.io().refuse = None;
        let ms = port.start_multi_send(&[ep(1)], 1, &[0; 64]).unwrap();
        let fail = done(ms.request().op(), Err(OpError::PortGone));
        port.io().events.push_back(fail);
        assert_eq!(
            port.wait_multi_send(ms),
            Err(HostError::Op(OpError::PortGone))
        );
        assert_eq!(port.io_ref().mem.live(), 0);
    }

    #[test]
    fn testing_takes_completions_up_to_its_own_and_keeps_the_others() {
        let mut port = Port::new(Scripted::new());
        let one = port.buffer(8).unwrap();
        let send = port.start_send(ep(1), 1, one).unwrap();
        let ms = port.start_multi_send(&[ep(1)], 2, &[1; 8]).unwrap();
        let later = done(OpId(999), Ok(Completion::Sent));
        port.io().events.extend([
            done(send.op(), Ok(Completion::Sent)),
            done(ms.request().op(), Ok(Completion::Sent)),
            later,
        ]);
        assert_eq!(port.test_multi_send(&ms), Some(Ok(())));
        assert_eq!(
            port.io_ref().events,
            [later],
            "no poll past the multi-send's completion"
        );
        // The send's completion waited in the request table.
        assert_eq!(port.take(send), Some(Ok(Completion::Sent)));
    }
}
