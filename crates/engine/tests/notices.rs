//! Failure notices: when one engine declares a peer dead by its own timeout,
//! the engines it still reaches learn it at once, so an operation elsewhere
//! that needs the dead peer fails naming it without waiting for a timeout of
//! its own; a notice about the receiver itself, or about an incarnation that
//! has been replaced, is ignored.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use outboard_wire::{Body, Header, Kind, Packet, PeerFailed, Seq};

mod common;
use common::{cfg, result_of, P0, PEER_TIMEOUT};


/// Sends one message `from` -> `to` and receives it: the connection is up
/// and each side has heard from the other.
fn exchange(net: &mut Network, from: Endpoint, to: Endpoint, op: u64) {
    let s = net.memory(from.node).alloc_with(b"hi");
    net.command(from.node, P0, Command::Send { op: OpId(op), dest: to, tag: op, buf: s }).unwrap();
    let r = net.memory(to.node).alloc(2);
    net.command(to.node, P0, Command::Recv { op: OpId(op), matching: RecvMatch::from(from.node, P0, op), buf: r }).unwrap();
    assert!(result_of(net, to.node, OpId(op)).is_ok());
    net.run_until_quiet().unwrap();
    assert!(net.take_events(from.node).iter().all(|e| e.result.is_ok()));
}

#[test]
fn a_death_one_engine_detects_fails_another_engines_operations_on_it_at_once() {
    let mut net = Network::new(3, LinkConfig::default(), 51, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let c = net.open_port(NodeId(2), P0).unwrap();
    exchange(&mut net, c, a, 1);
    exchange(&mut net, c, b, 2);
    exchange(&mut net, a, b, 3);
    // a waits on c; b has nothing toward c yet.
    let ra = net.memory(a.node).alloc(8);
    net.command(a.node, P0, Command::Recv { op: OpId(10), matching: RecvMatch::from(c.node, P0, 7), buf: ra }).unwrap();
    net.kill(c.node);
    let killed = net.now();
    // Later b starts waiting on c too: its own probes would take at least
    // a whole peer timeout from here.
    net.run_for(PEER_TIMEOUT * 3 / 4).unwrap();
    let rb = net.memory(b.node).alloc(8);
    net.command(b.node, P0, Command::Recv { op: OpId(20), matching: RecvMatch::from(c.node, P0, 7), buf: rb }).unwrap();
    let b_posted = net.now();
    assert_eq!(result_of(&mut net, a.node, OpId(10)), Err(OpError::PeerUnreachable(c.node)));
    let a_knew = net.now();
    assert!(a_knew - killed >= PEER_TIMEOUT, "a detected it by its own timeout");
    assert_eq!(result_of(&mut net, b.node, OpId(20)), Err(OpError::PeerUnreachable(c.node)));
    let took = net.now() - b_posted;
    assert!(took < PEER_TIMEOUT, "b learnt it from a's notice, not its own timeout: {took:?}");
    assert!(net.now() - a_knew < Duration::from_millis(1), "one hop after a knew: {:?}", net.now() - a_knew);
    // Known dead on b now: a new receive naming c fails at once.
    net.command(b.node, P0, Command::Recv { op: OpId(21), matching: RecvMatch::from(c.node, P0, 7), buf: rb }).unwrap();
    let ev = net.take_events(b.node);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].result, Err(OpError::PeerUnreachable(c.node)));
    // One notice (to b; c is the dead one), received once, not relayed.
    assert_eq!(net.engine(a.node).stats().notices_sent, 1);
    assert_eq!(net.engine(b.node).stats().notices_received, 1);
    assert_eq!(net.engine(b.node).stats().notices_sent, 0);
    assert_eq!(net.engine(b.node).stats().peers_failed, 1);
    // No false failure of a: a and b still talk.
    exchange(&mut net, a, b, 30);
    exchange(&mut net, b, a, 31);
    assert_eq!(net.engine(a.node).stats().peers_failed, 1);
    assert_eq!(net.engine(b.node).stats().peers_failed, 1);
}

/// One sequenced packet from `src` (incarnation `boot`) to node 1.
fn packet(src: u32, boot: u64, seq: u32, body: Body<'_>) -> Vec<u8> {
    let kind = body.repr().kind();
    let h = Header { kind, flags: 0, src_node: src, dst_node: 1, boot, seq: Seq(seq), ack: Seq(0), horizon: Seq(0) };
    let p = Packet { header: h, body };
    let mut b = vec![0; p.buffer_len()];
    p.emit(&cfg(NodeId(src)).mac_key(), &mut b).unwrap();
    b
}

/// Node 1's engine with port 0 open and a receive naming node 2 posted
/// after node 2 (incarnation 5) was heard from.
fn receiver_waiting_on_node_2() -> (Engine<VecMemory>, Instant) {
    let t = Instant::from_nanos(1_000);
    let mut e = Engine::new(cfg(NodeId(1)), VecMemory::new(), t).unwrap();
    e.open_port(t, P0).unwrap();
    e.handle_packet(t, NodeId(2), &packet(2, 5, 0, Body::Nop));
    let buf = e.dma_mut().alloc(8);
    let from_2 = RecvMatch::from(NodeId(2), P0, 7);
    e.handle_command(t, P0, Command::Recv { op: OpId(1), matching: from_2, buf }).unwrap();
    let from_0 = RecvMatch::from(NodeId(0), P0, 7);
    e.handle_command(t, P0, Command::Recv { op: OpId(2), matching: from_0, buf }).unwrap();
    assert!(e.poll_event().is_none());
    (e, t)
}

#[test]
fn a_notice_naming_the_receiver_itself_is_counted_and_ignored() {
    let (mut e, t) = receiver_waiting_on_node_2();
    e.handle_packet(t, NodeId(0), &packet(0, 3, 0, Body::PeerFailed(PeerFailed { node: 1, boot: Some(0) })));
    assert_eq!(e.stats().notices_received, 1);
    assert_eq!(e.stats().notices_about_self, 1);
    assert_eq!(e.stats().peers_failed, 0);
    assert!(e.poll_event().is_none(), "nothing fails");
    // The notice's sender is alive and still heard: nothing in the way of a
    // further packet from it.
    e.handle_packet(t, NodeId(0), &packet(0, 3, 1, Body::Nop));
    assert_eq!(e.stats().duplicates + e.stats().out_of_order + e.stats().stale_boot, 0);
}

#[test]
fn a_notice_about_a_replaced_incarnation_is_ignored_and_a_current_one_is_not() {
    let (mut e, t) = receiver_waiting_on_node_2();
    // Node 2 is known as incarnation 5: a notice about incarnation 4 is
    // stale (it restarted since) and must not kill it.
    e.handle_packet(t, NodeId(0), &packet(0, 3, 0, Body::PeerFailed(PeerFailed { node: 2, boot: Some(4) })));
    assert_eq!(e.stats().notices_received, 1);
    assert_eq!(e.stats().notices_ignored, 1);
    assert_eq!(e.stats().peers_failed, 0);
    assert!(e.poll_event().is_none(), "the receive naming node 2 still waits");
    // About incarnation 5: node 2 is dead here too, and only the receive
    // naming it fails.
    e.handle_packet(t, NodeId(0), &packet(0, 3, 1, Body::PeerFailed(PeerFailed { node: 2, boot: Some(5) })));
    let ev = e.poll_event().expect("the receive naming node 2 fails");
    assert_eq!((ev.op, ev.result), (OpId(1), Err(OpError::PeerUnreachable(NodeId(2)))));
    assert!(e.poll_event().is_none());
    assert_eq!(e.stats().first_failed, Some(NodeId(2)));
    // A later death (node 0, whose receive is still posted) fails what
    // waits on it, and the job's first failure stays node 2.
    e.handle_packet(t, NodeId(3), &packet(3, 8, 0, Body::PeerFailed(PeerFailed { node: 0, boot: None })));
    let ev = e.poll_event().expect("the receive naming node 0 fails");
    assert_eq!((ev.op, ev.result), (OpId(2), Err(OpError::PeerUnreachable(NodeId(0)))));
    assert_eq!(e.stats().first_failed, Some(NodeId(2)));
    assert_eq!(e.stats().notices_sent, 0, "a notice is never relayed");
    let mut out = vec![0u8; DEFAULT_MTU];
    while let Some(tx) = e.poll_transmit(t, &mut out) {
        let p = Packet::parse(&out[..tx.len], &cfg(NodeId(1)).mac_key()).unwrap();
        assert!(!matches!(p.header.kind, Kind::PeerFailed), "sent {p:?}");
    }
}

#[test]
fn a_peer_leaving_after_a_failure_is_dead_at_once_and_the_first_failure_stays_named() {
    let (mut e, t) = receiver_waiting_on_node_2();
    // Node 0 learned that node 3 died, gives up and leaves: its departure
    // follows a notice of node 3's death.
    e.handle_packet(t, NodeId(0), &packet(0, 4, 0, Body::PeerFailed(PeerFailed { node: 3, boot: None })));
    e.handle_packet(t, NodeId(0), &packet(0, 4, 1, Body::PeerFailed(PeerFailed { node: 0, boot: Some(4) })));
    let ev = e.poll_event().expect("the receive naming node 0 fails at once");
    assert_eq!((ev.op, ev.result), (OpId(2), Err(OpError::PeerUnreachable(NodeId(0)))));
    assert!(e.poll_event().is_none(), "the receive naming node 2 still waits");
    let s = e.stats();
    assert_eq!((s.departures, s.notices_received, s.peers_failed), (1, 2, 2));
    assert_eq!(s.first_failed, Some(NodeId(3)), "the job's first failure, not the leaver");
}

#[test]
fn leaving_tells_every_live_peer_the_first_failure_then_the_departure() {
    let (mut e, t) = receiver_waiting_on_node_2();
    // Node 1 (this engine) hears from node 0 too, then learns from node 0
    // that node 3 died.
    e.handle_packet(t, NodeId(0), &packet(0, 4, 0, Body::PeerFailed(PeerFailed { node: 3, boot: None })));
    let mut out = vec![0u8; DEFAULT_MTU];
    while e.poll_transmit(t, &mut out).is_some() {}
    e.leave(t);
    let key = cfg(NodeId(1)).mac_key();
    let mut sent: Vec<(u32, u32)> = Vec::new();
    while let Some(tx) = e.poll_transmit(t, &mut out) {
        let p = Packet::parse(&out[..tx.len], &key).unwrap();
        if let Body::PeerFailed(n) = p.body {
            sent.push((p.header.dst_node, n.node));
        }
    }
    sent.sort();
    // To nodes 0 and 2 (live, heard from): node 3 first, then node 1 itself.
    assert_eq!(sent, vec![(0, 1), (0, 3), (2, 1), (2, 3)]);
}
