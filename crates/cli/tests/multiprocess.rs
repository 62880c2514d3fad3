//! Real processes on loopback: `outboard run -n 4`, Open MPI's `mpirun`,
//! and two network namespaces joined by a veth pair.
//!
//! The rank programs are this test binary itself: `rank_program` does
//! nothing in an ordinary test run, and plays the scenario named by
//! `OB_SCENARIO` when a launcher starts the binary as
//! `<this test> rank_program --exact --nocapture`.

use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use outboard_engine::{
    Command as EngineCommand, Completion, Engine, EngineConfig, Instant as EngineInstant, NodeId, OpError, OpId, PortId,
    RecvMatch, VecMemory,
};
use outboard_host::HostError;

mod common;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// The jobs run one at a time: several 4-rank jobs at once on a 2-core
/// machine would test the scheduler, not Outboard.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------- ranks --

#[test]
#[ignore = "a rank's entry point, not a test: the tests of this file start it in child processes with OB_SCENARIO set"]
fn rank_program() {
    let Ok(scenario) = std::env::var("OB_SCENARIO") else { return };
    let world = outboard_runtime::init().expect("init");
    match scenario.as_str() {
        "alltoall" => alltoall(world),
        "rdma" => rdma(world),
        "killed" => killed(world),
        "killed_recv_only" => killed_recv_only(world),
        "malformed" => malformed(world),
        "atomics" => atomics(world),
        "lock" => lock(world, false),
        "lock-hb" => lock(world, true),
        "killed_port" => killed_port(world),
        "engine_killed" => engine_killed(world),
        "storm" => storm(world),
        other => panic!("unknown scenario {other}"),
    }
}

fn payload(src: u32, dst: u32, i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (j as u32).wrapping_mul(31) as u8 ^ (src * 7 + dst * 13 + i) as u8).collect()
}

/// Every rank sends three messages (small, one packet, many packets) to
/// every other rank and checks all it receives.
fn alltoall(mut world: outboard_runtime::World) {
    let (me, n) = (world.rank(), world.size());
    let sizes = [1usize, 3000, 100_000];
    let mut recvs = Vec::new();
    for src in (0..n).filter(|&s| s != me) {
        let ep = world.endpoint(src);
        for (i, &len) in sizes.iter().enumerate() {
            let buf = world.port().buffer(len as u32).unwrap();
            let tag = u64::from(src) << 8 | i as u64;
            let r = world.port().start_recv(RecvMatch::from(ep.node, ep.port, tag), buf).unwrap();
            recvs.push((src, i as u32, len, buf, r));
        }
    }
    let mut sends = Vec::new();
    for dst in (0..n).filter(|&d| d != me) {
        let ep = world.endpoint(dst);
        for (i, &len) in sizes.iter().enumerate() {
            let buf = world.port().buffer_from(&payload(me, dst, i as u32, len)).unwrap();
            sends.push(world.port().start_send(ep, u64::from(me) << 8 | i as u64, buf).unwrap());
        }
    }
    for s in sends {
        assert_eq!(world.port().wait(s).unwrap(), Completion::Sent);
    }
    for (src, i, len, buf, r) in recvs {
        match world.port().wait(r).unwrap() {
            Completion::Received { src: from, len: got, .. } => {
                assert_eq!((from, got as usize), (world.endpoint(src), len));
            }
            other => panic!("{other:?}"),
        }
        assert!(world.port().read_buffer(buf).unwrap() == payload(src, me, i, len), "payload from {src} damaged");
    }
    println!("rank {me}: all {} messages intact ({:?})", (n - 1) * sizes.len() as u32, world.launcher());
    world.finalize().unwrap();
}

/// Messages of every size class (one byte over a shared-memory fragment,
/// longer than a node's queue) between every pair, taken by receives from
/// one sender posted before and after the sends, and by receives from any
/// sender: all intact, exactly once, a pair's messages of one tag in order.
fn storm(mut world: outboard_runtime::World) {
    const PER_PEER: u32 = 12;
    const ANY: u64 = 7;
    let (me, n) = (world.rank(), world.size());
    let sizes = [8usize, 100, 16_320, 16_321, 70_000, 300_000];
    let len_of = |src: u32, dst: u32, k: u32| sizes[((src * 5 + dst * 3 + k * 7) % 6) as usize];
    let tag = |k: u32| u64::from(k % 3);
    let message = |src: u32, dst: u32, k: u32| {
        let mut v = payload(src, dst, k, len_of(src, dst, k));
        v[..4].copy_from_slice(&src.to_le_bytes());
        v[4..8].copy_from_slice(&k.to_le_bytes());
        v
    };
    let others: Vec<u32> = (1..n).map(|d| (me + d) % n).collect();
    let mut recvs = Vec::new();
    let post = |world: &mut outboard_runtime::World, src: u32, k: u32| {
        let ep = world.endpoint(src);
        let buf = world.port().buffer(len_of(src, me, k) as u32).unwrap();
        (src, k, buf, world.port().start_recv(RecvMatch::from(ep.node, ep.port, tag(k)), buf).unwrap())
    };
    for &src in &others {
        for k in 0..PER_PEER / 2 {
            recvs.push(post(&mut world, src, k));
        }
    }
    let wild: Vec<_> = others.iter().map(|_| {
        let buf = world.port().buffer(16).unwrap();
        (buf, world.port().start_recv(RecvMatch::tag(ANY), buf).unwrap())
    }).collect();
    let mut sends = Vec::new();
    for &dst in &others {
        let ep = world.endpoint(dst);
        for k in 0..PER_PEER {
            let buf = world.port().buffer_from(&message(me, dst, k)).unwrap();
            sends.push(world.port().start_send(ep, tag(k), buf).unwrap());
        }
        let buf = world.port().buffer_from(&me.to_le_bytes()).unwrap();
        sends.push(world.port().start_send(ep, ANY, buf).unwrap());
    }
    for &src in &others {
        for k in PER_PEER / 2..PER_PEER {
            recvs.push(post(&mut world, src, k));
        }
    }
    for s in sends {
        assert_eq!(world.port().wait(s).unwrap(), Completion::Sent);
    }
    for (src, k, buf, r) in recvs {
        let want = message(src, me, k);
        assert_eq!(world.port().wait(r).unwrap(), Completion::Received { src: world.endpoint(src), tag: tag(k), len: want.len() as u32 }, "rank {me}: message {k} from {src}");
        assert!(world.port().read_buffer(buf).unwrap() == want, "rank {me}: message {k} from {src} damaged or out of order");
    }
    let mut from: Vec<u32> = wild
        .into_iter()
        .map(|(buf, r)| {
            let Completion::Received { src, len: 4, .. } = world.port().wait(r).unwrap() else { panic!("rank {me}: a receive from any source") };
            let sender = u32::from_le_bytes(world.port().read_buffer(buf).unwrap()[..4].try_into().unwrap());
            assert_eq!(world.endpoint(sender), src, "rank {me}");
            sender
        })
        .collect();
    from.sort_unstable();
    let mut want = others.clone();
    want.sort_unstable();
    assert_eq!(from, want, "rank {me}: one message from any source from each peer");
    println!("rank {me}: {} messages intact, each once and in order", others.len() as u32 * (PER_PEER + 1));
    world.finalize().unwrap();
}

/// Rank 0 exposes a region; the others write into it with the right key and
/// are refused with a wrong one; the region holds only the good writes.
fn rdma(mut world: outboard_runtime::World) {
    let (me, n) = (world.rank(), world.size());
    let root = world.endpoint(0);
    let region = world.port().buffer(64 * n).unwrap();
    if me == 0 {
        let key = world.port().register(region).unwrap();
        for r in 1..n {
            let ep = world.endpoint(r);
            world.port().send(ep, 1, &key.to_le_bytes()).unwrap();
        }
        for _ in 1..n {
            world.port().recv(RecvMatch::tag(2), 8).unwrap();
        }
        let got = world.port().read_buffer(region).unwrap();
        for r in 1..n {
            assert!(got[64 * r as usize..][..64].iter().all(|&b| b == r as u8), "slice {r}");
        }
        assert!(got[..64].iter().all(|&b| b == 0), "the bad-key writes left memory untouched");
        assert_eq!(world.stats().0.access_violations, u64::from(n - 1));
        println!("rank 0: good writes landed, {} bad-key writes refused", n - 1);
    } else {
        let (_, _, k) = world.port().recv(RecvMatch::from(root.node, root.port, 1), 8).unwrap();
        let key = u64::from_le_bytes(k.try_into().unwrap());
        let src = world.port().buffer_from(&[me as u8; 64]).unwrap();
        let w = world.port().start_write(root, key ^ 0xbad, 0, src).unwrap();
        assert_eq!(world.port().wait(w), Err(HostError::Op(OpError::BadKey)));
        let w = world.port().start_write(root, key, 64 * u64::from(me), src).unwrap();
        assert_eq!(world.port().wait(w).unwrap(), Completion::Written);
        world.port().send(root, 2, b"ok").unwrap();
        println!("rank {me}: bad key refused, good key accepted");
    }
    world.finalize().unwrap();
}

/// Rank 0 exposes a region of words (its key sent to the others); every
/// rank works on them with remote atomics while rank 0 works on the same
/// words with local ones. Rank 0 checks the sums, that every fetch-add's old
/// value is distinct, one CAS winner, the swap chain, and the refusals.
fn atomics(mut world: outboard_runtime::World) {
    use outboard_host::{AtomicOp, AtomicWidth, RemoteWord};
    const K: u64 = 300;
    let (me, n) = (world.rank(), world.size());
    let root = world.endpoint(0);
    let region = world.port().buffer(64).unwrap();
    let w64 = |key, offset| RemoteWord { ep: root, key, offset, width: AtomicWidth::W64 };
    let mut olds = Vec::new();
    if me == 0 {
        let key = world.port().register(region).unwrap();
        for r in 1..n {
            let ep = world.endpoint(r);
            world.port().send(ep, 1, &key.to_le_bytes()).unwrap();
        }
        // Local fetch-adds of 1000 on the counter the others add to.
        for _ in 0..K {
            olds.push(world.port().local_atomic(region, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1000)).unwrap());
        }
        let mut cas_winners = 0;
        let mut swapped = vec![world.port().local_atomic(region, 24, AtomicWidth::W64, AtomicOp::FetchAdd(0)).unwrap()];
        for _ in 1..n {
            let (_, _, m) = world.port().recv(RecvMatch::tag(2), 16 + 8 * K as u32).unwrap();
            let word = |i: usize| u64::from_le_bytes(m[8 * i..][..8].try_into().unwrap());
            cas_winners += u32::from(word(0) == 0);
            swapped.push(word(1));
            olds.extend((0..K as usize).map(|i| word(2 + i)));
        }
        let local = |port: &mut outboard_host::Port<_>, at, width| port.local_atomic(region, at, width, AtomicOp::FetchAdd(0)).unwrap();
        let sum: u64 = (1..u64::from(n)).map(|r| r * K).sum::<u64>() + 1000 * K;
        assert_eq!(local(world.port(), 0, AtomicWidth::W64), sum, "fetch-add total");
        olds.sort_unstable();
        olds.dedup();
        assert_eq!(olds.len() as u64, u64::from(n) * K, "every fetch-add's old value distinct");
        assert_eq!(local(world.port(), 8, AtomicWidth::W32), u64::from(n - 1) * K, "direct-form 32-bit total");
        assert_eq!(cas_winners, 1, "one compare-and-swap hit");
        let winner = local(world.port(), 16, AtomicWidth::W64);
        assert!((1..u64::from(n)).contains(&winner));
        // Swaps: the old values and the final one are every rank once.
        swapped[0] = local(world.port(), 24, AtomicWidth::W64);
        swapped.sort_unstable();
        assert_eq!(swapped, (0..u64::from(n)).collect::<Vec<_>>(), "swap chain");
        assert_eq!(world.stats().0.access_violations, 3 * u64::from(n - 1));
        assert!(world.stats().0.atomics_executed >= u64::from(n - 1) * (2 * K + 2));
        println!("rank 0: {} fetch-adds summed exactly, old values distinct, one CAS winner, swap chain whole, {} violations refused", u64::from(n) * K, 3 * (n - 1));
    } else {
        let (_, _, k) = world.port().recv(RecvMatch::from(root.node, root.port, 1), 8).unwrap();
        let key = u64::from_le_bytes(k.try_into().unwrap());
        // Event form, several under way at once.
        for chunk in 0..K / 10 {
            let reqs: Vec<_> = (0..10).map(|_| world.port().start_atomic(w64(key, 0), AtomicOp::FetchAdd(u64::from(me))).unwrap()).collect();
            for r in reqs {
                match world.port().wait(r).unwrap() {
                    Completion::Atomic { value } => olds.push(value),
                    other => panic!("chunk {chunk}: {other:?}"),
                }
            }
        }
        // Direct form on a 32-bit word.
        let w32 = RemoteWord { width: AtomicWidth::W32, ..w64(key, 8) };
        for _ in 0..K {
            let d = world.port().start_atomic_direct(w32, AtomicOp::FetchAdd(1)).unwrap();
            world.port().wait_direct(d).unwrap();
        }
        let cas = world.port().compare_swap(w64(key, 16), 0, u64::from(me)).unwrap();
        let swapped = world.port().swap(w64(key, 24), u64::from(me)).unwrap();
        assert_eq!(world.port().fetch_add(w64(key, 4), 1), Err(HostError::Op(OpError::Misaligned)));
        assert_eq!(world.port().fetch_add(w64(key, 64), 1), Err(HostError::Op(OpError::OutOfBounds)));
        assert_eq!(world.port().fetch_add(w64(key ^ 1, 0), 1), Err(HostError::Op(OpError::BadKey)));
        let mut report = Vec::new();
        for v in [cas, swapped].into_iter().chain(olds) {
            report.extend_from_slice(&v.to_le_bytes());
        }
        world.port().send(root, 2, &report).unwrap();
        println!("rank {me}: atomics done");
    }
    world.finalize().unwrap();
}

/// Every rank takes an MCS lock homed at rank 0 many times; inside, it
/// increments a counter at rank 1 with a plain RDMA read and write (not
/// atomic: only the lock keeps the increments apart). The counter ends at
/// the number of critical sections. Host-based: each rank runs an atomic
/// server thread on its port 1, and the lock's remote operations go to it.
fn lock(mut world: outboard_runtime::World, host_based: bool) {
    use outboard_host::atomic_server::{AtomicServer, ServerWait};
    use outboard_host::lock::McsLock;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const CYCLES: u64 = 200;
    let (me, n) = (world.rank(), world.size());
    let mut g = world.group().unwrap();
    let mut lock = McsLock::create(world.port(), &mut g, 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut server = None;
    if host_based {
        let (words, key) = lock.words();
        let mut sp = outboard_host::Port::new(world.node().expect("the host-based lock runs on per-process engines").open_port(PortId(1)).unwrap());
        let st = stop.clone();
        server = Some(std::thread::spawn(move || {
            let mut s = AtomicServer::new();
            s.expose(key, words);
            while s.serve_one(&mut sp, ServerWait::Block, &|| st.load(Ordering::SeqCst)).unwrap() {}
            s.served
        }));
        // Every rank's server is port 1, first incarnation, of its node.
        let servers = (0..n).map(|r| outboard_engine::Endpoint { port: PortId(1), gen: 1, ..world.endpoint(r) }).collect();
        lock = lock.over_servers(servers).unwrap();
    }
    // Rank 1's counter; its key travels in an allreduce like the lock's.
    let counter = world.port().buffer(8).unwrap();
    let key = world.port().register(counter).unwrap();
    let bor = outboard_host::Reduction { op: outboard_host::ReduceOp::Bor, dtype: outboard_host::Datatype::U64 };
    let mine = if me == 1 { key } else { 0 };
    let d = g.defaults();
    let keys = world.port().allreduce(&mut g, d.mode, d.allreduce, bor, &mine.to_ne_bytes()).unwrap();
    let key1 = u64::from_ne_bytes(keys.try_into().unwrap());
    let home = world.endpoint(1);
    let tmp = world.port().buffer(8).unwrap();
    let mut queued = 0;
    for _ in 0..CYCLES {
        lock.acquire(world.port()).unwrap();
        queued += u32::from(lock.queued_behind().is_some());
        let r = world.port().start_read(home, key1, 0, tmp).unwrap();
        world.port().wait(r).unwrap();
        let v = u64::from_ne_bytes(world.port().read_buffer(tmp).unwrap().try_into().unwrap());
        outboard_host::PortIo::write(world.port().io(), tmp.addr, &(v + 1).to_ne_bytes()).unwrap();
        let w = world.port().start_write(home, key1, 0, tmp).unwrap();
        world.port().wait(w).unwrap();
        lock.release(world.port()).unwrap();
    }
    // Only then may rank 1 look: a barrier after everyone's last release.
    world.port().barrier(&mut g, d.mode, outboard_host::BarrierAlgorithm::Dissemination).unwrap();
    if me == 1 {
        let v = u64::from_ne_bytes(world.port().read_buffer(counter).unwrap().try_into().unwrap());
        assert_eq!(v, u64::from(n) * CYCLES, "lost increments: two holders at once");
        println!("rank 1: {} critical sections, counter exact", u64::from(n) * CYCLES);
    }
    if me == 0 {
        // Free now, and nobody else asks: the home rank takes it at once
        // (with local atomics only) and gives it back.
        assert!(lock.try_lock(world.port()).unwrap());
        lock.release(world.port()).unwrap();
    }
    if let Some(s) = server {
        // Nobody needs this rank's server once everyone is past the lock.
        world.port().barrier(&mut g, d.mode, outboard_host::BarrierAlgorithm::Dissemination).unwrap();
        stop.store(true, Ordering::SeqCst);
        let served = s.join().unwrap();
        if me == 0 {
            assert!(served >= u64::from(n - 1) * CYCLES, "the home rank's server performed every remote swap on the lock word: {served}");
            assert_eq!(world.stats().0.atomics_executed, 0, "the engine performed none");
            println!("rank 0: host-based lock, {served} requests served at the home");
        }
    }
    println!("rank {me}: {CYCLES} lock cycles, {queued} queued behind another rank");
    world.finalize().unwrap();
}

/// After a barrier, the last rank SIGKILLs itself (and never returns);
/// the others get (their rank, the victim's rank).
fn kill_the_last_rank_after_a_barrier(world: &mut outboard_runtime::World) -> (u32, u32) {
    let (me, victim) = (world.rank(), world.size() - 1);
    world.barrier().unwrap();
    if me == victim {
        let pid = std::process::id();
        let _ = Command::new("sh").args(["-c", &format!("kill -9 {pid}")]).status();
        std::thread::sleep(Duration::from_secs(60));
        unreachable!("SIGKILL");
    }
    (me, victim)
}

/// A moment after the victim died: a receive from it and a 100 KB send to
/// it, both waited for; the victim's endpoint, the two results and how
/// long they took in ms.
fn send_and_receive_with(world: &mut outboard_runtime::World, victim: u32) -> (outboard_engine::Endpoint, Result<Completion, HostError>, Result<Completion, HostError>, u128) {
    std::thread::sleep(Duration::from_millis(200));
    let ep = world.endpoint(victim);
    let start = Instant::now();
    let rbuf = world.port().buffer(16).unwrap();
    let r = world.port().start_recv(RecvMatch::from(ep.node, ep.port, 9), rbuf).unwrap();
    let sbuf = world.port().buffer_from(&[1; 100_000]).unwrap();
    let s = world.port().start_send(ep, 9, sbuf).unwrap();
    let send = world.port().wait(s);
    let recv = world.port().wait(r);
    (ep, send, recv, start.elapsed().as_millis())
}

/// The last rank kills itself with SIGKILL; every other rank has a send to
/// it and a receive from it pending, and both must fail within the peer
/// timeout.
fn killed(mut world: outboard_runtime::World) {
    let (me, victim) = kill_the_last_rank_after_a_barrier(&mut world);
    let (_, send, recv, ms) = send_and_receive_with(&mut world, victim);
    assert_eq!(send, Err(HostError::Op(OpError::PeerUnreachable(NodeId(victim)))));
    assert_eq!(recv, Err(HostError::Op(OpError::PeerUnreachable(NodeId(victim)))));
    println!("rank {me}: peer {victim} failed after {ms} ms: send and receive both report it unreachable");
    // Leaving without finalize: the victim can never reach a fence.
    drop(world);
    std::process::exit(0);
}

/// With node engines: the last rank kills itself with SIGKILL. Its node's
/// engine closes its port, as its own exit would have; every other rank
/// has a receive from it and a send to it pending, and both fail, naming
/// the dead rank's port, while its node's engine goes on serving the
/// node's other rank.
fn killed_port(mut world: outboard_runtime::World) {
    let (me, victim) = kill_the_last_rank_after_a_barrier(&mut world);
    let (ep, send, recv, ms) = send_and_receive_with(&mut world, victim);
    assert_eq!(recv, Err(HostError::Op(OpError::SourceClosed(ep))), "rank {me}");
    assert!(matches!(send, Err(HostError::Op(OpError::PortGone | OpError::SourceClosed(_)))), "rank {me}: {send:?}");
    // The survivors still talk to each other, the dead rank's node-mate
    // included, through the same engines.
    let peer = world.endpoint((me + 1) % victim);
    let from = world.endpoint((me + victim - 1) % victim);
    world.port().send(peer, 10, &me.to_le_bytes()).unwrap();
    let (_, _, got) = world.port().recv(RecvMatch::from(from.node, from.port, 10), 4).unwrap();
    assert_eq!(got, ((me + victim - 1) % victim).to_le_bytes());
    println!("rank {me}: rank {victim}'s port closed after {ms} ms: receive and send both failed; the others still talk");
    drop(world);
    std::process::exit(0);
}

/// With node engines: rank 0 kills node 1's engine process with SIGKILL.
/// Node 1's ranks (2 and 3) have a receive pending that now can never
/// complete: it must fail with `EngineLost`. Node 0's ranks wait to
/// receive from rank 2, and must get a failure naming node 1.
fn engine_killed(mut world: outboard_runtime::World) {
    let me = world.rank();
    world.barrier().unwrap();
    let node1 = world.endpoint(2).node;
    if me == 0 {
        let key = std::env::var("OUTBOARD_JOB_KEY").unwrap();
        let pattern = format!("outboard-{key}-node-{}", node1.0);
        // The engine's pid from /proc (no pkill on a bare machine).
        let pid = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .find(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(&pattern)))
            .unwrap_or_else(|| panic!("no engine process runs as {pattern}"));
        let st = Command::new("sh").args(["-c", &format!("kill -9 {pid}")]).status().unwrap();
        assert!(st.success(), "could not kill the engine {pid}");
    }
    let start = Instant::now();
    let from = if world.endpoint(me).node == node1 { world.endpoint(0) } else { world.endpoint(2) };
    let rbuf = world.port().buffer(16).unwrap();
    let r = world.port().start_recv(RecvMatch::from(from.node, from.port, 11), rbuf).unwrap();
    let got = world.port().wait(r);
    let ms = start.elapsed().as_millis();
    if world.endpoint(me).node == node1 {
        assert_eq!(got, Err(HostError::Op(OpError::EngineLost)), "rank {me}");
        println!("rank {me}: its node engine was lost after {ms} ms");
    } else {
        assert_eq!(got, Err(HostError::Op(OpError::PeerUnreachable(node1))), "rank {me}");
        println!("rank {me}: node {} unreachable after {ms} ms", node1.0);
    }
    drop(world);
    std::process::exit(0);
}

/// The last rank kills itself with SIGKILL; every other rank only waits
/// to receive from it (nothing to send it, so only the engine's keepalive
/// probes can tell it is gone), and the receive must fail naming it.
fn killed_recv_only(mut world: outboard_runtime::World) {
    let (me, victim) = kill_the_last_rank_after_a_barrier(&mut world);
    let ep = world.endpoint(victim);
    let start = Instant::now();
    let rbuf = world.port().buffer(16).unwrap();
    let r = world.port().start_recv(RecvMatch::from(ep.node, ep.port, 9), rbuf).unwrap();
    let recv = world.port().wait(r);
    let ms = start.elapsed().as_millis();
    assert_eq!(recv, Err(HostError::Op(OpError::PeerUnreachable(NodeId(victim)))));
    // ULFM's MPI_ERR_PROC_FAILED, naming the rank that died.
    assert_eq!(recv.unwrap_err().failed_process(), Some(NodeId(victim)));
    println!("rank {me}: receive from peer {victim} failed after {ms} ms: unreachable");
    drop(world);
    std::process::exit(0);
}

/// Rank 0 fires junk (random bytes, truncated headers, another job's
/// packets) at every other rank's engine before each real message; the
/// receivers count exactly that junk and get every message.
fn malformed(mut world: outboard_runtime::World) {
    const ROUNDS: u32 = 30;
    let (me, n) = (world.rank(), world.size());
    if me == 0 {
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..ROUNDS {
            for r in 1..n {
                let target = world.engine_addr(r);
                let ep = world.endpoint(r);
                let wrong_job = foreign_packet(ep);
                let garbage: Vec<u8> = (0..1 + rnd() % 300).map(|_| rnd() as u8).collect();
                junk.send_to(&garbage, target).unwrap();
                junk.send_to(&wrong_job[..(rnd() as usize % 40)], target).unwrap();
                junk.send_to(&wrong_job, target).unwrap();
                world.port().send(ep, u64::from(i), &i.to_le_bytes()).unwrap();
            }
        }
        println!("rank 0: sent {ROUNDS} messages and {} junk datagrams to each rank", 3 * ROUNDS);
    } else {
        let root = world.endpoint(0);
        for i in 0..ROUNDS {
            let (_, tag, data) = world.port().recv(RecvMatch::from(root.node, root.port, u64::from(i)), 8).unwrap();
            assert_eq!((tag, data), (u64::from(i), i.to_le_bytes().to_vec()));
        }
        let (s, t) = world.stats();
        assert_eq!(s.unauthenticated, u64::from(ROUNDS), "{s:?}");
        assert_eq!(s.malformed, 2 * u64::from(ROUNDS), "{s:?}");
        assert_eq!(t.unknown_source, 3 * u64::from(ROUNDS), "{t:?}");
        println!("rank {me}: {ROUNDS} messages intact; dropped {} malformed and {} unauthenticated datagrams", s.malformed, s.unauthenticated);
    }
    world.finalize().unwrap();
}

/// A well-formed packet of another job, addressed to `to`.
fn foreign_packet(to: outboard_engine::Endpoint) -> Vec<u8> {
    let t0 = EngineInstant::ZERO;
    let mut e = Engine::new(EngineConfig::new(NodeId(0), 0x0bad_cafe, 1), VecMemory::new(), t0).unwrap();
    e.open_port(t0, PortId(0)).unwrap();
    let buf = e.dma_mut().alloc_with(b"not yours");
    e.handle_command(t0, PortId(0), EngineCommand::Send { op: OpId(1), dest: to, tag: 0, buf }).unwrap();
    let mut out = vec![0; 9000];
    let t = e.poll_transmit(t0, &mut out).unwrap();
    out.truncate(t.len);
    out
}

// ---------------------------------------------------------------- tests --

fn me() -> PathBuf {
    std::env::current_exe().unwrap()
}

fn rank_args() -> [&'static str; 6] {
    ["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"]
}

fn outboard_run(n: u32, scenario: &str, extra_env: &[(&str, &str)]) -> (Output, Duration) {
    let start = Instant::now();
    let mut c = Command::new(OUTBOARD);
    c.args(["run", "-n", &n.to_string(), "--timeout", "120", "--"]).arg(me()).args(rank_args()).env("OB_SCENARIO", scenario);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (out, start.elapsed())
}

/// `outboard run -n N --ranks-per-node R`: one node engine per R ranks.
fn outboard_run_nodes(n: u32, per_node: u32, scenario: &str, extra_env: &[(&str, &str)]) -> (Output, Duration) {
    let start = Instant::now();
    let mut c = Command::new(OUTBOARD);
    c.args(["run", "-n", &n.to_string(), "--ranks-per-node", &per_node.to_string(), "--timeout", "120", "--"])
        .arg(me())
        .args(rank_args())
        .env("OB_SCENARIO", scenario);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (out, start.elapsed())
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn tagged_messages_between_all_pairs_of_four_processes_arrive_intact() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "alltoall", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..4 {
        assert!(so.contains(&format!("[{r}] rank {r}: all 9 messages intact (Outboard)")), "rank {r}:\n{so}\n{se}");
    }
}

#[test]
fn rdma_with_a_bad_key_is_refused_across_processes() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "rdma", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[0] rank 0: good writes landed, 3 bad-key writes refused"), "{so}\n{se}");
}

#[test]
fn remote_and_local_atomics_across_four_processes() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "atomics", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[0] rank 0: 1200 fetch-adds summed exactly, old values distinct, one CAS winner, swap chain whole, 9 violations refused"), "{so}\n{se}");
}

#[test]
fn the_mcs_lock_keeps_four_processes_apart() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "lock", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[1] rank 1: 800 critical sections, counter exact"), "{so}\n{se}");
}

#[test]
fn the_mcs_lock_over_host_based_atomics_keeps_four_processes_apart() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "lock-hb", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[1] rank 1: 800 critical sections, counter exact"), "{so}\n{se}");
    assert!(so.contains("[0] rank 0: host-based lock,"), "{so}\n{se}");
}

#[test]
fn bench_atomics_prints_every_operation_and_form_and_runs_each_once() {
    let _serial = serial();
    let out = Command::new(OUTBOARD).args(["bench", "atomics", "-n", "2", "--iters", "20", "--rounds", "1"]).output().unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    for op in ["fetch-add", "swap", "cas-hit", "cas-miss"] {
        let line = so.lines().find(|l| l.starts_with(op)).unwrap_or_else(|| panic!("{op}:\n{so}"));
        let v: Vec<f64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
        assert!(v.len() == 6 && v.iter().all(|&x| x > 0.0), "{line}");
    }
    // Offloaded: 20 to settle the connection, 4 operations x 2 forms x
    // (10 warm-up + 20 timed), a reset after each of the 5 forms;
    // host-based: 4 x 3 x 30.
    assert!(se.contains("# target engine: 280 atomics executed"), "{se}");
    assert!(se.contains("host-based server: 360 served"), "{se}");
    // Open MPI's figures follow (the test command installs it), each
    // operation once with a positive latency.
    let ompi: Vec<&str> = so.lines().skip_while(|l| !l.contains("ompi (us)")).skip(1).collect();
    assert!(!ompi.is_empty(), "no Open MPI table:\n{so}");
    for op in ["fetch-add", "swap", "cas-hit", "cas-miss", "lock"] {
        let line = ompi.iter().find(|l| l.starts_with(op)).unwrap_or_else(|| panic!("Open MPI {op}:\n{so}"));
        let v: f64 = line.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0.0);
        assert!(v > 0.0, "{line}");
    }
    assert!(Command::new(OUTBOARD).args(["bench", "atomics", "-n", "3"]).output().unwrap().status.code() != Some(0));
}

#[test]
fn bench_lock_prints_every_contender_count_and_delay_and_leaves_no_lock_held() {
    let _serial = serial();
    let args = ["bench", "lock", "-n", "3", "--iters", "20", "--rounds", "1", "--delays", "0,50"];
    let out = Command::new(OUTBOARD).args(args).output().unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    let numbers = |l: &str| -> Vec<f64> { l.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect() };
    // Latency rows: 1 and 2 contenders, three forms and the factor.
    for c in ["1", "2"] {
        let line = so.lines().find(|l| l.split_whitespace().next() == Some(c) && l.split_whitespace().count() == 5);
        let line = line.unwrap_or_else(|| panic!("{c} contenders:\n{so}"));
        assert!(numbers(line).iter().all(|&x| x > 0.0), "{line}");
    }
    // Utilisation rows: per delay, both forms' rate and the home's count.
    for d in ["0", "50"] {
        let line = so.lines().filter(|l| l.split_whitespace().count() == 5).rfind(|l| l.split_whitespace().next() == Some(d));
        let line = line.unwrap_or_else(|| panic!("delay {d}:\n{so}"));
        assert!(numbers(line).iter().all(|&x| x > 0.0), "{line}");
    }
    // Open MPI's window lock with the same contenders follows.
    let ompi: Vec<&str> = so.lines().skip_while(|l| !l.contains("ompi (us)")).skip(1).collect();
    for c in ["1", "2"] {
        let line = ompi.iter().find(|l| l.split_whitespace().next() == Some(c)).unwrap_or_else(|| panic!("Open MPI, {c} contenders:\n{so}"));
        assert!(numbers(line).iter().all(|&x| x > 0.0), "{line}");
    }
    // The offloaded runs reached the home's engine.
    let executed: u64 = se.split("# home engine: ").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    assert!(executed > 0, "{se}");
}

#[test]
fn a_killed_rank_fails_its_peers_operations_in_time_and_the_launcher_names_it() {
    let _serial = serial();
    let timeout_ms = 500;
    let (out, _) = outboard_run(4, "killed", &[("OUTBOARD_PEER_TIMEOUT_MS", "500")]);
    let (so, se) = text(&out);
    assert!(!out.status.success(), "the job must fail:\n{so}\n{se}");
    assert!(se.contains("rank 3 of 4 failed: killed by signal 9"), "stderr:\n{se}");
    for r in 0..3 {
        let line = so.lines().find(|l| l.starts_with(&format!("[{r}] rank {r}: peer 3 failed after"))).unwrap_or_else(|| panic!("rank {r}:\n{so}\n{se}"));
        let ms: u64 = line.split("after ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        // A lower bound only: how late a loaded machine lets a rank notice
        // is the scheduler's business (timing belongs in benchmarks); the
        // launcher's --timeout bounds the whole job.
        assert!(ms >= timeout_ms / 2, "rank {r} noticed after {ms} ms (peer timeout {timeout_ms} ms)");
    }
}

#[test]
fn a_rank_that_only_receives_from_a_killed_rank_gets_an_error_naming_it() {
    let _serial = serial();
    // The launcher's grace (5 s by default) is far longer than the peer
    // timeout plus one probe interval: the survivors must notice
    // themselves, not be killed.
    let (out, _) = outboard_run(4, "killed_recv_only", &[("OUTBOARD_PEER_TIMEOUT_MS", "500")]);
    let (so, se) = text(&out);
    assert!(!out.status.success(), "the job must fail:\n{so}\n{se}");
    assert!(se.contains("rank 3 of 4 failed: killed by signal 9"), "stderr:\n{se}");
    for r in 0..3 {
        let want = format!("[{r}] rank {r}: receive from peer 3 failed after");
        assert!(so.lines().any(|l| l.starts_with(&want)), "rank {r}:\n{so}\n{se}");
    }
}

#[test]
fn node_engines_carry_messages_rdma_atomics_and_locks_for_two_nodes_of_two_ranks() {
    let _serial = serial();
    for (scenario, want) in [
        ("alltoall", "[3] rank 3: all 9 messages intact (Outboard)"),
        ("rdma", "[0] rank 0: good writes landed, 3 bad-key writes refused"),
        ("atomics", "[0] rank 0: 1200 fetch-adds summed exactly, old values distinct, one CAS winner, swap chain whole, 9 violations refused"),
        ("lock", "[1] rank 1: 800 critical sections, counter exact"),
    ] {
        let (out, _) = outboard_run_nodes(4, 2, scenario, &[]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{scenario}: stdout:\n{so}\nstderr:\n{se}");
        assert!(so.contains(want), "{scenario}:\n{so}\n{se}");
    }
}

#[test]
fn the_ranks_of_one_node_exchange_messages_without_a_datagram() {
    let _serial = serial();
    // Through shared memory (the default), and through the node engine's
    // same-engine path: no datagram either way, and the engine carries the
    // messages only in the second.
    for (shm, engine_carries) in [("on", false), ("off", true)] {
        let (out, _) = outboard_run_nodes(2, 2, "alltoall", &[("OUTBOARD_STATS", "stderr"), ("OUTBOARD_SHM_P2P", shm)]);
        let (so, se) = text(&out);
        assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
        assert!(so.contains("[1] rank 1: all 3 messages intact (Outboard)"), "{so}\n{se}");
        let line = se.lines().find(|l| l.contains("outboard node engine 0:") && l.contains("datagrams in")).unwrap_or_else(|| panic!("no engine line:\n{se}"));
        assert!(line.contains(": 0 datagrams in, 0 out, "), "{line}");
        let local: u64 = line.split(" out, ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert_eq!(local > 0, engine_carries, "OUTBOARD_SHM_P2P={shm}: {line}");
    }
}

#[test]
fn a_storm_of_messages_between_ranks_of_one_node_and_of_two_arrives_whole_once_and_in_order() {
    let _serial = serial();
    // One node of four (every pair through shared memory), the same
    // through the node engine, two nodes of two (node-mates through shared
    // memory, the rest through the engines), and an engine per process.
    // The messages above the eager threshold go by rendezvous wherever they
    // cross an engine, and must not be overtaken by the later eager ones.
    for (per_node, shm) in [(Some(4), "on"), (Some(4), "off"), (Some(2), "on"), (None, "on")] {
        let env = [("OUTBOARD_SHM_P2P", shm)];
        let (out, _) = match per_node {
            Some(p) => outboard_run_nodes(4, p, "storm", &env),
            None => outboard_run(4, "storm", &env),
        };
        let (so, se) = text(&out);
        let what = format!("{per_node:?} ranks per node, OUTBOARD_SHM_P2P={shm}");
        assert!(out.status.success(), "{what}: stdout:\n{so}\nstderr:\n{se}");
        for r in 0..4 {
            assert!(so.contains(&format!("[{r}] rank {r}: 39 messages intact, each once and in order")), "{what}:\n{so}\n{se}");
        }
    }
}

#[test]
fn a_killed_rank_on_a_node_engine_closes_its_port_and_its_node_goes_on() {
    let _serial = serial();
    let (out, _) = outboard_run_nodes(4, 2, "killed_port", &[("OUTBOARD_PEER_TIMEOUT_MS", "500")]);
    let (so, se) = text(&out);
    assert!(!out.status.success(), "the job must fail:\n{so}\n{se}");
    assert!(se.contains("rank 3 of 4 failed: killed by signal 9"), "stderr:\n{se}");
    for r in 0..3 {
        let want = format!("[{r}] rank {r}: rank 3's port closed after");
        assert!(so.lines().any(|l| l.starts_with(&want)), "rank {r}:\n{so}\n{se}");
    }
}

#[test]
fn a_killed_node_engine_fails_its_ranks_with_engine_lost_and_the_other_node_names_it() {
    let _serial = serial();
    let (out, _) = outboard_run_nodes(4, 2, "engine_killed", &[("OUTBOARD_PEER_TIMEOUT_MS", "500")]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in [2, 3] {
        assert!(so.contains(&format!("[{r}] rank {r}: its node engine was lost after")), "rank {r}:\n{so}\n{se}");
    }
    for r in [0, 1] {
        assert!(so.contains(&format!("[{r}] rank {r}: node 1 unreachable after")), "rank {r}:\n{so}\n{se}");
    }
}

#[test]
fn malformed_datagrams_are_counted_and_dropped_while_traffic_continues() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "malformed", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 1..4 {
        assert!(so.contains(&format!("[{r}] rank {r}: 30 messages intact; dropped 60 malformed and 30 unauthenticated")), "{so}\n{se}");
    }
}

#[test]
fn the_launcher_prefixes_output_and_kills_the_rest_after_a_failure() {
    let _serial = serial();
    // The other ranks sleep far past the grace period; had the launcher
    // not killed them, it would end at its --timeout with another message
    // (a correctness check, not a wall-clock bound).
    let out = Command::new(OUTBOARD)
        .args(["run", "-n", "3", "--grace", "0.5", "--timeout", "300", "--", "sh", "-c"])
        .arg("echo hello from $OUTBOARD_RANK of $OUTBOARD_SIZE; [ $OUTBOARD_RANK = 1 ] && exit 3; sleep 600")
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(!out.status.success());
    assert!(se.contains("rank 1 of 3 failed: exit status 3"), "{se}");
    assert!(!se.contains("did not finish within --timeout"), "the sleeping ranks were not killed after the grace: {se}");
    for r in 0..3 {
        assert!(so.contains(&format!("[{r}] hello from {r} of 3")), "{so}");
    }
    let bad = Command::new(OUTBOARD).args(["run", "-n", "2", "--", "/nonexistent/program"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(text(&bad).1.contains("cannot start"), "{}", text(&bad).1);
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn two_ranks_bootstrap_under_open_mpi_mpirun() {
    let _serial = serial();
    if Command::new("mpirun.openmpi").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
        common::skip("two_ranks_bootstrap_under_open_mpi_mpirun", "mpirun not found (apt-get install -y openmpi-bin)");
        return;
    }
    let rendezvous = format!("127.0.0.1:{}", free_port());
    let out = Command::new("mpirun.openmpi")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "OB_SCENARIO", "-x", "OUTBOARD_RENDEZVOUS"])
        .arg(me())
        .args(rank_args())
        .env("OB_SCENARIO", "alltoall")
        .env("OUTBOARD_RENDEZVOUS", &rendezvous)
        // Open MPI refuses to start as root without these in some builds.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..2 {
        assert!(so.contains(&format!("rank {r}: all 3 messages intact (OpenMpi)")), "{so}\n{se}");
    }
}

/// Removes the namespaces however the test ends.
struct Netns(Vec<String>);

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

#[test]
fn two_ranks_in_two_network_namespaces_talk_over_a_veth_pair() {
    let _serial = serial();
    let id = std::process::id() % 10_000;
    let (a, b) = (format!("obA{id}"), format!("obB{id}"));
    if !ip(&["netns", "add", &a]) {
        common::skip(
            "two_ranks_in_two_network_namespaces_talk_over_a_veth_pair",
            "cannot create network namespaces here (needs root and `ip netns`, Debian iproute2)",
        );
        return;
    }
    let _guard = Netns(vec![a.clone(), b.clone()]);
    let (va, vb) = (format!("vA{id}"), format!("vB{id}"));
    let setup: Vec<Vec<&str>> = vec![
        vec!["netns", "add", &b],
        vec!["link", "add", &va, "type", "veth", "peer", "name", &vb],
        vec!["link", "set", &va, "netns", &a],
        vec!["link", "set", &vb, "netns", &b],
        vec!["-n", &a, "addr", "add", "10.231.0.1/24", "dev", &va],
        vec!["-n", &b, "addr", "add", "10.231.0.2/24", "dev", &vb],
        vec!["-n", &a, "link", "set", &va, "up"],
        vec!["-n", &b, "link", "set", &vb, "up"],
        vec!["-n", &a, "link", "set", "lo", "up"],
        vec!["-n", &b, "link", "set", "lo", "up"],
    ];
    for cmd in &setup {
        assert!(ip(cmd), "ip {}", cmd.join(" "));
    }
    // Hydra-style environment: rank 0 (in namespace A) serves the
    // rendezvous on its veth address; rank 1 reaches it across the pair.
    let spawn = |ns: &str, rank: u32| {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(me())
            .args(rank_args())
            .env("OB_SCENARIO", "alltoall")
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", "2")
            .env("OUTBOARD_RENDEZVOUS", "10.231.0.1:29511")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let r0 = spawn(&a, 0);
    let r1 = spawn(&b, 1);
    let (o0, o1) = (r0.wait_with_output().unwrap(), r1.wait_with_output().unwrap());
    for (r, o) in [(0, &o0), (1, &o1)] {
        let (so, se) = text(o);
        assert!(o.status.success(), "rank {r}:\n{so}\n{se}");
        assert!(so.contains(&format!("rank {r}: all 3 messages intact (Hydra)")), "rank {r}:\n{so}\n{se}");
    }
}
