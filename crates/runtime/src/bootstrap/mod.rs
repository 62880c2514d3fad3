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
//! | launcher | rank, size | rendezvous |
//! | --- | --- | --- |
//! | `outboard run` | `OUTBOARD_RANK`, `OUTBOARD_SIZE` | served by the launcher at `OUTBOARD_RENDEZVOUS` |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` | rank 0 serves it at `OUTBOARD_RENDEZVOUS` |
//! | MPICH Hydra | `PMI_RANK`, `PMI_SIZE` | rank 0 serves it at `OUTBOARD_RENDEZVOUS` |
//! | Slurm `srun` | `SLURM_PROCID`, `SLURM_NTASKS` | rank 0 serves it at `OUTBOARD_RENDEZVOUS` |
//! | none | rank 0 of 1 | none needed |
//!
//! Under a foreign launcher the user passes the rendezvous address (a host
//! and port that rank 0's host can bind and every rank can reach, like
//! `MASTER_ADDR:MASTER_PORT` elsewhere), e.g.
//! `mpirun -x OUTBOARD_RENDEZVOUS=node0:29500 ./app`.

mod exchange;
mod rendezvous;

use std::net::SocketAddr;
use std::time::Duration;

use outboard_settings::kinds::Count;
use outboard_settings::{registry as settings, Env, FnEnv, OptVar, ProcessEnv, SettingError};

use thiserror::Error;

pub use exchange::{Allgather, ExchangeBootstrap};
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
    /// Started directly: a job of one.
    Singleton,
    /// Brought up by the program over its own exchange
    /// ([`ExchangeBootstrap`]: an MPI job through `liboutboard_mpi`).
    Program,
}

/// Rank, size and rendezvous of this process, read from its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Who launched us.
    pub launcher: Launcher,
    /// This rank.
    pub rank: u32,
    /// The number of ranks.
    pub size: u32,
    /// Ranks on this machine (for the progress-policy default).
    pub local_size: u32,
    /// Where the rendezvous is (none for a singleton).
    pub rendezvous: Option<SocketAddr>,
    /// Whether this process must serve the rendezvous (rank 0 under a
    /// foreign launcher).
    pub serve: bool,
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

impl LaunchEnv {
    /// Reads the process environment.
    pub fn detect() -> Result<LaunchEnv, BootstrapError> {
        Self::from_vars(|k| ProcessEnv.var(k))
    }

    /// Reads an environment given as a lookup function (for tests). The
    /// `OUTBOARD_*` variables are read through the settings registry; the
    /// other launchers' own variables as numbers.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<LaunchEnv, BootstrapError> {
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
        for (launcher, rk, sk) in candidates {
            let Some(rank) = number(rk)? else { continue };
            let size = number(sk)?.ok_or_else(|| BootstrapError::Environment(format!("{rk} is set but {sk} is not")))?;
            if size == 0 || rank >= size {
                return Err(BootstrapError::Environment(format!("{rk}={rank} is not below {sk}={size}")));
            }
            let slurm = || {
                let node = var("SLURM_NODEID")?.trim().parse().ok()?;
                slurm_tasks_on_node(&var("SLURM_TASKS_PER_NODE")?, node)
            };
            let foreign_local = || {
                ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"].iter().find_map(|k| number(k).ok().flatten()).or_else(slurm)
            };
            let local_size =
                setting(&settings::LOCAL_SIZE)?.or_else(foreign_local).unwrap_or(if launcher == Launcher::Outboard { size } else { 1 });
            let rendezvous = match settings::RENDEZVOUS.get(&ours)? {
                Some(a) => Some(resolve(&a)?),
                None if size == 1 => None,
                None => {
                    return Err(BootstrapError::Environment(format!(
                        "launched by {launcher:?} as rank {rank} of {size}, but {ENV_RENDEZVOUS} is not set: \
                         pass a host:port that rank 0 can bind and every rank can reach (e.g. mpirun -x {ENV_RENDEZVOUS}=host:29500)"
                    )))
                }
            };
            let serve = launcher != Launcher::Outboard && rank == 0 && rendezvous.is_some();
            return Ok(LaunchEnv { launcher, rank, size, local_size: local_size.max(1), rendezvous, serve });
        }
        Ok(LaunchEnv { launcher: Launcher::Singleton, rank: 0, size: 1, local_size: 1, rendezvous: None, serve: false })
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
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LaunchEnv::from_vars(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn each_launcher_environment_is_recognised() {
        let e = env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size, e.serve), (Launcher::OpenMpi, 0, 2, true));
        let e = env(&[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "7"), (ENV_RENDEZVOUS, "127.0.0.1:5000"), ("SLURM_NODEID", "3"), ("SLURM_TASKS_PER_NODE", "2(x3),1")]).unwrap();
        assert_eq!((e.launcher, e.local_size), (Launcher::Slurm, 1), "the fourth node has one task");
        assert_eq!(slurm_tasks_on_node("2(x3),1", 0), Some(2));
        assert_eq!(slurm_tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(slurm_tasks_on_node("16", 0), Some(16));
        assert_eq!(slurm_tasks_on_node("2(x3),1", 4), None, "no fifth node");
        assert_eq!(slurm_tasks_on_node("2(x0)", 0), None);
        assert_eq!(slurm_tasks_on_node("2(x3", 0), None);
        let e = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "3"), (ENV_RENDEZVOUS, "127.0.0.1:5000"), ("MPI_LOCALNRANKS", "3")]).unwrap();
        assert_eq!((e.launcher, e.rank, e.size, e.local_size, e.serve), (Launcher::Hydra, 1, 3, 3, false));
        let e = env(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.rank), (Launcher::Slurm, 2));
        let e = env(&[(ENV_RANK, "0"), (ENV_SIZE, "4"), (ENV_RENDEZVOUS, "127.0.0.1:5000")]).unwrap();
        assert_eq!((e.launcher, e.local_size, e.serve), (Launcher::Outboard, 4, false), "the launcher serves");
        assert_eq!(env(&[]).unwrap().launcher, Launcher::Singleton);
    }

    #[test]
    fn bad_environments_are_explained() {
        let msg = env(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]).unwrap_err().to_string();
        assert!(msg.contains(ENV_RENDEZVOUS), "{msg}");
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
