//! Port closure is announced: a receive naming a port that closed fails
//! with `OpError::SourceClosed` after everything the port sent arrived,
//! instead of waiting forever; receives from any source stay posted; a
//! receive posted later fails at once; a reopened slot's messages match as
//! usual. Checked on perfect and lossy, duplicating, reordering links.

use std::collections::BTreeMap;

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use outboard_wire::{Body, Header, Packet, PortClosed, Seq};
use proptest::prelude::*;

mod common;
use common::{cfg, result_of, P0};

/// Message `i`'s bytes.
fn body(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8)).collect()
}

/// Posts on `node` a receive naming `(src, P0)` with `tag`.
fn recv_from(net: &mut Network, node: NodeId, src: NodeId, op: u64, tag: u64, len: u32) -> HostBuf {
    let buf = net.memory(node).alloc(len);
    net.command(node, P0, Command::Recv { op: OpId(op), matching: RecvMatch::from(src, P0, tag), buf }).unwrap();
    buf
}

/// Sends message `i` (tag `i`) from `from` to `to`.
fn send(net: &mut Network, from: NodeId, to: Endpoint, i: u64, len: usize) {
    let s = net.memory(from).alloc_with(&body(i, len));
    net.command(from, P0, Command::Send { op: OpId(i), dest: to, tag: i, buf: s }).unwrap();
}

#[test]
fn messages_sent_before_the_close_arrive_then_receives_naming_the_port_fail() {
    let mut net = Network::new(2, LinkConfig::lossy(0.2, 0.2, 0.0), 7, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    // One receive posted before the messages, the others after.
    let first = recv_from(&mut net, b.node, a.node, 100, 0, 3000);
    // Waits for a tag a never sends: before this change it waited forever.
    recv_from(&mut net, b.node, a.node, 200, 99, 8);
    let any = net.memory(b.node).alloc(8);
    net.command(b.node, P0, Command::Recv { op: OpId(300), matching: RecvMatch::tag(99), buf: any }).unwrap();
    for i in 0..5 {
        send(&mut net, a.node, b, i, 3000);
    }
    // The host closes once its sends completed (what `wait` on them does).
    let mut sent = 0;
    net.run_until("sends", |n| {
        sent += n.take_events(a.node).iter().filter(|e| e.result == Ok(Completion::Sent)).count();
        sent == 5
    })
    .unwrap();
    net.close_port(a.node, P0);
    let mut got = BTreeMap::new();
    let mut closed = None;
    net.run_until("receives", |n| {
        for e in n.take_events(b.node) {
            match e.op.0 {
                200 => closed = Some(e.result),
                op => {
                    got.insert(op, e.result);
                }
            }
        }
        closed.is_some()
    })
    .unwrap();
    assert_eq!(closed, Some(Err(OpError::SourceClosed(a))), "names the closed incarnation");
    assert_eq!(got.remove(&100), Some(Ok(Completion::Received { src: a, tag: 0, len: 3000 })));
    assert_eq!(net.memory(b.node).bytes(first), &body(0, 3000)[..]);
    assert!(got.is_empty(), "nothing else completed: {got:?}");
    // The other four arrived before the notice: held, and taken now.
    for i in 1..5 {
        let buf = recv_from(&mut net, b.node, a.node, 100 + i, i, 3000);
        let ev = net.take_events(b.node);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].result, Ok(Completion::Received { src: a, tag: i, len: 3000 }));
        assert_eq!(net.memory(b.node).bytes(buf), &body(i, 3000)[..]);
    }
    // A receive naming the closed port posted later fails at once.
    recv_from(&mut net, b.node, a.node, 201, 99, 8);
    let ev = net.take_events(b.node);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].result, Err(OpError::SourceClosed(a)));
    // The receive from any source is not failed: a closed port is not a
    // failed process.
    net.run_until_quiet().unwrap();
    assert!(net.take_events(b.node).is_empty());
    net.command(b.node, P0, Command::Cancel { op: OpId(301), target: OpId(300) }).unwrap();
    let ev = net.take_events(b.node);
    assert!(ev.iter().any(|e| e.op == OpId(300) && e.result == Err(OpError::Cancelled)), "still posted: {ev:?}");
    assert_eq!(net.engine(a.node).stats().port_closures_sent, 1);
    assert!(net.engine(b.node).stats().port_closures_received >= 1);
    assert_eq!(net.engine(b.node).stats().peers_failed, 0);
}

#[test]
fn a_reopened_port_is_received_from_as_usual() {
    let mut net = Network::new(2, LinkConfig::lossy(0.2, 0.2, 0.0), 11, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    send(&mut net, a.node, b, 1, 10);
    recv_from(&mut net, b.node, a.node, 1, 1, 10);
    assert!(result_of(&mut net, b.node, OpId(1)).is_ok());
    net.close_port(a.node, P0);
    recv_from(&mut net, b.node, a.node, 2, 2, 10);
    assert_eq!(result_of(&mut net, b.node, OpId(2)), Err(OpError::SourceClosed(a)));
    net.run_until_quiet().unwrap();
    net.take_events(a.node);
    // The slot reopens as a new incarnation; its first message shows it.
    let a2 = net.open_port(NodeId(0), P0).unwrap();
    assert!(a2.gen > a.gen);
    send(&mut net, a.node, b, 3, 10);
    net.run_until_quiet().unwrap();
    let buf = recv_from(&mut net, b.node, a.node, 3, 3, 10);
    assert_eq!(result_of(&mut net, b.node, OpId(3)), Ok(Completion::Received { src: a2, tag: 3, len: 10 }));
    assert_eq!(net.memory(b.node).bytes(buf), &body(3, 10)[..]);
    // And a receive naming it now waits for it like any other.
    recv_from(&mut net, b.node, a.node, 4, 4, 10);
    net.run_until_quiet().unwrap();
    assert!(net.take_events(b.node).is_empty(), "waits");
    send(&mut net, a.node, b, 4, 10);
    assert_eq!(result_of(&mut net, b.node, OpId(4)), Ok(Completion::Received { src: a2, tag: 4, len: 10 }));
    // It closes too: announced with its own incarnation.
    recv_from(&mut net, b.node, a.node, 5, 5, 10);
    net.close_port(a.node, P0);
    assert_eq!(result_of(&mut net, b.node, OpId(5)), Err(OpError::SourceClosed(a2)));
}

#[test]
fn only_receives_naming_that_node_and_port_fail() {
    let mut net = Network::new(3, LinkConfig::perfect(Duration::from_micros(5)), 3, cfg);
    let p1 = PortId(1);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let a1 = net.open_port(NodeId(0), p1).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let b1 = net.open_port(NodeId(1), p1).unwrap();
    let c = net.open_port(NodeId(2), P0).unwrap();
    send(&mut net, a.node, b, 1, 4);
    send(&mut net, c.node, b, 2, 4);
    net.run_until_quiet().unwrap();
    // On both of b's ports: naming (a, 0) fails; naming (a, 1) or (c, 0) waits.
    for (port, op) in [(P0, 10), (p1, 11)] {
        let buf = net.memory(b.node).alloc(4);
        net.command(b.node, port, Command::Recv { op: OpId(op), matching: RecvMatch::from(a.node, P0, 9), buf }).unwrap();
    }
    let buf = net.memory(b.node).alloc(4);
    net.command(b.node, P0, Command::Recv { op: OpId(12), matching: RecvMatch::from(a.node, p1, 9), buf }).unwrap();
    net.command(b.node, P0, Command::Recv { op: OpId(13), matching: RecvMatch::from(c.node, P0, 9), buf }).unwrap();
    net.close_port(a.node, P0);
    net.run_until_quiet().unwrap();
    let mut ev: Vec<(OpId, Result<Completion, OpError>)> = net.take_events(b.node).into_iter().map(|e| (e.op, e.result)).collect();
    ev.sort_by_key(|e| e.0);
    assert_eq!(ev, vec![(OpId(10), Err(OpError::SourceClosed(a))), (OpId(11), Err(OpError::SourceClosed(a)))]);
    assert_eq!(b1.port, p1);
    let _ = (a1, c);
}

/// One sequenced packet from node 0 (incarnation 3) to node 1.
fn packet(seq: u32, body: Body<'_>) -> Vec<u8> {
    let h = Header { kind: body.repr().kind(), flags: 0, src_node: 0, dst_node: 1, boot: 3, seq: Seq(seq), ack: Seq(0), horizon: Seq(0) };
    let p = Packet { header: h, body };
    let mut b = vec![0; p.buffer_len()];
    p.emit(&cfg(NodeId(0)).mac_key(), &mut b).unwrap();
    b
}

#[test]
fn a_notice_for_an_older_incarnation_than_recorded_does_not_go_back() {
    // Duplicates are the connection's to drop; this checks the record
    // keeps the newest incarnation if two notices ever arrive out of turn.
    let t = Instant::from_nanos(1_000);
    let mut e = Engine::new(cfg(NodeId(1)), VecMemory::new(), t).unwrap();
    e.open_port(t, P0).unwrap();
    e.handle_packet(t, NodeId(0), &packet(0, Body::PortClosed(PortClosed { port: 0, gen: 5 })));
    e.handle_packet(t, NodeId(0), &packet(1, Body::PortClosed(PortClosed { port: 0, gen: 4 })));
    assert_eq!(e.stats().port_closures_received, 2);
    let buf = e.dma_mut().alloc(8);
    e.handle_command(t, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(NodeId(0), P0, 7), buf }).unwrap();
    let ev = e.poll_event().unwrap();
    assert_eq!(ev.result, Err(OpError::SourceClosed(Endpoint { node: NodeId(0), port: P0, gen: 5 })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Sends, receives and the close interleaved at random under loss,
    /// duplication and reordering: every message whose send completed
    /// before the close is received intact; what is received is a prefix
    /// of what was sent, each once; every receive naming the port ends -
    /// received or `SourceClosed` - and none hangs; the receive from any
    /// source stays posted.
    #[test]
    fn under_loss_and_duplication_nothing_sent_is_lost_and_nothing_hangs(
        seed in any::<u64>(),
        loss in 0.0f64..0.3,
        dup in 0.0f64..0.3,
        n in 1u64..10,
        close_after in 0u64..10,
        lens in proptest::collection::vec(0usize..5000, 10),
        gaps in proptest::collection::vec(0u64..300, 20),
        recv_early in proptest::collection::vec(any::<bool>(), 10),
    ) {
        let mut link = LinkConfig::lossy(loss, dup, 0.0);
        link.jitter = Duration::from_micros(20);
        let mut net = Network::new(2, link, seed, cfg);
        let a = net.open_port(NodeId(0), P0).unwrap();
        let b = net.open_port(NodeId(1), P0).unwrap();
        let any = net.memory(b.node).alloc(8);
        net.command(b.node, P0, Command::Recv { op: OpId(999), matching: RecvMatch::tag(1 << 40), buf: any }).unwrap();
        let mut bufs = BTreeMap::new();
        for i in 0..n {
            if recv_early[i as usize] {
                bufs.insert(i, recv_from(&mut net, b.node, a.node, 100 + i, i, 5000));
            }
        }
        let sends = close_after.min(n);
        let mut results: BTreeMap<u64, Result<Completion, OpError>> = BTreeMap::new();
        let mut confirmed = Vec::new();
        let take = |net: &mut Network, results: &mut BTreeMap<u64, _>, confirmed: &mut Vec<u64>| {
            for e in net.take_events(a.node) {
                if e.result == Ok(Completion::Sent) {
                    confirmed.push(e.op.0);
                }
            }
            for e in net.take_events(b.node) {
                assert!(e.op.0 >= 100 && e.op.0 < 999, "{e:?}");
                assert!(results.insert(e.op.0 - 100, e.result).is_none(), "completed once");
            }
        };
        for i in 0..sends {
            send(&mut net, a.node, b, i, lens[i as usize]);
            net.run_for(Duration::from_micros(gaps[i as usize])).unwrap();
            take(&mut net, &mut results, &mut confirmed);
        }
        let confirmed_before_close = confirmed.clone();
        net.close_port(a.node, P0);
        for i in 0..n {
            if !recv_early[i as usize] {
                net.run_for(Duration::from_micros(gaps[10 + i as usize])).unwrap();
                bufs.insert(i, recv_from(&mut net, b.node, a.node, 100 + i, i, 5000));
                take(&mut net, &mut results, &mut confirmed);
            }
        }
        net.run_until("every receive naming a ends", |net| {
            take(net, &mut results, &mut confirmed);
            results.len() as u64 == n
        }).unwrap();
        net.run_until_quiet().unwrap();
        take(&mut net, &mut results, &mut confirmed);
        let mut received = 0;
        for (i, r) in &results {
            match r {
                Ok(Completion::Received { src, tag, len }) => {
                    prop_assert_eq!(*src, a);
                    prop_assert_eq!(*tag, *i);
                    prop_assert_eq!(*len as usize, lens[*i as usize]);
                    prop_assert_eq!(net.memory(b.node).bytes(bufs[i]).get(..*len as usize), Some(&body(*i, *len as usize)[..]));
                    prop_assert_eq!(*i, received, "received messages are a prefix of those sent");
                    received += 1;
                }
                Err(OpError::SourceClosed(ep)) => prop_assert_eq!(*ep, a),
                other => prop_assert!(false, "unexpected result for {}: {:?}", i, other),
            }
        }
        for i in &confirmed_before_close {
            prop_assert!(matches!(results[i], Ok(Completion::Received { .. })), "send {} completed before the close", i);
        }
        prop_assert!(received <= sends);
        // The receive from any source is still posted.
        net.command(b.node, P0, Command::Cancel { op: OpId(1000), target: OpId(999) }).unwrap();
        let ev = net.take_events(b.node);
        prop_assert!(ev.iter().any(|e| e.op == OpId(999) && e.result == Err(OpError::Cancelled)), "{:?}", ev);
        prop_assert_eq!(net.engine(b.node).stats().peers_failed, 0);
    }
}

/// The schedule number of [`barrier_group`]'s barrier.
const BARRIER: ScheduleId = ScheduleId(1);

/// Creates group `g` of `members` at each of them, with a dissemination
/// barrier as schedule [`BARRIER`].
fn barrier_group(net: &mut Network, members: &[Endpoint], g: GroupId) {
    let n = members.len() as u32;
    for (rank, ep) in members.iter().enumerate() {
        let m = net.memory(ep.node).alloc_with(&MemberList::from_endpoints(members.iter().copied()).encode());
        net.command(ep.node, ep.port, Command::CreateGroup { op: OpId(1), group: g, rank: rank as u32, members: m }).unwrap();
        let s = net.memory(ep.node).alloc_with(&common::dissemination(rank as u32, n).encode());
        net.command(ep.node, ep.port, Command::SetSchedule { op: OpId(2), group: g, schedule: BARRIER, buf: s }).unwrap();
    }
}

/// Starts `ep`'s next barrier of group `g` as operation `op`.
fn start_barrier(net: &mut Network, ep: Endpoint, g: GroupId, op: u64) {
    let empty = HostBuf { addr: 0, len: 0 };
    let cmd = Command::Collective { op: OpId(op), group: g, schedule: BARRIER, reduction: None, send: empty, recv: empty };
    net.command(ep.node, ep.port, cmd).unwrap();
}

/// A group member whose port closes on a node that lives on (a process of
/// a node engine that ended): the collectives of its group fail naming it,
/// on its own node and on the others, instead of waiting forever for its
/// contribution; one started after the close fails at once. The node's
/// other port goes on.
#[test]
fn a_member_port_that_closes_fails_its_groups_collectives_on_every_node() {
    for seed in 0..8 {
        let mut net = Network::new(2, LinkConfig::lossy(0.2, 0.1, 0.0), seed, cfg);
        let a = net.open_port(NodeId(0), P0).unwrap();
        let gone = net.open_port(NodeId(0), PortId(1)).unwrap();
        let c = net.open_port(NodeId(1), P0).unwrap();
        let members = [a, gone, c];
        let g = GroupId(5);
        barrier_group(&mut net, &members, g);
        for n in 0..2 {
            assert!(net.take_events(NodeId(n)).iter().all(|e| e.result.is_ok()));
        }
        let start = |net: &mut Network, ep: Endpoint, op: u64| start_barrier(net, ep, g, op);
        // Two of three enter the barrier; the third's process ends.
        start(&mut net, a, 10);
        start(&mut net, c, 10);
        net.run_for(std::time::Duration::from_millis(1)).unwrap();
        net.close_port(gone.node, gone.port);
        let want = Err(OpError::SourceClosed(gone));
        let mut results = BTreeMap::new();
        net.run_until("the survivors' barriers", |n| {
            for node in [a.node, c.node] {
                for e in n.take_events(node) {
                    assert!(results.insert((node, e.port, e.op), e.result).is_none(), "one completion per operation");
                }
            }
            results.len() == 2
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(results.values().all(|r| *r == want), "seed {seed}: {results:?}");
        // A barrier started after the close fails at once, on both nodes.
        for ep in [a, c] {
            start(&mut net, ep, 11);
            assert_eq!(result_of(&mut net, ep.node, OpId(11)), want, "seed {seed}: a later barrier of {ep:?}");
        }
        // The closed member's node goes on: its other port still talks.
        let buf = net.memory(c.node).alloc(8);
        net.command(c.node, P0, Command::Recv { op: OpId(20), matching: RecvMatch::from(a.node, P0, 3), buf }).unwrap();
        send(&mut net, a.node, c, 3, 8);
        assert_eq!(result_of(&mut net, c.node, OpId(20)), Ok(Completion::Received { src: a, tag: 3, len: 8 }), "seed {seed}");
    }
}

/// A loop of broadcasts whose root only sends, with a leaf's port closed
/// after the first: the closed member will never take part again, so
/// every survivor's broadcast fails within a few rounds, naming it (the
/// root too, though nothing it waits for is missing; before, the root
/// and the members below it went on succeeding while the closed leaf's
/// node-mate failed, and the job hung once a survivor stopped calling).
/// Members: rank 0 the root (node 1), rank 1 on node 0 forwarding to
/// rank 3 (node 1), rank 2 the leaf that leaves (node 0).
#[test]
fn after_a_member_leaves_every_survivor_fails_the_groups_collectives_even_the_root_that_only_sends() {
    for seed in 0..8 {
        let link = if seed % 2 == 0 { LinkConfig::default() } else { LinkConfig::lossy(0.2, 0.1, 0.0) };
        let mut net = Network::new(2, link, seed, cfg);
        let root = net.open_port(NodeId(1), P0).unwrap();
        let mid = net.open_port(NodeId(0), P0).unwrap();
        let gone = net.open_port(NodeId(0), PortId(1)).unwrap();
        let below = net.open_port(NodeId(1), PortId(1)).unwrap();
        let members = [root, mid, gone, below];
        let g = GroupId(6);
        let bcast = ScheduleId(3);
        for (rank, ep) in members.iter().enumerate() {
            let m = net.memory(ep.node).alloc_with(&MemberList::from_endpoints(members).encode());
            net.command(ep.node, ep.port, Command::CreateGroup { op: OpId(1), group: g, rank: rank as u32, members: m }).unwrap();
            let (parent, children) = common::binomial(rank as u32, 4);
            let mut steps: Vec<Step> = parent.map(|p| Step::recv([p], Fold::Replace)).into_iter().collect();
            steps.push(Step::send(children));
            let s = net.memory(ep.node).alloc_with(&Schedule::new(steps).encode());
            net.command(ep.node, ep.port, Command::SetSchedule { op: OpId(2), group: g, schedule: bcast, buf: s }).unwrap();
        }
        for n in 0..2 {
            assert!(net.take_events(NodeId(n)).iter().all(|e| e.result.is_ok()));
        }
        // One broadcast of 8 bytes; `op` numbers the round.
        let start = |net: &mut Network, ep: Endpoint, op: u64| {
            let send = net.memory(ep.node).alloc_with(&op.to_le_bytes());
            let recv = net.memory(ep.node).alloc(8);
            let cmd = Command::Collective { op: OpId(op), group: g, schedule: bcast, reduction: None, send, recv };
            net.command(ep.node, ep.port, cmd).unwrap();
        };
        let mut alive: Vec<Endpoint> = members.to_vec();
        let mut failed: BTreeMap<Endpoint, (u64, Result<Completion, OpError>)> = BTreeMap::new();
        for round in 10..60u64 {
            for &ep in &alive {
                start(&mut net, ep, round);
            }
            let mut done = BTreeMap::new();
            net.run_until("every caller's broadcast", |n| {
                for &ep in &alive {
                    for e in n.take_events(ep.node).into_iter() {
                        let who = members.iter().copied().find(|m| m.node == ep.node && m.port == e.port).unwrap();
                        assert!(done.insert(who, e.result).is_none(), "one completion per broadcast");
                    }
                }
                alive.iter().all(|ep| done.contains_key(ep))
            })
            .unwrap_or_else(|e| panic!("seed {seed}, round {round}: {e}"));
            if round == 10 {
                assert!(done.values().all(|r| r.is_ok()), "seed {seed}: {done:?}");
                net.close_port(gone.node, gone.port);
                alive.retain(|&ep| ep != gone);
                continue;
            }
            for (ep, r) in done {
                if r.is_err() {
                    failed.insert(ep, (round, r));
                    alive.retain(|&a| a != ep);
                }
            }
            if alive.is_empty() {
                break;
            }
        }
        assert!(alive.is_empty(), "seed {seed}: these survivors never failed: {alive:?} ({failed:?})");
        for (ep, (round, r)) in &failed {
            assert_eq!(*r, Err(OpError::SourceClosed(gone)), "seed {seed}: {ep:?} in round {round}");
        }
    }
}

/// A root's broadcasts of several pieces each, whose pieces are read from
/// host memory only as their packets go out, queued behind the
/// connection's window when the only other member's port closes: the
/// queued packets are dropped, so those pieces are never read, and each
/// broadcast must still complete - failed, naming the closed member -
/// instead of waiting for that read forever (before, 2 of 16 completed
/// and the root hung, as a node's leader did under `outboard run` when a
/// rank of the other node died in a loop of broadcasts).
#[test]
fn a_roots_queued_broadcasts_complete_when_the_member_they_wait_to_reach_closes() {
    for seed in 0..4 {
        // A window of a few packets per connection, so that most of the
        // pieces wait at the root, their values not yet read.
        let small_window = |n: NodeId| EngineConfig { window: 4, ..cfg(n) };
        let mut net = Network::new(2, LinkConfig::default(), seed, small_window);
        let root = net.open_port(NodeId(1), P0).unwrap();
        let leaf = net.open_port(NodeId(0), P0).unwrap();
        let members = [root, leaf];
        let g = GroupId(7);
        let bcast = ScheduleId(4);
        for (rank, ep) in members.iter().enumerate() {
            let m = net.memory(ep.node).alloc_with(&MemberList::from_endpoints(members).encode());
            net.command(ep.node, ep.port, Command::CreateGroup { op: OpId(1), group: g, rank: rank as u32, members: m }).unwrap();
            let steps = if rank == 0 { vec![Step::send([1])] } else { vec![Step::recv([0], Fold::Replace)] };
            let s = net.memory(ep.node).alloc_with(&Schedule::new(steps).encode());
            net.command(ep.node, ep.port, Command::SetSchedule { op: OpId(2), group: g, schedule: bcast, buf: s }).unwrap();
        }
        for n in 0..2 {
            assert!(net.take_events(NodeId(n)).iter().all(|e| e.result.is_ok()));
        }
        // Broadcasts of several pieces, within the root's bound on
        // unconfirmed collective bytes (so every step sends at once); the
        // leaf starts none of them.
        let bound = small_window(root.node).coll_send_bytes;
        let len = 32 * 1024;
        let calls = (bound / len / 2) as u64;
        for k in 0..calls {
            let send = net.memory(root.node).alloc_with(&vec![k as u8; len]);
            let cmd = Command::Collective { op: OpId(100 + k), group: g, schedule: bcast, reduction: None, send, recv: send };
            net.command(root.node, root.port, cmd).unwrap();
        }
        net.run_for(Duration::from_micros(20)).unwrap();
        net.close_port(leaf.node, leaf.port);
        let mut done = BTreeMap::new();
        net.run_until("every broadcast of the root", |n| {
            for e in n.take_events(root.node) {
                assert!(done.insert(e.op.0, e.result).is_none(), "one completion per broadcast");
            }
            done.len() as u64 == calls
        })
        .unwrap_or_else(|e| panic!("seed {seed}: {} of {calls} broadcasts completed: {e}", done.len()));
        assert!(done.values().all(|r| r.is_ok() || *r == Err(OpError::SourceClosed(leaf))), "seed {seed}: {done:?}");
        assert!(done.values().any(|r| *r == Err(OpError::SourceClosed(leaf))), "seed {seed}: some broadcast could not reach the leaf: {done:?}");
    }
}

/// A member that hears of a departure only from a peer's packet flagged
/// failed - the closure notice still on its way, on a slow link - fails
/// naming the member that left, as the peer did, not the peer that told
/// it (a rank of a job saw "a packet from rank 0 said so" where its
/// neighbours saw "rank 1 closed its port", depending on which arrived
/// first). Members: rank 0 on node 1, rank 1 (leaves) on node 0, rank 2
/// on node 2, whose link from node 0 takes a second.
#[test]
fn a_departure_learned_from_a_flagged_packet_names_the_member_that_left() {
    for seed in 0..6 {
        let lossy = seed % 2 == 1;
        let fast = if lossy { LinkConfig::lossy(0.2, 0.1, 0.0) } else { LinkConfig::default() };
        let mut net = Network::new(3, fast, seed, cfg);
        let slow = std::time::Duration::from_secs(1);
        net.set_link(NodeId(0), NodeId(2), LinkConfig { latency: slow, ..fast });
        let a = net.open_port(NodeId(1), P0).unwrap();
        let gone = net.open_port(NodeId(0), P0).unwrap();
        let c = net.open_port(NodeId(2), P0).unwrap();
        let members = [a, gone, c];
        let g = GroupId(7);
        barrier_group(&mut net, &members, g);
        net.run_until("the groups", |n| (0..3).all(|i| n.engine(NodeId(i)).is_quiet())).unwrap_or_else(|e| panic!("{e}"));
        for n in 0..3 {
            assert!(net.take_events(NodeId(n)).iter().all(|e| e.result.is_ok()));
        }
        let start = |net: &mut Network, ep: Endpoint, op: u64| start_barrier(net, ep, g, op);
        let t0 = net.now();
        net.close_port(gone.node, gone.port);
        let want = Err(OpError::SourceClosed(gone));
        // Rank 0 hears of it soon (its receive from rank 1 fails), and
        // fails its next barrier at once, sending the rest of its steps
        // flagged failed.
        let buf = net.memory(a.node).alloc(8);
        net.command(a.node, P0, Command::Recv { op: OpId(9), matching: RecvMatch::from(gone.node, P0, 3), buf }).unwrap();
        assert_eq!(result_of(&mut net, a.node, OpId(9)), want, "seed {seed}: rank 0's receive");
        start(&mut net, a, 10);
        assert_eq!(result_of(&mut net, a.node, OpId(10)), want, "seed {seed}: rank 0");
        start(&mut net, c, 10);
        assert_eq!(result_of(&mut net, c.node, OpId(10)), want, "seed {seed}: rank 2");
        assert!(net.now().saturating_since(t0) < slow, "seed {seed}: rank 2 failed only when the notice came");
    }
}
