//! Multi-send: one command, one payload read from the host, a reliable
//! copy to each destination.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

const P0: PortId = PortId(0);

#[test]
fn every_destination_gets_the_message_once_and_the_payload_is_read_once() {
    for seed in 0..4 {
        let n = 16;
        let mut net = Network::with_defaults(n, LinkConfig::lossy(0.2, 0.1, 0.01), seed);
        let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
        let data: Vec<u8> = (0..40_000u32).map(|i| (i * 31 + seed as u32) as u8).collect();
        let mut recvs = Vec::new();
        for ep in &eps[1..] {
            let b = net.memory(ep.node).alloc(50_000);
            net.command(ep.node, P0, Command::Recv { op: OpId(7), matching: RecvMatch::tag(3), buf: b }).unwrap();
            recvs.push(b);
        }
        let src = net.memory(NodeId(0)).alloc_with(&data);
        let list = MemberList::from_endpoints(eps[1..].iter().copied()).encode();
        let dests = net.memory(NodeId(0)).alloc_with(&list);
        let _ = net.engine(NodeId(0)).take_work();
        net.command(NodeId(0), P0, Command::MultiSend { op: OpId(1), dests, tag: 3, buf: src }).unwrap();
        let work = net.engine(NodeId(0)).take_work();
        assert_eq!(work.dma_read, (data.len() + list.len()) as u64, "payload read from the host once");
        let mut sender_events = Vec::new();
        let mut got = vec![0; n as usize];
        net.run_until("multi-send", |net| {
            sender_events.extend(net.take_events(NodeId(0)));
            for i in 1..n {
                for e in net.take_events(NodeId(i)) {
                    assert_eq!(e.result, Ok(Completion::Received { src: eps[0], tag: 3, len: data.len() as u32 }));
                    got[i as usize] += 1;
                }
            }
            !sender_events.is_empty() && got[1..].iter().all(|&g| g == 1)
        })
        .unwrap();
        net.run_until_quiet().unwrap();
        assert_eq!(sender_events.len(), 1);
        assert_eq!(sender_events[0].result, Ok(Completion::Sent));
        assert!(got[1..].iter().all(|&g| g == 1), "exactly once: {got:?}");
        for (i, b) in recvs.iter().enumerate() {
            assert_eq!(&net.memory(NodeId(i as u32 + 1)).bytes(*b)[..data.len()], &data[..]);
        }
        // The multi-send returned its single token: another one fits.
        assert!(net.engine(NodeId(0)).is_quiet());
    }
}

#[test]
fn a_gone_destination_fails_the_multi_send_but_not_the_others() {
    let n = 4;
    let mut net = Network::with_defaults(n, LinkConfig::default(), 11);
    let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    net.close_port(NodeId(2), P0);
    let _new = net.open_port(NodeId(2), P0).unwrap();
    for ep in [eps[1], eps[3]] {
        let b = net.memory(ep.node).alloc(10);
        net.command(ep.node, P0, Command::Recv { op: OpId(7), matching: RecvMatch::any(), buf: b }).unwrap();
    }
    let src = net.memory(NodeId(0)).alloc_with(b"hello");
    let dests = net.memory(NodeId(0)).alloc_with(&MemberList::from_endpoints(eps[1..].iter().copied()).encode());
    net.command(NodeId(0), P0, Command::MultiSend { op: OpId(1), dests, tag: 0, buf: src }).unwrap();
    net.run_until_quiet().unwrap();
    let ev = net.take_events(NodeId(0));
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].result, Err(OpError::PortGone));
    for i in [1, 3] {
        let ev = net.take_events(NodeId(i));
        assert!(matches!(ev[..], [Event { result: Ok(Completion::Received { len: 5, .. }), .. }]), "{ev:?}");
    }
}

#[test]
fn a_malformed_destination_list_is_an_error() {
    let mut net = Network::with_defaults(2, LinkConfig::default(), 12);
    net.open_port(NodeId(0), P0).unwrap();
    let src = net.memory(NodeId(0)).alloc_with(b"x");
    let dests = net.memory(NodeId(0)).alloc_with(&[1, 0, 0, 0, 9]);
    net.command(NodeId(0), P0, Command::MultiSend { op: OpId(1), dests, tag: 0, buf: src }).unwrap();
    let ev = net.take_events(NodeId(0));
    assert!(matches!(ev[0].result, Err(OpError::Collective(CollError::Malformed(_)))), "{ev:?}");
}

#[test]
fn each_copy_fragment_reports_its_payload_and_how_far_it_reaches() {
    let t0 = Instant::ZERO;
    let mut e = Engine::new(EngineConfig::new(NodeId(0), 0xC0FFEE, 1000), VecMemory::new(), t0).unwrap();
    let me = e.open_port(t0, P0).unwrap();
    let dests: Vec<Endpoint> = (1..=2).map(|n| Endpoint { node: NodeId(n), ..me }).collect();
    let data = vec![7u8; 3 * e.config().mtu];
    let src = e.dma_mut().alloc_with(&data);
    let list = e.dma_mut().alloc_with(&MemberList::from_endpoints(dests.iter().copied()).encode());
    e.handle_command(t0, P0, Command::MultiSend { op: OpId(1), dests: list, tag: 3, buf: src }).unwrap();
    let _ = e.take_work();
    let mut buf = vec![0u8; e.config().mtu];
    let mut reached = [0u32; 2];
    while let Some(tx) = e.poll_transmit(t0, &mut buf) {
        let Some(copy) = e.take_work().multi_copy else { continue };
        assert_eq!((copy.port, copy.buf), (P0, src));
        let r = &mut reached[tx.dst.0 as usize - 1];
        assert!(copy.end > *r, "fragments go out in order");
        *r = copy.end;
    }
    assert_eq!(reached, [data.len() as u32; 2], "every copy's last fragment reaches the end");
    // A plain send's fragments are read from the host: not reported.
    let one = e.dma_mut().alloc_with(&[1, 2, 3]);
    e.handle_command(t0, P0, Command::Send { op: OpId(2), dest: dests[0], tag: 3, buf: one }).unwrap();
    while e.poll_transmit(t0, &mut buf).is_some() {
        assert_eq!(e.take_work().multi_copy, None);
    }
}
