//! Bodies of the atomic remote memory operations (dissertation chapter 5):
//! [`AtomicRequest`] asks the target engine to perform one read-modify-write
//! on an aligned word of a registered region, [`AtomicReply`] returns the
//! word's old value (or why nothing was done).
//!
//! Both are fixed-length. Parsing checks the exact length before any field
//! is read, and rejects every encoding that [`AtomicRequest`] /
//! [`AtomicReply`] could not have produced (unknown operation or width,
//! operands wider than the word, a compare value on an operation that has
//! none, a value on a failure), so one value has one encoding.

use crate::header::{be32, be64};
use crate::WireError;

/// Width of the word an atomic operation works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicWidth {
    /// A 32-bit word (the paper's operations), 4-byte aligned.
    W32 = 4,
    /// A 64-bit word (today's verbs, MPI-3 and OpenSHMEM), 8-byte aligned.
    W64 = 8,
}

impl AtomicWidth {
    /// The word's size in bytes, which is also its required alignment.
    pub fn bytes(self) -> u64 {
        self as u64
    }

    /// The largest value the word holds.
    pub fn mask(self) -> u64 {
        match self {
            AtomicWidth::W32 => u64::from(u32::MAX),
            AtomicWidth::W64 => u64::MAX,
        }
    }
}

/// The operation and its operands (dissertation Table 5.1). Every form
/// returns the word's value before the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// fetch&add: the word becomes `old + add` (wrapping).
    FetchAdd(u64),
    /// fetch&write (swap): the word becomes the operand.
    Swap(u64),
    /// compare&swap: the word becomes `new` if it equals `compare`.
    CompareSwap {
        /// The value the word must hold for the swap to happen.
        compare: u64,
        /// The value written when it does.
        new: u64,
    },
}

impl AtomicOp {
    /// The operands, `(data, compare)`; `compare` is zero for the operations
    /// that have none.
    pub fn operands(self) -> (u64, u64) {
        match self {
            AtomicOp::FetchAdd(v) | AtomicOp::Swap(v) => (v, 0),
            AtomicOp::CompareSwap { compare, new } => (new, compare),
        }
    }

    /// Whether both operands fit a word of `width`.
    pub fn fits(self, width: AtomicWidth) -> bool {
        let (a, b) = self.operands();
        a <= width.mask() && b <= width.mask()
    }

    /// The same operation with its operands cut to `width`'s low bits.
    pub fn truncated(self, width: AtomicWidth) -> AtomicOp {
        let m = width.mask();
        match self {
            AtomicOp::FetchAdd(v) => AtomicOp::FetchAdd(v & m),
            AtomicOp::Swap(v) => AtomicOp::Swap(v & m),
            AtomicOp::CompareSwap { compare, new } => AtomicOp::CompareSwap { compare: compare & m, new: new & m },
        }
    }

    /// The word's new value given its old one (dissertation Table 5.1),
    /// cut to `width`.
    pub fn apply(self, width: AtomicWidth, old: u64) -> u64 {
        let new = match self {
            AtomicOp::FetchAdd(v) => old.wrapping_add(v),
            AtomicOp::Swap(v) => v,
            AtomicOp::CompareSwap { compare, new } => {
                if (old & width.mask()) == (compare & width.mask()) {
                    new
                } else {
                    old
                }
            }
        };
        new & width.mask()
    }

    fn code(self) -> u8 {
        match self {
            AtomicOp::FetchAdd(_) => OP_FETCH_ADD,
            AtomicOp::Swap(_) => OP_SWAP,
            AtomicOp::CompareSwap { .. } => OP_COMPARE_SWAP,
        }
    }
}

/// Body of a [`crate::Kind::AtomicRequest`]: perform `op` on the `width`
/// word at `offset` of region `key` on the destination port.
///
/// `seq` numbers the requests from the sending engine to this destination
/// engine (all its ports): the target keeps the reply to each in a table
/// keyed by (sender, `seq`), so a request that arrives twice is answered
/// from the table and never executed twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicRequest {
    /// Requesting port.
    pub src_port: u8,
    /// Port owning the region.
    pub dst_port: u8,
    /// Incarnation of the requesting port.
    pub src_gen: u32,
    /// Incarnation of the owning port.
    pub dst_gen: u32,
    /// The request's number from this sender to this engine.
    pub seq: u32,
    /// Region key.
    pub key: u64,
    /// Byte offset of the word inside the region.
    pub offset: u64,
    /// Word width.
    pub width: AtomicWidth,
    /// Operation and operands (they fit `width`).
    pub op: AtomicOp,
}

/// Why a target engine did not perform an atomic request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AtomicFault {
    /// The port is not open yet: the requester retries.
    NotReady = 1,
    /// The port incarnation addressed is gone.
    Stale = 2,
    /// The region key is unknown or not the port's.
    BadKey = 3,
    /// The word does not lie inside the region.
    OutOfBounds = 4,
    /// The port slot does not exist.
    NoSuchPort = 5,
    /// The word's address is not a multiple of its width.
    Misaligned = 6,
    /// The target's host memory could not be accessed.
    DmaFault = 7,
}

impl AtomicFault {
    fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => Self::NotReady,
            2 => Self::Stale,
            3 => Self::BadKey,
            4 => Self::OutOfBounds,
            5 => Self::NoSuchPort,
            6 => Self::Misaligned,
            7 => Self::DmaFault,
            _ => return Err(malformed(REPLY, "unknown status")),
        })
    }
}

/// Body of a [`crate::Kind::AtomicReply`]: the outcome of request `seq`,
/// for the requesting port. It is also the request's completion: the
/// requester needs nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicReply {
    /// The requesting port.
    pub dst_port: u8,
    /// Its incarnation.
    pub dst_gen: u32,
    /// The request's number.
    pub seq: u32,
    /// The word's old value, or why the operation was not performed.
    pub result: Result<u64, AtomicFault>,
}

/// Bytes of a [`crate::Kind::AtomicRequest`] body.
pub const ATOMIC_REQUEST_LEN: usize = 48;
/// Bytes of a [`crate::Kind::AtomicReply`] body.
pub const ATOMIC_REPLY_LEN: usize = 24;

const REQUEST: &str = "atomic-request";
const REPLY: &str = "atomic-reply";
const OP_FETCH_ADD: u8 = 1;
const OP_SWAP: u8 = 2;
const OP_COMPARE_SWAP: u8 = 3;
const STATUS_OK: u8 = 0;

fn malformed(kind: &'static str, why: &'static str) -> WireError {
    WireError::MalformedBody { kind, why }
}

impl AtomicRequest {
    pub(crate) fn parse(b: &[u8]) -> Result<Self, WireError> {
        if b.len() != ATOMIC_REQUEST_LEN {
            return Err(malformed(REQUEST, "wrong length"));
        }
        let width = match b[3] {
            4 => AtomicWidth::W32,
            8 => AtomicWidth::W64,
            _ => return Err(malformed(REQUEST, "unknown width")),
        };
        let (data, compare) = (be64(b, 32..40), be64(b, 40..48));
        let op = match b[2] {
            OP_FETCH_ADD => AtomicOp::FetchAdd(data),
            OP_SWAP => AtomicOp::Swap(data),
            OP_COMPARE_SWAP => AtomicOp::CompareSwap { compare, new: data },
            _ => return Err(malformed(REQUEST, "unknown operation")),
        };
        if op.code() != OP_COMPARE_SWAP && compare != 0 {
            return Err(malformed(REQUEST, "compare value on an operation without one"));
        }
        if !op.fits(width) {
            return Err(malformed(REQUEST, "operand wider than the word"));
        }
        Ok(AtomicRequest {
            src_port: b[0],
            dst_port: b[1],
            src_gen: be32(b, 4..8),
            dst_gen: be32(b, 8..12),
            seq: be32(b, 12..16),
            key: be64(b, 16..24),
            offset: be64(b, 24..32),
            width,
            op,
        })
    }

    pub(crate) fn emit(&self, b: &mut [u8]) {
        let (data, compare) = self.op.operands();
        b[0] = self.src_port;
        b[1] = self.dst_port;
        b[2] = self.op.code();
        b[3] = self.width as u8;
        b[4..8].copy_from_slice(&self.src_gen.to_be_bytes());
        b[8..12].copy_from_slice(&self.dst_gen.to_be_bytes());
        b[12..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.key.to_be_bytes());
        b[24..32].copy_from_slice(&self.offset.to_be_bytes());
        b[32..40].copy_from_slice(&data.to_be_bytes());
        b[40..48].copy_from_slice(&compare.to_be_bytes());
    }
}

impl AtomicReply {
    pub(crate) fn parse(b: &[u8]) -> Result<Self, WireError> {
        if b.len() != ATOMIC_REPLY_LEN {
            return Err(malformed(REPLY, "wrong length"));
        }
        let value = be64(b, 16..24);
        let result = match b[1] {
            STATUS_OK => Ok(value),
            s => {
                let fault = AtomicFault::from_u8(s)?;
                if value != 0 {
                    return Err(malformed(REPLY, "value on a failed operation"));
                }
                Err(fault)
            }
        };
        Ok(AtomicReply { dst_port: b[0], dst_gen: be32(b, 4..8), seq: be32(b, 8..12), result })
    }

    pub(crate) fn emit(&self, b: &mut [u8]) {
        let (status, value) = match self.result {
            Ok(v) => (STATUS_OK, v),
            Err(f) => (f as u8, 0),
        };
        b[0] = self.dst_port;
        b[1] = status;
        b[2..4].copy_from_slice(&[0; 2]);
        b[4..8].copy_from_slice(&self.dst_gen.to_be_bytes());
        b[8..12].copy_from_slice(&self.seq.to_be_bytes());
        b[12..16].copy_from_slice(&[0; 4]);
        b[16..24].copy_from_slice(&value.to_be_bytes());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{emit_prefix, seal, Body, BodyRepr, Header, Kind, Packet, Seq, HEADER_LEN};
    use proptest::prelude::*;

    fn arb_width() -> impl Strategy<Value = AtomicWidth> {
        prop_oneof![Just(AtomicWidth::W32), Just(AtomicWidth::W64)]
    }

    /// Any valid request (operands cut to the width).
    pub(crate) fn arb_request() -> impl Strategy<Value = AtomicRequest> {
        let op = prop_oneof![
            any::<u64>().prop_map(AtomicOp::FetchAdd),
            any::<u64>().prop_map(AtomicOp::Swap),
            any::<(u64, u64)>().prop_map(|(compare, new)| AtomicOp::CompareSwap { compare, new }),
        ];
        (any::<(u8, u8, u32, u32, u32, u64, u64)>(), arb_width(), op).prop_map(
            |((src_port, dst_port, src_gen, dst_gen, seq, key, offset), width, op)| AtomicRequest {
                src_port,
                dst_port,
                src_gen,
                dst_gen,
                seq,
                key,
                offset,
                width,
                op: op.truncated(width),
            },
        )
    }

    pub(crate) fn arb_reply() -> impl Strategy<Value = AtomicReply> {
        let fault = prop_oneof![
            Just(AtomicFault::NotReady),
            Just(AtomicFault::Stale),
            Just(AtomicFault::BadKey),
            Just(AtomicFault::OutOfBounds),
            Just(AtomicFault::NoSuchPort),
            Just(AtomicFault::Misaligned),
            Just(AtomicFault::DmaFault),
        ];
        (any::<(u8, u32, u32)>(), prop_oneof![any::<u64>().prop_map(Ok), fault.prop_map(Err)])
            .prop_map(|((dst_port, dst_gen, seq), result)| AtomicReply { dst_port, dst_gen, seq, result })
    }

    fn header(kind: Kind) -> Header {
        Header { kind, flags: 0, src_node: 1, dst_node: 2, boot: 3, seq: Seq(4), ack: Seq(5), horizon: Seq(6) }
    }

    fn key() -> crate::MacKey {
        crate::MacKey::new(&crate::JobSecret::from_bytes([7; 16]), 7)
    }

    /// A sealed packet of `kind` whose body is `body` verbatim (so a body
    /// only the parser can judge reaches it past the MAC).
    fn raw_packet(kind: Kind, body: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; HEADER_LEN + body.len()];
        let off = emit_prefix(&header(kind), &BodyRepr::Nop, body.len(), &mut buf).unwrap();
        buf[3] = kind as u8;
        buf[off..].copy_from_slice(body);
        seal(&mut buf, &key());
        buf
    }

    fn body_bytes(repr: BodyRepr) -> Vec<u8> {
        let mut b = vec![0u8; repr.fixed_len()];
        repr.emit(&mut b);
        b
    }

    fn request() -> AtomicRequest {
        AtomicRequest {
            src_port: 1,
            dst_port: 2,
            src_gen: 3,
            dst_gen: 4,
            seq: 5,
            key: 6,
            offset: 8,
            width: AtomicWidth::W32,
            op: AtomicOp::CompareSwap { compare: 9, new: 10 },
        }
    }

    fn parse_err(kind: Kind, body: &[u8]) -> WireError {
        Packet::parse(&raw_packet(kind, body), &key()).expect_err("must be refused")
    }

    #[test]
    fn table_5_1_semantics() {
        let w = AtomicWidth::W64;
        assert_eq!(AtomicOp::FetchAdd(5).apply(w, 10), 15);
        assert_eq!(AtomicOp::FetchAdd(1).apply(w, u64::MAX), 0);
        assert_eq!(AtomicOp::FetchAdd(1).apply(AtomicWidth::W32, u64::from(u32::MAX)), 0);
        assert_eq!(AtomicOp::Swap(7).apply(w, 10), 7);
        assert_eq!(AtomicOp::CompareSwap { compare: 10, new: 3 }.apply(w, 10), 3);
        assert_eq!(AtomicOp::CompareSwap { compare: 11, new: 3 }.apply(w, 10), 10);
    }

    #[test]
    fn valid_bodies_parse() {
        let r = request();
        let bytes = raw_packet(Kind::AtomicRequest, &body_bytes(BodyRepr::AtomicRequest(r)));
        let p = Packet::parse(&bytes, &key()).unwrap();
        assert_eq!(p.body, Body::AtomicRequest(r));
        let a = AtomicReply { dst_port: 1, dst_gen: 2, seq: 3, result: Err(AtomicFault::Misaligned) };
        let bytes = raw_packet(Kind::AtomicReply, &body_bytes(BodyRepr::AtomicReply(a)));
        let p = Packet::parse(&bytes, &key()).unwrap();
        assert_eq!(p.body, Body::AtomicReply(a));
    }

    #[test]
    fn every_wrong_length_is_refused() {
        let good = body_bytes(BodyRepr::AtomicRequest(request()));
        for len in (0..good.len()).chain([good.len() + 1, good.len() + 8]) {
            let mut b = good.clone();
            b.resize(len, 0);
            assert!(matches!(parse_err(Kind::AtomicRequest, &b), WireError::MalformedBody { why: "wrong length", .. }), "{len}");
        }
        let good = body_bytes(BodyRepr::AtomicReply(AtomicReply { dst_port: 0, dst_gen: 1, seq: 2, result: Ok(3) }));
        for len in (0..good.len()).chain([good.len() + 1]) {
            let mut b = good.clone();
            b.resize(len, 0);
            assert!(matches!(parse_err(Kind::AtomicReply, &b), WireError::MalformedBody { why: "wrong length", .. }), "{len}");
        }
    }

    #[test]
    fn inconsistent_requests_are_refused() {
        let good = body_bytes(BodyRepr::AtomicRequest(request()));
        let why = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            match parse_err(Kind::AtomicRequest, &b) {
                WireError::MalformedBody { kind: "atomic-request", why } => why,
                e => panic!("{e:?}"),
            }
        };
        assert_eq!(why(&|b| b[2] = 0), "unknown operation");
        assert_eq!(why(&|b| b[2] = 4), "unknown operation");
        assert_eq!(why(&|b| b[3] = 2), "unknown width");
        assert_eq!(why(&|b| b[3] = 16), "unknown width");
        // A 33-bit operand on a 32-bit word.
        assert_eq!(why(&|b| b[35] = 1), "operand wider than the word");
        assert_eq!(why(&|b| b[43] = 1), "operand wider than the word");
        // fetch&add with a compare value.
        assert_eq!(
            why(&|b| {
                b[2] = OP_FETCH_ADD;
            }),
            "compare value on an operation without one"
        );
    }

    #[test]
    fn inconsistent_replies_are_refused() {
        let good = body_bytes(BodyRepr::AtomicReply(AtomicReply { dst_port: 0, dst_gen: 1, seq: 2, result: Err(AtomicFault::BadKey) }));
        let mut b = good.clone();
        b[1] = 8;
        assert!(matches!(parse_err(Kind::AtomicReply, &b), WireError::MalformedBody { why: "unknown status", .. }));
        let mut b = good.clone();
        b[23] = 1;
        assert!(matches!(parse_err(Kind::AtomicReply, &b), WireError::MalformedBody { why: "value on a failed operation", .. }));
    }

    proptest! {
        #[test]
        fn request_fields_survive_encoding(r in arb_request()) {
            let b = body_bytes(BodyRepr::AtomicRequest(r));
            prop_assert_eq!(AtomicRequest::parse(&b), Ok(r));
        }

        #[test]
        fn any_request_body_bytes_either_parse_canonically_or_fail(bytes in proptest::collection::vec(any::<u8>(), 44..52)) {
            if let Ok(r) = AtomicRequest::parse(&bytes) {
                // One value, one encoding: what parsed re-encodes to the
                // same bytes, padding included (there is none).
                prop_assert_eq!(body_bytes(BodyRepr::AtomicRequest(r)), bytes);
            }
        }

        #[test]
        fn any_reply_body_bytes_parse_to_a_value_that_round_trips(bytes in proptest::collection::vec(any::<u8>(), 20..28)) {
            if let Ok(r) = AtomicReply::parse(&bytes) {
                prop_assert_eq!(AtomicReply::parse(&body_bytes(BodyRepr::AtomicReply(r))), Ok(r));
            }
        }
    }
}
