//! Body of a NIC collective-protocol packet ([`crate::Kind::NicColl`]):
//! a barrier notification, or a request to send one again, exchanged by
//! the engines outside the point-to-point connection (no sequence number,
//! no acknowledgement; the collective keeps its own progress and recovers
//! a loss itself). The packet names the collective by (group, epoch), the
//! sender by its rank, and the one receive it is for by its round.
//!
//! The body has no payload: a barrier carries no data. Parsing checks the
//! exact length before any field is read and rejects every encoding
//! [`NicCollHeader`] could not have produced (an unknown type, non-zero
//! padding), so one value has one encoding.

use crate::header::{be32, be64};
use crate::WireError;

/// Bytes of a [`crate::Kind::NicColl`] body (it has no payload).
pub const NIC_COLL_LEN: usize = 32;

/// What a collective-protocol packet asks of its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NicCollType {
    /// "Rank `src_rank` reached the step that sends round `round` to you."
    Notify = 1,
    /// "I, rank `src_rank`, still miss your notification numbered `round`
    /// of this epoch: send it again if you have reached it."
    Nack = 2,
}

/// A [`crate::Kind::NicColl`] body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NicCollHeader {
    /// Sending port.
    pub src_port: u8,
    /// Receiving port.
    pub dst_port: u8,
    /// Notification or request to resend.
    pub ptype: NicCollType,
    /// Incarnation of the sending port.
    pub src_gen: u32,
    /// Incarnation of the receiving port; never delivered to another.
    pub dst_gen: u32,
    /// The group, agreed by its members.
    pub group: u64,
    /// Which barrier of the group (the members' count of protocol
    /// barriers started on it before this one).
    pub epoch: u32,
    /// The sender's rank in the group.
    pub src_rank: u32,
    /// For a notification, its ordinal among those the sender sends this
    /// receiver in the barrier; for a request, the ordinal it misses.
    pub round: u16,
    /// The sender's schedule for this barrier.
    pub schedule: u16,
}

fn malformed(why: &'static str) -> WireError {
    WireError::MalformedBody { kind: "nic-coll", why }
}

impl NicCollHeader {
    /// Parses a whole body.
    pub(crate) fn parse(b: &[u8]) -> Result<Self, WireError> {
        if b.len() != NIC_COLL_LEN {
            return Err(malformed("wrong length"));
        }
        let ptype = match b[2] {
            1 => NicCollType::Notify,
            2 => NicCollType::Nack,
            _ => return Err(malformed("unknown packet type")),
        };
        if b[3] != 0 {
            return Err(malformed("non-zero padding"));
        }
        Ok(NicCollHeader {
            src_port: b[0],
            dst_port: b[1],
            ptype,
            src_gen: be32(b, 4..8),
            dst_gen: be32(b, 8..12),
            group: be64(b, 12..20),
            epoch: be32(b, 20..24),
            src_rank: be32(b, 24..28),
            round: u16::from_be_bytes([b[28], b[29]]),
            schedule: u16::from_be_bytes([b[30], b[31]]),
        })
    }

    /// Writes the body into exactly [`NIC_COLL_LEN`] bytes.
    pub(crate) fn emit(&self, b: &mut [u8]) {
        b[0] = self.src_port;
        b[1] = self.dst_port;
        b[2] = self.ptype as u8;
        b[3] = 0;
        b[4..8].copy_from_slice(&self.src_gen.to_be_bytes());
        b[8..12].copy_from_slice(&self.dst_gen.to_be_bytes());
        b[12..20].copy_from_slice(&self.group.to_be_bytes());
        b[20..24].copy_from_slice(&self.epoch.to_be_bytes());
        b[24..28].copy_from_slice(&self.src_rank.to_be_bytes());
        b[28..30].copy_from_slice(&self.round.to_be_bytes());
        b[30..32].copy_from_slice(&self.schedule.to_be_bytes());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{emit_prefix, seal, Body, BodyRepr, Header, JobSecret, Kind, MacKey, Packet, Seq, HEADER_LEN, SECRET_LEN};
    use proptest::prelude::*;

    pub(crate) fn arb_header() -> impl Strategy<Value = NicCollHeader> {
        (any::<(u8, u8, bool, u32, u32)>(), any::<(u64, u32, u32, u16, u16)>()).prop_map(
            |((src_port, dst_port, nack, src_gen, dst_gen), (group, epoch, src_rank, round, schedule))| NicCollHeader {
                src_port,
                dst_port,
                ptype: if nack { NicCollType::Nack } else { NicCollType::Notify },
                src_gen,
                dst_gen,
                group,
                epoch,
                src_rank,
                round,
                schedule,
            },
        )
    }

    fn key() -> MacKey {
        MacKey::new(&JobSecret::from_bytes([5; SECRET_LEN]), 2)
    }

    fn packet(h: NicCollHeader) -> Vec<u8> {
        let hdr = Header { kind: Kind::NicColl, flags: 0, src_node: 1, dst_node: 2, boot: 5, seq: Seq(0), ack: Seq(0), horizon: Seq(0) };
        let mut buf = vec![0u8; HEADER_LEN + NIC_COLL_LEN];
        let off = emit_prefix(&hdr, &BodyRepr::NicColl(h), 0, &mut buf).unwrap();
        assert_eq!(off, buf.len());
        seal(&mut buf, &key());
        buf
    }

    #[test]
    fn unknown_type_padding_and_length_are_refused() {
        let mut b = [0u8; NIC_COLL_LEN];
        b[2] = 3;
        assert!(NicCollHeader::parse(&b).is_err());
        b[2] = 2;
        assert_eq!(NicCollHeader::parse(&b).unwrap().ptype, NicCollType::Nack);
        b[3] = 1;
        assert!(NicCollHeader::parse(&b).is_err());
        b[3] = 0;
        assert!(NicCollHeader::parse(&b[..NIC_COLL_LEN - 1]).is_err());
        let mut long = b.to_vec();
        long.push(0);
        assert!(NicCollHeader::parse(&long).is_err(), "a collective-protocol packet carries no payload");
    }

    #[test]
    fn not_sequenced() {
        assert!(!Kind::NicColl.is_sequenced());
        assert_eq!(Kind::NicColl.name(), "nic-coll");
    }

    proptest! {
        #[test]
        fn header_survives_a_packet(h in arb_header()) {
            let bytes = packet(h);
            let p = Packet::parse(&bytes, &key()).unwrap();
            prop_assert_eq!(p.body, Body::NicColl(h));
            prop_assert_eq!(p.header.kind, Kind::NicColl);
        }

        #[test]
        fn any_body_bytes_parse_canonically_or_fail(bytes in proptest::collection::vec(any::<u8>(), 30..34)) {
            if let Ok(h) = NicCollHeader::parse(&bytes) {
                let mut again = vec![0u8; NIC_COLL_LEN];
                h.emit(&mut again);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
