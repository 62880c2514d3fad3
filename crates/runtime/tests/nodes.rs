//! Engines on real threads and real UDP sockets on loopback, inside one
//! process, under every progress policy.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use outboard_engine::{Command, Completion, Engine, EngineConfig, HostBuf, NodeId, OpError, OpId, PortId, RecvMatch, VecMemory};
use outboard_host::{HostError, Port, PortIo};
use outboard_runtime::{bind_udp, Node, Progress};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const JOB: u64 = 0x5EED_0001;

fn cluster(n: u32, progress: Progress, tweak: impl Fn(&mut EngineConfig)) -> Vec<Node> {
    let sockets: Vec<UdpSocket> = (0..n).map(|_| bind_udp(LOCALHOST).unwrap()).collect();
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    sockets
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let mut c = EngineConfig::new(NodeId(i as u32), JOB, 100 + i as u64);
            tweak(&mut c);
            Node::start(c, s, &addrs, progress).unwrap()
        })
        .collect()
}

fn policies() -> [Progress; 3] {
    [Progress::Dedicated, Progress::SPIN_THEN_BLOCK, Progress::HOST_ASSISTED]
}

/// `rounds` messages from node 0 to node 1, message `i` of `len(i)` bytes,
/// each answered with its first 8 bytes; every one checked for source, tag,
/// order and content. `pause(i)` is slept before each message and reply.
fn exchange(nodes: &[Node], rounds: u32, len: fn(u32) -> usize, pause: fn(u32) -> Duration) {
    let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
    let mut b = Port::new(nodes[1].open_port(PortId(0)).unwrap());
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let t = std::thread::spawn(move || {
        for i in 0..rounds {
            let (src, tag, data) = b.recv(RecvMatch::any(), 100_000).unwrap();
            assert_eq!((src, tag), (ea, u64::from(i)));
            assert_eq!(data.len(), len(i));
            assert!(data.iter().enumerate().all(|(j, &x)| x == (j as u32 ^ i) as u8));
            std::thread::sleep(pause(i));
            b.send(ea, u64::from(i), &data[..data.len().min(8)]).unwrap();
        }
        b
    });
    for i in 0..rounds {
        let data: Vec<u8> = (0..len(i)).map(|j| (j as u32 ^ i) as u8).collect();
        std::thread::sleep(pause(i + 1));
        a.send(eb, u64::from(i), &data).unwrap();
        let (_, tag, back) = a.recv(RecvMatch::from(eb.node, eb.port, u64::from(i)), 8).unwrap();
        assert_eq!((tag, back.as_slice()), (u64::from(i), &data[..data.len().min(8)]));
    }
    let b = t.join().unwrap();
    drop((a, b));
}

#[test]
fn messages_cross_in_both_directions_under_every_policy() {
    for p in policies() {
        let nodes = cluster(2, p, |_| {});
        exchange(&nodes, 200, |i| (i as usize * 397) % 70_000, |_| Duration::ZERO);
        let (s, t) = nodes[1].stats();
        assert_eq!((s.malformed, s.unauthenticated), (0, 0), "policy {p}");
        assert!(t.datagrams_in > 200, "policy {p}: {t:?}");
    }
}

/// Host-assisted waits that sleep (what a preempted host does on a loaded
/// machine; here forced on every quiet wait by a zero preemption gap) hand
/// the engine to its thread and are woken by it: every message arrives,
/// in order and intact, whether it comes while the receiver spins, sleeps
/// or computes.
#[test]
fn host_assisted_waits_that_sleep_still_get_every_message() {
    let sleepy = Progress::HostAssisted {
        spin: Duration::from_micros(50),
        handover: Duration::from_micros(200),
        preempted_spin: Duration::ZERO,
        preempted_gap: Duration::ZERO,
    };
    let nodes = cluster(2, sleepy, |_| {});
    // Pauses before each message and reply: none, short, longer than a
    // kernel wake-up.
    exchange(&nodes, 120, |i| (i as usize * 211) % 20_000, |i| Duration::from_micros([0, 30, 700][(i % 3) as usize]));
    for n in &nodes {
        let (s, t) = n.stats();
        assert_eq!((s.malformed, s.unauthenticated, s.peers_failed), (0, 0, 0));
        assert!(t.host_sleeps > 0, "the waits never slept: {t:?}");
    }
}

#[test]
fn rdma_checks_keys_and_bad_addresses_fault_without_harm() {
    let nodes = cluster(2, Progress::HOST_ASSISTED, |_| {});
    let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
    let mut b = Port::new(nodes[1].open_port(PortId(1)).unwrap());
    let region = b.buffer_from(&[1; 64]).unwrap();
    let key = b.register(region).unwrap();
    let src = a.buffer_from(&[9; 16]).unwrap();
    let w = a.start_write(b.endpoint(), key, 8, src).unwrap();
    assert_eq!(a.wait(w).unwrap(), Completion::Written);
    let w = a.start_write(b.endpoint(), key ^ 1, 0, src).unwrap();
    assert_eq!(a.wait(w), Err(HostError::Op(OpError::BadKey)));
    let w = a.start_write(b.endpoint(), key, 60, src).unwrap();
    assert_eq!(a.wait(w), Err(HostError::Op(OpError::OutOfBounds)));
    let got = b.read_buffer(region).unwrap();
    assert_eq!(&got[8..24], &[9; 16]);
    assert!(got[..8].iter().chain(&got[24..]).all(|&x| x == 1), "only the good write landed");
    let dst = a.buffer(16).unwrap();
    let r = a.start_read(b.endpoint(), key, 4, dst).unwrap();
    assert_eq!(a.wait(r).unwrap(), Completion::Read);
    assert_eq!(a.read_buffer(dst).unwrap(), [&[1u8; 4][..], &[9; 12]].concat());
    // An address that is no live buffer of this process: the engine's DMA
    // refuses it, nothing crashes.
    let bogus = HostBuf { addr: 0xdead_0000, len: 32 };
    let s = a.start_send(b.endpoint(), 5, bogus).unwrap();
    assert_eq!(a.wait(s), Err(HostError::Op(OpError::DmaFault)), "send from a bogus address fails");
    a.free(src).unwrap();
    assert!(a.free(src).is_err(), "double free is refused");
    // Both engines keep working. (The reverse direction: a message after a
    // faulted one in the same stream is held back by the engine, see the
    // runtime's report.)
    let rb = a.buffer(64).unwrap();
    let r = a.start_recv(RecvMatch::tag(6), rb).unwrap();
    b.send(a.endpoint(), 6, b"still fine").unwrap();
    assert!(matches!(a.wait(r), Ok(Completion::Received { len: 10, .. })));
}

#[test]
fn tokens_are_enforced_at_post_like_the_engine_would() {
    let nodes = cluster(2, Progress::Dedicated, |c| c.send_tokens = 2);
    let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
    let eb = nodes[1].open_port(PortId(0)).unwrap();
    let buf = a.buffer(8).unwrap();
    let ep = eb.endpoint();
    let r1 = a.start_send(ep, 1, buf).unwrap();
    let r2 = a.start_send(ep, 1, buf).unwrap();
    assert_eq!(a.start_send(ep, 1, buf), Err(HostError::Command(outboard_engine::CommandError::NoSendToken)));
    assert!(a.wait(r1).is_ok() && a.wait(r2).is_ok(), "unexpected messages are accepted");
    a.start_send(ep, 1, buf).map(|r| a.wait(r)).unwrap().unwrap();
    let big = HostBuf { addr: buf.addr, len: u32::MAX };
    assert!(matches!(a.start_send(ep, 1, big), Err(HostError::Command(outboard_engine::CommandError::TooLong { .. }))));
}

#[test]
fn a_dead_peer_fails_pending_operations_within_the_peer_timeout() {
    let timeout = Duration::from_millis(300);
    let mut nodes = cluster(2, Progress::SPIN_THEN_BLOCK, |c| {
        c.peer_timeout = timeout;
        c.rto_max = Duration::from_millis(50);
    });
    let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
    let ep_b = {
        let b = nodes[1].open_port(PortId(0)).unwrap();
        b.endpoint()
    };
    drop(nodes.pop()); // node 1's engine stops: no more acks
    let start = Instant::now();
    let rbuf = a.buffer(8).unwrap();
    let r = a.start_recv(RecvMatch::from(ep_b.node, ep_b.port, 0), rbuf).unwrap();
    let err = a.send(ep_b, 0, b"anyone?").unwrap_err();
    assert_eq!(err, HostError::Op(OpError::PeerUnreachable(NodeId(1))));
    assert_eq!(a.wait(r), Err(HostError::Op(OpError::PeerUnreachable(NodeId(1)))));
    let took = start.elapsed();
    assert!(took >= timeout, "failed before the peer timeout: took {took:?}");
    // The upper bound leaves a loaded machine a second of scheduling
    // slack, and is still below the engine's default timeout (2 s): an
    // engine that ignored the configured timeout, or a host that missed
    // the failure until some later event, fails it.
    assert!(took < timeout + Duration::from_secs(1), "failed {took:?} after the start, for a {timeout:?} peer timeout");
}

#[test]
fn malformed_datagrams_are_counted_and_dropped_while_traffic_continues() {
    let nodes = cluster(2, Progress::HOST_ASSISTED, |_| {});
    let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
    let mut b = Port::new(nodes[1].open_port(PortId(0)).unwrap());
    let target = nodes[1].local_addr();
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    // A well-formed packet with another job's key.
    let mut foreign = Engine::new(EngineConfig::new(NodeId(0), JOB ^ 1, 7), VecMemory::new(), outboard_engine::Instant::ZERO).unwrap();
    let fp = foreign.open_port(outboard_engine::Instant::ZERO, PortId(0)).unwrap();
    let buf = foreign.dma_mut().alloc_with(b"intruder");
    foreign
        .handle_command(outboard_engine::Instant::ZERO, PortId(0), Command::Send { op: OpId(1), dest: b.endpoint(), tag: 0, buf })
        .unwrap();
    let mut pkt = vec![0; 9000];
    let t = foreign.poll_transmit(outboard_engine::Instant::ZERO, &mut pkt).unwrap();
    let wrong_key = pkt[..t.len].to_vec();
    let _ = fp;
    let mut seed = 0x1234_5678u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let rbuf = b.buffer(64).unwrap();
    for i in 0..50u64 {
        let garbage: Vec<u8> = (0..(rnd() % 200) as usize).map(|_| rnd() as u8).collect();
        attacker.send_to(&garbage, target).unwrap();
        attacker.send_to(&wrong_key[..(rnd() as usize % outboard_wire::HEADER_LEN)], target).unwrap();
        attacker.send_to(&wrong_key, target).unwrap();
        let r = b.start_recv(RecvMatch::tag(i), rbuf).unwrap();
        a.send(eb, i, &i.to_be_bytes()).unwrap();
        assert_eq!(b.wait(r).unwrap(), Completion::Received { src: ea, tag: i, len: 8 });
    }
    // Let the last junk datagrams be read.
    let start = Instant::now();
    while nodes[1].stats().1.unknown_source < 150 && start.elapsed() < Duration::from_secs(5) {
        b.io().idle();
    }
    let (s, t) = nodes[1].stats();
    assert_eq!(t.unknown_source, 150, "{t:?}");
    assert_eq!(s.unauthenticated, 50, "{s:?}");
    assert!(s.malformed >= 95, "random bytes and truncated headers: {s:?}");
    assert_eq!(s.malformed + s.unauthenticated + s.misaddressed, 150, "every junk datagram dropped: {s:?}");
}

#[test]
fn a_blocking_atomic_server_sleeps_in_the_kernel_and_serves_every_request_under_every_policy() {
    use outboard_host::atomic_server::{AtomicServer, ServerWait};
    use outboard_host::{AtomicOp, AtomicWidth};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for progress in policies() {
        let nodes = cluster(2, progress, |_| {});
        let mut client = Port::new(nodes[0].open_port(PortId(0)).unwrap());
        let mut target = Port::new(nodes[1].open_port(PortId(0)).unwrap());
        let words = target.buffer(8).unwrap();
        let key = target.register(words).unwrap();
        let mut sp = Port::new(nodes[1].open_port(PortId(1)).unwrap());
        let server = sp.endpoint();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let t = std::thread::spawn(move || {
            let mut s = AtomicServer::new();
            s.expose(key, words);
            while s.serve_one(&mut sp, ServerWait::Block, &|| st.load(Ordering::SeqCst)).unwrap() {}
            s.served
        });
        let before = nodes[1].stats().1.host_sleeps;
        for i in 0..50u64 {
            // Pauses so the server waits for each request.
            std::thread::sleep(Duration::from_micros(300));
            let old = client.hb_atomic(server, key, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1)).unwrap();
            assert_eq!(old, i, "{progress}");
        }
        stop.store(true, Ordering::SeqCst);
        // The server's last wait ends within its park's safety net.
        assert_eq!(t.join().unwrap(), 50);
        let mut b = [0u8; 8];
        target.io_ref().read(words.addr, &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 50);
        if matches!(progress, Progress::HostAssisted { .. }) {
            // It handed its engine back to sleep instead of driving it
            // (for most requests: one that arrived before the server
            // looked is served without a wait).
            let slept = nodes[1].stats().1.host_sleeps - before;
            assert!(slept >= 25, "{progress}: slept {slept} times for 50 requests");
        }
    }
}

#[test]
fn large_messages_leave_in_segmented_sends_and_are_copied_once_per_side() {
    for progress in policies() {
        let nodes = cluster(2, progress, |c| c.max_message = 4 << 20);
        let mut a = Port::new(nodes[0].open_port(PortId(0)).unwrap());
        let mut b = Port::new(nodes[1].open_port(PortId(0)).unwrap());
        // The eager path (the runtime's default sends this by rendezvous).
        a.set_rendezvous(outboard_host::RendezvousConfig { threshold: None, ..Default::default() });
        let eb = b.endpoint();
        let len = 1 << 20;
        let data: Vec<u8> = (0..len).map(|j| (j * 7 + j / 8191) as u8).collect();
        let src = a.buffer_from(&data).unwrap();
        let dst = b.buffer(len as u32).unwrap();
        let r = b.start_recv(RecvMatch::any(), dst).unwrap();
        let s = a.start_send(eb, 5, src).unwrap();
        let t = std::thread::spawn(move || {
            b.wait(r).unwrap();
            let got = b.read_buffer(dst).unwrap();
            (b, got)
        });
        a.wait(s).unwrap();
        let (b, got) = t.join().unwrap();
        assert!(got == data, "{progress}: the message arrived altered");
        let (sa, ta) = nodes[0].stats();
        let (_, tb) = nodes[1].stats();
        // Each payload byte is copied out of host memory once per
        // transmission, and into the receive buffer exactly once.
        assert_eq!(tb.copied_in, len as u64, "{progress}");
        assert!(ta.copied_out >= len as u64, "{progress}");
        if sa.retransmits == 0 {
            assert_eq!(ta.copied_out, len as u64, "{progress}");
        }
        assert!(ta.datagrams_out >= (len / 8192) as u64);
        // Where the kernel segments UDP (Linux), a 1 MiB message takes
        // far fewer system calls than datagrams.
        if cfg!(target_os = "linux") && ta.send_calls < ta.datagrams_out {
            assert!(ta.send_calls * 2 <= ta.datagrams_out, "{progress}: {ta:?}");
        }
        drop((a, b));
    }
}

/// A host-based broadcast whose sends go by rendezvous: the root returns
/// from its call and then stays out of the library (as a rank of an MPI
/// program does when its next call is the real MPI's); every other member
/// must still get the data, since the root's announcements left before its
/// call returned and its engine serves the reads on its own. (Under Open
/// MPI a root whose first send still waited for its buffer's registration
/// left the others parked for good.)
#[test]
fn a_host_based_rendezvous_broadcast_completes_while_its_root_stays_away() {
    for protocol in [outboard_host::RendezvousProtocol::Read, outboard_host::RendezvousProtocol::Write] {
        root_stays_away(protocol);
    }
}

fn root_stays_away(protocol: outboard_host::RendezvousProtocol) {
    use outboard_host::{BcastMode, Group, RendezvousConfig, TreeShape};
    let n = 4;
    let nodes = cluster(n, Progress::Dedicated, |c| c.max_message = 4 << 20);
    let mut ports: Vec<Port<_>> = nodes.iter().map(|nd| Port::new(nd.open_port(PortId(0)).unwrap())).collect();
    for p in &mut ports {
        p.set_rendezvous(RendezvousConfig { threshold: Some(64 << 10), protocol, ..Default::default() });
    }
    let members: Vec<_> = ports.iter().map(|p| p.endpoint()).collect();
    let len = 300_000;
    let data: Vec<u8> = (0..len).map(|j| (j * 13 + j / 251) as u8).collect();
    // Members that finished; every thread keeps its port open (as a live
    // process would) until all have, so no port closes under a read.
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let threads: Vec<_> = ports
        .into_iter()
        .enumerate()
        .map(|(rank, mut port)| {
            let (members, data, finished) = (members.clone(), data.clone(), finished.clone());
            std::thread::spawn(move || {
                let mut g = Group::new(outboard_host::GroupId(7), rank as u32, members).unwrap();
                let input = if rank == 0 { data.clone() } else { vec![0; len] };
                let mut req = port.start_bcast(&mut g, BcastMode::HostBased, TreeShape::Binomial, 0, &input).unwrap();
                let deadline = Instant::now() + Duration::from_secs(60);
                let got = loop {
                    if let Some(r) = port.coll_test(&mut req) {
                        break r.unwrap();
                    }
                    assert!(Instant::now() < deadline, "{protocol:?}: rank {rank}: the broadcast never finished");
                    std::thread::yield_now();
                };
                assert!(got == data, "rank {rank}: the broadcast's data arrived altered");
                // Every member - the root first of all - leaves the
                // library here and stays away until all have their data.
                finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(90);
                while finished.load(std::sync::atomic::Ordering::SeqCst) < n {
                    assert!(Instant::now() < deadline, "{protocol:?}: rank {rank}: the others never got their data");
                    std::thread::sleep(Duration::from_millis(1));
                }
                port.rendezvous_stats()
            })
        })
        .collect();
    let stats: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    // The root's two children and rank 2's child got their data by read.
    assert_eq!(stats[0].sends, 2, "{stats:?}");
    assert_eq!(stats.iter().map(|s| s.receives).sum::<u64>(), 3, "{stats:?}");
    drop(nodes);
}
