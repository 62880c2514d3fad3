//! Faults on a rank's outgoing datagrams, with nftables in its namespace.
//!
//! Random drop lives in an `inet` table; duplication in an `ip` table,
//! since nftables' `dup to` needs a family with one address type (it sends
//! the clone to the packet's own destination, through the rank's `eth0`).
//! A clone passes the output hook again, so it too can be dropped, but it
//! is never duplicated again. Only UDP is touched: the engine's traffic;
//! the bootstrap's TCP connection to the rendezvous is a separate,
//! kernel-reliable channel and is not what these faults test.

use anyhow::Context;

use crate::netns::run;

/// Loss and duplication, in percent, of every outgoing UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Percent of datagrams dropped.
    pub loss: u32,
    /// Percent of datagrams sent twice.
    pub dup: u32,
}

/// Whether `nft` can be run here.
pub fn available() -> bool {
    std::process::Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Sets `faults` in namespace `ns`, replacing what an earlier call set
/// (and so zeroing the counters [`counted`] reads).
pub fn apply(ns: &str, faults: Faults) -> anyhow::Result<()> {
    let nft = |rule: &str| -> anyhow::Result<()> {
        let args: Vec<&str> = ["netns", "exec", ns, "nft"].into_iter().chain(rule.split_whitespace()).collect();
        run("ip", &args).with_context(|| format!("nft {rule} in {ns} (Debian package nftables)"))
    };
    // `destroy` needs a recent nft; add-then-delete works everywhere.
    for (family, table) in [("inet", "obloss"), ("ip", "obdup")] {
        nft(&format!("add table {family} {table}"))?;
        nft(&format!("delete table {family} {table}"))?;
    }
    if faults.loss > 0 {
        nft("add table inet obloss")?;
        nft("add chain inet obloss out { type filter hook output priority 0 ; }")?;
        nft(&format!("add rule inet obloss out meta l4proto udp numgen random mod 100 lt {} counter drop", faults.loss))?;
    }
    if faults.dup > 0 {
        nft("add table ip obdup")?;
        nft("add chain ip obdup out { type filter hook output priority 10 ; }")?;
        nft(&format!("add rule ip obdup out meta l4proto udp numgen random mod 100 lt {} counter dup to ip daddr device eth0", faults.dup))?;
    }
    Ok(())
}

/// Datagrams dropped and duplicated in namespace `ns` since [`apply`].
pub fn counted(ns: &str) -> anyhow::Result<(u64, u64)> {
    let out = crate::netns::command_in(ns, "nft").args(["list", "ruleset"]).output().context("running nft")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let packets = |l: &str| -> u64 {
        l.split_once("counter packets ").and_then(|(_, r)| r.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    let dropped = text.lines().filter(|l| l.trim_end().ends_with("drop")).map(packets).sum();
    let duplicated = text.lines().filter(|l| l.contains(" dup to ")).map(packets).sum();
    Ok((dropped, duplicated))
}
