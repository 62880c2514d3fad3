//! Bootstrap: how the processes of a job find each other before their
//! engines can talk.
//!
//! A [`Bootstrap`] is a tiny key-value exchange in the style of PMI: each
//! rank [`put`](Bootstrap::put)s values, all ranks meet in a
//! [`fence`](Bootstrap::fence), after which any rank can
//! [`get`](Bootstrap::get) any rank's values. The runtime uses it to
//! exchange every rank's UDP address and port endpoint, and rank 0's job key.
//!
//! Where rank and size come from ([`LaunchEnv::detect`]):
//!
//! | launcher | rank, size | bootstrap (`OUTBOARD_BOOTSTRAP=auto`) |
//! | --- | --- | --- |
//! | `outboard run` | `OUTBOARD_RANK`, `OUTBOARD_SIZE` | served by the launcher at `OUTBOARD_RENDEZVOUS` |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` | the launcher's PMIx ([`PmixBootstrap`]) |
//! | MPICH Hydra (`mpiexec`) | `PMI_RANK`, `PMI_SIZE` | the launcher's PMI-1 on `PMI_FD` ([`Pmi1Bootstrap`]) |
//! | Slurm `srun` | `SLURM_PROCID`, `SLURM_NTASKS` (`PMI_RANK`, `PMI_SIZE` under `--mpi=pmi2`) | PMIx under `--mpi=pmix`, PMI-1 under `--mpi=pmi2` (Slurm's plugin answers it too), else `OUTBOARD_RENDEZVOUS` |
//! | another PMIx launcher (PRRTE) | `PMIX_RANK`, the job size from PMIx | the launcher's PMIx |
//! | none | rank 0 of 1 | none needed |
//!
//! The order of choice, first that applies: `outboard run`'s own
//! variables; `OUTBOARD_RENDEZVOUS` if the user set it (rank 0 serves it);
//! PMIx if `PMIX_RANK` and `PMIX_NAMESPACE` are set and `libpmix.so.2`
//! loads; PMI-1 if `PMI_FD` is set; else an error naming
//! `OUTBOARD_RENDEZVOUS` (and why PMIx could not be used, if it was
//! offered). A job of one needs none. `OUTBOARD_BOOTSTRAP=tcp|pmix|pmi`
//! forces one of them: an error, not a fallback, when it is not there.
//!
//! With `OUTBOARD_RENDEZVOUS` the user passes a host and port that rank
//! 0's host can bind and every rank can reach (like
//! `MASTER_ADDR:MASTER_PORT` elsewhere), e.g.
//! `mpirun -x OUTBOARD_RENDEZVOUS=node0:29500 ./app`. The launchers'
//! stores need nothing from the user; they are readable by the job's
//! processes and the launcher's daemons, which is where the job secret
//! rank 0 draws travels when `OUTBOARD_JOB_SECRET` is not set.

mod exchange;
pub mod pmi1;
pub mod pmix;
mod rendezvous;

use std::net::SocketAddr;
use std::time::Duration;

use outboard_settings::kinds::Count;
use outboard_settings::{registry as settings, Env, FnEnv, OptVar, ProcessEnv, SettingError};

use thiserror::Error;

pub use exchange::{Allgather, ExchangeBootstrap};
pub use pmi1::Pmi1Bootstrap;
pub use pmix::PmixBootstrap;
pub use rendezvous::{RendezvousServer, TcpBootstrap, MIN_SILENCE, PING_INTERVAL};

/// Why the bootstrap failed.
#[derive(Debug, Error)]
pub enum BootstrapError {
    /// The environment names no usable rank, size or address.
    #[error("bootstrap environment: {0}")]
    Environment(String),
    /// An `OUTBOARD_*` launch variable with a bad value.
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// Talking to the rendezvous.
    #[error("rendezvous at {addr}: {source}")]
    Io {
        /// The rendezvous address.
        addr: SocketAddr,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The rendezvous sent something that is not the protocol.
    #[error("rendezvous protocol violation: {0}")]
    Protocol(String),
    /// A rank went away before the job finished its bootstrap exchanges.
    #[error("rank {rank} left the job: {reason}")]
    RankLost {
        /// The rank.
        rank: u32,
        /// What the rendezvous saw.
        reason: String,
    },
    /// `get` for a key that rank did not put before the last fence.
    #[error("rank {rank} published no value for {key:?}")]
    Missing {
        /// The rank asked about.
        rank: u32,
        /// The key.
        key: String,
    },
    /// The rendezvous closed the connection or stopped answering a fence
    /// (not even its pings) for the silence limit: the process that serves
    /// it (rank 0 under `mpirun`, `mpiexec` or `srun`, the launcher under
    /// `outboard run`) died, is stopped, or its host is cut off; or it was
    /// never reached within the bootstrap timeout.
    #[error("rendezvous at {addr} lost: {reason}")]
    RendezvousLost {
        /// The rendezvous address.
        addr: SocketAddr,
        /// What this rank saw.
        reason: String,
    },
    /// Nobody answered within the bootstrap timeout.
    #[error("bootstrap timed out after {0:?}")]
    Timeout(Duration),
}

/// A PMI-style key-value exchange among the ranks of a job.
pub trait Bootstrap: Send {
    /// This process's rank.
    fn rank(&self) -> u32;
    /// The number of ranks.
    fn size(&self) -> u32;
    /// Publishes `value` under `key` for the next fence.
    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError>;
    /// Waits until every rank reached the fence; afterwards every value put
    /// before it by any rank can be read.
    fn fence(&mut self) -> Result<(), BootstrapError>;
    /// A value `rank` put before the last fence.
    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError>;
}

/// Which launcher started the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `outboard run`.
    Outboard,
    /// Open MPI's `mpirun`.
    OpenMpi,
    /// MPICH's Hydra (`mpiexec`) or another PMI launcher.
    Hydra,
    /// Slurm's `srun`.
    Slurm,
    /// Another PMIx launcher (PRRTE's `prterun`): only `PMIX_RANK` and
    /// `PMIX_NAMESPACE` name the job.
    Pmix,
    /// Started directly: a job of one.
    Singleton,
    /// Brought up by the program over its own exchange
    /// ([`ExchangeBootstrap`]: an MPI job through `liboutboard_mpi`).
    Program,
}

/// How this process reaches the job's other processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Nobody: a job of one.
    Alone,
    /// Outboard's TCP rendezvous at `addr` ([`TcpBootstrap`]), served by
    /// this process when `serve` (rank 0 under a foreign launcher).
    Rendezvous {
        /// Where it is.
        addr: SocketAddr,
        /// Whether this process serves it.
        serve: bool,
    },
    /// The launcher's PMIx server ([`PmixBootstrap`]).
    Pmix,
    /// The launcher's PMI-1 server on descriptor `fd` ([`Pmi1Bootstrap`]).
    Pmi1 {
        /// `PMI_FD`.
        fd: i32,
    },
    /// The program's own exchange ([`ExchangeBootstrap`]: an MPI job
    /// through `liboutboard_mpi`).
    Program,
}

impl Via {
    /// Its name in a sentence (`bootstrap: PMIx`).
    pub fn describe(&self) -> String {
        match self {
            Via::Alone => "none (a job of one)".into(),
            Via::Rendezvous { addr, serve: true } => format!("TCP rendezvous at {addr} ({ENV_RENDEZVOUS}), served by this rank"),
            Via::Rendezvous { addr, serve: false } => format!("TCP rendezvous at {addr} ({ENV_RENDEZVOUS})"),
            Via::Pmix => format!("the launcher's PMIx ({})", pmix::LIBRARY),
            Via::Pmi1 { fd } => format!("the launcher's PMI-1 (PMI_FD={fd})"),
            Via::Program => "the program's own exchange (MPI)".into(),
        }
    }
}

/// Rank, size and bootstrap of this process, read from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Who launched us.
    pub launcher: Launcher,
    /// This rank.
    pub rank: u32,
    /// The number of ranks; 0 until the bootstrap says, under a PMIx
    /// launcher that sets no size variable ([`Launcher::Pmix`]).
    pub size: u32,
    /// Ranks on this machine (for the progress-policy default).
    pub local_size: u32,
    /// How to reach the other ranks.
    pub via: Via,
    /// Why a bootstrap earlier in the order of choice was passed over (PMIx
    /// offered but its library missing), for the start-up log.
    pub passed_over: Option<String>,
}

/// How many tasks Slurm put on node `node` (`SLURM_NODEID`), from
/// `SLURM_TASKS_PER_NODE` in its compressed form: counts in node order,
/// `c(xn)` for `n` nodes of `c` tasks each (`2(x3),1`: three nodes of two,
/// then one of one). `None` for anything else.
pub fn slurm_tasks_on_node(spec: &str, node: u32) -> Option<u32> {
    let mut first = 0u32;
    for part in spec.trim().split(',') {
        let (count, repeat) = match part.split_once("(x") {
            Some((c, r)) => (c.parse::<u32>().ok()?, r.strip_suffix(')')?.parse::<u32>().ok()?),
            None => (part.parse::<u32>().ok()?, 1),
        };
        if repeat == 0 {
            return None;
        }
        if node < first.checked_add(repeat)? {
            return Some(count);
        }
        first += repeat;
    }
    None
}

/// Environment variable with the rendezvous address.
pub const ENV_RENDEZVOUS: &str = "OUTBOARD_RENDEZVOUS";
/// Environment variable with the rank under `outboard run`.
pub const ENV_RANK: &str = "OUTBOARD_RANK";
/// Environment variable with the size under `outboard run`.
pub const ENV_SIZE: &str = "OUTBOARD_SIZE";
/// Environment variable with the number of ranks on this machine.
pub const ENV_LOCAL_SIZE: &str = "OUTBOARD_LOCAL_SIZE";

/// Environment variable that forces a bootstrap.
pub const ENV_BOOTSTRAP: &str = "OUTBOARD_BOOTSTRAP";

impl LaunchEnv {
    /// Reads the process environment; loads `libpmix.so.2` only if the
    /// environment offers PMIx.
    pub fn detect() -> Result<LaunchEnv, BootstrapError> {
        Self::from_vars(|k| ProcessEnv.var(k), pmix::available)
    }

    /// Reads an environment given as a lookup function (for tests), with
    /// `pmix` saying whether the PMIx library can be used (asked only when
    /// the environment offers PMIx). The `OUTBOARD_*` variables are read
    /// through the settings registry; the other launchers' own variables
    /// as numbers.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, pmix: impl Fn() -> Result<(), String>) -> Result<LaunchEnv, BootstrapError> {
        let ours = FnEnv(&var);
        // The registry bounds these to u32.
        let setting = |s: &OptVar<Count>| -> Result<Option<u32>, BootstrapError> { Ok(s.get(&ours)?.map(|n| u32::try_from(n).unwrap_or(u32::MAX))) };
        let candidates = [
            (Launcher::Outboard, ENV_RANK, ENV_SIZE),
            (Launcher::OpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
            (Launcher::Hydra, "PMI_RANK", "PMI_SIZE"),
            (Launcher::Slurm, "SLURM_PROCID", "SLURM_NTASKS"),
        ];
        let number = |k: &str| -> Result<Option<u32>, BootstrapError> {
            match k {
                ENV_RANK => return setting(&settings::RANK),
                ENV_SIZE => return setting(&settings::SIZE),
                _ => {}
            }
            match var(k) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| BootstrapError::Environment(format!("{k}={v:?} is not a number"))),
            }
        };
        let mode = settings::BOOTSTRAP.get(&ours)?;
        let rendezvous = settings::RENDEZVOUS.get(&ours)?.map(|a| resolve(&a)).transpose()?;
        let pmix_offered = var("PMIX_RANK").is_some() && var("PMIX_NAMESPACE").is_some();
        let pmi_fd = match var("PMI_FD") {
            None => None,
            Some(v) => Some(v.trim().parse::<i32>().ok().filter(|&fd| fd >= 0).ok_or_else(|| BootstrapError::Environment(format!("PMI_FD={v:?} is not a file descriptor number")))?),
        };
        let mut found = None;
        for (launcher, rk, sk) in candidates {
            let Some(rank) = number(rk)? else { continue };
            let size = number(sk)?.ok_or_else(|| BootstrapError::Environment(format!("{rk} is set but {sk} is not")))?;
            if size == 0 || rank >= size {
                return Err(BootstrapError::Environment(format!("{rk}={rank} is not below {sk}={size}")));
            }
            found = Some((launcher, rank, size));
            break;
        }
        let (launcher, rank, size) = match found {
            Some(f) => f,
            // PRRTE and the like: PMIx alone names the job; its size comes
            // from PMIx.
            None if pmix_offered && mode != "tcp" && mode != "pmi" => (Launcher::Pmix, number("PMIX_RANK")?.unwrap_or(0), 0),
            None if mode == "pmix" => {
                return Err(BootstrapError::Environment(format!(
                    "{ENV_BOOTSTRAP}=pmix but PMIX_RANK and PMIX_NAMESPACE are not set: start the program with a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix), or set {ENV_BOOTSTRAP}=auto"
                )))
            }
            None => return Ok(LaunchEnv { launcher: Launcher::Singleton, rank: 0, size: 1, local_size: 1, via: Via::Alone, passed_over: None }),
        };
        let slurm = || {
            let node = var("SLURM_NODEID")?.trim().parse().ok()?;
            slurm_tasks_on_node(&var("SLURM_TASKS_PER_NODE")?, node)
        };
        let foreign_local = || {
            ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"].iter().find_map(|k| number(k).ok().flatten()).or_else(slurm)
        };
        let local_size = setting(&settings::LOCAL_SIZE)?.or_else(foreign_local).unwrap_or(if launcher == Launcher::Outboard { size } else { 1 });
        let tcp = |addr: SocketAddr| Via::Rendezvous { addr, serve: launcher != Launcher::Outboard && rank == 0 };
        let no_rendezvous = |why: &str| {
            BootstrapError::Environment(format!(
                "launched by {launcher:?} as rank {rank} of {size}, but {ENV_RENDEZVOUS} is not set{why}: \
                 pass a host:port that rank 0 can bind and every rank can reach (e.g. mpirun -x {ENV_RENDEZVOUS}=host:29500)"
            ))
        };
        let mut passed_over = None;
        let via = match mode {
            "tcp" => tcp(rendezvous.ok_or_else(|| no_rendezvous(&format!(" and {ENV_BOOTSTRAP}=tcp asks for it")))?),
            "pmix" => {
                if !pmix_offered {
                    return Err(BootstrapError::Environment(format!(
                        "{ENV_BOOTSTRAP}=pmix but PMIX_RANK and PMIX_NAMESPACE are not set: start the program with a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix), or set {ENV_BOOTSTRAP}=auto"
                    )));
                }
                pmix().map_err(|why| BootstrapError::Environment(format!("{ENV_BOOTSTRAP}=pmix but {why}: install PMIx (Debian: libpmix2), or set {ENV_BOOTSTRAP}=auto")))?;
                Via::Pmix
            }
            "pmi" => Via::Pmi1 {
                fd: pmi_fd.ok_or_else(|| {
                    BootstrapError::Environment(format!(
                        "{ENV_BOOTSTRAP}=pmi but PMI_FD is not set: start the program with MPICH's mpiexec (Hydra) or srun --mpi=pmi2, or set {ENV_BOOTSTRAP}=auto"
                    ))
                })?,
            },
            _ if launcher == Launcher::Outboard || rendezvous.is_some() => match rendezvous {
                Some(addr) => tcp(addr),
                None if size == 1 => Via::Alone,
                None => return Err(no_rendezvous("")),
            },
            _ if size == 1 => Via::Alone,
            _ => {
                let pmix = if pmix_offered { pmix().map_err(Some) } else { Err(None) };
                match (pmix, pmi_fd) {
                    (Ok(()), _) => Via::Pmix,
                    (Err(why), Some(fd)) => {
                        passed_over = why.map(|w| format!("PMIX_RANK and PMIX_NAMESPACE are set but {w}; using PMI-1 instead"));
                        Via::Pmi1 { fd }
                    }
                    (Err(None), None) if launcher == Launcher::Slurm => {
                        return Err(no_rendezvous(" and srun offers neither PMIx nor PMI-1 (start it with --mpi=pmix or --mpi=pmi2, or set it)"))
                    }
                    (Err(None), None) => return Err(no_rendezvous(" and the launcher offers neither PMIx nor PMI-1")),
                    (Err(Some(why)), None) => {
                        let job = if size == 0 { format!("rank {rank} of a PMIx job") } else { format!("rank {rank} of {size}") };
                        return Err(BootstrapError::Environment(format!(
                            "launched by {launcher:?} as {job}, whose PMIx (PMIX_RANK and PMIX_NAMESPACE are set) cannot be used because {why}: \
                             install PMIx (Debian: libpmix2), or set {ENV_RENDEZVOUS} to a host:port that rank 0 can bind and every rank can reach (e.g. mpirun -x {ENV_RENDEZVOUS}=host:29500)"
                        )));
                    }
                }
            }
        };
        Ok(LaunchEnv { launcher, rank, size, local_size: local_size.max(1), via, passed_over })
    }
}

fn resolve(a: &str) -> Result<SocketAddr, BootstrapError> {
    use std::net::ToSocketAddrs;
    a.trim()
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| BootstrapError::Environment(format!("{ENV_RENDEZVOUS}={a:?} is not a host:port")))
}

/// The bootstrap of a job of one: fences return at once.
#[derive(Debug, Default)]
pub struct SingletonBootstrap {
    values: std::collections::BTreeMap<String, Vec<u8>>,
}

impl Bootstrap for SingletonBootstrap {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        self.values.insert(key.to_string(), value.to_vec());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), BootstrapError> {
        Ok(())
    }
    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        match (rank, self.values.get(key)) {
            (0, Some(v)) => Ok(v.clone()),
            _ => Err(BootstrapError::Missing { rank, key: key.to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<LaunchEnv, BootstrapError> {
        env_pmix(pairs, Ok(()))
    }

    /// With the PMIx library loading (`Ok`) or not.
    fn env_pmix(pairs: &[(&str, &str)], pmix: Result<(), &str>) -> Result<LaunchEnv, BootstrapError> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_vars(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()), move || pmix.map_err(str::to_string))
    }

    fn serves(e: &LaunchEnv) -> bool {
        matches!(e.via, Via::Rendezvous { serve: true, .. })
    }

    #[test]
    fn each_launcher_environment_is_recognised() {
        let e = env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size, serves(&e)), (Launcher::OpenMpi, 0, 2, true));
        let e = env(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "7"), (ENV_RENDEZVOUS, "127.0.0.1:5000"), ("SLURM_NODEID", "3"), ("SLURM_TASKS_PER_NODE", "2(x3),1")]).unwrap();
        assert_eq!((e.launcher, e.local_size), (Launcher::Slurm, 1), "the fourth node has one task");
        assert_eq!(slurm_tasks_on_node("2(x3),1", 0), Some(2));
        assert_eq!(slurm_tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(slurm_tasks_on_node("16", 0), Some(16));
        assert_eq!(slurm_tasks_on_node("2(x3),1", 4), None, "no fifth node");
        assert_eq!(slurm_tasks_on_node("2(x0)", 0), None);
        assert_eq!(slurm_tasks_on_node("2(x3", 0), None);
        let e = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "3"), (ENV_RENDEZVOUS, "127.0.0.1:5000"), ("MPI_LOCALNRANKS", "3")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size, e.local_size, serves(&e)), (Launcher::Hydra, 1, 3, 3, false));
        let e = env(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.rank), (Launcher::Slurm, 2));
        let e = env(&[(ENV_RANK, "0"), (ENV_SIZE, "4"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.local_size, serves(&e)), (Launcher::Outboard, 4, false), "the launcher serves");
        assert_eq!(env(&[]).unwrap().launcher, Launcher::Singleton);
    }

    /// What Slurm's srun sets: `--mpi=pmi2` adds PMI-1's variables (its
    /// plugin answers PMI-1), `--mpi=none` nothing to meet through, and
    /// the error says which `--mpi` would do.
    #[test]
    fn srun_joins_through_pmi1_under_pmi2_and_names_the_mpi_option_without_one() {
        let e = env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4"), ("PMI_RANK", "1"), ("PMI_SIZE", "4"), ("PMI_FD", "11")]).unwrap();
        assert_eq!((e.rank, e.size, e.via), (1, 4, Via::Pmi1 { fd: 11 }));
        let e = env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4")]).unwrap_err().to_string();
        assert!(e.contains("launched by Slurm as rank 1 of 4") && e.contains("--mpi=pmix or --mpi=pmi2") && e.contains(ENV_RENDEZVOUS), "{e}");
    }

    const OMPI: [(&str, &str); 4] = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "4"), ("PMIX_RANK", "1"), ("PMIX_NAMESPACE", "ns")];
    const HYDRA: [(&str, &str); 3] = [("PMI_RANK", "2"), ("PMI_SIZE", "4"), ("PMI_FD", "6")];

    #[test]
    fn the_bootstrap_is_chosen_in_order() {
        let with = |base: &[(&'static str, &'static str)], more: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> { base.iter().chain(more).copied().collect() };
        // mpirun: PMIx without any OUTBOARD_* variable.
        assert_eq!(env(&OMPI).unwrap().via, Via::Pmix);
        // The user's rendezvous comes first.
        let e = env(&with(&OMPI, &[(ENV_RENDEZVOUS, "127.0.0.1:5000")])).unwrap();
        assert_eq!(e.via, Via::Rendezvous { addr: "127.0.0.1:5000".parse().unwrap(), serve: false });
        // mpiexec (Hydra): PMI-1.
        let e = env(&HYDRA).unwrap();
        assert_eq!((e.launcher, e.rank, e.via), (Launcher::Hydra, 2, Via::Pmi1 { fd: 6 }));
        // PMIx offered but its library missing: PMI-1 if offered, saying so...
        let e = env_pmix(&with(&HYDRA, &[("PMIX_RANK", "2"), ("PMIX_NAMESPACE", "ns")]), Err("libpmix.so.2 could not be loaded (gone)")).unwrap();
        assert_eq!(e.via, Via::Pmi1 { fd: 6 });
        assert!(e.passed_over.unwrap().contains("libpmix.so.2 could not be loaded (gone)"));
        // ...else an error that names both the library and the rendezvous.
        let msg = env_pmix(&OMPI, Err("libpmix.so.2 could not be loaded (gone)")).unwrap_err().to_string();
        assert!(msg.contains("libpmix.so.2 could not be loaded (gone)") && msg.contains(ENV_RENDEZVOUS), "{msg}");
        // A job of one needs nothing, whatever the launcher offers.
        assert_eq!(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1"), ("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "ns")]).unwrap().via, Via::Alone);
        // PMIx alone (PRRTE): the size comes from PMIx.
        let e = env(&[("PMIX_RANK", "3"), ("PMIX_NAMESPACE", "ns")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size, e.via), (Launcher::Pmix, 3, 0, Via::Pmix));
        // Forced.
        assert_eq!(env(&with(&OMPI, &[(ENV_BOOTSTRAP, "pmi"), ("PMI_FD", "9")])).unwrap().via, Via::Pmi1 { fd: 9 });
        assert_eq!(env(&with(&HYDRA, &[(ENV_BOOTSTRAP, "tcp"), (ENV_RENDEZVOUS, "127.0.0.1:5000")])).unwrap().via, Via::Rendezvous { addr: "127.0.0.1:5000".parse().unwrap(), serve: false });
        let msg = env(&with(&HYDRA, &[(ENV_BOOTSTRAP, "pmix")])).unwrap_err().to_string();
        assert!(msg.contains("OUTBOARD_BOOTSTRAP=pmix but PMIX_RANK and PMIX_NAMESPACE are not set"), "{msg}");
        let msg = env_pmix(&with(&OMPI, &[(ENV_BOOTSTRAP, "pmix")]), Err("libpmix.so.2 could not be loaded (gone)")).unwrap_err().to_string();
        assert!(msg.contains("OUTBOARD_BOOTSTRAP=pmix but libpmix.so.2 could not be loaded"), "{msg}");
        let msg = env(&with(&OMPI, &[(ENV_BOOTSTRAP, "pmi")])).unwrap_err().to_string();
        assert!(msg.contains("OUTBOARD_BOOTSTRAP=pmi but PMI_FD is not set"), "{msg}");
        let msg = env(&with(&OMPI, &[(ENV_BOOTSTRAP, "tcp")])).unwrap_err().to_string();
        assert!(msg.contains(ENV_RENDEZVOUS) && msg.contains("OUTBOARD_BOOTSTRAP=tcp"), "{msg}");
        let msg = env(&with(&OMPI, &[(ENV_BOOTSTRAP, "mpi")])).unwrap_err().to_string();
        assert!(msg.starts_with("OUTBOARD_BOOTSTRAP=\"mpi\"") && msg.contains("auto, tcp, pmix or pmi"), "{msg}");
        assert!(env(&with(&HYDRA[..2], &[("PMI_FD", "six")])).is_err());
    }

    #[test]
    fn bad_environments_are_explained() {
        let msg = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]).unwrap_err().to_string();
        assert!(msg.contains(ENV_RENDEZVOUS) && msg.contains("neither PMIx nor PMI-1"), "{msg}");
        assert!(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2"), (ENV_RENDEZVOUS, "127.0.0.1:1")]).is_err());
        assert!(env(&[("PMI_RANK", "x"), ("PMI_SIZE", "2")]).is_err());
        assert!(env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), (ENV_RENDEZVOUS, "nowhere")]).is_err());
        // Outboard's own variables are read by the settings' parsers.
        let msg = env(&[(ENV_RANK, "0"), (ENV_SIZE, "0")]).unwrap_err().to_string();
        assert_eq!(msg, "OUTBOARD_SIZE=\"0\" is below 1: use a whole number from 1 to 4294967295");
        let msg = env(&[(ENV_RANK, "0"), (ENV_SIZE, "2"), (ENV_LOCAL_SIZE, "two"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap_err().to_string();
        assert!(msg.starts_with("OUTBOARD_LOCAL_SIZE=\"two\" is not a whole number"), "{msg}");
        let msg = env(&[(ENV_RANK, "0"), (ENV_SIZE, "2"), (ENV_RENDEZVOUS, "127.0.0.1")]).unwrap_err().to_string();
        assert!(msg.starts_with("OUTBOARD_RENDEZVOUS=\"127.0.0.1\" is not a host:port address"), "{msg}");
    }
}
