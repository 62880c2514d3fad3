//! The per-peer round numbering of a schedule: the one definition both
//! the engine (the round field of a collective packet) and the host
//! library's host-based run (the round bits of a message tag) use, so
//! the two ends of every packet agree on it.

use std::collections::BTreeMap;

use super::{CollError, Schedule};

/// Per step, the round of each rank the step lists, in the listed order.
pub type Rounds = Vec<Vec<u16>>;

/// The send and receive rounds of `s`: a packet's round is its ordinal
/// among the packets this member sends to (or receives from) the same
/// member over the whole schedule. The sender's count and the receiver's
/// count of the same pair advance together, so the round a packet carries
/// names the one receive it is for, however the steps interleave.
///
/// Fails when more than 65,536 packets go between two members (the round
/// field's 16 bits).
pub fn rounds(s: &Schedule) -> Result<(Rounds, Rounds), CollError> {
    let mut sent: BTreeMap<u32, u32> = BTreeMap::new();
    let mut got: BTreeMap<u32, u32> = BTreeMap::new();
    let next = |m: &mut BTreeMap<u32, u32>, r: u32| -> Result<u16, CollError> {
        let c = m.entry(r).or_insert(0);
        let v = u16::try_from(*c).map_err(|_| CollError::Malformed("more than 65,536 packets between two members"))?;
        *c += 1;
        Ok(v)
    };
    let mut send_round = Vec::with_capacity(s.steps.len());
    let mut recv_round = Vec::with_capacity(s.steps.len());
    for st in &s.steps {
        send_round.push(st.send_to.iter().map(|&r| next(&mut sent, r)).collect::<Result<Vec<_>, _>>()?);
        recv_round.push(st.recv_from.iter().map(|&r| next(&mut got, r)).collect::<Result<Vec<_>, _>>()?);
    }
    Ok((send_round, recv_round))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::{Fold, Step};

    #[test]
    fn rounds_count_per_peer_across_steps() {
        let s = Schedule::new(vec![
            Step::exchange([1, 2], [1], Fold::Ignore),
            Step::exchange([1], [2, 1], Fold::Ignore),
            Step::send([2]),
        ]);
        let (send, recv) = rounds(&s).unwrap();
        assert_eq!(send, vec![vec![0, 0], vec![1], vec![1]]);
        assert_eq!(recv, vec![vec![0], vec![0, 1], vec![]]);
    }

    #[test]
    fn more_rounds_than_the_field_holds_fail() {
        let s = Schedule::new(vec![Step::send([1]); 65_537]);
        assert!(matches!(rounds(&s), Err(CollError::Malformed(_))));
        let s = Schedule::new(vec![Step::send([1]); 65_536]);
        assert!(rounds(&s).is_ok());
    }
}
