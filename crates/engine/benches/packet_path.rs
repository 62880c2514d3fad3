//! Cost per packet of the engine's send and receive paths.
//!
//! Two engines are wired back to back in memory (no network, no clock).
//! The *send* figure times `poll_transmit` producing data packets of a
//! message already queued (header, DMA read of the payload from host
//! memory, MAC). The *receive* figure times `handle_packet` on those
//! packets at the receiver (parse, MAC check, connection, matching, DMA
//! write into the posted buffer). Acknowledgements and completions are handled
//! between timed sections.

use std::time::{Duration, Instant as Wall};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use outboard_engine::*;

const BATCH: u32 = 16;

struct Pair {
    a: Engine<VecMemory>,
    b: Engine<VecMemory>,
    eb: Endpoint,
    src: HostBuf,
    dst: HostBuf,
    buf: Vec<u8>,
    now: u64,
    op: u64,
}

impl Pair {
    fn new(payload: u32) -> Pair {
        let mtu = payload as usize + 88;
        let mk = |n| {
            let mut c = EngineConfig::new(NodeId(n), 1, u64::from(n + 1));
            c.mtu = mtu.max(256);
            c.send_tokens = 1024;
            c.recv_tokens = 1024;
            Engine::new(c, VecMemory::new(), Instant::ZERO).unwrap()
        };
        let (mut a, mut b) = (mk(0), mk(1));
        a.open_port(Instant::ZERO, PortId(0)).unwrap();
        let eb = b.open_port(Instant::ZERO, PortId(0)).unwrap();
        let src = a.dma_mut().alloc_with(&vec![0xA5; (payload * BATCH) as usize]);
        let dst = b.dma_mut().alloc(payload * BATCH);
        Pair { a, b, eb, src, dst, buf: vec![0; 65_536], now: 0, op: 0 }
    }

    fn tick(&mut self) -> Instant {
        self.now += 1_000;
        Instant::from_nanos(self.now)
    }

    /// Queues one message of BATCH packets (and the receive for it).
    fn queue(&mut self) {
        let t = self.tick();
        self.op += 1;
        let op = OpId(self.op);
        self.b.handle_command(t, PortId(0), Command::Recv { op, matching: RecvMatch::any(), buf: self.dst }).unwrap();
        self.a.handle_command(t, PortId(0), Command::Send { op, dest: self.eb, tag: 0, buf: self.src }).unwrap();
    }

    /// Sends the queued packets; returns them and the time spent.
    fn transmit(&mut self) -> (Vec<Vec<u8>>, Duration) {
        let t = self.tick();
        let mut out = Vec::with_capacity(BATCH as usize);
        let start = Wall::now();
        while let Some(tx) = self.a.poll_transmit(t, &mut self.buf) {
            out.push(self.buf[..tx.len].to_vec());
        }
        let spent = start.elapsed();
        (out, spent)
    }

    /// Delivers packets to b; returns the time spent.
    fn receive(&mut self, pkts: &[Vec<u8>]) -> Duration {
        let t = self.tick();
        let start = Wall::now();
        for p in pkts {
            self.b.handle_packet(t, NodeId(0), p);
        }
        start.elapsed()
    }

    /// Returns b's acknowledgements to a and drains completions.
    fn settle(&mut self) {
        let t = self.tick();
        while let Some(tx) = self.b.poll_transmit(t, &mut self.buf) {
            self.a.handle_packet(t, NodeId(1), &self.buf[..tx.len]);
        }
        while self.a.poll_transmit(t, &mut self.buf).is_some() {}
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_packet");
    for payload in [64u32, 1024, 8192] {
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("send", payload), &payload, |bch, &payload| {
            let mut p = Pair::new(payload);
            bch.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    p.queue();
                    let (pkts, d) = p.transmit();
                    spent += d;
                    done += pkts.len() as u64;
                    p.receive(&pkts);
                    p.settle();
                }
                spent.mul_f64(iters as f64 / done as f64)
            })
        });
        g.bench_with_input(BenchmarkId::new("receive", payload), &payload, |bch, &payload| {
            let mut p = Pair::new(payload);
            bch.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    p.queue();
                    let (pkts, _) = p.transmit();
                    spent += p.receive(&pkts);
                    done += pkts.len() as u64;
                    p.settle();
                }
                spent.mul_f64(iters as f64 / done as f64)
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
