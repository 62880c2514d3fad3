//! `outboard bench`: latency and bandwidth of the engine path, beside the
//! same exchange over bare UDP sockets, in one run. (The collective
//! benchmarks, `barrier`, `allreduce`, `reduce` and `overlap`, are in
//! `bench_coll.rs`.)
//!
//! Two ranks in one process (each a thread with its own engine, socket and
//! port) exchange messages over UDP on 127.0.0.1, OSU-style:
//!
//! - latency: ping-pong, one-way time = half the round trip, averaged over
//!   the iterations of a round;
//! - bandwidth: the sender streams a window of messages and waits for a
//!   one-byte acknowledgement; bytes / time.
//!
//! Each figure is the median of several rounds (shared machines are noisy).
//! The raw-UDP path sends the same bytes in datagrams of at most the
//! engine's MTU over non-blocking sockets, with no reliability, waiting the
//! way the progress policy waits (busy-polling, or spinning then blocking in
//! the kernel for spin-then-block), so the ratio is the engine's overhead.

use std::borrow::BorrowMut;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use outboard_engine::{EngineConfig, Endpoint, HostBuf, NodeId, PortId, RecvMatch};
use outboard_host::{Port, Request};
use outboard_runtime::{bind_udp, machine_cores, random_u64, Node, Progress, RtPort};

use crate::stats::median;

/// `outboard bench`: a subcommand, and where to write its report.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Also write the output as a Markdown report to this file, headed by
    /// the exact command, the machine, the date and the commit.
    #[arg(long, global = true, value_name = "FILE.md")]
    pub report: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub cmd: BenchCmd,
}

/// `outboard bench` subcommands.
#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// Ping-pong latency and streaming bandwidth between two engines over
    /// UDP on loopback, by message size.
    Pingpong(PingpongArgs),
    /// The same exchange over bare UDP sockets only (no engine).
    RawUdp(PingpongArgs),
    /// The second rank of `pingpong --procs 2` (started by it).
    #[command(hide = true)]
    PingpongPeer(crate::bench_procs::PeerArgs),
    /// Barrier latency across processes: offloaded vs host-based (every
    /// algorithm) vs Open MPI's MPI_Barrier over TCP.
    Barrier(crate::bench_coll::BarrierArgs),
    /// Allreduce latency by size: offloaded vs host-based vs Open MPI's
    /// MPI_Allreduce over TCP.
    Allreduce(crate::bench_coll::SizedArgs),
    /// Reduce-to-root latency by size: offloaded vs host-based vs Open
    /// MPI's MPI_Reduce over TCP.
    Reduce(crate::bench_coll::SizedArgs),
    /// Broadcast latency by size: offloaded (NIC-forwarded) vs NIC-assisted
    /// (multi-send) vs host-based vs Open MPI's MPI_Bcast over TCP.
    Bcast(crate::bench_coll::BcastArgs),
    /// Allgather latency by block size: offloaded vs host-based vs Open
    /// MPI's MPI_Allgather over TCP.
    Allgather(crate::bench_coll::SizedArgs),
    /// Alltoall latency by block size: offloaded vs host-based vs Open
    /// MPI's MPI_Alltoall over TCP.
    Alltoall(crate::bench_coll::SizedArgs),
    /// Reduce-scatter latency by block size: offloaded vs host-based vs
    /// Open MPI's MPI_Reduce_scatter_block over TCP.
    ReduceScatter(crate::bench_coll::SizedArgs),
    /// Split-phase overlap in the OSU style (start, compute for the pure
    /// latency, wait), offloaded vs host-based vs Open MPI.
    Overlap(crate::bench_coll::OverlapArgs),
    /// Process skew for real (dissertation 6.3): before each broadcast
    /// and reduce every rank waits a random 0..max us; time inside the
    /// call for offloaded, application bypass (signal, progress thread),
    /// host-based and Open MPI, and the interrupt's cost.
    Skew(crate::bench_skew::SkewArgs),
    /// Latency of remote atomic operations (fetch-add, swap, CAS hit and
    /// miss), value returned in the event or written directly.
    Atomics(crate::bench_atomic::AtomicArgs),
    /// MCS lock+unlock latency with 1..N-1 contenders, offloaded vs
    /// host-based, and the home rank's CPU against the lock rate.
    Lock(crate::bench_lock::LockArgs),
    /// The NICVM Figure 2 module broadcast vs the engine's offloaded
    /// broadcast vs host-based, across N processes.
    Nicvm(crate::bench_nicvm::NicvmArgs),
}

/// What to compare the engine path with.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compare {
    /// Bare UDP sockets, no engine.
    RawUdp,
}

/// Arguments of `outboard bench pingpong` and `raw-udp`.
#[derive(clap::Args, Clone)]
pub struct PingpongArgs {
    /// Also run this path and print it beside the engine's, with the ratio.
    #[arg(long, value_enum)]
    pub(crate) compare: Option<Compare>,
    /// Progress policy: dedicated, host-assisted or spin-then-block
    /// (default: OUTBOARD_PROGRESS, else chosen from this machine's cores).
    #[arg(long)]
    pub(crate) progress: Option<String>,
    /// Largest message size in bytes (sizes go up by 8x from 1).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u32).range(1..=(16 << 20)))]
    pub(crate) max_size: u32,
    /// Rounds per figure; the median is printed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) rounds: u32,
    /// Scales the iterations of every round (1.0: about 20 ms of traffic
    /// per small-message latency round).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,
    /// Processes: 1 runs both ranks as threads of this process, 2 runs
    /// the second rank in a process of its own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2))]
    pub(crate) procs: u32,
    /// Put the two ranks in two network namespaces joined by a veth pair
    /// (implies --procs 2; needs root and `ip` from iproute2).
    #[arg(long)]
    pub(crate) netns: bool,
    /// Run the two ranks as an `outboard run` job with node engines: 2
    /// puts both on one node (one engine process, messages between its
    /// ports never reach the network), 1 puts them on two nodes (an
    /// engine each, UDP over loopback).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=2), conflicts_with_all = ["procs", "netns", "compare", "progress"])]
    pub(crate) ranks_per_node: Option<u32>,
    /// One rank of a `--ranks-per-node` job (started by it).
    #[arg(long, hide = true)]
    pub(crate) worker: bool,
}

const TAG_LAT: u64 = 1;
const TAG_BW: u64 = 2;
const TAG_ACK: u64 = 3;
/// The engine's MTU (its default), also the raw path's largest datagram.
const MTU: usize = 8192;
/// Most bytes one bandwidth window keeps in flight: the raw path has no
/// flow control, and must fit in the socket buffer to lose nothing.
const WINDOW_BYTES: usize = 2 << 20;
/// Most messages in a window (the engine's default send tokens).
pub(crate) const WINDOW_MAX: usize = 64;

/// One measurement both sides carry out in step.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    Latency { size: usize, warm: u32, iters: u32 },
    Bandwidth { size: usize, window: usize, warm: u32, reps: u32 },
}

impl Step {
    /// A bandwidth step of messages of `size` bytes: windows of at most
    /// `window_max` messages and [`WINDOW_BYTES`], repeated until about
    /// `bytes` have gone (times `scale`, 2 to 500 windows).
    pub(crate) fn bandwidth(size: usize, window_max: usize, bytes: f64, scale: f64) -> Step {
        let window = (WINDOW_BYTES / size.max(1)).clamp(1, window_max);
        let reps = ((bytes / (size.max(1) * window) as f64).clamp(2.0, 500.0) * scale).round().max(1.0) as u32;
        Step::Bandwidth { size, window, warm: (reps / 10).max(1), reps }
    }

    /// The streaming bandwidth in MB/s of a bandwidth step that took
    /// `seconds` (its timed windows); `None` for a latency step.
    pub(crate) fn mb_per_s(&self, seconds: f64) -> Option<f64> {
        match *self {
            Step::Bandwidth { size, window, reps, .. } => Some((size * window) as f64 * f64::from(reps) / seconds / 1e6),
            Step::Latency { .. } => None,
        }
    }

    /// Payload bytes both ranks send in one round of the step.
    fn bytes(&self) -> u64 {
        match *self {
            Step::Latency { size, warm, iters } => 2 * u64::from(warm + iters) * size as u64,
            Step::Bandwidth { size, window, warm, reps } => u64::from(warm + reps) * (size * window + 1) as u64,
        }
    }
}

/// One side of a two-rank exchange.
pub(crate) trait Side {
    fn ping(&mut self, size: usize) -> anyhow::Result<()>;
    /// With `mark`, notes [`Side::copied`] once the ping is in, before
    /// answering (see [`Side::marked`]).
    fn pong(&mut self, size: usize, mark: bool) -> anyhow::Result<()>;
    fn stream(&mut self, size: usize, window: usize) -> anyhow::Result<()>;
    /// With `mark`, notes [`Side::copied`] once the window is in.
    fn sink(&mut self, size: usize, window: usize, more: bool, mark: bool) -> anyhow::Result<()>;
    /// Payload bytes this side copied out of and into its memory so far
    /// (outside the kernel): the engine's copies; none on bare UDP.
    fn copied(&self) -> (u64, u64) {
        (0, 0)
    }
    /// What [`Side::copied`] said at the last mark: the second rank's step
    /// ends there, once the step's last message is in and before its
    /// answer lets the first rank go on to the next step.
    fn marked(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// Payload bytes one side copied in each step, over all rounds.
pub(crate) type Copies = Vec<(u64, u64)>;

pub(crate) fn plan(a: &PingpongArgs) -> Vec<Step> {
    let mut sizes = Vec::new();
    let mut s = 1usize;
    while s <= a.max_size as usize {
        sizes.push(s);
        s *= 8;
    }
    if sizes.last() != Some(&(a.max_size as usize)) {
        sizes.push(a.max_size as usize);
    }
    let scale = |n: f64| ((n * a.scale).round() as u32).max(1);
    let mut steps = Vec::new();
    for &size in &sizes {
        let iters = scale((2_000_000.0 / (size as f64 + 1000.0)).clamp(20.0, 2000.0));
        steps.push(Step::Latency { size, warm: (iters / 10).max(2), iters });
    }
    for &size in sizes.iter().filter(|&&s| s >= 64) {
        steps.push(Step::bandwidth(size, WINDOW_MAX, 16e6, a.scale));
    }
    steps
}

/// Runs the plan `rounds` times: `b` on a thread of its own, `a` here,
/// timing each step. Returns seconds per round for each step, and each
/// side's copies per step.
fn measure<A: Side, B: Side + Send + 'static>(mut a: A, mut b: B, steps: &[Step], rounds: u32) -> anyhow::Result<Measured> {
    let todo: Vec<Step> = steps.to_vec();
    let (tx, rx) = mpsc::channel::<anyhow::Result<Copies>>();
    let peer = std::thread::spawn(move || {
        let _ = tx.send(run_b(&mut b, &todo, rounds));
    });
    let (times, copies_a) = run_a(&mut a, steps, rounds)?;
    let r = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| Err(anyhow!("the peer thread did not finish")));
    let _ = peer.join();
    let copies_b = r.context("peer side")?;
    Ok(Measured { times, copies: copies_a.into_iter().zip(copies_b).map(|((ao, ai), (bo, bi))| (ao + bo, ai + bi)).collect() })
}

/// What a run of the plan gives: seconds per round for each step, and the
/// payload bytes both sides copied (out, in) in each step over all rounds.
pub(crate) struct Measured {
    pub times: Vec<Vec<f64>>,
    pub copies: Copies,
}

/// The second rank's half of the plan (pong and sink), `rounds` times.
pub(crate) fn run_b<B: Side>(b: &mut B, steps: &[Step], rounds: u32) -> anyhow::Result<Copies> {
    let mut copies = vec![(0, 0); steps.len()];
    // Bytes copied in count from mark to mark (the step's messages are all
    // in at its mark, and the next step's cannot be); bytes copied out
    // from the step's start to its end (its last answer is out by then).
    let mut in_before = 0;
    for _ in 0..rounds {
        for (i, s) in steps.iter().enumerate() {
            let out_before = b.copied().0;
            match *s {
                Step::Latency { size, warm, iters } => {
                    for k in 0..warm + iters {
                        b.pong(size, k + 1 == warm + iters)?;
                    }
                }
                Step::Bandwidth { size, window, warm, reps } => {
                    for k in 0..warm + reps {
                        b.sink(size, window, k + 1 < warm + reps, k + 1 == warm + reps)?;
                    }
                }
            }
            let in_after = b.marked().1;
            copies[i].0 += b.copied().0 - out_before;
            copies[i].1 += in_after - in_before;
            in_before = in_after;
        }
    }
    Ok(copies)
}

/// The first rank's half of the plan (ping and stream), timed.
pub(crate) fn run_a<A: Side>(a: &mut A, steps: &[Step], rounds: u32) -> anyhow::Result<(Vec<Vec<f64>>, Copies)> {
    let mut times = vec![Vec::new(); steps.len()];
    let mut copies = vec![(0, 0); steps.len()];
    for _ in 0..rounds {
        for (i, s) in steps.iter().enumerate() {
            let before = a.copied();
            match *s {
                Step::Latency { size, warm, iters } => {
                    for _ in 0..warm {
                        a.ping(size)?;
                    }
                    let t = Instant::now();
                    for _ in 0..iters {
                        a.ping(size)?;
                    }
                    times[i].push(t.elapsed().as_secs_f64());
                }
                Step::Bandwidth { size, window, warm, reps } => {
                    for _ in 0..warm {
                        a.stream(size, window)?;
                    }
                    let t = Instant::now();
                    for _ in 0..reps {
                        a.stream(size, window)?;
                    }
                    times[i].push(t.elapsed().as_secs_f64());
                }
            }
            let after = a.copied();
            copies[i].0 += after.0 - before.0;
            copies[i].1 += after.1 - before.1;
        }
    }
    Ok((times, copies))
}

/// Messages from `peer` with `tag`.
fn peer_match(peer: Endpoint, tag: u64) -> RecvMatch {
    RecvMatch::from(peer.node, peer.port, tag)
}

/// One rank's port and buffers on the engine path.
pub(crate) struct EngineSide<P: BorrowMut<Port<RtPort>> = Port<RtPort>> {
    port: P,
    peer: Endpoint,
    sbuf: HostBuf,
    rbuf: HostBuf,
    ack: HostBuf,
    /// A receive posted ahead, so messages land straight in the buffer.
    posted: Option<Request>,
    window: Vec<Request>,
    mark: (u64, u64),
}

impl<P: BorrowMut<Port<RtPort>>> EngineSide<P> {
    /// A side on `port` (owned, or a world's borrowed) talking to `peer`.
    pub(crate) fn new(mut port: P, peer: Endpoint, max: usize) -> anyhow::Result<EngineSide<P>> {
        let fill: Vec<u8> = (0..max).map(|i| i as u8).collect();
        let sbuf = port.borrow_mut().buffer_from(&fill)?;
        let rbuf = port.borrow_mut().buffer(max as u32)?;
        let ack = port.borrow_mut().buffer(1)?;
        Ok(EngineSide { port, peer, sbuf, rbuf, ack, posted: None, window: Vec::new(), mark: (0, 0) })
    }

    /// Frees its buffers: a borrowed port goes on to other work.
    pub(crate) fn release(mut self) -> anyhow::Result<()> {
        for b in [self.sbuf, self.rbuf, self.ack] {
            self.port.borrow_mut().free(b)?;
        }
        Ok(())
    }

    fn send(&mut self, tag: u64, buf: HostBuf) -> anyhow::Result<()> {
        let r = self.port.borrow_mut().start_send(self.peer, tag, buf)?;
        self.port.borrow_mut().wait(r)?;
        Ok(())
    }
}

impl<P: BorrowMut<Port<RtPort>>> Side for EngineSide<P> {
    // Sends are posted before the receives that follow them, so the data
    // packet leaves first and carries the acknowledgement of what came in.
    fn ping(&mut self, size: usize) -> anyhow::Result<()> {
        let s = self.port.borrow_mut().start_send(self.peer, TAG_LAT, HostBuf { addr: self.sbuf.addr, len: size as u32 })?;
        let r = self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_LAT), self.rbuf)?;
        self.port.borrow_mut().wait(s)?;
        self.port.borrow_mut().wait(r)?;
        Ok(())
    }

    fn pong(&mut self, size: usize, mark: bool) -> anyhow::Result<()> {
        let r = match self.posted.take() {
            Some(r) => r,
            None => self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_LAT), self.rbuf)?,
        };
        self.port.borrow_mut().wait(r)?;
        if mark {
            self.mark = self.copied();
        }
        let s = self.port.borrow_mut().start_send(self.peer, TAG_LAT, HostBuf { addr: self.sbuf.addr, len: size as u32 })?;
        self.posted = Some(self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_LAT), self.rbuf)?);
        self.port.borrow_mut().wait(s)?;
        Ok(())
    }

    fn stream(&mut self, size: usize, window: usize) -> anyhow::Result<()> {
        let ack = self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_ACK), self.ack)?;
        let buf = HostBuf { addr: self.sbuf.addr, len: size as u32 };
        let reqs: Vec<Request> = (0..window).map(|_| self.port.borrow_mut().start_send(self.peer, TAG_BW, buf)).collect::<Result<_, _>>()?;
        for r in reqs {
            self.port.borrow_mut().wait(r)?;
        }
        self.port.borrow_mut().wait(ack)?;
        Ok(())
    }

    fn sink(&mut self, _size: usize, window: usize, more: bool, mark: bool) -> anyhow::Result<()> {
        if self.window.is_empty() {
            for _ in 0..window {
                let r = self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_BW), self.rbuf)?;
                self.window.push(r);
            }
        }
        for r in std::mem::take(&mut self.window) {
            self.port.borrow_mut().wait(r)?;
        }
        if mark {
            self.mark = self.copied();
        }
        if more {
            for _ in 0..window {
                let r = self.port.borrow_mut().start_recv(peer_match(self.peer, TAG_BW), self.rbuf)?;
                self.window.push(r);
            }
        }
        self.send(TAG_ACK, self.ack)
    }

    fn copied(&self) -> (u64, u64) {
        let (_, t) = self.port.borrow().io_ref().stats();
        (t.copied_out, t.copied_in)
    }

    fn marked(&self) -> (u64, u64) {
        self.mark
    }
}

/// One rank's socket on the bare UDP path.
pub(crate) struct RawSide {
    sock: UdpSocket,
    peer: SocketAddr,
    data: Vec<u8>,
    rx: Vec<u8>,
    /// Spin this long, then block in the kernel (None: always spin).
    block_after: Option<Duration>,
}

impl RawSide {
    /// A side on non-blocking `sock` sending to `peer`, waiting the way
    /// `progress` waits.
    pub(crate) fn new(sock: UdpSocket, peer: SocketAddr, max: usize, progress: Progress) -> RawSide {
        let block_after = match progress {
            Progress::SpinThenBlock { spin } => Some(spin),
            _ => None,
        };
        RawSide { sock, peer, data: vec![7; max], rx: vec![0; 65_536], block_after }
    }

    fn send_msg(&mut self, len: usize) -> anyhow::Result<()> {
        let mut off = 0;
        loop {
            let n = (len - off).min(MTU);
            loop {
                match self.sock.send_to(&self.data[off..off + n], self.peer) {
                    Ok(_) => break,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
                    Err(e) => return Err(e).context("raw UDP send"),
                }
            }
            off += n;
            if off >= len {
                return Ok(());
            }
        }
    }

    fn recv_msg(&mut self, len: usize) -> anyhow::Result<()> {
        let mut got = 0;
        while got < len {
            got += self.recv_one()?;
        }
        Ok(())
    }

    fn recv_one(&mut self) -> anyhow::Result<usize> {
        let start = Instant::now();
        loop {
            match self.sock.recv(&mut self.rx) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("raw UDP receive"),
            }
            let waited = start.elapsed();
            if waited > Duration::from_secs(2) {
                bail!("raw UDP lost a datagram (nothing for 2 s; it has no retransmission)");
            }
            match self.block_after {
                Some(spin) if waited >= spin => {
                    self.sock.set_nonblocking(false)?;
                    self.sock.set_read_timeout(Some(Duration::from_secs(2)))?;
                    let r = self.sock.recv(&mut self.rx);
                    self.sock.set_nonblocking(true)?;
                    match r {
                        Ok(n) => return Ok(n),
                        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                        Err(e) => return Err(e).context("raw UDP receive"),
                    }
                }
                _ => std::hint::spin_loop(),
            }
        }
    }
}

impl Side for RawSide {
    fn ping(&mut self, size: usize) -> anyhow::Result<()> {
        self.send_msg(size)?;
        self.recv_msg(size)
    }
    fn pong(&mut self, size: usize, _mark: bool) -> anyhow::Result<()> {
        self.recv_msg(size)?;
        self.send_msg(size)
    }
    fn stream(&mut self, size: usize, window: usize) -> anyhow::Result<()> {
        for _ in 0..window {
            self.send_msg(size)?;
        }
        self.recv_msg(1)
    }
    fn sink(&mut self, size: usize, window: usize, _more: bool, _mark: bool) -> anyhow::Result<()> {
        self.recv_msg(size * window)?;
        self.send_msg(1)
    }
}

/// Two engines of one job in this process, over UDP on the loopback
/// interface (the in-process benches' pair); `tweak` adjusts each
/// configuration.
pub(crate) fn loopback_pair(progress: Progress, tweak: impl Fn(&mut EngineConfig)) -> anyhow::Result<Vec<Node>> {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let sockets = [bind_udp(ip)?, bind_udp(ip)?];
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr()).collect::<Result<_, _>>()?;
    let key = random_u64();
    // Datagrams cross the loopback interface: a real secret, like a job's.
    let secret = outboard_runtime::random_secret()?;
    let mut nodes = Vec::new();
    for (i, s) in sockets.into_iter().enumerate() {
        let mut c = EngineConfig::new(NodeId(i as u32), key, random_u64());
        c.secret = secret.clone();
        outboard_runtime::udp_engine_defaults(&mut c);
        tweak(&mut c);
        nodes.push(Node::start(c, s, &addrs, progress)?);
    }
    Ok(nodes)
}

fn engine_times(steps: &[Step], rounds: u32, progress: Progress, max: usize) -> anyhow::Result<Measured> {
    let nodes = loopback_pair(progress, |c| c.max_message = c.max_message.max(max as u32))?;
    let pa = Port::new(nodes[0].open_port(PortId(0))?);
    let pb = Port::new(nodes[1].open_port(PortId(0))?);
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let a = EngineSide::new(pa, eb, max)?;
    let b = EngineSide::new(pb, ea, max)?;
    let m = measure(a, b, steps, rounds)?;
    let (s0, t0) = nodes[0].stats();
    let (s1, t1) = nodes[1].stats();
    report_engine("", &[(s0, t0), (s1, t1)]);
    Ok(m)
}

/// Prints the engine path's transport counters (both ranks together).
pub(crate) fn report_engine(who: &str, nodes: &[(outboard_engine::Stats, outboard_runtime::TransportStats)]) {
    let sum = |f: &dyn Fn(&(outboard_engine::Stats, outboard_runtime::TransportStats)) -> u64| nodes.iter().map(f).sum::<u64>();
    let (dg_out, calls_out) = (sum(&|n| n.1.datagrams_out), sum(&|n| n.1.send_calls));
    let (dg_in, calls_in) = (sum(&|n| n.1.datagrams_in), sum(&|n| n.1.recv_calls));
    eprintln!(
        "# engine path{who}: {} retransmits, {} duplicates received (retransmits that were spurious), {} timeouts, {} send stalls (socket buffer full); {:.2} datagrams per send call, {:.2} per receive call",
        sum(&|n| n.0.retransmits),
        sum(&|n| n.0.duplicates),
        sum(&|n| n.0.timeouts),
        sum(&|n| n.1.send_stalls),
        dg_out as f64 / calls_out.max(1) as f64,
        dg_in as f64 / calls_in.max(1) as f64,
    );
}

fn raw_times(steps: &[Step], rounds: u32, progress: Progress, max: usize) -> anyhow::Result<Measured> {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let sa = bind_udp(ip)?;
    let sb = bind_udp(ip)?;
    let (aa, ab) = (sa.local_addr()?, sb.local_addr()?);
    measure(RawSide::new(sa, ab, max, progress), RawSide::new(sb, aa, max, progress), steps, rounds)
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}M", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}K", s >> 10),
        s => s.to_string(),
    }
}

/// Runs `outboard bench`, writing a report where `--report` asks.
pub fn run_args(a: BenchArgs) -> anyhow::Result<()> {
    match &a.report {
        Some(file) => crate::bench_report::run(&std::env::args_os().collect::<Vec<_>>(), file),
        None => run(a.cmd),
    }
}

/// Runs an `outboard bench` subcommand.
pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    use crate::bench_coll::{run as coll, Kind};
    let (args, engine, raw) = match cmd {
        BenchCmd::Barrier(a) => return coll(Kind::Barrier, a.into()),
        BenchCmd::Allreduce(a) => return coll(Kind::Allreduce, a.into()),
        BenchCmd::Reduce(a) => return coll(Kind::Reduce, a.into()),
        BenchCmd::Overlap(a) => return coll(Kind::Overlap, a.into()),
        BenchCmd::Bcast(a) => return coll(Kind::Bcast, a.into()),
        BenchCmd::Allgather(a) => return coll(Kind::Allgather, a.into()),
        BenchCmd::Alltoall(a) => return coll(Kind::Alltoall, a.into()),
        BenchCmd::ReduceScatter(a) => return coll(Kind::ReduceScatter, a.into()),
        BenchCmd::Atomics(a) => return crate::bench_atomic::run(a),
        BenchCmd::Lock(a) => return crate::bench_lock::run(a),
        BenchCmd::Nicvm(a) => return crate::bench_nicvm::run(a),
        BenchCmd::Skew(a) => return crate::bench_skew::run(a),
        BenchCmd::Pingpong(a) => {
            let raw = a.compare == Some(Compare::RawUdp);
            (a, true, raw)
        }
        BenchCmd::RawUdp(a) => (a, false, true),
        BenchCmd::PingpongPeer(a) => return crate::bench_procs::peer(a),
    };
    if !(args.scale.is_finite() && args.scale > 0.0) {
        bail!("--scale must be a positive number");
    }
    if args.worker {
        return crate::bench_node::rank(&args);
    }
    let (progress, why) = match &args.progress {
        Some(p) => (Progress::parse(p)?, "set by --progress".to_string()),
        None => Progress::from_env(2)?,
    };
    let steps = plan(&args);
    let max = args.max_size as usize;
    let procs = if args.netns { 2 } else { args.procs };
    // Two namespaces joined by a veth pair, entered before any socket is
    // made; removed when this goes out of scope.
    let netns = if args.netns { Some(crate::bench_procs::NetnsPair::create()?) } else { None };
    match (&netns, procs) {
        _ if args.ranks_per_node == Some(2) => {
            println!("# outboard bench pingpong: 2 ranks in 2 processes of one node, attached to its node engine process, {} cores", machine_cores())
        }
        _ if args.ranks_per_node == Some(1) => println!(
            "# outboard bench pingpong: 2 ranks in 2 processes on 2 nodes, each attached to its node's engine process, UDP over 127.0.0.1 between the engines, {} cores",
            machine_cores()
        ),
        (Some(n), _) => println!(
            "# outboard bench pingpong: 2 ranks in 2 processes, in network namespaces {} and {} joined by a veth pair (MTU {}), UDP {} -> {}, {} cores",
            n.a,
            n.b,
            crate::bench_procs::VETH_MTU,
            n.ip_a,
            n.ip_b,
            machine_cores()
        ),
        (None, 2) => println!("# outboard bench pingpong: 2 ranks in 2 processes, UDP over 127.0.0.1, {} cores", machine_cores()),
        _ => println!("# outboard bench pingpong: 2 ranks (threads of one process), UDP over 127.0.0.1, {} cores", machine_cores()),
    }
    if args.ranks_per_node.is_some() {
        println!("# progress policy: chosen by each rank and node engine for this machine (`outboard run` prints it with OUTBOARD_MPI_VERBOSE=1)");
    } else {
        println!("# progress policy: {progress} ({why})");
    }
    if args.ranks_per_node.is_none() && !matches!(progress, Progress::Dedicated) {
        println!("# the engine runs on the waiting host's thread (or shares the cores): these figures are the engine path's cost, not offload");
    }
    if raw {
        println!(
            "# raw-udp: the same bytes over bare non-blocking UDP sockets in datagrams of <= {MTU} B, no reliability, {}",
            if matches!(progress, Progress::SpinThenBlock { .. }) { "spinning then blocking like the policy" } else { "busy-polling" }
        );
    }
    println!("# each figure: median of {} rounds", args.rounds);
    let run_path = |path: crate::bench_procs::Path| -> anyhow::Result<Measured> {
        if let Some(r) = args.ranks_per_node {
            return crate::bench_node::job(&args, r, &steps);
        }
        if procs == 2 {
            return crate::bench_procs::two_processes(path, &args, &steps, progress, netns.as_ref());
        }
        match path {
            crate::bench_procs::Path::Engine => engine_times(&steps, args.rounds, progress, max),
            crate::bench_procs::Path::Raw => raw_times(&steps, args.rounds, progress, max),
        }
    };
    let e = if engine { Some(run_path(crate::bench_procs::Path::Engine)?) } else { None };
    let r = if raw { Some(run_path(crate::bench_procs::Path::Raw)?) } else { None };
    drop(netns);

    // A node engine copies in its own process, where the ranks' counters
    // do not see it.
    let show_copies = engine && args.ranks_per_node.is_none();
    let cols = |label: &str| {
        let mut h = format!("{:<10}", "# Size");
        if engine {
            h += &format!("{:>16}", format!("engine {label}"));
        }
        if raw {
            h += &format!("{:>18}", format!("raw-udp {label}"));
        }
        if engine && raw {
            h += &format!("{:>10}", "ratio");
        }
        if show_copies {
            h += &format!("{:>14}", "copies s+r");
        }
        h
    };
    // Copies per message: payload bytes the engine copied out of host
    // memory at the senders and into it at the receivers, over the bytes
    // sent (the kernel's socket copies come on top, one each side, for
    // both paths; bare UDP makes none of its own).
    let copies = |i: usize, s: &Step| {
        e.as_ref().filter(|_| show_copies).map(|m| {
            let total = (s.bytes() * u64::from(args.rounds)).max(1) as f64;
            (m.copies[i].0 as f64 / total, m.copies[i].1 as f64 / total)
        })
    };
    let row = |size: usize, ev: Option<f64>, rv: Option<f64>, ratio: Option<f64>, c: Option<(f64, f64)>| {
        let mut l = format!("{:<10}", human(size));
        if let Some(v) = ev {
            l += &format!("{v:>16.2}");
        }
        if let Some(v) = rv {
            l += &format!("{v:>18.2}");
        }
        if let Some(x) = ratio {
            l += &format!("{x:>10.2}");
        }
        if let Some((o, i)) = c {
            l += &format!("{:>14}", format!("{o:.2}+{i:.2}"));
        }
        l
    };
    println!("# latency: one-way = half the ping-pong round trip; ratio = engine / raw-udp; copies s+r = the engine's payload copies per message at the sender + at the receiver (user space)");
    println!("{}", cols("(us)"));
    for (i, s) in steps.iter().enumerate() {
        if let Step::Latency { size, iters, .. } = *s {
            let us = |m: &Measured| median(&m.times[i]) / f64::from(iters) / 2.0 * 1e6;
            let (ev, rv) = (e.as_ref().map(us), r.as_ref().map(us));
            println!("{}", row(size, ev, rv, ev.zip(rv).map(|(a, b)| a / b), copies(i, s)));
        }
    }
    println!("# bandwidth: a window of messages (<= {WINDOW_MAX}, <= {} MiB) then a 1-byte ack, OSU bw; ratio = engine / raw-udp", WINDOW_BYTES >> 20);
    println!("{}", cols("(MB/s)"));
    for (i, s) in steps.iter().enumerate() {
        if let Step::Bandwidth { size, .. } = *s {
            let mbs = |m: &Measured| s.mb_per_s(median(&m.times[i])).expect("a bandwidth step");
            let (ev, rv) = (e.as_ref().map(mbs), r.as_ref().map(mbs));
            println!("{}", row(size, ev, rv, ev.zip(rv).map(|(a, b)| a / b), copies(i, s)));
        }
    }
    Ok(())
}
