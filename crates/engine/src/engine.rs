//! The engine: state, the driving contract, commands from ports.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use outboard_wire::{self as wire, AbortWhat, BodyRepr};

use crate::conn::{Conn, TimerVerdict, TxRecord};
use crate::port::{Port, PostedRecv};
use crate::TokenClass;
use crate::{
    Command, CommandError, Completion, ConfigError, Dma, Endpoint, EngineConfig, Event, Generation, HostBuf, Instant,
    NodeId, OpError, OpId, OpenError, PortId, Stats, Work, ANNOUNCE_MAX,
};

/// What an outgoing operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutKind {
    /// A tagged message; `announce` sends it as a rendezvous announcement.
    Send { tag: u64, announce: bool },
    Write { key: u64, offset: u64 },
    Read { key: u64, offset: u64 },
    /// Serving a remote read of a local region: engine-internal, no host
    /// operation, no token, no event.
    Serve { requester_msg_id: u32 },
    /// The placeholder of a stream message the host gave up (cancelled, or
    /// refused past the retry timeout): engine-internal like `Serve`; it
    /// only keeps the stream position so later messages are not held back.
    Void,
}

impl OutKind {
    /// Whether a host operation (token, event) stands behind it.
    pub(crate) fn is_host_op(self) -> bool {
        !matches!(self, OutKind::Serve { .. } | OutKind::Void)
    }
}

/// An operation that sends: it lives from the command until its data is
/// confirmed (or, for a read, its response is in).
#[derive(Debug, Clone)]
pub(crate) struct OutOp {
    pub port: PortId,
    pub port_gen: Generation,
    pub op: OpId,
    pub kind: OutKind,
    /// The far end: destination, or the requester for `Serve`.
    pub dest: Endpoint,
    /// Local memory: source of the data, or destination of a read.
    pub buf: HostBuf,
    pub stream_seq: u32,
    pub attempt: u32,
    /// Set while waiting to retry after a not-ready refusal.
    pub retry_at: Option<Instant>,
    pub first_refused: Option<Instant>,
    /// Bytes of a read response received so far.
    pub progress: u32,
    /// The payload, when it lives in engine memory (multi-send) rather
    /// than being re-read from the host.
    pub shared: Option<std::sync::Arc<[u8]>>,
    /// The multi-send this copy belongs to.
    pub multi: Option<u32>,
    /// Its fragments carry [`wire::FLAG_INTERRUPT`] (`Command::SendMarked`).
    pub interrupt: bool,
}

impl OutOp {
    /// A host operation not yet queued (`Engine::queue_out` numbers it).
    pub(crate) fn new(port: PortId, port_gen: Generation, op: OpId, kind: OutKind, dest: Endpoint, buf: HostBuf) -> OutOp {
        OutOp {
            port,
            port_gen,
            op,
            kind,
            dest,
            buf,
            stream_seq: 0,
            attempt: 0,
            retry_at: None,
            first_refused: None,
            progress: 0,
            shared: None,
            multi: None,
            interrupt: false,
        }
    }
}

/// One multi-send command: its copies complete it together.
#[derive(Debug, Clone)]
pub(crate) struct MultiOp {
    pub port: PortId,
    pub port_gen: Generation,
    pub op: OpId,
    pub remaining: u32,
    pub first_error: Option<OpError>,
}

/// Where an arriving message's bytes go.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sink {
    Posted(PostedRecv),
    Unexpected,
    Rdma { addr: u64 },
}

/// A message being received.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inbound {
    pub port: PortId,
    pub src: Endpoint,
    pub tag: u64,
    /// A rendezvous announcement: completes as `Completion::Announced`.
    pub announce: bool,
    /// An announcement's bytes: kept here, not written to the receive's
    /// buffer.
    pub info: [u8; ANNOUNCE_MAX as usize],
    pub total: u32,
    pub received: u32,
    pub sink: Sink,
    pub fault: bool,
    /// Marked: its delivery asks for an interrupt (`Command::SendMarked`).
    pub interrupt: bool,
}

/// The offload engine of one node: the NIC's control program, as a sans-IO
/// state machine.
///
/// # Driving contract
///
/// The engine has no threads, sockets, clocks or sleeps. Its driver (the
/// runtime's engine thread, the simulator, the test network) calls:
///
/// - inputs: [`handle_packet`](Self::handle_packet) when a datagram arrives,
///   [`handle_command`](Self::handle_command) when a port posts work,
///   [`handle_timeout`](Self::handle_timeout) when the deadline from
///   [`poll_timeout`](Self::poll_timeout) passes (calling it early is
///   harmless);
/// - then, until each returns `None`: [`poll_transmit`](Self::poll_transmit)
///   for datagrams to send, [`poll_event`](Self::poll_event) for completions,
///   and finally [`poll_timeout`](Self::poll_timeout) for the next deadline;
/// - [`take_work`](Self::take_work) whenever it wants the work done so far
///   (the simulator charges NIC time for it).
///
/// Every `now` passed in must be monotonic. Host memory is reached only
/// through the [`Dma`] the engine owns.
pub struct Engine<D: Dma> {
    pub(crate) cfg: EngineConfig,
    /// The packet MAC's key, derived once from `cfg.secret` and
    /// `cfg.job_key`.
    pub(crate) mac: wire::MacKey,
    pub(crate) dma: D,
    pub(crate) ports: Vec<Port>,
    /// Connections by index (`conn_index`), with their deadlines kept in
    /// a heap ([`crate::conn_table`]).
    pub(crate) conns: crate::conn_table::ConnTable,
    /// Connection by peer. Fx hashing: looked up for every packet, keyed
    /// by node numbers the driver maps from its own peer table (never
    /// chosen by a remote sender, so no hash flooding to defend against).
    pub(crate) conn_index: rustc_hash::FxHashMap<NodeId, usize>,
    /// Connections that may have something to transmit.
    pub(crate) ready: VecDeque<usize>,
    /// Outgoing operations by engine-local key (also their message id).
    pub(crate) ops: BTreeMap<u32, OutOp>,
    pub(crate) next_key: u32,
    /// Operations waiting to be retried.
    pub(crate) parked: BTreeSet<u32>,
    /// Messages being received, by (sending node, sender's message id).
    /// Hashed: entered and left once per message, and only iterated where
    /// order does not matter or is restored (`peer_failed` sorts).
    pub(crate) inbound: rustc_hash::FxHashMap<(NodeId, u32), Inbound>,
    pub(crate) unexpected_used: usize,
    pub(crate) events: VecDeque<Event>,
    pub(crate) stats: Stats,
    pub(crate) work: Work,
    pub(crate) region_counter: u64,
    pub(crate) now: Instant,
    /// Groups, running collectives, their packets.
    pub(crate) coll: crate::coll::run::CollState,
    /// Multi-sends under way.
    pub(crate) multis: HashMap<u32, MultiOp>,
    pub(crate) next_multi: u32,
    /// When to next probe the peers that operations wait on (see
    /// [`crate::keepalive`]); `None` while nothing waits.
    pub(crate) keepalive_at: Option<Instant>,
    /// Atomic operations, both roles (module `atomic`).
    pub(crate) atomics: crate::atomic::AtomicState,
    /// NICVM modules and their sends (module `nicvm`).
    pub(crate) nicvm: crate::nicvm::NicvmState,
    /// The NIC collective protocol's barriers (module `coll::proto`).
    pub(crate) nic_coll: crate::coll::proto::NicCollState,
    /// The last closed incarnation of each peer port slot announced closed
    /// and not seen reopened (module `port_closed`): at most one entry per
    /// (peer, slot).
    pub(crate) closed_sources: rustc_hash::FxHashMap<(NodeId, PortId), Generation>,
}

impl<D: Dma> Engine<D> {
    /// Creates an engine at time `now`.
    pub fn new(cfg: EngineConfig, dma: D, now: Instant) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let ports = (0..cfg.max_ports).map(|_| Port::default()).collect();
        let mac = cfg.mac_key();
        Ok(Engine {
            mac,
            cfg,
            dma,
            ports,
            conns: Default::default(),
            conn_index: Default::default(),
            ready: VecDeque::new(),
            ops: BTreeMap::new(),
            next_key: 1,
            parked: BTreeSet::new(),
            inbound: rustc_hash::FxHashMap::default(),
            unexpected_used: 0,
            events: VecDeque::new(),
            stats: Stats::default(),
            work: Work::default(),
            region_counter: 0,
            now,
            coll: Default::default(),
            multis: HashMap::new(),
            next_multi: 0,
            keepalive_at: None,
            atomics: Default::default(),
            nicvm: Default::default(),
            nic_coll: Default::default(),
            closed_sources: Default::default(),
        })
    }

    /// Takes the time of an input or poll. Time never goes back across
    /// `handle_*` and `poll_transmit` calls (the driving contract): a `now`
    /// earlier than one already seen there is a driver's bug, caught in
    /// debug builds. `open_port` and `close_port` come from the host side,
    /// whose reading of the clock may trail the engine's (the runtime reads
    /// it before taking the engine's lock; the simulator opens ports at the
    /// host's time while the NIC works ahead): they take the later of the
    /// two, so engine time never goes back.
    pub(crate) fn set_now(&mut self, now: Instant) {
        debug_assert!(now >= self.now, "time went back: {now:?} after {:?}", self.now);
        self.now = now;
    }

    /// Checks (in debug builds) the byte accounting at the end of an input.
    pub(crate) fn debug_check(&self) {
        self.coll.debug_check_bytes();
    }

    /// This engine's node.
    pub fn node(&self) -> NodeId {
        self.cfg.node
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Returns and clears the work tally.
    #[must_use]
    pub fn take_work(&mut self) -> Work {
        std::mem::take(&mut self.work)
    }

    /// The host memory.
    pub fn dma(&self) -> &D {
        &self.dma
    }

    /// The host memory, mutable (for the driver and tests).
    pub fn dma_mut(&mut self) -> &mut D {
        &mut self.dma
    }

    /// Opens port slot `port`; returns the new incarnation's endpoint.
    pub fn open_port(&mut self, now: Instant, port: PortId) -> Result<Endpoint, OpenError> {
        // The host's clock may trail the engine's (see `set_now`): the
        // engine's time does not go back for it.
        let now = self.now.max(now);
        self.now = now;
        let cfg = &self.cfg;
        let p = self.ports.get_mut(usize::from(port.0)).ok_or(OpenError::NoSuchPort(port))?;
        if p.open {
            return Err(OpenError::InUse(port));
        }
        let gen = p.gen + 1;
        *p = Port { gen, open: true, send_tokens: cfg.send_tokens,
            recv_tokens: cfg.recv_tokens,
            coll_tokens: cfg.coll_tokens,
            ..Port::default()
        };
        Ok(Endpoint { node: cfg.node, port, gen })
    }

    /// The endpoint of an open port.
    pub fn endpoint(&self, port: PortId) -> Option<Endpoint> {
        let p = self.ports.get(usize::from(port.0))?;
        p.open.then_some(Endpoint { node: self.cfg.node, port, gen: p.gen })
    }

    /// Closes a port (its process exited or closed it): everything it had
    /// under way is dropped without events, messages it was sending are
    /// aborted at their receivers, and nothing addressed to this incarnation
    /// will ever be delivered to a later one.
    pub fn close_port(&mut self, now: Instant, port: PortId) {
        // The host's clock may trail the engine's (see `set_now`): the
        // engine's time does not go back for it.
        let now = self.now.max(now);
        self.now = now;
        let Some(p) = self.ports.get_mut(usize::from(port.0)) else { return };
        if !p.open {
            return;
        }
        let gen = p.gen;
        p.open = false;
        p.posted.clear();
        let freed: usize = p.unexpected.drain(..).map(|u| u.data.len()).sum();
        self.unexpected_used -= freed;
        p.regions.clear();
        p.tx_streams.clear();
        p.rx_streams.clear();
        let dead: Vec<u32> =
            self.ops.iter().filter(|(_, o)| o.port == port && o.port_gen == gen).map(|(k, _)| *k).collect();
        for k in dead {
            self.ops.remove(&k);
            self.parked.remove(&k);
        }
        // Their queued fragments become aborts when transmitted.
        for i in 0..self.conns.len() {
            self.mark_ready(i);
        }
        self.inbound.retain(|_, m| m.port != port);
        self.multis.retain(|_, m| m.port != port);
        for s in &Self::SUBSYSTEMS {
            (s.port_closed)(self, now, port, gen);
        }
        self.announce_port_closed(port, gen, now);
        self.keepalive_settle();
        self.conns.settle();
        self.debug_check();
    }

    /// Handles one command from `port`. On `Ok`, exactly one [`Event`] for
    /// the command's `OpId` follows (possibly already queued); on `Err`
    /// nothing was consumed.
    pub fn handle_command(&mut self, now: Instant, port: PortId, cmd: Command) -> Result<(), CommandError> {
        self.set_now(now);
        self.work.commands += 1;
        let r = self.command(now, port, cmd);
        self.coll_drain(now);
        self.keepalive_settle();
        self.conns.settle();
        self.debug_check();
        r
    }

    fn command(&mut self, now: Instant, port: PortId, cmd: Command) -> Result<(), CommandError> {
        let pi = usize::from(port.0);
        let gen = match self.ports.get(pi) {
            Some(p) if p.open => p.gen,
            _ => return Err(CommandError::PortNotOpen(port)),
        };
        match cmd {
            Command::Send { op, dest, tag, buf } => {
                self.start_out(now, port, gen, op, OutKind::Send { tag, announce: false }, dest, buf, false)
            }
            Command::Announce { op, dest, tag, buf } => {
                if buf.len > ANNOUNCE_MAX {
                    return Err(CommandError::TooLong { len: u64::from(buf.len), max: ANNOUNCE_MAX });
                }
                self.start_out(now, port, gen, op, OutKind::Send { tag, announce: true }, dest, buf, false)
            }
            Command::SendMarked { op, dest, tag, buf } => {
                self.start_out(now, port, gen, op, OutKind::Send { tag, announce: false }, dest, buf, true)
            }
            Command::SetInterruptFlag { op, word } => {
                let result = if word.len == 0 || word.len == 4 {
                    let p = &mut self.ports[pi];
                    p.interrupt_word = (word.len == 4).then_some(word.addr);
                    Ok(Completion::InterruptFlagSet)
                } else {
                    Err(OpError::DmaFault)
                };
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::RdmaWrite { op, dest, key, offset, buf } => {
                self.start_out(now, port, gen, op, OutKind::Write { key, offset }, dest, buf, false)
            }
            Command::RdmaRead { op, dest, key, offset, buf } => {
                self.start_out(now, port, gen, op, OutKind::Read { key, offset }, dest, buf, false)
            }
            Command::Recv { op, matching, buf } => {
                let p = &mut self.ports[pi];
                if p.recv_tokens == 0 {
                    return Err(CommandError::NoRecvToken);
                }
                p.recv_tokens -= 1;
                self.post_recv(now, port, PostedRecv { op, matching, buf });
                Ok(())
            }
            Command::Register { op, buf } => {
                let key = self.new_region_key();
                self.ports[pi].regions.insert(key, buf);
                self.events.push_back(Event { port, op, result: Ok(Completion::Registered { key }) });
                Ok(())
            }
            Command::Deregister { op, key } => {
                let result = match self.ports[pi].regions.remove(&key) {
                    Some(_) => Ok(Completion::Deregistered),
                    None => Err(OpError::NoSuchRegion),
                };
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::Cancel { op, target } => {
                let result = self.cancel(port, gen, target);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::MultiSend { op, dests, tag, buf } => self.start_multi(now, port, gen, op, dests, tag, buf),
            Command::CreateGroup { op, group, rank, members } => {
                let result = self.coll_create_group(port, gen, group, rank, members);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::DestroyGroup { op, group } => {
                let result = if self.nic_coll_busy(port, group) {
                    Err(crate::CollError::GroupBusy.into())
                } else {
                    let r = self.coll_destroy_group(port, group);
                    if r.is_ok() {
                        self.nic_coll_forget(port, group);
                    }
                    r
                };
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::SetSchedule { op, group, schedule, buf } => {
                let result = self.coll_set_schedule(port, group, schedule, buf);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::Collective { op, group, schedule, reduction, send, recv } => {
                let p = &mut self.ports[pi];
                if p.coll_tokens == 0 {
                    return Err(CommandError::NoCollToken);
                }
                p.coll_tokens -= 1;
                if let Err(e) = self.coll_start(now, port, crate::coll::run::CollRequest { op, group, schedule, reduction, send, recv }) {
                    self.complete(port, gen, op, Err(e), TokenClass::Coll);
                }
                Ok(())
            }
            Command::NicBarrier { op, group, schedule } => {
                let p = &mut self.ports[pi];
                if p.coll_tokens == 0 {
                    return Err(CommandError::NoCollToken);
                }
                p.coll_tokens -= 1;
                if let Err(e) = self.nic_barrier_start(now, port, op, group, schedule) {
                    self.complete(port, gen, op, Err(e), TokenClass::Coll);
                }
                Ok(())
            }
            Command::Atomic { op, dest, key, offset, width, atomic, ret } => {
                if self.conn_index.get(&dest.node).is_some_and(|&ci| self.conns[ci].dead) {
                    return Err(CommandError::PeerUnreachable(dest.node));
                }
                let p = &mut self.ports[pi];
                if p.send_tokens == 0 {
                    return Err(CommandError::NoSendToken);
                }
                p.send_tokens -= 1;
                self.atomic_start(now, port, gen, op, dest, key, offset, width, atomic, ret);
                Ok(())
            }
            Command::NicvmLoad { op, module, name, code, acc_len, persist, replace } => {
                let req = crate::nicvm::command::LoadRequest { module, name, code, acc_len, persist, replace };
                let result = self.nicvm_load(port, gen, req);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::NicvmPurge { op, module } => {
                let result = self.nicvm_purge(module);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::NicvmList { op, buf } => {
                let result = self.nicvm_list(port, buf);
                self.events.push_back(Event { port, op, result });
                Ok(())
            }
            Command::NicvmSend { op, module, generation, group, root, dest, buf } => {
                let req = crate::nicvm::command::SendRequest { module, generation, group, root, dest, buf };
                self.nicvm_send_command(now, port, gen, op, req)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn start_out(
        &mut self,
        now: Instant,
        port: PortId,
        gen: Generation,
        op: OpId,
        kind: OutKind,
        dest: Endpoint,
        buf: HostBuf,
        interrupt: bool,
    ) -> Result<(), CommandError> {
        if buf.len > self.cfg.max_message {
            return Err(CommandError::TooLong { len: u64::from(buf.len), max: self.cfg.max_message });
        }
        if let Some(&ci) = self.conn_index.get(&dest.node) {
            if self.conns[ci].dead {
                return Err(CommandError::PeerUnreachable(dest.node));
            }
        }
        let p = &mut self.ports[usize::from(port.0)];
        if p.send_tokens == 0 {
            return Err(CommandError::NoSendToken);
        }
        p.send_tokens -= 1;
        let mut out = OutOp::new(port, gen, op, kind, dest, buf);
        out.interrupt = interrupt;
        self.queue_out(now, out);
        Ok(())
    }

    /// Gives an outgoing operation its stream position (messages and
    /// writes), a key, and its first attempt on the wire.
    pub(crate) fn queue_out(&mut self, now: Instant, mut out: OutOp) {
        if matches!(out.kind, OutKind::Send { .. } | OutKind::Write { .. }) {
            let p = &mut self.ports[usize::from(out.port.0)];
            let s = p.tx_streams.entry((out.dest.node, out.dest.port.0, out.dest.gen)).or_insert(0);
            out.stream_seq = *s;
            *s = s.wrapping_add(1);
        }
        let key = self.alloc_key();
        self.ops.insert(key, out);
        // Until it completes, the operation waits on its far end.
        self.keepalive_arm(now);
        self.launch(now, key);
    }

    /// Starts a multi-send: reads the destinations and the payload once,
    /// then one stream message per destination sharing the payload.
    #[allow(clippy::too_many_arguments)]
    fn start_multi(
        &mut self,
        now: Instant,
        port: PortId,
        gen: Generation,
        op: OpId,
        dests: HostBuf,
        tag: u64,
        buf: HostBuf,
    ) -> Result<(), CommandError> {
        if buf.len > self.cfg.max_message {
            return Err(CommandError::TooLong { len: u64::from(buf.len), max: self.cfg.max_message });
        }
        if dests.len > self.cfg.max_message {
            return Err(CommandError::TooLong { len: u64::from(dests.len), max: self.cfg.max_message });
        }
        let p = &mut self.ports[usize::from(port.0)];
        if p.send_tokens == 0 {
            return Err(CommandError::NoSendToken);
        }
        p.send_tokens -= 1;
        let mut list = vec![0; dests.len as usize];
        let mut data = vec![0; buf.len as usize];
        let read = (dests.len == 0 || self.dma.read(port, dests.addr, &mut list).is_ok())
            && (buf.len == 0 || self.dma.read(port, buf.addr, &mut data).is_ok());
        if !read {
            self.complete(port, gen, op, Err(OpError::DmaFault), TokenClass::Send);
            return Ok(());
        }
        self.work.dma_read += u64::from(dests.len) + u64::from(buf.len);
        let dests: Vec<Endpoint> = match crate::MemberList::decode(&list) {
            Ok(d) => d.iter().collect(),
            Err(e) => {
                self.complete(port, gen, op, Err(e.into()), TokenClass::Send);
                return Ok(());
            }
        };
        let shared: std::sync::Arc<[u8]> = data.into();
        let id = self.next_multi;
        self.next_multi = self.next_multi.wrapping_add(1);
        self.multis.insert(id, MultiOp { port, port_gen: gen, op, remaining: dests.len() as u32, first_error: None });
        for dest in dests {
            let dead = self.conn_index.get(&dest.node).is_some_and(|&ci| self.conns[ci].dead);
            if dead {
                self.multi_part_done(id, Err(OpError::PeerUnreachable(dest.node)));
                continue;
            }
            let mut out = OutOp::new(port, gen, op, OutKind::Send { tag, announce: false }, dest, buf);
            out.shared = Some(shared.clone());
            out.multi = Some(id);
            self.queue_out(now, out);
        }
        Ok(())
    }

    /// One copy of multi-send `id` finished; the last one completes it.
    pub(crate) fn multi_part_done(&mut self, id: u32, result: Result<Completion, OpError>) {
        let Some(m) = self.multis.get_mut(&id) else { return };
        if let Err(e) = result {
            m.first_error.get_or_insert(e);
        }
        m.remaining = m.remaining.saturating_sub(1);
        if m.remaining == 0 {
            let m = self.multis.remove(&id).expect("present");
            let result = match m.first_error {
                Some(e) => Err(e),
                None => Ok(Completion::Sent),
            };
            self.complete(m.port, m.port_gen, m.op, result, TokenClass::Send);
        }
    }

    /// Reports a host operation's end: to its multi-send if it is a copy
    /// of one, else straight to its port.
    fn op_result(&mut self, op: &OutOp, result: Result<Completion, OpError>) {
        match op.multi {
            Some(id) => self.multi_part_done(id, result),
            None => self.complete(op.port, op.port_gen, op.op, result, TokenClass::Send),
        }
    }

    pub(crate) fn alloc_key(&mut self) -> u32 {
        loop {
            // Keys with the top bit are collective packets'.
            let k = self.next_key;
            self.next_key = (self.next_key.wrapping_add(1) & !crate::coll::run::COLL_KEY_BIT).max(1);
            if !self.ops.contains_key(&k) {
                return k;
            }
        }
    }

    /// Queues a (new) attempt of operation `key` on its connection.
    pub(crate) fn launch(&mut self, now: Instant, key: u32) {
        let Some(op) = self.ops.get_mut(&key) else { return };
        op.attempt = op.attempt.wrapping_add(1);
        op.retry_at = None;
        let op = op.clone();
        let ci = self.conn_for(op.dest.node, now);
        if self.conns[ci].dead {
            self.fail_op(key, OpError::PeerUnreachable(op.dest.node));
            return;
        }
        let mtu = self.cfg.mtu;
        let conn = &mut self.conns[ci];
        match op.kind {
            OutKind::Read { key: rkey, offset } => {
                let req = wire::ReadRequest {
                    src_port: op.port.0,
                    dst_port: op.dest.port.0,
                    src_gen: op.port_gen,
                    dst_gen: op.dest.gen,
                    msg_id: key,
                    key: rkey,
                    offset,
                    len: op.buf.len,
                };
                conn.push(TxRecord::Control(BodyRepr::ReadRequest(req)), now);
            }
            OutKind::Send { .. } | OutKind::Write { .. } | OutKind::Serve { .. } | OutKind::Void => {
                let (chunk, abort) = match op.kind {
                    OutKind::Serve { requester_msg_id } => (
                        mtu - wire::HEADER_LEN - wire::READ_RESPONSE_FIXED_LEN,
                        TxRecord::abort_for(AbortWhat::ReadResponse, requester_msg_id),
                    ),
                    _ => (mtu - wire::HEADER_LEN - wire::DATA_FIXED_LEN, TxRecord::abort_for(AbortWhat::Message, key)),
                };
                let total = op.buf.len;
                let mut offset = 0u32;
                loop {
                    let len = (total - offset).min(chunk as u32);
                    conn.push(TxRecord::Fragment { key, attempt: op.attempt, offset, len, abort }, now);
                    offset += len;
                    if offset >= total {
                        break;
                    }
                }
            }
        }
        self.mark_ready(ci);
    }

    pub(crate) fn conn_for(&mut self, node: NodeId, now: Instant) -> usize {
        if let Some(&i) = self.conn_index.get(&node) {
            return i;
        }
        let i = self.conns.push(Conn::new(node, &self.cfg, now));
        self.conn_index.insert(node, i);
        i
    }

    pub(crate) fn mark_ready(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if !c.queued {
            c.queued = true;
            self.ready.push_back(ci);
        }
    }

    /// Completes a host operation: queues its event and returns its token
    /// of class `token`.
    pub(crate) fn complete(
        &mut self,
        port: PortId,
        gen: Generation,
        op: OpId,
        result: Result<Completion, OpError>,
        token: TokenClass,
    ) {
        let Some(p) = self.ports.get_mut(usize::from(port.0)) else { return };
        if !p.open || p.gen != gen {
            return;
        }
        match token {
            TokenClass::Send => p.send_tokens += 1,
            TokenClass::Recv => p.recv_tokens += 1,
            TokenClass::Coll => p.coll_tokens += 1,
        }
        self.events.push_back(Event { port, op, result });
    }

    /// Removes an outgoing operation and reports its failure.
    pub(crate) fn fail_op(&mut self, key: u32, err: OpError) {
        self.parked.remove(&key);
        if let Some(op) = self.ops.remove(&key) {
            if op.kind.is_host_op() {
                self.op_result(&op, Err(err));
            }
            let ci = self.conn_index.get(&op.dest.node).copied();
            if let Some(ci) = ci {
                self.mark_ready(ci);
            }
        }
    }

    /// Ends a parked operation with `err` for its host. A stream message
    /// leaves a [`OutKind::Void`] behind in its place, retried like it, so
    /// the receiver's stream moves past it.
    pub(crate) fn give_up(&mut self, key: u32, err: OpError) {
        let Some(op) = self.ops.get(&key) else { return };
        if !matches!(op.kind, OutKind::Send { .. } | OutKind::Write { .. }) {
            self.fail_op(key, err);
            return;
        }
        let op = op.clone();
        self.op_result(&op, Err(err));
        let op = self.ops.get_mut(&key).expect("checked above");
        op.kind = OutKind::Void;
        op.buf.len = 0;
        op.first_refused = None;
    }

    /// Removes an outgoing operation that finished.
    pub(crate) fn finish_op(&mut self, key: u32) {
        if let Some(op) = self.ops.remove(&key) {
            let done = match op.kind {
                OutKind::Send { .. } => Completion::Sent,
                OutKind::Write { .. } => Completion::Written,
                OutKind::Read { .. } => Completion::Read,
                OutKind::Serve { .. } | OutKind::Void => return,
            };
            self.op_result(&op, Ok(done));
        }
    }

    /// Posts a receive: it takes a message that arrived already, or waits.
    /// One naming a source waits on that node: the keepalive probes it,
    /// and if it is known dead the receive fails at once (no packet would
    /// ever tell it so).
    fn post_recv(&mut self, now: Instant, port: PortId, recv: PostedRecv) {
        let pi = usize::from(port.0);
        let p = &mut self.ports[pi];
        match p.match_unexpected(&recv.matching) {
            Some(i) if p.unexpected[i].complete() => {
                let u = p.unexpected.remove(i).expect("index from position");
                self.unexpected_used -= u.data.len();
                self.deliver_buffered_as(port, recv, u.src, u.tag, &u.data, u.announce, u.interrupt);
            }
            Some(i) => p.unexpected[i].bound = Some(recv),
            None => {
                let Some((node, _)) = recv.matching.source else {
                    p.posted.push_back(recv);
                    return;
                };
                if self.conn_index.get(&node).is_some_and(|&ci| self.conns[ci].dead) {
                    let gen = p.gen;
                    self.complete(port, gen, recv.op, Err(OpError::PeerUnreachable(node)), TokenClass::Recv);
                    return;
                }
                if let Some(src) = self.closed_source_of(&recv) {
                    let gen = self.ports[pi].gen;
                    self.complete(port, gen, recv.op, Err(OpError::SourceClosed(src)), TokenClass::Recv);
                    return;
                }
                let p = &mut self.ports[pi];
                p.posted.push_back(recv);
                self.keepalive_arm(now);
            }
        }
    }

    /// Copies a message held in engine memory into a receive buffer and
    /// completes the receive.
    pub(crate) fn deliver_buffered(&mut self, port: PortId, recv: PostedRecv, src: Endpoint, tag: u64, data: &[u8]) {
        self.deliver_buffered_as(port, recv, src, tag, data, false, false)
    }

    /// [`Self::deliver_buffered`] of a message that may be an announcement
    /// or marked for an interrupt.
    #[allow(clippy::too_many_arguments)] // the message's parts, as stored
    pub(crate) fn deliver_buffered_as(
        &mut self,
        port: PortId,
        recv: PostedRecv,
        src: Endpoint,
        tag: u64,
        data: &[u8],
        announce: bool,
        interrupt: bool,
    ) {
        if interrupt {
            self.marked_delivered(port);
        }
        let gen = self.ports[usize::from(port.0)].gen;
        if announce {
            let mut info = [0u8; ANNOUNCE_MAX as usize];
            let n = data.len().min(info.len());
            info[..n].copy_from_slice(&data[..n]);
            let result = Ok(Completion::Announced { src, tag, len: data.len() as u32, info });
            self.complete(port, gen, recv.op, result, TokenClass::Recv);
            return;
        }
        let n = data.len().min(recv.buf.len as usize);
        let len = data.len() as u32;
        let result = match self.dma.write(port, recv.buf.addr, &data[..n]) {
            Err(_) => Err(OpError::DmaFault),
            Ok(()) if n < data.len() => Err(OpError::Truncated { src, tag, len }),
            Ok(()) => Ok(Completion::Received { src, tag, len }),
        };
        self.work.dma_written += n as u64;
        self.stats.unexpected_bytes_copied += n as u64;
        self.complete(port, gen, recv.op, result, TokenClass::Recv);
    }

    fn cancel(&mut self, port: PortId, gen: Generation, target: OpId) -> Result<Completion, OpError> {
        let p = &mut self.ports[usize::from(port.0)];
        if let Some(i) = p.posted.iter().position(|r| r.op == target) {
            p.posted.remove(i);
            self.complete(port, gen, target, Err(OpError::Cancelled), TokenClass::Recv);
            return Ok(Completion::Cancelled);
        }
        let parked = self
            .parked
            .iter()
            .copied()
            .find(|k| {
                self.ops.get(k).is_some_and(|o| o.port == port && o.port_gen == gen && o.op == target && o.multi.is_none())
            });
        if let Some(k) = parked {
            self.give_up(k, OpError::Cancelled);
            return Ok(Completion::Cancelled);
        }
        Err(OpError::NotCancellable)
    }

    fn new_region_key(&mut self) -> u64 {
        // Keys must be hard to guess across jobs and incarnations: mix the
        // job key, this engine's boot and a counter (SplitMix64 finaliser).
        self.region_counter += 1;
        let mut z = self.cfg.job_key
            ^ self.cfg.boot.rotate_left(32)
            ^ self.region_counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Whether [`poll_event`](Self::poll_event) has a completion to give
    /// (a driver that reads datagrams one at a time can stop reading and
    /// hand a completion over first).
    #[must_use]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next completion, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // The earliest of plain options, not a chain of iterators: a
        // driver asks after every input.
        fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        }
        let mut t = self.conns.next_deadline();
        if !self.parked.is_empty() {
            t = earliest(t, self.parked.iter().filter_map(|k| self.ops.get(k).and_then(|o| o.retry_at)).min());
        }
        for s in &Self::SUBSYSTEMS {
            t = earliest(t, (s.deadline)(self));
        }
        t
    }

    /// Handles timers due at `now`: retransmissions, dead peers, keepalive
    /// probes, retries of refused messages. Early calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.set_now(now);
        self.work.timers += 1;
        for ci in self.conns.take_due(now) {
            match self.conns[ci].on_timer(now, &self.cfg) {
                TimerVerdict::Idle if self.conns[ci].ack_needed => self.mark_ready(ci),
                TimerVerdict::Idle => {}
                TimerVerdict::Retransmit => {
                    self.stats.timeouts += 1;
                    self.mark_ready(ci);
                }
                TimerVerdict::PeerDead => {
                    self.peer_failed(ci, now, false);
                    self.notify_peer_failed(ci, now);
                    self.nic_coll_notify_members(ci, now);
                }
            }
        }
        for s in &Self::SUBSYSTEMS {
            (s.due)(self, now);
        }
        self.coll_drain(now);
        self.keepalive_settle();
        self.conns.settle();
        self.debug_check();
        let due: Vec<u32> = self
            .parked
            .iter()
            .copied()
            .filter(|k| self.ops.get(k).and_then(|o| o.retry_at).is_some_and(|t| t <= now))
            .collect();
        if due.is_empty() {
            return;
        }
        // Retry whole streams at once and in stream order (keys grow with
        // the stream position), so the receiver sees them in order.
        let mut batch: BTreeSet<u32> = due.iter().copied().collect();
        for k in &due {
            let Some(o) = self.ops.get(k) else { continue };
            let (port, dest) = (o.port, o.dest);
            batch.extend(
                self.parked.iter().copied().filter(|j| self.ops.get(j).is_some_and(|p| p.port == port && p.dest == dest)),
            );
        }
        for k in batch {
            self.parked.remove(&k);
            self.stats.retries += 1;
            self.launch(now, k);
        }
    }

    /// Declares the peer of connection `ci` dead (or restarted): every
    /// operation that needs it fails.
    pub(crate) fn peer_failed(&mut self, ci: usize, now: Instant, restarted: bool) {
        let node = self.conns[ci].peer;
        self.stats.peers_failed += 1;
        self.forget_closed_sources(node);
        if !restarted && self.stats.first_failed.is_none() {
            self.stats.first_failed = Some(node);
        }
        if restarted {
            self.conns[ci].reset(&self.cfg, now);
        } else {
            let c = &mut self.conns[ci];
            c.dead = true;
            c.records.clear();
            c.pending_confirm.clear();
            c.acked();
        }
        let keys: Vec<u32> = self.ops.iter().filter(|(_, o)| o.dest.node == node).map(|(k, _)| *k).collect();
        for k in keys {
            self.fail_op(k, OpError::PeerUnreachable(node));
        }
        for s in &Self::SUBSYSTEMS {
            (s.peer_failed)(self, now, node);
        }
        // Partly received messages from it will never complete.
        let mut partial: Vec<(NodeId, u32)> = self.inbound.keys().filter(|(n, _)| *n == node).copied().collect();
        partial.sort_unstable();
        for key in partial {
            self.drop_inbound(key);
        }
        // Receives that only it could satisfy fail; after a death (not a
        // restart), so do receives from any source, which it might have
        // been the one to satisfy (ULFM's "pending" failure).
        self.fail_posted_recvs(|r| match r.matching.source {
            Some((n, _)) if n == node => Some(OpError::PeerUnreachable(node)),
            None if !restarted => Some(OpError::ProcFailedPending(node)),
            _ => None,
        });
    }

    /// Completes with `verdict`'s error every receive posted on an open
    /// port that it gives one for, in each port's posted order; the others
    /// stay posted. (A peer's death and a peer port's closure fail
    /// receives this way.)
    pub(crate) fn fail_posted_recvs(&mut self, mut verdict: impl FnMut(&crate::port::PostedRecv) -> Option<OpError>) {
        for pi in 0..self.ports.len() {
            let p = &mut self.ports[pi];
            if !p.open {
                continue;
            }
            let gen = p.gen;
            let mut failed = Vec::new();
            p.posted.retain(|r| match verdict(r) {
                Some(err) => {
                    failed.push((r.op, err));
                    false
                }
                None => true,
            });
            for (op, err) in failed {
                self.complete(PortId(pi as u8), gen, op, Err(err), TokenClass::Recv);
            }
        }
    }

    /// Forgets a partly received message; a receive it had matched goes back
    /// to the head of the posted queue.
    pub(crate) fn drop_inbound(&mut self, key: (NodeId, u32)) {
        let Some(m) = self.inbound.remove(&key) else { return };
        let p = &mut self.ports[usize::from(m.port.0)];
        match m.sink {
            Sink::Posted(r) => p.posted.push_front(r),
            Sink::Unexpected => {
                if let Some(i) = p.find_unexpected(key) {
                    let u = p.unexpected.remove(i).expect("index from position");
                    self.unexpected_used -= u.data.len();
                    if let Some(r) = u.bound {
                        p.posted.push_front(r);
                    }
                }
            }
            Sink::Rdma { .. } => {}
        }
    }

    /// True when nothing is queued, unacknowledged or under way: no
    /// outgoing operation, no partial message, nothing to transmit.
    pub fn is_quiet(&self) -> bool {
        self.ops.is_empty()
            && self.inbound.is_empty()
            && Self::SUBSYSTEMS.iter().all(|s| (s.is_quiet)(self))
            && self.conns.iter().all(|c| c.dead || c.is_quiet())
    }

    /// Number of outgoing operations under way (for tests and diagnostics).
    pub fn ops_in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Bytes held for unexpected messages.
    pub fn unexpected_bytes(&self) -> usize {
        self.unexpected_used
    }
}
