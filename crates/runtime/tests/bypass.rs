//! Application-bypass broadcast and reduce on real engines: both
//! delivery forms, random skews, every result checked; handler and library
//! never deadlock, whatever point of a call a signal interrupts.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use outboard_engine::{Datatype, EngineConfig, GroupId, NodeId, PortId, ReduceOp, Reduction, Stats};
use outboard_host::bypass::{Bypass, BypassStats};
use outboard_host::Port;
use outboard_runtime::interrupt::{deliver_by_signal, deliver_by_thread, signal_thread, thread_id};
use outboard_runtime::{bind_udp, Node, Progress, RtPort};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn cluster(n: u32) -> Vec<Node> {
    let sockets: Vec<UdpSocket> = (0..n).map(|_| bind_udp(LOCALHOST).unwrap()).collect();
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    sockets
        .into_iter()
        .enumerate()
        .map(|(i, s)| Node::start(EngineConfig::new(NodeId(i as u32), 0xB1A5, 7 + i as u64), s, &addrs, Progress::SPIN_THEN_BLOCK).unwrap())
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Signal,
    Thread,
}

fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// `rounds` broadcasts and reduces on 4 ranks, each call after a busy wait
/// of 0..`max_skew_us`; roots rotate; every result checked. `chaos`: a
/// thread signals the application threads at random moments too.
fn run(form: Form, rounds: u32, max_skew_us: u64, chaos: bool) -> (Vec<BypassStats>, Vec<Stats>) {
    let n = 4u32;
    let nodes = cluster(n);
    let ports: Vec<Port<RtPort>> = nodes.iter().map(|nd| Port::new(nd.open_port(PortId(0)).unwrap())).collect();
    let members: Vec<_> = ports.iter().map(|p| p.endpoint()).collect();
    let bypasses: Vec<Arc<Bypass<RtPort>>> = ports
        .into_iter()
        .enumerate()
        .map(|(r, p)| Arc::new(Bypass::new(p, members.clone(), r as u32, GroupId(3), 4).unwrap()))
        .collect();
    let tids: Arc<Vec<AtomicI32>> = Arc::new((0..n).map(|_| AtomicI32::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(n as usize));
    let red = Reduction::new(ReduceOp::Sum, Datatype::U64).unwrap();
    let threads: Vec<_> = (0..n)
        .map(|r| {
            let (b, tids, barrier) = (bypasses[r as usize].clone(), tids.clone(), barrier.clone());
            std::thread::spawn(move || {
                tids[r as usize].store(thread_id(), Ordering::SeqCst);
                let (_sig, _thr) = match form {
                    Form::Signal => (Some(deliver_by_signal(&b).unwrap()), None),
                    Form::Thread => (None, Some(deliver_by_thread(&b).unwrap())),
                };
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ (u64::from(r) << 32) ^ u64::from(rounds));
                for i in 0..rounds {
                    let root = (i / 2) % n;
                    // Every rank uses the same length: it depends on the round only.
                    let len = [1usize, 8, 2048, 16_384][(i as usize * 7 + 3) % 4];
                    spin_for(Duration::from_micros(rng.next() % (max_skew_us + 1)));
                    let want: Vec<u8> = (0..len).map(|k| (k as u32).wrapping_mul(13).wrapping_add(i) as u8).collect();
                    let mut v = if r == root { want.clone() } else { vec![0; len] };
                    b.bcast(root, &mut v).unwrap();
                    assert_eq!(v, want, "bcast {i} rank {r}");
                    spin_for(Duration::from_micros(rng.next() % (max_skew_us + 1)));
                    let mine: Vec<u8> = (0..3u64).flat_map(|k| (u64::from(r + 1) << (8 * k) ^ u64::from(i)).to_ne_bytes()).collect();
                    let mut out = vec![0u8; 24];
                    b.reduce(root, red, &mine, &mut out).unwrap();
                    if r == root {
                        for k in 0..3u64 {
                            let got = u64::from_ne_bytes(out[8 * k as usize..8 * k as usize + 8].try_into().unwrap());
                            let want: u64 = (0..u64::from(n)).map(|q| (q + 1) << (8 * k) ^ u64::from(i)).sum();
                            assert_eq!(got, want, "reduce {i} element {k}");
                        }
                    }
                }
                // Three rounds in which everyone but the root arrives
                // 50 ms late: the root's values reach the inner member
                // while it is outside the library, whatever the machine's
                // load did to the random skews above.
                for i in 0..3u32 {
                    if r != 0 {
                        spin_for(Duration::from_millis(50));
                    }
                    let want: Vec<u8> = (0..64u32).map(|k| (k * 3 + i) as u8).collect();
                    let mut v = if r == 0 { want.clone() } else { vec![0; 64] };
                    b.bcast(0, &mut v).unwrap();
                    assert_eq!(v, want, "late bcast {i} rank {r}");
                }
                b.quiesce().unwrap();
                barrier.wait();
                b.stats()
            })
        })
        .collect();
    let chaos_thread = chaos.then(|| {
        let (tids, done) = (tids.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(99);
            while !done.load(Ordering::SeqCst) {
                let t = tids[(rng.next() % 4) as usize].load(Ordering::SeqCst);
                if t != 0 {
                    signal_thread(t);
                }
                spin_for(Duration::from_micros(rng.next() % 30));
            }
        })
    });
    let st: Vec<BypassStats> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    done.store(true, Ordering::SeqCst);
    if let Some(t) = chaos_thread {
        t.join().unwrap();
    }
    let es = nodes.iter().map(|nd| nd.stats().0).collect();
    drop(bypasses);
    (st, es)
}

fn check(form: Form, st: &[BypassStats], es: &[Stats], rounds: u32, expect_raised: bool) {
    let n = st.len() as u64;
    assert_eq!(st.iter().map(|s| s.copied_out).sum::<u64>(), u64::from(rounds + 3) * (n - 1));
    assert_eq!(st.iter().map(|s| s.combined).sum::<u64>(), u64::from(rounds) * (n - 1), "each contribution folded once");
    for (r, s) in es.iter().enumerate() {
        assert!(s.interrupts_raised + s.interrupts_suppressed <= s.marked_delivered, "rank {r}: {s:?}");
    }
    let raised: u64 = es.iter().map(|s| s.interrupts_raised).sum();
    let runs: u64 = st.iter().map(|s| s.handler_runs + s.handler_busy).sum();
    assert!(!expect_raised || raised > 0, "{}: skewed inner members were interrupted", if form == Form::Signal { "signal" } else { "thread" });
    assert!(runs > 0);
}

#[test]
fn skewed_broadcasts_and_reduces_are_right_with_signal_delivery() {
    // 5,000 broadcasts and 5,000 reduces.
    let rounds = 5_000;
    let (st, es) = run(Form::Signal, rounds, 100, false);
    check(Form::Signal, &st, &es, rounds, true);
}

#[test]
fn skewed_broadcasts_and_reduces_are_right_with_a_progress_thread() {
    let rounds = 5_000;
    let (st, es) = run(Form::Thread, rounds, 100, false);
    check(Form::Thread, &st, &es, rounds, true);
}

#[test]
fn signals_at_random_points_of_every_call_never_deadlock_handler_and_library() {
    let rounds = 1_000;
    let (st, es) = run(Form::Signal, rounds, 20, true);
    check(Form::Signal, &st, &es, rounds, false);
    assert!(st.iter().map(|s| s.handler_busy).sum::<u64>() > 0, "some signals found the library busy: {st:?}");
}
