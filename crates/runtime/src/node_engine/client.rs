//! A process's side of its node engine: starting the engine (the job's
//! first process on the node does), configuring it, and attaching a port
//! ([`RemotePort`], the host library's [`PortIo`] over the rings of the
//! process's shared segment).

use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant as WallClock};

use outboard_engine::port_codec::{self, COMMAND_BYTES, EVENT_BYTES};
use outboard_engine::{AtomicOp, AtomicWidth, Command, CommandError, Endpoint, EngineConfig, Event, HostBuf, Instant, NodeId, PortId, TokenMirror};
use outboard_host::{MemoryError, PortIo};
use thiserror::Error;

use super::protocol::{AttachRequest, EngineStatus, Message, NodeSetup, PEERS_PER_MESSAGE, PROTOCOL_VERSION};
use super::socket::Conn;
use super::{CONTROL_BYTES, ENGINE_SLEEPING, HOST_WAITING};
use crate::node_p2p::NodeP2p;
use crate::clock::Clock;
use crate::node_settings::NodeSettings;
use crate::outstanding::Outstanding;
use crate::progress::Progress;
use crate::shm::{ring_bytes, Segment, ShmConsumer, ShmHeap, ShmProducer, ShmRing};

/// Bytes of registered memory in each process's segment (the segment is
/// sparse: untouched pages cost nothing).
pub const MEMORY_BYTES: u64 = 4 << 30;

/// Longest a waiting process blocks before it looks at its ring and its
/// engine again on its own.
const BLOCK_MAX: Duration = Duration::from_millis(10);

/// How often a spinning process checks that its engine still lives.
const LIVENESS_EVERY: Duration = Duration::from_millis(5);

/// Why a process could not reach or use its node engine.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The engine program could not be started.
    #[error("starting the node engine {program:?}: {source} (set OUTBOARD_NODE_PROGRAM to the outboard command)")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The engine's socket did not answer in time.
    #[error("no node engine answered as {name:?} within {waited:?}: {last}")]
    Unreachable {
        /// The socket name.
        name: String,
        /// How long this process tried.
        waited: Duration,
        /// The last error.
        last: std::io::Error,
    },
    /// The engine refused, with its reason.
    #[error("the node engine refused: {0}")]
    Refused(String),
    /// The conversation broke off or went wrong.
    #[error("talking to the node engine: {0}")]
    Io(#[from] std::io::Error),
    /// Creating the shared segment or its rings.
    #[error("setting up shared memory for the node engine: {0}")]
    Shm(String),
}

/// The `outboard` program that runs node engines: `OUTBOARD_NODE_PROGRAM`,
/// else an `outboard` beside the running program or one directory up,
/// else beside the C library this code is part of, or in `../bin` (an
/// install's `lib/` and `bin/`) or `..` (cargo's `target/release/deps`),
/// else `outboard` on the `PATH`.
pub fn engine_program() -> Result<PathBuf, outboard_settings::SettingError> {
    if let Some(p) = outboard_settings::registry::NODE_PROGRAM.get(&outboard_settings::ProcessEnv)? {
        return Ok(PathBuf::from(p));
    }
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(d) = exe.parent() {
            dirs.push(d.to_path_buf());
            // Tests and examples live in target/<profile>/deps or examples.
            if let Some(up) = d.parent() {
                dirs.push(up.to_path_buf());
            }
        }
    }
    if let Some(lib) = library_dir() {
        dirs.push(lib.clone());
        if let Some(up) = lib.parent() {
            // An install's lib/ beside bin/, or cargo's target/<profile>/deps
            // below the outboard binary.
            dirs.push(up.join("bin"));
            dirs.push(up.to_path_buf());
        }
    }
    for d in dirs {
        let p = d.join("outboard");
        if is_program(&p) {
            return Ok(p);
        }
    }
    Ok(PathBuf::from("outboard"))
}

/// Whether `p` is a file anyone may execute (a data file that happens to
/// be called `outboard` beside a program is not the engine).
fn is_program(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The directory of the shared library this code is linked into (the C
/// ABI's `liboutboard.so` under an MPI program), from the process's maps.
fn library_dir() -> Option<PathBuf> {
    let here = library_dir as *const () as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let range = f.next()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?);
        if (a..b).contains(&here) {
            let path = f.nth(4)?;
            return PathBuf::from(path).parent().map(PathBuf::from);
        }
    }
    None
}

/// Starts `outboard node` listening as `name`; it lives on its own (it
/// ends when the job's last process on the node has gone). The command
/// detaches (`--detach`: it forks and its first process returns at once),
/// so this process reaps that first process here and keeps no thread to
/// reap the engine: a node's threads are its ranks' and its engine's.
pub fn spawn_engine(program: &std::path::Path, name: &str, attach_timeout: Duration) -> Result<(), ClientError> {
    let mut child = std::process::Command::new(program)
        .arg("node")
        .arg("--detach")
        .arg("--listen")
        .arg(name)
        .arg("--attach-timeout-ms")
        .arg(attach_timeout.as_millis().to_string())
        // The engine is no MPI program: a PMPI library preloaded into the
        // rank must not load into it.
        .env_remove("LD_PRELOAD")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(|source| ClientError::Spawn { program: program.to_path_buf(), source })?;
    // The first process returns as soon as the engine runs in its child:
    // reaped now, it never lingers as a zombie of this process. (A
    // failure to start shows as the engine never listening.)
    child.wait().map_err(ClientError::Io)?;
    Ok(())
}

/// Connects to the engine listening as `name`, trying again until it
/// listens or `timeout` passes.
pub fn connect(name: &str, timeout: Duration) -> Result<Conn, ClientError> {
    let start = WallClock::now();
    loop {
        match Conn::connect(name) {
            Ok(c) => return Ok(c),
            Err(e) if start.elapsed() >= timeout => return Err(ClientError::Unreachable { name: name.into(), waited: start.elapsed(), last: e }),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn reply(conn: &Conn) -> Result<(Message, Vec<OwnedFd>), ClientError> {
    match conn.recv()? {
        Some((Message::Refused { reason }, _)) => Err(ClientError::Refused(reason)),
        Some(m) => Ok(m),
        None => Err(ClientError::Io(std::io::Error::new(std::io::ErrorKind::WouldBlock, "no reply"))),
    }
}

/// A process's control connection to its node engine: set-up, status,
/// departure. Ports attach on connections of their own.
pub struct NodeLink {
    conn: Mutex<Conn>,
    name: String,
}

impl NodeLink {
    /// Connects to the engine listening as `name`.
    pub fn connect(name: &str, timeout: Duration) -> Result<NodeLink, ClientError> {
        Ok(NodeLink { conn: Mutex::new(connect(name, timeout)?), name: name.to_string() })
    }

    /// The engine's socket name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives the engine its identity in the job; returns its UDP address.
    pub fn configure(&self, setup: NodeSetup) -> Result<SocketAddr, ClientError> {
        let c = self.conn();
        c.send(&Message::Configure(Box::new(setup)), &[])?;
        match reply(&c)? {
            (Message::Configured { udp }, _) => Ok(udp),
            (other, _) => Err(ClientError::Refused(format!("unexpected answer {other:?}"))),
        }
    }

    /// Tells the engine every node's UDP address (index = node id).
    pub fn set_peers(&self, peers: &[SocketAddr]) -> Result<(), ClientError> {
        let c = self.conn();
        for (i, chunk) in peers.chunks(PEERS_PER_MESSAGE).enumerate() {
            c.send(&Message::Peers { total: peers.len() as u32, first: (i * PEERS_PER_MESSAGE) as u32, addrs: chunk.to_vec() }, &[])?;
        }
        Ok(())
    }

    /// The engine's state; `None` when the engine is gone.
    pub fn status(&self) -> Option<EngineStatus> {
        let c = self.conn();
        c.send(&Message::Query, &[]).ok()?;
        match reply(&c).ok()? {
            (Message::Status(s), _) => Some(s),
            _ => None,
        }
    }

    /// Tells the engine this node leaves the job after a failure.
    pub fn leave(&self) {
        let _ = self.conn().send(&Message::Leave, &[]);
    }
}

/// A port on the node engine, seen from the process that attached it.
pub struct RemotePort {
    conn: Conn,
    seg: Arc<Segment>,
    commands: ShmProducer,
    events: ShmConsumer,
    heap: ShmHeap,
    doorbell: File,
    wake: File,
    ep: Endpoint,
    clock: Clock,
    settings: NodeSettings,
    progress: Progress,
    tokens: TokenMirror,
    /// Operations posted and not completed, to fail if the engine is lost.
    outstanding: Outstanding,
    /// Why the engine is gone, once it is.
    lost: Option<String>,
    /// Shared memory to the node's other processes, once the job agreed
    /// to use it (`OUTBOARD_SHM_P2P`).
    p2p: Option<NodeP2p>,
    /// [`NodeP2p::moved`] when a wait last looked.
    p2p_moved: u64,
    /// Where this process's buffers lie in its segment.
    buffers: std::ops::Range<u64>,
    cmd_slot: [u8; COMMAND_BYTES],
    ev_slot: [u8; EVENT_BYTES],
    idle_since: Option<Instant>,
    idle_calls: u32,
    checked: WallClock,
}

impl RemotePort {
    /// Attaches a port for `rank` on the engine listening as `name`.
    /// `progress` says whether the engine polls a core of its own (a
    /// waiting process then spins) or blocks (the process blocks too).
    pub fn attach(name: &str, rank: u32, progress: Progress, timeout: Duration) -> Result<RemotePort, ClientError> {
        let conn = connect(name, timeout)?;
        let config = EngineConfig::new(NodeId(0), 0, 0);
        let slots = ((config.send_tokens + config.recv_tokens + config.coll_tokens) as usize + 64).next_power_of_two();
        let cmd_off = CONTROL_BYTES;
        let ev_off = cmd_off + ring_bytes(slots, COMMAND_BYTES) as u64;
        let mem_off = (ev_off + ring_bytes(slots, EVENT_BYTES) as u64).div_ceil(4096) * 4096;
        let len = mem_off + MEMORY_BYTES;
        let shm = |e: &dyn std::fmt::Display| ClientError::Shm(e.to_string());
        let seg = Arc::new(Segment::create(&format!("outboard-rank-{rank}"), len as usize).map_err(|e| shm(&e))?);
        ShmRing::init(&seg, cmd_off, slots, COMMAND_BYTES).map_err(|e| shm(&e))?;
        ShmRing::init(&seg, ev_off, slots, EVENT_BYTES).map_err(|e| shm(&e))?;
        let commands = ShmProducer::attach(seg.clone(), cmd_off).map_err(|e| shm(&e))?;
        let events = ShmConsumer::attach(seg.clone(), ev_off).map_err(|e| shm(&e))?;
        let heap = ShmHeap::new(mem_off, len);
        let wake: OwnedFd = nix::sys::eventfd::EventFd::from_value_and_flags(0, nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK)
            .map_err(|e| shm(&e))?
            .into();
        let req = AttachRequest { version: PROTOCOL_VERSION, pid: std::process::id(), rank, port: 0, commands: cmd_off, events: ev_off, memory: mem_off };
        conn.send(&Message::Attach(req), &[seg.fd(), wake.as_fd()])?;
        let (node, port, gen, doorbell) = match reply(&conn)? {
            (Message::Attached { node, port, gen }, mut fds) if fds.len() == 1 => (node, port, gen, File::from(fds.remove(0))),
            (other, _) => return Err(ClientError::Refused(format!("unexpected answer {other:?}"))),
        };
        let settings = NodeSettings::read(&outboard_settings::ProcessEnv).map_err(|e| ClientError::Shm(e.to_string()))?;
        Ok(RemotePort {
            conn,
            seg,
            commands,
            events,
            heap,
            doorbell,
            wake: File::from(wake),
            ep: Endpoint { node: NodeId(node), port: PortId(port), gen },
            clock: Clock::new(),
            settings,
            progress,
            tokens: TokenMirror::new(&config),
            outstanding: Outstanding::for_port(&config),
            lost: None,
            p2p: None,
            p2p_moved: 0,
            buffers: mem_off..len,
            cmd_slot: [0; COMMAND_BYTES],
            ev_slot: [0; EVENT_BYTES],
            idle_since: None,
            idle_calls: 0,
            checked: WallClock::now(),
        })
    }

    /// Where the node engine delivers this port's interrupts: the
    /// engine process signals the thread itself, or writes the eventfd
    /// (sent over the socket), from when the engine answers. False when
    /// the engine cannot be told.
    pub(crate) fn set_irq(&self, t: Option<crate::interrupt::Target>) -> bool {
        use super::protocol::InterruptTo;
        use crate::interrupt::Target;
        let sent = match &t {
            None => self.conn.send(&Message::Interrupts(InterruptTo::Nowhere), &[]),
            Some(Target::Signal { tid, .. }) => self.conn.send(&Message::Interrupts(InterruptTo::Thread(*tid as u32)), &[]),
            Some(Target::EventFd(fd)) => self.conn.send(&Message::Interrupts(InterruptTo::EventFd), &[fd.as_fd()]),
        };
        sent.is_ok() && matches!(reply(&self.conn), Ok((Message::Interrupts(_), _)))
    }

    /// The node engine's process.
    pub fn engine_pid(&self) -> Option<u32> {
        self.conn.peer_pid()
    }

    /// How this process's engine makes progress.
    pub fn progress(&self) -> Progress {
        self.progress
    }

    /// Attaches this process, local rank `me` of `n`, to its node's
    /// shared-memory link; it carries messages once
    /// [`RemotePort::enable_p2p`] names the peers.
    pub fn attach_p2p(&mut self, job_key: u64, boot: u64, node: u32, n: u64, me: u64) -> std::io::Result<()> {
        self.p2p = Some(NodeP2p::attach(job_key, boot, node, n, me, self.seg.clone(), self.buffers.clone())?);
        Ok(())
    }

    /// Starts using the link with these peers (by local rank), or drops
    /// it (`None`: a rank of the node could not attach).
    pub fn enable_p2p(&mut self, peers: Option<crate::node_p2p::NodePeers>) {
        match (peers, &mut self.p2p) {
            (Some(peers), Some(p)) => p.set_peers(peers.endpoints, peers.pids),
            _ => self.p2p = None,
        }
    }

    /// Why the engine is gone, if it is.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    fn word(&self, off: u64) -> Option<&std::sync::atomic::AtomicU32> {
        self.seg.atomic_u32(off)
    }

    /// The engine is gone: from now on every operation under way, and
    /// every later one, fails (`Outstanding::lost_event`).
    fn lose(&mut self, why: String) {
        if self.lost.is_none() {
            self.lost = Some(why);
        }
    }

    /// Looks at the control connection: a refusal (the engine detached
    /// this process) or its end (the engine died) loses the engine.
    fn check_engine(&mut self) {
        self.checked = WallClock::now();
        if !self.conn.has_news() {
            return;
        }
        match self.conn.try_recv() {
            Ok(Some((Message::Refused { reason }, _))) => self.lose(reason),
            Ok(Some(_)) | Ok(None) => {
                if self.conn.peer_gone() {
                    self.lose("the node engine process ended".into());
                }
            }
            Err(e) => self.lose(format!("the node engine process ended ({e})")),
        }
    }

    fn ring_doorbell(&self) {
        fence(Ordering::SeqCst);
        if self.word(ENGINE_SLEEPING).is_some_and(|w| w.load(Ordering::SeqCst) != 0) {
            let _ = (&self.doorbell).write(&1u64.to_ne_bytes());
        }
    }

    /// Blocks until the engine writes this process's eventfd (it completed
    /// something), the engine goes away, or [`BLOCK_MAX`].
    fn block_on_engine(&mut self) {
        if let Some(w) = self.word(HOST_WAITING) {
            w.store(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        if let Some(p) = &self.p2p {
            p.set_asleep(true);
        }
        if !self.events.has_pending() && !self.p2p.as_ref().is_some_and(|p| p.has_work()) {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            let mut fds = vec![PollFd::new(self.wake.as_fd(), PollFlags::POLLIN), PollFd::new(self.conn.as_fd(), PollFlags::POLLIN)];
            if let Some(p) = &self.p2p {
                fds.push(PollFd::new(p.wake_fd(), PollFlags::POLLIN));
            }
            let _ = poll(&mut fds, PollTimeout::from(BLOCK_MAX.as_millis() as u16));
            if fds[1].revents().is_some_and(|r| !r.is_empty()) {
                self.check_engine();
            }
        }
        if let Some(p) = &self.p2p {
            p.set_asleep(false);
            p.drain_wakes();
        }
        if let Some(w) = self.word(HOST_WAITING) {
            w.store(0, Ordering::SeqCst);
        }
        let mut b = [0u8; 8];
        let _ = (&self.wake).read(&mut b);
    }
}

impl PortIo for RemotePort {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }

    fn eager_threshold(&self) -> Option<u32> {
        self.settings.eager_max
    }

    fn rendezvous_protocol(&self) -> outboard_host::RendezvousProtocol {
        self.settings.rndv
    }

    fn max_message(&self) -> u32 {
        self.tokens.max_message()
    }

    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.tokens.take(&cmd)?;
        self.outstanding.posted(cmd.op());
        if self.lost.is_some() {
            // Failed by `poll_event` with the rest.
            return Ok(());
        }
        port_codec::encode_command(&cmd, &mut self.cmd_slot);
        loop {
            match self.commands.push(&self.cmd_slot) {
                Ok(true) => break,
                Ok(false) => {
                    // The ring holds more than the tokens allow under way:
                    // full only while the engine is behind.
                    self.ring_doorbell();
                    std::thread::yield_now();
                    if self.checked.elapsed() > LIVENESS_EVERY {
                        self.check_engine();
                    }
                    if self.lost.is_some() {
                        return Ok(());
                    }
                }
                Err(e) => {
                    self.lose(format!("this process's command ring is broken ({e})"));
                    return Ok(());
                }
            }
        }
        self.idle_since = None;
        self.ring_doorbell();
        Ok(())
    }

    fn poll_event(&mut self) -> Option<Event> {
        let e = if self.lost.is_some() {
            self.outstanding.lost_event(self.ep.port)?
        } else {
            match self.events.pop(&mut self.ev_slot) {
                Ok(true) => match port_codec::decode_event(&self.ev_slot) {
                    Ok(e) => e,
                    Err(err) => {
                        self.lose(format!("the node engine wrote something that is not an event ({err})"));
                        self.outstanding.lost_event(self.ep.port)?
                    }
                },
                Ok(false) => return None,
                Err(err) => {
                    self.lose(format!("this process's event ring is broken ({err})"));
                    self.outstanding.lost_event(self.ep.port)?
                }
            }
        };
        self.outstanding.completed(e.op);
        self.tokens.give_back(e.op);
        self.idle_since = None;
        Some(e)
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn idle(&mut self) {
        self.idle_calls = self.idle_calls.wrapping_add(1);
        if self.lost.is_some() {
            std::thread::yield_now();
            return;
        }
        if self.checked.elapsed() > LIVENESS_EVERY {
            self.check_engine();
        }
        match self.progress {
            Progress::Dedicated => {
                if self.idle_calls % crate::progress::DEDICATED_YIELD_EVERY == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            Progress::SpinThenBlock { spin } | Progress::HostAssisted { spin, .. } => {
                let now = self.clock.now();
                if let Some(p) = &self.p2p {
                    // Fragments moving through the node's link are work,
                    // as the engine's events are.
                    if p.moved() != self.p2p_moved {
                        self.p2p_moved = p.moved();
                        self.idle_since = None;
                    }
                }
                let since = *self.idle_since.get_or_insert(now);
                if now - since < spin {
                    std::thread::yield_now();
                } else {
                    self.block_on_engine();
                }
            }
        }
    }

    fn block(&mut self) {
        if self.lost.is_none() {
            self.block_on_engine();
        }
    }

    fn local_link(&mut self) -> Option<&mut dyn outboard_host::local::LocalLink> {
        match &mut self.p2p {
            Some(p) if p.enabled() => Some(p),
            _ => None,
        }
    }

    /// Zeroed, as the in-process engine's memory is (host code relies on
    /// it: a fresh counter starts at 0).
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        let addr = self.heap.alloc(len)?;
        self.seg.fill(addr, len as usize, 0).map_err(|_| MemoryError::Invalid { addr, len: len as usize })?;
        Ok(HostBuf { addr, len })
    }

    fn alloc_unzeroed(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        Ok(HostBuf { addr: self.heap.alloc(len)?, len })
    }

    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.heap.check(buf.addr, buf.len as usize)?;
        match self.heap.free(buf.addr)? {
            n if n == buf.len => Ok(()),
            _ => Err(MemoryError::Invalid { addr: buf.addr, len: buf.len as usize }),
        }
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.heap.check(addr, out.len())?;
        self.seg.read(addr, out).map_err(|_| MemoryError::Invalid { addr, len: out.len() })
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.heap.check(addr, data.len())?;
        self.seg.write(addr, data).map_err(|_| MemoryError::Invalid { addr, len: data.len() })
    }

    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.heap.check(addr, width.bytes() as usize)?;
        self.seg.atomic(addr, width, op).map_err(|_| MemoryError::Invalid { addr, len: width.bytes() as usize })
    }
}
