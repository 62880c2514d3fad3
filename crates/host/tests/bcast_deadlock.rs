//! The deadlock test of issue 5: many multicasts at once, on overlapping
//! groups with different roots, every one started before any is waited
//! for, with engine buffers of one or two packets - and what must not
//! deadlock beside it.
//!
//! # Why bounded buffers can deadlock, and why ours do not
//!
//! GM-2's multicast (seed 003) forwards packets NIC to NIC down a tree
//! with a few receive buffers per NIC. A NIC that takes a packet it cannot
//! use yet (its host has not posted that multicast's receive, or an earlier
//! multicast must be delivered first) and *keeps it in a buffer while it
//! waits* is a hold-and-wait: with multicasts whose trees cross (X forwards
//! A to Y, Y forwards B to X) and receivers that order them differently,
//! X's buffers fill with B packets waiting for A, Y's with A packets
//! waiting for B, each link is blocked behind a packet nobody can consume,
//! and neither multicast ever completes. 003 breaks the cycle by ordering
//! receivers (a parent's node id below its children's, except the root).
//!
//! Outboard's engine never holds a buffer while waiting for another:
//!
//! - a packet for a collective its engine has started is always taken (its
//!   room is the collective's own state, allocated when the host started
//!   it, like a posted receive);
//! - a packet for a collective not started there yet goes to a bounded
//!   pool (`EngineConfig::coll_unexpected_bytes`) or, when the pool is
//!   full, is *refused*: the receiver consumes it from the connection and
//!   answers `Reject NotReady`, so the per-peer Go-Back-N stream moves on
//!   and the receiver's other traffic is not held up; the sender keeps its
//!   copy and retries after `retry_interval`;
//! - a host starts a collective without waiting for any packet.
//!
//! So every wait is "collective C at node X waits for a packet of C from a
//! member that has started C", and the packet gets through once that
//! member has; nothing waits for buffer space held by another multicast.
//! Here every node starts all its multicasts up front in its own random
//! interleaving of its groups (the order MPI allows nonblocking collectives
//! on different communicators), so a hold-and-wait design would meet
//! exactly the crossed orders above; the pools are one or two packets, so
//! refusals happen all the time, and the test checks they did.
//!
//! # Waits that broke the argument
//!
//! - The engine's sender-side bound (`EngineConfig::coll_send_bytes`) used
//!   to defer a port's next collectives - receive side included - while its
//!   unconfirmed packets were refused by a full pool elsewhere: a port then
//!   held its send room while waiting for another's pool, and crossed
//!   roots deadlocked (`the_sender_bound_and_a_full_pool_deadlock_crossed_roots`).
//!   Now only the *sends* wait at the bound; the collective takes its epoch
//!   and every packet for it at once, so the first rule above holds.
//! - Offloaded chunks waiting for data used to hold send tokens, so an
//!   earlier host-based collective that needed one to forward starved
//!   (`offloaded_chunks_holding_every_send_token_starve_an_earlier_host_based_broadcast`).
//!   Collectives now take tokens of their own class
//!   (`EngineConfig::coll_tokens`), so point-to-point sends always have
//!   theirs.

mod common;

use std::rc::Rc;

use common::{run_plan, Bcast, Cluster, GroupSpec, Plan, Rng};
use outboard_engine::EngineConfig;
use outboard_host::{BcastMode, GroupId, TreeShape};
use outboard_testnet::LinkConfig;

/// Tiny engines: 512-byte packets, a pool of `pool_packets` full packets,
/// a connection window of 2, and (new in the engine) a sender-side bound
/// of `send_packets` packets' worth of unconfirmed collective traffic.
fn tiny(
    node: outboard_host::NodeId,
    pool_packets: usize,
    send_packets: usize,
    tokens: u32,
) -> EngineConfig {
    let mut c = EngineConfig::new(node, 1, 0);
    c.mtu = 512;
    c.window = 2;
    let packet = outboard_engine::max_collective_len_for(c.mtu) as usize + 32; // payload + pool bookkeeping
    c.coll_unexpected_bytes = pool_packets * packet;
    c.coll_send_bytes = send_packets * (c.mtu + 96);
    c.unexpected_bytes = c.mtu; // host-based messages: one packet of room
    c.send_tokens = tokens;
    c
}

/// `groups` overlapping groups of 4..=7 of `n` nodes, `per_group`
/// multicasts each (0 to 3 packets, random roots and trees, offloaded and
/// host-based), every node interleaving its groups' sequences at random.
fn crossed_plan(seed: u64, n: u32, groups: usize, per_group: usize, max_len: usize) -> Plan {
    let mut rng = Rng::new(seed);
    let groups: Vec<GroupSpec> = (0..groups)
        .map(|i| {
            let k = 4 + rng.below(4) as u32;
            GroupSpec {
                id: GroupId(100 + i as u64),
                nodes: rng.sample(n, k),
            }
        })
        .collect();
    let mut bcasts = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        for j in 0..per_group {
            let len = rng.below(max_len as u64 + 1) as usize;
            bcasts.push(Bcast {
                group: gi,
                root: rng.below(g.nodes.len() as u64) as u32,
                mode: match j % 4 {
                    2 => BcastMode::HostBased,
                    3 => BcastMode::nic_assisted(),
                    _ => BcastMode::Offloaded,
                },
                tree: match rng.below(3) {
                    0 => TreeShape::Binomial,
                    1 => TreeShape::Chain,
                    _ => TreeShape::Kary(2),
                },
                data: Rc::new(rng.bytes(len)),
            });
        }
    }
    // Each node: its groups' queues (each in plan order), merged by random
    // picks, so two nodes sharing two groups usually disagree on which
    // group's multicasts come first.
    let order = (0..n)
        .map(|node| {
            let mut queues: Vec<Vec<usize>> = groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.nodes.contains(&node))
                .map(|(gi, _)| {
                    (0..bcasts.len())
                        .filter(|&k| bcasts[k].group == gi)
                        .rev()
                        .collect()
                })
                .collect();
            let mut mine = Vec::new();
            while !queues.is_empty() {
                let q = rng.below(queues.len() as u64) as usize;
                mine.push(queues[q].pop().expect("non-empty"));
                if queues[q].is_empty() {
                    queues.swap_remove(q);
                }
            }
            mine
        })
        .collect();
    let pace = (0..n).map(|_| 1 + rng.below(40)).collect();
    Plan {
        groups,
        bcasts,
        order,
        window: vec![usize::MAX; n as usize],
        pace,
    }
}

/// Offloaded chunks a node has under way at most (all started up front).
fn chunks_per_node(plan: &Plan, n: u32, max_coll: usize) -> usize {
    (0..n as usize)
        .map(|node| {
            plan.order[node]
                .iter()
                .filter(|&&k| plan.bcasts[k].mode == BcastMode::Offloaded)
                .map(|&k| plan.bcasts[k].data.len().div_ceil(max_coll).max(1))
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

fn run_crossed(seed: u64, pool_packets: usize, send_packets: usize) {
    let n = 10;
    let plan = crossed_plan(seed, n, 6, 10, 3 * (512 - 84));
    // Enough send tokens for every offloaded chunk at once: with fewer, the
    // host library's token backlog is a separate limit (see
    // `offloaded_chunks_holding_every_send_token_starve_an_earlier_host_based_broadcast`).
    let tokens = 512;
    assert!(chunks_per_node(&plan, n, 512 - 84) < tokens as usize);
    let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.0), seed, |node| {
        tiny(node, pool_packets, send_packets, tokens)
    });
    let out = run_plan(&mut c, &plan, 20_000_000).unwrap_or_else(|f| panic!("seed {seed}: {f:?}"));
    for (k, &got) in out.results.iter().enumerate() {
        assert_eq!(
            got as usize,
            plan.groups[plan.bcasts[k].group].nodes.len(),
            "multicast {k}"
        );
    }
    let (mut refused, mut retries) = (0, 0);
    let want = plan.expected_dma_written(n);
    for node in 0..n {
        let s = c.engine_stats(node);
        refused += s.coll_refused;
        retries += s.retries;
        assert_eq!(
            c.take_work(node).dma_written,
            want[node as usize],
            "seed {seed} node {node}"
        );
        assert_eq!(c.ports[node as usize].io().repeated_events, 0);
        assert_eq!(c.live(node), 0, "host buffers leaked at node {node}");
    }
    eprintln!(
        "seed {seed}: {} multicasts, {} steps, {:?} virtual; {refused} collective packets refused, {retries} retries",
        plan.bcasts.len(),
        out.steps,
        out.virtual_time
    );
    assert!(refused > 0, "the refusal path was exercised");
}

/// 60 multicasts on 6 overlapping groups of 10 nodes, each node starting
/// all of its own at once in its own group order, pools of one packet,
/// connection windows of 2, 10 % loss: all complete with exact results,
/// and collective packets were refused (the path that replaces
/// hold-and-wait) along the way.
#[test]
fn crossed_multicasts_with_one_packet_pools_complete() {
    for seed in 1..=4 {
        run_crossed(seed, 1, 1 << 20);
    }
}

/// The same with two-packet pools and the engine's sender-side bound
/// (`coll_send_bytes`) at two packets: a port whose unconfirmed
/// collective packets reach the bound holds its collectives' sends until
/// confirmations free room (seed 13 stalled while the bound deferred whole
/// collectives, see [`the_sender_bound_and_a_full_pool_deadlock_crossed_roots`]).
#[test]
fn crossed_multicasts_with_two_packet_pools_and_send_bound_complete() {
    for seed in 11..=14 {
        run_crossed(seed, 2, 2);
    }
}

/// Regression test: a hold-and-wait the engine's first sender-side bound
/// (`coll_send_bytes`, engine commit fd91c66) had, no loss needed. Fixed
/// by letting only sends wait at the bound.
///
/// Two nodes, two groups with the same two members; X roots group A's
/// broadcasts, Y roots group B's. X starts A1, A2, B1, B2; Y starts B1,
/// B2, A1, A2 (each group's order agrees; across groups nonblocking
/// collectives may be started in any order). Pools and send bounds hold
/// one packet. X sends A1 (now at its bound: A2, B1, B2 deferred); Y
/// sends B1 (B2, A1, A2 deferred). Each pools the other's packet, which
/// confirms it and frees room: X starts A2, Y starts B2; each new packet
/// finds the other's pool full and is refused, so it stays unconfirmed and
/// its sender stays at the bound. X's B1 (whose packet waits in X's pool)
/// is deferred behind that refused A2, Y's A1 behind the refused B2:
/// each port holds its send room while waiting for the other's pool, and
/// they retry forever (until `retry_timeout` fails a collective).
#[test]
fn the_sender_bound_and_a_full_pool_deadlock_crossed_roots() {
    let len = 100;
    let mut rng = Rng::new(7);
    let groups = vec![
        GroupSpec {
            id: GroupId(1),
            nodes: vec![0, 1],
        },
        GroupSpec {
            id: GroupId(2),
            nodes: vec![0, 1],
        },
    ];
    // 0, 1: group A rooted at node 0; 2, 3: group B rooted at node 1.
    let bcasts: Vec<Bcast> = [(0, 0), (0, 0), (1, 1), (1, 1)]
        .iter()
        .map(|&(group, root)| Bcast {
            group,
            root,
            mode: BcastMode::Offloaded,
            tree: TreeShape::Binomial,
            data: Rc::new(rng.bytes(len)),
        })
        .collect();
    let plan = Plan {
        groups,
        bcasts,
        order: vec![vec![0, 1, 2, 3], vec![2, 3, 0, 1]],
        window: vec![usize::MAX; 2],
        pace: vec![1, 1],
    };
    let mut c = Cluster::new(2, LinkConfig::default(), 1, |node| {
        let mut cfg = EngineConfig::new(node, 1, 0);
        cfg.coll_unexpected_bytes = len + 32;
        cfg.coll_send_bytes = len + 96;
        cfg
    });
    let out = run_plan(&mut c, &plan, 1_000_000).unwrap_or_else(|f| panic!("{f:?}"));
    assert!(out.results.iter().all(|&r| r == 2));
}

/// Regression test: a resource deadlock offloaded chunks caused, with
/// default engines and a perfect network.
///
/// Nodes 0, 1, 2; group G1 = all three, group G2 = {1, 2}. Every node
/// starts G1's host-based chain broadcast (0 -> 1 -> 2) first, then G2's
/// offloaded 600,000-byte broadcast rooted at node 2 (74 one-packet
/// chunks): node 1 both at once (nonblocking), node 2 one at a time
/// (blocking). Node 1's chunks take all 64 send tokens and wait for data
/// from node 2; node 1's host-based G1 step then needs a send token to
/// forward to node 2, and node 2 waits for that before it starts G2. The
/// order of starts is the same at every node, so MPI requires this to
/// complete. Fixed by giving collectives a token class of their own
/// (`EngineConfig::coll_tokens`).
#[test]
fn offloaded_chunks_holding_every_send_token_starve_an_earlier_host_based_broadcast() {
    let mut rng = Rng::new(3);
    let groups = vec![
        GroupSpec {
            id: GroupId(1),
            nodes: vec![0, 1, 2],
        },
        GroupSpec {
            id: GroupId(2),
            nodes: vec![1, 2],
        },
    ];
    let bcasts = vec![
        Bcast {
            group: 0,
            root: 0,
            mode: BcastMode::HostBased,
            tree: TreeShape::Chain,
            data: Rc::new(rng.bytes(1000)),
        },
        Bcast {
            group: 1,
            root: 1,
            mode: BcastMode::Offloaded,
            tree: TreeShape::Binomial,
            data: Rc::new(rng.bytes(600_000)),
        },
    ];
    let plan = Plan {
        groups,
        bcasts,
        order: vec![vec![0], vec![0, 1], vec![0, 1]],
        window: vec![1, 2, 1],
        pace: vec![1, 1, 1],
    };
    let mut c = Cluster::new(3, LinkConfig::default(), 1, |node| {
        EngineConfig::new(node, 1, 0)
    });
    let out = run_plan(&mut c, &plan, 2_000_000).unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(out.results, vec![3, 2]);
}
