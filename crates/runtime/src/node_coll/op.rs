//! What a member says it is calling: the collective, its root, its
//! reduction and its length, packed in two words that every member
//! publishes beside its arrival, so that the leader can tell members that
//! called different collectives at the same place from members that agree.

use outboard_engine::{Datatype, ReduceOp, Reduction};

/// One collective call as the members must agree on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A barrier.
    Barrier,
    /// A broadcast from group rank `root`.
    Bcast {
        /// The root.
        root: u32,
    },
    /// A reduction to group rank `root`.
    Reduce {
        /// The root.
        root: u32,
        /// The operation and type.
        red: Reduction,
    },
    /// An allreduce.
    Allreduce {
        /// The operation and type.
        red: Reduction,
    },
}

/// An [`Op`] and the length in bytes of its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The collective.
    pub op: Op,
    /// Bytes of data (0 for a barrier).
    pub len: u64,
}

impl Call {
    /// The two words a member publishes: kind, root and reduction in the
    /// first, the length in the second. Kinds start at 1 so that a word of
    /// zeroes (nothing published yet) decodes to nothing.
    pub fn encode(self) -> [u64; 2] {
        let (kind, root, red) = match self.op {
            Op::Barrier => (1u64, 0u32, None),
            Op::Bcast { root } => (2, root, None),
            Op::Reduce { root, red } => (3, root, Some(red)),
            Op::Allreduce { red } => (4, 0, Some(red)),
        };
        let (op, dtype) = red.map_or((0, 0), |r| (u64::from(r.op.code()), r.dtype as u64));
        [kind | op << 8 | dtype << 16 | u64::from(root) << 32, self.len]
    }

    /// The call two words describe, or `None` for words no member wrote.
    pub fn decode(w: [u64; 2]) -> Option<Call> {
        let red = || {
            let op = ReduceOp::from_code(((w[0] >> 8) & 0xff) as u8)?;
            let dtype = Datatype::ALL.into_iter().find(|d| *d as u64 == (w[0] >> 16) & 0xff)?;
            Some(Reduction { op, dtype })
        };
        let root = (w[0] >> 32) as u32;
        let op = match w[0] & 0xff {
            1 => Op::Barrier,
            2 => Op::Bcast { root },
            3 => Op::Reduce { root, red: red()? },
            4 => Op::Allreduce { red: red()? },
            _ => return None,
        };
        Some(Call { op, len: w[1] })
    }

    /// The call in words, as errors name it ("a broadcast of 8 bytes from
    /// rank 1").
    pub fn describe(self) -> String {
        let bytes = |n: u64| if n == 1 { "1 byte".to_string() } else { format!("{n} bytes") };
        match self.op {
            Op::Barrier => "a barrier".to_string(),
            Op::Bcast { root } => format!("a broadcast of {} from rank {root}", bytes(self.len)),
            Op::Reduce { root, red } => format!("a reduce ({} on {}) of {} to rank {root}", red.op.name(), red.dtype.name(), bytes(self.len)),
            Op::Allreduce { red } => format!("an allreduce ({} on {}) of {}", red.op.name(), red.dtype.name(), bytes(self.len)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_survives_its_encoding_and_zeroes_are_nothing() {
        let mut calls = vec![Call { op: Op::Barrier, len: 0 }, Call { op: Op::Bcast { root: u32::MAX }, len: 1 << 40 }];
        for dtype in Datatype::ALL {
            for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod] {
                let red = Reduction { op, dtype };
                calls.push(Call { op: Op::Reduce { root: 7, red }, len: 64 });
                calls.push(Call { op: Op::Allreduce { red }, len: 8 });
            }
        }
        for c in calls {
            assert_eq!(Call::decode(c.encode()), Some(c), "{c:?}");
        }
        assert_eq!(Call::decode([0, 0]), None);
        assert_eq!(Call::decode([9, 0]), None);
    }

    #[test]
    fn descriptions_name_the_collective_root_and_length() {
        assert_eq!(Call { op: Op::Barrier, len: 0 }.describe(), "a barrier");
        assert_eq!(Call { op: Op::Bcast { root: 1 }, len: 8 }.describe(), "a broadcast of 8 bytes from rank 1");
        let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::F64 };
        assert_eq!(Call { op: Op::Allreduce { red }, len: 8 }.describe(), "an allreduce (sum on f64) of 8 bytes");
    }
}
