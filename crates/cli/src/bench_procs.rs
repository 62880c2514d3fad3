//! `outboard bench pingpong --procs 2` and `--netns`: the second rank in a
//! process of its own, optionally in a network namespace of its own joined
//! to the first rank's by a veth pair, so the figures include what two
//! processes pay (separate address spaces, the scheduler's view of two
//! programs) and, with namespaces, a real device's path instead of
//! loopback's.
//!
//! The first process binds its socket, starts the second
//! (`outboard bench pingpong-peer`, inside `ip netns exec` for
//! `--netns`) with its address and the job's key and secret, and reads
//! the second's address and port incarnation from its standard output;
//! it answers with its own incarnation on the second's standard input,
//! then both run the plan (ping and stream here, pong and sink there).
//! The second prints its copy counters when done.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{anyhow, bail, Context};
use outboard_engine::{EngineConfig, Endpoint, NodeId, PortId};
use outboard_host::Port;
use outboard_runtime::{bind_udp, random_u64, Node, Progress};
use outboard_settings::registry as r;
use outboard_wire::JobSecret;

use crate::bench::{plan, run_a, run_b, Copies, EngineSide, Measured, PingpongArgs, RawSide, Step};

/// The veth pair's MTU: a jumbo frame, so the engine's 8 KiB datagrams
/// cross unfragmented (as on a cluster's jumbo-frame Ethernet).
pub(crate) const VETH_MTU: u32 = 9000;

const SECRET_ENV: &str = "OUTBOARD_BENCH_SECRET";
const KEY_ENV: &str = "OUTBOARD_BENCH_JOB_KEY";

/// Which path a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Path {
    /// The engine over UDP.
    Engine,
    /// Bare UDP sockets.
    Raw,
}

/// Arguments of the hidden `outboard bench pingpong-peer`.
#[derive(clap::Args, Clone)]
pub struct PeerArgs {
    #[arg(long, value_enum)]
    path: Path,
    /// Address to bind (port 0: the OS picks).
    #[arg(long)]
    bind: IpAddr,
    /// The first rank's socket address.
    #[arg(long)]
    peer: SocketAddr,
    #[arg(long)]
    progress: String,
    #[arg(long)]
    max_size: u32,
    #[arg(long)]
    rounds: u32,
    #[arg(long)]
    scale: f64,
}

/// Two network namespaces joined by a veth pair, deleted on drop (which
/// deletes the pair too). The calling thread enters the first one.
pub(crate) struct NetnsPair {
    pub a: String,
    pub b: String,
    pub ip_a: IpAddr,
    pub ip_b: IpAddr,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

impl NetnsPair {
    /// Creates the namespaces and the pair, and moves this thread (the
    /// one that will bind the first rank's socket and start the second
    /// process) into the first namespace.
    pub fn create() -> anyhow::Result<NetnsPair> {
        let id = std::process::id();
        let pair = NetnsPair {
            a: format!("outboard-{id}-a"),
            b: format!("outboard-{id}-b"),
            ip_a: IpAddr::V4(Ipv4Addr::new(10, 233, 0, 1)),
            ip_b: IpAddr::V4(Ipv4Addr::new(10, 233, 0, 2)),
        };
        // Interface names are at most 15 bytes.
        let (va, vb) = (format!("obv{id}a"), format!("obv{id}b"));
        ip(&["netns", "add", &pair.a]).context("creating a network namespace (needs root)")?;
        // From here on, drop removes what was made.
        ip(&["netns", "add", &pair.b])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        let mtu = VETH_MTU.to_string();
        for (ns, dev, addr) in [(&pair.a, &va, pair.ip_a), (&pair.b, &vb, pair.ip_b)] {
            ip(&["link", "set", dev, "netns", ns])?;
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let f = std::fs::File::open(format!("/run/netns/{}", pair.a)).context("opening the namespace")?;
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).context("entering the namespace")?;
        Ok(pair)
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// The second process and its pipes.
struct PeerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl PeerProcess {
    fn line(&mut self) -> anyhow::Result<String> {
        let mut l = String::new();
        if self.stdout.read_line(&mut l)? == 0 {
            let status = self.child.wait()?;
            bail!("the second process ended early ({status})");
        }
        Ok(l.trim().to_string())
    }

    /// Reads `ready ADDR GEN`.
    fn ready(&mut self) -> anyhow::Result<(SocketAddr, u32)> {
        let l = self.line()?;
        let mut w = l.split_whitespace();
        match (w.next(), w.next().map(str::parse), w.next().map(str::parse)) {
            (Some("ready"), Some(Ok(addr)), Some(Ok(gen))) => Ok((addr, gen)),
            _ => bail!("the second process said {l:?}, not `ready ADDR GEN`"),
        }
    }

    /// Reads the copy counters, one `copies OUT IN` line per step, and
    /// waits for the process to end.
    fn finish(mut self, steps: usize) -> anyhow::Result<Copies> {
        let mut copies = Vec::with_capacity(steps);
        for _ in 0..steps {
            let l = self.line()?;
            let v: Vec<u64> = l.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>().map_err(|_| anyhow!("bad line {l:?}"))?;
            match v[..] {
                [o, i] => copies.push((o, i)),
                _ => bail!("bad line {l:?}"),
            }
        }
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the second process failed ({status})");
        }
        Ok(copies)
    }
}

/// Measures `path` with the second rank in another process (in namespace
/// `netns.b` when given).
pub(crate) fn two_processes(
    path: Path,
    args: &PingpongArgs,
    steps: &[Step],
    progress: Progress,
    netns: Option<&NetnsPair>,
) -> anyhow::Result<Measured> {
    let (ip_a, ip_b) = match netns {
        Some(n) => (n.ip_a, n.ip_b),
        None => (IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V4(Ipv4Addr::LOCALHOST)),
    };
    let sock = bind_udp(ip_a)?;
    let me = sock.local_addr()?;
    let key = random_u64();
    let secret = outboard_runtime::random_secret()?;
    let exe = std::env::current_exe()?;
    let mut cmd = match netns {
        Some(n) => crate::netns::command_in(&n.b, &exe),
        None => Command::new(&exe),
    };
    cmd.args(["bench", "pingpong-peer", "--path", if path == Path::Engine { "engine" } else { "raw" }])
        .args(["--bind", &ip_b.to_string(), "--peer", &me.to_string(), "--progress", progress.name()])
        .args(["--max-size", &args.max_size.to_string(), "--rounds", &args.rounds.to_string(), "--scale", &args.scale.to_string()])
        .env(SECRET_ENV, secret.to_hex())
        .env(KEY_ENV, format!("{key:016x}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().context("starting the second process")?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut peer = PeerProcess { child, stdin, stdout };
    let (peer_addr, peer_gen) = peer.ready()?;
    let max = args.max_size as usize;
    match path {
        Path::Raw => {
            writeln!(peer.stdin, "go 0")?;
            let (times, copies_a) = run_a(&mut RawSide::new(sock, peer_addr, max, progress), steps, args.rounds)?;
            let copies_b = peer.finish(steps.len())?;
            Ok(combine(times, copies_a, copies_b))
        }
        Path::Engine => {
            let mut c = EngineConfig::new(NodeId(0), key, random_u64());
            c.secret = secret;
            outboard_runtime::udp_engine_defaults(&mut c);
            c.max_message = c.max_message.max(args.max_size);
            let node = Node::start(c, sock, &[me, peer_addr], progress)?;
            let port = Port::new(node.open_port(PortId(0))?);
            writeln!(peer.stdin, "go {}", port.endpoint().gen)?;
            let far = Endpoint { node: NodeId(1), port: PortId(0), gen: peer_gen };
            let mut side = EngineSide::new(port, far, max)?;
            let (times, copies_a) = run_a(&mut side, steps, args.rounds)?;
            let copies_b = peer.finish(steps.len())?;
            crate::bench::report_engine(" (first process)", &[node.stats()]);
            Ok(combine(times, copies_a, copies_b))
        }
    }
}

fn combine(times: Vec<Vec<f64>>, a: Copies, b: Copies) -> Measured {
    Measured { times, copies: a.into_iter().zip(b).map(|((ao, ai), (bo, bi))| (ao + bo, ai + bi)).collect() }
}

/// The second process: binds, says where it is, waits for `go`, runs the
/// pong/sink half of the plan, prints its copies per step.
pub(crate) fn peer(a: PeerArgs) -> anyhow::Result<()> {
    let progress = Progress::parse(&a.progress)?;
    let args = PingpongArgs {
        compare: None,
        progress: Some(a.progress.clone()),
        max_size: a.max_size,
        rounds: a.rounds,
        scale: a.scale,
        procs: 2,
        netns: false,
        ranks_per_node: None,
        worker: false,
    };
    let steps = plan(&args);
    let sock = bind_udp(a.bind)?;
    let me = sock.local_addr()?;
    let stdin = std::io::stdin();
    let mut go = String::new();
    let max = a.max_size as usize;
    let copies = match a.path {
        Path::Raw => {
            println!("ready {me} 0");
            stdin.lock().read_line(&mut go)?;
            run_b(&mut RawSide::new(sock, a.peer, max, progress), &steps, a.rounds)?
        }
        Path::Engine => {
            let env = outboard_settings::ProcessEnv;
            let secret = r::BENCH_SECRET.get(&env)?.with_context(|| format!("{SECRET_ENV} is not set"))?;
            let key = r::BENCH_JOB_KEY.get(&env)?.with_context(|| format!("{KEY_ENV} is not set"))?;
            let mut c = EngineConfig::new(NodeId(1), key, random_u64());
            c.secret = JobSecret::from_hex(&secret).map_err(|e| anyhow!("{SECRET_ENV}: {e}"))?;
            outboard_runtime::udp_engine_defaults(&mut c);
            c.max_message = c.max_message.max(a.max_size);
            let node = Node::start(c, sock, &[a.peer, me], progress)?;
            let port = Port::new(node.open_port(PortId(0))?);
            println!("ready {me} {}", port.endpoint().gen);
            stdin.lock().read_line(&mut go)?;
            let gen: u32 = go.split_whitespace().nth(1).and_then(|g| g.parse().ok()).ok_or_else(|| anyhow!("expected `go GEN`, got {go:?}"))?;
            let far = Endpoint { node: NodeId(0), port: PortId(0), gen };
            let mut side = EngineSide::new(port, far, max)?;
            let copies = run_b(&mut side, &steps, a.rounds)?;
            drop(side);
            crate::bench::report_engine(" (second process)", &[node.stats()]);
            copies
        }
    };
    for (o, i) in copies {
        println!("copies {o} {i}");
    }
    Ok(())
}
