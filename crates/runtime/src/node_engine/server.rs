//! The node engine's process (`outboard node`): one engine for the node,
//! its UDP socket, and the ports of every local process that attaches.
//!
//! The loop is the engine thread's (module `node`) with the attached
//! processes added: turns of the same [`Driver`], whose ports' rings lie in
//! the processes' segments; between turns, the Unix socket's requests
//! (attach, peers, status, leave) and the end of any process, which closes
//! its port as its own exit would. The engine polls when the node has a
//! core to spare for it (more cores than local ranks) and otherwise spins
//! briefly, then blocks in epoll on the socket, the doorbell and the
//! processes' connections.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use outboard_engine::port_codec::{COMMAND_BYTES, EVENT_BYTES};
use outboard_engine::{Engine, EngineConfig, JobSecret, NodeId, PortId};
use thiserror::Error;

use super::protocol::{AttachRequest, EngineStatus, InterruptTo, Message, NodeSetup, PROTOCOL_VERSION};
use super::socket::{Conn, Listener};
use super::{RemoteWake, SharedCommands, SharedEvents, CONTROL_BYTES, ENGINE_SLEEPING};
use crate::clock::Clock;
use crate::driver::{Commands, Driver, Events as EventQueue, PortLink, PortShared, Turn};
use crate::memory::{HostMemory, RtDma, SharedMemory};
use crate::node_settings::NodeSettings;
use crate::progress::Progress;
use crate::shm::{Segment, ShmConsumer, ShmProducer};

const LISTENER: Token = Token(0);
const SOCKET: Token = Token(1);
const DOORBELL: Token = Token(2);
const FIRST_CLIENT: usize = 16;

/// Why the node engine stopped with an error.
#[derive(Debug, Error)]
pub enum ServeError {
    /// Another engine serves this job on this node.
    #[error("a node engine already listens as {0:?} (one per job and node)")]
    Taken(String),
    /// Nobody configured the engine in time.
    #[error("no process of the job configured this node engine within {0:?}")]
    NotConfigured(Duration),
    /// The socket, the poller or the engine's configuration.
    #[error("node engine set-up failed: {0}")]
    Setup(String),
    /// A transport setting.
    #[error(transparent)]
    Setting(#[from] outboard_settings::SettingError),
}

/// How `outboard node` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The abstract socket name to listen on (`socket::engine_name`).
    pub name: String,
    /// How long to wait for the configuring process, and after that for
    /// the first port.
    pub attach_timeout: Duration,
    /// Print the engine's counters on stderr at the end.
    pub print_stats: bool,
}

/// The engine configuration a job's engine runs with: the job's identity
/// and, for the runtime's UDP transport, the defaults of
/// [`crate::udp_engine_defaults`] and the peer timeout, which bounds the
/// retransmission timeout.
pub(crate) fn job_engine_config(node: u32, job_key: u64, secret: JobSecret, boot: u64, min_peer_boot: u64, peer_timeout: Option<Duration>) -> EngineConfig {
    let mut config = EngineConfig::new(NodeId(node), job_key, boot);
    config.secret = secret;
    config.min_peer_boot = min_peer_boot;
    crate::node::udp_engine_defaults(&mut config);
    if let Some(t) = peer_timeout {
        config.peer_timeout = t;
        config.rto_max = config.rto_max.min(t);
        config.rto_initial = config.rto_initial.min(config.rto_max);
    }
    config
}

struct Client {
    conn: Conn,
    rank: Option<u32>,
    pid: u32,
    port: Option<PortId>,
}

struct Server {
    driver: Driver,
    poll: Poll,
    listener: Listener,
    doorbell: File,
    clients: HashMap<usize, Client>,
    next_client: usize,
    /// Segments of attached processes, to set their "engine sleeping" words.
    segments: HashMap<PortId, Arc<Segment>>,
    peers: Vec<Option<SocketAddr>>,
    attached_ever: bool,
    clock: Clock,
    node: u32,
}

/// Runs a node engine until the job's last local port closes (or nobody
/// attaches within the timeout).
pub fn serve(opts: &ServeOptions) -> Result<(), ServeError> {
    let listener = Listener::bind(&opts.name).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            ServeError::Taken(opts.name.clone())
        } else {
            ServeError::Setup(format!("listening on {:?}: {e}", opts.name))
        }
    })?;
    let (first, setup) = wait_for_setup(&listener, opts.attach_timeout)?;
    let settings = NodeSettings::read(&outboard_settings::ProcessEnv)?;
    let secret = JobSecret::from_bytes(setup.secret);
    let mut config = job_engine_config(setup.node, setup.job_key, secret, setup.boot, setup.min_peer_boot, Some(setup.peer_timeout));
    config.max_ports = u8::try_from(setup.local_size.saturating_add(8)).unwrap_or(u8::MAX);
    // The engine's pools of early messages and collective pieces hold what
    // each process's own engine would hold for it.
    let ports = setup.local_size.max(1) as usize;
    config.unexpected_bytes = config.unexpected_bytes.saturating_mul(ports);
    config.coll_unexpected_bytes = config.coll_unexpected_bytes.saturating_mul(ports);
    let clock = Clock::new();
    let setup_err = |what: &str, e: &dyn std::fmt::Display| ServeError::Setup(format!("{what}: {e}"));
    let engine = Engine::new(config, RtDma::new(HostMemory::new(1 << 20)), clock.now()).map_err(|e| setup_err("engine configuration", &e))?;
    let udp = crate::bind_udp(setup.bind).map_err(|e| setup_err(&format!("binding UDP on {}", setup.bind), &e))?;
    let udp_addr = udp.local_addr().map_err(|e| setup_err("UDP address", &e))?;
    let mut driver = Driver::new(engine, mio::net::UdpSocket::from_std(udp), clock, settings.gso);
    driver.local_first = true;
    let poll = Poll::new().map_err(|e| setup_err("poller", &e))?;
    poll.registry().register(driver.socket_mut(), SOCKET, Interest::READABLE).map_err(|e| setup_err("poller", &e))?;
    poll.registry()
        .register(&mut SourceFd(&listener.as_fd().as_raw_fd()), LISTENER, Interest::READABLE)
        .map_err(|e| setup_err("poller", &e))?;
    let doorbell: OwnedFd = nix::sys::eventfd::EventFd::from_value_and_flags(0, nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK)
        .map_err(|e| setup_err("eventfd", &e))?
        .into();
    let doorbell = File::from(doorbell);
    poll.registry()
        .register(&mut SourceFd(&doorbell.as_raw_fd()), DOORBELL, Interest::READABLE)
        .map_err(|e| setup_err("poller", &e))?;
    let mut server = Server {
        driver,
        poll,
        listener,
        doorbell,
        clients: HashMap::new(),
        next_client: FIRST_CLIENT,
        segments: HashMap::new(),
        peers: Vec::new(),
        attached_ever: false,
        clock,
        node: setup.node,
    };
    server.add_client(first);
    let id = FIRST_CLIENT;
    if let Some(c) = server.clients.get(&id) {
        let _ = c.conn.send(&Message::Configured { udp: udp_addr }, &[]);
    }
    let (progress, _) = Progress::node_engine_from_env(setup.local_size as usize)?;
    let cpu = outboard_settings::registry::ENGINE_CPU.get(&outboard_settings::ProcessEnv)?.map(|c| c as usize);
    let placed = crate::affinity::place_node_engine(cpu, setup.local_size as usize, progress == Progress::Dedicated);
    if opts.print_stats {
        eprintln!("outboard node engine {}: {progress} progress, {placed}", setup.node);
    }
    server.run(progress, opts.attach_timeout);
    // What the job's processes left in shared memory when one died before
    // its group's members all came.
    crate::node_coll::region::remove_job_regions(setup.job_key, setup.min_peer_boot, setup.node);
    if opts.print_stats {
        let (st, t) = (server.driver.engine.stats().clone(), &server.driver.stats);
        eprint!("{}", crate::stats_table::stats_table(setup.node, &st));
        eprintln!(
            "outboard node engine {}: {} datagrams in, {} out, {} packets between local ports",
            setup.node, t.datagrams_in, t.datagrams_out, t.loopback
        );
    }
    Ok(())
}

/// Waits for the first connection and its `Configure`.
fn wait_for_setup(listener: &Listener, timeout: Duration) -> Result<(Conn, NodeSetup), ServeError> {
    let start = WallClock::now();
    let mut pending: Vec<Conn> = Vec::new();
    while start.elapsed() < timeout {
        if let Ok(Some(c)) = listener.accept() {
            pending.push(c);
        }
        let mut i = 0;
        while i < pending.len() {
            match pending[i].recv() {
                Ok(Some((Message::Configure(setup), _))) => return Ok((pending.swap_remove(i), *setup)),
                Ok(Some(_)) => {
                    let _ = pending[i].send(&Message::Refused { reason: "the node engine is not configured yet".into() }, &[]);
                    pending.swap_remove(i);
                }
                Ok(None) => i += 1,
                Err(_) => {
                    pending.swap_remove(i);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err(ServeError::NotConfigured(timeout))
}

impl Server {
    fn add_client(&mut self, conn: Conn) {
        let id = self.next_client;
        self.next_client += 1;
        let _ = self.poll.registry().register(&mut SourceFd(&conn.as_fd().as_raw_fd()), Token(id), Interest::READABLE);
        self.clients.insert(id, Client { conn, rank: None, pid: 0, port: None });
    }

    fn run(&mut self, progress: Progress, attach_timeout: Duration) {
        let started = WallClock::now();
        let mut events = Events::with_capacity(64);
        let mut idle_since: Option<WallClock> = None;
        let mut turns = 0u64;
        let mut empty_since: Option<WallClock> = None;
        // Requests that arrived before the loop started (the configuring
        // process's next messages).
        self.control(&mut events, Some(Duration::ZERO));
        loop {
            let busy = self.driver.turn(Turn::Engine);
            self.detach_broken();
            turns = turns.wrapping_add(1);
            if busy {
                idle_since = None;
                if turns % 1024 == 0 {
                    self.control(&mut events, Some(Duration::ZERO));
                }
            } else {
                let now = WallClock::now();
                let since = *idle_since.get_or_insert(now);
                match progress {
                    Progress::Dedicated => {
                        if turns % 64 == 0 {
                            self.control(&mut events, Some(Duration::ZERO));
                        } else if turns % u64::from(crate::progress::DEDICATED_YIELD_EVERY) == 0 {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    Progress::SpinThenBlock { spin } | Progress::HostAssisted { spin, .. } => {
                        if now - since < spin {
                            std::thread::yield_now();
                        } else {
                            self.block(&mut events);
                            idle_since = None;
                        }
                    }
                }
            }
            // The end: every process that attached has gone (its port is
            // closed); the engine stays until its last sends are confirmed,
            // for at most the peer timeout and a second.
            if self.clients.is_empty() {
                let since = *empty_since.get_or_insert_with(WallClock::now);
                let limit = self.driver.engine.config().peer_timeout + Duration::from_secs(1);
                if self.driver.engine.is_quiet() || since.elapsed() > limit {
                    break;
                }
            } else {
                empty_since = None;
                if !self.attached_ever && started.elapsed() > attach_timeout {
                    eprintln!("outboard node engine {}: no process attached within {attach_timeout:?}; stopping", self.node);
                    break;
                }
            }
        }
    }

    /// Blocks in epoll until a datagram, a doorbell, a request or the next
    /// timer deadline; the attached processes see the "sleeping" word and
    /// ring the doorbell after posting.
    fn block(&mut self, events: &mut Events) {
        self.set_sleeping(1);
        fence(Ordering::SeqCst);
        let timeout = if self.driver.has_pending_commands() {
            Some(Duration::ZERO)
        } else {
            let cap = if self.driver.is_stalled() { Duration::from_micros(50) } else { Duration::from_millis(100) };
            let until = self.driver.deadline().map(|t| t - self.clock.now()).unwrap_or(cap);
            Some(until.min(cap))
        };
        self.control(events, timeout);
        self.set_sleeping(0);
    }

    fn set_sleeping(&self, v: u32) {
        for seg in self.segments.values() {
            if let Some(w) = seg.atomic_u32(ENGINE_SLEEPING) {
                w.store(v, Ordering::SeqCst);
            }
        }
    }

    /// Polls the sockets for `timeout` and serves what came.
    fn control(&mut self, events: &mut Events, timeout: Option<Duration>) {
        if self.poll.poll(events, timeout).is_err() {
            return;
        }
        let tokens: Vec<Token> = events.iter().map(|e| e.token()).collect();
        for t in tokens {
            match t {
                LISTENER => {
                    while let Ok(Some(c)) = self.listener.accept() {
                        self.add_client(c);
                    }
                }
                DOORBELL => {
                    let mut b = [0u8; 8];
                    while (&self.doorbell).read(&mut b).is_ok() {}
                }
                SOCKET => {}
                Token(id) => self.serve_client(id),
            }
        }
    }

    fn serve_client(&mut self, id: usize) {
        loop {
            let Some(c) = self.clients.get(&id) else { return };
            match c.conn.recv() {
                Ok(None) => return,
                Ok(Some((m, fds))) => {
                    if let Err(reason) = self.handle(id, m, fds) {
                        if let Some(c) = self.clients.get(&id) {
                            let _ = c.conn.send(&Message::Refused { reason: reason.clone() }, &[]);
                        }
                    }
                }
                Err(_) => {
                    // The process ended (or spoke something else): its port
                    // closes as its own exit would have closed it.
                    self.detach(id);
                    return;
                }
            }
        }
    }

    fn handle(&mut self, id: usize, m: Message, fds: Vec<OwnedFd>) -> Result<(), String> {
        match m {
            Message::Peers { total, first, addrs } => {
                if self.peers.len() != total as usize {
                    self.peers = vec![None; total as usize];
                }
                for (i, a) in addrs.into_iter().enumerate() {
                    self.peers[first as usize + i] = Some(a);
                }
                if self.peers.iter().all(Option::is_some) {
                    let all: Vec<SocketAddr> = self.peers.iter().flatten().copied().collect();
                    self.driver.set_peers(&all);
                }
                Ok(())
            }
            Message::Attach(req) => self.attach(id, req, fds),
            Message::Query => {
                let st = self.driver.engine.stats();
                let t = &self.driver.stats;
                let status = EngineStatus {
                    quiet: self.driver.engine.is_quiet(),
                    stats: st.clone(),
                    datagrams_in: t.datagrams_in,
                    datagrams_out: t.datagrams_out,
                    loopback: t.loopback,
                };
                if let Some(c) = self.clients.get(&id) {
                    let _ = c.conn.send(&Message::Status(status), &[]);
                }
                Ok(())
            }
            Message::Leave => {
                // One process gives the job up, not the node: its port
                // closes now, as its exit would close it, and the node's
                // other ranks go on. Peers waiting on it learn of the
                // closure at once instead of after a timeout.
                self.detach(id);
                Ok(())
            }
            Message::Interrupts(to) => self.interrupts(id, to, fds),
            Message::Configure(_) => Err("this node engine is configured already".into()),
            other => Err(format!("a process does not send {other:?} to its engine")),
        }
    }

    fn attach(&mut self, id: usize, req: AttachRequest, fds: Vec<OwnedFd>) -> Result<(), String> {
        let who = format!("rank {} (process {})", req.rank, req.pid);
        if req.version != PROTOCOL_VERSION {
            return Err(format!("{who} speaks node engine protocol {}, this engine {PROTOCOL_VERSION}: use one Outboard build for the job", req.version));
        }
        if self.clients.get(&id).is_some_and(|c| c.port.is_some()) {
            return Err(format!("{who} attached a port on this connection already"));
        }
        let mut fds = fds.into_iter();
        let (Some(seg_fd), Some(wake_fd), None) = (fds.next(), fds.next(), fds.next()) else {
            return Err(format!("{who} must send its segment and its eventfd, and nothing else"));
        };
        let seg = Arc::new(Segment::open(seg_fd).map_err(|e| format!("{who}'s segment cannot be mapped: {e}"))?);
        if req.memory < CONTROL_BYTES || req.memory > seg.len() as u64 {
            return Err(format!("{who}'s registered memory starts at {} outside its {}-byte segment", req.memory, seg.len()));
        }
        let commands = ShmConsumer::attach(seg.clone(), req.commands).map_err(|e| format!("{who}'s command ring: {e}"))?;
        let events = ShmProducer::attach(seg.clone(), req.events).map_err(|e| format!("{who}'s event ring: {e}"))?;
        if commands.slot_bytes() != COMMAND_BYTES || events.slot_bytes() != EVENT_BYTES {
            return Err(format!(
                "{who}'s rings have {}- and {}-byte slots, this engine's commands and events {COMMAND_BYTES} and {EVENT_BYTES}: use one Outboard build for the job",
                commands.slot_bytes(),
                events.slot_bytes()
            ));
        }
        let slot = (0..self.driver.ports.len())
            .find(|&i| self.driver.ports[i].is_none() && !self.clients.values().any(|c| c.port == Some(PortId(i as u8))))
            .ok_or_else(|| format!("{who} finds every one of this engine's {} ports taken", self.driver.ports.len()))?;
        let port = PortId(slot as u8);
        let now = self.clock.now();
        let ep = self.driver.engine.open_port(now, port).map_err(|e| format!("{who}: opening a port: {e}"))?;
        let shared = Arc::new(PortShared { remote: Some(RemoteWake::new(seg.clone(), File::from(wake_fd))), ..Default::default() });
        self.driver.ports[slot] = Some(PortLink {
            commands: Commands::Shared(SharedCommands::new(commands)),
            events: EventQueue::Shared(SharedEvents::new(events)),
            overflow: Default::default(),
            shared,
            broken: None,
        });
        self.driver.engine.dma_mut().set_shared(port, Some(SharedMemory { seg: seg.clone(), start: req.memory }));
        self.driver.touched();
        self.segments.insert(port, seg);
        self.attached_ever = true;
        let c = self.clients.get_mut(&id).expect("the client asking");
        c.rank = Some(req.rank);
        c.pid = req.pid;
        c.port = Some(port);
        let _ = c.conn.send(&Message::Attached { node: self.node, port: ep.port.0, gen: ep.gen }, &[self.doorbell.as_fd()]);
        Ok(())
    }

    /// Points a process's port's interrupts where it asks: its own thread
    /// (the process from the socket's credentials, so that no process can
    /// have the engine signal another), an eventfd it sent, or nowhere;
    /// answers with the same message.
    fn interrupts(&mut self, id: usize, to: InterruptTo, fds: Vec<OwnedFd>) -> Result<(), String> {
        let c = self.clients.get(&id).ok_or("an unknown client")?;
        let who = format!("rank {} (process {})", c.rank.map_or("?".to_string(), |r| r.to_string()), c.pid);
        let port = c.port.ok_or_else(|| format!("{who} asks for interrupts before it attached a port"))?;
        let target = match (to, fds.len()) {
            (InterruptTo::Nowhere, 0) => None,
            (InterruptTo::Thread(tid), 0) => {
                let pid = c.conn.peer_pid().ok_or_else(|| format!("{who}'s socket names no process"))?;
                Some(crate::interrupt::Target::Signal { pid: pid as libc::pid_t, tid: tid as libc::pid_t, signo: crate::interrupt::signal_number() })
            }
            (InterruptTo::EventFd, 1) => {
                let fd = fds.into_iter().next().expect("one");
                // The engine thread writes it: anything that could block
                // (a pipe nobody reads) would stall the node.
                let what = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default();
                if what.as_os_str() != "anon_inode:[eventfd]" {
                    return Err(format!("{who} sent {} for its interrupts, not an eventfd", what.display()));
                }
                Some(crate::interrupt::Target::EventFd(Arc::new(fd)))
            }
            _ => return Err(format!("{who} must send an eventfd with eventfd interrupts, and nothing else")),
        };
        let link = self.driver.ports.get(usize::from(port.0)).and_then(Option::as_ref).ok_or_else(|| format!("{who}'s port is closed"))?;
        *link.shared.irq.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = target;
        // The answer: the process goes on only once interrupts go where
        // it asked, so none raised after its call is lost.
        let _ = c.conn.send(&Message::Interrupts(to), &[]);
        Ok(())
    }

    /// Closes a process's port and forgets it.
    fn detach(&mut self, id: usize) {
        let Some(c) = self.clients.remove(&id) else { return };
        let _ = self.poll.registry().deregister(&mut SourceFd(&c.conn.as_fd().as_raw_fd()));
        if let Some(port) = c.port {
            let now = self.clock.now();
            self.driver.engine.close_port(now, port);
            self.driver.ports[usize::from(port.0)] = None;
            self.driver.engine.dma_mut().set_shared(port, None);
            self.driver.touched();
            self.segments.remove(&port);
        }
    }

    /// Detaches the processes whose rings held something that is not the
    /// protocol, telling each why.
    fn detach_broken(&mut self) {
        let broken: Vec<(PortId, String)> = self
            .driver
            .ports
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.as_ref().and_then(|l| l.broken.clone()).map(|b| (PortId(i as u8), b)))
            .collect();
        for (port, why) in broken {
            let Some((&id, c)) = self.clients.iter().find(|(_, c)| c.port == Some(port)) else {
                self.driver.ports[usize::from(port.0)] = None;
                continue;
            };
            let who = c.rank.map_or_else(|| format!("process {}", c.pid), |r| format!("rank {r}"));
            let reason = format!("the node engine detached {who}: {why}");
            eprintln!("outboard: {reason}");
            let _ = c.conn.send(&Message::Refused { reason }, &[]);
            self.detach(id);
        }
    }
}
