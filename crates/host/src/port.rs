use outboard_engine::{
    Command, CommandError, Completion, Endpoint, Event, HostBuf, OpError, OpId, RecvMatch,
};
use rustc_hash::FxHashMap;
use thiserror::Error;

use crate::coll::{CollState, CollectiveError};
use crate::{MemoryError, PortIo};

/// An operation under way, returned by the `start_*` calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[must_use = "a request must be tested or waited for"]
pub struct Request(pub(crate) OpId);

impl Request {
    /// The engine-level operation name.
    pub fn op(self) -> OpId {
        self.0
    }
}

/// Why a host-library call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HostError {
    /// The engine refused the command on the spot.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The operation failed.
    #[error(transparent)]
    Op(#[from] OpError),
    /// Host memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// `test`/`wait` on a request this port does not know (already waited
    /// for, or from another port).
    #[error("unknown request")]
    UnknownRequest,
    /// A collective call refused by the host library.
    #[error("collective: {0}")]
    Coll(#[from] CollectiveError),
}

impl HostError {
    /// The engine's collective error behind this one, if that is why the
    /// call failed: a collective's completion carries it
    /// (`OpError::Collective`), and the host library passes it on
    /// (`CollectiveError::Engine`); callers look through both alike.
    pub fn coll_error(&self) -> Option<&outboard_engine::CollError> {
        match self {
            HostError::Op(OpError::Collective(c)) | HostError::Coll(CollectiveError::Engine(c)) => Some(c),
            _ => None,
        }
    }

    /// The node whose process failed, when that is why this call failed:
    /// ULFM's `MPI_ERR_PROC_FAILED` (the MPI fault-tolerance proposal's
    /// class for "a process this operation needs has failed"). The node is
    /// the one that died first, as the job learned it (a failure notice
    /// names the dead node, not the survivor that noticed), so an
    /// application can tell whom to exclude. A receive from any source that
    /// was pending at a death fails with `OpError::ProcFailedPending`
    /// (ULFM's `MPI_ERR_PROC_FAILED_PENDING`), also reported here.
    pub fn failed_process(&self) -> Option<outboard_engine::NodeId> {
        match self {
            HostError::Op(OpError::PeerUnreachable(node) | OpError::ProcFailedPending(node)) => Some(*node),
            _ => None,
        }
    }
}

/// An open port of the host library: split-phase operations over a
/// [`PortIo`].
pub struct Port<P: PortIo> {
    pub(crate) io: P,
    next_op: u64,
    /// Requests started and not yet handed back, with their completion once
    /// it arrived. A hash map (never iterated): entered and left once per
    /// operation and looked up on every test, where a tree map's node
    /// work was a tenth of a simulated host-based barrier's host side.
    pub(crate) pending: FxHashMap<OpId, Option<Result<Completion, OpError>>>,
    /// Collectives under way (both modes); host-based ones advance in
    /// [`Port::progress`].
    pub(crate) coll: CollState<P>,
    /// Large messages by RDMA read (module `rendezvous`).
    pub(crate) rndv: crate::rendezvous::Rendezvous,
    /// Messages to and from the node's other ports through shared memory
    /// (module `local`).
    pub(crate) local: crate::local::LocalState,
    /// Application-bypass groups on this port (module `bypass`).
    pub(crate) bypass: crate::bypass::BypassSet,
}

impl<P: PortIo> Port<P> {
    /// Wraps an open port.
    pub fn new(io: P) -> Self {
        let rndv_cfg = crate::RendezvousConfig { threshold: io.eager_threshold(), protocol: io.rendezvous_protocol(), ..Default::default() };
        let mut rndv = crate::rendezvous::Rendezvous::default();
        rndv.cfg = rndv_cfg;
        Port {
            io,
            next_op: 1,
            pending: FxHashMap::default(),
            coll: CollState::default(),
            rndv,
            local: Default::default(),
            bypass: Default::default(),
        }
    }

    /// This port's endpoint.
    pub fn endpoint(&self) -> Endpoint {
        self.io.endpoint()
    }

    /// The transport underneath.
    pub fn io(&mut self) -> &mut P {
        &mut self.io
    }

    /// The transport underneath, shared.
    pub fn io_ref(&self) -> &P {
        &self.io
    }

    pub(crate) fn start(
        &mut self,
        make: impl FnOnce(OpId) -> Command,
    ) -> Result<Request, HostError> {
        let op = OpId(self.next_op);
        let cmd = make(op);
        if self.hold_behind_earlier_sends(cmd) {
            self.next_op += 1;
            self.pending.insert(op, None);
            return Ok(Request(op));
        }
        loop {
            match self.io.post(cmd) {
                Ok(()) => break,
                // A token the rendezvous path holds for a read or a finish
                // comes back without the application doing anything: wait
                // for it rather than refuse the application's command.
                Err(e @ (CommandError::NoSendToken | CommandError::NoRecvToken)) if self.rndv_holds(e) => {
                    self.progress();
                    self.io.idle();
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.next_op += 1;
        self.pending.insert(op, None);
        Ok(Request(op))
    }

    /// An operation name no request has had.
    pub(crate) fn fresh_op(&mut self) -> OpId {
        let op = OpId(self.next_op);
        self.next_op += 1;
        op
    }

    /// Starts sending `buf` to `dest` with `tag`: through shared memory
    /// to another port of this node when the transport links them (module
    /// `local`), else eagerly, or by rendezvous when it is longer than the
    /// port's threshold ([`Port::set_rendezvous`]). Either way the request
    /// completes when `buf` may be reused.
    pub fn start_send(
        &mut self,
        dest: Endpoint,
        tag: u64,
        buf: HostBuf,
    ) -> Result<Request, HostError> {
        if self.local_sends_to(dest, tag) {
            return self.local_send(dest, tag, buf);
        }
        if self.by_rendezvous(buf.len) {
            return self.start_rendezvous_send(dest, tag, buf);
        }
        self.start(|op| Command::Send { op, dest, tag, buf })
    }

    /// Starts a receive into `buf`. It takes eager and rendezvous messages
    /// alike; a rendezvous message's bytes are read straight into `buf`,
    /// and so are a message's from another port of this node through
    /// shared memory.
    pub fn start_recv(&mut self, matching: RecvMatch, buf: HostBuf) -> Result<Request, HostError> {
        if let Some(r) = self.local_recv(matching, buf)? {
            return Ok(r);
        }
        self.start_engine_recv(matching, buf)
    }

    /// Posts a receive to the engine.
    pub(crate) fn start_engine_recv(&mut self, matching: RecvMatch, buf: HostBuf) -> Result<Request, HostError> {
        let r = self.start(|op| Command::Recv { op, matching, buf })?;
        self.rndv_watch_recv(r.0, buf);
        Ok(r)
    }

    /// Starts an RDMA write of `buf` into region `key` of `dest` at `offset`.
    pub fn start_write(
        &mut self,
        dest: Endpoint,
        key: u64,
        offset: u64,
        buf: HostBuf,
    ) -> Result<Request, HostError> {
        self.start(|op| Command::RdmaWrite {
            op,
            dest,
            key,
            offset,
            buf,
        })
    }

    /// Starts an RDMA read from region `key` of `dest` at `offset` into `buf`.
    pub fn start_read(
        &mut self,
        dest: Endpoint,
        key: u64,
        offset: u64,
        buf: HostBuf,
    ) -> Result<Request, HostError> {
        self.start(|op| Command::RdmaRead {
            op,
            dest,
            key,
            offset,
            buf,
        })
    }

    /// Registers `buf` for remote access; returns its key. Rendezvous sends
    /// from inside `buf` use this registration too.
    pub fn register(&mut self, buf: HostBuf) -> Result<u64, HostError> {
        let r = self.start(|op| Command::Register { op, buf })?;
        match self.wait(r)? {
            Completion::Registered { key } => {
                self.rndv_registered(buf, key);
                Ok(key)
            }
            other => unreachable!("register completed as {other:?}"),
        }
    }

    /// Withdraws a registration.
    pub fn deregister(&mut self, key: u64) -> Result<(), HostError> {
        self.rndv_deregistered(key);
        let r = self.start(|op| Command::Deregister { op, key })?;
        self.wait(r).map(|_| ())
    }

    /// Cancels a posted receive not yet matched, or a send waiting to be
    /// retried (for a rendezvous send: whose announcement waits to be
    /// retried). The request then completes with [`OpError::Cancelled`].
    /// A receive that took a rendezvous announcement and is reading its
    /// data can no longer be cancelled.
    pub fn cancel(&mut self, req: Request) -> Result<(), HostError> {
        if let Some(r) = self.local_cancel(req) {
            return r;
        }
        if self.cancel_held(req.0).is_some() {
            return Ok(());
        }
        if let Some(r) = self.rndv_cancel(req) {
            return r;
        }
        if self.rndv_reading(req.0) {
            return Err(OpError::NotCancellable.into());
        }
        let target = req.0;
        let r = self.start(|op| Command::Cancel { op, target })?;
        self.wait(r).map(|_| ())
    }

    /// Moves every completion the engine has for this port into the pending
    /// table, then advances the collectives under way (host-based ones run
    /// only here, so every `test`/`wait` of any request drives them).
    pub fn progress(&mut self) {
        self.rndv_retry();
        self.poll_events();
        self.local_progress();
        self.coll_advance();
        self.bypass_pump();
    }

    /// Moves every completion the engine has into the pending table.
    pub(crate) fn poll_events(&mut self) {
        while let Some(e) = self.next_event() {
            self.record(e);
        }
    }

    /// Puts a completion into the pending table (dropped if its request
    /// was forgotten).
    pub(crate) fn record(&mut self, e: Event) {
        if crate::bypass::is_bypass(e.op) {
            self.bypass.on_event(e);
            return;
        }
        let Some(result) = self.rndv_event(e.op, e.result) else { return };
        if let Some(slot) = self.pending.get_mut(&e.op) {
            *slot = Some(result);
        }
    }

    /// Forgets a request: its completion, whenever it comes, is dropped.
    pub(crate) fn forget(&mut self, req: Request) {
        self.pending.remove(&req.0);
    }

    /// Whether `req` finished, without polling the engine.
    pub(crate) fn take(&mut self, req: Request) -> Option<Result<Completion, HostError>> {
        match self.pending.get(&req.0) {
            None => Some(Err(HostError::UnknownRequest)),
            Some(None) => None,
            Some(Some(_)) => {
                let r = self.pending.remove(&req.0).flatten().expect("checked");
                Some(r.map_err(HostError::Op))
            }
        }
    }

    /// Whether `req` finished; hands its result back (once) if so.
    pub fn test(&mut self, req: Request) -> Option<Result<Completion, HostError>> {
        self.progress();
        self.take(req)
    }

    /// Blocks until `req` finishes.
    pub fn wait(&mut self, req: Request) -> Result<Completion, HostError> {
        loop {
            if let Some(r) = self.test(req) {
                return r;
            }
            self.io.idle();
        }
    }

    /// Blocks until every request finishes; results in the same order.
    pub fn wait_all(&mut self, reqs: &[Request]) -> Vec<Result<Completion, HostError>> {
        reqs.iter().map(|r| self.wait(*r)).collect()
    }

    /// Allocates a DMA-reachable buffer holding `data`.
    pub fn buffer_from(&mut self, data: &[u8]) -> Result<HostBuf, HostError> {
        let len =
            u32::try_from(data.len()).map_err(|_| MemoryError::Exhausted { len: u32::MAX })?;
        let b = self.io.alloc_unzeroed(len)?;
        self.io.write(b.addr, data)?;
        Ok(b)
    }

    /// Allocates a zeroed DMA-reachable buffer.
    pub fn buffer(&mut self, len: u32) -> Result<HostBuf, HostError> {
        Ok(self.io.alloc(len)?)
    }

    /// Allocates a DMA-reachable buffer whose bytes are unspecified until
    /// written: for a receive whose message is read out up to its length.
    pub fn buffer_unzeroed(&mut self, len: u32) -> Result<HostBuf, HostError> {
        Ok(self.io.alloc_unzeroed(len)?)
    }

    /// Copies a buffer's contents out.
    pub fn read_buffer(&self, buf: HostBuf) -> Result<Vec<u8>, HostError> {
        let mut v = vec![0; buf.len as usize];
        self.io.read(buf.addr, &mut v)?;
        Ok(v)
    }

    /// Frees a buffer (and the registration cache's entries inside it).
    pub fn free(&mut self, buf: HostBuf) -> Result<(), HostError> {
        self.rndv_freed(buf);
        Ok(self.io.free(buf)?)
    }

    /// Blocking send.
    pub fn send(&mut self, dest: Endpoint, tag: u64, data: &[u8]) -> Result<(), HostError> {
        let buf = self.buffer_from(data)?;
        let r = self.start_send(dest, tag, buf).and_then(|r| self.wait(r));
        self.io.free(buf)?;
        r.map(|_| ())
    }

    /// Blocking receive of at most `max` bytes: the data and who sent it.
    pub fn recv(
        &mut self,
        matching: RecvMatch,
        max: u32,
    ) -> Result<(Endpoint, u64, Vec<u8>), HostError> {
        let buf = self.buffer(max)?;
        let r = self.start_recv(matching, buf).and_then(|r| self.wait(r));
        let out = match r {
            Ok(Completion::Received { src, tag, len }) => {
                let mut v = vec![0; len as usize];
                self.io
                    .read(buf.addr, &mut v)
                    .map(|()| (src, tag, v))
                    .map_err(HostError::from)
            }
            Ok(other) => unreachable!("receive completed as {other:?}"),
            Err(e) => Err(e),
        };
        self.io.free(buf)?;
        out
    }
}
