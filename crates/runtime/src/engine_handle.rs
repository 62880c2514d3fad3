//! What a [`crate::World`] knows of its engine: an engine thread of its
//! own ([`Node`], `OUTBOARD_ENGINE=process`) or the node engine process it
//! shares with the node's other processes ([`NodeLink`],
//! `OUTBOARD_ENGINE=node`). The world asks the same questions of either.

use std::time::Duration;

use outboard_engine::Stats;

use crate::driver::TransportStats;
use crate::node::Node;
use crate::node_engine::client::NodeLink;
use crate::progress::Progress;

pub(crate) enum EngineHandle {
    Process(Node),
    Node { link: NodeLink, progress: Progress, peer_timeout: Duration },
}

impl EngineHandle {
    pub fn progress(&self) -> Progress {
        match self {
            EngineHandle::Process(n) => n.progress(),
            EngineHandle::Node { progress, .. } => *progress,
        }
    }

    /// The engine's counters. A node engine's are the node's (every local
    /// rank's traffic), with its transport's datagram and loopback counts;
    /// a gone one answers with nothing.
    pub fn stats(&self) -> (Stats, TransportStats) {
        match self {
            EngineHandle::Process(n) => n.stats(),
            EngineHandle::Node { link, .. } => {
                let Some(s) = link.status() else { return Default::default() };
                let t = TransportStats { datagrams_in: s.datagrams_in, datagrams_out: s.datagrams_out, loopback: s.loopback, ..Default::default() };
                (s.stats, t)
            }
        }
    }

    pub fn peer_timeout(&self) -> Duration {
        match self {
            EngineHandle::Process(n) => n.config().peer_timeout,
            EngineHandle::Node { peer_timeout, .. } => *peer_timeout,
        }
    }

    pub fn leave(&self) {
        match self {
            EngineHandle::Process(n) => n.leave(),
            EngineHandle::Node { link, .. } => link.leave(),
        }
    }

    /// Whether the engine has nothing under way (a node engine that is
    /// gone has nothing either).
    pub fn is_quiet(&self) -> bool {
        match self {
            EngineHandle::Process(n) => n.is_quiet(),
            EngineHandle::Node { link, .. } => link.status().is_none_or(|s| s.quiet),
        }
    }

    pub fn node(&self) -> Option<&Node> {
        match self {
            EngineHandle::Process(n) => Some(n),
            EngineHandle::Node { .. } => None,
        }
    }
}
