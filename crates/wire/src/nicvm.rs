//! Body of a NICVM module invocation ([`crate::Kind::Nicvm`]): a packet for
//! a user module loaded on the receiving engine (the NICVM paper's data
//! packet type, 4.3), naming the module, the generation it was loaded as,
//! and the group (communicator) it runs over.
//!
//! The fixed part is followed by the packet's payload (one packet: modules
//! see whole packets). Parsing checks the length before any field is read
//! and rejects every encoding [`NicvmHeader`] could not have produced (an
//! unknown packet type or flag, non-zero padding), so one value has one
//! encoding.

use crate::header::{be32, be64};
use crate::WireError;

/// Bytes of a [`crate::Kind::Nicvm`] body before its payload.
pub const NICVM_FIXED_LEN: usize = 40;

/// `flags` bit: a module on the way failed (fuel, trap, refused send) and
/// the packet took the default path; the receiving host sees it flagged.
pub const NICVM_FLAG_FAILED: u8 = 1;

/// Who the packet is for at the receiving engine (the paper's
/// `GM_ST_RELIABLE_NICVM_*` types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NicvmType {
    /// For the module on the receiving engine (`GM_ST_RELIABLE_NICVM_NIC_DATA`).
    NicData = 1,
    /// For the receiving host, bypassing modules (`GM_ST_RELIABLE_NICVM_HOST_DATA`).
    HostData = 2,
}

/// The fixed part of a [`crate::Kind::Nicvm`] body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NicvmHeader {
    /// Sending port.
    pub src_port: u8,
    /// Receiving port: the module runs for (and delivers to) this port.
    pub dst_port: u8,
    /// Module or host.
    pub ptype: NicvmType,
    /// [`NICVM_FLAG_FAILED`] or 0.
    pub flags: u8,
    /// Incarnation of the sending port.
    pub src_gen: u32,
    /// Incarnation of the receiving port; never delivered to another.
    pub dst_gen: u32,
    /// The sender's identifier, echoed in a refusal.
    pub msg_id: u32,
    /// The module's identifier (agreed by the job, like a group id).
    pub module: u32,
    /// The module's generation: 1 when first loaded, one more per
    /// replacement. A packet for another generation than the loaded one
    /// takes the default path.
    pub generation: u32,
    /// The group the module runs over (ranks, size).
    pub group: u64,
    /// The root rank of the operation (`mpi_get_root()`).
    pub root: u32,
    /// The sender's rank in the group (`mpi_get_source()`).
    pub src_rank: u32,
}

fn malformed(why: &'static str) -> WireError {
    WireError::MalformedBody { kind: "nicvm", why }
}

impl NicvmHeader {
    /// Parses the fixed part; the rest of `b` is the payload.
    pub(crate) fn parse(b: &[u8]) -> Result<(Self, &[u8]), WireError> {
        if b.len() < NICVM_FIXED_LEN {
            return Err(malformed("shorter than its fixed layout"));
        }
        let ptype = match b[2] {
            1 => NicvmType::NicData,
            2 => NicvmType::HostData,
            _ => return Err(malformed("unknown packet type")),
        };
        if b[3] & !NICVM_FLAG_FAILED != 0 {
            return Err(malformed("unknown flags"));
        }
        let h = NicvmHeader {
            src_port: b[0],
            dst_port: b[1],
            ptype,
            flags: b[3],
            src_gen: be32(b, 4..8),
            dst_gen: be32(b, 8..12),
            msg_id: be32(b, 12..16),
            module: be32(b, 16..20),
            generation: be32(b, 20..24),
            group: be64(b, 24..32),
            root: be32(b, 32..36),
            src_rank: be32(b, 36..40),
        };
        Ok((h, &b[NICVM_FIXED_LEN..]))
    }

    /// Writes the fixed part into exactly [`NICVM_FIXED_LEN`] bytes.
    pub(crate) fn emit(&self, b: &mut [u8]) {
        b[0] = self.src_port;
        b[1] = self.dst_port;
        b[2] = self.ptype as u8;
        b[3] = self.flags & NICVM_FLAG_FAILED;
        b[4..8].copy_from_slice(&self.src_gen.to_be_bytes());
        b[8..12].copy_from_slice(&self.dst_gen.to_be_bytes());
        b[12..16].copy_from_slice(&self.msg_id.to_be_bytes());
        b[16..20].copy_from_slice(&self.module.to_be_bytes());
        b[20..24].copy_from_slice(&self.generation.to_be_bytes());
        b[24..32].copy_from_slice(&self.group.to_be_bytes());
        b[32..36].copy_from_slice(&self.root.to_be_bytes());
        b[36..40].copy_from_slice(&self.src_rank.to_be_bytes());
    }

    /// Whether a module on the way failed.
    pub fn failed(&self) -> bool {
        self.flags & NICVM_FLAG_FAILED != 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{emit_prefix, seal, Body, BodyRepr, Header, JobSecret, Kind, MacKey, Packet, Seq, HEADER_LEN, SECRET_LEN};
    use proptest::prelude::*;

    pub(crate) fn arb_header() -> impl Strategy<Value = NicvmHeader> {
        (any::<(u8, u8, bool, bool, u32, u32, u32)>(), any::<(u32, u32, u64, u32, u32)>()).prop_map(
            |((src_port, dst_port, nic, failed, src_gen, dst_gen, msg_id), (module, generation, group, root, src_rank))| NicvmHeader {
                src_port,
                dst_port,
                ptype: if nic { NicvmType::NicData } else { NicvmType::HostData },
                flags: if failed { NICVM_FLAG_FAILED } else { 0 },
                src_gen,
                dst_gen,
                msg_id,
                module,
                generation,
                group,
                root,
                src_rank,
            },
        )
    }

    fn key() -> MacKey {
        MacKey::new(&JobSecret::from_bytes([3; SECRET_LEN]), 9)
    }

    fn packet(h: NicvmHeader, payload: &[u8]) -> Vec<u8> {
        let hdr = Header { kind: Kind::Nicvm, flags: 0, src_node: 1, dst_node: 2, boot: 5, seq: Seq(1), ack: Seq(0), horizon: Seq(2) };
        let mut buf = vec![0u8; HEADER_LEN + NICVM_FIXED_LEN + payload.len()];
        let off = emit_prefix(&hdr, &BodyRepr::Nicvm(h), payload.len(), &mut buf).unwrap();
        buf[off..].copy_from_slice(payload);
        seal(&mut buf, &key());
        buf
    }

    #[test]
    fn unknown_type_and_flags_are_refused() {
        let mut b = [0u8; NICVM_FIXED_LEN];
        b[2] = 3;
        assert!(NicvmHeader::parse(&b).is_err());
        b[2] = 1;
        b[3] = 2;
        assert!(NicvmHeader::parse(&b).is_err());
        b[3] = 1;
        assert!(NicvmHeader::parse(&b).unwrap().0.failed());
        assert!(NicvmHeader::parse(&b[..NICVM_FIXED_LEN - 1]).is_err());
    }

    proptest! {
        #[test]
        fn header_and_payload_survive_a_packet(h in arb_header(), payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let bytes = packet(h, &payload);
            let p = Packet::parse(&bytes, &key()).unwrap();
            prop_assert_eq!(p.body, Body::Nicvm(h, &payload));
        }

        #[test]
        fn any_body_bytes_parse_canonically_or_fail(bytes in proptest::collection::vec(any::<u8>(), 36..80)) {
            if let Ok((h, payload)) = NicvmHeader::parse(&bytes) {
                let mut again = vec![0u8; NICVM_FIXED_LEN];
                h.emit(&mut again);
                again.extend_from_slice(payload);
                prop_assert_eq!(again, bytes);
            }
        }
    }
}
