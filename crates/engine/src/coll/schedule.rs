//! Collective schedules: what one member's engine does, step by step.
//!
//! The papers compute trees and pairings on the host and hand them to the
//! NIC (dissertation 3.3: the NIC only follows a list). A [`Schedule`] is
//! that list for one member of a group: at each [`Step`] the engine sends
//! its current value to some ranks, then waits for a packet from each of
//! some others and folds them into the value. Barrier algorithms (pairwise
//! exchange, dissemination, gather-and-broadcast), reduction trees,
//! allreduce and broadcast are all schedules; the engine knows none of them
//! by name.
//!
//! Schedules travel from host to engine through host memory (the command
//! carries only the buffer), so they have a byte encoding, checked in full
//! when the engine reads it.

use super::CollError;

/// What a step does with each packet it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Fold {
    /// The packet is only a signal (barrier): its arrival is what counts.
    Ignore = 0,
    /// Combine the packet's value with the current one under the
    /// collective's reduction. The packet from a lower rank is the left
    /// operand, so the combination order is fixed by the schedule.
    Combine = 1,
    /// The packet's value replaces the current one (broadcast).
    Replace = 2,
}

impl Fold {
    fn from_u8(v: u8) -> Result<Fold, CollError> {
        Ok(match v {
            0 => Fold::Ignore,
            1 => Fold::Combine,
            2 => Fold::Replace,
            _ => return Err(CollError::Malformed("unknown fold")),
        })
    }
}

/// One step of a schedule: send the current value to every rank of
/// `send_to`, then receive one packet from every rank of `recv_from`,
/// folding them in the listed order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Step {
    /// Ranks the current value goes to, at the start of the step.
    pub send_to: Vec<u32>,
    /// Ranks whose packet this step waits for, folded in this order.
    pub recv_from: Vec<u32>,
    /// What received packets do to the value.
    pub fold: Option<Fold>,
}

impl Step {
    /// A step that only sends.
    pub fn send(to: impl IntoIterator<Item = u32>) -> Step {
        Step { send_to: to.into_iter().collect(), recv_from: Vec::new(), fold: None }
    }

    /// A step that only receives.
    pub fn recv(from: impl IntoIterator<Item = u32>, fold: Fold) -> Step {
        Step { send_to: Vec::new(), recv_from: from.into_iter().collect(), fold: Some(fold) }
    }

    /// A step that sends, then receives.
    pub fn exchange(to: impl IntoIterator<Item = u32>, from: impl IntoIterator<Item = u32>, fold: Fold) -> Step {
        Step { send_to: to.into_iter().collect(), recv_from: from.into_iter().collect(), fold: Some(fold) }
    }

    /// The fold of received packets (`Ignore` when the step receives
    /// nothing).
    pub fn fold(&self) -> Fold {
        self.fold.unwrap_or(Fold::Ignore)
    }
}

/// The steps of one member's part in a collective.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Schedule {
    /// In execution order.
    pub steps: Vec<Step>,
}

/// Encoding: magic, version, then the steps.
const MAGIC: &[u8; 4] = b"OBSC";
const VERSION: u8 = 1;
/// Most steps a schedule may have (a dissemination barrier over 2^32 ranks
/// needs 32; trees of any shape need a handful).
pub const MAX_STEPS: usize = 4096;
/// Most ranks one step may list.
pub const MAX_FANOUT: usize = 65_535;

impl Schedule {
    /// A schedule with these steps.
    pub fn new(steps: Vec<Step>) -> Schedule {
        Schedule { steps }
    }

    /// Checks the schedule against a group of `size` members, for the
    /// member of rank `rank`: ranks in range, never itself, no rank twice
    /// in one list, limits respected.
    pub fn validate(&self, rank: u32, size: u32) -> Result<(), CollError> {
        if self.steps.len() > MAX_STEPS {
            return Err(CollError::Malformed("too many steps"));
        }
        for s in &self.steps {
            for list in [&s.send_to, &s.recv_from] {
                if list.len() > MAX_FANOUT {
                    return Err(CollError::Malformed("step lists too many ranks"));
                }
                let mut seen = std::collections::HashSet::with_capacity(list.len());
                for &r in list {
                    if r >= size {
                        return Err(CollError::RankOutOfRange { rank: r, size });
                    }
                    if r == rank {
                        return Err(CollError::Malformed("a step names the member itself"));
                    }
                    if !seen.insert(r) {
                        return Err(CollError::Malformed("a step names a rank twice"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Number of bytes [`encode`](Self::encode) produces.
    pub fn encoded_len(&self) -> usize {
        4 + 1 + 2 + self.steps.iter().map(|s| 1 + 2 + 2 + 4 * (s.send_to.len() + s.recv_from.len())).sum::<usize>()
    }

    /// The byte form the engine reads from host memory.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&(self.steps.len() as u16).to_le_bytes());
        for s in &self.steps {
            out.push(s.fold.map_or(0xFF, |f| f as u8));
            out.extend_from_slice(&(s.send_to.len() as u16).to_le_bytes());
            out.extend_from_slice(&(s.recv_from.len() as u16).to_le_bytes());
            for r in s.send_to.iter().chain(&s.recv_from) {
                out.extend_from_slice(&r.to_le_bytes());
            }
        }
        out
    }

    /// Parses the byte form; every length is checked, trailing bytes are
    /// an error.
    pub fn decode(bytes: &[u8]) -> Result<Schedule, CollError> {
        let mut r = Reader { b: bytes };
        if r.take(4)? != MAGIC {
            return Err(CollError::Malformed("not a schedule (bad magic)"));
        }
        if r.u8()? != VERSION {
            return Err(CollError::Malformed("unknown schedule version"));
        }
        let n = usize::from(r.u16()?);
        if n > MAX_STEPS {
            return Err(CollError::Malformed("too many steps"));
        }
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            let fold = match r.u8()? {
                0xFF => None,
                v => Some(Fold::from_u8(v)?),
            };
            let ns = usize::from(r.u16()?);
            let nr = usize::from(r.u16()?);
            let send_to = (0..ns).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            let recv_from = (0..nr).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            if !recv_from.is_empty() && fold.is_none() {
                return Err(CollError::Malformed("a receiving step without a fold"));
            }
            steps.push(Step { send_to, recv_from, fold });
        }
        if !r.b.is_empty() {
            return Err(CollError::Malformed("trailing bytes after the schedule"));
        }
        Ok(Schedule { steps })
    }
}

/// A bounds-checked little-endian reader.
pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], CollError> {
        if self.b.len() < n {
            return Err(CollError::Malformed("truncated"));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, CollError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, CollError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, CollError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_schedule() -> impl Strategy<Value = Schedule> {
        let step = (
            proptest::collection::vec(0u32..1000, 0..6),
            proptest::collection::vec(0u32..1000, 0..6),
            prop_oneof![Just(Fold::Ignore), Just(Fold::Combine), Just(Fold::Replace)],
        )
            .prop_map(|(s, r, f)| Step { fold: Some(f), send_to: s, recv_from: r });
        proptest::collection::vec(step, 0..10).prop_map(Schedule::new)
    }

    proptest! {
        #[test]
        fn decode_of_encode_is_identity(s in arb_schedule()) {
            let bytes = s.encode();
            prop_assert_eq!(bytes.len(), s.encoded_len());
            prop_assert_eq!(Schedule::decode(&bytes).unwrap(), s);
        }

        #[test]
        fn truncation_is_an_error(s in arb_schedule(), cut in 0usize..200) {
            let bytes = s.encode();
            if cut < bytes.len() {
                prop_assert!(Schedule::decode(&bytes[..cut]).is_err());
            }
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Schedule::decode(&b);
        }
    }

    #[test]
    fn validate_catches_bad_ranks() {
        let s = Schedule::new(vec![Step::send([1, 2])]);
        assert!(s.validate(0, 3).is_ok());
        assert_eq!(s.validate(0, 2), Err(CollError::RankOutOfRange { rank: 2, size: 2 }));
        assert!(s.validate(1, 3).is_err(), "names itself");
        assert!(Schedule::new(vec![Step::send([1, 1])]).validate(0, 3).is_err(), "twice");
    }
}
