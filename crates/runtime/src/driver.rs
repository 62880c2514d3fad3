//! One turn of the engine: the sans-IO engine's driving contract carried out
//! over a real UDP socket, the port rings and the real clock.
//!
//! Whoever holds the [`Driver`] (the engine thread, or a host thread under
//! host-assisted progress) calls [`Driver::turn`]: commands from every
//! port's ring, then datagrams from the socket, then due timers, then
//! transmits until the engine has none, then events into the ports'
//! completion rings. The engine's code does all protocol work; this module
//! only moves bytes and maps node ids to socket addresses.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Thread;

use outboard_engine::{Command, CommandError, Engine, Event, Instant, NodeId, OpError, PortId};

use crate::clock::Clock;
use crate::memory::RtDma;
use crate::ring::{Consumer, Producer};
use crate::udp_batch::{would_block, BatchSocket, GSO_MAX_BYTES, GSO_MAX_SEGMENTS, RX_SLOTS};

/// Datagrams read per turn before the other duties get their turn.
const RX_BATCH: usize = 64;

/// The node id given to datagrams from an address that is no member of the
/// job. The engine still parses them, so garbage and other jobs' packets are
/// counted in its `malformed` and `unauthenticated` statistics; a well-formed
/// packet of this job from an unknown address fails its source check
/// (`misaddressed`).
pub(crate) const UNKNOWN_NODE: NodeId = NodeId(u32::MAX);

/// Counters of the transport underneath the engine (the engine's own
/// [`outboard_engine::Stats`] count what it dropped and why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Datagrams read from the socket.
    pub datagrams_in: u64,
    /// Datagrams written to the socket.
    pub datagrams_out: u64,
    /// Datagrams the engine sent to itself (never touching the socket).
    pub loopback: u64,
    /// Datagrams from addresses that are not members of the job.
    pub unknown_source: u64,
    /// Datagrams for a node whose address is unknown (dropped; the engine
    /// retransmits or declares the peer dead).
    pub no_route: u64,
    /// Sends that found the socket buffer full and waited.
    pub send_stalls: u64,
    /// Sends or receives that failed (dropped; the engine retransmits).
    pub io_errors: u64,
    /// System calls that sent datagrams (several datagrams each with UDP
    /// segmentation offload).
    pub send_calls: u64,
    /// System calls that received datagrams (several each with
    /// `recvmmsg`).
    pub recv_calls: u64,
    /// Payload bytes the engine copied out of host memory into datagrams
    /// (its DMA reads) and into host memory out of datagrams (its DMA
    /// writes): divided by the payload bytes moved, the copies per
    /// message on each side. The kernel's own copy into and out of the
    /// socket comes on top, as it does for any UDP program.
    pub copied_out: u64,
    /// See `copied_out`.
    pub copied_in: u64,
    /// Commands the engine refused after the host's own checks passed
    /// (reported to the port as failed operations).
    pub refused_commands: u64,
    /// Events for a port that was closed meanwhile.
    pub orphan_events: u64,
    /// Host-assisted waits that handed the engine back to its thread and
    /// slept, because the kernel had lately preempted the waiting host (a
    /// machine loaded by other work; see [`crate::Progress`]).
    pub host_sleeps: u64,
    /// Time in engine calls that ran NICVM module instructions.
    pub module_time: crate::module_time::ModuleTime,
}

/// What a host thread and the engine share about one port besides its rings.
#[derive(Debug, Default)]
pub(crate) struct PortShared {
    /// Set while a host thread is parked waiting for this port's events.
    pub waiting: AtomicBool,
    /// The thread to unpark.
    pub waiter: Mutex<Option<Thread>>,
    /// Where the engine's interrupts for this port go (module `interrupt`).
    pub irq: Mutex<Option<crate::interrupt::Target>>,
    /// A port of another process (node engine): how to wake it.
    pub remote: Option<crate::node_engine::RemoteWake>,
}

impl PortShared {
    /// Wakes a host thread parked on this port, after new events were
    /// published. The SeqCst fence pairs with the one a parking thread
    /// issues between setting `waiting` and its last look at the ring.
    pub fn notify(&self) {
        if let Some(r) = &self.remote {
            r.wake();
            return;
        }
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            if let Some(t) = self.waiter.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
                t.unpark();
            }
        }
    }
}

/// The engine side of one open port.
pub(crate) struct PortLink {
    pub commands: Commands,
    pub events: Events,
    /// Events that found the completion ring full, in order.
    pub overflow: VecDeque<Event>,
    pub shared: Arc<PortShared>,
    /// Why the port stopped being served: its process wrote something into
    /// its command ring that is not a command, or broke a ring's indices.
    /// The node engine then detaches the process with this sentence.
    pub broken: Option<String>,
}

/// A port's command queue: a ring in this process, or one in the shared
/// segment of the process that attached the port (node engine).
pub(crate) enum Commands {
    Local(Consumer<Command>),
    Shared(crate::node_engine::SharedCommands),
}

impl Commands {
    /// The next command; `Some(Err)` for bytes that are not one.
    fn pop(&mut self) -> Option<Result<Command, String>> {
        match self {
            Commands::Local(c) => c.pop().map(Ok),
            Commands::Shared(c) => c.pop(),
        }
    }

    fn has_pending(&self) -> bool {
        match self {
            Commands::Local(c) => c.has_pending(),
            Commands::Shared(c) => c.has_pending(),
        }
    }
}

/// A port's completion queue (see [`Commands`]).
pub(crate) enum Events {
    Local(Producer<Event>),
    Shared(crate::node_engine::SharedEvents),
}

impl Events {
    /// Publishes `e`, or gives it back when the ring is full.
    fn push(&mut self, e: Event) -> Result<(), Event> {
        match self {
            Events::Local(p) => p.push(e),
            Events::Shared(p) => p.push(e),
        }
    }
}

/// The engine with its socket and port rings.
pub(crate) struct Driver {
    pub engine: Engine<RtDma>,
    socket: BatchSocket,
    peers: Vec<Option<SocketAddr>>,
    by_addr: HashMap<SocketAddr, NodeId>,
    pub ports: Vec<Option<PortLink>>,
    clock: Clock,
    deadline: Option<Instant>,
    /// Room for a run of datagrams that leaves in one segmented send.
    tx: Vec<u8>,
    mtu: usize,
    /// Runs of datagrams the socket would not take yet (destination,
    /// bytes, segment size), sent in order before anything else.
    stalled: VecDeque<(SocketAddr, Vec<u8>, usize)>,
    loopback: Vec<Vec<u8>>,
    /// The last host turn left its transmissions to the next turn.
    deferred: bool,
    /// The engine was changed outside a turn (a port opened or closed, a
    /// departure): the next turn asks it for its deadline even if the turn
    /// itself does nothing.
    stale: bool,
    pub stats: TransportStats,
    /// Node engine: a turn that took commands from its ports skips the
    /// socket (one system call, most of a turn that found the socket
    /// empty), except every `SOCKET_EVERY`-th such turn; the turns after it
    /// read the socket as usual. Ranks of one node talk without it.
    pub local_first: bool,
    turns: u32,
}

/// With [`Driver::local_first`]: how often a turn with local work still
/// reads the socket.
const SOCKET_EVERY: u32 = 4;

/// Who runs a turn, which decides what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The engine thread: everything.
    Engine,
    /// A host thread waiting for a completion (host-assisted): everything,
    /// but a turn that completed something leaves its transmissions to the
    /// next turn (see [`Driver::turn`]).
    Host,
    /// A host thread that just posted a command (host-assisted): push it
    /// out, without reading the socket (one system call fewer per post).
    Post,
}

impl Driver {
    pub fn new(engine: Engine<RtDma>, socket: mio::net::UdpSocket, clock: Clock, gso: bool) -> Driver {
        let mtu = engine.config().mtu;
        let ports = (0..engine.config().max_ports).map(|_| None).collect();
        Driver {
            engine,
            socket: BatchSocket::new(socket, gso),
            peers: Vec::new(),
            by_addr: HashMap::new(),
            ports,
            clock,
            deadline: None,
            tx: vec![0; (GSO_MAX_BYTES / mtu).clamp(1, GSO_MAX_SEGMENTS) * mtu],
            mtu,
            stalled: VecDeque::new(),
            loopback: Vec::new(),
            deferred: false,
            stale: true,
            stats: TransportStats::default(),
            local_first: false,
            turns: 0,
        }
    }

    /// Sets the address of every node (index = node id).
    pub fn set_peers(&mut self, peers: &[SocketAddr]) {
        self.peers = peers.iter().copied().map(Some).collect();
        self.by_addr = peers.iter().enumerate().map(|(i, a)| (*a, NodeId(i as u32))).collect();
    }

    /// The next timer deadline of the engine.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether a datagram waits for room in the socket buffer.
    pub fn is_stalled(&self) -> bool {
        !self.stalled.is_empty()
    }

    /// Whether any port posted a command not yet handled.
    pub fn has_pending_commands(&self) -> bool {
        self.ports.iter().flatten().any(|l| l.broken.is_none() && l.commands.has_pending())
    }

    /// One round of the driving contract. Returns whether anything
    /// happened (a command, a datagram, a timer, a transmit or an event),
    /// which the spin policies use to decide when to block.
    pub fn turn(&mut self, mode: Turn) -> bool {
        let now = self.clock.now();
        let mut busy = self.take_commands(now);
        self.turns = self.turns.wrapping_add(1);
        let skip_socket = self.local_first && busy && self.turns % SOCKET_EVERY != 0;
        if mode != Turn::Post && !skip_socket {
            busy |= self.receive(now, mode);
        }
        if self.deadline.is_some_and(|d| d <= now) {
            self.stats.module_time.run(&mut self.engine, |e| e.handle_timeout(now));
            busy = true;
        }
        let delivered = self.deliver_events();
        busy |= delivered;
        if mode == Turn::Host && delivered && !self.deferred {
            // Hand the completion to the waiting host first: what it posts
            // next (typically a reply) leaves in the next turn and carries
            // the acknowledgement with it, instead of a separate ack
            // datagram now. At most one turn in a row is deferred, so a
            // steady stream of arrivals cannot starve transmission.
            self.deferred = true;
        } else {
            self.deferred = false;
            busy |= self.transmit(now);
            busy |= self.deliver_events();
        }
        // A turn that did nothing changed no deadline: an idle polling
        // loop skips the engine's scan of its timers.
        if busy || self.stale {
            self.deadline = self.engine.poll_timeout();
            self.stale = false;
        }
        busy
    }

    /// Says the engine was changed outside [`Driver::turn`] (its deadline
    /// may have moved).
    pub fn touched(&mut self) {
        self.stale = true;
    }

    fn take_commands(&mut self, now: Instant) -> bool {
        let mut busy = false;
        for (i, link) in self.ports.iter_mut().enumerate() {
            let Some(link) = link else { continue };
            if link.broken.is_some() {
                continue;
            }
            let port = PortId(i as u8);
            while let Some(cmd) = link.commands.pop() {
                busy = true;
                let cmd = match cmd {
                    Ok(c) => c,
                    Err(why) => {
                        self.stats.refused_commands += 1;
                        link.broken = Some(why);
                        break;
                    }
                };
                if let Err(e) = self.stats.module_time.run(&mut self.engine, |e| e.handle_command(now, port, cmd)) {
                    // The host checked tokens and sizes before posting, so
                    // what is left is what only the engine knows (a peer
                    // declared dead): it comes back as a failed operation.
                    self.stats.refused_commands += 1;
                    let err = match e {
                        CommandError::PeerUnreachable(n) => OpError::PeerUnreachable(n),
                        _ => OpError::NoSuchPort,
                    };
                    link.overflow.push_back(Event { port, op: cmd.op(), result: Err(err) });
                }
            }
        }
        busy
    }

    /// The socket, to register with the poller.
    pub fn socket_mut(&mut self) -> &mut mio::net::UdpSocket {
        self.socket.socket_mut()
    }

    /// Reads datagrams into the engine. The engine thread reads in
    /// batches (`recvmmsg`); a waiting host reads one datagram per system
    /// call and stops as soon as one completed something, so the event
    /// reaches it without a further (empty) read on the way.
    fn receive(&mut self, now: Instant, mode: Turn) -> bool {
        let mut busy = false;
        let mut read = 0;
        let batched = mode == Turn::Engine;
        while read < RX_BATCH {
            let got = if batched { self.socket.recv() } else { self.socket.recv_one() };
            let n = match got {
                Ok(n) => n,
                Err(e) if would_block(&e) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // E.g. an ICMP error queued on the socket: nothing to
                    // read, the engine's timers deal with the peer.
                    self.stats.io_errors += 1;
                    busy = true;
                    break;
                }
            };
            busy = true;
            self.stats.recv_calls += 1;
            for i in 0..n {
                let (got, bytes) = self.socket.received(i);
                let from = match got.from.and_then(|a| self.by_addr.get(&a)) {
                    Some(&node) => node,
                    None => {
                        self.stats.unknown_source += 1;
                        UNKNOWN_NODE
                    }
                };
                self.stats.datagrams_in += 1;
                read += 1;
                self.stats.module_time.run(&mut self.engine, |e| e.handle_packet(now, from, bytes));
            }
            if batched && n < RX_SLOTS {
                // The socket is drained: no second, empty call.
                break;
            }
            if !batched && self.engine_has_events() {
                break;
            }
        }
        busy
    }

    /// Sends `len` bytes of `tx`, datagrams of `seg` bytes, to `addr`;
    /// keeps what the socket would not take. Returns false on a stall.
    fn send_run(&mut self, addr: SocketAddr, len: usize, seg: usize) -> bool {
        let count = len.div_ceil(seg.max(1)) as u64;
        match self.socket.send(addr, &self.tx[..len], seg) {
            Ok(()) => {
                self.stats.datagrams_out += count;
                self.stats.send_calls += if self.socket.gso() { 1 } else { count };
                true
            }
            Err((sent, e)) if would_block(&e) => {
                self.stats.send_stalls += 1;
                self.stats.datagrams_out += (sent / seg.max(1)) as u64;
                self.stalled.push_back((addr, self.tx[sent..len].to_vec(), seg));
                false
            }
            Err((sent, _)) => {
                // The rest is dropped; the engine retransmits it.
                self.stats.datagrams_out += (sent / seg.max(1)) as u64;
                self.stats.io_errors += 1;
                true
            }
        }
    }

    fn transmit(&mut self, now: Instant) -> bool {
        let mut busy = false;
        while let Some((addr, data, seg)) = self.stalled.pop_front() {
            match self.socket.send(addr, &data, seg) {
                Ok(()) => {
                    self.stats.datagrams_out += data.len().div_ceil(seg.max(1)) as u64;
                    self.stats.send_calls += 1;
                    busy = true;
                }
                Err((sent, e)) if would_block(&e) => {
                    self.stalled.push_front((addr, data[sent..].to_vec(), seg));
                    return busy;
                }
                Err(_) => self.stats.io_errors += 1,
            }
        }
        let me = self.engine.node();
        let mtu = self.mtu;
        let room = self.tx.len();
        // The run being gathered in `tx`: its destination, its segment
        // size, and how many bytes it holds. A run closes at a datagram
        // shorter than its segments (it must be the last), at another
        // destination, or when `tx` is full.
        let mut run: Option<(SocketAddr, usize)> = None;
        let mut len = 0;
        loop {
            loop {
                if len + mtu > room {
                    let (addr, seg) = run.take().expect("a full buffer holds a run");
                    if !self.send_run(addr, len, seg) {
                        return true;
                    }
                    len = 0;
                }
                let Some(t) = self.engine.poll_transmit(now, &mut self.tx[len..len + mtu]) else { break };
                busy = true;
                if t.dst == me {
                    self.stats.loopback += 1;
                    self.loopback.push(self.tx[len..len + t.len].to_vec());
                    continue;
                }
                let Some(addr) = self.peers.get(t.dst.0 as usize).copied().flatten() else {
                    self.stats.no_route += 1;
                    continue;
                };
                match run {
                    Some((a, seg)) if a == addr && t.len <= seg && len % seg == 0 => {
                        len += t.len;
                    }
                    Some((a, seg)) => {
                        // Send the run so far, then start a new one with
                        // this datagram (moved to the front of `tx`).
                        if !self.send_run(a, len, seg) {
                            // This datagram waits behind the stalled ones.
                            self.stalled.push_back((addr, self.tx[len..len + t.len].to_vec(), t.len));
                            return true;
                        }
                        self.tx.copy_within(len..len + t.len, 0);
                        run = Some((addr, t.len));
                        len = t.len;
                    }
                    None if t.len < mtu => {
                        // A datagram shorter than the MTU would close a run
                        // anyway (a request, a reply, an acknowledgement):
                        // send it now rather than after one more look at
                        // the engine, which is on the latency's path.
                        if !self.send_run(addr, t.len, t.len) {
                            return true;
                        }
                    }
                    None => {
                        run = Some((addr, t.len));
                        len = t.len;
                    }
                }
            }
            if let Some((addr, seg)) = run.take() {
                if !self.send_run(addr, len, seg) {
                    return true;
                }
                len = 0;
            }
            if self.loopback.is_empty() {
                return busy;
            }
            for pkt in std::mem::take(&mut self.loopback) {
                self.stats.module_time.run(&mut self.engine, |e| e.handle_packet(now, me, &pkt));
            }
        }
    }

    /// Whether the engine has completions waiting to be delivered.
    fn engine_has_events(&self) -> bool {
        self.engine.has_events()
    }

    fn deliver_events(&mut self) -> bool {
        let mut busy = false;
        while let Some(e) = self.engine.poll_event() {
            busy = true;
            match self.ports.get_mut(usize::from(e.port.0)).and_then(Option::as_mut) {
                Some(link) => link.overflow.push_back(e),
                None => self.stats.orphan_events += 1,
            }
        }
        for link in self.ports.iter_mut().flatten() {
            let mut pushed = false;
            while let Some(&e) = link.overflow.front() {
                if link.events.push(e).is_err() {
                    break;
                }
                link.overflow.pop_front();
                pushed = true;
            }
            if pushed {
                link.shared.notify();
            }
        }
        // After the completions are in the rings: the engine reads each
        // port's flag now, so a host that stored it and then polled saw them.
        while let Some(irq) = self.engine.poll_interrupt() {
            if let Some(link) = self.ports.get(usize::from(irq.port.0)).and_then(Option::as_ref) {
                if let Some(t) = link.shared.irq.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
                    t.raise();
                }
            }
        }
        busy
    }
}
