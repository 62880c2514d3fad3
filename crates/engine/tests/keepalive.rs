//! Failure detection that does not depend on having something to send: an
//! operation that only waits on a peer (a receive naming it, an RDMA read
//! whose response has not come) has that peer probed, and fails when it
//! dies; a live peer that is merely slow answers the probes and is not
//! failed; a receive from anyone is never failed for a peer's death.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

/// A group's member list in its byte form.
fn group_bytes(eps: &[Endpoint]) -> Vec<u8> {
    MemberList::from_endpoints(eps.iter().copied()).encode()
}

mod common;
use common::{cfg, result_of, P0, PEER_TIMEOUT};

/// The keepalive's probe interval: a quarter of the peer timeout.
const INTERVAL: Duration = Duration::from_millis(10);

#[test]
fn a_receive_naming_a_silently_dead_peer_fails_within_the_peer_timeout_and_one_interval() {
    let mut net = Network::new(2, LinkConfig::default(), 41, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    // b dies before it ever sends or acknowledges anything: a has nothing
    // to send it, only a receive that names it.
    net.kill(b.node);
    let buf = net.memory(a.node).alloc(8);
    net.command(a.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(b.node, P0, 7), buf }).unwrap();
    let posted = net.now();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Err(OpError::PeerUnreachable(b.node)));
    let took = net.now() - posted;
    assert!(took <= PEER_TIMEOUT + INTERVAL, "took {took:?}");
    assert!(net.engine(a.node).stats().keepalives >= 1);
    // Known dead now: a new receive naming it fails at once.
    net.command(a.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::from(b.node, P0, 7), buf }).unwrap();
    let ev = net.take_events(a.node);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].result, Err(OpError::PeerUnreachable(b.node)));
}

#[test]
fn a_peer_dying_while_a_receive_waits_fails_it_and_withdraws_receives_from_anyone() {
    let mut net = Network::new(3, LinkConfig::default(), 42, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let c = net.open_port(NodeId(2), P0).unwrap();
    // A first message from b: the connection is up and b has been heard.
    let s = net.memory(b.node).alloc_with(b"hello");
    net.command(b.node, P0, Command::Send { op: OpId(1), dest: a, tag: 1, buf: s }).unwrap();
    let r = net.memory(a.node).alloc(5);
    net.command(a.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(b.node, P0, 1), buf: r }).unwrap();
    assert!(result_of(&mut net, a.node, OpId(1)).is_ok());
    let named = net.memory(a.node).alloc(8);
    net.command(a.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::from(b.node, P0, 2), buf: named }).unwrap();
    let any = net.memory(a.node).alloc(8);
    net.command(a.node, P0, Command::Recv { op: OpId(3), matching: RecvMatch::any(), buf: any }).unwrap();
    net.run_for(INTERVAL / 2).unwrap();
    net.kill(b.node);
    let killed = net.now();
    let mut failed = Vec::new();
    net.run_until("both receives", |n| {
        failed.extend(n.take_events(a.node).into_iter().map(|e| (e.op, e.result)));
        failed.len() >= 2
    })
    .unwrap();
    let took = net.now() - killed;
    assert!(took <= PEER_TIMEOUT + INTERVAL, "took {took:?}");
    // The receive from anyone cannot know whether it waited for b: it is
    // withdrawn, naming b (ULFM's "pending" failure) ...
    failed.sort_by_key(|(op, _)| *op);
    assert_eq!(failed, vec![(OpId(2), Err(OpError::PeerUnreachable(b.node))), (OpId(3), Err(OpError::ProcFailedPending(b.node)))]);
    // ... and one posted after the death waits for the live ranks.
    net.command(a.node, P0, Command::Recv { op: OpId(4), matching: RecvMatch::any(), buf: any }).unwrap();
    net.run_for(3 * PEER_TIMEOUT).unwrap();
    assert_eq!(net.take_events(a.node), vec![]);
    let s = net.memory(c.node).alloc_with(b"from c");
    net.command(c.node, P0, Command::Send { op: OpId(1), dest: a, tag: 9, buf: s }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(4)), Ok(Completion::Received { src: c, tag: 9, len: 6 }));
}

#[test]
fn an_rdma_read_whose_target_dies_after_acknowledging_the_request_fails() {
    let mut net = Network::new(2, LinkConfig::default(), 43, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let region = net.memory(b.node).alloc(4 << 20);
    net.command(b.node, P0, Command::Register { op: OpId(1), buf: region }).unwrap();
    let Some(Event { result: Ok(Completion::Registered { key }), .. }) = net.next_event(b.node) else { panic!() };
    let dst = net.memory(a.node).alloc(4 << 20);
    net.command(a.node, P0, Command::RdmaRead { op: OpId(1), dest: b, key, offset: 0, buf: dst }).unwrap();
    // A few round trips: the request is acknowledged (riding on the first
    // response packets), the response is far from complete.
    net.run_for(Duration::from_micros(50)).unwrap();
    assert!(net.take_events(a.node).is_empty());
    net.kill(b.node);
    let killed = net.now();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Err(OpError::PeerUnreachable(b.node)));
    let took = net.now() - killed;
    assert!(took <= PEER_TIMEOUT + INTERVAL, "took {took:?}");
}

#[test]
fn a_slow_peer_that_answers_probes_is_not_failed() {
    let mut net = Network::new(2, LinkConfig::default(), 44, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let r = net.memory(a.node).alloc(4);
    net.command(a.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(b.node, P0, 3), buf: r }).unwrap();
    // b's host does nothing for three peer timeouts; its engine answers
    // the probes meanwhile.
    let before = net.link_stats().delivered;
    net.run_for(3 * PEER_TIMEOUT).unwrap();
    assert_eq!(net.take_events(a.node), vec![]);
    let probes = net.link_stats().delivered - before;
    assert!(probes >= 2 * 10, "probes and their acknowledgements went both ways: {probes} datagrams");
    let s = net.memory(b.node).alloc_with(b"late");
    net.command(b.node, P0, Command::Send { op: OpId(1), dest: a, tag: 3, buf: s }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Ok(Completion::Received { src: b, tag: 3, len: 4 }));
    assert_eq!(net.memory(a.node).bytes(r), b"late");
    assert_eq!(net.engine(a.node).stats().peers_failed, 0);
}

#[test]
fn only_a_waiting_engine_has_a_keepalive_deadline() {
    let mut net = Network::new(2, LinkConfig::default(), 45, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    assert_eq!(net.engine(a.node).poll_timeout(), None, "a fresh engine has no timer");
    // A receive from anyone waits on no one.
    let any = net.memory(a.node).alloc(4);
    net.command(a.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::tag(6), buf: any }).unwrap();
    assert_eq!(net.engine(a.node).poll_timeout(), None);
    // A receive naming b: probed an interval later.
    let r = net.memory(a.node).alloc(4);
    net.command(a.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::from(b.node, P0, 5), buf: r }).unwrap();
    assert_eq!(net.engine(a.node).poll_timeout(), Some(net.now() + INTERVAL));
    // Its message comes: once everything is acknowledged, no timer again.
    let s = net.memory(b.node).alloc_with(b"done");
    net.command(b.node, P0, Command::Send { op: OpId(1), dest: a, tag: 5, buf: s }).unwrap();
    assert!(result_of(&mut net, a.node, OpId(2)).is_ok());
    net.run_until_quiet().unwrap();
    assert_eq!(net.engine(a.node).poll_timeout(), None);
    assert_eq!(net.engine(b.node).poll_timeout(), None);
    assert_eq!(net.engine(a.node).stats().keepalives, 0, "b was heard within the interval");
}

#[test]
fn a_collective_that_only_waits_for_a_dead_member_fails() {
    let mut net = Network::new(2, LinkConfig::default(), 46, cfg);
    let eps: Vec<Endpoint> = (0..2).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    let (root, leaf) = (NodeId(0), NodeId(1));
    let (group, schedule) = (GroupId(5), ScheduleId(1));
    let members = net.memory(leaf).alloc_with(&group_bytes(&eps));
    net.command(leaf, P0, Command::CreateGroup { op: OpId(1), group, rank: 1, members }).unwrap();
    // A broadcast leaf: it only receives from the root.
    let s = net.memory(leaf).alloc_with(&Schedule::new(vec![Step::recv([0], Fold::Replace)]).encode());
    net.command(leaf, P0, Command::SetSchedule { op: OpId(2), group, schedule, buf: s }).unwrap();
    assert!(net.take_events(leaf).iter().all(|e| e.result.is_ok()));
    net.kill(root);
    let (send, recv) = (net.memory(leaf).alloc(8), net.memory(leaf).alloc(8));
    let cmd = Command::Collective { op: OpId(3), group, schedule, reduction: None, send, recv };
    net.command(leaf, P0, cmd).unwrap();
    let started = net.now();
    assert_eq!(result_of(&mut net, leaf, OpId(3)), Err(OpError::PeerUnreachable(root)));
    let took = net.now() - started;
    assert!(took <= PEER_TIMEOUT + INTERVAL, "took {took:?}");
    assert_eq!(net.engine(leaf).poll_timeout(), None, "nothing waits any more");
}
