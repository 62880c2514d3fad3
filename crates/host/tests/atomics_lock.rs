//! The host library's atomics and the MCS queue lock (dissertation 5.3) on
//! real engines in the lossy test network: one thread per rank, each
//! driving the shared virtual-time network while it waits.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use outboard_engine::{EngineConfig, VecMemory};
use outboard_host::lock::{LockError, LockSlot, McsLock};
use outboard_host::testnet_io::NetIo;
use outboard_host::{
    AtomicOp, AtomicWidth, Command, CommandError, Endpoint, Event, HostBuf, HostError, Instant, MemoryError, NodeId,
    OpError, Port, PortIo, RemoteWord,
};
use outboard_testnet::{LinkConfig, Network};

/// 30 % loss, 10 % duplication, 1 % corruption, reordering jitter.
fn lossy() -> LinkConfig {
    LinkConfig::lossy(0.3, 0.1, 0.01)
}

fn network(n: u32, seed: u64) -> Arc<Mutex<Network>> {
    Arc::new(Mutex::new(Network::new(n, lossy(), seed, |node| {
        let mut c = EngineConfig::new(node, 1, 0);
        c.rto_max = std::time::Duration::from_millis(2);
        c
    })))
}

/// A [`NetIo`] that fails the test when the network's virtual clock stops
/// moving for a long run of idle calls while this rank waits: with nothing
/// left in flight, a waiter whose wake-up was lost would spin forever.
///
/// The clock also stands still while the rank that must act next is not
/// running at all (8 threads on a loaded 2-core machine): after a short
/// run of still idles a waiter sleeps a little on each, so such a rank gets
/// the CPU long before the limit, and only a real stall reaches it.
struct Watched {
    io: NetIo,
    last: Instant,
    still: u64,
}

const STILL_LIMIT: u64 = 300_000;
const STILL_BEFORE_SLEEP: u64 = 1_000;

impl PortIo for Watched {
    fn endpoint(&self) -> Endpoint {
        self.io.endpoint()
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.io.post(cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.io.poll_event()
    }
    fn now(&self) -> Instant {
        self.io.now()
    }
    fn idle(&mut self) {
        self.io.idle();
        let now = self.io.now();
        if now == self.last {
            self.still += 1;
            if self.still > STILL_BEFORE_SLEEP {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            assert!(self.still < STILL_LIMIT, "{:?}: waiting with nothing left to happen (a lost wake-up)", self.endpoint());
        } else {
            self.last = now;
            self.still = 0;
        }
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.io.alloc(len)
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.io.free(buf)
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.io.read(addr, out)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.io.write(addr, data)
    }
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.io.atomic(addr, width, op)
    }
}

fn port(net: &Arc<Mutex<Network>>, node: u32) -> Port<Watched> {
    let io = NetIo::open(net, NodeId(node)).unwrap();
    Port::new(Watched { io, last: Instant::ZERO, still: 0 })
}

fn mem(net: &Arc<Mutex<Network>>, node: u32) -> std::sync::MutexGuard<'_, Network> {
    let _ = node;
    net.lock().unwrap()
}

fn word_at(net: &Arc<Mutex<Network>>, node: u32, buf: HostBuf, at: usize) -> u64 {
    let mut g = mem(net, node);
    let m: &mut VecMemory = g.memory(NodeId(node));
    u64::from_ne_bytes(m.bytes(buf)[at..at + 8].try_into().unwrap())
}

#[test]
fn remote_local_split_phase_and_direct_atomics_agree_on_one_word() {
    let net = network(2, 3);
    let mut a = port(&net, 0);
    let mut b = port(&net, 1);
    let region = b.buffer(32).unwrap();
    let key = b.register(region).unwrap();
    let w = RemoteWord { ep: b.endpoint(), key, offset: 8, width: AtomicWidth::W64 };
    // Remote and local fetch-adds interleaved: each sees the other's.
    let mut expect = 0u64;
    for i in 1..=20u64 {
        if i % 2 == 0 {
            assert_eq!(a.fetch_add(w, i).unwrap(), expect);
        } else {
            assert_eq!(b.local_atomic(region, 8, AtomicWidth::W64, AtomicOp::FetchAdd(i)).unwrap(), expect);
        }
        expect += i;
    }
    assert_eq!(word_at(&net, 1, region, 8), expect);
    assert_eq!(a.swap(w, 7).unwrap(), expect);
    assert_eq!(a.compare_swap(w, 8, 9).unwrap(), 7, "miss");
    assert_eq!(a.compare_swap(w, 7, 9).unwrap(), 7, "hit");
    // Split-phase: several under way at once, each value returned with
    // its own request.
    let reqs: Vec<_> = (0..5).map(|_| a.start_atomic(w, AtomicOp::FetchAdd(1)).unwrap()).collect();
    let mut olds: Vec<u64> = reqs.into_iter().map(|r| a.wait(r).map(|c| match c {
        outboard_host::Completion::Atomic { value } => value,
        other => panic!("{other:?}"),
    }).unwrap()).collect();
    olds.sort_unstable();
    assert_eq!(olds, vec![9, 10, 11, 12, 13]);
    // Direct form: the value lands in a's memory, then the flag.
    let d = a.start_atomic_direct(w, AtomicOp::Swap(100)).unwrap();
    assert_eq!(a.wait_direct(d).unwrap(), 14);
    assert_eq!(b.local_atomic(region, 8, AtomicWidth::W64, AtomicOp::FetchAdd(0)).unwrap(), 100);
    // 32-bit words next to each other stay apart.
    let w32 = RemoteWord { offset: 16, width: AtomicWidth::W32, ..w };
    assert_eq!(a.fetch_add(w32, u64::from(u32::MAX)).unwrap(), 0);
    assert_eq!(a.fetch_add(RemoteWord { offset: 20, ..w32 }, 5).unwrap(), 0);
    assert_eq!(a.fetch_add(w32, 2).unwrap(), u64::from(u32::MAX), "wraps within 32 bits");
    assert_eq!(b.local_atomic(region, 16, AtomicWidth::W32, AtomicOp::FetchAdd(0)).unwrap(), 1);
    assert_eq!(b.local_atomic(region, 20, AtomicWidth::W32, AtomicOp::FetchAdd(0)).unwrap(), 5);
    // Errors: remote and local, memory untouched.
    let before = mem(&net, 1).memory(NodeId(1)).bytes(region).to_vec();
    assert!(matches!(a.fetch_add(RemoteWord { offset: 4, ..w }, 1), Err(HostError::Op(OpError::Misaligned))));
    assert!(matches!(a.fetch_add(RemoteWord { offset: 32, ..w }, 1), Err(HostError::Op(OpError::OutOfBounds))));
    assert!(matches!(a.fetch_add(RemoteWord { key: key ^ 1, ..w }, 1), Err(HostError::Op(OpError::BadKey))));
    let d = a.start_atomic_direct(RemoteWord { offset: 3, ..w }, AtomicOp::Swap(1)).unwrap();
    assert!(matches!(a.wait_direct(d), Err(HostError::Op(OpError::Misaligned))));
    assert!(matches!(b.local_atomic(region, 4, AtomicWidth::W64, AtomicOp::Swap(1)), Err(HostError::Op(OpError::Misaligned))));
    assert!(matches!(b.local_atomic(region, 28, AtomicWidth::W64, AtomicOp::Swap(1)), Err(HostError::Op(OpError::OutOfBounds))));
    assert_eq!(mem(&net, 1).memory(NodeId(1)).bytes(region), &before[..]);
    assert_eq!(mem(&net, 1).engine(NodeId(1)).stats().access_violations, 4);
}

/// What one critical section saw: who, behind whom, when (virtual time).
#[derive(Debug, Clone, Copy)]
struct Entry {
    rank: u32,
    behind: Option<u32>,
    entered: Instant,
    left: Instant,
}

/// `ranks` threads each take the lock `cycles` times, holding it and
/// pausing between takes for random numbers of network steps; returns the
/// critical sections in the order they were entered.
/// Held while a contention test's ranks run: with two of them at once on a
/// small machine (the test harness runs tests in parallel), the OS gives
/// each rank long uninterrupted slices, it takes the lock again and again
/// uncontended, and the test no longer exercises the queue (CI once saw 80
/// queued takes of 400).
static CONTENTION: Mutex<()> = Mutex::new(());

fn contend(ranks: u32, cycles: u32, seed: u64) -> Vec<Entry> {
    let _alone = CONTENTION.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let net = network(ranks, seed);
    let mut ports: Vec<_> = (0..ranks).map(|i| port(&net, i)).collect();
    let home = ranks / 2;
    let mut prepared = Vec::new();
    for p in &mut ports {
        prepared.push(McsLock::prepare(p).unwrap());
    }
    let table: Vec<LockSlot> = prepared.iter().map(|(_, _, s)| *s).collect();
    let home_words = prepared[home as usize].0;
    let inside = Arc::new(AtomicU32::new(0));
    let log = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = ports
        .into_iter()
        .zip(prepared)
        .enumerate()
        .map(|(rank, (mut port, (words, key, _)))| {
            let table = table.clone();
            let (inside, log) = (inside.clone(), log.clone());
            std::thread::spawn(move || {
                let rank = rank as u32;
                let mut lock = McsLock::from_table(table, rank, home, words, key).unwrap();
                let mut rng = seed ^ (u64::from(rank) << 32) ^ 0x9E37_79B9_7F4A_7C15;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                for _ in 0..cycles {
                    lock.acquire(&mut port).unwrap();
                    let entered = port.io_ref().now();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    assert!(matches!(lock.acquire(&mut port), Err(LockError::AlreadyHeld)));
                    for _ in 0..next() % 8 {
                        port.io().idle();
                    }
                    assert_eq!(inside.fetch_sub(1, Ordering::SeqCst), 1, "two holders");
                    let left = port.io_ref().now();
                    log.lock().unwrap().push(Entry { rank, behind: lock.queued_behind(), entered, left });
                    lock.release(&mut port).unwrap();
                    for _ in 0..next() % 16 {
                        port.io().idle();
                    }
                }
                assert!(matches!(lock.release(&mut port), Err(LockError::NotHeld)));
                assert_eq!(port.io_ref().io.repeated_events, 0);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a rank failed");
    }
    let mut log = Arc::try_unwrap(log).unwrap().into_inner().unwrap();
    log.sort_by_key(|e| e.entered);
    let mut g = net.lock().unwrap();
    let s = g.link_stats();
    assert!(s.lost > 0 && s.duplicated > 0, "the network lost and duplicated: {s:?}");
    // Every operation ran once: the lock word is nil again.
    let m: &mut VecMemory = g.memory(NodeId(home));
    assert_eq!(u64::from_ne_bytes(m.bytes(home_words)[16..24].try_into().unwrap()), 0);
    log
}

fn check(log: &[Entry], ranks: u32, cycles: u32) {
    assert_eq!(log.len() as u32, ranks * cycles, "every cycle completed: no lost wake-up");
    let mut queued = 0;
    for w in log.windows(2) {
        // One holder at a time in virtual time too.
        assert!(w[1].entered >= w[0].left, "overlapping critical sections: {w:?}");
        // FIFO: whoever queued behind a rank is the next to hold the lock.
        if let Some(b) = w[1].behind {
            assert_eq!(b, w[0].rank, "served out of queue order: {w:?}");
            queued += 1;
        }
    }
    assert!(queued > log.len() / 4, "the lock was contended ({queued} queued takes of {})", log.len());
}

#[test]
fn mcs_lock_admits_one_holder_serves_fifo_and_loses_no_wakeup_under_loss() {
    for seed in [1, 2] {
        let log = contend(4, 100, seed);
        check(&log, 4, 100);
    }
}

/// 10,000 lock/unlock cycles across 8 ranks (1,250 each) on the lossy
/// network (about a second in the default test profile).
#[test]
fn ten_thousand_cycles_across_eight_ranks() {
    let log = contend(8, 1250, 7);
    check(&log, 8, 1250);
}

#[test]
fn eight_ranks_lock_in_turn() {
    let log = contend(8, 150, 5);
    check(&log, 8, 150);
}

/// Three ranks of a lock homed at rank 0: their ports, prepared words,
/// the table and each rank's lock.
#[allow(clippy::type_complexity)]
fn three_ranks(net: &Arc<Mutex<Network>>) -> (Vec<Port<Watched>>, Vec<(HostBuf, u64, LockSlot)>, Vec<LockSlot>, Vec<McsLock>) {
    let mut ports: Vec<_> = (0..3).map(|i| port(net, i)).collect();
    let prepared: Vec<_> = ports.iter_mut().map(|p| McsLock::prepare(p).unwrap()).collect();
    let table: Vec<LockSlot> = prepared.iter().map(|(_, _, s)| *s).collect();
    let locks = prepared.iter().enumerate().map(|(r, (w, k, _))| McsLock::from_table(table.clone(), r as u32, 0, *w, *k).unwrap()).collect();
    (ports, prepared, table, locks)
}

#[test]
fn try_lock_takes_only_a_free_lock() {
    let net = network(3, 9);
    let (mut ports, prepared, table, mut locks) = three_ranks(&net);
    assert!(locks[1].try_lock(&mut ports[1]).unwrap());
    assert!(!locks[2].try_lock(&mut ports[2]).unwrap());
    assert!(!locks[0].try_lock(&mut ports[0]).unwrap(), "the home rank too");
    assert!(matches!(locks[1].try_lock(&mut ports[1]), Err(LockError::AlreadyHeld)));
    locks[1].release(&mut ports[1]).unwrap();
    assert!(locks[0].try_lock(&mut ports[0]).unwrap(), "free again");
    locks[0].release(&mut ports[0]).unwrap();
    // The lock word (home rank 0, offset 16) is nil.
    assert_eq!(word_at(&net, 0, prepared[0].0, 16), 0);
    assert!(matches!(McsLock::from_table(table, 3, 0, prepared[0].0, prepared[0].1), Err(LockError::BadTable { .. })));
}

#[test]
fn host_based_server_serves_each_request_once_in_every_waiting_mode() {
    use outboard_host::atomic_server::{AtomicServer, ServerWait};
    use std::sync::atomic::AtomicBool;
    for (seed, wait) in [(21, ServerWait::Poll), (22, ServerWait::SpinThenBlock { spins: 50 }), (23, ServerWait::Block)] {
        let net = network(4, seed);
        let mut server = port(&net, 0);
        let region = server.buffer(16).unwrap();
        let key = server.register(region).unwrap();
        let sep = server.endpoint();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let srv = std::thread::spawn(move || {
            let mut s = AtomicServer::new();
            s.expose(key, region);
            while s.serve_one(&mut server, wait, &|| st.load(Ordering::SeqCst)).unwrap() {}
            // The server's host adds locally meanwhile too: once, at the end.
            server.local_atomic(region, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1000)).unwrap();
            (s.served, server)
        });
        let clients: Vec<_> = (1..4)
            .map(|i| {
                let mut p = port(&net, i);
                std::thread::spawn(move || {
                    let mut olds = Vec::new();
                    for _ in 0..40 {
                        olds.push(p.hb_atomic(sep, key, 0, AtomicWidth::W64, AtomicOp::FetchAdd(u64::from(i))).unwrap());
                    }
                    let cas = p.hb_atomic(sep, key, 8, AtomicWidth::W32, AtomicOp::CompareSwap { compare: 0, new: u64::from(i) }).unwrap();
                    assert!(matches!(p.hb_atomic(sep, key ^ 1, 0, AtomicWidth::W64, AtomicOp::Swap(1)), Err(HostError::Op(OpError::BadKey))));
                    assert!(matches!(p.hb_atomic(sep, key, 4, AtomicWidth::W64, AtomicOp::Swap(1)), Err(HostError::Op(OpError::Misaligned))));
                    assert!(matches!(p.hb_atomic(sep, key, 16, AtomicWidth::W32, AtomicOp::Swap(1)), Err(HostError::Op(OpError::OutOfBounds))));
                    (olds, cas)
                })
            })
            .collect();
        let mut olds = Vec::new();
        let mut winners = 0;
        for c in clients {
            let (o, cas) = c.join().unwrap();
            olds.extend(o);
            winners += u32::from(cas == 0);
        }
        stop.store(true, Ordering::SeqCst);
        let (served, _server) = srv.join().unwrap();
        assert_eq!(served, 3 * (40 + 1 + 3), "{wait:?}: each request served once");
        olds.sort_unstable();
        olds.dedup();
        assert_eq!(olds.len(), 120, "{wait:?}: old values distinct");
        assert_eq!(word_at(&net, 0, region, 0), 40 * (1 + 2 + 3) + 1000);
        assert_eq!(winners, 1, "{wait:?}: one CAS winner");
        assert_eq!(mem(&net, 0).engine(NodeId(0)).stats().atomics_executed, 0, "the engine performed none of them");
    }
}

/// The lock's split-phase calls, driven from one thread for three ranks
/// (no call blocks): one holder at a time, the waiter spinning on its own
/// word until the hand-over, and calls that would interleave two
/// operations refused.
#[test]
fn split_phase_lock_hands_over_from_one_thread_and_refuses_interleaved_calls() {
    let net = network(3, 31);
    let (mut ports, prepared, _, mut locks) = three_ranks(&net);
    // Tests ranks 1 and 2 until `done` says so, stepping the network.
    let run = |locks: &mut Vec<McsLock>, ports: &mut Vec<Port<Watched>>, done: &dyn Fn(&[McsLock], [bool; 2]) -> bool| {
        for _ in 0..1_000_000 {
            let t = [locks[1].test(&mut ports[1]).unwrap(), locks[2].test(&mut ports[2]).unwrap()];
            assert!(!(locks[1].is_held() && locks[2].is_held()), "two holders");
            if done(locks, t) {
                return;
            }
            ports[0].io().idle();
        }
        panic!("the lock made no progress");
    };
    locks[1].start_acquire(&mut ports[1]).unwrap();
    run(&mut locks, &mut ports, &|l, _| l[1].is_held());
    locks[2].start_acquire(&mut ports[2]).unwrap();
    run(&mut locks, &mut ports, &|l, _| l[2].spinning());
    assert_eq!(locks[2].queued_behind(), Some(1));
    assert!(matches!(locks[2].start_release(&mut ports[2]), Err(LockError::Busy)));
    assert!(matches!(locks[2].start_try(&mut ports[2]), Err(LockError::Busy)));
    locks[2].start_acquire(&mut ports[2]).expect("starting again goes on with the acquire under way");
    assert!(matches!(locks[1].start_acquire(&mut ports[1]), Err(LockError::AlreadyHeld)));
    locks[1].start_release(&mut ports[1]).unwrap();
    assert!(matches!(locks[1].start_release(&mut ports[1]), Err(LockError::Busy)));
    run(&mut locks, &mut ports, &|l, t| t[0] && l[2].is_held());
    assert!(!locks[1].is_held());
    locks[2].start_release(&mut ports[2]).unwrap();
    run(&mut locks, &mut ports, &|l, t| t[1] && !l[2].is_held());
    assert_eq!(word_at(&net, 0, prepared[0].0, 16), 0, "the lock word is nil again");
}

/// Host-based atomics in flight together from one port, and a server
/// driven through `arrived` / `serve_arrived`, all from one thread: every
/// request is served exactly once, each reply reaches its own request.
#[test]
fn split_phase_host_based_atomics_in_flight_together_are_each_served_once() {
    use outboard_host::atomic_server::AtomicServer;
    let net = network(2, 41);
    let mut server_port = port(&net, 0);
    let mut client = port(&net, 1);
    let region = server_port.buffer(8).unwrap();
    let key = server_port.register(region).unwrap();
    let sep = server_port.endpoint();
    let mut server = AtomicServer::new();
    server.expose(key, region);
    let mut ops: Vec<_> = (0..24).map(|_| Some(client.start_hb_atomic(sep, key, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1)).unwrap())).collect();
    let mut olds = Vec::new();
    for _ in 0..1_000_000 {
        if server.arrived(&mut server_port).unwrap() {
            assert!(server.serve_arrived(&mut server_port).unwrap());
        }
        for op in ops.iter_mut() {
            if let Some(a) = op {
                if let Some(r) = client.test_hb_atomic(a) {
                    olds.push(r.unwrap());
                    *op = None;
                }
            }
        }
        if olds.len() == ops.len() && server.replies_sent(&mut server_port).unwrap() {
            break;
        }
        client.io().idle();
    }
    olds.sort_unstable();
    assert_eq!(olds, (0..24).collect::<Vec<u64>>(), "each request served once");
    assert_eq!(server.served, 24);
    assert!(!server.serve_arrived(&mut server_port).unwrap(), "nothing left to serve");
    assert_eq!(word_at(&net, 0, region, 0), 24);
}
