//! Why a collective failed: the payload of its packets flagged
//! [`COLL_ROUND_FAILED`](crate::COLL_ROUND_FAILED).
//!
//! A member that learns of a departure (a peer engine died, a member's
//! port closed) runs its collective's remaining steps at once, its
//! packets flagged failed so that the members waiting for them do not
//! wait for good. Those members may hear of the departure itself only
//! later, or never first: the notices travel on other paths. So the
//! flagged packets carry the departure, and every member fails naming the
//! same rank - the one that left - whichever packet or notice reached it
//! first. A failure with no departure behind it (an operator that failed,
//! members that called different collectives) carries no bytes.

use crate::WireError;

/// Bytes of an encoded departure: a tag byte, the node, the port, the
/// port's incarnation.
pub const COLL_FAILURE_LEN: usize = 10;

const TAG_NODE_DIED: u8 = 1;
const TAG_PORT_CLOSED: u8 = 2;

/// The cause a failed collective packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollFailure {
    /// No departure: the failure began at a member's own step (its
    /// operator failed, or the members' collectives differ). Empty.
    Other,
    /// The engine of node `node` stopped answering or announced its death.
    NodeDied {
        /// The node.
        node: u32,
    },
    /// The port `port`, incarnation `gen`, of node `node` closed: that
    /// member left while its node lives on.
    PortClosed {
        /// The node.
        node: u32,
        /// The port slot.
        port: u8,
        /// The incarnation that closed.
        gen: u32,
    },
}

impl CollFailure {
    /// Parses a failed packet's payload: empty is [`CollFailure::Other`],
    /// anything else must be one exact departure.
    pub fn parse(b: &[u8]) -> Result<CollFailure, WireError> {
        if b.is_empty() {
            return Ok(CollFailure::Other);
        }
        let bad = |why| WireError::MalformedBody { kind: "collective failure", why };
        if b.len() != COLL_FAILURE_LEN {
            return Err(bad("a departure is exactly 10 bytes"));
        }
        let node = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
        let gen = u32::from_be_bytes([b[6], b[7], b[8], b[9]]);
        match b[0] {
            TAG_NODE_DIED if b[5..].iter().all(|&x| x == 0) => Ok(CollFailure::NodeDied { node }),
            TAG_NODE_DIED => Err(bad("a node's death names no port")),
            TAG_PORT_CLOSED => Ok(CollFailure::PortClosed { node, port: b[5], gen }),
            _ => Err(bad("unknown departure")),
        }
    }

    /// The payload that [`CollFailure::parse`] reads back.
    pub fn encode(&self) -> Vec<u8> {
        let (tag, node, port, gen) = match *self {
            CollFailure::Other => return Vec::new(),
            CollFailure::NodeDied { node } => (TAG_NODE_DIED, node, 0, 0),
            CollFailure::PortClosed { node, port, gen } => (TAG_PORT_CLOSED, node, port, gen),
        };
        let mut b = Vec::with_capacity(COLL_FAILURE_LEN);
        b.push(tag);
        b.extend_from_slice(&node.to_be_bytes());
        b.push(port);
        b.extend_from_slice(&gen.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_failure() -> impl Strategy<Value = CollFailure> {
        prop_oneof![
            Just(CollFailure::Other),
            any::<u32>().prop_map(|node| CollFailure::NodeDied { node }),
            any::<(u32, u8, u32)>().prop_map(|(node, port, gen)| CollFailure::PortClosed { node, port, gen }),
        ]
    }

    proptest! {
        #[test]
        fn every_cause_reads_back(c in any_failure()) {
            prop_assert_eq!(CollFailure::parse(&c.encode()), Ok(c));
        }

        /// Whatever a peer sends, parsing ends in a value or an error, and
        /// what parses re-encodes to the same bytes.
        #[test]
        fn any_payload_parses_exactly_or_is_refused(b in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok(c) = CollFailure::parse(&b) {
                prop_assert_eq!(c.encode(), b);
            }
        }
    }

    #[test]
    fn a_value_of_another_length_is_refused() {
        assert!(CollFailure::parse(&[TAG_PORT_CLOSED, 0, 0, 0, 1]).is_err());
        assert!(CollFailure::parse(&[9; COLL_FAILURE_LEN]).is_err());
    }
}
