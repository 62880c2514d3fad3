//! Several nodes on one machine: one network namespace per node, each
//! joined by a veth pair to a bridge in a hub namespace of its own, so a
//! job's nodes talk over real interfaces (where nftables can drop and
//! duplicate) and nothing touches the machine's own network. `outboard
//! chaos` puts each rank in a namespace of its own; `outboard run --netns`
//! each node. Needs root and iproute2.
//!
//! Node (or rank) `r` has address `10.77.0.{r+1}/24` on its `eth0`; the
//! hub's bridge has `10.77.0.254` (the rendezvous of `outboard run
//! --netns` listens there, and chaos's replay scenario sends from there).
//! Addresses are per namespace, so only the namespaces' names carry this
//! process's id.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// The hub's address on the bridge.
pub const HUB_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 254);

/// The address of `rank` (at most 253 ranks).
pub fn rank_ip(rank: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, rank as u8 + 1)
}

/// A hub namespace with a bridge and one namespace per rank; all are
/// deleted when it is dropped.
pub struct Net {
    /// The hub namespace (bridge `br0`, rank links `e0`, `e1`, ...).
    pub hub: String,
    /// The namespace of each node (or rank), in order.
    pub ranks: Vec<String>,
}

/// A command that runs `program` inside namespace `ns` (`ip netns exec`,
/// which keeps the environment and execs the program in place, so the
/// child's id is the program's).
pub fn command_in(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(program);
    c
}

/// Runs `ip` with `args`; an error carries its message.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    run("ip", args)
}

/// Runs `program` with `args`, failing with its stderr if it fails.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program).args(args).stdin(Stdio::null()).output().with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!("{program} {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

impl Net {
    /// Builds the network for `ranks` nodes (or ranks); `tag` tells this network's
    /// namespaces from others' (several may exist at once).
    pub fn create(tag: &str, ranks: u32) -> anyhow::Result<Net> {
        if !(1..=253).contains(&ranks) {
            bail!("a network of namespaces holds 1 to 253 nodes, not {ranks}");
        }
        let hub = format!("obc{}-{tag}-hub", std::process::id());
        ip(&["netns", "add", &hub]).context("creating a network namespace (needs root and iproute2)")?;
        let mut net = Net { hub, ranks: Vec::new() };
        let hub = net.hub.clone();
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "addr", "add", &format!("{HUB_IP}/24"), "dev", "br0"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        ip(&["-n", &hub, "link", "set", "lo", "up"])?;
        for r in 0..ranks {
            let ns = format!("obc{}-{tag}-r{r}", std::process::id());
            ip(&["netns", "add", &ns])?;
            net.ranks.push(ns.clone());
            let link = format!("e{r}");
            ip(&["-n", &hub, "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
            ip(&["-n", &hub, "link", "set", &link, "master", "br0", "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", rank_ip(r)), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "mtu", "9000", "up"])?;
            ip(&["-n", &hub, "link", "set", &link, "mtu", "9000"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        ip(&["-n", &hub, "link", "set", "br0", "mtu", "9000"])?;
        Ok(net)
    }

    /// Calls `f` on a thread that has entered namespace `ns`: sockets it
    /// creates live in that namespace for good, wherever they are used.
    pub fn inside<T: Send>(ns: &str, f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
        let path = format!("/run/netns/{ns}");
        let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a namespace file descriptor we own; it
                // changes only this (scoped, short-lived) thread.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    bail!("entering namespace {ns}: {}", std::io::Error::last_os_error());
                }
                f()
            })
            .join()
            .unwrap_or_else(|_| bail!("the thread in namespace {ns} panicked"))
        })
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its ends of the veth pairs, and so
        // the pairs.
        for ns in self.ranks.iter().chain(std::iter::once(&self.hub)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
    }
}
