//! The byte form of a group's member list, read by the engine from host
//! memory when a group is created.

use super::schedule::Reader;
use super::CollError;
use crate::{Endpoint, NodeId, PortId};

/// Bytes per member: node (4), port (1), generation (4).
pub const MEMBER_LEN: usize = 9;
/// Most members a group may have.
const MAX_MEMBERS: usize = 1 << 24;

/// Encodes members in rank order.
pub fn encode_members(members: &[Endpoint]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + members.len() * MEMBER_LEN);
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for m in members {
        out.extend_from_slice(&m.node.0.to_le_bytes());
        out.push(m.port.0);
        out.extend_from_slice(&m.gen.to_le_bytes());
    }
    out
}

/// Decodes a member list; lengths checked, trailing bytes refused.
pub fn decode_members(bytes: &[u8]) -> Result<Vec<Endpoint>, CollError> {
    let mut r = Reader { b: bytes };
    let n = r.u32()? as usize;
    if n == 0 || n > MAX_MEMBERS {
        return Err(CollError::Malformed("member count out of range"));
    }
    if r.b.len() != n * MEMBER_LEN {
        return Err(CollError::Malformed("member list length does not match its count"));
    }
    (0..n)
        .map(|_| {
            let node = NodeId(r.u32()?);
            let port = PortId(r.u8()?);
            let gen = r.u32()?;
            Ok(Endpoint { node, port, gen })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let m: Vec<Endpoint> =
            (0..5).map(|i| Endpoint { node: NodeId(i * 7), port: PortId(i as u8), gen: i + 100 }).collect();
        let b = encode_members(&m);
        assert_eq!(decode_members(&b).unwrap(), m);
        assert!(decode_members(&b[..b.len() - 1]).is_err());
        assert!(decode_members(&[0, 0, 0, 0]).is_err());
        let mut extra = b.clone();
        extra.push(0);
        assert!(decode_members(&extra).is_err());
    }
}
