//! A job's process: bootstrap, engine, one port, and every rank's endpoint.
//!
//! [`init`] is what a program launched by `outboard run`, `mpirun`,
//! `mpiexec` or `srun` calls first. Node id = rank; each rank's engine
//! listens on a UDP socket whose address, with the port endpoint and rank
//! 0's job key and start time, is exchanged through the [`Bootstrap`].
//!
//! The job secret that keys every datagram's MAC comes from
//! `OUTBOARD_JOB_SECRET` on every rank (what `outboard run` sets, or a user
//! under mpirun/srun), so it never travels; without it, rank 0 draws one
//! and hands it to the others through the bootstrap, before any engine
//! traffic (as trusted as the rendezvous connection, or the launcher's
//! PMIx or PMI-1 store: readable by the job's processes and the
//! launcher's daemons).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant as WallClock};

use outboard_engine::{incarnation, EngineConfig, Endpoint, JobSecret, NodeId, OpenError, PortId, Stats};
use outboard_host::{Group, GroupId, HostError, Port, PortIo};
use outboard_settings::{registry as settings, ProcessEnv, SettingError};
use thiserror::Error;

use crate::bootstrap::{Bootstrap, BootstrapError, LaunchEnv, Launcher, Pmi1Bootstrap, PmixBootstrap, SingletonBootstrap, TcpBootstrap, Via};
use crate::driver::TransportStats;
use crate::engine_handle::EngineHandle;
use crate::node::{bind_udp, random_u64, Node, NodeError};
use crate::node_coll::span::Span;
use crate::node_coll::{NodeColl, NodeLocal};
use crate::port::RtPort;
use crate::progress::Progress;

/// Why [`init`] failed.
#[derive(Debug, Error)]
pub enum InitError {
    /// Finding the other ranks.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// Starting the engine.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// Opening the port.
    #[error("opening the job's port: {0}")]
    Open(#[from] OpenError),
    /// An `OUTBOARD_*` variable with a bad value, or one that is not a
    /// setting: the message names it, its value and what is accepted.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// The environment otherwise (the job secret's source, the random
    /// source).
    #[error("environment: {0}")]
    Env(String),
    /// The socket.
    #[error("binding the engine's UDP socket on {ip}: {source}")]
    Bind {
        /// The address.
        ip: IpAddr,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// Settings of [`init_with`]; [`Options::from_env`] reads them from the
/// environment.
#[derive(Debug, Clone)]
pub struct Options {
    /// Progress policy; `None`: `OUTBOARD_PROGRESS` or the machine default.
    pub progress: Option<Progress>,
    /// How long a silent peer has before its operations fail
    /// (`OUTBOARD_PEER_TIMEOUT_MS`); `None`: the engine default (2 s).
    pub peer_timeout: Option<Duration>,
    /// Address to bind the engine's UDP socket to (`OUTBOARD_ADDR`, or
    /// the address of the interface `OUTBOARD_IFACE` names); `None`: the
    /// job's bootstrap decides (see [`crate::address`]).
    pub bind_ip: Option<IpAddr>,
    /// The job key (`OUTBOARD_JOB_KEY`, hex), used by rank 0; `None`:
    /// random.
    pub job_key: Option<u64>,
    /// The job secret (`OUTBOARD_JOB_SECRET`, 32 hex digits), which must
    /// then be the same on every rank; `None` on every rank: rank 0 draws
    /// one and the bootstrap hands it out.
    pub secret: Option<JobSecret>,
    /// How long to keep trying to reach the rendezvous.
    pub bootstrap_timeout: Duration,
}

impl Options {
    /// Reads `OUTBOARD_PEER_TIMEOUT_MS`, `OUTBOARD_ADDR`, `OUTBOARD_IFACE`,
    /// `OUTBOARD_JOB_KEY`, `OUTBOARD_JOB_SECRET` and
    /// `OUTBOARD_BOOTSTRAP_TIMEOUT_MS` from the process environment.
    pub fn from_env() -> Result<Options, InitError> {
        Options::from_vars(&ProcessEnv)
    }

    /// The same from any environment. The peer timeout stays `None` when
    /// unset, so the engine's own default applies.
    pub fn from_vars(env: &dyn outboard_settings::Env) -> Result<Options, InitError> {
        let secret = settings::JOB_SECRET
            .get(env)?
            .map(|v| JobSecret::from_hex(&v).map_err(|e| InitError::Env(format!("OUTBOARD_JOB_SECRET: {e}"))))
            .transpose()?;
        Ok(Options {
            secret,
            progress: None,
            peer_timeout: settings::PEER_TIMEOUT.set_value(env)?,
            bind_ip: crate::address::chosen(env)?,
            job_key: settings::JOB_KEY.get(env)?,
            bootstrap_timeout: settings::BOOTSTRAP_TIMEOUT.get(env)?,
        })
    }
}

pub(crate) enum JobBootstrap {
    Tcp(TcpBootstrap),
    Single(SingletonBootstrap),
    /// Supplied by the program ([`init_with_bootstrap`]), with the address
    /// to bind the engine to when `OUTBOARD_ADDR` does not name one.
    Custom(Box<dyn Bootstrap>, IpAddr),
    /// The launcher's key-value store (PMIx or PMI-1), closed on drop.
    Store(Box<dyn Bootstrap>),
}

impl JobBootstrap {
    pub(crate) fn get(&mut self) -> &mut dyn Bootstrap {
        match self {
            JobBootstrap::Tcp(b) => b,
            JobBootstrap::Single(b) => b,
            JobBootstrap::Custom(b, _) | JobBootstrap::Store(b) => b.as_mut(),
        }
    }
}

/// This process's place in the job. Field order matters: the port closes
/// before the engine stops.
pub struct World {
    port: Port<RtPort>,
    engine: EngineHandle,
    bootstrap: Option<JobBootstrap>,
    env: LaunchEnv,
    endpoints: Vec<Endpoint>,
    peers: Vec<SocketAddr>,
    progress_reason: String,
    /// `OUTBOARD_STATS=stderr`: print the engine's counters when dropped.
    print_stats: bool,
    /// Whether [`World::quiesce`] ran (once is enough).
    quiesced: bool,
    /// Whether the departure notices went out (once is enough).
    left: bool,
    finalized: bool,
    /// The id the next [`World::group`] gives its group.
    next_group: u64,
    /// This node's ranks, for collectives through shared memory (with a
    /// node engine and `OUTBOARD_SHM_COLL` on).
    node_local: Option<NodeLocal>,
}

/// The id of the first group [`World::group`] makes; each later call takes
/// the next id. Applications that make groups of their own with
/// [`Port::new_group`] should pick ids below this.
pub const WORLD_GROUP_FIRST: u64 = 1 << 19;

/// How long a rank that leaves after a failure keeps its engine running for
/// its departure notices: a few retransmission timeouts of the default
/// engine (0.5 ms doubling), enough for several losses in a row.
pub const LEAVE_LINGER: Duration = Duration::from_millis(50);

/// Joins the job described by the environment, with [`Options::from_env`].
pub fn init() -> Result<World, InitError> {
    init_with(Options::from_env()?)
}

/// Joins the job described by the environment. Every `OUTBOARD_*`
/// variable is checked first ([`outboard_settings::check`]): a bad value,
/// or a name that is not a setting, stops it before anything starts.
pub fn init_with(opts: Options) -> Result<World, InitError> {
    outboard_settings::check(&ProcessEnv)?;
    let mut env = LaunchEnv::detect()?;
    let boot = match env.via.clone() {
        Via::Rendezvous { addr, serve } => {
            let mut t = TcpBootstrap::connect(env.rank, env.size, addr, serve, opts.bootstrap_timeout)?;
            // A rendezvous that says nothing for as long as a dead peer
            // may is taken for dead too.
            t.set_silence_limit(opts.peer_timeout.unwrap_or_else(|| EngineConfig::new(NodeId(env.rank), 0, 0).peer_timeout))?;
            JobBootstrap::Tcp(t)
        }
        Via::Alone | Via::Program => JobBootstrap::Single(SingletonBootstrap::default()),
        Via::Pmix => {
            let b = PmixBootstrap::init()?;
            adopt(&mut env, &b, "PMIx")?;
            if env.launcher == Launcher::Pmix {
                env.local_size = b.local_size().unwrap_or(1);
            }
            JobBootstrap::Store(Box::new(b))
        }
        Via::Pmi1 { fd } => JobBootstrap::Store(Box::new(Pmi1Bootstrap::from_fd(fd, env.rank, env.size)?)),
    };
    // A fallback is worth a line whether asked or not (the launcher
    // offered PMIx and its library is missing); once, from rank 0.
    if let (0, Some(why)) = (env.rank, &env.passed_over) {
        eprintln!("outboard: {why}");
    }
    if env.rank == 0 && (settings::STATS.get(&ProcessEnv)? == "stderr" || settings::MPI_VERBOSE.get(&ProcessEnv)?) {
        eprintln!("outboard: bootstrap: {} (launched by {:?}, {} ranks)", env.via.describe(), env.launcher, env.size);
    }
    init_on(opts, env, boot)
}

/// Takes rank and size from the launcher's store `b` when the environment
/// did not name them, and refuses a store that disagrees with it.
fn adopt(env: &mut LaunchEnv, b: &dyn Bootstrap, store: &str) -> Result<(), InitError> {
    if env.size == 0 {
        env.size = b.size();
        env.rank = b.rank();
    } else if (env.rank, env.size) != (b.rank(), b.size()) {
        return Err(BootstrapError::Environment(format!(
            "the launcher's variables say rank {} of {}, but {store} says rank {} of {}",
            env.rank,
            env.size,
            b.rank(),
            b.size()
        ))
        .into());
    }
    Ok(())
}

/// Joins a job whose processes already talk through `boot` (an MPI job:
/// see [`crate::bootstrap::ExchangeBootstrap`]): rank and size come from it,
/// `local_size` is the number of ranks on this machine (for the progress
/// policy), and the engine binds `ip` unless [`Options::bind_ip`] names
/// another address. Unless `OUTBOARD_ENGINE` says otherwise, the ranks of
/// a machine share a node engine (an MPI job has several per machine as a
/// rule). The environment is checked as by [`init_with`].
pub fn init_with_bootstrap(opts: Options, boot: Box<dyn Bootstrap>, local_size: u32, ip: IpAddr) -> Result<World, InitError> {
    outboard_settings::check(&ProcessEnv)?;
    let env = LaunchEnv { launcher: Launcher::Program, rank: boot.rank(), size: boot.size(), local_size: local_size.max(1), via: Via::Program, passed_over: None };
    init_on(opts, env, JobBootstrap::Custom(boot, ip))
}

fn init_on(opts: Options, env: LaunchEnv, mut boot: JobBootstrap) -> Result<World, InitError> {
    let ip = opts.bind_ip.unwrap_or_else(|| match &boot {
        JobBootstrap::Tcp(t) => t.local_ip().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        JobBootstrap::Single(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        JobBootstrap::Custom(_, ip) => *ip,
        JobBootstrap::Store(_) => crate::address::host_ip(env.local_size >= env.size),
    });
    // An MPI program's library joins through its own bootstrap (a job of
    // several processes per node as a rule): it gets the node engine and
    // the node's collectives through shared memory unless told otherwise.
    let node = match settings::ENGINE.get(&ProcessEnv)? {
        Some(e) => e == "node",
        None => matches!(boot, JobBootstrap::Custom(..)),
    };
    if node {
        return crate::node_engine::join::init_node(opts, env, boot, ip);
    }
    let socket = bind_udp(ip).map_err(|source| InitError::Bind { ip, source })?;
    let addr = socket.local_addr().map_err(|source| InitError::Bind { ip, source })?;
    let b = boot.get();
    b.put("udp", addr.to_string().as_bytes())?;
    publish_job(b, env.rank, &opts)?;
    b.fence()?;
    let mut peers = Vec::with_capacity(env.size as usize);
    for r in 0..env.size {
        peers.push(published_addr(b, r)?);
    }
    let job = JobIdentity::read(b, &opts)?;
    let config = crate::node_engine::server::job_engine_config(env.rank, job.job_key, job.secret.clone(), job.boot(), job.min_peer_boot(), opts.peer_timeout);
    let print_stats = settings::STATS.get(&ProcessEnv)? == "stderr";
    let (progress, progress_reason) = match opts.progress {
        Some(p) => (p, "chosen by the program".to_string()),
        None => Progress::from_env(env.local_size as usize)?,
    };
    let node = Node::start(config, socket, &peers, progress)?;
    let mut port = Port::new(node.open_port(PortId(0))?);
    let nodes: Vec<u32> = (0..env.size).collect();
    let endpoints = exchange_endpoints(boot.get(), &mut port, &nodes)?;
    Ok(World { port, engine: EngineHandle::Process(node), bootstrap: Some(boot), env, endpoints, peers, progress_reason, print_stats, quiesced: false, left: false, finalized: false, next_group: WORLD_GROUP_FIRST, node_local: None })
}

/// Rank 0's part of the job's identity: the job key, the job's start, and
/// the secret (or word that every rank has it from the environment).
pub(crate) fn publish_job(b: &mut dyn Bootstrap, rank: u32, opts: &Options) -> Result<(), InitError> {
    if rank == 0 {
        b.put("job_key", &opts.job_key.unwrap_or_else(random_u64).to_be_bytes())?;
        b.put("job_start_ms", &unix_ms().to_be_bytes())?;
        match &opts.secret {
            Some(_) => b.put("secret", b"env")?,
            None => b.put("secret", &[&b"bootstrap:"[..], &random_secret()?.to_bytes()].concat())?,
        }
    }
    Ok(())
}

/// The UDP address `rank` published.
pub(crate) fn published_addr(b: &dyn Bootstrap, rank: u32) -> Result<SocketAddr, InitError> {
    let v = b.get(rank, "udp")?;
    Ok(std::str::from_utf8(&v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| BootstrapError::Protocol(format!("rank {rank} published a bad UDP address")))?)
}

/// The job's identity as rank 0 published it.
pub(crate) struct JobIdentity {
    pub job_key: u64,
    pub start_ms: u64,
    pub secret: JobSecret,
}

impl JobIdentity {
    pub fn read(b: &dyn Bootstrap, opts: &Options) -> Result<JobIdentity, InitError> {
        let key = b.get(0, "job_key")?;
        let job_key = u64::from_be_bytes(key.try_into().map_err(|_| BootstrapError::Protocol("bad job key".into()))?);
        let start = b.get(0, "job_start_ms")?;
        let start_ms = u64::from_be_bytes(start.try_into().map_err(|_| BootstrapError::Protocol("bad job start".into()))?);
        let secret = job_secret(&b.get(0, "secret")?, opts.secret.clone())?;
        Ok(JobIdentity { job_key, start_ms, secret })
    }

    /// A new engine's incarnation. Incarnations grow with time and are
    /// never below the job's start (an engine whose clock lags rank 0's
    /// takes the job's start), so a datagram replayed from an earlier run
    /// under the same secret is older than the job's floor and dropped.
    pub fn boot(&self) -> u64 {
        incarnation(unix_ms().max(self.start_ms), random_u64() as u32)
    }

    /// The job's floor for incarnations.
    pub fn min_peer_boot(&self) -> u64 {
        incarnation(self.start_ms, 0)
    }
}

/// Publishes this rank's port and reads every rank's; `nodes[r]` is the
/// node of rank `r`.
pub(crate) fn exchange_endpoints(b: &mut dyn Bootstrap, port: &mut Port<RtPort>, nodes: &[u32]) -> Result<Vec<Endpoint>, InitError> {
    let ep = port.endpoint();
    b.put("ep", &[&[ep.port.0][..], &ep.gen.to_be_bytes()].concat())?;
    b.fence()?;
    let mut endpoints = Vec::with_capacity(nodes.len());
    for (r, &node) in nodes.iter().enumerate() {
        let v = b.get(r as u32, "ep")?;
        if v.len() != 5 {
            return Err(BootstrapError::Protocol(format!("rank {r} published a bad endpoint")).into());
        }
        endpoints.push(Endpoint { node: NodeId(node), port: PortId(v[0]), gen: u32::from_be_bytes([v[1], v[2], v[3], v[4]]) });
    }
    Ok(endpoints)
}

impl World {
    /// A world whose engine and port are up and whose ranks' endpoints are
    /// known.
    pub(crate) fn assemble(
        port: Port<RtPort>,
        engine: EngineHandle,
        boot: JobBootstrap,
        env: LaunchEnv,
        endpoints: Vec<Endpoint>,
        peers: Vec<SocketAddr>,
        progress_reason: String,
    ) -> Result<World, InitError> {
        let print_stats = settings::STATS.get(&ProcessEnv)? == "stderr";
        Ok(World { port, engine, bootstrap: Some(boot), env, endpoints, peers, progress_reason, print_stats, quiesced: false, left: false, finalized: false, next_group: WORLD_GROUP_FIRST, node_local: None })
    }

    /// Lets the node's ranks run their groups' collectives through shared
    /// memory.
    pub(crate) fn set_node_local(&mut self, n: NodeLocal) {
        self.node_local = Some(n);
    }

    /// The node collectives of `g` ([`crate::node_coll`]): `None` unless
    /// every member runs on this node (under a node engine, with
    /// `OUTBOARD_SHM_COLL` on) and there are two or more. Every member
    /// must ask, once per group it makes, and in the same order as the
    /// others.
    pub fn node_coll(&mut self, g: &Group) -> std::io::Result<Option<NodeColl>> {
        let members: Option<Vec<u32>> = g.members().iter().map(|ep| self.rank_of(ep)).collect();
        match (&mut self.node_local, members) {
            (Some(local), Some(members)) => local.open(g.id().0, g.rank() as usize, members),
            _ => Ok(None),
        }
    }

    /// `g` cut node by node ([`Span`]): its node's members in shared
    /// memory and, at a node's leader, the leaders' group. `None` unless
    /// node collectives are on (under node engines, `OUTBOARD_SHM_COLL`)
    /// and `g` spans two or more nodes, one of them with two or more of
    /// its members. Every member must ask, once per group it makes, in
    /// the same order as the others.
    pub fn span(&mut self, g: &Group) -> std::io::Result<Option<Span>> {
        let Some((node_of, local_rank, leaders)) = self.node_local.as_ref().and_then(|_| Span::layout(g)) else { return Ok(None) };
        let my_node = node_of[g.rank() as usize];
        let members: Option<Vec<u32>> = (0..g.size()).filter(|&r| node_of[r as usize] == my_node).map(|r| g.member(r).and_then(|ep| self.rank_of(ep))).collect();
        let Some(members) = members else { return Ok(None) };
        let local = match &mut self.node_local {
            Some(n) => n.open(g.id().0, local_rank[g.rank() as usize] as usize, members)?,
            None => None,
        };
        let leaders_group = self.port.leaders_group(g).map_err(std::io::Error::other)?;
        Ok(Some(Span { node_of, local_rank, leaders, my_node, local, leaders_group }))
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.env.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> u32 {
        self.env.size
    }

    /// How many of the job's ports this rank's engine serves: 1 with an
    /// engine per process, the node's ranks with a node engine
    /// (`OUTBOARD_ENGINE=node`), whose counters (module invocations, say)
    /// add up over all of them.
    pub fn engine_ports(&self) -> u32 {
        match self.engine {
            EngineHandle::Process(_) => 1,
            EngineHandle::Node { .. } => self.env.local_size,
        }
    }

    /// Who launched the job.
    pub fn launcher(&self) -> Launcher {
        self.env.launcher
    }

    /// How the ranks found each other.
    pub fn bootstrap_via(&self) -> &Via {
        &self.env.via
    }

    /// The port of `rank` (its node, port and incarnation).
    pub fn endpoint(&self, rank: u32) -> Endpoint {
        self.endpoints[rank as usize]
    }

    /// The rank whose port `ep` is (any incarnation), if it is one of the
    /// job's: what a receive's source endpoint means to a program that
    /// counts in ranks.
    pub fn rank_of(&self, ep: Endpoint) -> Option<u32> {
        // With an engine per process, node id = rank.
        if let Some(e) = self.endpoints.get(ep.node.0 as usize) {
            if e.node == ep.node && e.port == ep.port {
                return Some(ep.node.0);
            }
        }
        self.endpoints.iter().position(|e| e.node == ep.node && e.port == ep.port).map(|r| r as u32)
    }

    /// Every rank's endpoint, in rank order (the members of the world
    /// group).
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// A group of every rank of the job, in rank order (MPI_COMM_WORLD),
    /// registered at this rank's port, for the collectives of
    /// [`Port`] (`port.barrier(&mut g, ...)`, `port.allreduce(&mut g, ...)`).
    ///
    /// Every rank must call it the same number of times and in the same
    /// order relative to its other group creations: the n-th call at every
    /// rank makes the same group (id [`WORLD_GROUP_FIRST`] + n - 1), like
    /// `MPI_Comm_dup`. Groups are independent: collectives on one never
    /// mix with another's. Subgroups come from `Port::split`.
    ///
    /// ```no_run
    /// use outboard_host::{BarrierAlgorithm, Mode};
    /// let mut world = outboard_runtime::init()?;
    /// let mut g = world.group()?;
    /// world.port().barrier(&mut g, Mode::Offloaded, BarrierAlgorithm::Dissemination)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group(&mut self) -> Result<Group, HostError> {
        let id = GroupId(self.next_group);
        let g = self.port.new_group(id, self.env.rank, self.endpoints.clone())?;
        self.next_group += 1;
        Ok(g)
    }

    /// The UDP address of `rank`'s engine.
    pub fn engine_addr(&self, rank: u32) -> SocketAddr {
        self.peers[self.endpoints[rank as usize].node.0 as usize]
    }

    /// This rank's port.
    pub fn port(&mut self) -> &mut Port<RtPort> {
        &mut self.port
    }

    /// The engine thread of this process; `None` when the process uses
    /// its node's engine process (`OUTBOARD_ENGINE=node`).
    pub fn node(&self) -> Option<&Node> {
        self.engine.node()
    }

    /// Where this rank's engine runs and how waiting threads wait, in a
    /// sentence (what an MPI program's library prints when asked to be
    /// verbose).
    pub fn describe_engine(&self) -> String {
        let (progress, why) = self.progress();
        match self.engine {
            EngineHandle::Process(_) => format!("engine: a thread of this process; progress {progress} ({why})"),
            EngineHandle::Node { .. } => format!(
                "engine: node {}'s engine process, shared by its {} local ranks; progress {progress} ({why}); {}",
                self.endpoint(self.rank()).node.0,
                self.env.local_size,
                if self.node_local.is_some() { "groups within the node meet in shared memory" } else { "every collective goes through the engine (OUTBOARD_SHM_COLL=off)" }
            ),
        }
    }

    /// Threads of this process, and of its node engine's process (its id
    /// and thread count) when the engine runs in one: what a benchmark
    /// shows to say what a node costs in threads. `None` where `/proc`
    /// cannot tell.
    pub fn threads(&mut self) -> (Option<usize>, Option<(u32, Option<usize>)>) {
        let count = |pid: &str| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok())
        };
        let engine = self.port().io().remote_mut().and_then(|r| r.engine_pid()).map(|pid| (pid, count(&pid.to_string())));
        (count("self"), engine)
    }

    /// The progress policy and why it was chosen.
    pub fn progress(&self) -> (Progress, &str) {
        (self.engine.progress(), &self.progress_reason)
    }

    /// The engine's and the transport's counters.
    pub fn stats(&self) -> (Stats, TransportStats) {
        self.engine.stats()
    }

    /// The rank whose death this process learned of first (its engine's
    /// own timeout, or a failure notice from another rank), if any: the
    /// job-level fact behind an error. An operation fails naming the peer
    /// it needed ([`HostError::failed_process`]); once survivors exit
    /// after their errors, that may be a survivor, while this still names
    /// the rank that died first.
    pub fn first_failure(&self) -> Option<u32> {
        let node = self.engine.stats().0.first_failed?;
        // With node engines a node is several ranks: its first.
        self.endpoints.iter().position(|e| e.node == node).map(|r| r as u32)
    }

    /// Gives the job up after a failure (what `MPI_Abort` is to MPI):
    /// tells every live rank that this one is leaving, so their operations
    /// waiting on it fail at once, naming the job's first failure, instead
    /// of each waiting a peer timeout in turn; then ends the process with
    /// `code`. Takes [`LEAVE_LINGER`] to carry the notices across losses.
    pub fn abort(mut self, code: i32) -> ! {
        self.leave();
        std::process::exit(code)
    }

    /// Gives the job up after a failure without ending the process (a
    /// language runtime that still has a traceback to print and handlers
    /// to run): the departure notices of [`World::abort`], once, taking
    /// [`LEAVE_LINGER`]. Operations on the world afterwards may fail at
    /// once or hang for a peer timeout: drop it, do not use it.
    pub fn abandon(&mut self) {
        self.leave();
    }

    /// Sends the departure notices once and drives the engine for
    /// [`LEAVE_LINGER`].
    fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        self.engine.leave();
        let start = WallClock::now();
        while start.elapsed() < LEAVE_LINGER {
            self.port.io().idle();
        }
    }

    /// The line a rank prints when it gives up on `err`: the job's first
    /// failure as this rank knows it, then the error, both in ranks
    /// (`rank 3 gives up: rank 1 failed first; rank 2 is unreachable`).
    pub fn failure_report(&self, err: &(dyn std::error::Error + 'static)) -> String {
        let first = self.engine.stats().0.first_failed.map(|n| n.0);
        if self.engine.node().is_some() {
            return crate::failure::report(self.rank(), first, err);
        }
        let (node, port) = (|n| self.name_node(n), |ep| self.name_port(ep));
        crate::failure::report_with(self.rank(), self.endpoint(self.rank()).node.0, first, err, &crate::failure::Names { node: &node, port: &port })
    }

    /// `err` worded in ranks: an engine error that names a node or a port
    /// (`peer node NodeId(2) is unreachable`) as the ranks it means (`rank
    /// 2 is unreachable`; with node engines `node 1 (ranks 2, 3) is
    /// unreachable`); any other error as its own sentence.
    pub fn error_in_ranks(&self, err: &(dyn std::error::Error + 'static)) -> String {
        if self.engine.node().is_some() {
            return crate::failure::in_names(err, &crate::failure::RANKS);
        }
        let (node, port) = (|n| self.name_node(n), |ep| self.name_port(ep));
        crate::failure::in_names(err, &crate::failure::Names { node: &node, port: &port })
    }

    /// A node of a job of node engines, by its ranks.
    fn name_node(&self, n: u32) -> String {
        let ranks: Vec<String> = (0..self.size()).filter(|&r| self.endpoints[r as usize].node.0 == n).map(|r| r.to_string()).collect();
        match ranks.len() {
            1 => format!("node {n} (rank {})", ranks[0]),
            _ => format!("node {n} (ranks {})", ranks.join(", ")),
        }
    }

    /// A port, by its rank.
    fn name_port(&self, ep: Endpoint) -> String {
        self.rank_of(ep).map_or_else(|| format!("port {} of node {}", ep.port.0, ep.node.0), |r| format!("rank {r}"))
    }

    /// Waits until every rank calls `barrier` (through the bootstrap, out
    /// of band: for setup and tests, not a fast collective).
    pub fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.bootstrap.as_mut().expect("present until drop").get().fence()
    }

    /// Waits (driving the engine as the policy requires) until this
    /// engine has nothing under way, for at most the peer timeout plus a
    /// second: a dead peer's operations fail within the peer timeout.
    fn quiesce(&mut self) {
        if std::mem::replace(&mut self.quiesced, true) {
            return;
        }
        let limit = self.engine.peer_timeout() + Duration::from_secs(1);
        let start = WallClock::now();
        while !self.engine.is_quiet() && start.elapsed() < limit {
            self.port.io().idle();
            if self.engine.node().is_none() {
                // Each look at a node engine is a request on its socket.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Leaves the job together with every other rank: waits until this
    /// engine's sends are all confirmed, then for every rank to get there.
    /// After it no rank needs anything from another, so all may exit.
    ///
    /// The wait for the other ranks has no time limit (they may still be
    /// computing), but it fails instead of hanging when the job is broken:
    /// with [`BootstrapError::RankLost`] when a rank's process ended
    /// without reaching it (or the rank that serves the rendezvous left),
    /// and with [`BootstrapError::RendezvousLost`] when the rendezvous
    /// closed or said nothing, not even a ping, for the peer timeout (at
    /// least [`MIN_SILENCE`](crate::bootstrap::MIN_SILENCE)).
    pub fn finalize(mut self) -> Result<(), BootstrapError> {
        self.quiesce();
        self.barrier()?;
        self.finalized = true;
        Ok(())
    }

    /// How long the rank that serves the rendezvous waits, when it leaves,
    /// for the other ranks to leave too: the peer timeout (after a clean
    /// [`World::finalize`] they leave at once; without one, they may still
    /// need this rank's engine to confirm their last sends), and not at
    /// all when the job is known to have failed: a peer was declared dead,
    /// a fence failed, or this thread panics.
    fn leave_wait(&self, b: &TcpBootstrap) -> Duration {
        let failed = std::thread::panicking() || self.left || b.failed() || self.engine.stats().0.peers_failed > 0;
        if failed {
            Duration::ZERO
        } else {
            self.engine.peer_timeout()
        }
    }
}

impl Drop for World {
    /// Without [`World::finalize`], leaves on its own: no fence (other
    /// ranks may be waiting for this one), so their next fence fails with
    /// [`BootstrapError::RankLost`] instead of hanging. Blocks for at most
    /// the peer timeout plus a second (this engine's last sends; after a
    /// failure, only [`LEAVE_LINGER`] for the departure notices) plus, on
    /// the rank that serves the rendezvous, the peer timeout for the others
    /// to leave (none when the job is known to have failed) and a fraction
    /// of a second; never on a dead or silent rendezvous.
    fn drop(&mut self) {
        if !self.finalized && !std::thread::panicking() {
            if self.left || self.engine.stats().0.peers_failed > 0 {
                // Leaving after a failure (or abandoned): say so at once,
                // so no rank waits a peer timeout on this one (nor on this
                // one's wait for its last sends to ranks that may be
                // leaving too).
                self.leave();
            } else {
                self.quiesce();
            }
        }
        // A node engine prints its own counters (the node's) when it ends.
        if self.print_stats && self.engine.node().is_some() {
            // For fault runs: what the engine dropped and why.
            let (engine, transport) = self.engine.stats();
            eprint!("{}", crate::stats_table::stats_table(self.env.rank, &engine));
            eprintln!(
                "outboard copies rank {}: engine {} bytes from host memory into packets, {} into host memory; host library {} bytes between the caller's memory and the engine's",
                self.env.rank,
                transport.copied_out,
                transport.copied_in,
                self.port.io_ref().host_copied()
            );
            if engine.vm_instructions > 0 {
                let m = transport.module_time;
                eprintln!(
                    "outboard module time rank {}: {} VM instructions in {} engine calls, {} ns",
                    self.env.rank, engine.vm_instructions, m.calls, m.ns
                );
            }
        }
        if let Some(JobBootstrap::Tcp(b)) = self.bootstrap.take() {
            let wait = self.leave_wait(&b);
            b.finish(wait);
        }
    }
}

/// Milliseconds since 1970 on this host's clock.
fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A fresh job secret from the operating system's random source (what
/// `outboard run` hands its ranks); unlike other random values, no
/// fallback on the clock.
pub fn random_secret() -> Result<JobSecret, InitError> {
    let mut b = [0u8; outboard_engine::SECRET_LEN];
    getrandom::getrandom(&mut b).map_err(|e| InitError::Env(format!("no random source for the job secret: {e}")))?;
    Ok(JobSecret::from_bytes(b))
}

/// This rank's job secret, from what rank 0 published (`env`: every rank
/// has `OUTBOARD_JOB_SECRET`; `bootstrap:` and 16 bytes: rank 0 drew it)
/// and this rank's own `OUTBOARD_JOB_SECRET`. A mix of the two ways is an
/// error naming the fix, not a job whose packets never authenticate.
pub(crate) fn job_secret(published: &[u8], own: Option<JobSecret>) -> Result<JobSecret, InitError> {
    if published == b"env" {
        return own.ok_or_else(|| {
            InitError::Env("rank 0 has OUTBOARD_JOB_SECRET but this rank does not: set the same value on every rank".into())
        });
    }
    let drawn = published
        .strip_prefix(b"bootstrap:")
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
        .ok_or_else(|| BootstrapError::Protocol("rank 0 published a bad job secret".into()))?;
    if own.is_some() {
        return Err(InitError::Env("this rank has OUTBOARD_JOB_SECRET but rank 0 does not: set the same value on every rank".into()));
    }
    Ok(JobSecret::from_bytes(drawn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_comes_from_every_rank_or_from_rank_0_never_from_a_mix() {
        let mine = JobSecret::from_bytes([1; 16]);
        assert_eq!(job_secret(b"env", Some(mine.clone())).unwrap(), mine);
        let drawn = [&b"bootstrap:"[..], &[9; 16]].concat();
        assert_eq!(job_secret(&drawn, None).unwrap(), JobSecret::from_bytes([9; 16]));
        let e = job_secret(b"env", None).unwrap_err().to_string();
        assert!(e.contains("rank 0 has OUTBOARD_JOB_SECRET but this rank does not"), "{e}");
        let e = job_secret(&drawn, Some(mine)).unwrap_err().to_string();
        assert!(e.contains("this rank has OUTBOARD_JOB_SECRET but rank 0 does not"), "{e}");
        assert!(job_secret(b"bootstrap:short", None).unwrap_err().to_string().contains("bad job secret"));
    }

    #[test]
    fn options_come_from_the_settings_and_a_bad_one_is_a_sentence() {
        let o = Options::from_vars(&[("OUTBOARD_PEER_TIMEOUT_MS", "750"), ("OUTBOARD_JOB_KEY", "0x5eed"), ("OUTBOARD_ADDR", "10.0.0.5")]).unwrap();
        assert_eq!((o.peer_timeout, o.job_key), (Some(Duration::from_millis(750)), Some(0x5eed)));
        assert_eq!(o.bind_ip, Some("10.0.0.5".parse().unwrap()));
        assert_eq!(o.bootstrap_timeout, Duration::from_secs(60));
        let o = Options::from_vars(&[]).unwrap();
        assert_eq!(o.peer_timeout, None, "unset: the engine's own default");
        // 0 used to reach the engine and come back as an error about
        // rto_initial, a field the user never set.
        let e = Options::from_vars(&[("OUTBOARD_PEER_TIMEOUT_MS", "0")]).unwrap_err().to_string();
        assert!(e.starts_with("OUTBOARD_PEER_TIMEOUT_MS=\"0\" is shorter than 1ms: use a duration"), "{e}");
        let e = Options::from_vars(&[("OUTBOARD_JOB_SECRET", "abc")]).unwrap_err().to_string();
        assert!(e.contains("OUTBOARD_JOB_SECRET") && e.contains("32 hexadecimal digits") && !e.contains("abc"), "{e}");
    }

    #[test]
    fn the_registered_peer_timeout_default_is_the_engines() {
        let engine = EngineConfig::new(NodeId(0), 0, 0).peer_timeout;
        assert_eq!(settings::PEER_TIMEOUT.get(&[]).unwrap(), engine);
    }

    #[test]
    fn two_drawn_secrets_differ() {
        assert_ne!(random_secret().unwrap(), random_secret().unwrap());
    }
}
