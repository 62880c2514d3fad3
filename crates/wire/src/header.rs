use crate::mac::MacKey;
use crate::{Seq, WireError};

/// Outboard's magic, "OB".
pub const MAGIC: u16 = 0x4F42;
/// The protocol version this build speaks. Version 2 replaced the job key
/// and CRC-32 of version 1 with a MAC and widened the incarnation.
pub const VERSION: u8 = 2;
/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 44;
/// Header flag of a message fragment whose message needs its receiving
/// host's action (dissertation 6.2.3's packet type that alone generates a
/// signal): the receiving engine raises an interrupt to the destination
/// port once the message is delivered, if that port's interrupt flag is
/// enabled. Receivers that do not know it ignore it.
pub const FLAG_INTERRUPT: u16 = 1;

mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..2;
    pub const VERSION: usize = 2;
    pub const KIND: usize = 3;
    pub const FLAGS: Range<usize> = 4..6;
    pub const BODY_LEN: Range<usize> = 6..8;
    pub const SRC_NODE: Range<usize> = 8..12;
    pub const DST_NODE: Range<usize> = 12..16;
    pub const BOOT: Range<usize> = 16..24;
    pub const SEQ: Range<usize> = 24..28;
    pub const ACK: Range<usize> = 28..32;
    pub const HORIZON: Range<usize> = 32..36;
    pub const TAG: Range<usize> = 36..44;
}

/// Packet kinds. A kind fixes the body layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A standalone acknowledgement; carries no sequence number.
    Ack = 1,
    /// A reliable placeholder: occupies a sequence number whose original
    /// content was cancelled, so the stream stays gap-free.
    Nop = 2,
    /// A fragment of a tagged message or of an RDMA write.
    Data = 3,
    /// The receiving port refused a message (closed, stale, no buffer, access
    /// violation); carried reliably back to the sender.
    Reject = 4,
    /// A request to read a remote registered region.
    ReadRequest = 5,
    /// A fragment of the data an RDMA read returns.
    ReadResponse = 6,
    /// The sender gave up a message or read response part-way (its port
    /// closed, or the message was rejected and is being retried): the
    /// receiver drops what it holds of it.
    Abort = 7,
    /// A collective-operation packet between two engines: a barrier
    /// notification, a reduction contribution or broadcast data, addressed
    /// by (group, epoch, source rank, round).
    Coll = 8,
    /// A failure notice: the sender declared a third node dead by its own
    /// timeout and tells the peers it still reaches, so the whole job learns
    /// of one death instead of each rank timing out on its own (and naming
    /// whichever rank it noticed first). Carried reliably; never relayed.
    PeerFailed = 9,
    /// A request for an atomic read-modify-write on a word of a remote
    /// registered region (dissertation chapter 5).
    AtomicRequest = 10,
    /// The outcome of an atomic request: the word's old value or a fault.
    AtomicReply = 11,
    /// A packet for a NICVM module loaded on the receiving engine (or, with
    /// its host-data type, for the receiving host), naming module,
    /// generation and group (module `nicvm`).
    Nicvm = 12,
    /// A packet of the NIC collective protocol (module `nic_coll`): a
    /// barrier notification or a request to resend one, outside the
    /// point-to-point connection - no sequence number, no acknowledgement;
    /// the collective recovers its own losses.
    NicColl = 13,
    /// A port-closure notice: the sender's port (slot and incarnation) was
    /// closed. Sent reliably on the connection after everything that port
    /// sent, so a receiver that takes it has every message the port sent;
    /// receives there naming that port then fail instead of waiting forever.
    /// An engine that does not know this kind drops the datagram as
    /// malformed (see the engine's `port_closed` module).
    PortClosed = 14,
    /// The sender's early-packet pool has room again for collective
    /// packets it refused ([`crate::CollResume`]): relaunch them now, up to
    /// the room given, instead of when their retry timer fires. Sent
    /// reliably on the connection.
    CollResume = 15,
}

impl Kind {
    pub(crate) fn from_u8(v: u8) -> Result<Kind, WireError> {
        Ok(match v {
            1 => Kind::Ack,
            2 => Kind::Nop,
            3 => Kind::Data,
            4 => Kind::Reject,
            5 => Kind::ReadRequest,
            6 => Kind::ReadResponse,
            7 => Kind::Abort,
            8 => Kind::Coll,
            9 => Kind::PeerFailed,
            10 => Kind::AtomicRequest,
            11 => Kind::AtomicReply,
            12 => Kind::Nicvm,
            13 => Kind::NicColl,
            14 => Kind::PortClosed,
            15 => Kind::CollResume,
            found => return Err(WireError::UnknownKind { found }),
        })
    }

    /// Whether packets of this kind occupy a sequence number on the reliable
    /// connection (everything but a standalone acknowledgement and the
    /// collective protocol's packets).
    pub fn is_sequenced(self) -> bool {
        !matches!(self, Kind::Ack | Kind::NicColl)
    }

    /// A short name, for errors and traces.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ack => "ack",
            Kind::Nop => "nop",
            Kind::Data => "data",
            Kind::Reject => "reject",
            Kind::ReadRequest => "read-request",
            Kind::ReadResponse => "read-response",
            Kind::Abort => "abort",
            Kind::Coll => "coll",
            Kind::PeerFailed => "peer-failed",
            Kind::AtomicRequest => "atomic-request",
            Kind::AtomicReply => "atomic-reply",
            Kind::Nicvm => "nicvm",
            Kind::NicColl => "nic-coll",
            Kind::PortClosed => "port-closed",
            Kind::CollResume => "coll-resume",
        }
    }
}

/// The fixed header every packet starts with.
///
/// `seq`, `ack` and `horizon` belong to the reliable connection between the
/// two engines: `seq` numbers this packet (meaningless for [`Kind::Ack`]),
/// `ack` says every packet before it was received in order, and `horizon` is
/// the sender's next unassigned sequence number, which tells the receiver
/// whether reliable packets it has not seen yet were already queued when this
/// acknowledgement was written (see the engine's connection module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Packet kind; set from the body when emitting.
    pub kind: Kind,
    /// Flags ([`FLAG_INTERRUPT`]); receivers ignore unknown ones.
    pub flags: u16,
    /// Sending node.
    pub src_node: u32,
    /// Receiving node.
    pub dst_node: u32,
    /// The sending engine's incarnation, so a restarted engine's connection
    /// state is never confused with its predecessor's. It only grows from
    /// one start of an engine to the next (start time above, randomness
    /// below): a receiver takes a larger one for a restart and drops a
    /// smaller one as a replay.
    pub boot: u64,
    /// This packet's sequence number on the connection.
    pub seq: Seq,
    /// Cumulative acknowledgement: the next sequence number expected.
    pub ack: Seq,
    /// The sender's next unassigned sequence number.
    pub horizon: Seq,
}

impl Header {
    pub(crate) fn parse<'a>(bytes: &'a [u8], key: &MacKey) -> Result<(Header, &'a [u8]), WireError> {
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated { len: bytes.len(), need: HEADER_LEN });
        }
        let magic = u16::from_be_bytes([bytes[0], bytes[1]]);
        if magic != MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        if bytes[field::VERSION] != VERSION {
            return Err(WireError::BadVersion { found: bytes[field::VERSION] });
        }
        let declared = usize::from(be16(bytes, field::BODY_LEN));
        let actual = bytes.len() - HEADER_LEN;
        if declared != actual {
            return Err(WireError::LengthMismatch { declared, actual });
        }
        if !key.verify(bytes, field::TAG) {
            return Err(WireError::BadMac);
        }
        let kind = Kind::from_u8(bytes[field::KIND])?;
        let header = Header {
            kind,
            flags: be16(bytes, field::FLAGS),
            src_node: be32(bytes, field::SRC_NODE),
            dst_node: be32(bytes, field::DST_NODE),
            boot: be64(bytes, field::BOOT),
            seq: Seq(be32(bytes, field::SEQ)),
            ack: Seq(be32(bytes, field::ACK)),
            horizon: Seq(be32(bytes, field::HORIZON)),
        };
        Ok((header, &bytes[HEADER_LEN..]))
    }

    /// Writes the header (tag left zero) into exactly `HEADER_LEN` bytes.
    pub(crate) fn emit(&self, kind: Kind, body_len: u16, out: &mut [u8]) {
        out[field::MAGIC].copy_from_slice(&MAGIC.to_be_bytes());
        out[field::VERSION] = VERSION;
        out[field::KIND] = kind as u8;
        out[field::FLAGS].copy_from_slice(&self.flags.to_be_bytes());
        out[field::BODY_LEN].copy_from_slice(&body_len.to_be_bytes());
        out[field::SRC_NODE].copy_from_slice(&self.src_node.to_be_bytes());
        out[field::DST_NODE].copy_from_slice(&self.dst_node.to_be_bytes());
        out[field::BOOT].copy_from_slice(&self.boot.to_be_bytes());
        out[field::SEQ].copy_from_slice(&self.seq.0.to_be_bytes());
        out[field::ACK].copy_from_slice(&self.ack.0.to_be_bytes());
        out[field::HORIZON].copy_from_slice(&self.horizon.0.to_be_bytes());
        out[field::TAG].copy_from_slice(&[0; 8]);
    }
}

pub(crate) fn seal(packet: &mut [u8], key: &MacKey) {
    debug_assert!(packet.len() >= HEADER_LEN);
    let tag = key.tag(packet, field::TAG);
    packet[field::TAG].copy_from_slice(&tag);
}

pub(crate) fn be16(b: &[u8], r: core::ops::Range<usize>) -> u16 {
    let mut a = [0; 2];
    a.copy_from_slice(&b[r]);
    u16::from_be_bytes(a)
}

pub(crate) fn be32(b: &[u8], r: core::ops::Range<usize>) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}

pub(crate) fn be64(b: &[u8], r: core::ops::Range<usize>) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}
