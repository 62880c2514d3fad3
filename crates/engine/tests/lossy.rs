//! Exactly-once, in-order delivery under loss, duplication, reordering and
//! corruption: the engine's core promise, checked on 16 engines.

use std::collections::BTreeMap;

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PORT: PortId = PortId(0);
const MAX_LEN: u32 = 64 * 1024;

/// The byte at `i` of message `seq` from `src` to `dst`.
fn pattern(src: u32, dst: u32, seq: u64, i: usize) -> u8 {
    let x = (u64::from(src) << 40) ^ (u64::from(dst) << 32) ^ seq.wrapping_mul(0x9E37_79B9) ^ (i as u64).wrapping_mul(31);
    (x ^ (x >> 7) ^ (x >> 13)) as u8
}

/// Sizes from 0 B to 64 KiB, log-uniform so that small and large messages
/// are both common.
fn random_len(rng: &mut ChaCha8Rng) -> u32 {
    if rng.gen_bool(0.02) {
        return MAX_LEN;
    }
    let bits: f64 = rng.gen_range(0.0..16.0);
    (2f64.powf(bits) as u32 - 1).min(MAX_LEN)
}

struct Traffic {
    nodes: u32,
    total: u64,
    issued: u64,
    received: u64,
    sent_ok: u64,
    outstanding: Vec<BTreeMap<u64, HostBuf>>,
    next_seq: BTreeMap<(u32, u32), u64>,
    expect_seq: BTreeMap<(u32, u32), u64>,
    recv_bufs: Vec<BTreeMap<u64, HostBuf>>,
    next_op: u64,
    rng: ChaCha8Rng,
    endpoints: Vec<Endpoint>,
}

impl Traffic {
    fn new(net: &mut Network, nodes: u32, total: u64, seed: u64) -> Traffic {
        let mut t = Traffic {
            nodes,
            total,
            issued: 0,
            received: 0,
            sent_ok: 0,
            outstanding: vec![BTreeMap::new(); nodes as usize],
            next_seq: BTreeMap::new(),
            expect_seq: BTreeMap::new(),
            recv_bufs: vec![BTreeMap::new(); nodes as usize],
            next_op: 1,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xABCD),
            endpoints: Vec::new(),
        };
        for n in 0..nodes {
            t.endpoints.push(net.open_port(NodeId(n), PORT).unwrap());
        }
        for n in 0..nodes {
            for _ in 0..24 {
                t.post_recv(net, n);
            }
        }
        t
    }

    fn op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    fn post_recv(&mut self, net: &mut Network, n: u32) {
        let buf = net.memory(NodeId(n)).alloc(MAX_LEN);
        let op = self.op();
        net.command(NodeId(n), PORT, Command::Recv { op, matching: RecvMatch::any(), buf }).unwrap();
        self.recv_bufs[n as usize].insert(op.0, buf);
    }

    fn issue(&mut self, net: &mut Network) {
        for n in 0..self.nodes {
            while self.outstanding[n as usize].len() < 12 && self.issued < self.total {
                let mut dst = self.rng.gen_range(0..self.nodes - 1);
                if dst >= n {
                    dst += 1;
                }
                let len = random_len(&mut self.rng);
                let seq = {
                    let s = self.next_seq.entry((n, dst)).or_insert(0);
                    *s += 1;
                    *s - 1
                };
                let data: Vec<u8> = (0..len as usize).map(|i| pattern(n, dst, seq, i)).collect();
                let buf = net.memory(NodeId(n)).alloc_with(&data);
                let op = self.op();
                let dest = self.endpoints[dst as usize];
                net.command(NodeId(n), PORT, Command::Send { op, dest, tag: seq, buf }).unwrap();
                self.outstanding[n as usize].insert(op.0, buf);
                self.issued += 1;
            }
        }
    }

    fn absorb(&mut self, net: &mut Network) {
        for n in 0..self.nodes {
            for e in net.take_events(NodeId(n)) {
                if let Some(buf) = self.outstanding[n as usize].remove(&e.op.0) {
                    assert_eq!(e.result, Ok(Completion::Sent), "send failed (seed {})", net.seed());
                    net.memory(NodeId(n)).free(buf);
                    self.sent_ok += 1;
                    continue;
                }
                let buf = self.recv_bufs[n as usize].remove(&e.op.0).expect("event for a known receive");
                let Ok(Completion::Received { src, tag, len }) = e.result else {
                    panic!("receive failed: {:?} (seed {})", e.result, net.seed())
                };
                let key = (src.node.0, n);
                let expect = self.expect_seq.entry(key).or_insert(0);
                assert_eq!(tag, *expect, "out of order or duplicate from {src:?} to {n} (seed {})", net.seed());
                *expect += 1;
                let got = &net.memory(NodeId(n)).bytes(buf)[..len as usize];
                assert!(
                    got.iter().enumerate().all(|(i, b)| *b == pattern(src.node.0, n, tag, i)),
                    "payload damaged (seed {})",
                    net.seed()
                );
                net.memory(NodeId(n)).free(buf);
                self.received += 1;
                self.post_recv(net, n);
            }
        }
    }

    fn run(&mut self, net: &mut Network) {
        let result = net.run_until("all messages delivered and acknowledged", |net| {
            self.absorb(net);
            self.issue(net);
            self.received == self.total && self.sent_ok == self.total
        });
        if let Err(e) = result {
            panic!("{e}; issued {} received {} sent {}", self.issued, self.received, self.sent_ok);
        }
        for ((s, d), n) in &self.next_seq {
            assert_eq!(self.expect_seq.get(&(*s, *d)), Some(n), "messages lost from {s} to {d}");
        }
    }
}

fn lossy_engines(nodes: u32, seed: u64) -> Network {
    lossy_engines_with(nodes, seed, Duration::ZERO)
}

fn lossy_engines_with(nodes: u32, seed: u64, ack_delay: Duration) -> Network {
    Network::new(nodes, LinkConfig::lossy(0.30, 0.10, 0.01), seed, move |node| {
        let mut c = EngineConfig::new(node, 0x5EED, 0);
        c.ack_delay = ack_delay;
        c.rto_initial = Duration::from_micros(100);
        c.rto_max = Duration::from_millis(2);
        c.peer_timeout = Duration::from_secs(10);
        c
    })
}

#[test]
fn hundred_thousand_messages_among_16_engines_arrive_exactly_once_in_order_at_30_percent_loss() {
    let seed = 0x000B_0A2D;
    let mut net = lossy_engines(16, seed);
    let mut t = Traffic::new(&mut net, 16, 100_000, seed);
    t.run(&mut net);
    let ls = net.link_stats();
    assert!(ls.lost > 0 && ls.duplicated > 0 && ls.corrupted > 0);
    let malformed: u64 = (0..16).map(|n| net.engine(NodeId(n)).stats().malformed).sum();
    let dups: u64 = (0..16).map(|n| net.engine(NodeId(n)).stats().duplicates).sum();
    assert!(malformed > 0, "corrupted datagrams must be caught by the checksum");
    assert!(dups > 0);
    eprintln!("links: {ls:?}; engines dropped {malformed} malformed and {dups} duplicate datagrams");
}

#[test]
fn exactly_once_holds_for_many_seeds_on_a_small_cluster() {
    for seed in 0..12 {
        let mut net = lossy_engines(4, seed);
        let mut t = Traffic::new(&mut net, 4, 400, seed);
        t.run(&mut net);
    }
}

#[test]
fn exactly_once_holds_with_delayed_acknowledgements() {
    for seed in 0..12 {
        let mut net = lossy_engines_with(4, seed, Duration::from_micros(40));
        let mut t = Traffic::new(&mut net, 4, 400, seed);
        t.run(&mut net);
    }
    let seed = 77;
    let mut net = lossy_engines_with(16, seed, Duration::from_micros(40));
    let mut t = Traffic::new(&mut net, 16, 10_000, seed);
    t.run(&mut net);
}

#[test]
fn exactly_once_holds_when_timeouts_resend_one_probe() {
    // The runtime's setting: a timeout resends only the oldest packet and
    // is undone when the peer had the originals.
    for seed in 0..12 {
        let mut net = Network::new(4, LinkConfig::lossy(0.30, 0.10, 0.01), seed, move |node| {
            let mut c = EngineConfig::new(node, 0x5EED, 0);
            c.timeout_probe = true;
            c.rto_initial = Duration::from_micros(100);
            c.rto_max = Duration::from_millis(2);
            c.peer_timeout = Duration::from_secs(10);
            c
        });
        let mut t = Traffic::new(&mut net, 4, 400, seed);
        t.run(&mut net);
    }
}
