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

use outboard_engine::{CommandError, OpError};
use outboard_host::HostError;

/// The report of rank `me` giving up on `err`, with `first`, the job's
/// first failure as this rank learned it: `rank 3 gives up: rank 1 failed
/// first; rank 2 is unreachable`.
pub fn report(me: u32, first: Option<u32>, err: &(dyn Error + 'static)) -> String {
    let what = in_ranks(err);
    match first {
        Some(first) if first != me => format!("rank {me} gives up: rank {first} failed first; {what}"),
        _ => format!("rank {me} gives up: {what}"),
    }
}

/// `err` and its causes with every engine error that names a node worded
/// in ranks.
pub fn in_ranks(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(phrase) = rank_phrase(e) {
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
fn rank_phrase(e: &(dyn Error + 'static)) -> Option<String> {
    let op = |o: &OpError| match *o {
        OpError::PeerUnreachable(n) => Some(format!("rank {} is unreachable", n.0)),
        OpError::ProcFailedPending(n) => Some(format!("a receive from any rank was withdrawn: rank {} failed while it waited", n.0)),
        OpError::SourceClosed(ep) => Some(format!("rank {} closed its port: no message will come from it", ep.node.0)),
        _ => None,
    };
    let command = |c: &CommandError| match *c {
        CommandError::PeerUnreachable(n) => Some(format!("rank {} is unreachable", n.0)),
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
    fn other_errors_are_their_display() {
        let e = HostError::Op(OpError::PortGone);
        assert_eq!(in_ranks(&e), e.to_string());
    }
}
