//! [`MemberList`]: a group's members in rank order, stored as runs.
//!
//! A job's world group names node `i` at rank `i`, every one on the same
//! port and port incarnation; split groups are mostly a few such stretches.
//! Held as a list of endpoints, every member of a 65,536-rank group would
//! keep 65,536 entries on its host and on its engine - 1.5 MB each, 100 GB
//! in a simulation of the whole job. A run (first node, port, incarnation,
//! length) covers any stretch of consecutive ranks on consecutive nodes
//! with the same port and incarnation, so such groups take a few bytes
//! whatever their size, and an arbitrary group never takes more than one
//! run per member. The list is immutable and shared (`Arc`), so copies for
//! runs in progress cost nothing.
//!
//! Byte form (host memory to engine, `CreateGroup`): member count (u32),
//! run count (u32), then per run node (u32), port (u8), incarnation (u32),
//! length (u32), little-endian. Runs must be maximal - two that could be one
//! are refused - so each list has exactly one byte form.

use std::sync::Arc;

use super::schedule::Reader;
use super::CollError;
use crate::{Endpoint, NodeId, PortId};

/// Bytes per run in the byte form.
pub const MEMBER_RUN_LEN: usize = 13;
/// Most members a group may have.
pub const MAX_GROUP_MEMBERS: u32 = 1 << 24;

/// One stretch of consecutive ranks on consecutive nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// Rank of the run's first member.
    first_rank: u32,
    node: u32,
    port: PortId,
    gen: u32,
    len: u32,
}

impl Run {
    fn at(&self, i: u32) -> Endpoint {
        Endpoint { node: NodeId(self.node + i), port: self.port, gen: self.gen }
    }

    /// Whether `ep` would be this run's next member.
    fn continues_with(&self, ep: Endpoint) -> bool {
        ep.port == self.port && ep.gen == self.gen && self.node.checked_add(self.len) == Some(ep.node.0)
    }
}

/// A group's members in rank order (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberList {
    len: u32,
    runs: Arc<[Run]>,
}

impl MemberList {
    /// The members `endpoints` lists, in that order.
    pub fn from_endpoints(endpoints: impl IntoIterator<Item = Endpoint>) -> MemberList {
        let mut runs: Vec<Run> = Vec::new();
        let mut len = 0u32;
        for ep in endpoints {
            match runs.last_mut() {
                Some(r) if r.continues_with(ep) => r.len += 1,
                _ => runs.push(Run { first_rank: len, node: ep.node.0, port: ep.port, gen: ep.gen, len: 1 }),
            }
            len += 1;
        }
        MemberList { len, runs: runs.into() }
    }

    /// `count` members: nodes `first`, `first + 1`, ... in rank order, all
    /// on `port` at incarnation `gen` (a job's world group). `None` when the
    /// node numbers would overflow.
    pub fn contiguous(first: NodeId, count: u32, port: PortId, gen: u32) -> Option<MemberList> {
        first.0.checked_add(count)?;
        let runs: Arc<[Run]> = if count == 0 {
            Arc::new([])
        } else {
            Arc::new([Run { first_rank: 0, node: first.0, port, gen, len: count }])
        };
        Some(MemberList { len: count, runs })
    }

    /// Number of members.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The member at `rank`.
    pub fn get(&self, rank: u32) -> Option<Endpoint> {
        if rank >= self.len {
            return None;
        }
        let i = self.runs.partition_point(|r| r.first_rank <= rank) - 1;
        let r = &self.runs[i];
        Some(r.at(rank - r.first_rank))
    }

    /// The rank of `ep`, if it is a member (the first, if named twice).
    pub fn rank_of(&self, ep: Endpoint) -> Option<u32> {
        self.runs.iter().find_map(|r| {
            let off = ep.node.0.checked_sub(r.node)?;
            (off < r.len && ep.port == r.port && ep.gen == r.gen).then_some(r.first_rank + off)
        })
    }

    /// Whether some member is on `node`.
    pub fn has_node(&self, node: NodeId) -> bool {
        self.runs.iter().any(|r| node.0.checked_sub(r.node).is_some_and(|off| off < r.len))
    }

    /// The members in rank order.
    pub fn iter(&self) -> impl Iterator<Item = Endpoint> + '_ {
        self.runs.iter().flat_map(|r| (0..r.len).map(move |i| r.at(i)))
    }

    /// Whether two members share a node and port (a group names each port
    /// once). Costs a sort of the runs, not of the members.
    pub fn has_duplicate_port(&self) -> bool {
        let mut spans: Vec<(PortId, u32, u32)> = self.runs.iter().map(|r| (r.port, r.node, r.node + r.len)).collect();
        spans.sort_unstable();
        spans.windows(2).any(|w| w[0].0 == w[1].0 && w[1].1 < w[0].2)
    }

    /// Runs in the byte form: a measure of what the list costs to hold.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The byte form (module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.runs.len() * MEMBER_RUN_LEN);
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&(self.runs.len() as u32).to_le_bytes());
        for r in self.runs.iter() {
            out.extend_from_slice(&r.node.to_le_bytes());
            out.push(r.port.0);
            out.extend_from_slice(&r.gen.to_le_bytes());
            out.extend_from_slice(&r.len.to_le_bytes());
        }
        out
    }

    /// Reads the byte form: counts, lengths and node ranges checked, runs
    /// that should have been one refused, trailing bytes refused.
    pub fn decode(bytes: &[u8]) -> Result<MemberList, CollError> {
        let mut r = Reader { b: bytes };
        let len = r.u32()?;
        if len == 0 || len > MAX_GROUP_MEMBERS {
            return Err(CollError::Malformed("member count out of range"));
        }
        let count = r.u32()? as usize;
        if count == 0 || count > len as usize {
            return Err(CollError::Malformed("run count out of range"));
        }
        if r.b.len() != count * MEMBER_RUN_LEN {
            return Err(CollError::Malformed("member list length does not match its run count"));
        }
        let mut runs: Vec<Run> = Vec::with_capacity(count);
        let mut total = 0u32;
        for _ in 0..count {
            let node = r.u32()?;
            let port = PortId(r.u8()?);
            let gen = r.u32()?;
            let n = r.u32()?;
            if n == 0 || node.checked_add(n).is_none() {
                return Err(CollError::Malformed("member run empty or beyond the last node"));
            }
            total = total.checked_add(n).filter(|&t| t <= len).ok_or(CollError::Malformed("member runs exceed the count"))?;
            let run = Run { first_rank: total - n, node, port, gen, len: n };
            if runs.last().is_some_and(|prev| prev.continues_with(run.at(0))) {
                return Err(CollError::Malformed("member runs not maximal"));
            }
            runs.push(run);
        }
        if total != len {
            return Err(CollError::Malformed("member runs fall short of the count"));
        }
        Ok(MemberList { len, runs: runs.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ep(node: u32, port: u8, gen: u32) -> Endpoint {
        Endpoint { node: NodeId(node), port: PortId(port), gen }
    }

    fn arb_endpoints() -> impl Strategy<Value = Vec<Endpoint>> {
        // Small node, port and incarnation ranges so that runs form and break.
        proptest::collection::vec((0u32..12, 0u8..2, 1u32..3).prop_map(|(n, p, g)| ep(n, p, g)), 1..40)
    }

    proptest! {
        #[test]
        fn lookups_match_the_plain_list(eps in arb_endpoints()) {
            let m = MemberList::from_endpoints(eps.iter().copied());
            prop_assert_eq!(m.len() as usize, eps.len());
            prop_assert_eq!(m.iter().collect::<Vec<_>>(), eps.clone());
            for (i, &e) in eps.iter().enumerate() {
                prop_assert_eq!(m.get(i as u32), Some(e));
                prop_assert_eq!(m.rank_of(e), eps.iter().position(|&x| x == e).map(|p| p as u32));
            }
            prop_assert_eq!(m.get(eps.len() as u32), None);
            for node in 0..14 {
                prop_assert_eq!(m.has_node(NodeId(node)), eps.iter().any(|e| e.node.0 == node));
            }
            let mut keys: Vec<_> = eps.iter().map(|e| (e.node, e.port)).collect();
            keys.sort();
            prop_assert_eq!(m.has_duplicate_port(), keys.windows(2).any(|w| w[0] == w[1]));
        }

        #[test]
        fn byte_form_round_trips(eps in arb_endpoints()) {
            let m = MemberList::from_endpoints(eps);
            prop_assert_eq!(MemberList::decode(&m.encode()).unwrap(), m);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(m) = MemberList::decode(&bytes) {
                prop_assert_eq!(m.encode(), bytes);
            }
        }
    }

    #[test]
    fn a_world_group_is_one_run() {
        let m = MemberList::from_endpoints((0..65_536).map(|n| ep(n, 0, 1)));
        assert_eq!(m.runs(), 1);
        assert_eq!(m, MemberList::contiguous(NodeId(0), 65_536, PortId(0), 1).unwrap());
        assert_eq!(m.encode().len(), 8 + MEMBER_RUN_LEN);
        assert_eq!(m.get(40_000), Some(ep(40_000, 0, 1)));
        assert!(MemberList::contiguous(NodeId(u32::MAX), 2, PortId(0), 1).is_none());
    }

    #[test]
    fn malformed_byte_forms_are_refused() {
        let good = MemberList::from_endpoints([ep(0, 0, 1), ep(1, 0, 1), ep(5, 0, 1)]).encode();
        assert!(MemberList::decode(&good).is_ok());
        assert!(MemberList::decode(&good[..good.len() - 1]).is_err());
        let mut extra = good.clone();
        extra.push(0);
        assert!(MemberList::decode(&extra).is_err());
        // Two runs that should be one.
        let split = [3u32.to_le_bytes(), 2u32.to_le_bytes()].concat();
        let mut split = split.to_vec();
        for (node, len) in [(0u32, 1u32), (1, 2)] {
            split.extend_from_slice(&node.to_le_bytes());
            split.push(0);
            split.extend_from_slice(&1u32.to_le_bytes());
            split.extend_from_slice(&len.to_le_bytes());
        }
        assert_eq!(MemberList::decode(&split), Err(CollError::Malformed("member runs not maximal")));
        // A count larger than the runs cover, and one smaller.
        let mut short = good.clone();
        short[0] = 4;
        assert!(MemberList::decode(&short).is_err());
        let mut over = good;
        over[0] = 2;
        assert!(MemberList::decode(&over).is_err());
    }
}
