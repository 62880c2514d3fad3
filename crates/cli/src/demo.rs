//! `outboard demo`: the engines over the test network, on one machine.

use std::time::Instant as WallClock;

use anyhow::bail;
use outboard_engine::{Command, Completion, Duration, EngineConfig, HostBuf, NodeId, OpId, PortId, RecvMatch};
use outboard_testnet::{LinkConfig, Network};

/// Arguments of `outboard demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of engines (nodes).
    #[arg(short = 'n', long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=1024))]
    nodes: u32,
    /// Messages each node sends to each other node.
    #[arg(long, default_value_t = 20)]
    messages: u32,
    /// Message size in bytes.
    #[arg(long, default_value_t = 16_384)]
    size: u32,
    /// Probability a datagram is lost.
    #[arg(long, default_value_t = 0.1)]
    loss: f64,
    /// Probability a datagram is duplicated.
    #[arg(long, default_value_t = 0.05)]
    duplicate: f64,
    /// Probability a datagram is corrupted.
    #[arg(long, default_value_t = 0.01)]
    corrupt: f64,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// An all-to-all exchange where every payload is checked on arrival.
pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    for (name, p) in [("loss", a.loss), ("duplicate", a.duplicate), ("corrupt", a.corrupt)] {
        if !(0.0..1.0).contains(&p) {
            bail!("--{name} must be in [0, 1), got {p}");
        }
    }
    let link = LinkConfig { loss: a.loss, duplicate: a.duplicate, corrupt: a.corrupt, ..LinkConfig::lossy(0.0, 0.0, 0.0) };
    let mut net = Network::new(a.nodes, link, a.seed, |n| {
        let mut c = EngineConfig::new(n, 0xD340, 0);
        c.rto_initial = Duration::from_micros(100);
        c.peer_timeout = Duration::from_secs(10);
        c
    });
    let port = PortId(0);
    let eps: Vec<_> = (0..a.nodes).map(|n| net.open_port(NodeId(n), port)).collect::<Result<_, _>>()?;
    let per_node = u64::from(a.messages) * u64::from(a.nodes - 1);
    let wall = WallClock::now();
    let mut op = 0u64;
    let mut recvs: Vec<Vec<(u64, HostBuf)>> = vec![Vec::new(); a.nodes as usize];
    for n in 0..a.nodes {
        for _ in 0..per_node {
            op += 1;
            let buf = net.memory(NodeId(n)).alloc(a.size);
            net.command(NodeId(n), port, Command::Recv { op: OpId(op), matching: RecvMatch::any(), buf })?;
            recvs[n as usize].push((op, buf));
        }
    }
    // Every (message, source, destination), issued as send tokens allow.
    let mut queue: Vec<std::collections::VecDeque<(u32, u32)>> = (0..a.nodes)
        .map(|n| (0..a.messages).flat_map(|m| (0..a.nodes).filter(move |&d| d != n).map(move |d| (m, d))).collect())
        .collect();
    let tokens = net.engine(NodeId(0)).config().send_tokens as usize;
    let mut in_flight = vec![0usize; a.nodes as usize];
    let total = per_node * u64::from(a.nodes);
    let (mut received, mut sent) = (0u64, 0u64);
    let mut failure = None;
    net.run_until("every message", |net| {
        for n in 0..a.nodes {
            for e in net.take_events(NodeId(n)) {
                match e.result {
                    Ok(Completion::Sent) => {
                        sent += 1;
                        in_flight[n as usize] -= 1;
                    }
                    Ok(Completion::Received { src, tag, len }) => {
                        let buf = recvs[n as usize].iter().find(|(o, _)| *o == e.op.0).map(|x| x.1).expect("known recv");
                        let ok = net.memory(NodeId(n)).bytes(buf)[..len as usize]
                            .iter()
                            .enumerate()
                            .all(|(i, &b)| b == (i as u32 ^ src.node.0 ^ n ^ tag as u32) as u8);
                        if !ok {
                            failure = Some(format!("payload from {:?} to node {n} damaged", src.node));
                        }
                        received += 1;
                    }
                    Ok(other) => failure = Some(format!("unexpected completion {other:?}")),
                    Err(err) => failure = Some(format!("operation failed: {err}")),
                }
            }
            while in_flight[n as usize] < tokens {
                let Some((m, d)) = queue[n as usize].pop_front() else { break };
                let data: Vec<u8> = (0..a.size).map(|i| (i ^ n ^ d ^ m) as u8).collect();
                let buf = net.memory(NodeId(n)).alloc_with(&data);
                op += 1;
                let cmd = Command::Send { op: OpId(op), dest: eps[d as usize], tag: u64::from(m), buf };
                if let Err(e) = net.command(NodeId(n), port, cmd) {
                    failure = Some(format!("posting a send: {e}"));
                }
                in_flight[n as usize] += 1;
            }
        }
        failure.is_some() || (received == total && sent == total)
    })?;
    if let Some(f) = failure {
        bail!(f);
    }
    let elapsed = wall.elapsed();
    let ls = net.link_stats();
    println!("outboard demo: {} engines, all-to-all, {} messages of {} B, seed {}", a.nodes, total, a.size, a.seed);
    println!("  every message delivered exactly once and intact");
    println!("  virtual time            {:>12.3} ms", net.now().as_nanos() as f64 / 1e6);
    println!("  wall time               {:>12.3} ms", elapsed.as_secs_f64() * 1e3);
    println!(
        "  datagrams               {:>12} sent, {} lost, {} duplicated, {} corrupted",
        ls.sent, ls.lost, ls.duplicated, ls.corrupted
    );
    let mut s = outboard_engine::Stats::default();
    for n in 0..a.nodes {
        let e = net.engine(NodeId(n)).stats().clone();
        s.malformed += e.malformed;
        s.duplicates += e.duplicates;
        s.out_of_order += e.out_of_order;
        s.retransmits += e.retransmits;
        s.timeouts += e.timeouts;
        s.unexpected += e.unexpected;
    }
    println!(
        "  engines                 {:>12} retransmits, {} timeouts, {} duplicates and {} corrupt datagrams dropped, {} out of order",
        s.retransmits, s.timeouts, s.duplicates, s.malformed, s.out_of_order
    );
    Ok(())
}
