//! Registered memory, directed sends (RDMA write) and RDMA read: keys and
//! bounds are checked before any byte moves.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

const P0: PortId = PortId(0);

fn setup(link: LinkConfig) -> (Network, Endpoint, Endpoint, HostBuf, u64) {
    let mut net = Network::with_defaults(2, link, 11);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let region = net.memory(b.node).alloc_with(&[0xEE; 4096]);
    net.command(b.node, P0, Command::Register { op: OpId(1), buf: region }).unwrap();
    let Some(Event { result: Ok(Completion::Registered { key }), .. }) = net.next_event(b.node) else { panic!() };
    (net, a, b, region, key)
}

fn result_of(net: &mut Network, node: NodeId, op: OpId) -> Result<Completion, OpError> {
    let mut r = None;
    net.run_until("completion", |n| {
        for e in n.take_events(node) {
            if e.op == op {
                r = Some(e.result);
            }
        }
        r.is_some()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    r.unwrap()
}

#[test]
fn rdma_write_and_read_move_bytes_under_loss() {
    let (mut net, a, b, region, key) = setup(LinkConfig::lossy(0.2, 0.05, 0.01));
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let src = net.memory(a.node).alloc_with(&data);
    net.command(a.node, P0, Command::RdmaWrite { op: OpId(1), dest: b, key, offset: 1000, buf: src }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Ok(Completion::Written));
    let mem = net.memory(b.node).bytes(region).to_vec();
    assert_eq!(&mem[1000..4000], &data[..]);
    assert!(mem[..1000].iter().chain(&mem[4000..]).all(|&x| x == 0xEE));

    let dst = net.memory(a.node).alloc(4096);
    net.command(a.node, P0, Command::RdmaRead { op: OpId(2), dest: b, key, offset: 0, buf: dst }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(2)), Ok(Completion::Read));
    assert_eq!(net.memory(a.node).bytes(dst), &mem[..]);
}

#[test]
fn bad_keys_and_out_of_bounds_accesses_are_refused_and_memory_is_untouched() {
    let (mut net, a, b, region, key) = setup(LinkConfig::default());
    let src = net.memory(a.node).alloc_with(&[1; 100]);
    let cases = [
        (key ^ 1, 0, OpError::BadKey),
        (key, 4000, OpError::OutOfBounds),
        (key, u64::MAX - 10, OpError::OutOfBounds),
    ];
    for (i, (k, off, err)) in cases.into_iter().enumerate() {
        let op = OpId(10 + i as u64);
        net.command(a.node, P0, Command::RdmaWrite { op, dest: b, key: k, offset: off, buf: src }).unwrap();
        assert_eq!(result_of(&mut net, a.node, op), Err(err));
        let op = OpId(20 + i as u64);
        net.command(a.node, P0, Command::RdmaRead { op, dest: b, key: k, offset: off, buf: src }).unwrap();
        assert_eq!(result_of(&mut net, a.node, op), Err(err));
    }
    assert!(net.memory(b.node).bytes(region).iter().all(|&x| x == 0xEE));
    assert_eq!(net.engine(b.node).stats().access_violations, 6);
    assert!(net.memory(a.node).bytes(src).iter().all(|&x| x == 1), "failed reads leave the local buffer alone");
}

#[test]
fn a_deregistered_region_is_no_longer_reachable() {
    let (mut net, a, b, region, key) = setup(LinkConfig::default());
    net.command(b.node, P0, Command::Deregister { op: OpId(2), key }).unwrap();
    assert_eq!(net.next_event(b.node).unwrap().result, Ok(Completion::Deregistered));
    let src = net.memory(a.node).alloc_with(&[1; 10]);
    net.command(a.node, P0, Command::RdmaWrite { op: OpId(1), dest: b, key, offset: 0, buf: src }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Err(OpError::BadKey));
    assert!(net.memory(b.node).bytes(region).iter().all(|&x| x == 0xEE));
}

#[test]
fn packets_with_another_jobs_key_are_dropped_and_the_operation_times_out() {
    let mut net = Network::new(2, LinkConfig::default(), 12, |n| {
        let mut c = EngineConfig::new(n, if n.0 == 0 { 111 } else { 222 }, 0);
        c.peer_timeout = Duration::from_millis(20);
        c
    });
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let region = net.memory(b.node).alloc_with(&[7; 64]);
    net.command(b.node, P0, Command::Register { op: OpId(1), buf: region }).unwrap();
    let Some(Event { result: Ok(Completion::Registered { key }), .. }) = net.next_event(b.node) else { panic!() };
    let src = net.memory(a.node).alloc_with(&[1; 64]);
    net.command(a.node, P0, Command::RdmaWrite { op: OpId(1), dest: b, key, offset: 0, buf: src }).unwrap();
    assert_eq!(result_of(&mut net, a.node, OpId(1)), Err(OpError::PeerUnreachable(b.node)));
    assert!(net.engine(b.node).stats().unauthenticated > 0);
    assert!(net.memory(b.node).bytes(region).iter().all(|&x| x == 7));
}
