//! Elanlib's barriers and broadcasts (section 4), as the job whose time
//! the experiments measure: one process per node, each entering the next
//! operation as soon as it left the last (the paper's 10,000 consecutive
//! tests).
//!
//! - `elan_hgsync` (4.1): each process writes the barrier's sequence
//!   number into a word in main memory and polls a release word. The root
//!   (VPID 0) asks its Elan thread to send a test-and-write multicast to
//!   every node; the Elites combine the tests' acknowledgements; if every
//!   node matched, the EOP writes the release word everywhere. Otherwise
//!   the thread backs off exponentially and tries again; a network error is
//!   retried `max_errors` times, then the barrier fails with that status.
//! - `elan_hgsyncEvent`: the same, each process blocked on an event rather
//!   than polling (the event notification costs `event_wake_us`).
//! - `elan_gsync`: each node's event counts its own process's arrival and
//!   its children's 'ready' signals (remote fetch-and-adds) in a balanced
//!   tree of degree `gsync_degree`; when it is complete the Elan thread
//!   wakes and signals the parent; the root's thread releases everyone by
//!   a hardware broadcast write.
//! - `elan_hbcast`: an `elan_hgsync`, then the root's process starts the
//!   broadcast DMA of the data (packets of 320 bytes, `dma_window` open).
//! - `elan_bcast`: `elan_gsync`'s gather, then the root's thread starts
//!   the broadcast DMA, whose arrival releases the others.
//! - a put (Elan3lib's remote DMA, 6.1's bandwidth test): node 0's process
//!   posts a DMA of the data to node 1, packets as a broadcast's.
//!
//! A non-root process is done with an operation when it sees its release
//! (or, for a broadcast, its last data packet); the root, for a broadcast,
//! when the DMA's last combined acknowledgement says every node has it.
//! The root's exits give the per-operation times.

use super::fabric::{AgentId, Close, Dest, Fabric, Note, Send};
use super::noise::Noise;
use super::params::ps;
use super::txn::{Status, Txn};
use super::world::Job;

/// Which Elanlib call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// Hardware barrier, polling.
    HgSync,
    /// Hardware barrier, event.
    HgSyncEvent,
    /// Software tree barrier with hardware release.
    GSync,
    /// Hardware barrier then hardware broadcast of this many bytes.
    HBcast(u32),
    /// Software gather then hardware broadcast of this many bytes.
    Bcast(u32),
    /// Elan3lib's remote DMA of this many bytes from node 0 to node 1 (the
    /// point-to-point bandwidth test of 6.1): the host posts it, the DMA
    /// engine sends the packets to the one node, node 1 is done when the
    /// last has arrived, node 0 when the last is acknowledged.
    Put(u32),
}

impl Algo {
    /// Its Elanlib name.
    pub fn name(self) -> &'static str {
        match self {
            Algo::HgSync => "hgsync",
            Algo::HgSyncEvent => "hgsyncEvent",
            Algo::GSync => "gsync",
            Algo::HBcast(_) => "hbcast",
            Algo::Bcast(_) => "bcast",
            Algo::Put(_) => "put",
        }
    }

    fn hardware_barrier(self) -> bool {
        matches!(self, Algo::HgSync | Algo::HgSyncEvent | Algo::HBcast(_))
    }
}

const SEQ: u64 = 1;
const REL: u64 = 2;
const KIDS: u64 = 3;

const T_PROBE: u64 = 1;
const T_READY: u64 = 2;
const T_RELEASE: u64 = 3;
const T_DATA: u64 = 4;

const ENTER: u64 = 1;
const THREAD_IN: u64 = 2;
const PROBE: u64 = 3;
const SEEN: u64 = 4;
const EXIT: u64 = 6;

fn token(kind: u64, node: u32) -> u64 {
    kind << 32 | u64::from(node)
}

/// The benchmark job.
pub struct Elanlib {
    id: AgentId,
    algo: Algo,
    n: u32,
    iters: u32,
    main_memory: bool,
    noise: Noise,
    k: Vec<u64>,
    tries: u32,
    errors: u32,
    kids_in: Vec<u64>,
    self_in: Vec<u64>,
    signalled: Vec<u64>,
    got: Vec<u32>,
    sent: u32,
    acked: u32,
    /// The root's exit times (ps), one per operation.
    pub exits: Vec<u64>,
    /// Probes the root's thread sent (elan_hgsync).
    pub probes: u64,
    /// Set when an operation failed: the status that made it fail.
    pub failed: Option<Status>,
    done: bool,
}

impl Elanlib {
    /// Starts `iters` consecutive operations on every live node at time 0;
    /// a broadcast's data lives in main memory when `main_memory`.
    pub fn start(f: &mut Fabric, id: AgentId, algo: Algo, iters: u32, main_memory: bool, seed: u64) -> Elanlib {
        let n = f.tree.nodes;
        let t = &f.p.t;
        let noise = Noise::new(n, t.noise_per_ms, t.noise_mean_us, seed);
        let e = Elanlib {
            id,
            algo,
            n,
            iters,
            main_memory,
            noise,
            k: vec![0; n as usize],
            tries: 0,
            errors: 0,
            kids_in: vec![0; n as usize],
            self_in: vec![0; n as usize],
            signalled: vec![0; n as usize],
            got: vec![0; n as usize],
            sent: 0,
            acked: 0,
            exits: Vec::new(),
            probes: 0,
            failed: None,
            done: false,
        };
        for i in 0..n {
            if !f.is_dead(i) {
                f.timer(id, 0, token(ENTER, i));
            }
        }
        e
    }

    /// The per-operation times in microseconds (root exit to root exit).
    pub fn op_times_us(&self) -> Vec<f64> {
        let mut last = 0;
        self.exits.iter().map(|&e| {
            let d = e - last;
            last = e;
            d as f64 / 1e6
        }).collect()
    }

    fn degree(&self, f: &Fabric) -> u32 {
        f.p.t.gsync_degree.max(1)
    }

    fn kids(&self, f: &Fabric, i: u32) -> u64 {
        let d = self.degree(f);
        (1..=d).filter(|c| d * i + c < self.n).count() as u64
    }

    fn packets(&self, f: &Fabric) -> u32 {
        match self.algo {
            Algo::HBcast(s) | Algo::Bcast(s) | Algo::Put(s) => s.div_ceil(f.p.max_data).max(1),
            _ => 0,
        }
    }

    fn size(&self) -> u32 {
        match self.algo {
            Algo::HBcast(s) | Algo::Bcast(s) | Algo::Put(s) => s,
            _ => 0,
        }
    }

    fn probe(&mut self, f: &mut Fabric) {
        self.probes += 1;
        let k = self.k[0];
        let s = Send {
            agent: self.id,
            tag: T_PROBE,
            src: 0,
            dest: Dest::Range(0, self.n - 1),
            txn: Txn::TestAndWrite { addr: SEQ, expect: k, write: Some((REL, k)) },
            data: 8,
            close: Close::Eop,
            high: true,
            main_memory: true,
            notify: true,
        };
        f.send(s, f.now());
    }

    fn enter(&mut self, f: &mut Fabric, i: u32) {
        self.k[i as usize] += 1;
        let now = f.now();
        if let Algo::Put(_) = self.algo {
            // Node 0's process posts the DMA; node 1 waits for its data.
            if i == 0 {
                self.start_data(f, now + f.p.host_send + f.p.doorbell);
            }
            return;
        }
        if self.algo.hardware_barrier() {
            f.mem[i as usize].write(self.id, SEQ, self.k[i as usize]);
            if i == 0 {
                let t = f.thread(0, now + f.p.doorbell);
                f.timer(self.id, t, token(PROBE, 0));
            }
        } else {
            // The process's arrival sets an event in Elan memory (a command
            // through the doorbell); the thread runs when the event fires.
            f.timer(self.id, now + f.p.doorbell, token(THREAD_IN, i));
        }
    }

    /// A gsync thread with its own process and all children in signals up.
    fn check(&mut self, f: &mut Fabric, i: u32) {
        let k = self.k[i as usize];
        let ix = i as usize;
        if self.self_in[ix] != k || self.signalled[ix] == k || self.kids_in[ix] < self.kids(f, i) * k {
            return;
        }
        self.signalled[ix] = k;
        let t = f.thread(i, f.now());
        if i == 0 {
            match self.algo {
                Algo::GSync => {
                    let s = Send {
                        agent: self.id,
                        tag: T_RELEASE,
                        src: 0,
                        dest: Dest::Range(0, self.n - 1),
                        txn: Txn::Write { addr: REL, value: k },
                        data: 8,
                        close: Close::OnAck,
                        high: false,
                        main_memory: true,
                        notify: true,
                    };
                    f.send(s, t);
                }
                _ => self.start_data(f, t),
            }
        } else {
            let parent = (i - 1) / self.degree(f);
            let s = Send {
                agent: self.id,
                tag: T_READY,
                src: i,
                dest: Dest::One(parent),
                txn: Txn::FetchAdd { addr: KIDS, delta: 1 },
                data: 8,
                close: Close::OnAck,
                high: false,
                main_memory: false,
                notify: true,
            };
            f.send(s, t);
        }
    }

    fn start_data(&mut self, f: &mut Fabric, t: u64) {
        self.sent = 0;
        self.acked = 0;
        let w = f.p.t.dma_window.max(1).min(self.packets(f));
        for _ in 0..w {
            self.send_data(f, t);
        }
    }

    fn send_data(&mut self, f: &mut Fabric, t: u64) {
        let p = self.packets(f);
        let max = f.p.max_data;
        let data = if self.sent + 1 == p { self.size() - (p - 1) * max } else { max }.max(1);
        self.sent += 1;
        let at = f.dma(0, t, data, self.main_memory);
        let dest = if let Algo::Put(_) = self.algo { Dest::One(1) } else { Dest::Range(0, self.n - 1) };
        let s = Send {
            agent: self.id,
            tag: T_DATA,
            src: 0,
            dest,
            txn: Txn::Data,
            data,
            close: Close::OnAck,
            high: false,
            main_memory: self.main_memory,
            notify: true,
        };
        f.send(s, at);
    }

    fn seen(&mut self, f: &mut Fabric, j: u32, extra: u64) {
        let t = self.noise.ready(j, f.now() + f.p.poll + extra);
        f.timer(self.id, t, token(SEEN, j));
    }

    fn exit(&mut self, f: &mut Fabric, j: u32) {
        if j == 0 {
            self.exits.push(f.now());
            if self.exits.len() as u32 >= self.iters {
                self.done = true;
            }
        }
        if self.k[j as usize] < u64::from(self.iters) {
            let t = f.now();
            f.timer(self.id, t, token(ENTER, j));
        }
    }

    fn fail(&mut self, st: Status) {
        self.failed = Some(st);
        self.done = true;
    }
}

impl Job for Elanlib {
    fn on(&mut self, f: &mut Fabric, note: Note) {
        if self.done {
            return;
        }
        match note {
            Note::Timer { token: tk, .. } => {
                let (kind, i) = (tk >> 32, tk as u32);
                match kind {
                    ENTER => self.enter(f, i),
                    PROBE => self.probe(f),
                    THREAD_IN => {
                        self.self_in[i as usize] = self.k[i as usize];
                        self.check(f, i);
                    }
                    SEEN => match self.algo {
                        Algo::HBcast(_) if i == 0 => {
                            let t = f.now() + f.p.host_send + f.p.doorbell;
                            self.start_data(f, t);
                        }
                        Algo::HBcast(_) => {}
                        _ => self.exit(f, i),
                    },
                    EXIT => self.exit(f, i),
                    _ => unreachable!("unknown timer"),
                }
            }
            Note::Done { tag, status, .. } => match (tag, status) {
                (T_PROBE, Status::Ok) => {
                    self.tries = 0;
                    self.errors = 0;
                }
                (T_PROBE, st) => {
                    if st == Status::Error {
                        self.errors += 1;
                        if self.errors > f.p.t.max_errors {
                            return self.fail(st);
                        }
                    }
                    self.tries += 1;
                    let b = (f.p.t.backoff_us * f64::from(1u32 << (self.tries - 1).min(20))).min(f.p.t.backoff_max_us);
                    let t = f.thread(0, f.now() + ps(b));
                    f.timer(self.id, t, token(PROBE, 0));
                }
                (T_DATA, Status::Ok) => {
                    self.acked += 1;
                    if self.sent < self.packets(f) {
                        let now = f.now();
                        self.send_data(f, now);
                    } else if self.acked == self.packets(f) {
                        let t = self.noise.ready(0, f.now() + f.p.poll);
                        f.timer(self.id, t, token(EXIT, 0));
                    }
                }
                (_, Status::Ok) => {}
                (_, st) => self.fail(st),
            },
            Note::Delivered { tag, node, .. } => match tag {
                T_PROBE => {
                    let extra = if self.algo == Algo::HgSyncEvent { ps(f.p.t.event_wake_us) } else { 0 };
                    self.seen(f, node, extra);
                }
                T_RELEASE => self.seen(f, node, 0),
                T_READY => {
                    // The fetch-and-add counted the child on the parent's
                    // event; the thread wakes when the count is complete.
                    self.kids_in[node as usize] += 1;
                    self.check(f, node);
                }
                T_DATA => {
                    let j = node as usize;
                    self.got[j] += 1;
                    if self.got[j] == self.packets(f) {
                        self.got[j] = 0;
                        if node != 0 {
                            let t = self.noise.ready(node, f.now() + f.p.poll);
                            f.timer(self.id, t, token(EXIT, node));
                        }
                    }
                }
                _ => {}
            },
        }
    }

    fn finished(&self) -> bool {
        self.done
    }
}
