//! Hostile datagrams: garbage, truncated headers, other jobs' packets,
//! forged sources and replays are counted and dropped while traffic
//! continues.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use outboard_wire::{self as wire, Body, Header, Kind, Packet, Seq};
use proptest::prelude::*;

const P0: PortId = PortId(0);

/// A `Nop` authenticated under job `job_key` (the test network's engines
/// use the stand-in secret of `EngineConfig::new`, job key 1).
fn forged(job_key: u64, src: u32, dst: u32, seq: u32) -> Vec<u8> {
    let h = Header { kind: Kind::Nop, flags: 0, src_node: src, dst_node: dst, boot: 1, seq: Seq(seq), ack: Seq(0), horizon: Seq(0) };
    let p = Packet { header: h, body: Body::Nop };
    let mut b = vec![0; p.buffer_len()];
    p.emit(&EngineConfig::new(NodeId(src), job_key, 0).mac_key(), &mut b).unwrap();
    b
}

#[test]
fn garbage_between_real_traffic_is_counted_and_dropped() {
    let mut net = Network::with_defaults(2, LinkConfig::default(), 41);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let mut received = 0;
    for round in 0..50u64 {
        let r = net.memory(b.node).alloc(100);
        net.command(b.node, P0, Command::Recv { op: OpId(round), matching: RecvMatch::any(), buf: r }).unwrap();
        let s = net.memory(a.node).alloc_with(&[round as u8; 100]);
        net.command(a.node, P0, Command::Send { op: OpId(round), dest: b, tag: round, buf: s }).unwrap();
        let now = net.now();
        let e = net.engine(b.node);
        e.handle_packet(now, a.node, &[0xFF; 3]);
        e.handle_packet(now, a.node, &forged(1, 0, 1, 0)[..wire::HEADER_LEN - 1]);
        e.handle_packet(now, a.node, &forged(0xBAD, 0, 1, 0));
        e.handle_packet(now, a.node, &forged(1, 0, 7, 0));
        e.handle_packet(now, NodeId(5), &forged(1, 0, 1, 0));
        net.run_until_quiet().unwrap();
        for ev in net.take_events(b.node) {
            assert_eq!(ev.result, Ok(Completion::Received { src: a, tag: round, len: 100 }));
            received += 1;
        }
    }
    assert_eq!(received, 50);
    let s = net.engine(b.node).stats().clone();
    assert_eq!(s.malformed, 100);
    assert_eq!(s.unauthenticated, 50);
    assert_eq!(s.misaddressed, 100);
}

/// A packet from node 0 to node 1 of kind `junk[0] % 16` (unknown kinds
/// included) whose body is the rest of `junk`, authenticated under the
/// test network's key: sequence number half the number space away from
/// any in use, acknowledgement and horizon 0 (before anything sent).
fn authentic_junk(boot: u64, junk: &[u8]) -> Vec<u8> {
    let kind = junk.first().map_or(0, |k| k % 16);
    let body = junk.get(1..).unwrap_or(&[]);
    let mut p = forged(1, 0, 1, 0x8000_0000);
    p.truncate(wire::HEADER_LEN);
    p[3] = kind;
    p[6..8].copy_from_slice(&(body.len() as u16).to_be_bytes());
    p[16..24].copy_from_slice(&boot.to_be_bytes());
    p.extend_from_slice(body);
    wire::seal(&mut p, &EngineConfig::new(NodeId(0), 1, 0).mac_key());
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever arrives, the engine neither panics nor loses the real
    /// traffic around it.
    #[test]
    fn random_datagrams_never_disturb_delivery(junk in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..40), seed in 0u64..1000) {
        let mut net = Network::with_defaults(2, LinkConfig::lossy(0.1, 0.1, 0.0), seed);
        let a = net.open_port(NodeId(0), P0).unwrap();
        let b = net.open_port(NodeId(1), P0).unwrap();
        let r = net.memory(b.node).alloc(64);
        net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
        let s = net.memory(a.node).alloc_with(&[7; 64]);
        net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: s }).unwrap();
        // Authentic packets (a job member's key, the sender's real
        // incarnation) of every kind, known or not, with arbitrary
        // bodies: past the length check and the MAC, into the body
        // parsers and the engine. Their sequence numbers lie far outside
        // the window and they acknowledge nothing, so a correct engine
        // takes none of them for the real traffic.
        let boot = net.engine(a.node).config().boot;
        let before = net.engine(b.node).stats().clone();
        for j in &junk {
            let now = net.now();
            let p = authentic_junk(boot, j);
            net.engine(b.node).handle_packet(now, a.node, &p);
        }
        let after = net.engine(b.node).stats().clone();
        prop_assert_eq!(after.unauthenticated, before.unauthenticated, "every forged packet passed the MAC");
        for j in &junk {
            let now = net.now();
            net.engine(b.node).handle_packet(now, a.node, j);
        }
        net.run_until_quiet().unwrap();
        let evs = net.take_events(b.node);
        prop_assert_eq!(evs.len(), 1);
        prop_assert_eq!(evs[0].result, Ok(Completion::Received { src: a, tag: 0, len: 64 }));
        prop_assert_eq!(net.memory(b.node).bytes(r), &[7; 64]);
    }
}
