//! Tagged messaging between engines over the test network: matching,
//! unexpected messages, truncation, tokens, fragmentation.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

const P0: PortId = PortId(0);

fn pair(link: LinkConfig, seed: u64) -> (Network, Endpoint, Endpoint) {
    let mut net = Network::with_defaults(2, link, seed);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    (net, a, b)
}

fn wait_event(net: &mut Network, node: NodeId, op: OpId) -> Event {
    let mut found = None;
    net.run_until("an event", |n| {
        let evs = n.take_events(node);
        for e in evs {
            assert!(found.is_none() || e.op != op, "two events for one op");
            if e.op == op {
                found = Some(e);
            }
        }
        found.is_some()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    found.unwrap()
}

#[test]
fn a_message_posted_before_arrival_lands_in_the_receive_buffer() {
    let (mut net, a, b) = pair(LinkConfig::default(), 1);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    let src = net.memory(a.node).alloc_with(&data);
    let dst = net.memory(b.node).alloc(30_000);
    net.command(b.node, P0, Command::Recv { op: OpId(10), matching: RecvMatch::tag(5), buf: dst }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 5, buf: src }).unwrap();
    let e = wait_event(&mut net, b.node, OpId(10));
    assert_eq!(e.result, Ok(Completion::Received { src: a, tag: 5, len: 20_000 }));
    assert_eq!(&net.memory(b.node).bytes(dst)[..20_000], &data[..]);
    let s = wait_event(&mut net, a.node, OpId(1));
    assert_eq!(s.result, Ok(Completion::Sent));
}

#[test]
fn unexpected_messages_wait_and_match_in_arrival_order() {
    let (mut net, a, b) = pair(LinkConfig::default(), 2);
    for i in 0..5u8 {
        let src = net.memory(a.node).alloc_with(&[i; 100]);
        net.command(a.node, P0, Command::Send { op: OpId(u64::from(i)), dest: b, tag: 9, buf: src }).unwrap();
    }
    net.run_until_quiet().unwrap();
    assert_eq!(net.engine(b.node).stats().unexpected, 5);
    assert_eq!(net.engine(b.node).unexpected_bytes(), 500);
    for i in 0..5u8 {
        let dst = net.memory(b.node).alloc(100);
        net.command(b.node, P0, Command::Recv { op: OpId(100 + u64::from(i)), matching: RecvMatch::any(), buf: dst })
            .unwrap();
        let e = wait_event(&mut net, b.node, OpId(100 + u64::from(i)));
        assert!(e.result.is_ok());
        assert_eq!(net.memory(b.node).bytes(dst), &[i; 100]);
    }
    assert_eq!(net.engine(b.node).unexpected_bytes(), 0);
}

#[test]
fn tags_and_sources_select_among_messages() {
    let mut net = Network::with_defaults(3, LinkConfig::default(), 3);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let c = net.open_port(NodeId(2), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let r1 = net.memory(b.node).alloc(8);
    let r2 = net.memory(b.node).alloc(8);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::from(c.node, P0, 7), buf: r1 }).unwrap();
    net.command(b.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::tag(7), buf: r2 }).unwrap();
    let sa = net.memory(a.node).alloc_with(b"from-a..");
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 7, buf: sa }).unwrap();
    let e = wait_event(&mut net, b.node, OpId(2));
    assert_eq!(e.result, Ok(Completion::Received { src: a, tag: 7, len: 8 }));
    let sc = net.memory(c.node).alloc_with(b"from-c..");
    net.command(c.node, P0, Command::Send { op: OpId(1), dest: b, tag: 7, buf: sc }).unwrap();
    let e = wait_event(&mut net, b.node, OpId(1));
    assert_eq!(e.result, Ok(Completion::Received { src: c, tag: 7, len: 8 }));
    assert_eq!(net.memory(b.node).bytes(r1), b"from-c..");
    assert_eq!(net.memory(b.node).bytes(r2), b"from-a..");
}

#[test]
fn a_long_message_is_truncated_to_the_buffer_with_an_error() {
    let (mut net, a, b) = pair(LinkConfig::default(), 4);
    let src = net.memory(a.node).alloc_with(&[3; 1000]);
    let dst = net.memory(b.node).alloc(10);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: dst }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: src }).unwrap();
    let e = wait_event(&mut net, b.node, OpId(1));
    assert_eq!(e.result, Err(OpError::Truncated { src: a, tag: 0, len: 1000 }));
    assert_eq!(net.memory(b.node).bytes(dst), &[3; 10]);
}

#[test]
fn empty_messages_are_delivered() {
    let (mut net, a, b) = pair(LinkConfig::lossy(0.3, 0.1, 0.0), 5);
    let src = net.memory(a.node).alloc(0);
    let dst = net.memory(b.node).alloc(4);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: dst }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 1, buf: src }).unwrap();
    let e = wait_event(&mut net, b.node, OpId(1));
    assert_eq!(e.result, Ok(Completion::Received { src: a, tag: 1, len: 0 }));
}

#[test]
fn tokens_bound_outstanding_work_and_come_back_on_completion() {
    let mut net = Network::new(2, LinkConfig::default(), 6, |n| {
        let mut c = EngineConfig::new(n, 1, 0);
        c.send_tokens = 2;
        c.recv_tokens = 1;
        c
    });
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let s = net.memory(a.node).alloc(10);
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: s }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(2), dest: b, tag: 0, buf: s }).unwrap();
    assert_eq!(net.command(a.node, P0, Command::Send { op: OpId(3), dest: b, tag: 0, buf: s }), Err(CommandError::NoSendToken));
    let r = net.memory(b.node).alloc(10);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    assert_eq!(net.command(b.node, P0, Command::Recv { op: OpId(2), matching: RecvMatch::any(), buf: r }), Err(CommandError::NoRecvToken));
    wait_event(&mut net, a.node, OpId(1));
    net.command(a.node, P0, Command::Send { op: OpId(3), dest: b, tag: 0, buf: s }).unwrap();
    assert_eq!(
        net.command(a.node, PortId(1), Command::Send { op: OpId(4), dest: b, tag: 0, buf: s }),
        Err(CommandError::PortNotOpen(PortId(1)))
    );
}

#[test]
fn a_receive_can_be_cancelled_until_it_matches() {
    let (mut net, _a, b) = pair(LinkConfig::default(), 7);
    let r = net.memory(b.node).alloc(10);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    net.command(b.node, P0, Command::Cancel { op: OpId(2), target: OpId(1) }).unwrap();
    let evs = net.take_events(b.node);
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].result, Err(OpError::Cancelled));
    assert_eq!(evs[1].result, Ok(Completion::Cancelled));
    net.command(b.node, P0, Command::Cancel { op: OpId(3), target: OpId(1) }).unwrap();
    assert_eq!(net.take_events(b.node)[0].result, Err(OpError::NotCancellable));
}

#[test]
fn messages_to_a_port_on_the_same_engine_are_delivered() {
    let mut net = Network::with_defaults(1, LinkConfig::default(), 8);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(0), PortId(1)).unwrap();
    let s = net.memory(a.node).alloc_with(b"loop");
    let r = net.memory(a.node).alloc(4);
    net.command(a.node, PortId(1), Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    net.command(a.node, P0, Command::Send { op: OpId(2), dest: b, tag: 0, buf: s }).unwrap();
    let e = wait_event(&mut net, a.node, OpId(1));
    assert_eq!(e.result, Ok(Completion::Received { src: a, tag: 0, len: 4 }));
    assert_eq!(net.memory(a.node).bytes(r), b"loop");
}

#[test]
fn a_send_whose_buffer_faults_fails_without_holding_back_the_next_message() {
    let (mut net, a, b) = pair(LinkConfig::default(), 9);
    let bad = HostBuf { addr: 0xdead_0000, len: 100 };
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 1, buf: bad }).unwrap();
    let good = net.memory(a.node).alloc_with(b"next");
    net.command(a.node, P0, Command::Send { op: OpId(2), dest: b, tag: 2, buf: good }).unwrap();
    let r = net.memory(b.node).alloc(8);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    assert_eq!(wait_event(&mut net, b.node, OpId(1)).result, Ok(Completion::Received { src: a, tag: 2, len: 4 }));
    net.run_until_quiet().unwrap();
    let mut evs: Vec<_> = net.take_events(a.node).into_iter().map(|e| (e.op, e.result)).collect();
    evs.sort_by_key(|e| e.0);
    assert_eq!(evs, vec![(OpId(1), Err(OpError::DmaFault)), (OpId(2), Ok(Completion::Sent))]);
}
