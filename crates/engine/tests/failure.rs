//! Peers that die: operations that need them fail within the configured
//! timeout instead of hanging; a restarted peer is a new incarnation.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

const P0: PortId = PortId(0);

fn cfg(n: NodeId) -> EngineConfig {
    let mut c = EngineConfig::new(n, 9, 0);
    c.peer_timeout = Duration::from_millis(50);
    c.rto_max = Duration::from_millis(10);
    c
}

#[test]
fn a_killed_peer_makes_pending_operations_fail_within_the_timeout() {
    let mut net = Network::new(3, LinkConfig::lossy(0.1, 0.0, 0.0), 31, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let c = net.open_port(NodeId(2), P0).unwrap();
    // A long message under way, a receive that only b can satisfy, a read.
    let big = net.memory(a.node).alloc(2 << 20);
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: big }).unwrap();
    let r = net.memory(a.node).alloc(10);
    net.command(a.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::from(b.node, P0, 0), buf: r }).unwrap();
    let r2 = net.memory(a.node).alloc(10);
    net.command(a.node, P0, Command::Recv { op: OpId(3), matching: RecvMatch::any(), buf: r2 }).unwrap();
    net.run_for(Duration::from_micros(200)).unwrap();
    let killed_at = net.now();
    net.kill(b.node);
    let mut failed = Vec::new();
    net.run_until("errors", |n| {
        for e in n.take_events(a.node) {
            failed.push((e.op, e.result));
        }
        failed.len() >= 3
    })
    .unwrap();
    let elapsed = net.now() - killed_at;
    assert!(elapsed <= Duration::from_millis(50 + 10), "took {elapsed:?}");
    failed.sort_by_key(|(op, _)| *op);
    // The receive from any source is withdrawn too: b may have been the
    // sender it waited for (ULFM's "pending" failure).
    assert_eq!(
        failed,
        vec![
            (OpId(1), Err(OpError::PeerUnreachable(b.node))),
            (OpId(2), Err(OpError::PeerUnreachable(b.node))),
            (OpId(3), Err(OpError::ProcFailedPending(b.node)))
        ]
    );
    // Posted again after the death, it waits as usual.
    net.command(a.node, P0, Command::Recv { op: OpId(3), matching: RecvMatch::any(), buf: r2 }).unwrap();
    // New work for the dead peer is refused at once; other peers still work.
    let s = net.memory(a.node).alloc(1);
    assert_eq!(
        net.command(a.node, P0, Command::Send { op: OpId(4), dest: b, tag: 0, buf: s }),
        Err(CommandError::PeerUnreachable(b.node))
    );
    let s2 = net.memory(c.node).alloc_with(b"hi");
    net.command(c.node, P0, Command::Send { op: OpId(5), dest: a, tag: 1, buf: s2 }).unwrap();
    net.run_until("c's message", |n| n.take_events(a.node).iter().any(|e| e.op == OpId(3) && e.result.is_ok())).unwrap();
}

#[test]
fn a_restarted_peer_is_a_new_incarnation_with_a_fresh_connection() {
    let mut net = Network::new(2, LinkConfig::default(), 32, cfg);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let s = net.memory(a.node).alloc_with(b"one");
    let r = net.memory(b.node).alloc(3);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: s }).unwrap();
    net.run_until_quiet().unwrap();
    net.kill(b.node);
    net.restart(b.node, cfg(b.node));
    let b2 = net.open_port(b.node, P0).unwrap();
    // The new engine starts counting generations afresh; the boot number
    // tells the incarnations apart at the connection level.
    let r = net.memory(b.node).alloc(3);
    net.command(b.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::any(), buf: r }).unwrap();
    let s = net.memory(b.node).alloc_with(b"two");
    net.command(b.node, P0, Command::Send { op: OpId(3), dest: a, tag: 0, buf: s }).unwrap();
    let ra = net.memory(a.node).alloc(3);
    net.command(a.node, P0, Command::Recv { op: OpId(4), matching: RecvMatch::any(), buf: ra }).unwrap();
    net.run_until_quiet().unwrap();
    let ev = net.take_events(a.node);
    assert!(ev.iter().any(|e| e.op == OpId(4) && e.result == Ok(Completion::Received { src: b2, tag: 0, len: 3 })), "{ev:?}");
    assert_eq!(net.memory(a.node).bytes(ra), b"two");
}
