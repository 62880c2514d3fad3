use thiserror::Error;

/// Why a byte string is not a valid Outboard packet, or cannot be encoded.
///
/// Every variant is a normal outcome on untrusted input: the engine counts it
/// and drops the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the fixed header.
    #[error("packet truncated: {len} bytes, header needs {need}")]
    Truncated {
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The first two bytes are not Outboard's magic.
    #[error("bad magic {found:#06x}")]
    BadMagic {
        /// The value found.
        found: u16,
    },
    /// A protocol version this build does not speak.
    #[error("unsupported version {found}")]
    BadVersion {
        /// The value found.
        found: u8,
    },
    /// The header's payload length disagrees with the datagram's length.
    #[error("length mismatch: header says {declared} body bytes, datagram has {actual}")]
    LengthMismatch {
        /// Body length the header declares.
        declared: usize,
        /// Body length actually present.
        actual: usize,
    },
    /// The tag does not authenticate the contents under this job's key:
    /// forged, corrupted, or another job's (or an earlier run's) datagram.
    #[error("packet not authenticated: its tag does not match")]
    BadMac,
    /// An unknown packet kind.
    #[error("unknown packet kind {found}")]
    UnknownKind {
        /// The value found.
        found: u8,
    },
    /// The body is shorter than its kind's fixed layout, or a field inside it
    /// is inconsistent (e.g. a fragment past the message's end).
    #[error("malformed {kind} body: {why}")]
    MalformedBody {
        /// The packet kind.
        kind: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// Encoding: the output buffer is too short.
    #[error("buffer too short: need {need}, have {have}")]
    BufferTooShort {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// Encoding: body and payload do not fit the 16-bit length field.
    #[error("payload too long: {len} bytes")]
    PayloadTooLong {
        /// The length asked for.
        len: usize,
    },
}
