//! Who runs the engine, and how threads wait: the progress policy.
//!
//! A UDP ping-pong on the 2-core development machine costs 24.5 us one way
//! when the receiver blocks in the kernel and 2.7 us when it busy-polls: any
//! policy that sleeps on the critical path pays about 20 us per wake-up.
//! Busy-polling, on the other hand, needs a core to spare. Hence three
//! policies, and a default chosen from the cores available per rank on the
//! machine ([`Progress::default_for`]):
//!
//! | policy | engine thread | waiting host thread | default when |
//! | --- | --- | --- | --- |
//! | dedicated | polls forever (the NIC/DPU model: a core of its own) | spins on its completion ring | >= 2 cores per rank |
//! | host-assisted | naps while the host is inside a wait; runs (then blocks in epoll) when the host is away computing or asleep | drives the engine itself (the engine's code still does the work); once the kernel has preempted it (other work on the machine), sleeps after 50 us of nothing until the engine thread wakes it | >= 1 core per rank |
//! | spin-then-block | spins briefly, then blocks in epoll on the socket and an eventfd doorbell | spins briefly, then parks until the engine wakes it | fewer cores than ranks |
//!
//! Set `OUTBOARD_PROGRESS` to `dedicated`, `host-assisted` or
//! `spin-then-block` to override the default.

use std::fmt;
use std::time::Duration;

use outboard_settings::SettingError;
use thiserror::Error;

/// How the engine makes progress and how waiting host threads wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The engine thread busy-polls its socket and rings on a core of its
    /// own; host threads spin on their completion rings.
    Dedicated,
    /// Both the engine thread and waiting host threads spin for `spin`, then
    /// block (epoll with an eventfd doorbell; a parked thread woken by the
    /// engine).
    SpinThenBlock {
        /// How long to spin before blocking.
        spin: Duration,
    },
    /// A host thread waiting on a request drives the engine itself; the
    /// engine thread stays off the socket while a host was inside the
    /// library within the last `handover`, and otherwise runs as in
    /// spin-then-block, so operations progress while the host computes.
    HostAssisted {
        /// How long the engine thread spins before blocking.
        spin: Duration,
        /// How long after a host's last wait the engine thread takes over.
        handover: Duration,
        /// How long a waiting host that was preempted within the last
        /// 100 ms drives the engine while nothing happens before it hands
        /// the engine back to its thread and sleeps until an event wakes it.
        /// A host that is never preempted spins for as long as it waits.
        /// On a machine that other work also loads, a host that spins on
        /// keeps the peer it waits for off the cores for whole time slices
        /// (milliseconds per message); one that sleeps is woken, ahead of
        /// that work, by the datagram it waits for.
        preempted_spin: Duration,
        /// A gap at least this long between two consecutive looks of one
        /// wait counts as a preemption (a time slice of other work is
        /// milliseconds; the engine thread's own brief turns on the host's
        /// core stay well below 500 us). Zero counts every look: each wait
        /// then sleeps after `preempted_spin` (what the tests use to drive
        /// the sleeping path).
        preempted_gap: Duration,
    },
}

/// Under dedicated progress a thread with nothing to do yields its core
/// once in this many idle turns, and spins otherwise: so that on a
/// machine shared with other work (the policy is chosen from the cores
/// it sees, not from the load on them) the others still get a turn.
pub(crate) const DEDICATED_YIELD_EVERY: u32 = 16;

/// `OUTBOARD_PROGRESS` held something else than a policy name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown progress policy {0:?}: expected dedicated, host-assisted or spin-then-block")]
pub struct ParseProgressError(pub String);

impl Progress {
    /// Spin-then-block with the default spin of 50 us (about two kernel
    /// wake-ups: spinning longer rarely pays off on a shared core).
    pub const SPIN_THEN_BLOCK: Progress = Progress::SpinThenBlock { spin: Duration::from_micros(50) };
    /// Host-assisted with a 50 us spin and a 200 us hand-over: the engine
    /// thread checks back every 200 us while the host is busy in the
    /// library, which costs nothing measurable, and takes over within
    /// 200 us once the host goes away to compute. A waiting host that the
    /// kernel preempted (a 500 us gap) within the last 100 ms sleeps after
    /// 50 us without a datagram or an event (two kernel wake-ups' worth).
    pub const HOST_ASSISTED: Progress = Progress::HostAssisted {
        spin: Duration::from_micros(50),
        handover: Duration::from_micros(200),
        preempted_spin: Duration::from_micros(50),
        preempted_gap: Duration::from_micros(500),
    };

    /// Parses a policy name.
    pub fn parse(s: &str) -> Result<Progress, ParseProgressError> {
        match s.trim() {
            "dedicated" => Ok(Progress::Dedicated),
            "spin-then-block" => Ok(Progress::SPIN_THEN_BLOCK),
            "host-assisted" => Ok(Progress::HOST_ASSISTED),
            other => Err(ParseProgressError(other.to_string())),
        }
    }

    /// The policy's name, as [`Progress::parse`] accepts it.
    pub fn name(&self) -> &'static str {
        match self {
            Progress::Dedicated => "dedicated",
            Progress::SpinThenBlock { .. } => "spin-then-block",
            Progress::HostAssisted { .. } => "host-assisted",
        }
    }

    /// The default for `local_ranks` ranks sharing `cores` cores, and why.
    pub fn default_for(cores: usize, local_ranks: usize) -> (Progress, String) {
        let ranks = local_ranks.max(1);
        if cores >= 2 * ranks {
            (Progress::Dedicated, format!("{cores} cores for {ranks} local ranks: each engine thread can poll a core of its own"))
        } else if cores >= ranks {
            (
                Progress::HOST_ASSISTED,
                format!(
                    "{cores} cores for {ranks} local ranks: no core to spare for polling engine threads, so waiting hosts drive their engines (a kernel wake-up costs ~20 us on the critical path)"
                ),
            )
        } else {
            (
                Progress::SPIN_THEN_BLOCK,
                format!("{cores} cores for {ranks} local ranks: oversubscribed, so threads block instead of spinning"),
            )
        }
    }

    /// The policy under a node engine, from the node's cores and local
    /// ranks, and why: when a core is left over for the engine it polls
    /// it and waiting ranks spin; otherwise the engine and waiting ranks
    /// spin briefly, then block. The engine process and its ranks decide
    /// with this one rule.
    pub fn for_node_engine(cores: usize, local_ranks: usize) -> (Progress, String) {
        if cores > local_ranks {
            (
                Progress::Dedicated,
                format!("node engine: {cores} cores for {local_ranks} local ranks and the engine, which polls a core of its own; waiting ranks spin"),
            )
        } else {
            (
                Progress::SPIN_THEN_BLOCK,
                format!("node engine: {cores} cores for {local_ranks} local ranks and the engine: no core to spare, so the engine and waiting ranks spin briefly, then block"),
            )
        }
    }

    /// `OUTBOARD_PROGRESS` if set, else [`Progress::default_for`] this
    /// node's cores ([`machine_cores`]).
    pub fn from_env(local_ranks: usize) -> Result<(Progress, String), SettingError> {
        match outboard_settings::registry::PROGRESS.get(&outboard_settings::ProcessEnv)? {
            // The registry's names are the policies' (a test checks it).
            Some(name) => Ok((Progress::parse(name).unwrap_or(Progress::HOST_ASSISTED), "set by OUTBOARD_PROGRESS".to_string())),
            None => Ok(Progress::default_for(machine_cores(), local_ranks)),
        }
    }
}

impl Progress {
    /// `OUTBOARD_PROGRESS` if set, else [`Progress::for_node_engine`] for
    /// this node's cores: the policy a node engine and its ranks share.
    pub fn node_engine_from_env(local_ranks: usize) -> Result<(Progress, String), SettingError> {
        match outboard_settings::registry::PROGRESS.get(&outboard_settings::ProcessEnv)? {
            Some(name) => Ok((Progress::parse(name).unwrap_or(Progress::HOST_ASSISTED), "set by OUTBOARD_PROGRESS".to_string())),
            None => Ok(Progress::for_node_engine(machine_cores(), local_ranks)),
        }
    }
}

/// Cores of the node this job may use: not the process's own binding
/// (a launcher may bind each rank to one core, and the engine threads
/// leave that binding: see [`crate::affinity`]).
pub fn machine_cores() -> usize {
    crate::affinity::node_cores()
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_follows_cores_per_rank() {
        assert_eq!(Progress::default_for(16, 4).0, Progress::Dedicated);
        assert_eq!(Progress::default_for(2, 2).0.name(), "host-assisted");
        assert_eq!(Progress::default_for(2, 4).0.name(), "spin-then-block");
        assert_eq!(Progress::parse("dedicated"), Ok(Progress::Dedicated));
        assert!(Progress::parse("fast").is_err());
    }

    #[test]
    fn every_name_the_setting_accepts_is_a_policy() {
        for name in outboard_settings::registry::PROGRESS.kind.canonical_names() {
            assert_eq!(Progress::parse(name).map(|p| p.name()), Ok(name));
        }
    }
}
