//! The host's handle to a port on the local engine: the runtime's
//! implementation of the host library's [`PortIo`].

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use outboard_engine::{AtomicOp, AtomicWidth, Command, CommandError, Endpoint, Event, HostBuf, Instant, Stats, TokenMirror};
use outboard_host::{MemoryError, PortIo};

use crate::driver::{PortShared, TransportStats, Turn};
use crate::node_engine::client::RemotePort;
use crate::outstanding::Outstanding;
use crate::node::NodeShared;
use crate::progress::Progress;
use crate::ring::{Consumer, Producer};
use crate::wait_pacer::{WaitPacer, WaitStep};

/// Longest a host thread parks before it looks at its ring again on its own
/// (a safety net: the engine unparks it when events arrive).
const PARK_MAX: Duration = Duration::from_millis(10);

/// Host-assisted: how long one preemption keeps this port's waits short.
const LOADED_FOR: Duration = Duration::from_millis(100);

/// A port opened on an in-process [`crate::Node`]: commands go to the
/// engine through a ring, completions come back through another, buffers
/// live in the node's DMA-reachable memory.
pub struct LocalPort {
    node: Arc<NodeShared>,
    ep: Endpoint,
    commands: Producer<Command>,
    events: Consumer<Event>,
    shared: Arc<PortShared>,
    /// The port's tokens as the host sees them, so that a command the
    /// engine would refuse for want of one is refused at `post`,
    /// synchronously, as [`PortIo::post`] promises, even though the engine
    /// sees the command only later through the ring.
    tokens: TokenMirror,
    /// When the current run of `idle` calls began.
    idle_since: Option<Instant>,
    idle_calls: u32,
    /// Host-assisted: when a wait stops driving the engine and sleeps.
    pacer: WaitPacer,
    /// Operations posted and not completed, to fail if the engine is lost.
    outstanding: Outstanding,
}

impl LocalPort {
    pub(crate) fn new(
        node: Arc<NodeShared>,
        ep: Endpoint,
        commands: Producer<Command>,
        events: Consumer<Event>,
        shared: Arc<PortShared>,
    ) -> LocalPort {
        let tokens = TokenMirror::new(&node.config);
        let pacer = match node.progress {
            Progress::HostAssisted { preempted_spin, preempted_gap, .. } => WaitPacer::new(preempted_spin, preempted_gap, LOADED_FOR),
            _ => WaitPacer::new(Duration::MAX, Duration::MAX, Duration::ZERO),
        };
        let outstanding = Outstanding::for_port(&node.config);
        LocalPort { node, ep, commands, events, shared, tokens, idle_since: None, idle_calls: 0, pacer, outstanding }
    }

    /// Where this port's interrupts go (`None`: nowhere).
    pub(crate) fn set_irq(&self, t: Option<crate::interrupt::Target>) {
        *self.shared.irq.lock().unwrap_or_else(PoisonError::into_inner) = t;
    }

    /// The progress policy of the node.
    pub fn progress(&self) -> Progress {
        self.node.progress
    }

    /// The node's engine and transport counters.
    pub fn stats(&self) -> (Stats, TransportStats) {
        self.node.stats()
    }

    /// Whether the node's engine has nothing under way.
    pub fn engine_quiet(&self) -> bool {
        self.node.lock().engine.is_quiet()
    }

    /// Tells the engine a command is waiting, as the policy requires.
    fn after_post(&mut self) {
        match self.node.progress {
            Progress::Dedicated => {}
            Progress::SpinThenBlock { .. } => self.node.ring_doorbell(),
            Progress::HostAssisted { .. } => {
                // Push the command out on this thread right away: no
                // wake-up of another thread on the critical path.
                match self.node.driver.try_lock() {
                    Ok(mut d) => {
                        self.node.turn(&mut d, Turn::Post);
                    }
                    Err(std::sync::TryLockError::Poisoned(p)) => {
                        self.node.turn(&mut p.into_inner(), Turn::Post);
                    }
                    Err(std::sync::TryLockError::WouldBlock) => self.node.ring_doorbell(),
                }
            }
        }
    }

    fn park(&mut self) {
        *self.shared.waiter.lock().unwrap_or_else(PoisonError::into_inner) = Some(std::thread::current());
        self.shared.waiting.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !self.events.has_pending() {
            std::thread::park_timeout(PARK_MAX);
        }
        self.shared.waiting.store(false, Ordering::SeqCst);
    }
}

impl PortIo for LocalPort {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }

    fn eager_threshold(&self) -> Option<u32> {
        self.node.settings.eager_max
    }

    fn rendezvous_protocol(&self) -> outboard_host::RendezvousProtocol {
        self.node.settings.rndv
    }

    fn max_message(&self) -> u32 {
        self.tokens.max_message()
    }

    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.tokens.take(&cmd)?;
        self.outstanding.posted(cmd.op());
        if self.node.lost.load(Ordering::Relaxed) {
            // Failed by `poll_event` with the rest.
            return Ok(());
        }
        let mut cmd = cmd;
        // The ring holds more than the tokens allow under way, so it is
        // full only while the engine is behind: help it along.
        while let Err(back) = self.commands.push(cmd) {
            cmd = back;
            self.after_post();
            std::thread::yield_now();
        }
        self.idle_since = None;
        self.pacer.progressed();
        self.after_post();
        Ok(())
    }

    fn poll_event(&mut self) -> Option<Event> {
        let e = match self.events.pop() {
            Some(e) => e,
            // The engine panicked: what it had under way, and what was
            // posted since, fails one by one.
            None if self.node.lost.load(Ordering::SeqCst) => self.outstanding.lost_event(self.ep.port)?,
            None => return None,
        };
        self.outstanding.completed(e.op);
        self.tokens.give_back(e.op);
        self.idle_since = None;
        self.pacer.progressed();
        Some(e)
    }

    fn now(&self) -> Instant {
        self.node.clock.now()
    }

    fn idle(&mut self) {
        self.idle_calls = self.idle_calls.wrapping_add(1);
        match self.node.progress {
            Progress::Dedicated => {
                if self.idle_calls % crate::progress::DEDICATED_YIELD_EVERY == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            Progress::SpinThenBlock { spin } => {
                let now = self.node.clock.now();
                let since = *self.idle_since.get_or_insert(now);
                if now - since < spin {
                    std::thread::yield_now();
                } else {
                    self.park();
                }
            }
            Progress::HostAssisted { .. } => {
                let now = self.node.clock.now();
                if self.pacer.step(now) == WaitStep::Sleep {
                    // Other work wants this core and nothing came for a
                    // while: leave the engine to its thread and sleep until
                    // it delivers an event here.
                    self.node.hand_back();
                    self.park();
                    return;
                }
                self.node.host_back(now.as_nanos());
                let busy = match self.node.driver.try_lock() {
                    Ok(mut d) => self.node.turn(&mut d, Turn::Host),
                    Err(std::sync::TryLockError::Poisoned(p)) => self.node.turn(&mut p.into_inner(), Turn::Host),
                    Err(std::sync::TryLockError::WouldBlock) => {
                        std::hint::spin_loop();
                        false
                    }
                };
                self.pacer.looked(self.node.clock.now(), busy);
            }
        }
    }

    fn block(&mut self) {
        if matches!(self.node.progress, Progress::HostAssisted { .. }) {
            // The engine's own thread runs it while this one sleeps.
            self.node.hand_back();
        }
        self.park();
    }

    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.node.memory.alloc(len)
    }

    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.node.memory.free(buf)
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.node.memory.read(addr, out)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.node.memory.write(addr, data)
    }

    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.node.memory.atomic(addr, width, op)
    }
}

impl Drop for LocalPort {
    /// Closes the port on the engine: what it had under way is dropped, and
    /// nothing for this incarnation reaches a later one.
    fn drop(&mut self) {
        if self.node.lost.load(Ordering::SeqCst) {
            // A panicked engine is not touched again.
            return;
        }
        let now = self.node.clock.now();
        let mut d = self.node.lock();
        d.engine.close_port(now, self.ep.port);
        d.touched();
        d.ports[usize::from(self.ep.port.0)] = None;
    }
}

/// The host's handle to a port: on an engine thread of this process
/// ([`crate::Node::open_port`]) or on the node engine process that serves
/// every local process (`OUTBOARD_ENGINE=node`).
pub struct RtPort {
    kind: Kind,
    /// Bytes the host library wrote into and read out of the engine's
    /// memory through this handle ([`RtPort::host_copied`]).
    host_copied: AtomicU64,
}

enum Kind {
    Local(Box<LocalPort>),
    Remote(Box<RemotePort>),
}

impl RtPort {
    pub(crate) fn local(p: LocalPort) -> RtPort {
        RtPort { kind: Kind::Local(Box::new(p)), host_copied: AtomicU64::new(0) }
    }

    pub(crate) fn remote(p: RemotePort) -> RtPort {
        RtPort { kind: Kind::Remote(Box::new(p)), host_copied: AtomicU64::new(0) }
    }

    fn io(&self) -> &dyn PortIo {
        match &self.kind {
            Kind::Local(p) => &**p,
            Kind::Remote(p) => &**p,
        }
    }

    fn io_mut(&mut self) -> &mut dyn PortIo {
        match &mut self.kind {
            Kind::Local(p) => &mut **p,
            Kind::Remote(p) => &mut **p,
        }
    }

    /// The node engine's port underneath, if that is what this is.
    pub(crate) fn remote_mut(&mut self) -> Option<&mut RemotePort> {
        match &mut self.kind {
            Kind::Remote(p) => Some(p),
            Kind::Local(_) => None,
        }
    }

    /// Where this port's interrupts go (`None`: nowhere): the engine
    /// thread of this process raises them, or the node engine process
    /// (told over its socket). False when the node engine cannot be told.
    pub(crate) fn set_irq(&self, t: Option<crate::interrupt::Target>) -> bool {
        match &self.kind {
            Kind::Local(p) => {
                p.set_irq(t);
                true
            }
            Kind::Remote(p) => p.set_irq(t),
        }
    }

    /// The progress policy a waiting thread follows.
    pub fn progress(&self) -> Progress {
        match &self.kind {
            Kind::Local(p) => p.progress(),
            Kind::Remote(p) => p.progress(),
        }
    }

    /// The engine's and the transport's counters (an in-process engine's;
    /// defaults for a node engine's port, whose counters the node engine
    /// prints itself with `OUTBOARD_STATS=stderr`).
    pub fn stats(&self) -> (Stats, TransportStats) {
        match &self.kind {
            Kind::Local(p) => p.stats(),
            Kind::Remote(_) => Default::default(),
        }
    }

    /// Bytes the host library has written into the engine's memory (a
    /// send's or a contribution's bytes into a port buffer) and read out
    /// of it (a receive's or a result's) through this port so far - every
    /// access, so also the few words of locks, atomic results and
    /// rendezvous handshakes, which are small beside data: the
    /// copies zero copy would save, beside the engine's own
    /// ([`TransportStats::copied_out`]), which a NIC's DMA would make.
    pub fn host_copied(&self) -> u64 {
        self.host_copied.load(Ordering::Relaxed)
    }

    /// Whether the engine has nothing under way (in-process engines; a
    /// node engine's port answers true: its engine outlives the process).
    pub fn engine_quiet(&self) -> bool {
        match &self.kind {
            Kind::Local(p) => p.engine_quiet(),
            Kind::Remote(_) => true,
        }
    }
}

impl PortIo for RtPort {
    fn endpoint(&self) -> Endpoint {
        self.io().endpoint()
    }
    fn eager_threshold(&self) -> Option<u32> {
        self.io().eager_threshold()
    }
    fn rendezvous_protocol(&self) -> outboard_host::RendezvousProtocol {
        self.io().rendezvous_protocol()
    }
    fn max_message(&self) -> u32 {
        self.io().max_message()
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.io_mut().post(cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.io_mut().poll_event()
    }
    fn now(&self) -> Instant {
        self.io().now()
    }
    fn idle(&mut self) {
        self.io_mut().idle()
    }
    fn block(&mut self) {
        self.io_mut().block()
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.io_mut().alloc(len)
    }
    fn alloc_unzeroed(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.io_mut().alloc_unzeroed(len)
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.io_mut().free(buf)
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.host_copied.fetch_add(out.len() as u64, Ordering::Relaxed);
        self.io().read(addr, out)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        *self.host_copied.get_mut() += data.len() as u64;
        self.io_mut().write(addr, data)
    }
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.io_mut().atomic(addr, width, op)
    }
    fn local_link(&mut self) -> Option<&mut dyn outboard_host::local::LocalLink> {
        self.io_mut().local_link()
    }
}
