//! Broadcast test harness: every node of a lossy test network runs one port
//! of the host library; a single-threaded, deterministic driver starts each
//! node's broadcasts in its own order with a bounded number in flight,
//! polls a node's library only when its engine has completions for it (or a
//! start is due), and steps the network otherwise. A seed reproduces a run
//! exactly.
//!
//! Exactly-once is checked at three levels: every member's result equals
//! the root's bytes; no completion event reaches a host twice (the port
//! would drop a repeat silently, so [`NetIo`] counts them); and each
//! engine's `Work::dma_written` equals the bytes the plan says its host
//! receives, so no duplicate packet was written into host memory either.
//!
//! Set `OUTBOARD_BCAST_TRACE=1` to print progress every 200,000 steps and,
//! when a run stalls, each node's place in its order, its broadcasts in
//! flight and engine statistics, and each unfinished broadcast's members
//! (done / running / not started).

#![allow(dead_code)] // each test binary uses part of the harness

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use outboard_engine::{Engine, EngineConfig, Stats, VecMemory, Work};
use outboard_host::testnet_io::NetIo;
use outboard_host::{
    BcastMode, CollRequest, Endpoint, GroupId, HostError, Instant, NodeId, Port, TreeShape,
};
use outboard_testnet::{LinkConfig, Network};

/// A small deterministic generator (SplitMix64): plans and data need no
/// statistical quality, only reproducibility from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `k` distinct values of `0..n` in random order.
    pub fn sample(&mut self, n: u32, k: u32) -> Vec<u32> {
        let mut all: Vec<u32> = (0..n).collect();
        self.shuffle(&mut all);
        all.truncate(k as usize);
        all
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// `n` nodes with one port each on a lossy network.
pub struct Cluster {
    pub net: Arc<Mutex<Network>>,
    pub ports: Vec<Port<NetIo>>,
}

impl Cluster {
    pub fn new(
        n: u32,
        link: LinkConfig,
        seed: u64,
        config: impl FnMut(NodeId) -> EngineConfig,
    ) -> Cluster {
        let net = Arc::new(Mutex::new(Network::new(n, link, seed, config)));
        let ports = (0..n)
            .map(|i| Port::new(NetIo::open(&net, NodeId(i)).expect("port opens")))
            .collect();
        Cluster { net, ports }
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.ports.iter().map(|p| p.endpoint()).collect()
    }

    pub fn engine_stats(&self, node: u32) -> Stats {
        self.net.lock().unwrap().engine(NodeId(node)).stats().clone()
    }

    pub fn take_work(&self, node: u32) -> Work {
        self.net.lock().unwrap().engine(NodeId(node)).take_work()
    }

    pub fn with_engine<T>(&self, node: u32, f: impl FnOnce(&mut Engine<VecMemory>) -> T) -> T {
        f(self.net.lock().unwrap().engine(NodeId(node)))
    }

    /// Live host allocations at a node (leak check), once the network is
    /// quiet: a finished host-based collective's last sends free their
    /// buffers only when they are confirmed.
    pub fn live(&mut self, node: u32) -> usize {
        loop {
            for p in &mut self.ports {
                p.progress();
            }
            if !self.net.lock().unwrap().step() {
                break;
            }
        }
        for p in &mut self.ports {
            p.progress();
        }
        self.net.lock().unwrap().memory(NodeId(node)).live()
    }
}

/// A group of the plan: its id and members (world node numbers, in rank
/// order).
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub id: GroupId,
    pub nodes: Vec<u32>,
}

/// One broadcast of the plan.
#[derive(Debug, Clone)]
pub struct Bcast {
    pub group: usize,
    pub root: u32,
    pub mode: BcastMode,
    pub tree: TreeShape,
    pub data: Rc<Vec<u8>>,
}

/// Everything the driver runs: groups, broadcasts, and for each node the
/// order in which it starts the broadcasts of its groups (every member of
/// a group must start that group's broadcasts of one mode in one order;
/// across groups and modes each node may use its own order).
#[derive(Debug, Clone)]
pub struct Plan {
    pub groups: Vec<GroupSpec>,
    pub bcasts: Vec<Bcast>,
    pub order: Vec<Vec<usize>>,
    /// Per node, the broadcasts it keeps in flight before waiting for one
    /// (1: blocking broadcasts).
    pub window: Vec<usize>,
    /// A node starts at most one broadcast per `pace` network steps:
    /// process skew, so members enter a broadcast at different times.
    pub pace: Vec<u64>,
}

impl Plan {
    /// Each node's order: the broadcasts of its groups in plan order.
    pub fn plan_order(groups: &[GroupSpec], bcasts: &[Bcast], n: u32) -> Vec<Vec<usize>> {
        (0..n)
            .map(|node| {
                (0..bcasts.len())
                    .filter(|&k| groups[bcasts[k].group].nodes.contains(&node))
                    .collect()
            })
            .collect()
    }

    /// Bytes each node's engine must write into host memory: every
    /// broadcast delivers the data once to every member but the root
    /// (offloaded ones as their result, host-based and NIC-assisted ones in
    /// messages).
    pub fn expected_dma_written(&self, n: u32) -> Vec<u64> {
        let mut out = vec![0u64; n as usize];
        for b in &self.bcasts {
            let g = &self.groups[b.group];
            for (rank, &node) in g.nodes.iter().enumerate() {
                // A root's result is its own data, in every mode (an
                // offloaded root hands its engine no result buffer).
                let gets = rank as u32 != b.root;
                if gets {
                    out[node as usize] += b.data.len() as u64;
                }
            }
        }
        out
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Results handed back, per broadcast (must equal the group size).
    pub results: Vec<u32>,
    pub steps: u64,
    pub virtual_time: Instant,
}

/// A broadcast the driver could not complete or that came back wrong.
#[derive(Debug)]
pub enum Failure {
    Wrong {
        bcast: usize,
        node: u32,
        detail: String,
    },
    Error {
        bcast: usize,
        node: u32,
        error: HostError,
    },
    Stalled {
        steps: u64,
        done: usize,
        total: usize,
        seed: u64,
    },
}

/// Runs the plan on the cluster: creates the groups with the host API,
/// then starts, tests and checks every broadcast.
pub fn run_plan(c: &mut Cluster, plan: &Plan, max_steps: u64) -> Result<Outcome, Failure> {
    let n = c.ports.len() as u32;
    let eps = c.endpoints();
    // node -> group index -> Group
    let mut groups: Vec<BTreeMap<usize, outboard_host::Group>> =
        (0..n).map(|_| BTreeMap::new()).collect();
    for (gi, g) in plan.groups.iter().enumerate() {
        let members: Vec<Endpoint> = g.nodes.iter().map(|&x| eps[x as usize]).collect();
        for (rank, &node) in g.nodes.iter().enumerate() {
            let grp = c.ports[node as usize]
                .new_group(g.id, rank as u32, members.clone())
                .map_err(|error| Failure::Error {
                    bcast: usize::MAX,
                    node,
                    error,
                })?;
            groups[node as usize].insert(gi, grp);
        }
    }
    let total: usize = plan
        .bcasts
        .iter()
        .map(|b| plan.groups[b.group].nodes.len())
        .sum();
    let mut done = 0usize;
    let mut out = Outcome {
        results: vec![0; plan.bcasts.len()],
        ..Outcome::default()
    };
    let mut next: Vec<usize> = vec![0; n as usize];
    let mut start_at: Vec<u64> = vec![0; n as usize];
    let mut finished: HashSet<(usize, u32)> = HashSet::new();
    let mut inflight: Vec<VecDeque<(usize, CollRequest)>> =
        (0..n).map(|_| VecDeque::new()).collect();
    let zeros: Vec<u8> = vec![0; plan.bcasts.iter().map(|b| b.data.len()).max().unwrap_or(0)];
    let mut steps = 0u64;
    let trace = outboard_settings::registry::BCAST_TRACE.get(&outboard_settings::ProcessEnv).unwrap_or_else(|e| panic!("{e}"));
    let seed = c.net.lock().unwrap().seed();
    loop {
        // Whether some node's library ran this round. A library that runs
        // can post commands the engine completes at once (a receive that
        // an unexpected message matches), with nothing on the network:
        // those completions are the next round's `fresh`, so a quiet
        // network after such a round is no stall.
        let mut polled = false;
        for node in 0..n as usize {
            let port = &mut c.ports[node];
            let fresh = port.io().pull();
            let may_start = steps >= start_at[node]
                && inflight[node].len() < plan.window[node]
                && next[node] < plan.order[node].len();
            if !fresh && !may_start {
                continue;
            }
            polled = true;
            if may_start {
                start_at[node] = steps + plan.pace[node];
                {
                    let k = plan.order[node][next[node]];
                    next[node] += 1;
                    let b = &plan.bcasts[k];
                    let g = groups[node].get_mut(&b.group).expect("member");
                    let data = if g.rank() == b.root {
                        &b.data[..]
                    } else {
                        &zeros[..b.data.len()]
                    };
                    let req =
                        port.start_bcast(g, b.mode, b.tree, b.root, data)
                            .map_err(|error| Failure::Error {
                                bcast: k,
                                node: node as u32,
                                error,
                            })?;
                    inflight[node].push_back((k, req));
                }
            }
            // Results come back in start order per group and mode; test
            // everything in flight (few per node).
            let mut i = 0;
            while i < inflight[node].len() {
                let (k, req) = &mut inflight[node][i];
                match port.coll_test(req) {
                    None => i += 1,
                    Some(r) => {
                        let k = *k;
                        let _ = inflight[node].remove(i);
                        let got = r.map_err(|error| Failure::Error {
                            bcast: k,
                            node: node as u32,
                            error,
                        })?;
                        let want = &plan.bcasts[k].data;
                        if got != **want {
                            let first = got.iter().zip(want.iter()).position(|(a, b)| a != b);
                            return Err(Failure::Wrong {
                                bcast: k,
                                node: node as u32,
                                detail: format!(
                                    "{} bytes back, {} sent; first difference at {first:?}",
                                    got.len(),
                                    want.len()
                                ),
                            });
                        }
                        out.results[k] += 1;
                        finished.insert((k, node as u32));
                        done += 1;
                    }
                }
            }
        }
        if done == total {
            break;
        }
        let stepped = c.net.lock().unwrap().step();
        steps += 1;
        if trace && steps % 200_000 == 0 {
            eprintln!(
                "step {steps}: {done}/{total} results, virtual {:?}, link {:?}",
                c.net.lock().unwrap().now(),
                c.net.lock().unwrap().link_stats()
            );
        }
        let pending_starts = (0..n as usize)
            .any(|x| next[x] < plan.order[x].len() && inflight[x].len() < plan.window[x]);
        if steps >= max_steps || (!stepped && !pending_starts && !polled) {
            if trace {
                for node in 0..n {
                    let fl: Vec<(usize, u32)> = inflight[node as usize]
                        .iter()
                        .map(|(k, _)| (*k, plan.bcasts[*k].data.len() as u32))
                        .collect();
                    eprintln!(
                        "node {node}: next {}/{} inflight {fl:?}\n  {:?}",
                        next[node as usize],
                        plan.order[node as usize].len(),
                        c.engine_stats(node)
                    );
                }
                for (k, b) in plan.bcasts.iter().enumerate() {
                    let g = &plan.groups[b.group];
                    let started: Vec<bool> = g
                        .nodes
                        .iter()
                        .map(|&x| plan.order[x as usize][..next[x as usize]].contains(&k))
                        .collect();
                    if out.results[k] as usize == g.nodes.len() || !started.iter().any(|s| *s) {
                        continue;
                    }
                    let st: Vec<String> = g
                        .nodes
                        .iter()
                        .zip(&started)
                        .map(|(&x, &s)| {
                            format!(
                                "{x}{}",
                                if finished.contains(&(k, x)) {
                                    "=done"
                                } else if s {
                                    "=run"
                                } else {
                                    "=no"
                                }
                            )
                        })
                        .collect();
                    eprintln!(
                        "bcast {k} {:?} {:?} len {} root rank {} (node {}): {}",
                        b.mode,
                        b.tree,
                        b.data.len(),
                        b.root,
                        g.nodes[b.root as usize],
                        st.join(" ")
                    );
                }
            }
            return Err(Failure::Stalled {
                steps,
                done,
                total,
                seed,
            });
        }
    }
    out.steps = steps;
    out.virtual_time = c.net.lock().unwrap().now();
    Ok(out)
}
