//! The Elite fabric: wormhole circuits over links with two virtual
//! channels, adaptive up-routing, hardware multicast serialised at its root
//! switch, and acknowledgements combined on the way back (2.2-2.3).
//!
//! A packet's header claims one virtual channel per link, hop by hop; a
//! link whose two channels are taken queues it (high priority first, then
//! in arrival order). Going up, a switch takes the up-link with the fewest
//! channels in use (ties by the seed); coming down, the route is fixed. A
//! multicast to a contiguous range of nodes climbs a fixed path (replica 0)
//! to the lowest switch over the source and the range, where one multicast
//! at a time may pass ("serialised in the root switch"), and forks down to
//! every subtree that holds a destination.
//!
//! Once every branch is open, the body streams: each link carries it after
//! its parent link and after the bodies it already carries (its bandwidth
//! is shared, its channels are not). A branch whose body would have
//! arrived before the last branch opened delivers when it opens (events
//! are never scheduled in the past). Each destination's Elan performs the
//! transaction (`txn.rs`) and acknowledges; a switch passes on one
//! acknowledgement when all its branches have answered, the worst status
//! winning, so the source gets one. A dead destination's switch answers
//! `Error` at once; a packet corrupted on a link (the seed's loss rate) is
//! detected by the receiving end's CRC and answered `Error`. A circuit
//! closed on the acknowledgement frees each channel as the ack passes it
//! back (write blocks); one closed by EOP (test-and-write, fetch-and-add)
//! stays until the source, having seen the ack, sends the EOP, which for a
//! successful multicast test-and-write also performs its writes (the
//! release of elan_hgsync, 4.1).
//!
//! Everything is in picoseconds; the event queue orders by (time, order of
//! scheduling), so a seed gives the same run.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::params::{ps, Params};
use super::topology::{FatTree, Vertex};
use super::txn::{Memory, Status, Txn};

/// Who is told about a packet: a job (an agent of the world).
pub type AgentId = usize;

/// Where a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// One node.
    One(u32),
    /// Every node from the first to the second, inclusive (hardware
    /// multicast: the set must be contiguous).
    Range(u32, u32),
}

/// When the circuit closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// On the acknowledgement (write blocks).
    OnAck,
    /// On the source's EOP after it saw the acknowledgement.
    Eop,
}

/// A packet to send.
#[derive(Debug, Clone)]
pub struct Send {
    /// The job told of its arrival and completion.
    pub agent: AgentId,
    /// The job's own label, given back in its notes.
    pub tag: u64,
    /// Source node.
    pub src: u32,
    /// Destination(s).
    pub dest: Dest,
    /// What each destination does.
    pub txn: Txn,
    /// Data bytes (up to a packet's 320).
    pub data: u32,
    /// How the circuit closes.
    pub close: Close,
    /// High priority (queued before normal packets at a busy link).
    pub high: bool,
    /// The destination buffer is in main memory (written across PCI).
    pub main_memory: bool,
    /// Tell the job when a destination performed the transaction.
    pub notify: bool,
}

/// What the fabric tells a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The combined acknowledgement reached the source.
    Done {
        /// Job.
        agent: AgentId,
        /// Its tag.
        tag: u64,
        /// Source node.
        src: u32,
        /// Worst status of all destinations.
        status: Status,
        /// A value the transaction returned (fetch-and-add's old value).
        value: Option<u64>,
    },
    /// A destination performed the transaction (or, `eop`, the EOP's write).
    Delivered {
        /// Job.
        agent: AgentId,
        /// Its tag.
        tag: u64,
        /// Destination node.
        node: u32,
        /// The write came with the EOP.
        eop: bool,
    },
    /// A timer the job set.
    Timer {
        /// Job.
        agent: AgentId,
        /// Its token.
        token: u64,
    },
}

impl Note {
    /// The job the note is for.
    pub fn agent(&self) -> AgentId {
        match self {
            Note::Done { agent, .. } | Note::Delivered { agent, .. } | Note::Timer { agent, .. } => *agent,
        }
    }
}

enum Ev {
    Inject(u64),
    Header { pkt: u64, circ: usize },
    Leaf { pkt: u64, circ: usize },
    Complete(u64),
    Release(usize),
    RootFree(Vertex),
    EopWrite { agent: AgentId, tag: u64, node: u32, addr: u64, value: u64, notify: bool },
    Timer { agent: AgentId, token: u64 },
}

#[derive(Clone, Copy)]
struct Waiter {
    pkt: u64,
    parent: Option<usize>,
    down: bool,
}

#[derive(Default)]
struct Link {
    busy: u8,
    high: VecDeque<Waiter>,
    low: VecDeque<Waiter>,
    bw_free: u64,
}

struct Circ {
    link: Option<usize>,
    to: Vertex,
    parent: Option<usize>,
    grant: u64,
    down: bool,
    lost: bool,
    dead: bool,
}

struct Pkt {
    send: Send,
    circ: Vec<Circ>,
    pending: u32,
    root: Option<Vertex>,
    root_circ: usize,
    status: Status,
    value: Option<u64>,
    depth: Vec<u32>,
}

#[derive(Default)]
struct RootLock {
    busy: bool,
    queue: VecDeque<(u64, usize)>,
}

/// Counters of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Packets injected.
    pub packets: u64,
    /// Of which multicasts.
    pub multicasts: u64,
    /// Headers that waited for a virtual channel.
    pub vc_waits: u64,
    /// Multicasts that waited at their root switch.
    pub root_waits: u64,
}

/// The network, the nodes' memories and Elan engines, and the event queue.
pub struct Fabric {
    /// Topology.
    pub tree: FatTree,
    /// Costs.
    pub p: Params,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    evs: HashMap<u64, Ev>,
    links: Vec<Link>,
    pkts: HashMap<u64, Pkt>,
    next_pkt: u64,
    roots: BTreeMap<Vertex, RootLock>,
    /// Each node's memory.
    pub mem: Vec<Memory>,
    dead: Vec<bool>,
    loss: f64,
    rng: ChaCha8Rng,
    elan_in_free: Vec<u64>,
    dma_free: Vec<u64>,
    thread_free: Vec<u64>,
    pci_free: Vec<u64>,
    outbox: VecDeque<Note>,
    /// Counters.
    pub stats: FabricStats,
}

impl Fabric {
    /// A fabric of `nodes` nodes; `loss` is the chance that a packet is
    /// corrupted on a link, `dead` the nodes that do not answer.
    pub fn new(nodes: u32, p: Params, seed: u64, loss: f64, dead: &[u32]) -> Fabric {
        let tree = FatTree::new(nodes);
        let n = tree.slots as usize;
        let mut d = vec![false; n];
        for &x in dead {
            d[x as usize] = true;
        }
        Fabric {
            links: (0..tree.links.len()).map(|_| Link::default()).collect(),
            tree,
            p,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            evs: HashMap::new(),
            pkts: HashMap::new(),
            next_pkt: 0,
            roots: BTreeMap::new(),
            mem: vec![Memory::default(); n],
            dead: d,
            loss,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5157_4e45_5400_0001),
            elan_in_free: vec![0; n],
            dma_free: vec![0; n],
            thread_free: vec![0; n],
            pci_free: vec![0; n],
            outbox: VecDeque::new(),
            stats: FabricStats::default(),
        }
    }

    /// The current time (ps).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Whether node `n` is dead.
    pub fn is_dead(&self, n: u32) -> bool {
        self.dead[n as usize]
    }

    fn at(&mut self, t: u64, ev: Ev) {
        let t = t.max(self.now);
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq)));
        self.evs.insert(self.seq, ev);
    }

    /// Tells `agent` at time `t` (no earlier than now).
    pub fn timer(&mut self, agent: AgentId, t: u64, token: u64) {
        self.at(t, Ev::Timer { agent, token });
    }

    /// Sends a packet whose header enters the network at `t`.
    pub fn send(&mut self, s: Send, t: u64) {
        let id = self.next_pkt;
        self.next_pkt += 1;
        self.stats.packets += 1;
        if matches!(s.dest, Dest::Range(..)) {
            self.stats.multicasts += 1;
        }
        self.pkts.insert(
            id,
            Pkt { send: s, circ: Vec::new(), pending: 1, root: None, root_circ: 0, status: Status::Ok, value: None, depth: Vec::new() },
        );
        self.at(t, Ev::Inject(id));
    }

    /// When node `n`'s DMA engine puts a packet of `data` bytes on its link
    /// if asked at `t` (its data read across PCI first when in main memory).
    pub fn dma(&mut self, n: u32, t: u64, data: u32, main_memory: bool) -> u64 {
        let i = n as usize;
        let mut s = t.max(self.dma_free[i]);
        if main_memory {
            s = s.max(self.pci_free[i]) + u64::from(data) * self.p.pci_byte;
            self.pci_free[i] = s;
        }
        s += ps(self.p.t.dma_issue_us);
        self.dma_free[i] = s;
        s
    }

    /// When an action of node `n`'s Elan thread processor asked at `t` is done.
    pub fn thread(&mut self, n: u32, t: u64) -> u64 {
        let us = self.p.t.thread_us;
        self.thread_for(n, t, us)
    }

    /// The same for work of `us` microseconds (the thread processor serves
    /// its work in the order it was asked for).
    pub fn thread_for(&mut self, n: u32, t: u64, us: f64) -> u64 {
        let i = n as usize;
        let s = t.max(self.thread_free[i]) + ps(us);
        self.thread_free[i] = s;
        s
    }

    /// The next note for the jobs, if any.
    pub fn note(&mut self) -> Option<Note> {
        self.outbox.pop_front()
    }

    /// Runs the next event; false when none is left.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((t, seq))) = self.heap.pop() else { return false };
        self.now = t;
        let ev = self.evs.remove(&seq).expect("every queued event is stored");
        match ev {
            Ev::Inject(pkt) => {
                let src = self.pkts[&pkt].send.src;
                let first = self.tree.leaf_switch(src);
                if let Dest::Range(lo, hi) = self.pkts[&pkt].send.dest {
                    let level = self.tree.common_level(&[src, lo, hi]);
                    let root = self.tree.switch(level, src >> (2 * level), 0);
                    self.pkts.get_mut(&pkt).expect("live").root = Some(root);
                }
                let link = self.tree.link(src, first);
                self.want(pkt, None, link, false);
            }
            Ev::Header { pkt, circ } => self.header(pkt, circ),
            Ev::Leaf { pkt, circ } => self.leaf(pkt, circ),
            Ev::Complete(pkt) => self.complete(pkt),
            Ev::Release(link) => self.release(link),
            Ev::RootFree(v) => {
                let lock = self.roots.get_mut(&v).expect("held");
                match lock.queue.pop_front() {
                    Some((pkt, ci)) => self.fork(pkt, ci),
                    None => lock.busy = false,
                }
            }
            Ev::EopWrite { agent, tag, node, addr, value, notify } => {
                self.mem[node as usize].write(agent, addr, value);
                if notify {
                    self.outbox.push_back(Note::Delivered { agent, tag, node, eop: true });
                }
            }
            Ev::Timer { agent, token } => self.outbox.push_back(Note::Timer { agent, token }),
        }
        true
    }

    fn want(&mut self, pkt: u64, parent: Option<usize>, link: usize, down: bool) {
        let w = Waiter { pkt, parent, down };
        if self.links[link].busy < 2 {
            self.grant(w, link);
        } else {
            self.stats.vc_waits += 1;
            let high = self.pkts[&pkt].send.high;
            let l = &mut self.links[link];
            if high { l.high.push_back(w) } else { l.low.push_back(w) }
        }
    }

    fn grant(&mut self, w: Waiter, link: usize) {
        self.links[link].busy += 1;
        let lost = self.loss > 0.0 && self.rng.gen::<f64>() < self.loss;
        let to = self.tree.links[link].1;
        let p = self.pkts.get_mut(&w.pkt).expect("live packet");
        p.circ.push(Circ { link: Some(link), to, parent: w.parent, grant: self.now, down: w.down, lost, dead: false });
        let ci = p.circ.len() - 1;
        let hop = self.p.hop;
        self.at(self.now + hop, Ev::Header { pkt: w.pkt, circ: ci });
    }

    fn release(&mut self, link: usize) {
        let l = &mut self.links[link];
        l.busy -= 1;
        if let Some(w) = l.high.pop_front().or_else(|| l.low.pop_front()) {
            self.grant(w, link);
        }
    }

    fn dead_leaf(&mut self, pkt: u64, parent: usize, node: u32) {
        let now = self.now;
        let p = self.pkts.get_mut(&pkt).expect("live");
        p.circ.push(Circ { link: None, to: node, parent: Some(parent), grant: now, down: true, lost: false, dead: true });
    }

    fn arrived(&mut self, pkt: u64) {
        let p = self.pkts.get_mut(&pkt).expect("live");
        p.pending -= 1;
        if p.pending == 0 {
            self.finish(pkt);
        }
    }

    fn header(&mut self, pkt: u64, ci: usize) {
        let (v, down) = {
            let c = &self.pkts[&pkt].circ[ci];
            (c.to, c.down)
        };
        if self.tree.is_node(v) {
            return self.arrived(pkt);
        }
        let (dest, root) = {
            let p = &self.pkts[&pkt];
            (p.send.dest, p.root)
        };
        match dest {
            Dest::One(d) => {
                let (lo, hi) = self.tree.span(v);
                if (lo..hi).contains(&d) {
                    let child = *self.tree.children(v).iter().find(|&&c| {
                        let (a, b) = self.tree.span(c);
                        (a..b).contains(&d)
                    }).expect("a child holds d");
                    if self.tree.is_node(child) && self.dead[child as usize] {
                        self.dead_leaf(pkt, ci, child);
                        return self.arrived(pkt);
                    }
                    let link = self.tree.link(v, child);
                    self.want(pkt, Some(ci), link, true);
                } else {
                    let ups: Vec<usize> = self.tree.parents(v).iter().map(|&u| self.tree.link(v, u)).collect();
                    let key = |l: &Link| (l.busy, l.high.len() + l.low.len());
                    let best = ups.iter().map(|&l| key(&self.links[l])).min().expect("a switch below the top has parents");
                    let ties: Vec<usize> = ups.into_iter().filter(|&l| key(&self.links[l]) == best).collect();
                    let link = if ties.len() == 1 { ties[0] } else { ties[self.rng.gen_range(0..ties.len())] };
                    self.want(pkt, Some(ci), link, false);
                }
            }
            Dest::Range(..) => {
                if down {
                    self.fork(pkt, ci);
                } else if Some(v) == root {
                    let lock = self.roots.entry(v).or_default();
                    if lock.busy {
                        lock.queue.push_back((pkt, ci));
                        self.stats.root_waits += 1;
                    } else {
                        lock.busy = true;
                        self.fork(pkt, ci);
                    }
                } else {
                    let up = self.tree.parents(v)[0];
                    let link = self.tree.link(v, up);
                    self.want(pkt, Some(ci), link, false);
                }
            }
        }
    }

    /// Replicates a multicast header at switch `circ[ci].to` into every
    /// subtree that holds a destination.
    fn fork(&mut self, pkt: u64, ci: usize) {
        let v = self.pkts[&pkt].circ[ci].to;
        if self.pkts[&pkt].root == Some(v) && !self.pkts[&pkt].circ[ci].down {
            self.pkts.get_mut(&pkt).expect("live").root_circ = ci;
        }
        let Dest::Range(lo, hi) = self.pkts[&pkt].send.dest else { unreachable!("only multicasts fork") };
        let kids: Vec<Vertex> = self
            .tree
            .children(v)
            .into_iter()
            .filter(|&c| {
                let (a, b) = self.tree.span(c);
                a <= hi && lo < b
            })
            .collect();
        self.pkts.get_mut(&pkt).expect("live").pending += kids.len() as u32;
        for c in kids {
            if self.tree.is_node(c) && self.dead[c as usize] {
                self.dead_leaf(pkt, ci, c);
                self.pkts.get_mut(&pkt).expect("live").pending -= 1;
            } else {
                let link = self.tree.link(v, c);
                self.want(pkt, Some(ci), link, true);
            }
        }
        self.arrived(pkt);
    }

    /// Every branch is open: stream the body, schedule the destinations'
    /// transactions, the acknowledgements and the channels' release.
    fn finish(&mut self, pkt: u64) {
        let hop = self.p.hop;
        let mut p = self.pkts.remove(&pkt).expect("live");
        let dur = self.p.wire(p.send.data);
        let n = p.circ.len();
        let mut s = vec![0u64; n];
        let mut lost = vec![false; n];
        let mut depth = vec![0u32; n];
        let mut kids: Vec<Vec<usize>> = vec![Vec::new(); n];
        for i in 0..n {
            let c = &p.circ[i];
            if let Some(pi) = c.parent {
                kids[pi].push(i);
                depth[i] = depth[pi] + 1;
                lost[i] = lost[pi];
            }
            lost[i] |= c.lost;
            if c.dead {
                s[i] = c.grant;
                continue;
            }
            let link = c.link.expect("a live circuit link");
            let mut si = c.grant.max(self.links[link].bw_free);
            if let Some(pi) = c.parent {
                si = si.max(s[pi] + hop);
            }
            self.links[link].bw_free = si + dur;
            s[i] = si;
        }
        let mut ack = vec![0u64; n];
        let main = p.send.main_memory;
        for i in (0..n).rev() {
            let c = &p.circ[i];
            if !kids[i].is_empty() {
                ack[i] = kids[i].iter().map(|&k| ack[k]).max().expect("non-empty") + hop;
                continue;
            }
            if c.dead {
                p.status = p.status.combine(Status::Error);
                ack[i] = c.grant;
                continue;
            }
            let tail = s[i] + hop + dur;
            if lost[i] {
                p.status = p.status.combine(Status::Error);
                ack[i] = tail + hop;
                continue;
            }
            let node = c.to as usize;
            let mut t = tail.max(self.elan_in_free[node]) + ps(self.p.t.input_us);
            if main {
                t = t.max(self.pci_free[node]) + ps(self.p.t.pci_word_us) + u64::from(p.send.data) * self.p.pci_byte;
                self.pci_free[node] = t;
            }
            self.elan_in_free[node] = t;
            self.at(t, Ev::Leaf { pkt, circ: i });
            ack[i] = t + hop;
        }
        if p.send.close == Close::OnAck {
            for (i, c) in p.circ.iter().enumerate() {
                if let Some(link) = c.link {
                    self.at(ack[i], Ev::Release(link));
                }
            }
            if let Some(root) = p.root {
                let rc = p.root_circ;
                self.at(ack[rc] - hop, Ev::RootFree(root));
            }
        }
        p.depth = depth;
        self.at(ack[0], Ev::Complete(pkt));
        self.pkts.insert(pkt, p);
    }

    fn leaf(&mut self, pkt: u64, ci: usize) {
        let p = self.pkts.get_mut(&pkt).expect("live until complete");
        let node = p.circ[ci].to;
        let defer = matches!(p.send.dest, Dest::Range(..)) && p.send.close == Close::Eop;
        let (st, val) = self.mem[node as usize].apply(p.send.agent, p.send.txn, defer);
        p.status = p.status.combine(st);
        if p.value.is_none() {
            p.value = val;
        }
        if p.send.notify && !defer && st == Status::Ok {
            let (agent, tag) = (p.send.agent, p.send.tag);
            self.outbox.push_back(Note::Delivered { agent, tag, node, eop: false });
        }
    }

    fn complete(&mut self, pkt: u64) {
        let p = self.pkts.remove(&pkt).expect("live");
        let now = self.now;
        let hop = self.p.hop;
        if p.send.close == Close::Eop {
            let eop = |d: u32| now + u64::from(d + 1) * hop;
            for (i, c) in p.circ.iter().enumerate() {
                if let Some(link) = c.link {
                    self.at(eop(p.depth[i]), Ev::Release(link));
                }
            }
            if let Some(root) = p.root {
                self.at(eop(p.depth[p.root_circ]), Ev::RootFree(root));
            }
            if let (Status::Ok, Dest::Range(..), Txn::TestAndWrite { write: Some((addr, value)), .. }) = (p.status, p.send.dest, p.send.txn) {
                let mut extra = ps(self.p.t.input_us);
                if p.send.main_memory {
                    extra += ps(self.p.t.pci_word_us);
                }
                for (i, c) in p.circ.iter().enumerate() {
                    if c.link.is_some() && self.tree.is_node(c.to) {
                        let ev = Ev::EopWrite { agent: p.send.agent, tag: p.send.tag, node: c.to, addr, value, notify: p.send.notify };
                        self.at(eop(p.depth[i]) + extra, ev);
                    }
                }
            }
        }
        self.outbox.push_back(Note::Done { agent: p.send.agent, tag: p.send.tag, src: p.send.src, status: p.status, value: p.value });
    }
}
