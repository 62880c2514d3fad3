//! A member that closes its port right after its part of a host-based
//! broadcast: its child's next broadcast, whose receive names that port,
//! fails with `OpError::SourceClosed` instead of waiting forever (before
//! port closure was announced, it hung).

mod common;

use common::Cluster;
use outboard_engine::{EngineConfig, OpError, PortId};
use outboard_host::{BcastMode, GroupId, HostError, NodeId, TreeShape};
use outboard_testnet::LinkConfig;

#[test]
fn a_host_based_broadcast_child_fails_when_its_parent_closed_its_port() {
    let n = 4u32;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.1, 0.0), 5, |node| EngineConfig::new(node, 1, 0));
    let eps = c.endpoints();
    let mut groups: Vec<_> =
        (0..n as usize).map(|r| c.ports[r].new_group(GroupId(1), r as u32, eps.clone()).unwrap()).collect();
    // Binomial tree from 0: 0 -> 1, 0 -> 2, 2 -> 3.
    let data: Vec<u8> = (0..2000u32).map(|i| (i * 7) as u8).collect();
    let run = |c: &mut Cluster, groups: &mut Vec<_>, ranks: &[usize]| {
        let mut reqs: Vec<_> = ranks
            .iter()
            .map(|&r| {
                let mine = if r == 0 { data.clone() } else { vec![0; data.len()] };
                Some(c.ports[r].start_bcast(&mut groups[r], BcastMode::HostBased, TreeShape::Binomial, 0, &mine).unwrap())
            })
            .collect();
        let mut out = vec![None; ranks.len()];
        for _ in 0..2_000_000 {
            for (i, &r) in ranks.iter().enumerate() {
                if let Some(q) = reqs[i].as_mut() {
                    if let Some(res) = c.ports[r].coll_test(q) {
                        out[i] = Some(res);
                        reqs[i] = None;
                    }
                }
            }
            if out.iter().all(Option::is_some) || !c.net.lock().unwrap().step() {
                break;
            }
        }
        out
    };
    let first = run(&mut c, &mut groups, &[0, 1, 2, 3]);
    for (r, res) in first.iter().enumerate() {
        assert_eq!(res.as_ref().map(|x| x.as_ref().ok()), Some(Some(&data)), "rank {r}");
    }
    // Rank 2 did its part (it forwarded to 3) and leaves: its port closes.
    c.net.lock().unwrap().close_port(NodeId(2), PortId(0));
    let second = run(&mut c, &mut groups, &[0, 1, 3]);
    let [root, one, three] = &second[..] else { unreachable!() };
    assert!(
        matches!(three, Some(Err(HostError::Op(OpError::SourceClosed(ep)))) if *ep == eps[2]),
        "rank 3 fails naming the closed port: {three:?}"
    );
    assert!(matches!(one, Some(Ok(got)) if *got == data), "rank 1 unaffected: {one:?}");
    // The root ends too (what it reports about its send to the closed
    // port is not this test's subject).
    assert!(root.is_some());
}

/// Rendezvous (large messages by RDMA read) waits on both sides through
/// receives naming the peer: a receive waiting for an announcement, and the
/// sender's receive of the finish. Both fail when the other side's port
/// closes instead of hanging.
#[test]
fn rendezvous_receives_and_sends_fail_when_the_other_port_closes() {
    use outboard_host::testnet_io::NetIo;
    use outboard_host::{Port, PortIo, RecvMatch, RendezvousConfig};
    use std::sync::{Arc, Mutex};
    let net = Arc::new(Mutex::new(outboard_testnet::Network::new(3, LinkConfig::lossy(0.1, 0.1, 0.0), 9, |node| {
        EngineConfig::new(node, 1, 0)
    })));
    let open = |node: u32| {
        let mut p = Port::new(NetIo::open(&net, NodeId(node)).unwrap());
        p.set_rendezvous(RendezvousConfig { threshold: Some(256), ..Default::default() });
        p
    };
    let (a, mut b, mut c) = (open(0), open(1), open(2));
    let (ea, eb) = (a.endpoint(), b.endpoint());
    // b waits for a rendezvous message from a; a leaves without sending.
    let rbuf = b.buffer(50_000).unwrap();
    let r = b.start_recv(RecvMatch::from(ea.node, ea.port, 5), rbuf).unwrap();
    net.lock().unwrap().close_port(ea.node, PortId(0));
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::SourceClosed(ea))));
    // c announces a large message to b; b leaves without receiving it: c's
    // wait for b's finish ends.
    let sbuf = c.buffer_from(&vec![7u8; 50_000]).unwrap();
    let s = c.start_send(eb, 6, sbuf).unwrap();
    for _ in 0..200 {
        c.io().idle();
    }
    net.lock().unwrap().close_port(eb.node, PortId(0));
    assert_eq!(c.wait(s), Err(HostError::Op(OpError::SourceClosed(eb))));
}
