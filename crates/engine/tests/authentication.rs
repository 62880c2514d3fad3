//! Authenticated packets and incarnations that only grow (issue 15): a
//! datagram that does not carry the job's MAC, or that comes from an older
//! incarnation than the one known (or than the job), changes nothing.

mod common;

use common::{cfg, P0};
use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use outboard_wire::{Body, Header, Packet, PeerFailed, Seq};

/// One sequenced packet from `src` (incarnation `boot`) to node 1, under
/// `key`.
fn packet(key: &outboard_wire::MacKey, src: u32, boot: u64, seq: u32, body: Body<'_>) -> Vec<u8> {
    let kind = body.repr().kind();
    let h = Header { kind, flags: 0, src_node: src, dst_node: 1, boot, seq: Seq(seq), ack: Seq(0), horizon: Seq(0) };
    let p = Packet { header: h, body };
    let mut b = vec![0; p.buffer_len()];
    p.emit(key, &mut b).unwrap();
    b
}

/// Node 1's engine, port 0 open, node 2 heard from as incarnation 5, and a
/// receive naming node 2 posted (op 1).
fn waiting_on_node_2(config: EngineConfig) -> (Engine<VecMemory>, Instant) {
    let t = Instant::from_nanos(1_000);
    let key = config.mac_key();
    let mut e = Engine::new(config, VecMemory::new(), t).unwrap();
    e.open_port(t, P0).unwrap();
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 5, 0, Body::Nop));
    let buf = e.dma_mut().alloc(8);
    e.handle_command(t, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(NodeId(2), P0, 7), buf }).unwrap();
    assert!(e.poll_event().is_none());
    (e, t)
}

#[test]
fn a_datagram_under_another_secret_is_dropped_before_it_can_do_anything() {
    let (mut e, t) = waiting_on_node_2(cfg(NodeId(1)));
    // The right job key, the right addresses, a newer incarnation and a
    // failure notice about node 2: with the job key alone on the wire
    // (protocol version 1) this killed a live peer.
    let mut other = cfg(NodeId(0));
    other.secret = JobSecret::from_bytes([0xEE; 16]);
    let forger = other.mac_key();
    e.handle_packet(t, NodeId(0), &packet(&forger, 0, 9, 0, Body::PeerFailed(PeerFailed { node: 2, boot: Some(5) })));
    e.handle_packet(t, NodeId(2), &packet(&forger, 2, 6, 1, Body::Nop));
    let s = e.stats().clone();
    assert_eq!(s.unauthenticated, 2);
    assert_eq!((s.notices_received, s.peers_failed, s.stale_boot, s.malformed), (0, 0, 0, 0));
    assert!(e.poll_event().is_none(), "the receive naming node 2 still waits");
    // Node 2's real next packet is in order: nothing moved its connection.
    e.handle_packet(t, NodeId(2), &packet(&cfg(NodeId(2)).mac_key(), 2, 5, 1, Body::Nop));
    assert_eq!((e.stats().duplicates, e.stats().out_of_order, e.stats().peers_failed), (0, 0, 0));
}

#[test]
fn an_older_incarnation_is_a_replay_and_a_newer_one_a_restart() {
    let (mut e, t) = waiting_on_node_2(cfg(NodeId(1)));
    let key = cfg(NodeId(2)).mac_key();
    // Incarnation 4 (replaced by 5): dropped, no reset, nothing fails.
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 4, 0, Body::Nop));
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 4, 1, Body::PeerFailed(PeerFailed { node: 0, boot: None })));
    assert_eq!(e.stats().stale_boot, 2);
    assert_eq!((e.stats().peers_failed, e.stats().notices_received), (0, 0));
    assert!(e.poll_event().is_none());
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 5, 1, Body::Nop));
    assert_eq!((e.stats().duplicates, e.stats().out_of_order), (0, 0), "the connection kept its place");
    // Incarnation 6: node 2 restarted, so what waited on incarnation 5 fails.
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 6, 0, Body::Nop));
    assert_eq!(e.stats().peers_failed, 1);
    let ev = e.poll_event().expect("the receive naming node 2 fails");
    assert_eq!((ev.op, ev.result), (OpId(1), Err(OpError::PeerUnreachable(NodeId(2)))));
    // And 5 is now the replay.
    e.handle_packet(t, NodeId(2), &packet(&key, 2, 5, 2, Body::Nop));
    assert_eq!(e.stats().stale_boot, 3);
}

#[test]
fn a_datagram_older_than_the_job_is_dropped_even_from_a_peer_not_heard_yet() {
    let mut c = cfg(NodeId(1));
    c.min_peer_boot = incarnation(1_000, 0);
    let t = Instant::from_nanos(1_000);
    let key = c.mac_key();
    let mut e = Engine::new(c, VecMemory::new(), t).unwrap();
    e.open_port(t, P0).unwrap();
    // Had node 3's first packet come from an earlier run, its real packets
    // would later look like a restart and fail whatever waited on it.
    e.handle_packet(t, NodeId(3), &packet(&key, 3, incarnation(999, 77), 0, Body::Nop));
    assert_eq!(e.stats().stale_boot, 1);
    e.handle_packet(t, NodeId(3), &packet(&key, 3, incarnation(1_000, 5), 0, Body::Nop));
    e.handle_packet(t, NodeId(3), &packet(&key, 3, incarnation(1_000, 5), 1, Body::Nop));
    let s = e.stats();
    assert_eq!((s.stale_boot, s.peers_failed, s.duplicates, s.out_of_order), (1, 0, 0, 0));
}

#[test]
fn incarnations_grow_with_the_start_time_whatever_the_randomness() {
    assert!(incarnation(1_000, u32::MAX) < incarnation(1_001, 0));
    assert_eq!(incarnation(1_000, 1 << INCARNATION_RANDOM_BITS), incarnation(1_000, 0), "randomness stays below the time");
    // The time part of today's clock fits with room to spare.
    let now_ms = 1_795_000_000_000u64;
    assert!(incarnation(now_ms, u32::MAX) > incarnation(now_ms - 1, u32::MAX));
}

/// Messages both ways between nodes 0 and 1, checked; returns how many
/// completed on each side.
fn exchange(net: &mut Network, rounds: u64) {
    let (a, b) = (Endpoint { node: NodeId(0), port: P0, gen: 1 }, Endpoint { node: NodeId(1), port: P0, gen: 1 });
    for i in 0..rounds {
        for (from, to) in [(a, b), (b, a)] {
            let r = net.memory(to.node).alloc(600);
            net.command(to.node, P0, Command::Recv { op: OpId(1000 + i), matching: RecvMatch::from(from.node, P0, i), buf: r }).unwrap();
            let payload: Vec<u8> = (0..600).map(|k| (k as u64 * 31 + i) as u8).collect();
            let s = net.memory(from.node).alloc_with(&payload);
            net.command(from.node, P0, Command::Send { op: OpId(i), dest: to, tag: i, buf: s }).unwrap();
            let (mut sent, mut got) = (false, false);
            net.run_until("message", |n| {
                for e in n.take_events(from.node) {
                    assert_eq!(e.result, Ok(Completion::Sent), "{e:?}");
                    sent = true;
                }
                for e in n.take_events(to.node) {
                    assert_eq!(e.result, Ok(Completion::Received { src: from, tag: i, len: 600 }), "{e:?}");
                    got = true;
                }
                sent && got
            })
            .unwrap();
            assert_eq!(net.memory(to.node).bytes(r), &payload[..]);
        }
    }
}

/// A run of the job: 2 engines, key 9, incarnations from `start_ms`.
fn run_of_the_job(start_ms: u64, seed: u64, secret: Option<JobSecret>) -> Network {
    let mut net = Network::new(2, LinkConfig::lossy(0.1, 0.1, 0.0), seed, |n| {
        let mut c = cfg(n);
        c.boot = incarnation(start_ms, 0);
        c.min_peer_boot = incarnation(start_ms, 0);
        if let Some(s) = &secret {
            c.secret = s.clone();
        }
        c
    });
    net.open_port(NodeId(0), P0).unwrap();
    net.open_port(NodeId(1), P0).unwrap();
    net
}

#[test]
fn replaying_every_datagram_of_an_earlier_run_changes_nothing() {
    let mut earlier = run_of_the_job(1_000, 61, None);
    earlier.capture();
    exchange(&mut earlier, 20);
    let captured = earlier.take_captured();
    assert!(captured.len() > 80, "{}", captured.len());

    // The same job key and secret (a user who reuses OUTBOARD_JOB_SECRET),
    // started later. Half the replay arrives before the peers have heard
    // from each other, half in the middle of the traffic.
    let mut later = run_of_the_job(2_000, 62, None);
    let (first, second) = captured.split_at(captured.len() / 2);
    let replay = |net: &mut Network, part: &[(NodeId, NodeId, Vec<u8>)]| {
        for (from, to, bytes) in part {
            let now = net.now();
            net.engine(*to).handle_packet(now, *from, bytes);
        }
    };
    replay(&mut later, first);
    exchange(&mut later, 5);
    replay(&mut later, second);
    exchange(&mut later, 15);
    let s0 = later.engine(NodeId(0)).stats().clone();
    let s1 = later.engine(NodeId(1)).stats().clone();
    assert_eq!(s0.stale_boot + s1.stale_boot, captured.len() as u64, "every replayed datagram dropped as stale: {s0:?} {s1:?}");
    assert_eq!((s0.peers_failed, s1.peers_failed), (0, 0), "no connection reset");
    assert_eq!((s0.unauthenticated + s1.unauthenticated, s0.malformed + s1.malformed), (0, 0));

    // Under a fresh secret (what `outboard run` gives every job), the same
    // replay does not even authenticate.
    let mut fresh = run_of_the_job(2_000, 63, Some(JobSecret::from_bytes([0x5A; 16])));
    replay(&mut fresh, first);
    exchange(&mut fresh, 5);
    replay(&mut fresh, second);
    exchange(&mut fresh, 5);
    let u = fresh.engine(NodeId(0)).stats().unauthenticated + fresh.engine(NodeId(1)).stats().unauthenticated;
    assert_eq!(u, captured.len() as u64);
}
