//! What a rank says when it gives up after a failure: in ranks, the job's
//! first failure first.
//!
//! The engine's errors name the node an operation needed
//! (`peer node NodeId(2) is unreachable`): the engine knows nodes, not
//! ranks. In a job of the runtime node id = rank, so here they are worded
//! in ranks. And the peer an operation needed is often not the rank that
//! broke the job - once survivors give up after an error, operations on
//! them fail too - so the report leads with the death this rank learned of
//! first, which the failure notices make the same on every survivor.

use std::error::Error;

use outboard_engine::{CommandError, Endpoint, OpError};
use outboard_host::HostError;

/// How errors name what the engine calls nodes and ports: with an engine
/// per process, node `n` is rank `n`; with node engines, a node is its
/// ranks (`node 1 (ranks 2, 3)`) and a port is one rank.
pub struct Names<'a> {
    /// A node.
    pub node: &'a dyn Fn(u32) -> String,
    /// A port.
    pub port: &'a dyn Fn(Endpoint) -> String,
}

/// The names of a job of per-process engines: node id = rank.
pub const RANKS: Names<'static> = Names { node: &|n| format!("rank {n}"), port: &|ep| format!("rank {}", ep.node.0) };

/// The report of rank `me` giving up on `err`, with `first`, the job's
/// first failure as this rank learned it (a node id): `rank 3 gives up:
/// rank 1 failed first; rank 2 is unreachable`.
pub fn report(me: u32, first: Option<u32>, err: &(dyn Error + 'static)) -> String {
    report_with(me, me, first, err, &RANKS)
}

/// [`report`] with the job's own [`Names`]; `my_node` is the node of rank
/// `me` (a failure of its own node is not news to it).
pub fn report_with(me: u32, my_node: u32, first: Option<u32>, err: &(dyn Error + 'static), names: &Names<'_>) -> String {
    let what = in_names(err, names);
    match first {
        Some(first) if first != my_node => format!("rank {me} gives up: {} failed first; {what}", (names.node)(first)),
        _ => format!("rank {me} gives up: {what}"),
    }
}

/// `err` and its causes with every engine error that names a node worded
/// in ranks.
#[cfg(test)]
fn in_ranks(err: &(dyn Error + 'static)) -> String {
    in_names(err, &RANKS)
}

/// `err` with every engine error that names a node or port worded with
/// `names`.
pub fn in_names(err: &(dyn Error + 'static), names: &Names<'_>) -> String {
    let mut text = err.to_string();
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(phrase) = rank_phrase(e, names) {
            let raw = e.to_string();
            if text.contains(&raw) {
                text = text.replace(&raw, &phrase);
            } else {
                text = format!("{text}: {phrase}");
            }
            break;
        }
        cause = e.source();
    }
    text
}

/// The sentence for an error that names a node, if `e` is one.
fn rank_phrase(e: &(dyn Error + 'static), names: &Names<'_>) -> Option<String> {
    let op = |o: &OpError| match *o {
        OpError::PeerUnreachable(n) => Some(format!("{} is unreachable", (names.node)(n.0))),
        OpError::ProcFailedPending(n) => Some(format!("a receive from any rank was withdrawn: {} failed while it waited", (names.node)(n.0))),
        OpError::SourceClosed(ep) => Some(format!("{} closed its port: no message will come from it", (names.port)(ep))),
        OpError::EngineLost => Some("this rank's node engine is gone (the outboard node process ended)".to_string()),
        _ => None,
    };
    let command = |c: &CommandError| match *c {
        CommandError::PeerUnreachable(n) => Some(format!("{} is unreachable", (names.node)(n.0))),
        _ => None,
    };
    if let Some(h) = e.downcast_ref::<HostError>() {
        return match h {
            HostError::Op(o) => op(o),
            HostError::Command(c) => command(c),
            _ => None,
        };
    }
    if let Some(o) = e.downcast_ref::<OpError>() {
        return op(o);
    }
    e.downcast_ref::<CommandError>().and_then(command)
}

#[cfg(test)]
mod tests {
    use super::*;
    use outboard_engine::NodeId;

    #[derive(Debug, thiserror::Error)]
    #[error("lap 3: {0}")]
    struct Lap(#[source] HostError);

    #[test]
    fn the_first_failure_leads_and_nodes_read_as_ranks() {
        let e = HostError::Op(OpError::PeerUnreachable(NodeId(2)));
        assert_eq!(report(3, Some(1), &e), "rank 3 gives up: rank 1 failed first; rank 2 is unreachable");
        assert_eq!(report(3, None, &e), "rank 3 gives up: rank 2 is unreachable");
    }

    #[test]
    fn a_wrapped_error_keeps_its_context() {
        let e = Lap(HostError::Op(OpError::ProcFailedPending(NodeId(0))));
        assert_eq!(in_ranks(&e), "lap 3: a receive from any rank was withdrawn: rank 0 failed while it waited");
        let boxed: Box<dyn Error> = Box::new(HostError::Command(CommandError::PeerUnreachable(NodeId(4))));
        assert_eq!(in_ranks(&*boxed), "rank 4 is unreachable");
    }

    #[test]
    fn with_node_engines_nodes_read_as_their_ranks_and_ports_as_one_rank() {
        let node = |n: u32| format!("node {n} (ranks {}, {})", 2 * n, 2 * n + 1);
        let port = |ep: Endpoint| format!("rank {}", 2 * ep.node.0 + u32::from(ep.port.0));
        let names = Names { node: &node, port: &port };
        let e = HostError::Op(OpError::PeerUnreachable(NodeId(1)));
        assert_eq!(report_with(0, 0, Some(1), &e, &names), "rank 0 gives up: node 1 (ranks 2, 3) failed first; node 1 (ranks 2, 3) is unreachable");
        let closed = HostError::Op(OpError::SourceClosed(Endpoint { node: NodeId(1), port: outboard_engine::PortId(1), gen: 7 }));
        assert_eq!(in_names(&closed, &names), "rank 3 closed its port: no message will come from it");
        assert_eq!(in_names(&HostError::Op(OpError::EngineLost), &names), "this rank's node engine is gone (the outboard node process ended)");
    }

    #[test]
    fn other_errors_are_their_display() {
        let e = HostError::Op(OpError::PortGone);
        assert_eq!(in_ranks(&e), e.to_string());
    }
}
