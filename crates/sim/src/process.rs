//! Simulated host processes: ordinary async Rust against the host library.
//!
//! A process is an `async` block given a [`Proc`]. It opens ports as
//! [`Port<SimIo>`](outboard_host::Port) and uses the host library
//! unchanged: `start_*`, `test`, and host-based schedules driven by `test`.
//! Every library call charges the profile's host cost to the process's own
//! clock; the process runs ahead on that clock until it awaits, and an
//! await first waits out what it charged (so a process that posts six
//! sends back to back hands them to its NIC 1, 2, ... 6 send-times later,
//! exactly as the dissertation's timing diagrams draw it).
//!
//! Blocking is async: [`Proc::wait`], [`Proc::idle`], [`Proc::compute`].
//! The host library's own blocking `Port::wait` would spin forever in
//! virtual time, so [`SimIo::idle`] panics and says what to use instead.
//! A completion is seen only when the process is inside the library (a
//! `test`, or a `wait` that is polling): a process busy in `compute` does
//! not advance a host-based algorithm, which is exactly what makes such
//! algorithms sensitive to skew.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use outboard_engine::{TokenMirror, 
    AtomicOp, AtomicWidth, Command, CommandError, Completion, Dma, Endpoint, Event, HostBuf, Instant, OpId, OpenError, PortId, RecvMatch,
};
use outboard_host::{CollRequest, HostError, MemoryError, MultiSend, Port, PortIo, Request};
use rand::Rng;

use crate::time::{Dur, Time};
use crate::nic::PioPace;
use crate::world::{Ev, World};

/// A process's handle on the simulation: its clock, its node, its ports.
#[derive(Clone)]
pub struct Proc {
    pub(crate) world: Rc<RefCell<World>>,
    pub(crate) pid: u32,
    pub(crate) node: u32,
}

impl Proc {
    /// This process's node.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Nodes in the simulation.
    pub fn nodes(&self) -> u32 {
        self.world.borrow().nodes.len() as u32
    }

    /// The process's clock (it may be ahead of the rest of the simulation
    /// by host time it has charged and not yet waited out).
    pub fn now(&self) -> Time {
        let w = self.world.borrow();
        w.procs[self.pid as usize].cur().max(w.now)
    }

    pub(crate) fn charge(&self, d: Dur) {
        let mut w = self.world.borrow_mut();
        let now = w.now;
        let p = &mut w.procs[self.pid as usize];
        let t = p.cur().max(now) + d;
        p.set_cur(t);
        p.idle_from = None;
    }

    /// Runs `handler` whenever the engine interrupts this process for
    /// `port` (selective interrupts: `Command::SendMarked` messages while
    /// the port's interrupt flag is on). It runs at the interrupt's
    /// arrival, after `host.interrupt_us`; what its library calls charge
    /// is taken from the process's time (see `Simulation`).
    pub fn on_interrupt(&self, port: PortId, handler: impl Fn() + 'static) {
        let mut w = self.world.borrow_mut();
        let slot = &mut w.nodes[self.node as usize].ports[usize::from(port.0)];
        assert_eq!(slot.owner, Some(self.pid), "a handler for a port this process did not open");
        slot.handler = Some(Rc::new(handler));
    }

    /// Time this process has spent in interrupt handlers so far (delivery
    /// included), and how many it took.
    pub fn handler_time(&self) -> (Dur, u64) {
        let w = self.world.borrow();
        let p = &w.procs[self.pid as usize];
        (p.handler_time, p.interrupts)
    }

    /// Opens port slot `port` on this process's node.
    pub fn open_port(&self, port: u8) -> Result<Port<SimIo>, OpenError> {
        let mut w = self.world.borrow_mut();
        let now = w.now;
        let n = &mut w.nodes[self.node as usize];
        let ep = n.engine.open_port(now.to_engine(), PortId(port))?;
        n.ports[usize::from(port)].owner = Some(self.pid);
        let cfg = n.engine.config();
        let io = SimIo {
            proc: self.clone(),
            ep,
            tokens: TokenMirror::growable(cfg),
            next_private_op: u64::MAX,
            stash: VecDeque::new(),
            recv_bufs: Vec::new(),
        };
        drop(w);
        Ok(Port::new(io))
    }

    /// Computes for `d`: the process is busy and outside the library.
    pub async fn compute(&self, d: Dur) {
        self.charge(d);
        self.settle().await;
    }

    /// Waits out the host time charged so far.
    pub fn settle(&self) -> Sleep {
        self.leave_library();
        Sleep { proc: self.clone(), until: None }
    }

    /// Sleeps until `t` (no-op if it is past).
    pub fn sleep_until(&self, t: Time) -> Sleep {
        self.leave_library();
        Sleep { proc: self.clone(), until: Some(t) }
    }

    /// The process stops waiting inside the library (its handlers no
    /// longer run).
    fn leave_library(&self) {
        self.world.borrow_mut().procs[self.pid as usize].idle_from = None;
    }

    /// Waits until a completion is there for one of this process's ports
    /// (after waiting out charged time). Returns at once if one already is.
    pub fn idle(&self) -> Idle {
        Idle { proc: self.clone() }
    }

    /// A random skew in `0..=max`, from the simulation's seed.
    pub fn skew(&self, max: Dur) -> Dur {
        if max.0 == 0 {
            return Dur::ZERO;
        }
        Dur(self.world.borrow_mut().rng.gen_range(0..=max.0))
    }

    /// Waits for `req`, polling the library as a blocking wait would.
    pub async fn wait(&self, port: &mut Port<SimIo>, req: Request) -> Result<Completion, HostError> {
        loop {
            if let Some(r) = port.test(req) {
                self.settle().await;
                return r;
            }
            self.idle().await;
        }
    }

    /// Waits for a multi-send and frees its buffers, polling the library as
    /// [`Port::wait_multi_send`] would (which blocks, as a simulated process
    /// cannot).
    pub async fn wait_multi_send(&self, port: &mut Port<SimIo>, ms: MultiSend) -> Result<(), HostError> {
        loop {
            if let Some(r) = port.test_multi_send(&ms) {
                self.settle().await;
                return r;
            }
            self.idle().await;
        }
    }

    /// Waits for a collective, polling the library as a blocking
    /// `coll_wait` would (a host-based collective advances only here).
    pub async fn coll_wait(&self, port: &mut Port<SimIo>, mut req: CollRequest) -> Result<Vec<u8>, HostError> {
        loop {
            if let Some(r) = port.coll_test(&mut req) {
                self.settle().await;
                return r;
            }
            self.idle().await;
        }
    }

    /// Waits for every request; results in order.
    pub async fn wait_all(&self, port: &mut Port<SimIo>, reqs: &[Request]) -> Vec<Result<Completion, HostError>> {
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(self.wait(port, *r).await);
        }
        out
    }

    /// Registers `buf` for remote access; returns its key. (`Port::register`
    /// blocks, which a simulated process cannot; this is its async twin.)
    pub async fn register(&self, port: &mut Port<SimIo>, buf: HostBuf) -> Result<u64, HostError> {
        let op = port.io().post_untracked(|op| Command::Register { op, buf })?;
        loop {
            if let Some(e) = port.io().take_event_for(op) {
                self.settle().await;
                return match e.result? {
                    Completion::Registered { key } => Ok(key),
                    other => unreachable!("register completed as {other:?}"),
                };
            }
            self.idle().await;
        }
    }

    /// Sends `data` to `dest` and waits for the send to complete.
    pub async fn send(&self, port: &mut Port<SimIo>, dest: Endpoint, tag: u64, data: &[u8]) -> Result<(), HostError> {
        let buf = port.buffer_from(data)?;
        let r = match port.start_send(dest, tag, buf) {
            Ok(r) => self.wait(port, r).await.map(|_| ()),
            Err(e) => Err(e),
        };
        port.free(buf)?;
        r
    }

    /// Receives one message of at most `max` bytes.
    pub async fn recv(
        &self,
        port: &mut Port<SimIo>,
        matching: RecvMatch,
        max: u32,
    ) -> Result<(Endpoint, u64, Vec<u8>), HostError> {
        let buf = port.buffer(max)?;
        let r = match port.start_recv(matching, buf) {
            Ok(r) => self.wait(port, r).await,
            Err(e) => Err(e),
        };
        let out = match r {
            Ok(Completion::Received { src, tag, len }) => {
                let mut v = port.read_buffer(buf)?;
                v.truncate(len as usize);
                Ok((src, tag, v))
            }
            Ok(other) => unreachable!("receive completed as {other:?}"),
            Err(e) => Err(e),
        };
        port.free(buf)?;
        out
    }
}

/// Future of [`Proc::settle`] and [`Proc::sleep_until`].
pub struct Sleep {
    proc: Proc,
    until: Option<Time>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let mut w = self.proc.world.borrow_mut();
        let pid = self.proc.pid;
        let until = self.until.unwrap_or(w.procs[pid as usize].clock);
        if w.now >= until {
            let now = w.now;
            let p = &mut w.procs[pid as usize];
            p.clock = p.clock.max(now);
            return Poll::Ready(());
        }
        w.wake(pid, until);
        Poll::Pending
    }
}

/// Future of [`Proc::idle`].
pub struct Idle {
    proc: Proc,
}

impl Future for Idle {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let mut w = self.proc.world.borrow_mut();
        let (pid, node) = (self.proc.pid, self.proc.node as usize);
        let now = w.now;
        let clock = w.procs[pid as usize].clock;
        if clock > now {
            w.wake(pid, clock);
            return Poll::Pending;
        }
        let first = w.nodes[node]
            .ports
            .iter()
            .filter(|s| s.owner == Some(pid))
            .filter_map(|s| s.events.front().map(|(t, _)| *t))
            .min();
        if first.is_some_and(|t| t <= now) {
            return Poll::Ready(());
        }
        w.procs[pid as usize].idle_from.get_or_insert(now);
        match first {
            Some(t) => w.wake(pid, t),
            None => w.procs[pid as usize].waiting = true,
        }
        Poll::Pending
    }
}

/// The host library's port interface over a simulated NIC.
///
/// Commands travel to the NIC after the doorbell latency; the engine takes
/// them when its NIC gets to them. So `post` cannot return the engine's
/// verdict: like GM's host library, it keeps its own count of send and
/// receive tokens and checks lengths, and a command the engine still
/// refuses on arrival (a peer declared dead meanwhile) completes with an
/// error event instead.
pub struct SimIo {
    proc: Proc,
    ep: Endpoint,
    tokens: TokenMirror,
    next_private_op: u64,
    stash: VecDeque<Event>,
    /// Posted receives whose buffers the NIC watches (PIO hosts only; see
    /// [`SimIo::take_visible`]).
    recv_bufs: Vec<(OpId, HostBuf)>,
}

impl SimIo {
    /// The process this port belongs to.
    pub fn proc(&self) -> &Proc {
        &self.proc
    }

    /// Posts a command outside the `Port`'s request table (registration,
    /// which `Port` only offers as a blocking call) and returns its
    /// operation id. Ids from here count down from the top so they never
    /// meet `Port`'s, which count up from 1.
    pub fn post_untracked(&mut self, make: impl FnOnce(OpId) -> Command) -> Result<OpId, CommandError> {
        let op = OpId(self.next_private_op);
        self.post(make(op))?;
        self.next_private_op -= 1;
        Ok(op)
    }

    /// Takes the completion of `op` if it is visible, setting aside any
    /// other completion it meets for the `Port` to find later.
    pub fn take_event_for(&mut self, op: OpId) -> Option<Event> {
        if let Some(i) = self.stash.iter().position(|e| e.op == op) {
            return self.stash.remove(i);
        }
        while let Some(e) = self.take_visible() {
            if e.op == op {
                return Some(e);
            }
            self.stash.push_back(e);
        }
        None
    }

    /// Takes the next visible completion from the NIC, charging the host
    /// its cost (or the cost of an empty poll).
    ///
    /// A PIO host (FM) handles a message packet by packet as it lands
    /// (2.4: the handler reassembles it "packet by packet"): while the
    /// process waited inside the library and the message arrived, its
    /// handler copied the packets before the last, so taking the message
    /// charges only what that window did not cover. A host that gets
    /// whole messages (DMA profiles) pays the whole receive here.
    fn take_visible(&mut self) -> Option<Event> {
        let mut w = self.proc.world.borrow_mut();
        let now = w.now;
        let pid = self.proc.pid as usize;
        let clock = w.procs[pid].cur().max(now);
        let node = self.ep.node.0 as usize;
        let slot = &mut w.nodes[node].ports[usize::from(self.ep.port.0)];
        let visible = slot.events.front().is_some_and(|(t, _)| *t <= clock);
        let (cost, ev) = if visible {
            let (at, e) = slot.events.pop_front().expect("checked");
            self.tokens.give_back(e.op);
            let first = match self.recv_bufs.iter().position(|(op, _)| *op == e.op) {
                Some(i) => w.nodes[node].engine.dma_mut().unwatch(self.recv_bufs.swap_remove(i).1),
                None => None,
            };
            // Whether the completion took a message the engine held (any
            // outcome: the mark goes with the completion).
            let slot = &mut w.nodes[node].ports[usize::from(self.ep.port.0)];
            let held = match slot.unexpected.iter().position(|op| *op == e.op) {
                Some(i) => {
                    slot.unexpected.swap_remove(i);
                    true
                }
                None => false,
            };
            let cost = match e.result {
                Ok(Completion::Received { len, .. }) => {
                    let arrived = first.zip(w.procs[pid].idle_from).map(|(f, i)| f.max(i));
                    // A message that waited for its receive: the message
                    // layer's extra copy through its unexpected queue.
                    let late = if held { w.cost.copy(len) } else { Dur::ZERO };
                    Dur(w.cost.recv(len).0 - w.cost.recv_overlap(len, arrived.map_or(Dur::ZERO, |a| at.since(a))).0) + late
                }
                // An offloaded collective's result: the event, and the
                // message layer's copy out of the pinned buffer (MPI level).
                Ok(Completion::Collective { len, .. }) => w.cost.host_event + w.cost.copy(len),
                _ => w.cost.host_event,
            };
            (cost, Some(e))
        } else {
            (w.cost.host_poll, None)
        };
        let p = &mut w.procs[pid];
        p.set_cur(clock + cost);
        if cost > Dur::ZERO {
            p.idle_from = None;
        }
        ev
    }
}

impl PortIo for SimIo {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }

    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        // Send data written by PIO reaches the NIC as the host writes it
        // (packet by packet, FM's streams): the command is visible once
        // the first packet is, and the rest of the buffer becomes readable
        // at the host's PIO pace (see `nic::NicMemory`).
        let pio = match cmd {
            Command::Send { buf, .. } | Command::RdmaWrite { buf, .. } | Command::MultiSend { buf, .. }
                if self.proc.world.borrow().cost.pio_send =>
            {
                Some(buf)
            }
            _ => None,
        };
        let cost = {
            let w = self.proc.world.borrow();
            let c = &w.cost;
            // Tokens and lengths first: a refused command costs nothing.
            self.tokens.take(&cmd)?;
            match cmd {
                Command::Send { buf, .. }
                | Command::Announce { buf, .. }
                | Command::SendMarked { buf, .. }
                | Command::RdmaWrite { buf, .. }
                | Command::MultiSend { buf, .. } => c.send(buf.len),
                // An atomic is one descriptor without data, like a read.
                Command::RdmaRead { .. } | Command::Atomic { .. } => c.host_send,
                Command::Recv { .. } => c.host_post_recv,
                // Starting an offloaded collective is one descriptor, like a
                // send without data to copy (but the message layer's copy of
                // the contribution into a pinned buffer, at the MPI level).
                Command::Collective { send, .. } => c.host_send + c.copy(send.len),
                // A protocol barrier: one descriptor, no contribution.
                Command::NicBarrier { .. } => c.host_send,
                Command::Register { .. }
                | Command::Deregister { .. }
                | Command::Cancel { .. }
                | Command::CreateGroup { .. }
                | Command::DestroyGroup { .. }
                | Command::SetSchedule { .. }
                | Command::NicvmLoad { .. }
                | Command::NicvmPurge { .. }
                | Command::NicvmList { .. }
                | Command::SetInterruptFlag { .. } => c.host_event,
                // A packet handed to a module: one send descriptor with data.
                Command::NicvmSend { buf, .. } => c.send(buf.len),
            }
        };
        let start = self.proc.now();
        self.proc.charge(cost);
        let mut w = self.proc.world.borrow_mut();
        if let Command::Recv { op, buf, .. } = cmd {
            if w.cost.pio_send && buf.len > w.cost.packet_payload {
                w.nodes[self.ep.node.0 as usize].engine.dma_mut().watch(buf);
                self.recv_bufs.push((op, buf));
            }
        }
        let c = &w.cost;
        let (at, pio) = match pio {
            Some(buf) => {
                let pace = PioPace { start: start + c.host_send + c.copy(buf.len) + c.doorbell, per_byte: c.host_send_byte };
                (start + c.send_visible(buf.len) + c.doorbell, Some(pace))
            }
            None => (w.procs[self.proc.pid as usize].cur() + c.doorbell, None),
        };
        w.queue.push(at, Ev::Command { node: self.ep.node.0, port: self.ep.port, cmd, pio });
        Ok(())
    }

    fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.stash.pop_front() {
            return Some(e);
        }
        self.take_visible()
    }

    fn now(&self) -> Instant {
        self.proc.now().to_engine()
    }

    fn eager_threshold(&self) -> Option<u32> {
        self.proc.world.borrow().cost.rendezvous_from.map(|n| n.saturating_sub(1))
    }

    fn rendezvous_protocol(&self) -> outboard_host::RendezvousProtocol {
        if self.proc.world.borrow().cost.rendezvous_write {
            outboard_host::RendezvousProtocol::Write
        } else {
            outboard_host::RendezvousProtocol::Read
        }
    }

    fn allreduce_doubling_max(&self) -> usize {
        let measured = self.proc.world.borrow().cost.tuning.allreduce_doubling_max;
        measured.map_or_else(outboard_host::runtime_allreduce_doubling_max, |b| b as usize)
    }

    fn coll_max_len(&self) -> u32 {
        self.proc.world.borrow().nodes[self.ep.node.0 as usize].engine.max_collective_len()
    }

    fn max_message(&self) -> u32 {
        self.tokens.max_message()
    }

    fn idle(&mut self) {
        panic!(
            "a blocking host-library wait inside the simulator would never let virtual time advance: \
             use `proc.wait(&mut port, req).await` (or `proc.idle().await` between `test` calls)"
        );
    }

    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        let mut w = self.proc.world.borrow_mut();
        Ok(w.nodes[self.ep.node.0 as usize].engine.dma_mut().host().alloc(len))
    }

    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        let mut w = self.proc.world.borrow_mut();
        w.nodes[self.ep.node.0 as usize].engine.dma_mut().host().free(buf);
        Ok(())
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        let mut w = self.proc.world.borrow_mut();
        w.nodes[self.ep.node.0 as usize]
            .engine
            .dma_mut()
            .host()
            .read(self.ep.port, addr, out)
            .map_err(|_| MemoryError::Invalid { addr, len: out.len() })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let mut w = self.proc.world.borrow_mut();
        w.nodes[self.ep.node.0 as usize]
            .engine
            .dma_mut()
            .host()
            .write(self.ep.port, addr, data)
            .map_err(|_| MemoryError::Invalid { addr, len: data.len() })
    }

    /// The host's own atomic on its memory: one locked instruction on a
    /// word the process polls, priced as one poll of its memory
    /// (`host.poll_us`).
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        let cost = self.proc.world.borrow().cost.host_poll;
        self.proc.charge(cost);
        let mut w = self.proc.world.borrow_mut();
        w.nodes[self.ep.node.0 as usize]
            .engine
            .dma_mut()
            .host()
            .atomic(self.ep.port, addr, width, op)
            .map_err(|_| MemoryError::Invalid { addr, len: width.bytes() as usize })
    }
}
