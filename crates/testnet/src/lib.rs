//! A deterministic, lossy test network that drives real Outboard engines.
//!
//! `Network` wires N [`Engine`]s (each with simulated host memory,
//! [`VecMemory`]) through links that lose, duplicate, reorder, delay and
//! corrupt datagrams, every choice drawn from one seeded RNG and all state in
//! ordered containers, so a seed reproduces a run exactly. Virtual time jumps
//! to the next event (a datagram arriving or an engine timer), like
//! quinn-proto's test `Pair`; a step bound catches livelock, and every
//! failure message names the seed.
//!
//! This is test infrastructure, not the simulator: it charges no hardware
//! costs. The simulator (`outboard-sim`) drives the same engines with a cost
//! model.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

use outboard_engine::{
    Command, CommandError, Endpoint, Engine, EngineConfig, Event, Instant, NodeId, OpenError, PortId, VecMemory,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Behaviour of a link (one direction between two nodes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Fixed one-way delay.
    pub latency: Duration,
    /// Extra delay drawn uniformly from `0..=jitter` per datagram; any
    /// jitter larger than the gap between datagrams reorders them.
    pub jitter: Duration,
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability one byte of a datagram is flipped.
    pub corrupt: f64,
}

impl LinkConfig {
    /// A perfect link with `latency`.
    pub fn perfect(latency: Duration) -> Self {
        LinkConfig { latency, jitter: Duration::ZERO, loss: 0.0, duplicate: 0.0, corrupt: 0.0 }
    }

    /// A hostile link: the given loss, duplication and corruption rates and
    /// jitter of several latencies (heavy reordering).
    pub fn lossy(loss: f64, duplicate: f64, corrupt: f64) -> Self {
        LinkConfig {
            latency: Duration::from_micros(5),
            jitter: Duration::from_micros(20),
            loss,
            duplicate,
            corrupt,
        }
    }
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig::perfect(Duration::from_micros(5))
    }
}

/// The network gave up: the step bound was reached before the condition
/// held (likely livelock or a lost completion).
#[derive(Debug, Clone)]
pub struct Stalled {
    /// The seed that reproduces it.
    pub seed: u64,
    /// Virtual time reached.
    pub now: Instant,
    /// Steps taken.
    pub steps: u64,
    /// What was being waited for.
    pub waiting_for: String,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "test network stalled after {} steps at {:?} waiting for {} (reproduce with seed {})",
            self.steps, self.now, self.waiting_for, self.seed
        )
    }
}

impl std::error::Error for Stalled {}

/// Counters of what the links did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams handed to the network.
    pub sent: u64,
    /// Lost.
    pub lost: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Delivered (including duplicates).
    pub delivered: u64,
}

struct Node {
    engine: Option<Engine<VecMemory>>,
    timer: Option<Instant>,
    events: VecDeque<Event>,
    /// The incarnation of this node's latest engine.
    last_boot: u64,
}

/// N engines and the links between them. See the crate doc.
pub struct Network {
    seed: u64,
    rng: ChaCha8Rng,
    now: Instant,
    nodes: Vec<Node>,
    /// Datagrams in flight: (arrival, tie-breaker) -> (from, to, bytes).
    in_flight: BinaryHeap<Reverse<(Instant, u64)>>,
    payloads: BTreeMap<u64, (NodeId, NodeId, Vec<u8>)>,
    /// Engine timers: (deadline, node), refreshed lazily - an entry counts
    /// while its node's `timer` still equals it - so a step costs the
    /// nodes due, not a scan of thousands of idle ones.
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Nodes with completions not yet taken ([`Network::nodes_with_events`]).
    with_events: BTreeSet<u32>,
    next_id: u64,
    default_link: LinkConfig,
    links: BTreeMap<(u32, u32), LinkConfig>,
    tx_buf: Vec<u8>,
    steps: u64,
    /// Step bound for each `run_*` call.
    pub max_steps: u64,
    stats: LinkStats,
    /// Every datagram sent since [`Network::capture`] turned this on.
    captured: Option<Vec<(NodeId, NodeId, Vec<u8>)>>,
}

impl Network {
    /// `n` engines configured by `config(node)`, every link `link`, all
    /// randomness from `seed`.
    pub fn new(n: u32, link: LinkConfig, seed: u64, mut config: impl FnMut(NodeId) -> EngineConfig) -> Network {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nodes = (0..n)
            .map(|i| {
                let mut cfg = config(NodeId(i));
                // At least what the configuration asks for (a later run
                // of the same job starts with a larger incarnation).
                cfg.boot = outboard_engine::incarnation(0, rng.gen()).max(cfg.boot);
                let last_boot = cfg.boot;
                Node {
                    last_boot,
                    engine: Some(Engine::new(cfg, VecMemory::new(), Instant::ZERO).expect("valid engine config")),
                    timer: None,
                    events: VecDeque::new(),
                }
            })
            .collect();
        Network {
            seed,
            rng,
            now: Instant::ZERO,
            nodes,
            in_flight: BinaryHeap::new(),
            payloads: BTreeMap::new(),
            timers: BinaryHeap::new(),
            with_events: BTreeSet::new(),
            next_id: 0,
            default_link: link,
            links: BTreeMap::new(),
            tx_buf: vec![0; 65_536],
            steps: 0,
            max_steps: 50_000_000,
            stats: LinkStats::default(),
            captured: None,
        }
    }

    /// The same with default engine settings and job key 1.
    pub fn with_defaults(n: u32, link: LinkConfig, seed: u64) -> Network {
        Network::new(n, link, seed, |node| EngineConfig::new(node, 1, 0))
    }

    /// The seed of this network.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time now.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Link statistics so far.
    pub fn link_stats(&self) -> LinkStats {
        self.stats
    }

    /// Overrides the link from `a` to `b`.
    pub fn set_link(&mut self, a: NodeId, b: NodeId, link: LinkConfig) {
        self.links.insert((a.0, b.0), link);
    }

    /// The engine of `node` (panics if it was killed).
    pub fn engine(&mut self, node: NodeId) -> &mut Engine<VecMemory> {
        self.nodes[node.0 as usize].engine.as_mut().expect("node was killed")
    }

    /// Whether `node` is alive.
    pub fn is_alive(&self, node: NodeId) -> bool {
        self.nodes[node.0 as usize].engine.is_some()
    }

    /// The host memory of `node`.
    pub fn memory(&mut self, node: NodeId) -> &mut VecMemory {
        self.engine(node).dma_mut()
    }

    /// Opens a port on `node`.
    pub fn open_port(&mut self, node: NodeId, port: PortId) -> Result<Endpoint, OpenError> {
        let now = self.now;
        let r = self.engine(node).open_port(now, port);
        self.flush(node);
        r
    }

    /// Closes a port on `node`.
    pub fn close_port(&mut self, node: NodeId, port: PortId) {
        let now = self.now;
        self.engine(node).close_port(now, port);
        self.flush(node);
    }

    /// Hands a command to `node`'s engine from `port`.
    pub fn command(&mut self, node: NodeId, port: PortId, cmd: Command) -> Result<(), CommandError> {
        let now = self.now;
        let r = self.engine(node).handle_command(now, port, cmd);
        self.flush(node);
        r
    }

    /// Stops `node` dead: its engine is dropped, datagrams to it vanish.
    pub fn kill(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.0 as usize];
        n.engine = None;
        n.timer = None;
        n.events.clear();
    }

    /// Replaces a killed node with a fresh engine (a new incarnation,
    /// larger than every earlier one: start times only grow).
    pub fn restart(&mut self, node: NodeId, mut cfg: EngineConfig) {
        let since_start_ms = self.now.as_nanos() / 1_000_000;
        let last = self.nodes[node.0 as usize].last_boot;
        cfg.boot = outboard_engine::incarnation(since_start_ms + 1, self.rng.gen()).max(last + 1);
        self.nodes[node.0 as usize].last_boot = cfg.boot;
        let n = &mut self.nodes[node.0 as usize];
        n.engine = Some(Engine::new(cfg, VecMemory::new(), self.now).expect("valid engine config"));
        n.timer = None;
        n.events.clear();
    }

    /// Takes the completions `node` produced so far.
    pub fn take_events(&mut self, node: NodeId) -> Vec<Event> {
        self.with_events.remove(&node.0);
        self.nodes[node.0 as usize].events.drain(..).collect()
    }

    /// The next completion of `node`, if any.
    pub fn next_event(&mut self, node: NodeId) -> Option<Event> {
        let n = &mut self.nodes[node.0 as usize];
        let e = n.events.pop_front();
        if n.events.is_empty() {
            self.with_events.remove(&node.0);
        }
        e
    }

    /// The nodes holding completions not yet taken, in order: a driver of
    /// thousands of nodes visits these after a step instead of all.
    pub fn nodes_with_events(&self) -> Vec<NodeId> {
        self.with_events.iter().map(|&n| NodeId(n)).collect()
    }

    /// Drains an engine's outputs: datagrams onto the links, completions
    /// into the node's event queue, the next timer deadline.
    fn flush(&mut self, node: NodeId) {
        let now = self.now;
        let mut out = Vec::new();
        let n = &mut self.nodes[node.0 as usize];
        let Some(engine) = n.engine.as_mut() else { return };
        while let Some(t) = engine.poll_transmit(now, &mut self.tx_buf) {
            out.push((t.dst, self.tx_buf[..t.len].to_vec()));
        }
        while let Some(e) = engine.poll_event() {
            n.events.push_back(e);
        }
        if !n.events.is_empty() {
            self.with_events.insert(node.0);
        }
        let timer = engine.poll_timeout();
        if let Some(at) = timer.filter(|_| timer != n.timer) {
            self.timers.push(Reverse((at, node.0)));
        }
        n.timer = timer;
        for (dst, bytes) in out {
            self.transmit(node, dst, bytes);
        }
    }

    /// Starts recording every datagram the engines send (before the links
    /// lose, corrupt or duplicate any), for replay tests.
    pub fn capture(&mut self) {
        self.captured = Some(Vec::new());
    }

    /// The datagrams recorded since [`Network::capture`]: (from, to, bytes).
    pub fn take_captured(&mut self) -> Vec<(NodeId, NodeId, Vec<u8>)> {
        self.captured.take().unwrap_or_default()
    }

    fn transmit(&mut self, from: NodeId, to: NodeId, mut bytes: Vec<u8>) {
        self.stats.sent += 1;
        if let Some(c) = self.captured.as_mut() {
            c.push((from, to, bytes.clone()));
        }
        let link = *self.links.get(&(from.0, to.0)).unwrap_or(&self.default_link);
        if self.rng.gen_bool(link.loss.clamp(0.0, 1.0)) {
            self.stats.lost += 1;
            return;
        }
        if !bytes.is_empty() && self.rng.gen_bool(link.corrupt.clamp(0.0, 1.0)) {
            self.stats.corrupted += 1;
            let i = self.rng.gen_range(0..bytes.len());
            bytes[i] ^= self.rng.gen_range(1..=255u8);
        }
        let copies = if self.rng.gen_bool(link.duplicate.clamp(0.0, 1.0)) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for c in 0..copies {
            let jitter = if link.jitter.is_zero() {
                Duration::ZERO
            } else {
                Duration::from_nanos(self.rng.gen_range(0..=link.jitter.as_nanos() as u64))
            };
            let at = self.now + link.latency + jitter;
            let id = self.next_id;
            self.next_id += 1;
            self.in_flight.push(Reverse((at, id)));
            let b = if c + 1 == copies { std::mem::take(&mut bytes) } else { bytes.clone() };
            self.payloads.insert(id, (from, to, b));
        }
    }

    /// Drops timer entries at the heap's top that no longer match their
    /// node's timer, so the top is the earliest timer of any node.
    fn settle_timers(&mut self) {
        while let Some(&Reverse((at, n))) = self.timers.peek() {
            if self.nodes[n as usize].timer == Some(at) {
                break;
            }
            self.timers.pop();
        }
    }

    /// The time of the next event, if any.
    fn next_time(&mut self) -> Option<Instant> {
        let pkt = self.in_flight.peek().map(|Reverse((t, _))| *t);
        self.settle_timers();
        let timer = self.timers.peek().map(|Reverse((t, _))| *t);
        match (pkt, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes the next event (one datagram arrival, or the timers due).
    /// Returns false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        let Some(t) = self.next_time() else { return false };
        self.steps += 1;
        self.now = self.now.max(t);
        let now = self.now;
        if let Some(Reverse((at, id))) = self.in_flight.peek().copied() {
            if at <= now {
                self.in_flight.pop();
                let (from, to, bytes) = self.payloads.remove(&id).expect("payload of in-flight datagram");
                if let Some(e) = self.nodes[to.0 as usize].engine.as_mut() {
                    self.stats.delivered += 1;
                    e.handle_packet(now, from, &bytes);
                    self.flush(to);
                }
                return true;
            }
        }
        // Every node due, in node order (as a scan would visit them).
        let mut due = Vec::new();
        while let Some(&Reverse((at, n))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.nodes[n as usize].timer == Some(at) {
                due.push(n);
            }
        }
        due.sort_unstable();
        due.dedup();
        for n in due {
            let node = &mut self.nodes[n as usize];
            // Its entry is gone: the flush below pushes whatever timer
            // the engine asks for next, even the same one.
            node.timer = None;
            if let Some(e) = node.engine.as_mut() {
                e.handle_timeout(now);
            }
            self.flush(NodeId(n));
        }
        true
    }

    /// Steps until `done(self)` holds. Fails after `max_steps` steps, or if
    /// nothing is left to happen and `done` still does not hold.
    pub fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Network) -> bool) -> Result<(), Stalled> {
        let start = self.steps;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.steps - start >= self.max_steps || !self.step() {
                return Err(self.stalled(what));
            }
        }
    }

    /// Steps until no datagram is in flight, no timer is armed and every
    /// engine is quiet.
    pub fn run_until_quiet(&mut self) -> Result<(), Stalled> {
        self.run_until("quiescence", |net| {
            net.in_flight.is_empty() && net.nodes.iter().all(|n| n.engine.as_ref().is_none_or(|e| e.is_quiet()))
        })
    }

    /// Advances virtual time by `d`, processing everything due meanwhile.
    pub fn run_for(&mut self, d: Duration) -> Result<(), Stalled> {
        let end = self.now + d;
        let start = self.steps;
        while self.next_time().is_some_and(|t| t <= end) {
            if self.steps - start >= self.max_steps {
                return Err(self.stalled("time to pass"));
            }
            self.step();
        }
        self.now = end;
        Ok(())
    }

    fn stalled(&self, what: &str) -> Stalled {
        Stalled { seed: self.seed, now: self.now, steps: self.steps, waiting_for: what.to_string() }
    }
}
