//! Offloaded collectives between engines over the test network: barriers
//! and reductions from host-computed schedules, unexpected packets, the
//! bounded pool, ordering of consecutive collectives, failures.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

mod common;
use common::{binomial, dissemination};

/// A group's member list in its byte form.
fn group_bytes(eps: &[Endpoint]) -> Vec<u8> {
    MemberList::from_endpoints(eps.iter().copied()).encode()
}

const P0: PortId = PortId(0);
const G: GroupId = GroupId(77);
const BARRIER: ScheduleId = ScheduleId(1);
const ALLREDUCE: ScheduleId = ScheduleId(2);

/// Binomial reduce to rank 0, then binomial broadcast back (allreduce).
fn tree_allreduce(rank: u32, n: u32) -> Schedule {
    let (parent, children) = binomial(rank, n);
    let mut steps = vec![Step::recv(children.clone(), Fold::Combine)];
    if let Some(p) = parent {
        steps.push(Step::send([p]));
        steps.push(Step::recv([p], Fold::Replace));
    }
    steps.push(Step::send(children));
    Schedule::new(steps)
}

struct Cluster {
    net: Network,
    eps: Vec<Endpoint>,
}

impl Cluster {
    fn new(n: u32, link: LinkConfig, seed: u64, pool: usize) -> Cluster {
        Cluster::configured(n, link, seed, |c| c.coll_unexpected_bytes = pool)
    }

    fn configured(n: u32, link: LinkConfig, seed: u64, tune: impl Fn(&mut EngineConfig)) -> Cluster {
        let mut net = Network::new(n, link, seed, |node| {
            let mut c = EngineConfig::new(node, 0xC0FFEE, 1000 + u64::from(node.0));
            tune(&mut c);
            // Odd seeds run with delayed acknowledgements.
            if seed % 2 == 1 {
                c.ack_delay = Duration::from_micros(100);
            }
            c
        });
        let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
        Cluster { net, eps }
    }

    fn install(&mut self, rank: u32) {
        let n = self.eps.len() as u32;
        let node = NodeId(rank);
        let members = self.net.memory(node).alloc_with(&group_bytes(&self.eps));
        self.net.command(node, P0, Command::CreateGroup { op: OpId(1), group: G, rank, members }).unwrap();
        for (id, s) in [(BARRIER, dissemination(rank, n)), (ALLREDUCE, tree_allreduce(rank, n))] {
            let buf = self.net.memory(node).alloc_with(&s.encode());
            self.net.command(node, P0, Command::SetSchedule { op: OpId(2), group: G, schedule: id, buf }).unwrap();
        }
        let evs = self.net.take_events(node);
        assert_eq!(evs.len(), 3);
        for e in evs {
            assert!(e.result.is_ok(), "{e:?}");
        }
    }
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn barrier_completes_only_after_everyone_entered_under_loss() {
    for seed in 0..5 {
        let n = 7;
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), seed, 1 << 20);
        for r in 0..n {
            c.install(r);
        }
        // Everyone but the last enters; nobody may finish.
        let empty = HostBuf { addr: 0, len: 0 };
        for r in 0..n - 1 {
            let cmd = Command::Collective { op: OpId(10), group: G, schedule: BARRIER, reduction: None, send: empty, recv: empty };
            c.net.command(NodeId(r), P0, cmd).unwrap();
        }
        c.net.run_for(Duration::from_millis(50)).unwrap();
        for r in 0..n {
            let evs = c.net.take_events(NodeId(r));
            assert!(evs.is_empty(), "seed {seed}: rank {r} finished early: {evs:?}");
        }
        let cmd = Command::Collective { op: OpId(10), group: G, schedule: BARRIER, reduction: None, send: empty, recv: empty };
        c.net.command(NodeId(n - 1), P0, cmd).unwrap();
        common::run_until_every_barrier_completes(&mut c.net, n);
    }
}

#[test]
fn consecutive_allreduces_stay_in_order_and_exact() {
    let n = 6;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.0), 9, 1 << 20);
    for r in 0..n {
        c.install(r);
    }
    let rounds = 20u64;
    let sum = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    let mut recvs = Vec::new();
    for r in 0..n {
        let mut mine = Vec::new();
        for k in 0..rounds {
            let send = c.net.memory(NodeId(r)).alloc_with(&i64s(&[i64::from(r) * 1000 + k as i64, -(k as i64)]));
            let recv = c.net.memory(NodeId(r)).alloc(16);
            let cmd = Command::Collective { op: OpId(100 + k), group: G, schedule: ALLREDUCE, reduction: Some(sum), send, recv };
            c.net.command(NodeId(r), P0, cmd).unwrap();
            mine.push(recv);
        }
        recvs.push(mine);
    }
    let mut seen = vec![Vec::new(); n as usize];
    c.net
        .run_until("allreduces", |net| {
            for r in 0..n {
                for e in net.take_events(NodeId(r)) {
                    seen[r as usize].push(e);
                }
            }
            seen.iter().all(|s| s.len() == rounds as usize)
        })
        .unwrap();
    let n64 = i64::from(n);
    for r in 0..n {
        for (k, e) in seen[r as usize].iter().enumerate() {
            assert_eq!(e.op, OpId(100 + k as u64), "completion order");
            assert_eq!(e.result, Ok(Completion::Collective { epoch: k as u32, len: 16 }));
            let want = i64s(&[1000 * n64 * (n64 - 1) / 2 + n64 * k as i64, -(n64 * k as i64)]);
            assert_eq!(c.net.memory(NodeId(r)).bytes(recvs[r as usize][k]), &want[..]);
        }
    }
}

#[test]
fn a_full_pool_refuses_and_the_sender_retries() {
    // A pool of barely one packet: leaves run far ahead of a late root.
    let n = 5;
    let mut c = Cluster::new(n, LinkConfig::default(), 3, 100);
    for r in 0..n {
        c.install(r);
    }
    let sum = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    let rounds = 8u64;
    let mut root_bufs = Vec::new();
    for r in (1..n).chain([0]) {
        for k in 0..rounds {
            let send = c.net.memory(NodeId(r)).alloc_with(&i64s(&[1; 4]));
            let recv = c.net.memory(NodeId(r)).alloc(32);
            let cmd = Command::Collective { op: OpId(k), group: G, schedule: ALLREDUCE, reduction: Some(sum), send, recv };
            c.net.command(NodeId(r), P0, cmd).unwrap();
            if r == 0 {
                root_bufs.push(recv);
            }
        }
        if r != 0 {
            c.net.run_for(Duration::from_millis(2)).unwrap();
        }
    }
    let mut count = 0;
    c.net
        .run_until("all", |net| {
            for r in 0..n {
                for e in net.take_events(NodeId(r)) {
                    assert!(e.result.is_ok(), "{e:?}");
                    count += 1;
                }
            }
            count == n * rounds as u32
        })
        .unwrap();
    assert!(c.net.engine(NodeId(0)).stats().coll_refused > 0 || c.net.engine(NodeId(1)).stats().coll_refused > 0);
    for b in root_bufs {
        assert_eq!(c.net.memory(NodeId(0)).bytes(b), &i64s(&[i64::from(n); 4])[..]);
    }
    for r in 0..n {
        assert_eq!(c.net.engine(NodeId(r)).coll_unexpected_bytes(), 0);
    }
}

/// A reduction leaf running ahead of a root that has not started: the
/// root's pool fills and refuses, the leaf's refused packets stay in its
/// engine, and once they reach `coll_send_bytes` its further collectives
/// wait (accepted, not started, not completed), so engine memory stays
/// bounded at both ends. When the root catches up everything completes,
/// in order and exact.
#[test]
fn a_leaf_running_ahead_is_held_to_the_send_bound() {
    const REDUCE: ScheduleId = ScheduleId(3);
    let send_bound = 4 * (32 + 96);
    let mut c = Cluster::configured(2, LinkConfig::lossy(0.1, 0.05, 0.0), 11, |cfg| {
        cfg.coll_unexpected_bytes = 2 * (32 + 32);
        cfg.coll_send_bytes = send_bound;
    });
    for r in 0..2 {
        c.install(r);
        let s = if r == 0 { Schedule::new(vec![Step::recv([1], Fold::Combine)]) } else { Schedule::new(vec![Step::send([0])]) };
        let buf = c.net.memory(NodeId(r)).alloc_with(&s.encode());
        c.net.command(NodeId(r), P0, Command::SetSchedule { op: OpId(3), group: G, schedule: REDUCE, buf }).unwrap();
        assert!(c.net.take_events(NodeId(r))[0].result.is_ok());
    }
    let sum = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    let rounds = 40u64;
    let post = |c: &mut Cluster, r: u32, k: u64| {
        let send = c.net.memory(NodeId(r)).alloc_with(&i64s(&[k as i64 * 10 + i64::from(r), 1, 2, 3]));
        let recv = c.net.memory(NodeId(r)).alloc(32);
        let cmd = Command::Collective { op: OpId(100 + k), group: G, schedule: REDUCE, reduction: Some(sum), send, recv };
        c.net.command(NodeId(r), P0, cmd).unwrap();
        recv
    };
    for k in 0..rounds {
        post(&mut c, 1, k);
    }
    let mut leaf_done = Vec::new();
    for _ in 0..40 {
        c.net.run_for(Duration::from_micros(500)).unwrap();
        leaf_done.extend(c.net.take_events(NodeId(1)));
        let held = c.net.engine(NodeId(1)).coll_send_bytes(P0);
        assert!(held <= send_bound + 32 + 96, "leaf holds {held} bytes, bound {send_bound}");
        assert!(c.net.engine(NodeId(0)).coll_unexpected_bytes() <= 2 * (32 + 32));
    }
    let ahead = leaf_done.len();
    assert!(ahead < rounds as usize, "the leaf finished all {ahead} reductions with nobody receiving");
    assert!(c.net.engine(NodeId(1)).stats().coll_deferred > 0);
    assert!(c.net.engine(NodeId(0)).stats().coll_refused > 0);
    let root_bufs: Vec<HostBuf> = (0..rounds).map(|k| post(&mut c, 0, k)).collect();
    let mut root_done = Vec::new();
    c.net
        .run_until("reductions", |net| {
            leaf_done.extend(net.take_events(NodeId(1)));
            root_done.extend(net.take_events(NodeId(0)));
            leaf_done.len() == rounds as usize && root_done.len() == rounds as usize
        })
        .unwrap();
    for (k, (l, r)) in leaf_done.iter().zip(&root_done).enumerate() {
        assert_eq!(l.op, OpId(100 + k as u64), "leaf completion order");
        assert_eq!(r.op, OpId(100 + k as u64), "root completion order");
        assert_eq!(r.result, Ok(Completion::Collective { epoch: k as u32, len: 32 }));
        let want = i64s(&[k as i64 * 20 + 1, 2, 4, 6]);
        assert_eq!(c.net.memory(NodeId(0)).bytes(root_bufs[k]), &want[..]);
    }
    c.net.run_until("quiet", |net| net.engine(NodeId(1)).coll_send_bytes(P0) == 0).unwrap();
}

#[test]
fn a_dead_member_fails_the_collective() {
    let n = 4;
    let mut c = Cluster::new(n, LinkConfig::default(), 4, 1 << 20);
    for r in 0..n {
        c.install(r);
    }
    c.net.kill(NodeId(3));
    let empty = HostBuf { addr: 0, len: 0 };
    let cmd = Command::Collective { op: OpId(5), group: G, schedule: BARRIER, reduction: None, send: empty, recv: empty };
    c.net.command(NodeId(0), P0, cmd).unwrap();
    let mut got = None;
    c.net
        .run_until("failure", |net| {
            got = net.take_events(NodeId(0)).pop();
            got.is_some()
        })
        .unwrap();
    assert_eq!(got.unwrap().result, Err(OpError::PeerUnreachable(NodeId(3))));
}

#[test]
fn bad_commands_get_clear_errors() {
    let n = 3;
    let mut c = Cluster::new(n, LinkConfig::default(), 5, 1 << 20);
    c.install(0);
    let node = NodeId(0);
    let junk = c.net.memory(node).alloc_with(b"not a schedule");
    c.net.command(node, P0, Command::SetSchedule { op: OpId(1), group: G, schedule: ScheduleId(9), buf: junk }).unwrap();
    let members = c.net.memory(node).alloc_with(&group_bytes(&c.eps));
    c.net.command(node, P0, Command::CreateGroup { op: OpId(2), group: GroupId(5), rank: 1, members }).unwrap();
    let bad = Reduction { op: ReduceOp::Band, dtype: Datatype::F64 };
    let send = c.net.memory(node).alloc(8);
    c.net
        .command(node, P0, Command::Collective { op: OpId(3), group: G, schedule: ALLREDUCE, reduction: Some(bad), send, recv: send })
        .unwrap();
    c.net
        .command(node, P0, Command::Collective { op: OpId(4), group: G, schedule: ScheduleId(42), reduction: None, send, recv: send })
        .unwrap();
    let evs = c.net.take_events(node);
    let errs: Vec<_> = evs.iter().map(|e| e.result).collect();
    assert!(matches!(errs[0], Err(OpError::Collective(CollError::Malformed(_)))));
    assert_eq!(errs[1], Err(OpError::Collective(CollError::NotMember)));
    assert_eq!(errs[2], Err(OpError::Collective(CollError::BadReduction)));
    assert_eq!(errs[3], Err(OpError::Collective(CollError::NoSuchSchedule)));
}

#[test]
fn concurrent_collectives_on_two_ports_and_groups_of_one_engine_never_mix() {
    // Every node opens two ports; group A spans port 0 of all nodes, group
    // B port 1 of the odd ones. Both run interleaved allreduces whose sums
    // differ, under loss.
    let n = 6u32;
    let mut net = Network::with_defaults(n, LinkConfig::lossy(0.15, 0.05, 0.0), 21);
    let a: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), PortId(0)).unwrap()).collect();
    let b: Vec<Endpoint> = (0..n).filter(|i| i % 2 == 1).map(|i| net.open_port(NodeId(i), PortId(1)).unwrap()).collect();
    let sum = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    let groups = [(GroupId(1), a.clone(), 1i64), (GroupId(2), b.clone(), 1000i64)];
    for (gid, members, _) in &groups {
        for (rank, ep) in members.iter().enumerate() {
            let m = net.memory(ep.node).alloc_with(&group_bytes(members));
            net.command(ep.node, ep.port, Command::CreateGroup { op: OpId(1), group: *gid, rank: rank as u32, members: m }).unwrap();
            let s = net.memory(ep.node).alloc_with(&tree_allreduce(rank as u32, members.len() as u32).encode());
            net.command(ep.node, ep.port, Command::SetSchedule { op: OpId(2), group: *gid, schedule: ALLREDUCE, buf: s }).unwrap();
        }
    }
    for i in 0..n {
        assert!(net.take_events(NodeId(i)).iter().all(|e| e.result.is_ok()));
    }
    let rounds = 30u64;
    let mut bufs = Vec::new();
    for k in 0..rounds {
        for (gi, (gid, members, scale)) in groups.iter().enumerate() {
            for ep in members {
                let send = net.memory(ep.node).alloc_with(&i64s(&[scale * k as i64]));
                let recv = net.memory(ep.node).alloc(8);
                let op = OpId(1000 * gi as u64 + k);
                net.command(ep.node, ep.port, Command::Collective { op, group: *gid, schedule: ALLREDUCE, reduction: Some(sum), send, recv })
                    .unwrap();
                bufs.push((ep.node, op, recv, scale * k as i64 * members.len() as i64));
            }
        }
    }
    let mut seen = std::collections::HashMap::new();
    net.run_until("all", |net| {
        for i in 0..n {
            for e in net.take_events(NodeId(i)) {
                assert!(e.result.is_ok(), "{e:?}");
                assert!(seen.insert((NodeId(i), e.port, e.op), ()).is_none(), "one completion per op");
            }
        }
        seen.len() == bufs.len()
    })
    .unwrap();
    for (node, _op, recv, want) in bufs {
        assert_eq!(net.memory(node).bytes(recv), &i64s(&[want])[..]);
    }
}

/// Broadcast down the chain 0 -> 1 -> 2 -> 3 (rank 0 sends, the others
/// receive whole from their parent, then send on).
fn chain_bcast(rank: u32, n: u32) -> Schedule {
    let mut steps = Vec::new();
    if rank > 0 {
        steps.push(Step::recv([rank - 1], Fold::Replace));
    }
    if rank + 1 < n {
        steps.push(Step::send([rank + 1]));
    }
    Schedule::new(steps)
}

const BCAST: ScheduleId = ScheduleId(4);

fn install_bcast(c: &mut Cluster, n: u32) {
    for r in 0..n {
        c.install(r);
        let buf = c.net.memory(NodeId(r)).alloc_with(&chain_bcast(r, n).encode());
        c.net.command(NodeId(r), P0, Command::SetSchedule { op: OpId(3), group: G, schedule: BCAST, buf }).unwrap();
        assert!(c.net.take_events(NodeId(r))[0].result.is_ok());
    }
}

/// `n` engines driven by hand (no network between them), one group of all,
/// the chain broadcast installed on each.
fn chain_engines(n: u32, t0: Instant) -> Vec<Engine<VecMemory>> {
    let mut engines: Vec<Engine<VecMemory>> = (0..n)
        .map(|i| Engine::new(EngineConfig::new(NodeId(i), 0xC0FFEE, 1000 + u64::from(i)), VecMemory::new(), t0).unwrap())
        .collect();
    let eps: Vec<Endpoint> = engines.iter_mut().map(|e| e.open_port(t0, P0).unwrap()).collect();
    for (r, e) in engines.iter_mut().enumerate() {
        let members = e.dma_mut().alloc_with(&group_bytes(&eps));
        e.handle_command(t0, P0, Command::CreateGroup { op: OpId(1), group: G, rank: r as u32, members }).unwrap();
        let buf = e.dma_mut().alloc_with(&chain_bcast(r as u32, n).encode());
        e.handle_command(t0, P0, Command::SetSchedule { op: OpId(2), group: G, schedule: BCAST, buf }).unwrap();
        assert!(e.poll_event().unwrap().result.is_ok() && e.poll_event().unwrap().result.is_ok());
    }
    engines
}

/// An intermediate member whose host is late does not hold up its subtree:
/// its engine starts each broadcast from its first packet, forwards it at
/// once and keeps the value for its host (003's NIC-based forwarding).
/// When the host finally asks, the broadcasts complete at once, in order,
/// with the root's bytes; consecutive broadcasts are never mixed.
#[test]
fn an_intermediate_engine_forwards_before_its_host_asks() {
    for seed in [5, 6] {
        let n = 4;
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), seed, 1 << 20);
        install_bcast(&mut c, n);
        let rounds = 6u64;
        let value = |k: u64| -> Vec<u8> { (0..100 + k as usize * 7).map(|i| (i as u64 * 31 + k) as u8).collect() };
        let post = |c: &mut Cluster, r: u32, k: u64| {
            let data = if r == 0 { value(k) } else { Vec::new() };
            let send = c.net.memory(NodeId(r)).alloc_with(&data);
            let recv = c.net.memory(NodeId(r)).alloc(200);
            let cmd = Command::Collective { op: OpId(100 + k), group: G, schedule: BCAST, reduction: None, send, recv };
            c.net.command(NodeId(r), P0, cmd).unwrap();
            recv
        };
        // Rank 1 (the chain's only path) posts nothing yet.
        let mut bufs = vec![Vec::new(); n as usize];
        for r in [0, 2, 3] {
            bufs[r as usize] = (0..rounds).map(|k| post(&mut c, r, k)).collect();
        }
        let mut done = vec![Vec::new(); n as usize];
        c.net
            .run_until("leaves", |net| {
                for r in 0..n {
                    done[r as usize].extend(net.take_events(NodeId(r)));
                }
                done[3].len() == rounds as usize && done[2].len() == rounds as usize
            })
            .unwrap();
        assert!(done[1].is_empty());
        assert_eq!(c.net.engine(NodeId(1)).stats().coll_forwarded_early, rounds, "seed {seed}");
        assert!(c.net.engine(NodeId(1)).coll_unexpected_bytes() > 0, "the values wait for rank 1's host");
        bufs[1] = (0..rounds).map(|k| post(&mut c, 1, k)).collect();
        c.net
            .run_until("rank 1", |net| {
                done[1].extend(net.take_events(NodeId(1)));
                done[0].extend(net.take_events(NodeId(0)));
                done[1].len() == rounds as usize && done[0].len() == rounds as usize
            })
            .unwrap();
        for r in 0..n as usize {
            for (k, e) in done[r].iter().enumerate() {
                let len = value(k as u64).len() as u32;
                assert_eq!(e.op, OpId(100 + k as u64), "rank {r}: completion order");
                assert_eq!(e.result, Ok(Completion::Collective { epoch: k as u32, len }), "rank {r}");
                if r > 0 {
                    let got = c.net.memory(NodeId(r as u32)).bytes(bufs[r][k]);
                    assert_eq!(&got[..len as usize], &value(k as u64)[..], "rank {r} broadcast {k}");
                }
            }
        }
        assert_eq!(c.net.engine(NodeId(1)).coll_unexpected_bytes(), 0);
    }
}

/// A member whose host asks for another collective than its peers ran under
/// the same epoch gets a clear error instead of hanging.
#[test]
fn a_member_calling_another_collective_gets_a_mismatch_error() {
    let n = 4;
    let mut c = Cluster::new(n, LinkConfig::default(), 8, 1 << 20);
    install_bcast(&mut c, n);
    let send = c.net.memory(NodeId(0)).alloc_with(&[7; 16]);
    let recv = c.net.memory(NodeId(0)).alloc(16);
    let cmd = Command::Collective { op: OpId(1), group: G, schedule: BCAST, reduction: None, send, recv };
    c.net.command(NodeId(0), P0, cmd).unwrap();
    c.net.run_for(Duration::from_millis(5)).unwrap();
    assert_eq!(c.net.engine(NodeId(1)).stats().coll_forwarded_early, 1);
    let empty = HostBuf { addr: 0, len: 0 };
    let cmd = Command::Collective { op: OpId(2), group: G, schedule: BARRIER, reduction: None, send: empty, recv: empty };
    c.net.command(NodeId(1), P0, cmd).unwrap();
    let ev = c.net.take_events(NodeId(1));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].result,
        Err(OpError::Collective(CollError::ScheduleMismatch { ours: BARRIER.0, theirs: BCAST.0 }))
    );
}

/// Forwarding without the host takes room in the bounded pool like any
/// early packet: with no room the packet is refused (and retried), and
/// the broadcast still completes once the host starts it.
#[test]
fn forwarding_without_the_host_respects_the_pool_bound() {
    let n = 3;
    let mut c = Cluster::new(n, LinkConfig::default(), 12, 64);
    install_bcast(&mut c, n);
    let data: Vec<u8> = (0..500u32).map(|i| i as u8).collect();
    let mut bufs = Vec::new();
    for r in [0, 2] {
        let send = c.net.memory(NodeId(r)).alloc_with(if r == 0 { &data[..] } else { &[] });
        let recv = c.net.memory(NodeId(r)).alloc(500);
        let cmd = Command::Collective { op: OpId(1), group: G, schedule: BCAST, reduction: None, send, recv };
        c.net.command(NodeId(r), P0, cmd).unwrap();
        bufs.push(recv);
    }
    c.net.run_for(Duration::from_millis(2)).unwrap();
    assert_eq!(c.net.engine(NodeId(1)).stats().coll_forwarded_early, 0);
    assert!(c.net.engine(NodeId(1)).stats().coll_refused > 0);
    assert!(c.net.engine(NodeId(1)).coll_unexpected_bytes() <= 64);
    let send = c.net.memory(NodeId(1)).alloc(0);
    let recv = c.net.memory(NodeId(1)).alloc(500);
    let cmd = Command::Collective { op: OpId(1), group: G, schedule: BCAST, reduction: None, send, recv };
    c.net.command(NodeId(1), P0, cmd).unwrap();
    let mut done = 0;
    c.net
        .run_until("bcast", |net| {
            for r in 0..n {
                done += net.take_events(NodeId(r)).len();
            }
            done == 3
        })
        .unwrap();
    assert_eq!(c.net.memory(NodeId(2)).bytes(bufs[1]), &data[..]);
    assert_eq!(c.net.memory(NodeId(1)).bytes(recv), &data[..]);
}

/// A broadcast packet that arrives before its schedule is installed waits
/// in the pool; installing the schedule starts the forwarding at once,
/// still without the host asking (host libraries install schedules lazily,
/// so the first broadcast of each kind meets this).
#[test]
fn pooled_broadcast_packets_start_forwarding_when_their_schedule_arrives() {
    let n = 3;
    let mut c = Cluster::new(n, LinkConfig::default(), 13, 1 << 20);
    for r in 0..n {
        c.install(r);
    }
    for r in [0, 2] {
        let buf = c.net.memory(NodeId(r)).alloc_with(&chain_bcast(r, n).encode());
        c.net.command(NodeId(r), P0, Command::SetSchedule { op: OpId(3), group: G, schedule: BCAST, buf }).unwrap();
        assert!(c.net.take_events(NodeId(r))[0].result.is_ok());
    }
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let mut recv2 = None;
    for r in [0, 2] {
        let send = c.net.memory(NodeId(r)).alloc_with(if r == 0 { &data[..] } else { &[] });
        let recv = c.net.memory(NodeId(r)).alloc(300);
        let cmd = Command::Collective { op: OpId(9), group: G, schedule: BCAST, reduction: None, send, recv };
        c.net.command(NodeId(r), P0, cmd).unwrap();
        recv2 = Some(recv);
    }
    c.net.run_for(Duration::from_millis(2)).unwrap();
    assert!(c.net.take_events(NodeId(2)).is_empty(), "rank 2 cannot have it: rank 1 has no schedule yet");
    assert!(c.net.engine(NodeId(1)).coll_unexpected_bytes() > 0);
    let buf = c.net.memory(NodeId(1)).alloc_with(&chain_bcast(1, n).encode());
    c.net.command(NodeId(1), P0, Command::SetSchedule { op: OpId(3), group: G, schedule: BCAST, buf }).unwrap();
    let mut got = Vec::new();
    c.net
        .run_until("rank 2", |net| {
            got.extend(net.take_events(NodeId(2)));
            !got.is_empty()
        })
        .unwrap();
    assert_eq!(got[0].result, Ok(Completion::Collective { epoch: 0, len: 300 }));
    assert_eq!(c.net.memory(NodeId(2)).bytes(recv2.unwrap()), &data[..]);
    assert_eq!(c.net.engine(NodeId(1)).stats().coll_forwarded_early, 1);
}

/// A broadcast longer than one packet is one command: its pieces run as
/// consecutive epochs down the chain under loss, every member gets the
/// root's bytes once and one completion (with the first piece's epoch and
/// the whole length), and the next command takes the epochs after them.
#[test]
fn a_multi_piece_broadcast_is_one_command_with_one_completion() {
    for seed in [7, 8] {
        let n = 4;
        let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.0), seed, 1 << 20);
        install_bcast(&mut c, n);
        let piece = c.net.engine(NodeId(0)).max_collective_len() as usize;
        let lens = [3 * piece + 17, 5];
        let value = |k: usize| -> Vec<u8> { (0..lens[k]).map(|i| (i * 13 + k) as u8).collect() };
        let mut recvs = vec![Vec::new(); n as usize];
        for (k, &len) in lens.iter().enumerate() {
            for r in 0..n {
                let send = if r == 0 { c.net.memory(NodeId(r)).alloc_with(&value(k)) } else { HostBuf { addr: 0, len: 0 } };
                let recv = if r == 0 { HostBuf { addr: 0, len: 0 } } else { c.net.memory(NodeId(r)).alloc(len as u32) };
                let cmd = Command::Collective { op: OpId(50 + k as u64), group: G, schedule: BCAST, reduction: None, send, recv };
                c.net.command(NodeId(r), P0, cmd).unwrap();
                recvs[r as usize].push(recv);
            }
        }
        let mut done = vec![Vec::new(); n as usize];
        c.net
            .run_until("broadcasts", |net| {
                for r in 0..n {
                    done[r as usize].extend(net.take_events(NodeId(r)));
                }
                done.iter().all(|d| d.len() == lens.len())
            })
            .unwrap();
        for r in 0..n as usize {
            let e0 = Completion::Collective { epoch: 0, len: if r == 0 { 0 } else { lens[0] as u32 } };
            let e1 = Completion::Collective { epoch: 4, len: if r == 0 { 0 } else { lens[1] as u32 } };
            assert_eq!(done[r][0].result, Ok(e0), "seed {seed} rank {r}");
            assert_eq!(done[r][1].result, Ok(e1), "seed {seed} rank {r}");
            if r > 0 {
                for (k, &buf) in recvs[r].iter().enumerate() {
                    assert_eq!(c.net.memory(NodeId(r as u32)).bytes(buf), &value(k)[..], "seed {seed} rank {r}");
                }
            }
        }
        c.net.run_until_quiet().unwrap();
        for r in 0..n {
            assert_eq!(c.net.engine(NodeId(r)).coll_unexpected_bytes(), 0);
            assert_eq!(c.net.engine(NodeId(r)).coll_send_bytes(P0), 0);
        }
    }
}

/// The root of a multi-piece broadcast reads each piece from host memory
/// as its packet goes out, not the whole value at command time: piece i+1
/// is read and on the wire before anything of piece i is acknowledged, so
/// the pieces pipeline (the root's bus read overlaps the link). Its command
/// completes only once every piece was read (the host may then reuse its
/// buffer), and a receiver's command, whose value the first packet
/// replaces, reads nothing.
#[test]
fn a_root_reads_each_piece_as_it_goes_out() {
    let t0 = Instant::ZERO;
    let mut engines = chain_engines(2, t0);
    let piece = engines[0].max_collective_len() as usize;
    let data: Vec<u8> = (0..3 * piece).map(|i| (i * 7) as u8).collect();
    let send = engines[0].dma_mut().alloc_with(&data);
    let none = HostBuf { addr: 0, len: 0 };
    let _ = engines[0].take_work();
    let cmd = Command::Collective { op: OpId(9), group: G, schedule: BCAST, reduction: None, send, recv: none };
    engines[0].handle_command(t0, P0, cmd).unwrap();
    assert_eq!(engines[0].take_work().dma_read, 0, "nothing read at command time");
    let mut buf = vec![0u8; engines[0].config().mtu];
    let mut out = Vec::new();
    while let Some(tx) = engines[0].poll_transmit(t0, &mut buf) {
        // Each piece is read in the call that sends it, and the command
        // completes only after its last piece was read.
        assert_eq!(engines[0].take_work().dma_read, piece as u64, "packet {}", out.len());
        let done = engines[0].poll_event();
        assert_eq!(done.is_some(), out.len() == 2, "packet {}: {done:?}", out.len());
        if let Some(e) = done {
            assert_eq!(e.result, Ok(Completion::Collective { epoch: 0, len: 0 }));
        }
        out.push((tx.dst, buf[..tx.len].to_vec()));
    }
    // Three pieces out, none acknowledged yet.
    assert_eq!(out.len(), 3);
    // The receiver's command reads nothing; its packets deliver the bytes.
    let recv = engines[1].dma_mut().alloc(data.len() as u32);
    let cmd = Command::Collective { op: OpId(9), group: G, schedule: BCAST, reduction: None, send: none, recv };
    let _ = engines[1].take_work();
    engines[1].handle_command(t0, P0, cmd).unwrap();
    assert_eq!(engines[1].take_work().dma_read, 0);
    for (dst, bytes) in &out {
        assert_eq!(*dst, NodeId(1));
        engines[1].handle_packet(t0, NodeId(0), bytes);
    }
    let e = engines[1].poll_event().expect("the receiver's one completion");
    assert_eq!(e.result, Ok(Completion::Collective { epoch: 0, len: data.len() as u32 }));
    assert!(engines[1].poll_event().is_none());
    assert_eq!(engines[1].dma_mut().bytes(recv), &data[..]);
}

/// The engine reports which of its collective packets pass on a value that
/// came from the network (`Work::coll_relays_out`), so that a cost model can
/// let a NIC forward before it writes the value to its host (GM-2): an
/// inner member's forward is one relay per child, in the call that took
/// the packet; the root's own data and the leaf's acknowledgement are not.
#[test]
fn an_inner_members_forward_is_reported_as_a_relay() {
    let t0 = Instant::ZERO;
    let n = 3u32;
    let mut engines = chain_engines(n, t0);
    let data: Vec<u8> = (0..300u32).map(|i| (i * 13) as u8).collect();
    let none = HostBuf { addr: 0, len: 0 };
    let mut recvs = vec![none; n as usize];
    for r in 0..n as usize {
        let e = &mut engines[r];
        let send = if r == 0 { e.dma_mut().alloc_with(&data) } else { none };
        if r > 0 {
            recvs[r] = e.dma_mut().alloc(data.len() as u32);
        }
        let cmd = Command::Collective { op: OpId(9), group: G, schedule: BCAST, reduction: None, send, recv: recvs[r] };
        e.handle_command(t0, P0, cmd).unwrap();
    }
    let mut buf = vec![0u8; engines[0].config().mtu];
    let mut drain = |e: &mut Engine<VecMemory>| {
        let mut out = Vec::new();
        while let Some(tx) = e.poll_transmit(t0, &mut buf) {
            out.push((tx.dst, buf[..tx.len].to_vec()));
        }
        out
    };
    let from_root = drain(&mut engines[0]);
    assert_eq!(engines[0].take_work().coll_relays_out, 0, "the root sends its own data");
    assert_eq!(from_root.len(), 1);
    let _ = engines[1].take_work();
    engines[1].handle_packet(t0, NodeId(0), &from_root[0].1);
    let w = engines[1].take_work();
    assert_eq!(w.coll_relays_out, 1, "one child to forward to");
    assert_eq!(w.coll_data_in, 1, "one collective packet with data in");
    assert_eq!(w.dma_written, data.len() as u64, "and the value written to its host in the same call");
    let from_inner: Vec<_> = drain(&mut engines[1]).into_iter().filter(|(d, _)| *d == NodeId(2)).collect();
    assert_eq!(from_inner.len(), 1);
    let _ = engines[2].take_work();
    engines[2].handle_packet(t0, NodeId(1), &from_inner[0].1);
    let w = engines[2].take_work();
    assert_eq!(w.coll_relays_out, 0, "a leaf only delivers");
    assert_eq!(w.coll_data_in, 1);
    assert_eq!(w.dma_written, data.len() as u64);
    assert_eq!(engines[2].dma_mut().bytes(recvs[2]), &data[..]);
}

/// A dead peer fails the collectives of every group it is in, and they
/// complete in group-id order whatever order the groups were created in:
/// the engine walks its groups in an ordered map, so every run (and every
/// process of a job) reports them alike.
#[test]
fn collectives_a_dead_peer_fails_complete_in_group_order() {
    let mut net = Network::new(2, LinkConfig::default(), 9, |node| {
        let mut c = EngineConfig::new(node, 0xC0FFEE, 1000 + u64::from(node.0));
        c.peer_timeout = Duration::from_millis(50);
        c
    });
    let eps: Vec<Endpoint> = (0..2).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    let a = NodeId(0);
    // Created in an order that is neither the ids' nor their reverse.
    let ids: Vec<u64> = (0..24u64).map(|i| (i * 7) % 24 + 1).collect();
    for &id in &ids {
        let members = net.memory(a).alloc_with(&group_bytes(&eps));
        net.command(a, P0, Command::CreateGroup { op: OpId(0), group: GroupId(id), rank: 0, members }).unwrap();
        let buf = net.memory(a).alloc_with(&dissemination(0, 2).encode());
        net.command(a, P0, Command::SetSchedule { op: OpId(0), group: GroupId(id), schedule: BARRIER, buf }).unwrap();
    }
    assert!(net.take_events(a).iter().all(|e| e.result.is_ok()));
    net.kill(NodeId(1));
    let empty = HostBuf { addr: 0, len: 0 };
    for &id in &ids {
        let cmd = Command::Collective { op: OpId(id), group: GroupId(id), schedule: BARRIER, reduction: None, send: empty, recv: empty };
        net.command(a, P0, cmd).unwrap();
    }
    let mut done = Vec::new();
    net.run_until("failures", |n| {
        done.extend(n.take_events(a));
        done.len() == ids.len()
    })
    .unwrap();
    assert!(done.iter().all(|e| e.result == Err(OpError::PeerUnreachable(NodeId(1)))), "{done:?}");
    let order: Vec<u64> = done.iter().map(|e| e.op.0).collect();
    assert_eq!(order, (1..=24).collect::<Vec<u64>>());
}

/// Members that called different collectives at the same place (even ranks
/// a barrier, odd ranks an allreduce) all fail with a mismatch, under loss:
/// a member that finds the mismatch still sends its steps' packets, flagged
/// failed, so the members waiting for them learn it too instead of
/// waiting for good.
#[test]
fn every_member_of_a_mismatch_fails_instead_of_waiting() {
    for (n, seed) in [(2, 1), (4, 2), (5, 3)] {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.01), seed, 1 << 20);
        for r in 0..n {
            c.install(r);
        }
        let empty = HostBuf { addr: 0, len: 0 };
        for r in 0..n {
            let cmd = if r % 2 == 0 {
                Command::Collective { op: OpId(10), group: G, schedule: BARRIER, reduction: None, send: empty, recv: empty }
            } else {
                let send = c.net.memory(NodeId(r)).alloc_with(&i64s(&[i64::from(r)]));
                let recv = c.net.memory(NodeId(r)).alloc(8);
                let reduction = Some(Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap());
                Command::Collective { op: OpId(10), group: G, schedule: ALLREDUCE, reduction, send, recv }
            };
            c.net.command(NodeId(r), P0, cmd).unwrap();
        }
        let mut results: Vec<Option<Result<Completion, OpError>>> = vec![None; n as usize];
        for _ in 0..200 {
            c.net.run_for(Duration::from_millis(5)).unwrap();
            for r in 0..n {
                for e in c.net.take_events(NodeId(r)) {
                    results[r as usize] = Some(e.result);
                }
            }
            if results.iter().all(Option::is_some) {
                break;
            }
        }
        // Each fails: a mismatch where it met the other collective's
        // packets, a failure upstream where only the flagged ones reached it.
        for (r, got) in results.iter().enumerate() {
            assert!(
                matches!(
                    got,
                    Some(Err(OpError::Collective(CollError::ScheduleMismatch { .. } | CollError::FailedUpstream { .. })))
                ),
                "{n} members, rank {r}: {got:?}"
            );
        }
        let mismatches =
            results.iter().filter(|g| matches!(g, Some(Err(OpError::Collective(CollError::ScheduleMismatch { .. }))))).count();
        assert!(mismatches >= 2, "{n} members: {results:?}");
    }
}
