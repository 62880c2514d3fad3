//! Outboard's packet formats.
//!
//! Every datagram between two offload engines is one [`Packet`]: a fixed
//! [`Header`] (version, source and destination node, the sender's engine
//! incarnation, the reliable-connection sequence, acknowledgement and
//! horizon numbers, a MAC tag) followed by one [`Body`] whose layout depends
//! on the packet [`Kind`]. The tag authenticates header and body under the
//! job's [`MacKey`] (module `mac`).
//!
//! The contract follows smoltcp: [`Packet::parse`] is the only way to read
//! untrusted bytes; it checks every length, the magic, the version and the
//! MAC before any field is touched, so no accessor can panic afterwards
//! and malformed input becomes a [`WireError`] value. Emitting is split in two
//! ([`emit_prefix`] then [`seal`]) so that an engine can write a payload
//! straight from host memory into the transmit buffer without an intermediate
//! copy or allocation.
//!
//! All integers are big-endian (network order).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod atomic;
mod body;
mod coll_failure;
mod error;
mod header;
mod mac;
mod nic_coll;
mod nicvm;
mod seq;

pub use atomic::{AtomicFault, AtomicOp, AtomicReply, AtomicRequest, AtomicWidth, ATOMIC_REPLY_LEN, ATOMIC_REQUEST_LEN};
pub use body::{Abort, AbortWhat, Body, BodyRepr, CollHeader, CollResume, COLL_FIXED_LEN, COLL_ROUND_FAILED, DATA_FIXED_LEN, READ_RESPONSE_FIXED_LEN, DataHeader, PeerFailed, PortClosed, ReadRequest, ReadResponseHeader, Reject, RejectReason, Target};
pub use coll_failure::{CollFailure, COLL_FAILURE_LEN};
pub use error::WireError;
pub use header::{Header, Kind, FLAG_INTERRUPT, HEADER_LEN, MAGIC, VERSION};
pub use nic_coll::{NicCollHeader, NicCollType, NIC_COLL_LEN};
pub use nicvm::{NicvmHeader, NicvmType, NICVM_FIXED_LEN, NICVM_FLAG_FAILED};
pub use mac::{JobSecret, MacKey, SecretError, SECRET_LEN, TAG_LEN};
pub use seq::Seq;

/// A parsed packet: header plus body, borrowing the payload from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The fixed header.
    pub header: Header,
    /// The kind-specific body.
    pub body: Body<'a>,
}

impl<'a> Packet<'a> {
    /// Parses and validates untrusted bytes.
    ///
    /// Checks, in order: minimum length, magic, version, declared payload
    /// length against the buffer, the tag under `key`, the kind, and the
    /// body layout of that kind. Trailing bytes beyond the declared length
    /// are rejected too, so one datagram is exactly one packet.
    pub fn parse(bytes: &'a [u8], key: &MacKey) -> Result<Packet<'a>, WireError> {
        let (header, rest) = Header::parse(bytes, key)?;
        let body = Body::parse(header.kind, rest)?;
        Ok(Packet { header, body })
    }

    /// Total encoded length of this packet.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body.repr().fixed_len() + self.body.payload().len()
    }

    /// Encodes the packet (header, body, payload, tag under `key`) into
    /// `buf` and returns the number of bytes written.
    pub fn emit(&self, key: &MacKey, buf: &mut [u8]) -> Result<usize, WireError> {
        let payload = self.body.payload();
        let off = emit_prefix(&self.header, &self.body.repr(), payload.len(), buf)?;
        buf[off..off + payload.len()].copy_from_slice(payload);
        let len = off + payload.len();
        seal(&mut buf[..len], key);
        Ok(len)
    }
}

/// Writes the header and the fixed part of the body into `buf`, for a payload
/// of `payload_len` bytes that the caller fills in afterwards at the returned
/// offset. Call [`seal`] on the whole packet once the payload is in place.
///
/// Fails when `buf` is too short or the body plus payload exceeds the 16-bit
/// length field.
pub fn emit_prefix(
    header: &Header,
    body: &BodyRepr,
    payload_len: usize,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    let body_len = body.fixed_len() + payload_len;
    let body_len16 = u16::try_from(body_len).map_err(|_| WireError::PayloadTooLong { len: body_len })?;
    let total = HEADER_LEN + body_len;
    if buf.len() < total {
        return Err(WireError::BufferTooShort { need: total, have: buf.len() });
    }
    header.emit(body.kind(), body_len16, &mut buf[..HEADER_LEN]);
    body.emit(&mut buf[HEADER_LEN..HEADER_LEN + body.fixed_len()]);
    Ok(HEADER_LEN + body.fixed_len())
}

/// Computes the tag of a fully written packet under `key` and stores it in
/// the header. `packet` must be exactly the packet's bytes.
pub fn seal(packet: &mut [u8], key: &MacKey) {
    header::seal(packet, key)
}

#[cfg(test)]
mod tests;
