//! `outboard demo`: the engines over the test network, on one machine.
//!
//! Every node sends `--messages` messages to every other node and checks
//! every message it receives. A port holds a bounded number of posted
//! receives and sends under way (its receive and send tokens), so each
//! node keeps a window of each - at most as many as its tokens allow -
//! and refills it as operations complete, reusing the buffers: the job's
//! size then bounds neither what it may post nor the memory it needs.

use std::collections::HashMap;
use std::time::Instant as WallClock;

use anyhow::bail;
use outboard_engine::{Command, Completion, Duration, Endpoint, EngineConfig, HostBuf, NodeId, OpId, PortId, RecvMatch};
use outboard_testnet::{LinkConfig, Network};

/// Arguments of `outboard demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Number of engines (nodes).
    #[arg(short = 'n', long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(2..=1024))]
    nodes: u32,
    /// Messages each node sends to each other node.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
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

/// The byte at offset `i` of message `m` from `src` to `dst`: every
/// message's content differs, so a misdelivered or damaged one is caught.
fn pattern(i: u32, src: u32, dst: u32, m: u32) -> u8 {
    (i ^ src ^ dst ^ m) as u8
}

/// Bytes 0..256 of message `m` from `src` to `dst`. The pattern repeats
/// every 256 bytes, so filling and checking a message go a block at a
/// time (a copy and a compare) rather than a byte at a time: at 1,024
/// nodes the demo writes and checks a terabyte.
fn pattern_block(src: u32, dst: u32, m: u32) -> [u8; 256] {
    std::array::from_fn(|i| pattern(i as u32, src, dst, m))
}

/// What went wrong in the exchange.
#[derive(Debug, thiserror::Error)]
enum DemoError {
    #[error("the payload of message {message} from node {src} to node {dst} arrived damaged")]
    Damaged { src: u32, dst: u32, message: u64 },
    #[error("message {message} from node {src} to node {dst} arrived twice")]
    Twice { src: u32, dst: u32, message: u64 },
    #[error("node {node} got a completion it did not ask for: {what}")]
    Unexpected { node: u32, what: String },
    #[error("an operation of node {node} failed: {source}")]
    Op { node: u32, source: outboard_engine::OpError },
    #[error("node {node} could not post an operation: {source}")]
    Post { node: u32, source: outboard_engine::CommandError },
}

/// One node's side of the exchange.
struct Node {
    id: u32,
    /// Posted receives by operation, with their buffers.
    recvs: HashMap<u64, HostBuf>,
    /// Receives not yet posted.
    recvs_left: u64,
    /// Sends under way by operation, with their buffers.
    sends: HashMap<u64, HostBuf>,
    /// Send buffers whose sends completed, for the next sends.
    free_send_bufs: Vec<HostBuf>,
    /// Index of the next send in this node's order (see [`Node::dest`]).
    next_send: u64,
    /// Which (source, message) pairs arrived: bit `src * messages + m`.
    seen: Vec<u64>,
}

impl Node {
    /// Send `i` of node `n` is message `i / (N-1)` to the node `1 + i %
    /// (N-1)` places after `n`: the nodes start on different destinations,
    /// so no node gets everyone's first message at once.
    fn dest(&self, i: u64, nodes: u32) -> (u32, u32) {
        let others = u64::from(nodes - 1);
        let m = (i / others) as u32;
        let d = (u64::from(self.id) + 1 + i % others) % u64::from(nodes);
        (m, d as u32)
    }
}

/// The exchange: every node's state and the counts.
struct Exchange {
    a: DemoArgs,
    eps: Vec<Endpoint>,
    nodes: Vec<Node>,
    next_op: u64,
    recv_tokens: usize,
    send_tokens: usize,
    per_node: u64,
    received: u64,
    sent: u64,
}

const PORT: PortId = PortId(0);

impl Exchange {
    fn new(a: DemoArgs) -> anyhow::Result<(Exchange, Network)> {
        let link = LinkConfig { loss: a.loss, duplicate: a.duplicate, corrupt: a.corrupt, ..LinkConfig::lossy(0.0, 0.0, 0.0) };
        let mut net = Network::new(a.nodes, link, a.seed, |n| {
            let mut c = EngineConfig::new(n, 0xD340, 0);
            c.rto_initial = Duration::from_micros(100);
            c.peer_timeout = Duration::from_secs(10);
            c
        });
        let eps: Vec<_> = (0..a.nodes).map(|n| net.open_port(NodeId(n), PORT)).collect::<Result<_, _>>()?;
        let per_node = u64::from(a.messages) * u64::from(a.nodes - 1);
        let config = net.engine(NodeId(0)).config();
        let (recv_tokens, send_tokens) = (config.recv_tokens as usize, config.send_tokens as usize);
        let seen_words = (a.nodes as usize * a.messages as usize).div_ceil(64);
        let nodes = (0..a.nodes)
            .map(|id| Node {
                id,
                recvs: HashMap::new(),
                recvs_left: per_node,
                sends: HashMap::new(),
                free_send_bufs: Vec::new(),
                next_send: 0,
                seen: vec![0; seen_words],
            })
            .collect();
        // Each message takes a few steps (its datagrams, acknowledgements
        // and retransmissions): the network's default bound is for tests.
        net.max_steps = net.max_steps.max(per_node * u64::from(a.nodes) * 200);
        let x = Exchange { a, eps, nodes, next_op: 0, recv_tokens, send_tokens, per_node, received: 0, sent: 0 };
        Ok((x, net))
    }

    fn total(&self) -> u64 {
        self.per_node * u64::from(self.a.nodes)
    }

    fn op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    /// Posts receives into `buf` (or fresh buffers) while node `n` has
    /// receive tokens and receives left to post.
    fn post_recvs(&mut self, net: &mut Network, n: usize, mut reuse: Option<HostBuf>) -> Result<(), DemoError> {
        while self.nodes[n].recvs.len() < self.recv_tokens && self.nodes[n].recvs_left > 0 {
            let buf = match reuse.take() {
                Some(b) => b,
                None => net.memory(NodeId(n as u32)).alloc(self.a.size),
            };
            let op = self.op();
            let cmd = Command::Recv { op, matching: RecvMatch::any(), buf };
            net.command(NodeId(n as u32), PORT, cmd).map_err(|source| DemoError::Post { node: n as u32, source })?;
            let node = &mut self.nodes[n];
            node.recvs.insert(op.0, buf);
            node.recvs_left -= 1;
        }
        if let Some(b) = reuse {
            net.memory(NodeId(n as u32)).free(b);
        }
        Ok(())
    }

    /// Starts sends of node `n` while it has send tokens and messages left.
    fn post_sends(&mut self, net: &mut Network, n: usize) -> Result<(), DemoError> {
        let (nodes, size) = (self.a.nodes, self.a.size);
        while self.nodes[n].sends.len() < self.send_tokens && self.nodes[n].next_send < self.per_node {
            let node = &mut self.nodes[n];
            let (m, d) = node.dest(node.next_send, nodes);
            node.next_send += 1;
            let reused = node.free_send_bufs.pop();
            let mem = net.memory(NodeId(n as u32));
            let buf = reused.unwrap_or_else(|| mem.alloc(size));
            let block = pattern_block(n as u32, d, m);
            for chunk in mem.bytes_mut(buf).chunks_mut(block.len()) {
                chunk.copy_from_slice(&block[..chunk.len()]);
            }
            let op = self.op();
            let cmd = Command::Send { op, dest: self.eps[d as usize], tag: u64::from(m), buf };
            net.command(NodeId(n as u32), PORT, cmd).map_err(|source| DemoError::Post { node: n as u32, source })?;
            self.nodes[n].sends.insert(op.0, buf);
        }
        Ok(())
    }

    /// Checks what node `n` completed and refills its windows.
    fn progress(&mut self, net: &mut Network, n: usize) -> Result<(), DemoError> {
        let node_id = n as u32;
        for e in net.take_events(NodeId(node_id)) {
            let done = e.result.map_err(|source| DemoError::Op { node: node_id, source })?;
            match done {
                Completion::Sent => {
                    let buf = self.nodes[n].sends.remove(&e.op.0).ok_or_else(|| unexpected(node_id, "a send"))?;
                    self.nodes[n].free_send_bufs.push(buf);
                    self.sent += 1;
                }
                Completion::Received { src, tag, len } => {
                    let buf = self.nodes[n].recvs.remove(&e.op.0).ok_or_else(|| unexpected(node_id, "a receive"))?;
                    self.check(net, n, src.node.0, tag, len, buf)?;
                    self.received += 1;
                    self.post_recvs(net, n, Some(buf))?;
                }
                other => return Err(unexpected(node_id, &format!("{other:?}"))),
            }
        }
        self.post_sends(net, n)
    }

    /// Checks one arrival at node `n`: a message not seen before, whose
    /// every byte is what its sender wrote.
    fn check(&mut self, net: &mut Network, n: usize, src: u32, tag: u64, len: u32, buf: HostBuf) -> Result<(), DemoError> {
        let dst = n as u32;
        let damaged = DemoError::Damaged { src, dst, message: tag };
        if tag >= u64::from(self.a.messages) || src >= self.a.nodes || src == dst || len != self.a.size {
            return Err(damaged);
        }
        let bytes = &net.memory(NodeId(dst)).bytes(buf)[..len as usize];
        let block = pattern_block(src, dst, tag as u32);
        if !bytes.chunks(block.len()).all(|chunk| chunk == &block[..chunk.len()]) {
            return Err(damaged);
        }
        let bit = src as usize * self.a.messages as usize + tag as usize;
        let word = &mut self.nodes[n].seen[bit / 64];
        if *word & (1 << (bit % 64)) != 0 {
            return Err(DemoError::Twice { src, dst, message: tag });
        }
        *word |= 1 << (bit % 64);
        Ok(())
    }
}

fn unexpected(node: u32, what: &str) -> DemoError {
    DemoError::Unexpected { node, what: what.to_string() }
}

/// An all-to-all exchange where every payload is checked on arrival.
pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    for (name, p) in [("loss", a.loss), ("duplicate", a.duplicate), ("corrupt", a.corrupt)] {
        if !(0.0..1.0).contains(&p) {
            bail!("--{name} must be a probability in [0, 1), got {p}");
        }
    }
    let (mut x, mut net) = Exchange::new(a)?;
    let wall = WallClock::now();
    for n in 0..x.nodes.len() {
        x.post_recvs(&mut net, n, None)?;
        x.post_sends(&mut net, n)?;
    }
    let total = x.total();
    let mut failure = None;
    net.run_until("every message", |net| {
        // Only a completion frees a token, so only the nodes holding
        // completions have anything to do.
        for n in net.nodes_with_events() {
            if let Err(e) = x.progress(net, n.0 as usize) {
                failure = Some(e);
                break;
            }
        }
        failure.is_some() || (x.received == total && x.sent == total)
    })?;
    if let Some(f) = failure {
        return Err(f.into());
    }
    report(&x, &mut net, wall.elapsed());
    Ok(())
}

fn report(x: &Exchange, net: &mut Network, elapsed: std::time::Duration) {
    let a = &x.a;
    let ls = net.link_stats();
    println!("outboard demo: {} engines, all-to-all, {} messages of {} B, seed {}", a.nodes, x.total(), a.size, a.seed);
    println!("  every message delivered exactly once and intact");
    println!("  virtual time            {:>12.3} ms", net.now().as_nanos() as f64 / 1e6);
    println!("  wall time               {:>12.3} ms", elapsed.as_secs_f64() * 1e3);
    println!("  datagrams               {:>12} sent, {} lost, {} duplicated, {} corrupted", ls.sent, ls.lost, ls.duplicated, ls.corrupted);
    let mut s = outboard_engine::Stats::default();
    for n in 0..a.nodes {
        let e = net.engine(NodeId(n)).stats();
        s.malformed += e.malformed;
        s.unauthenticated += e.unauthenticated;
        s.duplicates += e.duplicates;
        s.out_of_order += e.out_of_order;
        s.retransmits += e.retransmits;
        s.timeouts += e.timeouts;
    }
    println!(
        "  engines                 {:>12} retransmits, {} timeouts, {} duplicates dropped, {} out of order",
        s.retransmits, s.timeouts, s.duplicates, s.out_of_order
    );
    // A corrupted datagram fails its MAC (or, when the flip hits a length,
    // does not parse); one the link also duplicated is dropped twice.
    println!(
        "  corrupt datagrams       {:>12} dropped: {} failed the MAC, {} malformed",
        s.unauthenticated + s.malformed,
        s.unauthenticated,
        s.malformed
    );
}
