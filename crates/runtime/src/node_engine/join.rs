//! Joining a job through the node's engine process (`OUTBOARD_ENGINE=node`).
//!
//! Every rank publishes the name of its node (`OUTBOARD_NODE_NAME`, else
//! the host name and the network namespace); ranks with the same name
//! share a node, numbered in order of their lowest rank, and a rank's
//! local rank is its place among them. The node's local rank 0 starts the
//! engine (`outboard node`) and configures it with the job's identity, and
//! publishes its UDP address; after a fence every rank knows every node's
//! address, local rank 0 hands the list to its engine, and each rank
//! attaches its port. Then the ranks exchange endpoints as with
//! per-process engines, except that a rank's node id is its node's.

use std::net::IpAddr;

use outboard_engine::{Endpoint, EngineConfig};
use outboard_host::Port;
use outboard_settings::{registry as settings, ProcessEnv};

use super::client::{engine_program, spawn_engine, NodeLink, RemotePort};
use crate::node_p2p::NodePeers;
use super::protocol::NodeSetup;
use super::socket::engine_name;
use crate::bootstrap::LaunchEnv;
use crate::engine_handle::EngineHandle;
use crate::node_coll::NodeLocal;
use crate::port::RtPort;
use crate::progress::Progress;
use crate::world::{exchange_endpoints, publish_job, published_addr, InitError, JobBootstrap, JobIdentity, Options, World};

/// This process's node: `OUTBOARD_NODE_NAME`, else the host name and the
/// network namespace (each namespace of a `--netns` job is a node).
pub fn node_name() -> Result<String, InitError> {
    if let Some(n) = settings::NODE_NAME.get(&ProcessEnv)? {
        return Ok(n.to_string());
    }
    let host = nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    let netns = std::fs::read_link("/proc/self/ns/net").map(|p| p.display().to_string()).unwrap_or_default();
    Ok(format!("{host}/{netns}"))
}

/// Where each rank is: its node id and its local rank, from every rank's
/// node name in rank order.
pub fn placement(names: &[Vec<u8>]) -> (Vec<u32>, Vec<u32>) {
    let mut seen: Vec<&[u8]> = Vec::new();
    let mut counts: Vec<u32> = Vec::new();
    let mut nodes = Vec::with_capacity(names.len());
    let mut local = Vec::with_capacity(names.len());
    for n in names {
        let i = match seen.iter().position(|s| *s == n.as_slice()) {
            Some(i) => i,
            None => {
                seen.push(n);
                counts.push(0);
                seen.len() - 1
            }
        };
        nodes.push(i as u32);
        local.push(counts[i]);
        counts[i] += 1;
    }
    (nodes, local)
}

pub(crate) fn init_node(opts: Options, mut env: LaunchEnv, mut boot: JobBootstrap, ip: IpAddr) -> Result<World, InitError> {
    let timeout = opts.bootstrap_timeout;
    let b = boot.get();
    b.put("node", node_name()?.as_bytes())?;
    b.put("pid", &std::process::id().to_be_bytes())?;
    let shm_coll = settings::SHM_COLL.get(&ProcessEnv)?;
    let shm_p2p = settings::SHM_P2P.get(&ProcessEnv)?;
    publish_job(b, env.rank, &opts)?;
    b.fence()?;
    let names = (0..env.size).map(|r| b.get(r, "node")).collect::<Result<Vec<_>, _>>()?;
    let (nodes, local) = placement(&names);
    let me = nodes[env.rank as usize];
    let local_rank = local[env.rank as usize];
    let local_size = nodes.iter().filter(|&&n| n == me).count() as u32;
    env.local_size = local_size;
    let node_count = nodes.iter().max().map_or(0, |m| m + 1);
    let leaders: Vec<u32> = (0..node_count).map(|n| nodes.iter().position(|&x| x == n).expect("every node has a rank") as u32).collect();
    let job = JobIdentity::read(b, &opts)?;
    let name = engine_name(job.job_key, me);
    let rank = env.rank;
    let client = move |e: super::client::ClientError| InitError::Env(format!("rank {rank}: {e}"));
    let peer_timeout = opts.peer_timeout.unwrap_or_else(|| EngineConfig::new(outboard_engine::NodeId(0), 0, 0).peer_timeout);
    // Every step that can fail on one rank is followed by a fence at which
    // every rank learns of it, so that all give up together (under an MPI
    // program's library: all step aside alike) and none waits for good.
    let leader = if local_rank == 0 {
        let started = (|| {
            spawn_engine(&engine_program()?, &name, timeout).map_err(client)?;
            let link = NodeLink::connect(&name, timeout).map_err(client)?;
            let udp = link
                .configure(NodeSetup {
                    node: me,
                    job_key: job.job_key,
                    secret: job.secret.to_bytes(),
                    boot: job.boot(),
                    min_peer_boot: job.min_peer_boot(),
                    peer_timeout,
                    local_size,
                    bind: ip,
                })
                .map_err(client)?;
            Ok::<_, InitError>((link, udp))
        })();
        match started {
            Ok((link, udp)) => {
                b.put("udp", udp.to_string().as_bytes())?;
                Some(Ok(link))
            }
            Err(e) => {
                b.put("udp", format!("{FAILED}{e}").as_bytes())?;
                Some(Err(e))
            }
        }
    } else {
        None
    };
    b.fence()?;
    if let Some(Err(e)) = leader {
        return Err(e);
    }
    for (n, &r) in leaders.iter().enumerate() {
        let v = b.get(r, "udp")?;
        if let Some(why) = v.strip_prefix(FAILED.as_bytes()) {
            return Err(InitError::Env(format!("node {n} (rank {r}) could not start its node engine: {}", String::from_utf8_lossy(why))));
        }
    }
    let peers = leaders.iter().map(|&r| published_addr(b, r)).collect::<Result<Vec<_>, _>>()?;
    let (progress, reason) = match opts.progress {
        Some(p) => (p, "chosen by the program".to_string()),
        None => Progress::node_engine_from_env(local_size as usize)?,
    };
    let attached = (|| {
        let link = match leader {
            Some(Ok(l)) => {
                l.set_peers(&peers).map_err(client)?;
                l
            }
            _ => NodeLink::connect(&name, timeout).map_err(client)?,
        };
        let remote = RemotePort::attach(&name, env.rank, progress, timeout).map_err(client)?;
        Ok::<_, InitError>((link, remote))
    })();
    let (link, remote) = match attached {
        Ok(a) => a,
        Err(e) => {
            // The endpoint exchange's fence, with a value every rank reads
            // as a failure.
            let b = boot.get();
            b.put("ep", FAILED.as_bytes())?;
            b.fence()?;
            return Err(e);
        }
    };
    let mut port = Port::new(RtPort::remote(remote));
    // The node's ranks use their shared-memory link only if every one of
    // them attached to it: a message put for a rank that never reads the
    // link would be lost. Each says so in the endpoint exchange's round.
    let p2p_attached = shm_p2p && local_size >= 2 && {
        let remote = port.io().remote_mut().expect("a node engine's port");
        remote.attach_p2p(job.job_key, job.min_peer_boot(), me, u64::from(local_size), u64::from(local_rank)).is_ok()
    };
    boot.get().put("p2p", if p2p_attached { b"1" } else { b"0" })?;
    let endpoints = exchange_endpoints(boot.get(), &mut port, &nodes)?;
    if p2p_attached {
        let peers = p2p_peers(boot.get(), &nodes, &local, me, &endpoints)?;
        port.io().remote_mut().expect("a node engine's port").enable_p2p(peers);
    }
    let local = if shm_coll { Some(node_local(boot.get(), &job, &nodes, me)?) } else { None };
    let mut world = World::assemble(port, EngineHandle::Node { link, progress, peer_timeout }, boot, env, endpoints, peers, reason)?;
    if let Some(l) = local {
        world.set_node_local(l);
    }
    Ok(world)
}

/// The endpoints and process ids of this node's ranks, by local rank,
/// when every one of them attached to the node's link.
fn p2p_peers(b: &mut dyn crate::bootstrap::Bootstrap, nodes: &[u32], local: &[u32], me: u32, endpoints: &[Endpoint]) -> Result<Option<NodePeers>, InitError> {
    let mine: Vec<usize> = (0..nodes.len()).filter(|&r| nodes[r] == me).collect();
    let mut eps = vec![None; mine.len()];
    let mut pids = vec![0u32; mine.len()];
    for &r in &mine {
        if b.get(r as u32, "p2p")? != b"1" {
            return Ok(None);
        }
        let i = local[r] as usize;
        pids[i] = published_pid(b, r)?;
        eps[i] = Some(endpoints[r]);
    }
    Ok(eps.into_iter().collect::<Option<Vec<_>>>().map(|endpoints| NodePeers { endpoints, pids }))
}

/// This node's ranks' process ids, as they published them, for the
/// node's collectives through shared memory.
fn node_local(b: &mut dyn crate::bootstrap::Bootstrap, job: &JobIdentity, nodes: &[u32], me: u32) -> Result<NodeLocal, InitError> {
    let mut pids = vec![0u32; nodes.len()];
    for (r, _) in nodes.iter().enumerate().filter(|(_, &n)| n == me) {
        pids[r] = published_pid(b, r)?;
    }
    Ok(NodeLocal::new(job.job_key, job.min_peer_boot(), me, pids, crate::affinity::node_cores()))
}

/// The process id rank `r` published.
fn published_pid(b: &dyn crate::bootstrap::Bootstrap, r: usize) -> Result<u32, InitError> {
    let v = b.get(r as u32, "pid")?;
    let pid = <[u8; 4]>::try_from(v.as_slice()).map_err(|_| crate::bootstrap::BootstrapError::Protocol(format!("rank {r} published a bad process id")))?;
    Ok(u32::from_be_bytes(pid))
}

/// What a rank publishes in place of an address or endpoint when its part
/// of the set-up failed.
const FAILED: &str = "failed: ";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_with_one_name_share_a_node_numbered_by_lowest_rank() {
        let names: Vec<Vec<u8>> = ["b", "a", "b", "c", "a"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let (nodes, local) = placement(&names);
        assert_eq!(nodes, [0, 1, 0, 2, 1]);
        assert_eq!(local, [0, 0, 1, 0, 1]);
    }
}
