//! Application bypass over the test network: an interrupt thread plays the
//! runtime's delivery (poll the engines' interrupts, run the handler).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use outboard_engine::{Datatype, NodeId, ReduceOp, Reduction, Stats};
use outboard_testnet::{LinkConfig, Network};

use super::*;
use crate::testnet_io::NetIo;

type Job = (Arc<Mutex<Network>>, Vec<Arc<Bypass<NetIo>>>);

fn job(n: u32, link: LinkConfig, seed: u64) -> Job {
    let net = Arc::new(Mutex::new(Network::with_defaults(n, link, seed)));
    let ports: Vec<Port<NetIo>> = (0..n).map(|i| Port::new(NetIo::open(&net, NodeId(i)).unwrap())).collect();
    let members: Vec<Endpoint> = ports.iter().map(|p| p.endpoint()).collect();
    let bs = ports
        .into_iter()
        .enumerate()
        .map(|(r, p)| Arc::new(Bypass::new(p, members.clone(), r as u32, GroupId(5), 4).unwrap()))
        .collect();
    (net, bs)
}

/// Delivers interrupts until `stop`: the progress-thread form of delivery.
fn interrupter(net: Arc<Mutex<Network>>, bs: Vec<Arc<Bypass<NetIo>>>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let mut hit = Vec::new();
            {
                let mut n = net.lock().unwrap();
                for (i, _) in bs.iter().enumerate() {
                    while n.engine(NodeId(i as u32)).poll_interrupt().is_some() {
                        hit.push(i);
                    }
                }
                n.step();
            }
            for i in hit {
                bs[i].on_interrupt();
            }
            std::thread::yield_now();
        }
    })
}

fn stats(net: &Arc<Mutex<Network>>, node: u32) -> Stats {
    net.lock().unwrap().engine(NodeId(node)).stats().clone()
}

#[test]
fn an_absent_inner_member_forwards_in_its_handler() {
    // Binomial tree from 0: 0 -> {2, 1}, 2 -> {3}. Rank 2 stays away
    // until rank 3 has its value: only the handler can forward it.
    let (net, bs) = job(4, LinkConfig::default(), 1);
    let stop = Arc::new(AtomicBool::new(false));
    let irq = interrupter(net.clone(), bs.clone(), stop.clone());
    let leaf_done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4u32)
        .map(|r| {
            let b = bs[r as usize].clone();
            let leaf_done = leaf_done.clone();
            std::thread::spawn(move || {
                let mut v = if r == 0 { b"skewed".to_vec() } else { vec![0; 6] };
                if r == 2 {
                    while !leaf_done.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                }
                b.bcast(0, &mut v).unwrap();
                if r == 3 {
                    leaf_done.store(true, Ordering::SeqCst);
                }
                assert_eq!(v, b"skewed");
                b.quiesce().unwrap();
                b.stats()
            })
        })
        .collect();
    let st: Vec<BypassStats> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    irq.join().unwrap();
    assert_eq!(st[2].forwarded, 1);
    assert!(st[2].handler_runs >= 1, "{:?}", st[2]);
    let s2 = stats(&net, 2);
    assert_eq!((s2.marked_delivered, s2.interrupts_raised), (1, 1), "the inner member was interrupted once");
    for leaf in [1, 3] {
        assert_eq!(stats(&net, leaf).marked_delivered, 0, "leaves get unmarked messages");
    }
}

#[test]
fn reduces_and_broadcasts_with_random_roots_and_skews_are_right() {
    let n = 4u32;
    let (net, bs) = job(n, LinkConfig::lossy(0.05, 0.02, 0.0), 2);
    let stop = Arc::new(AtomicBool::new(false));
    let irq = interrupter(net.clone(), bs.clone(), stop.clone());
    let rounds = 150u32;
    let barrier = Arc::new(std::sync::Barrier::new(n as usize));
    let red = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    let checked = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..n)
        .map(|r| {
            let b = bs[r as usize].clone();
            let barrier = barrier.clone();
            let checked = checked.clone();
            std::thread::spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(r);
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                for i in 0..rounds {
                    let root = i % n;
                    let len = [1usize, 8, 2048, 16 * 1024][(i % 4) as usize];
                    // Skew: some yields before the call.
                    for _ in 0..next() % 50 {
                        std::thread::yield_now();
                    }
                    let want: Vec<u8> = (0..len).map(|k| (k as u32 * 31 + i) as u8).collect();
                    let mut v = if r == root { want.clone() } else { vec![0; len] };
                    b.bcast(root, &mut v).unwrap();
                    assert_eq!(v, want, "bcast {i} at rank {r}");
                    let mine: Vec<u8> = (0..4).flat_map(|k| (i64::from(r) * 1000 + k + i64::from(i)).to_ne_bytes()).collect();
                    let mut out = vec![0u8; 32];
                    b.reduce(root, red, &mine, &mut out).unwrap();
                    if r == root {
                        let got: Vec<i64> = out.chunks(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect();
                        let want: Vec<i64> = (0..4).map(|k| (0..i64::from(n)).map(|q| q * 1000 + k + i64::from(i)).sum()).collect();
                        assert_eq!(got, want, "reduce {i}");
                        checked.fetch_add(1, Ordering::SeqCst);
                    }
                }
                b.barrier().unwrap();
                b.quiesce().unwrap();
                barrier.wait();
                b.stats()
            })
        })
        .collect();
    let st: Vec<BypassStats> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    irq.join().unwrap();
    assert_eq!(checked.load(Ordering::SeqCst), rounds);
    // The closing barrier is one more reduce and broadcast.
    assert_eq!(st.iter().map(|s| s.copied_out).sum::<u64>(), u64::from((rounds + 1) * (n - 1)));
    assert_eq!(st.iter().map(|s| s.combined).sum::<u64>(), u64::from((rounds + 1) * (n - 1)), "each contribution folded once");
    for r in 0..n {
        let s = stats(&net, r);
        assert!(s.interrupts_raised <= s.marked_delivered, "rank {r}: {s:?}");
    }
}

#[test]
fn values_above_the_eager_limit_and_bad_roots_are_refused() {
    let (_net, bs) = job(2, LinkConfig::default(), 3);
    let mut big = vec![0; MAX_LEN as usize + 1];
    assert_eq!(bs[0].bcast(0, &mut big), Err(BypassError::TooLong { len: MAX_LEN as usize + 1, max: MAX_LEN }));
    assert_eq!(bs[0].bcast(2, &mut [0; 4]), Err(BypassError::BadRoot(2)));
}

/// Floats fold in the tree's fixed order (nearest child first, as every
/// reduction of the host library folds), whatever order the children's
/// values arrive in: with these values any other order gives another sum.
#[test]
fn a_reduce_folds_in_tree_order_whatever_the_arrival_order() {
    let n = 8u32;
    let (net, bs) = job(n, LinkConfig::default(), 3);
    let stop = Arc::new(AtomicBool::new(false));
    let irq = interrupter(net.clone(), bs.clone(), stop.clone());
    let red = Reduction::new(ReduceOp::Sum, Datatype::F64).unwrap();
    let value = |r: u32, i: u32| [1.0, 1e16, -1e16, 3.0, 1e16, 5.0, -1e16, 7.0][((r + i) % 8) as usize] * f64::from(1 + i % 3);
    // The fold of `rank`'s subtree: its own value, then each child's
    // subtree, nearest child first.
    fn subtree(n: u32, rank: u32, i: u32, value: &dyn Fn(u32, u32) -> f64) -> f64 {
        let mut acc = value(rank, i);
        for c in crate::coll::tree::binomial_children(n, 0, rank) {
            acc += subtree(n, c, i, value);
        }
        acc
    }
    let rounds = 40u32;
    let threads: Vec<_> = (0..n)
        .map(|r| {
            let b = bs[r as usize].clone();
            std::thread::spawn(move || {
                let mut rng = 0x2545_F491_4F6C_DD1Du64 ^ u64::from(r) << 7;
                let mut got = Vec::new();
                for i in 0..rounds {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Skew, so children arrive in a different order each round.
                    for _ in 0..rng % 200 {
                        std::thread::yield_now();
                    }
                    let mut out = [0u8; 8];
                    b.reduce(0, red, &value(r, i).to_ne_bytes(), &mut out).unwrap();
                    got.push(f64::from_ne_bytes(out));
                }
                b.barrier().unwrap();
                b.quiesce().unwrap();
                got
            })
        })
        .collect();
    let got: Vec<Vec<f64>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::SeqCst);
    irq.join().unwrap();
    for i in 0..rounds {
        let want = subtree(n, 0, i, &value);
        assert_eq!(got[0][i as usize].to_bits(), want.to_bits(), "round {i}: {} against {want}", got[0][i as usize]);
    }
}

#[test]
fn a_port_holds_bypass_groups_within_its_receive_budget_and_detaching_gives_room_back() {
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::default(), 3)));
    let mut port = Port::new(NetIo::open(&net, NodeId(0)).unwrap());
    let other = Port::new(NetIo::open(&net, NodeId(1)).unwrap());
    let members = vec![port.endpoint(), other.endpoint()];
    // One slot per kind: two receives kept posted per group.
    let ids: Vec<BypassId> = (0..RECV_BUDGET / 2).map(|i| port.bypass_attach(GroupId(100 + i as u64), members.clone(), 0, 1).unwrap()).collect();
    match port.bypass_attach(GroupId(99), members.clone(), 0, 1) {
        Err(BypassError::ReceiveBudget { posted, asked: 2, budget }) => assert_eq!((posted, budget), (RECV_BUDGET, RECV_BUDGET)),
        other => panic!("{:?}", other.map(|_| ())),
    }
    port.bypass_detach(ids[3]).unwrap();
    assert_eq!(port.bypass_bcast(ids[3], 0, &mut []), Err(BypassError::NoSuchGroup));
    port.bypass_attach(GroupId(99), members, 0, 1).unwrap();
}
