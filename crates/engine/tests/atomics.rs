//! Atomic remote memory operations (dissertation chapter 5) through the
//! seeded lossy test network: each executed exactly once, results a
//! sequential execution could give, violations refused before memory is
//! touched.

use std::collections::{BTreeMap, HashSet};

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use outboard_wire::{AtomicReply, AtomicRequest, Body, Header, Packet, Seq};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::{cfg, P0};

/// 30 % loss, 10 % duplication, 1 % corruption; the jitter (20 us over a
/// 5 us latency) reorders datagrams.
fn lossy() -> LinkConfig {
    LinkConfig::lossy(0.3, 0.1, 0.01)
}

/// Registers a zeroed region of `len` bytes at `node`'s port 0.
fn region(net: &mut Network, node: NodeId, len: u32, op: u64) -> (HostBuf, u64) {
    let buf = net.memory(node).alloc(len);
    net.command(node, P0, Command::Register { op: OpId(op), buf }).unwrap();
    let Some(Event { result: Ok(Completion::Registered { key }), .. }) = net.next_event(node) else { panic!("register") };
    (buf, key)
}

fn word(net: &mut Network, node: NodeId, buf: HostBuf, offset: u64, width: AtomicWidth) -> u64 {
    let b = &net.memory(node).bytes(buf)[offset as usize..];
    match width {
        AtomicWidth::W32 => u64::from(u32::from_ne_bytes(b[..4].try_into().unwrap())),
        AtomicWidth::W64 => u64::from_ne_bytes(b[..8].try_into().unwrap()),
    }
}

fn atomic(op: u64, dest: Endpoint, key: u64, offset: u64, width: AtomicWidth, atomic: AtomicOp) -> Command {
    Command::Atomic { op: OpId(op), dest, key, offset, width, atomic, ret: AtomicReturn::Event }
}

fn result_of(net: &mut Network, node: NodeId, op: OpId) -> Result<Completion, OpError> {
    common::result_of(net, node, op)
}

/// A shared counter: where it lives and how wide it is.
#[derive(Clone, Copy)]
struct Counter {
    dest: Endpoint,
    key: u64,
    buf: HostBuf,
    offset: u64,
    width: AtomicWidth,
}

#[test]
fn random_fetch_adds_on_shared_counters_sum_exactly_and_return_distinct_values() {
    for seed in [1u64, 2, 3] {
        let n = 4u32;
        let mut net = Network::new(n, lossy(), seed, cfg);
        let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
        // Three counters on three nodes, one of them 32-bit.
        let mut counters = Vec::new();
        for (i, (width, offset)) in [(AtomicWidth::W64, 8u64), (AtomicWidth::W32, 4), (AtomicWidth::W64, 0)].into_iter().enumerate() {
            let node = NodeId(i as u32);
            let (buf, key) = region(&mut net, node, 64, 1);
            counters.push(Counter { dest: eps[i], key, buf, offset, width });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // (counter, add) per operation.
        let mut issued: BTreeMap<(u32, u64), (usize, u64)> = BTreeMap::new();
        let mut results: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
        let mut next_op = 100u64;
        let total = 400;
        let mut done = 0;
        while done < total {
            // Keep each node busy with up to 6 operations at a time.
            for i in 0..n {
                let mine = issued.keys().filter(|(node, _)| *node == i).count();
                if mine < 6 && next_op < 100 + total as u64 {
                    let c = rng.gen_range(0..counters.len());
                    let add = rng.gen_range(1..1000u64);
                    let k = counters[c];
                    net.command(NodeId(i), P0, atomic(next_op, k.dest, k.key, k.offset, k.width, AtomicOp::FetchAdd(add))).unwrap();
                    issued.insert((i, next_op), (c, add));
                    next_op += 1;
                }
            }
            assert!(net.step() || issued.is_empty(), "stalled");
            for i in 0..n {
                for e in net.take_events(NodeId(i)) {
                    let (c, add) = issued.remove(&(i, e.op.0)).expect("an issued operation");
                    let Ok(Completion::Atomic { value }) = e.result else { panic!("{e:?}") };
                    results.entry(c).or_default().push((value, add));
                    done += 1;
                }
            }
        }
        for (c, mut ops) in results {
            let k = counters[c];
            // Sorted by old value, each operation's old value plus its
            // addend is the next one's old value: one sequential order in
            // which every operation ran exactly once.
            ops.sort_unstable();
            let distinct: HashSet<u64> = ops.iter().map(|o| o.0).collect();
            assert_eq!(distinct.len(), ops.len(), "seed {seed}: old values repeat");
            assert_eq!(ops[0].0, 0);
            for w in ops.windows(2) {
                assert_eq!(w[0].0 + w[0].1, w[1].0, "seed {seed}: a gap or overlap in the chain");
            }
            let sum: u64 = ops.iter().map(|o| o.1).sum();
            assert_eq!(word(&mut net, k.dest.node, k.buf, k.offset, k.width), sum, "seed {seed}");
            // Nothing but the counter changed.
            let bytes = net.memory(k.dest.node).bytes(k.buf).to_vec();
            let w = k.width.bytes() as usize;
            let o = k.offset as usize;
            assert!(bytes[..o].iter().chain(&bytes[o + w..]).all(|&b| b == 0));
        }
        let executed: u64 = (0..n).map(|i| net.engine(NodeId(i)).stats().atomics_executed).sum();
        assert_eq!(executed, total as u64, "each executed once");
        assert!(net.link_stats().lost > 0 && net.link_stats().duplicated > 0, "the network did lose and duplicate");
    }
}

/// One completed operation on a single word, for the linearizability check.
#[derive(Debug, Clone, Copy)]
struct Done {
    invoked: Instant,
    answered: Instant,
    op: AtomicOp,
    old: u64,
}

/// Whether some total order of `history`, consistent with real time (an
/// operation answered before another was invoked comes first), gives every
/// operation the old value it returned, starting from `init` (Wing and
/// Gong's search, with the visited (done-set, value) states remembered).
fn linearizable(history: &[Done], init: u64, width: AtomicWidth) -> bool {
    assert!(history.len() <= 64);
    fn search(h: &[Done], done: u64, value: u64, width: AtomicWidth, seen: &mut HashSet<(u64, u64)>) -> bool {
        if done.count_ones() as usize == h.len() {
            return true;
        }
        if !seen.insert((done, value)) {
            return false;
        }
        let pending = |i: usize| done & (1 << i) == 0;
        // The earliest answer among the operations not yet placed: one
        // invoked after it cannot come next.
        let horizon = (0..h.len()).filter(|&i| pending(i)).map(|i| h[i].answered).min().expect("one pending");
        (0..h.len()).filter(|&i| pending(i) && h[i].invoked <= horizon).any(|i| {
            h[i].old == value && search(h, done | (1 << i), h[i].op.apply(width, value), width, seen)
        })
    }
    search(history, 0, init, width, &mut HashSet::new())
}

#[test]
fn the_checker_refuses_a_history_no_order_explains() {
    let t = |us: u64| Instant::from_nanos(us * 1000);
    let swap = |a, b, v, old| Done { invoked: t(a), answered: t(b), op: AtomicOp::Swap(v), old };
    // Two overlapping swaps: either order explains it.
    assert!(linearizable(&[swap(0, 10, 1, 0), swap(1, 9, 2, 1)], 0, AtomicWidth::W64));
    // Both saw the initial value: one of them must have seen the other's.
    assert!(!linearizable(&[swap(0, 10, 1, 0), swap(1, 9, 2, 0)], 0, AtomicWidth::W64));
    // Real time forbids the only order that explains it.
    assert!(!linearizable(&[swap(0, 1, 1, 2), swap(2, 3, 2, 0)], 0, AtomicWidth::W64));
    let cas = Done { invoked: t(0), answered: t(1), op: AtomicOp::CompareSwap { compare: 5, new: 6 }, old: 0 };
    assert!(linearizable(&[cas, swap(2, 3, 7, 0)], 0, AtomicWidth::W64), "a failed CAS changes nothing");
}

#[test]
fn concurrent_cas_and_swap_histories_are_linearizable() {
    for seed in 10u64..16 {
        let n = 3u32;
        let mut net = Network::new(n, lossy(), seed, cfg);
        let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
        let width = if seed % 2 == 0 { AtomicWidth::W64 } else { AtomicWidth::W32 };
        let (buf, key) = region(&mut net, NodeId(1), 16, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut under_way: BTreeMap<(u32, u64), (Instant, AtomicOp)> = BTreeMap::new();
        let mut history = Vec::new();
        let mut next_op = 1u64;
        let total = 36u64;
        while (history.len() as u64) < total {
            for i in 0..n {
                let mine = under_way.keys().filter(|(node, _)| *node == i).count();
                if mine < 2 && next_op <= total && rng.gen_bool(0.3) {
                    // Few values, so that CAS hits as well as misses.
                    let v = rng.gen_range(0..4u64);
                    let op = if rng.gen_bool(0.5) {
                        AtomicOp::Swap(v)
                    } else {
                        AtomicOp::CompareSwap { compare: rng.gen_range(0..4), new: v }
                    };
                    net.command(NodeId(i), P0, atomic(next_op, eps[1], key, 8, width, op)).unwrap();
                    under_way.insert((i, next_op), (net.now(), op));
                    next_op += 1;
                }
            }
            assert!(net.step() || under_way.is_empty(), "stalled");
            for i in 0..n {
                for e in net.take_events(NodeId(i)) {
                    let (invoked, op) = under_way.remove(&(i, e.op.0)).expect("issued");
                    let Ok(Completion::Atomic { value }) = e.result else { panic!("{e:?}") };
                    history.push(Done { invoked, answered: net.now(), op, old: value });
                }
            }
        }
        assert!(linearizable(&history, 0, width), "seed {seed}: {history:#?}");
        // The final value is the one the last operation of some such order
        // left: checked by adding a read (fetch-add 0) after everything.
        net.command(NodeId(0), P0, atomic(999, eps[1], key, 8, width, AtomicOp::FetchAdd(0))).unwrap();
        let Ok(Completion::Atomic { value }) = result_of(&mut net, NodeId(0), OpId(999)) else { panic!() };
        assert_eq!(value, word(&mut net, NodeId(1), buf, 8, width));
        let at = net.now();
        history.push(Done { invoked: at, answered: at, op: AtomicOp::FetchAdd(0), old: value });
        assert!(linearizable(&history, 0, width), "seed {seed}: final value");
    }
}

#[test]
fn violations_get_an_error_leave_memory_untouched_and_are_counted() {
    let mut net = Network::new(2, lossy(), 5, cfg);
    let _a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let (buf, key) = region(&mut net, NodeId(1), 64, 1);
    net.memory(NodeId(1)).bytes_mut(buf).fill(0xEE);
    let w64 = AtomicWidth::W64;
    let w32 = AtomicWidth::W32;
    let cases = [
        (key ^ 1, 0, w64, OpError::BadKey),
        (key, 4, w64, OpError::Misaligned),
        (key, 2, w32, OpError::Misaligned),
        (key, 60, w64, OpError::OutOfBounds),
        (key, 64, w32, OpError::OutOfBounds),
        (key, u64::MAX - 3, w64, OpError::OutOfBounds),
    ];
    for (i, &(k, offset, width, err)) in cases.iter().enumerate() {
        for (j, op) in [AtomicOp::FetchAdd(1), AtomicOp::Swap(1), AtomicOp::CompareSwap { compare: 0xEEEE_EEEE, new: 1 }].into_iter().enumerate() {
            let id = 10 * i as u64 + j as u64 + 10;
            net.command(NodeId(0), P0, atomic(id, b, k, offset, width, op)).unwrap();
            assert_eq!(result_of(&mut net, NodeId(0), OpId(id)), Err(err), "case {i}, op {j}");
        }
    }
    assert!(net.memory(NodeId(1)).bytes(buf).iter().all(|&x| x == 0xEE), "memory untouched");
    let s = net.engine(NodeId(1)).stats().clone();
    assert_eq!(s.access_violations, 3 * cases.len() as u64);
    assert_eq!(s.atomics_executed, 0);

    // A closed port: its incarnation is gone.
    net.close_port(NodeId(1), P0);
    net.command(NodeId(0), P0, atomic(100, b, key, 0, w64, AtomicOp::FetchAdd(1))).unwrap();
    assert_eq!(result_of(&mut net, NodeId(0), OpId(100)), Err(OpError::PortGone));
    assert_eq!(net.engine(NodeId(1)).stats().rejected_port, 1);
    // A port that never opens: refused as not ready until the retry
    // timeout, never executed.
    let later = Endpoint { node: NodeId(1), port: PortId(1), gen: 1 };
    net.command(NodeId(0), P0, atomic(101, later, key, 0, w64, AtomicOp::FetchAdd(1))).unwrap();
    assert_eq!(result_of(&mut net, NodeId(0), OpId(101)), Err(OpError::NotReadyTimeout));
    assert!(net.engine(NodeId(1)).stats().rejected_not_ready >= 1);
    assert!(net.memory(NodeId(1)).bytes(buf).iter().all(|&x| x == 0xEE), "memory untouched");
    assert_eq!(net.engine(NodeId(1)).stats().atomics_executed, 0);
}

#[test]
fn a_request_to_a_port_not_open_yet_runs_once_it_opens() {
    let mut net = Network::new(2, lossy(), 6, cfg);
    net.open_port(NodeId(0), P0).unwrap();
    // Port 1 of node 1 will open as incarnation 1; its region key is
    // known only after, so use port 0's for the refusal and a fresh
    // request for the real run.
    let target = Endpoint { node: NodeId(1), port: P0, gen: 1 };
    net.command(NodeId(0), P0, atomic(1, target, 7, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1))).unwrap();
    net.run_for(Duration::from_millis(2)).unwrap();
    assert!(net.take_events(NodeId(0)).is_empty(), "still retrying");
    assert!(net.engine(NodeId(1)).stats().rejected_not_ready >= 1);
    net.open_port(NodeId(1), P0).unwrap();
    // Opened: the retried request reaches the port and is judged on its
    // key (which it guessed wrong), once.
    assert_eq!(result_of(&mut net, NodeId(0), OpId(1)), Err(OpError::BadKey));
    assert_eq!(net.engine(NodeId(1)).stats().access_violations, 1);
}

#[test]
fn the_direct_form_writes_the_value_then_the_flag() {
    let mut net = Network::new(2, lossy(), 7, cfg);
    net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let (buf, key) = region(&mut net, NodeId(1), 8, 1);
    net.memory(NodeId(1)).bytes_mut(buf).copy_from_slice(&41u64.to_ne_bytes());
    let out = net.memory(NodeId(0)).alloc(16);
    let ret = AtomicReturn::Direct { value: out.addr, flag: out.addr + 8 };
    let cmd = Command::Atomic { op: OpId(5), dest: b, key, offset: 0, width: AtomicWidth::W64, atomic: AtomicOp::FetchAdd(1), ret };
    net.command(NodeId(0), P0, cmd).unwrap();
    assert_eq!(result_of(&mut net, NodeId(0), OpId(5)), Ok(Completion::Atomic { value: 41 }));
    let got = net.memory(NodeId(0)).bytes(out).to_vec();
    assert_eq!(u64::from_ne_bytes(got[..8].try_into().unwrap()), 41);
    assert_eq!(u64::from_ne_bytes(got[8..].try_into().unwrap()), 1);
    assert_eq!(word(&mut net, NodeId(1), buf, 0, AtomicWidth::W64), 42);
}

#[test]
fn outstanding_atomics_per_peer_stay_within_the_window_and_the_table_within_its_size() {
    let mut net = Network::new(2, lossy(), 8, |n| {
        let mut c = cfg(n);
        c.send_tokens = 1000;
        c
    });
    net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let (buf, key) = region(&mut net, NodeId(1), 8, 1);
    let total = 5 * u64::from(ATOMIC_WINDOW) + 7;
    for i in 0..total {
        net.command(NodeId(0), P0, atomic(i, b, key, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1))).unwrap();
    }
    let mut olds = HashSet::new();
    let mut max_out = 0;
    let mut max_table = 0;
    while (olds.len() as u64) < total {
        assert!(net.step(), "stalled");
        max_out = max_out.max(net.engine(NodeId(0)).atomics_outstanding(NodeId(1)));
        max_table = max_table.max(net.engine(NodeId(1)).atomic_table_len(NodeId(0)));
        for e in net.take_events(NodeId(0)) {
            let Ok(Completion::Atomic { value }) = e.result else { panic!("{e:?}") };
            assert!(olds.insert(value));
        }
    }
    assert_eq!(max_out, ATOMIC_WINDOW as usize, "the window filled and never overflowed");
    assert!(max_table <= ATOMIC_WINDOW as usize, "{max_table}");
    assert_eq!(word(&mut net, NodeId(1), buf, 0, AtomicWidth::W64), total);
}

#[test]
fn operations_on_a_dead_peer_fail_queued_ones_included() {
    let mut net = Network::new(2, LinkConfig::default(), 9, |n| {
        let mut c = cfg(n);
        c.send_tokens = 1000;
        c
    });
    net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    let (_, key) = region(&mut net, NodeId(1), 8, 1);
    net.kill(NodeId(1));
    let total = u64::from(ATOMIC_WINDOW) + 10;
    for i in 0..total {
        net.command(NodeId(0), P0, atomic(i, b, key, 0, AtomicWidth::W64, AtomicOp::FetchAdd(1))).unwrap();
    }
    let mut failed = 0;
    net.run_until("all fail", |n| {
        for e in n.take_events(NodeId(0)) {
            assert_eq!(e.result, Err(OpError::PeerUnreachable(NodeId(1))));
            failed += 1;
        }
        failed == total
    })
    .unwrap();
    assert!(net.engine(NodeId(0)).is_quiet());
}

/// One sequenced packet from node 0 (incarnation 3) to node 1.
fn packet(seq: u32, body: Body<'_>) -> Vec<u8> {
    let kind = body.repr().kind();
    let h = Header { kind, flags: 0, src_node: 0, dst_node: 1, boot: 3, seq: Seq(seq), ack: Seq(0), horizon: Seq(0) };
    let p = Packet { header: h, body };
    let mut b = vec![0; p.buffer_len()];
    p.emit(&cfg(NodeId(0)).mac_key(), &mut b).unwrap();
    b
}

fn replies(e: &mut Engine<VecMemory>, t: Instant) -> Vec<AtomicReply> {
    let mut out = vec![0u8; DEFAULT_MTU];
    let mut got = Vec::new();
    while let Some(tx) = e.poll_transmit(t, &mut out) {
        if let Body::AtomicReply(r) = Packet::parse(&out[..tx.len], &cfg(NodeId(1)).mac_key()).unwrap().body {
            got.push(r);
        }
    }
    got
}

#[test]
fn a_request_arriving_twice_is_answered_from_the_reply_table_not_run_again() {
    let t = Instant::from_nanos(1_000);
    let mut e = Engine::new(cfg(NodeId(1)), VecMemory::new(), t).unwrap();
    let ep = e.open_port(t, P0).unwrap();
    let buf = e.dma_mut().alloc(8);
    e.handle_command(t, P0, Command::Register { op: OpId(1), buf }).unwrap();
    let Some(Event { result: Ok(Completion::Registered { key }), .. }) = e.poll_event() else { panic!() };
    let req = |seq, add| AtomicRequest {
        src_port: 0,
        dst_port: 0,
        src_gen: 1,
        dst_gen: ep.gen,
        seq,
        key,
        offset: 0,
        width: AtomicWidth::W64,
        op: AtomicOp::FetchAdd(add),
    };
    // The same request (number 0) in two connection packets, e.g. sent
    // again by an initiator that lost its state of the first.
    let _ = e.take_work();
    e.handle_packet(t, NodeId(0), &packet(0, Body::AtomicRequest(req(0, 5))));
    assert_eq!(e.take_work().atomics, 1, "the read-modify-write is reported to the cost model");
    e.handle_packet(t, NodeId(0), &packet(1, Body::AtomicRequest(req(0, 5))));
    assert_eq!(e.take_work().atomics, 0, "a repeat answered from the table is no read-modify-write");
    let r = replies(&mut e, t);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|r| r.seq == 0 && r.result == Ok(0)), "{r:?}");
    assert_eq!(u64::from_ne_bytes(e.dma().bytes(buf).try_into().unwrap()), 5, "added once");
    assert_eq!(e.stats().atomics_executed, 1);
    assert_eq!(e.stats().atomic_duplicates, 1);
    // Requests 1 ..= WINDOW: number 0 drops out of the table, and coming
    // again it is refused as stale rather than run again.
    for s in 1..=ATOMIC_WINDOW {
        e.handle_packet(t, NodeId(0), &packet(1 + s, Body::AtomicRequest(req(s, 1))));
    }
    assert_eq!(e.stats().atomics_executed, 1 + u64::from(ATOMIC_WINDOW));
    assert_eq!(e.atomic_table_len(NodeId(0)), ATOMIC_WINDOW as usize);
    e.handle_packet(t, NodeId(0), &packet(2 + ATOMIC_WINDOW, Body::AtomicRequest(req(0, 5))));
    assert_eq!(e.stats().atomic_stale, 1);
    assert_eq!(e.stats().atomics_executed, 1 + u64::from(ATOMIC_WINDOW));
    assert_eq!(u64::from_ne_bytes(e.dma().bytes(buf).try_into().unwrap()), 5 + u64::from(ATOMIC_WINDOW));
    // A reply to nothing outstanding is ignored by an initiator.
    let stray = AtomicReply { dst_port: 0, dst_gen: ep.gen, seq: 9, result: Ok(1) };
    e.handle_packet(t, NodeId(0), &packet(3 + ATOMIC_WINDOW, Body::AtomicReply(stray)));
    assert!(e.poll_event().is_none());
}
