//! A node: one engine on a thread of its own (the "NIC"), its UDP socket,
//! its host memory, and the ports processes open on it.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use mio::{Events, Interest, Poll, Token, Waker};
use outboard_engine::{ConfigError, Engine, EngineConfig, NodeId, OpenError, PortId, Stats};
use socket2::{Domain, Protocol, Socket, Type};
use thiserror::Error;

use crate::clock::Clock;
use crate::driver::{Commands, Driver, Events as EventQueue, PortLink, PortShared, TransportStats, Turn};
use crate::memory::{HostMemory, RtDma};
use crate::node_settings::NodeSettings;
use crate::port::{LocalPort, RtPort};
use crate::progress::Progress;
use crate::ring;

const SOCKET: Token = Token(0);
const DOORBELL: Token = Token(1);

/// Socket buffer size asked for. The engine keeps up to `window` MTU-sized
/// packets in flight per peer (64 x 8 KiB by default); a smaller receive
/// buffer drops bursts on loopback and turns them into retransmissions.
/// Linux caps the request at `net.core.rmem_max` / `wmem_max`.
const SOCKET_BUFFER: usize = 4 << 20;

/// Most bytes of host memory a node hands out.
const MEMORY_LIMIT: u64 = 16 << 30;

/// Why a node could not start.
#[derive(Debug, Error)]
pub enum NodeError {
    /// The socket or the poller.
    #[error("network setup failed: {0}")]
    Io(#[from] std::io::Error),
    /// The engine configuration.
    #[error("engine configuration rejected: {0}")]
    Config(#[from] ConfigError),
    /// A transport setting in the environment (`OUTBOARD_UDP_GSO`,
    /// `OUTBOARD_EAGER_MAX`, `OUTBOARD_RNDV`).
    #[error(transparent)]
    Setting(#[from] outboard_settings::SettingError),
}

/// Creates the non-blocking UDP socket an engine uses, bound to `ip` on a
/// port the OS picks, with large buffers.
pub fn bind_udp(ip: IpAddr) -> std::io::Result<UdpSocket> {
    let addr = SocketAddr::new(ip, 0);
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: the kernel clamps to its maximum.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.bind(&addr.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Sets the engine options the runtime's UDP transport wants, which the
/// engine leaves off by default so that the simulator's profiles keep
/// their behaviour: a retransmission timeout resends one packet and is
/// undone when it proves spurious (`EngineConfig::timeout_probe`), since
/// on a machine whose cores the ranks share an engine that is not driven
/// for a time slice is far likelier than a lost datagram. Delayed
/// acknowledgements stay off (`ack_delay` zero): a blocking send waits
/// for its acknowledgement, and the runtime's turns already acknowledge
/// once per batch of datagrams read (docs/rendezvous.md, "The runtime's UDP path").
pub fn udp_engine_defaults(config: &mut EngineConfig) {
    config.timeout_probe = true;
}

/// A random 64-bit value from the OS (job keys, engine incarnations).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::getrandom(&mut b).is_err() {
        // No OS randomness: fall back on the clock and the process id,
        // which still differ between runs.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        return (t.as_nanos() as u64).rotate_left(17) ^ u64::from(std::process::id()) ^ 0x9E37_79B9_7F4A_7C15;
    }
    u64::from_ne_bytes(b)
}

/// What the engine thread and the host threads of a node share.
pub(crate) struct NodeShared {
    pub driver: Mutex<Driver>,
    /// Set while the engine thread is (about to be) blocked in epoll: a
    /// host that posts a command must then ring the doorbell.
    pub sleeping: AtomicBool,
    pub waker: Waker,
    pub stop: AtomicBool,
    pub progress: Progress,
    /// Host-assisted: when a host thread last waited inside the library
    /// (nanoseconds on `clock`).
    pub host_seen: AtomicU64,
    /// Host-assisted: a waiting host gave up driving the engine (it was
    /// preempted lately and nothing happened for its short spin; see
    /// `wait_pacer`) and sleeps until the engine thread wakes it; the
    /// engine thread then blocks as soon as it is idle instead of spinning
    /// first.
    pub host_away: AtomicBool,
    /// Waits that handed the engine back (reported as
    /// [`TransportStats::host_sleeps`]).
    pub host_sleeps: AtomicU64,
    /// The engine thread, so a host that hands the engine back can wake it
    /// out of its hand-over nap at once.
    pub engine_thread: OnceLock<Thread>,
    pub memory: Arc<HostMemory>,
    pub clock: Clock,
    pub config: EngineConfig,
    pub local_addr: SocketAddr,
    /// The transport's settings, read when the node started.
    pub settings: NodeSettings,
    /// The engine panicked (on its thread or on a host thread driving
    /// it): nothing drives it any more, and every port's operations fail
    /// with `OpError::EngineLost`.
    pub lost: AtomicBool,
    /// Tests: the next turn panics.
    #[cfg(test)]
    pub panic_next_turn: AtomicBool,
}

impl NodeShared {
    pub fn lock(&self) -> MutexGuard<'_, Driver> {
        self.driver.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One turn of `d` (held by the caller), unless the engine is lost. A
    /// panic inside the engine's code is caught here: the engine is lost
    /// from then on (its state is whatever the panic left), every waiting
    /// port is woken to learn it, and the panic's message goes to stderr.
    pub fn turn(&self, d: &mut Driver, mode: Turn) -> bool {
        if self.lost.load(Ordering::Relaxed) {
            return false;
        }
        let turn = || {
            #[cfg(test)]
            if self.panic_next_turn.swap(false, Ordering::SeqCst) {
                panic!("injected engine panic");
            }
            d.turn(mode)
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(turn)) {
            Ok(busy) => busy,
            Err(_) => {
                self.lost.store(true, Ordering::SeqCst);
                eprintln!("outboard: the engine of node {} panicked; its ports' operations fail from now on", self.config.node.0);
                for link in d.ports.iter().flatten() {
                    link.shared.notify();
                }
                false
            }
        }
    }

    /// The engine's counters and the transport's.
    pub fn stats(&self) -> (Stats, TransportStats) {
        let d = self.lock();
        let mut t = d.stats.clone();
        t.host_sleeps = self.host_sleeps.load(Ordering::Relaxed);
        (t.copied_out, t.copied_in) = d.engine.dma().copied();
        (d.engine.stats().clone(), t)
    }

    /// Wakes the engine thread if it sleeps. The SeqCst fence pairs with
    /// the one the engine thread issues between setting `sleeping` and its
    /// last look at the command rings, so a command is never left behind a
    /// sleeping engine.
    pub fn ring_doorbell(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// Host-assisted: a waiting host stops driving the engine and leaves it
    /// to the engine thread, which takes over at once (not after the
    /// hand-over period) and blocks in epoll when idle.
    pub fn hand_back(&self) {
        self.host_sleeps.fetch_add(1, Ordering::Relaxed);
        self.host_away.store(true, Ordering::SeqCst);
        self.host_seen.store(0, Ordering::SeqCst);
        if let Some(t) = self.engine_thread.get() {
            t.unpark();
        }
    }

    /// Host-assisted: a host drives the engine again.
    pub fn host_back(&self, now_nanos: u64) {
        self.host_seen.store(now_nanos, Ordering::Relaxed);
        if self.host_away.load(Ordering::Relaxed) {
            self.host_away.store(false, Ordering::Relaxed);
        }
    }
}

/// A running engine: its thread, its socket, its memory.
///
/// Dropping the node stops the engine thread; drop its ports first.
pub struct Node {
    shared: Arc<NodeShared>,
    thread: Option<JoinHandle<()>>,
}

impl Node {
    /// Starts an engine with `config` on `socket` (from [`bind_udp`]),
    /// whose peers are at `peers` (index = node id; may be set later with
    /// [`Node::set_peers`]), with progress policy `progress`. The transport
    /// settings (`OUTBOARD_UDP_GSO`, `OUTBOARD_EAGER_MAX`, `OUTBOARD_RNDV`)
    /// come from the environment; a bad one is [`NodeError::Setting`].
    pub fn start(config: EngineConfig, socket: UdpSocket, peers: &[SocketAddr], progress: Progress) -> Result<Node, NodeError> {
        let settings = NodeSettings::read(&outboard_settings::ProcessEnv)?;
        let clock = Clock::new();
        let memory = HostMemory::new(MEMORY_LIMIT);
        let engine = Engine::new(config.clone(), RtDma::new(memory.clone()), clock.now())?;
        socket.set_nonblocking(true)?;
        let local_addr = socket.local_addr()?;
        let socket = mio::net::UdpSocket::from_std(socket);
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), DOORBELL)?;
        let mut driver = Driver::new(engine, socket, clock, settings.gso);
        poll.registry().register(driver.socket_mut(), SOCKET, Interest::READABLE)?;
        driver.set_peers(peers);
        let shared = Arc::new(NodeShared {
            driver: Mutex::new(driver),
            sleeping: AtomicBool::new(false),
            waker,
            stop: AtomicBool::new(false),
            progress,
            host_seen: AtomicU64::new(0),
            host_away: AtomicBool::new(false),
            host_sleeps: AtomicU64::new(0),
            engine_thread: OnceLock::new(),
            memory,
            clock,
            config: config.clone(),
            local_addr,
            settings,
            lost: AtomicBool::new(false),
            #[cfg(test)]
            panic_next_turn: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("outboard-engine-{}", config.node.0))
            .spawn(move || {
                crate::affinity::leave_rank_binding();
                engine_thread(&s, poll)
            })?;
        let _ = shared.engine_thread.set(thread.thread().clone());
        Ok(Node { shared, thread: Some(thread) })
    }

    /// This engine's node id.
    pub fn id(&self) -> NodeId {
        self.shared.config.node
    }

    /// The UDP address the engine receives on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The progress policy.
    pub fn progress(&self) -> Progress {
        self.shared.progress
    }

    /// The engine's configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    /// Sets the UDP address of every node (index = node id).
    pub fn set_peers(&self, peers: &[SocketAddr]) {
        self.shared.lock().set_peers(peers);
    }

    /// Opens port slot `port` and returns the host's handle to it.
    pub fn open_port(&self, port: PortId) -> Result<RtPort, OpenError> {
        let mut d = self.shared.lock();
        let ep = d.engine.open_port(self.shared.clock.now(), port)?;
        d.touched();
        let cfg = &self.shared.config;
        // Every accepted command completes with one event, and tokens bound
        // the commands under way (send, receive and collective tokens);
        // register, deregister, cancel and group set-up come on top, hence
        // the slack.
        let cap = (cfg.send_tokens + cfg.recv_tokens + cfg.coll_tokens) as usize + 64;
        let (cmd_tx, cmd_rx) = ring::channel(cap);
        let (ev_tx, ev_rx) = ring::channel(cap);
        let shared = Arc::new(PortShared::default());
        let link = PortLink {
            commands: Commands::Local(cmd_rx),
            events: EventQueue::Local(ev_tx),
            overflow: Default::default(),
            shared: shared.clone(),
            broken: None,
        };
        d.ports[usize::from(port.0)] = Some(link);
        drop(d);
        Ok(RtPort::local(LocalPort::new(self.shared.clone(), ep, cmd_tx, ev_rx, shared)))
    }

    /// The engine's counters and the transport's.
    pub fn stats(&self) -> (Stats, TransportStats) {
        self.shared.stats()
    }

    /// Tells the live peers this node is leaving the job after a failure
    /// (`Engine::leave`); the caller keeps the engine running a moment so
    /// the notices get across.
    pub fn leave(&self) {
        if self.shared.lost.load(Ordering::SeqCst) {
            return;
        }
        let mut d = self.shared.lock();
        // Read under the lock: the engine thread may have driven the
        // engine past a time read before it (engine time never goes back).
        let now = self.shared.clock.now();
        d.engine.leave(now);
        d.touched();
        drop(d);
        self.shared.ring_doorbell();
    }

    /// Whether the engine has nothing under way (every send confirmed).
    pub fn is_quiet(&self) -> bool {
        self.shared.lock().engine.is_quiet()
    }

    /// Runs one turn of the engine on the calling thread (what a waiting
    /// host does under host-assisted progress). Returns whether anything
    /// happened.
    pub fn drive(&self) -> bool {
        let mut d = self.shared.lock();
        self.shared.turn(&mut d, Turn::Engine)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The engine thread: turns the engine according to the progress policy
/// until the node stops.
fn engine_thread(shared: &NodeShared, mut poll: Poll) {
    let mut events = Events::with_capacity(16);
    let mut idle_since = None;
    let mut idle_turns = 0u32;
    while !shared.stop.load(Ordering::Relaxed) {
        if let Progress::HostAssisted { handover, .. } = shared.progress {
            let seen = shared.host_seen.load(Ordering::Relaxed);
            if shared.clock.now().as_nanos().saturating_sub(seen) < handover.as_nanos() as u64 {
                // A host thread is inside a wait and drives the engine
                // itself: stay off the socket and out of its way, and look
                // again one hand-over period later.
                std::thread::park_timeout(handover);
                idle_since = None;
                continue;
            }
        }
        if shared.lost.load(Ordering::Relaxed) {
            // Nothing to drive: wait to be stopped.
            std::thread::park_timeout(Duration::from_millis(100));
            continue;
        }
        let busy = {
            let mut d = shared.lock();
            shared.turn(&mut d, Turn::Engine)
        };
        match shared.progress {
            Progress::Dedicated => {
                if busy {
                    idle_turns = 0;
                } else {
                    idle_turns = idle_turns.wrapping_add(1);
                    // On an oversubscribed machine let others run now and
                    // then; with a free core this costs well under 1 us.
                    if idle_turns % crate::progress::DEDICATED_YIELD_EVERY == 0 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
            Progress::SpinThenBlock { spin } | Progress::HostAssisted { spin, .. } => {
                if busy {
                    idle_since = None;
                    continue;
                }
                let now = shared.clock.now();
                let since = *idle_since.get_or_insert(now);
                // A host that handed the engine back has spun already: block
                // at once, so that a datagram wakes this thread (a runnable
                // thread that yields waits for other work's time slice).
                if now - since < spin && !shared.host_away.load(Ordering::Relaxed) {
                    // Yield rather than spin: this policy serves machines
                    // with fewer cores than threads, where a spinning thread
                    // keeps the one with work off the core for a whole
                    // time slice.
                    std::thread::yield_now();
                    continue;
                }
                block(shared, &mut poll, &mut events);
                idle_since = None;
            }
        }
    }
}

/// Blocks the engine thread in epoll until a datagram, a doorbell or the
/// next timer deadline.
fn block(shared: &NodeShared, poll: &mut Poll, events: &mut Events) {
    shared.sleeping.store(true, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    let timeout = {
        let d = shared.lock();
        if d.has_pending_commands() {
            None
        } else {
            // Wake at the engine's deadline; check the stop flag and the
            // hand-over at least every 100 ms; poll for room in the socket
            // buffer when a send stalled.
            let cap = if d.is_stalled() { Duration::from_micros(50) } else { Duration::from_millis(100) };
            let until = d.deadline().map(|t| t - shared.clock.now()).unwrap_or(cap);
            Some(until.min(cap))
        }
    };
    if let Some(timeout) = timeout {
        if !timeout.is_zero() {
            // An error here (EINTR) only means another turn sooner.
            let _ = poll.poll(events, Some(timeout));
        }
    }
    shared.sleeping.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod lost_tests {
    use super::*;
    use outboard_engine::{OpError, RecvMatch};
    use outboard_host::{HostError, Port};

    /// An engine that panics fails what its port has under way, and all it
    /// posts later, with `EngineLost`, under every progress policy: nothing
    /// waits for good.
    #[test]
    fn a_panicking_engine_fails_its_ports_operations_instead_of_hanging() {
        for progress in [Progress::Dedicated, Progress::SPIN_THEN_BLOCK, Progress::HOST_ASSISTED] {
            let config = EngineConfig::new(NodeId(0), 7, 1);
            let socket = bind_udp("127.0.0.1".parse().unwrap()).unwrap();
            let addr = socket.local_addr().unwrap();
            let node = Node::start(config, socket, &[addr], progress).unwrap();
            let mut port = Port::new(node.open_port(PortId(0)).unwrap());
            let buf = port.buffer(8).unwrap();
            let pending = port.start_recv(RecvMatch::tag(1), buf).unwrap();
            node.shared.panic_next_turn.store(true, Ordering::SeqCst);
            node.shared.ring_doorbell();
            assert_eq!(port.wait(pending), Err(HostError::Op(OpError::EngineLost)), "{progress}");
            let later = port.start_recv(RecvMatch::tag(2), buf).unwrap();
            assert_eq!(port.wait(later), Err(HostError::Op(OpError::EngineLost)), "{progress}");
            assert!(node.shared.lost.load(Ordering::SeqCst));
        }
    }
}
