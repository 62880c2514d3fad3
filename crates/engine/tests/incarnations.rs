//! Closed ports and incarnations (dissertation 3.2.2): messages for a port
//! that is not open yet are refused and retried; nothing addressed to one
//! incarnation ever reaches another.

use std::collections::{BTreeMap, BTreeSet};

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const P0: PortId = PortId(0);

#[test]
fn messages_sent_before_the_port_opens_are_retried_and_arrive_in_order() {
    let mut net = Network::with_defaults(2, LinkConfig::lossy(0.2, 0.1, 0.0), 21);
    let a = net.open_port(NodeId(0), P0).unwrap();
    // Node 1's port 0 will be its first incarnation.
    let b = Endpoint { node: NodeId(1), port: P0, gen: 1 };
    for i in 0..10u8 {
        let s = net.memory(a.node).alloc_with(&[i; 300]);
        net.command(a.node, P0, Command::Send { op: OpId(u64::from(i)), dest: b, tag: u64::from(i), buf: s }).unwrap();
    }
    net.run_for(Duration::from_millis(5)).unwrap();
    assert!(net.engine(b.node).stats().rejected_not_ready >= 1);
    assert!(net.take_events(a.node).is_empty(), "nothing completes while the port is closed");
    assert_eq!(net.open_port(b.node, P0).unwrap(), b);
    let mut got = Vec::new();
    for i in 0..10u64 {
        let r = net.memory(b.node).alloc(300);
        net.command(b.node, P0, Command::Recv { op: OpId(100 + i), matching: RecvMatch::any(), buf: r }).unwrap();
    }
    net.run_until("10 receives", |n| {
        for e in n.take_events(b.node) {
            let Ok(Completion::Received { tag, .. }) = e.result else { panic!("{e:?}") };
            got.push(tag);
        }
        got.len() == 10
    })
    .unwrap();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    let mut sent = 0;
    net.run_until("10 sends", |n| {
        sent += n.take_events(a.node).iter().filter(|e| e.result == Ok(Completion::Sent)).count();
        sent == 10
    })
    .unwrap();
}

#[test]
fn a_message_for_an_old_incarnation_fails_with_port_gone_and_is_not_delivered() {
    let mut net = Network::with_defaults(2, LinkConfig::default(), 22);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let old = net.open_port(NodeId(1), P0).unwrap();
    net.close_port(old.node, P0);
    let new = net.open_port(NodeId(1), P0).unwrap();
    assert_eq!(new.gen, old.gen + 1);
    let r = net.memory(new.node).alloc(10);
    net.command(new.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    let s = net.memory(a.node).alloc_with(&[5; 10]);
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: old, tag: 0, buf: s }).unwrap();
    net.run_until_quiet().unwrap();
    let evs = net.take_events(a.node);
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].result, Err(OpError::PortGone));
    assert!(net.take_events(new.node).is_empty());
    assert_eq!(net.memory(new.node).bytes(r), &[0; 10]);
}

#[test]
fn a_send_refused_forever_fails_after_the_retry_timeout() {
    let mut net = Network::new(2, LinkConfig::default(), 23, |n| {
        let mut c = EngineConfig::new(n, 1, 0);
        c.retry_timeout = Duration::from_millis(3);
        c
    });
    let a = net.open_port(NodeId(0), P0).unwrap();
    let s = net.memory(a.node).alloc(1);
    let b = Endpoint { node: NodeId(1), port: P0, gen: 1 };
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: s }).unwrap();
    net.run_until_quiet().unwrap();
    assert_eq!(net.take_events(a.node)[0].result, Err(OpError::NotReadyTimeout));
    assert!(net.now().as_nanos() >= 3_000_000);
}

#[test]
fn a_parked_send_can_be_cancelled() {
    let mut net = Network::with_defaults(2, LinkConfig::default(), 24);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let s = net.memory(a.node).alloc(1);
    let b = Endpoint { node: NodeId(1), port: P0, gen: 1 };
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 0, buf: s }).unwrap();
    net.run_for(Duration::from_micros(100)).unwrap();
    net.command(a.node, P0, Command::Cancel { op: OpId(2), target: OpId(1) }).unwrap();
    let evs = net.take_events(a.node);
    assert_eq!(evs[0].result, Err(OpError::Cancelled));
    assert_eq!(evs[1].result, Ok(Completion::Cancelled));
    net.run_until_quiet().unwrap();
}

/// Ports close and reopen at random while messages fly: every delivered
/// message was addressed to the incarnation that received it, none is
/// delivered twice, each stream stays in order, and messages reported sent
/// to an incarnation that stayed open to the end all arrive.
#[test]
fn ports_closed_and_reopened_mid_run_never_receive_an_old_incarnations_message() {
    const N: u32 = 6;
    let seed = 25;
    let mut net = Network::new(N, LinkConfig::lossy(0.3, 0.1, 0.01), seed, |n| {
        let mut c = EngineConfig::new(n, 1, 0);
        c.rto_initial = Duration::from_micros(100);
        c.rto_max = Duration::from_millis(2);
        c.peer_timeout = Duration::from_secs(10);
        c
    });
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut directory: Vec<Endpoint> = (0..N).map(|n| net.open_port(NodeId(n), P0).unwrap()).collect();
    // (src, dst, dst_gen) -> next seq; payload carries src, dst gen, seq.
    let mut next_seq: BTreeMap<(u32, u32, u32), u64> = BTreeMap::new();
    let mut last_seen: BTreeMap<(u32, u32, u32, u32), u64> = BTreeMap::new();
    let mut seen: BTreeSet<(u32, u32, u32, u64)> = BTreeSet::new();
    let mut sent_ok: BTreeSet<(u32, u32, u32, u64)> = BTreeSet::new();
    let mut outstanding: Vec<BTreeMap<u64, (u32, u32, u64)>> = vec![BTreeMap::new(); N as usize];
    let mut recvs: Vec<BTreeMap<u64, HostBuf>> = vec![BTreeMap::new(); N as usize];
    let mut op = 1000u64;
    let post = |net: &mut Network, n: u32, op: &mut u64, recvs: &mut Vec<BTreeMap<u64, HostBuf>>| {
        let buf = net.memory(NodeId(n)).alloc(4096);
        *op += 1;
        net.command(NodeId(n), P0, Command::Recv { op: OpId(*op), matching: RecvMatch::any(), buf }).unwrap();
        recvs[n as usize].insert(*op, buf);
    };
    for n in 0..N {
        for _ in 0..16 {
            post(&mut net, n, &mut op, &mut recvs);
        }
    }
    let mut reopens = 0;
    for round in 0..400 {
        // Issue a few sends from each node.
        for n in 0..N {
            while outstanding[n as usize].len() < 4 {
                let dst = (n + rng.gen_range(1..N)) % N;
                let d = directory[dst as usize];
                let s = next_seq.entry((n, dst, d.gen)).or_insert(0);
                let seq = *s;
                *s += 1;
                let mut payload = vec![0u8; rng.gen_range(12..3000)];
                payload[..4].copy_from_slice(&n.to_be_bytes());
                payload[4..8].copy_from_slice(&d.gen.to_be_bytes());
                payload[8..12].copy_from_slice(&(seq as u32).to_be_bytes());
                let buf = net.memory(NodeId(n)).alloc_with(&payload);
                op += 1;
                net.command(NodeId(n), P0, Command::Send { op: OpId(op), dest: d, tag: seq, buf }).unwrap();
                outstanding[n as usize].insert(op, (dst, d.gen, seq));
            }
        }
        net.run_for(Duration::from_micros(rng.gen_range(20..400))).unwrap();
        // Absorb completions.
        for n in 0..N {
            for e in net.take_events(NodeId(n)) {
                if let Some((dst, gen, seq)) = outstanding[n as usize].remove(&e.op.0) {
                    match e.result {
                        Ok(Completion::Sent) => {
                            sent_ok.insert((n, dst, gen, seq));
                        }
                        Err(OpError::PortGone) | Err(OpError::NotReadyTimeout) => {}
                        other => panic!("unexpected send result {other:?} (seed {seed})"),
                    }
                    continue;
                }
                let buf = recvs[n as usize].remove(&e.op.0).expect("known receive");
                let Ok(Completion::Received { src, len, .. }) = e.result else { panic!("{e:?}") };
                let bytes = net.memory(NodeId(n)).bytes(buf)[..len as usize].to_vec();
                let from = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
                let gen = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
                let seq = u64::from(u32::from_be_bytes(bytes[8..12].try_into().unwrap()));
                assert_eq!(from, src.node.0);
                assert_eq!(gen, directory[n as usize].gen, "message for incarnation {gen} reached incarnation {} (seed {seed})", directory[n as usize].gen);
                assert!(seen.insert((from, n, gen, seq)), "duplicate delivery (seed {seed})");
                let k = (from, src.gen, n, gen);
                if let Some(&prev) = last_seen.get(&k) {
                    assert!(seq > prev, "stream out of order (seed {seed})");
                }
                last_seen.insert(k, seq);
                net.memory(NodeId(n)).free(buf);
                post(&mut net, n, &mut op, &mut recvs);
            }
        }
        // Now and then a node's process restarts its port.
        if round % 10 == 5 {
            let n = rng.gen_range(0..N);
            net.close_port(NodeId(n), P0);
            // Its own outstanding operations vanish with it.
            outstanding[n as usize].clear();
            recvs[n as usize].clear();
            directory[n as usize] = net.open_port(NodeId(n), P0).unwrap();
            for _ in 0..16 {
                post(&mut net, n, &mut op, &mut recvs);
            }
            reopens += 1;
        }
    }
    assert!(reopens >= 30);
    // Messages reported sent to incarnations still open must all arrive.
    net.run_until_quiet().unwrap();
    for n in 0..N {
        for e in net.take_events(NodeId(n)) {
            if let Some(buf) = recvs[n as usize].remove(&e.op.0) {
                let Ok(Completion::Received { len, .. }) = e.result else { panic!("{e:?}") };
                let bytes = net.memory(NodeId(n)).bytes(buf)[..len as usize].to_vec();
                let from = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
                let gen = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
                let seq = u64::from(u32::from_be_bytes(bytes[8..12].try_into().unwrap()));
                assert_eq!(gen, directory[n as usize].gen);
                assert!(seen.insert((from, n, gen, seq)), "duplicate delivery (seed {seed})");
            } else if let Some((dst, gen, seq)) = outstanding[n as usize].remove(&e.op.0) {
                if e.result == Ok(Completion::Sent) {
                    sent_ok.insert((n, dst, gen, seq));
                }
            }
        }
    }
    for &(src, dst, gen, seq) in &sent_ok {
        if directory[dst as usize].gen == gen {
            assert!(seen.contains(&(src, dst, gen, seq)), "message {src}->{dst}@{gen}#{seq} reported sent but lost (seed {seed})");
        }
    }
}

#[test]
fn a_cancelled_or_timed_out_message_does_not_hold_back_the_rest_of_its_stream() {
    let mut net = Network::new(2, LinkConfig::default(), 26, |n| {
        let mut c = EngineConfig::new(n, 1, 0);
        c.retry_timeout = Duration::from_millis(2);
        c.unexpected_bytes = 100;
        c
    });
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    // 1: too big for b's unexpected pool, refused until it times out.
    let big = net.memory(a.node).alloc(1000);
    net.command(a.node, P0, Command::Send { op: OpId(1), dest: b, tag: 1, buf: big }).unwrap();
    // 2: fits, but must wait behind 1; cancelled while parked.
    let s2 = net.memory(a.node).alloc_with(&[2; 10]);
    net.command(a.node, P0, Command::Send { op: OpId(2), dest: b, tag: 2, buf: s2 }).unwrap();
    net.run_for(Duration::from_micros(100)).unwrap();
    net.command(a.node, P0, Command::Cancel { op: OpId(9), target: OpId(2) }).unwrap();
    // 3: must get through once 1 and 2 are out of the way.
    let s3 = net.memory(a.node).alloc_with(&[3; 10]);
    net.command(a.node, P0, Command::Send { op: OpId(3), dest: b, tag: 3, buf: s3 }).unwrap();
    net.run_until_quiet().unwrap();
    let mut results: Vec<(OpId, Result<Completion, OpError>)> =
        net.take_events(a.node).into_iter().map(|e| (e.op, e.result)).collect();
    results.sort_by_key(|r| r.0);
    assert_eq!(
        results,
        vec![
            (OpId(1), Err(OpError::NotReadyTimeout)),
            (OpId(2), Err(OpError::Cancelled)),
            (OpId(3), Ok(Completion::Sent)),
            (OpId(9), Ok(Completion::Cancelled)),
        ]
    );
    let r = net.memory(b.node).alloc(10);
    net.command(b.node, P0, Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    assert_eq!(net.next_event(b.node).unwrap().result, Ok(Completion::Received { src: a, tag: 3, len: 10 }));
}
