//! `outboard run`: launch a job's processes on this machine.
//!
//! Starts the job's rendezvous, then N copies of the program with the
//! bootstrap environment (`OUTBOARD_RANK`, `OUTBOARD_SIZE`,
//! `OUTBOARD_LOCAL_SIZE`, `OUTBOARD_RENDEZVOUS`, `OUTBOARD_JOB_KEY`, and
//! `OUTBOARD_JOB_SECRET`, a fresh secret per job that the packet MACs are
//! keyed from and that never leaves this machine's process environment),
//! forwards their output line by line with a `[rank]` prefix, and fails,
//! naming the rank, when any rank fails; the other ranks then get a grace
//! period to notice (their operations on the dead rank fail within the
//! engine's peer timeout) before they are killed.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use crate::netns::{self, Net};
use outboard_runtime::bootstrap::{RendezvousServer, ENV_LOCAL_SIZE, ENV_RANK, ENV_RENDEZVOUS, ENV_SIZE};

mod elf;
mod mpi;

/// Arguments of `outboard run`.
#[derive(clap::Args)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// Number of processes (ranks); mpirun's `-np N` works too.
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..=4096))]
    ranks: u32,
    /// Seconds the other ranks get after one failed, before they are
    /// killed.
    #[arg(long, default_value_t = 5.0)]
    grace: f64,
    /// Address the rendezvous listens on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    rendezvous: SocketAddr,
    /// Kill the job after this many seconds (0: no limit).
    #[arg(long, default_value_t = 0.0)]
    timeout: f64,
    /// Group the ranks into nodes of this many (ranks 0..R-1 on node 0, and
    /// so on), each served by one node engine process (`outboard node`),
    /// which the ranks reach through shared memory; sets
    /// OUTBOARD_ENGINE=node and each rank's OUTBOARD_NODE_NAME. Without it
    /// every rank runs an engine of its own (OUTBOARD_ENGINE, default
    /// process).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=254))]
    ranks_per_node: Option<u32>,
    /// Run each node in a network namespace of its own, joined to the
    /// others by a bridge (needs root and iproute2): the nodes then talk
    /// over real interfaces, where nftables can drop and duplicate, not
    /// over loopback. Node `i` has address 10.77.0.{i+1}; the rendezvous
    /// listens on the bridge, 10.77.0.254. Without --ranks-per-node, each
    /// rank is a node. The namespaces are deleted when the job ends.
    #[arg(long)]
    netns: bool,
    /// The program and its arguments.
    #[arg(required = true, allow_hyphen_values = true, value_name = "PROGRAM [ARGS]...")]
    command: Vec<String>,
}

/// `args` (the whole command line) with mpirun's spelling of the rank
/// count, `outboard run -np N`, turned into `--np N`: clap reads a single
/// dash as one-letter options, `-np` as `-n p`. Only `run`'s own options
/// are looked at, up to the program (`run`, the subcommand, tells which
/// of them take a value); the program's arguments are left alone.
pub fn mpirun_spelling(mut args: Vec<OsString>, run: &clap::Command) -> Vec<OsString> {
    if args.get(1).is_none_or(|a| a != run.get_name()) {
        return args;
    }
    let takes_value = |a: &str| {
        run.get_arguments().filter(|o| o.get_action().takes_values() && !o.is_positional()).any(|o| {
            o.get_long().is_some_and(|l| a.strip_prefix("--") == Some(l)) || o.get_short().is_some_and(|s| a == format!("-{s}"))
        })
    };
    let mut i = 2;
    while i < args.len() {
        let Some(arg) = args[i].to_str() else { break };
        if arg == "-np" {
            args[i] = "--np".into();
            i += 2;
        } else if takes_value(arg) {
            i += 2;
        } else if arg.starts_with('-') && arg != "-" && arg != "--" {
            i += 1;
        } else {
            break;
        }
    }
    args
}

/// How one rank ended.
struct Ended {
    rank: u32,
    status: ExitStatus,
}

/// Runs the job; an error names the first rank that failed.
pub fn run(a: RunArgs) -> anyhow::Result<()> {
    let seconds = |s: f64| s.is_finite() && s >= 0.0;
    if !(seconds(a.grace) && seconds(a.timeout)) {
        bail!("--grace and --timeout must be non-negative numbers of seconds");
    }
    mpi::refuse_mpi_programs(a.ranks, &a.command, std::env::var_os("LD_PRELOAD").as_deref())?;
    let per_node = a.ranks_per_node.unwrap_or(1);
    let net = if a.netns {
        let nodes = a.ranks.div_ceil(per_node);
        Some(Net::create("run", nodes).context("--netns: building a network namespace per node (needs root and iproute2)")?)
    } else {
        None
    };
    let server = match &net {
        // The ranks reach the rendezvous over the bridge: it listens in
        // the hub's namespace (the socket stays there, served from here).
        Some(net) => {
            let at = SocketAddr::from((netns::HUB_IP, 0));
            Net::inside(&net.hub, || RendezvousServer::bind(at).with_context(|| format!("binding the rendezvous on {at} in the hub namespace")))?
        }
        None => RendezvousServer::bind(a.rendezvous).with_context(|| format!("binding the rendezvous on {}", a.rendezvous))?,
    };
    let addr = server.local_addr()?;
    let _rendezvous = server.spawn(a.ranks)?;
    let job_key = format!("{:016x}", outboard_runtime::random_u64());
    // A user-chosen secret (to attach a process started by hand) wins.
    let secret = match outboard_settings::registry::JOB_SECRET.get(&outboard_settings::ProcessEnv)? {
        Some(s) => s,
        None => outboard_runtime::random_secret()?.to_hex(),
    };
    let (program, args) = a.command.split_first().expect("clap requires a program");

    let placement = a.ranks_per_node.map(|r| emulated_placement(a.ranks, r));
    let mut children: Vec<Option<Child>> = Vec::new();
    let mut forwarders: Vec<JoinHandle<()>> = Vec::new();
    let me = std::env::current_exe().context("finding the outboard command for the node engines")?;
    for rank in 0..a.ranks {
        let mut cmd = match &net {
            Some(net) => {
                let node = rank / per_node;
                let mut c = netns::command_in(&net.ranks[node as usize], program);
                c.env("OUTBOARD_ADDR", netns::rank_ip(node).to_string()).env_remove("OUTBOARD_IFACE");
                c
            }
            None => Command::new(program),
        };
        let local = match a.ranks_per_node {
            Some(r) => {
                cmd.env("OUTBOARD_ENGINE", "node")
                    .env("OUTBOARD_NODE_NAME", format!("node{}", rank / r))
                    .env("OUTBOARD_NODE_PROGRAM", &me);
                if let Some(p) = &placement {
                    p.apply(&mut cmd, rank / r);
                }
                r.min(a.ranks - rank / r * r)
            }
            None if a.netns => 1,
            None => a.ranks,
        };
        let spawned = cmd
            .args(args)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, a.ranks.to_string())
            .env(ENV_LOCAL_SIZE, local.to_string())
            .env(ENV_RENDEZVOUS, addr.to_string())
            .env("OUTBOARD_JOB_KEY", &job_key)
            .env("OUTBOARD_JOB_SECRET", &secret)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut children);
                bail!("cannot start {program:?} for rank {rank}: {e}");
            }
        };
        if let Some(out) = child.stdout.take() {
            forwarders.push(forward(rank, out, false));
        }
        if let Some(err) = child.stderr.take() {
            forwarders.push(forward(rank, err, true));
        }
        children.push(Some(child));
    }

    let start = Instant::now();
    let grace = Duration::from_secs_f64(a.grace);
    let limit = (a.timeout > 0.0).then(|| Duration::from_secs_f64(a.timeout));
    let mut first_failure: Option<(Ended, Instant)> = None;
    let mut timed_out = false;
    let mut left = a.ranks;
    while left > 0 {
        for (rank, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                *slot = None;
                left -= 1;
                if !status.success() && first_failure.is_none() {
                    first_failure = Some((Ended { rank: rank as u32, status }, Instant::now()));
                }
            }
        }
        let expired = first_failure.as_ref().is_some_and(|(_, t)| t.elapsed() >= grace);
        if left > 0 && limit.is_some_and(|l| start.elapsed() >= l) {
            timed_out = true;
        }
        if left > 0 && (expired || timed_out) {
            kill_all(&mut children);
            left = 0;
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // Output still buffered in the pipes comes through; a pipe held open
    // by a killed rank's own child processes is not waited for.
    let drain = Instant::now();
    while forwarders.iter().any(|f| !f.is_finished()) && drain.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The namespaces go now (with the interfaces in them); the ranks
    // that ran there are gone.
    drop(net);
    if let Some((e, _)) = first_failure {
        bail!("rank {} of {} failed: {}", e.rank, a.ranks, describe(e.status));
    }
    if timed_out {
        bail!("the job did not finish within --timeout {} s; all ranks were killed", a.timeout);
    }
    Ok(())
}

fn kill_all(children: &mut [Option<Child>]) {
    for child in children.iter_mut().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
    for c in children.iter_mut() {
        *c = None;
    }
}

fn describe(s: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            let name = match sig {
                6 => " (SIGABRT)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("killed by signal {sig}{name}");
        }
    }
    match s.code() {
        Some(c) => format!("exit status {c}"),
        None => s.to_string(),
    }
}

/// Copies a rank's output to ours, each line prefixed with the rank, whole
/// lines at a time so ranks never interleave within a line.
fn forward(rank: u32, from: impl Read + Send + 'static, to_stderr: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    let mut out = Vec::with_capacity(line.len() + 8);
                    out.extend_from_slice(format!("[{rank}] ").as_bytes());
                    out.extend_from_slice(&line);
                    let _ = if to_stderr {
                        std::io::stderr().lock().write_all(&out)
                    } else {
                        std::io::stdout().lock().write_all(&out)
                    };
                }
            }
        }
    })
}

/// How the node engines of nodes that share this machine are placed,
/// unless the user chose (`OUTBOARD_ENGINE_CPU` or `OUTBOARD_PROGRESS`
/// set): each node engine counts the machine's cores as its node's, so
/// left alone every one would pin itself to the same last core and spin
/// there.
pub(crate) enum Placement {
    /// The user's variables stand, or each engine places itself (one
    /// node; or fewer cores than ranks and engines, where spin-then-block
    /// for all was tried and made one engine outlive the job's output:
    /// see the performance page).
    AsSet,
    /// Node `k`'s engine polls core `cpus[k]`: the machine has a core for
    /// every rank and engine.
    OwnCores(Vec<usize>),
}

impl Placement {
    /// Sets node `node`'s variables on a rank's command.
    pub(crate) fn apply(&self, cmd: &mut Command, node: u32) {
        match self {
            Placement::AsSet => {}
            Placement::OwnCores(cpus) => {
                cmd.env("OUTBOARD_ENGINE_CPU", cpus[node as usize].to_string());
            }
        }
    }
}

/// The placement of `ranks` ranks in nodes of `per_node` on this machine.
pub(crate) fn emulated_placement(ranks: u32, per_node: u32) -> Placement {
    let nodes = ranks.div_ceil(per_node.max(1));
    let chosen = ["OUTBOARD_ENGINE_CPU", "OUTBOARD_PROGRESS"].iter().any(|k| std::env::var_os(k).is_some());
    if nodes < 2 || chosen {
        return Placement::AsSet;
    }
    match outboard_runtime::affinity::emulated_engine_cpus(&outboard_runtime::affinity::node_cpus(), ranks as usize, nodes as usize) {
        Some(cpus) => Placement::OwnCores(cpus),
        None => Placement::AsSet,
    }
}

