use crate::header::{be32, be64};
use crate::atomic::{AtomicReply, AtomicRequest, ATOMIC_REPLY_LEN, ATOMIC_REQUEST_LEN};
use crate::nic_coll::{NicCollHeader, NIC_COLL_LEN};
use crate::nicvm::{NicvmHeader, NICVM_FIXED_LEN};
use crate::{Kind, WireError};

/// What a [`Kind::Data`] fragment is for at the receiving port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A tagged message, matched against the port's posted receives.
    Tagged {
        /// The message tag.
        tag: u64,
    },
    /// A directed send (RDMA write) into a registered region.
    Rdma {
        /// The region's key.
        key: u64,
        /// Byte offset inside the region where the message starts.
        offset: u64,
    },
    /// A tagged message that announces a larger one (a rendezvous
    /// ready-to-send): matched exactly like [`Target::Tagged`], in the same
    /// stream order, but reported to the receiving host as an announcement
    /// so its library can fetch the real payload by RDMA read instead of
    /// taking these bytes as the message.
    Announce {
        /// The message tag.
        tag: u64,
    },
    /// No content: the sender gave the message up (cancelled, or refused
    /// for too long) and this placeholder keeps its stream position, so the
    /// messages after it are not held back forever.
    Void,
}

/// The fixed part of a [`Kind::Data`] body: one fragment of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Sending port.
    pub src_port: u8,
    /// Receiving port.
    pub dst_port: u8,
    /// Incarnation of the sending port.
    pub src_gen: u32,
    /// Incarnation of the receiving port the message is addressed to; a
    /// message is never delivered to any other incarnation.
    pub dst_gen: u32,
    /// The sender's identifier for this message, echoed in a [`Reject`].
    pub msg_id: u32,
    /// Position of this message in the stream from the sending port to the
    /// receiving port incarnation; keeps messages in order across rejections
    /// and retries.
    pub stream_seq: u32,
    /// Length of the whole message.
    pub total_len: u32,
    /// Offset of this fragment inside the message.
    pub offset: u32,
    /// Tagged message or RDMA write.
    pub target: Target,
}

/// Why a receiving engine refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RejectReason {
    /// The port is closed but may open (a later incarnation is expected), the
    /// message came out of stream order, or no buffer is free: retry later.
    NotReady = 1,
    /// The message is addressed to an incarnation of the port that no longer
    /// exists: never retry.
    Stale = 2,
    /// The region key is unknown or does not belong to the port.
    BadKey = 3,
    /// The access falls outside the region.
    OutOfBounds = 4,
    /// The port does not exist on that engine.
    NoSuchPort = 5,
}

impl RejectReason {
    fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => Self::NotReady,
            2 => Self::Stale,
            3 => Self::BadKey,
            4 => Self::OutOfBounds,
            5 => Self::NoSuchPort,
            _ => return Err(WireError::MalformedBody { kind: "reject", why: "unknown reason" }),
        })
    }
}

/// Body of a [`Kind::Reject`]: the receiver refused message `msg_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reject {
    /// The port that sent the refused message (this reject's destination).
    pub port: u8,
    /// The incarnation of that port.
    pub gen: u32,
    /// The sender's message identifier.
    pub msg_id: u32,
    /// Why.
    pub reason: RejectReason,
}

/// Body of a [`Kind::ReadRequest`]: read `len` bytes at `offset` of region
/// `key` on the destination port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Requesting port.
    pub src_port: u8,
    /// Port owning the region.
    pub dst_port: u8,
    /// Incarnation of the requesting port.
    pub src_gen: u32,
    /// Incarnation of the owning port.
    pub dst_gen: u32,
    /// The requester's identifier, echoed in the response.
    pub msg_id: u32,
    /// Region key.
    pub key: u64,
    /// Offset inside the region.
    pub offset: u64,
    /// Bytes to read.
    pub len: u32,
}

/// The fixed part of a [`Kind::ReadResponse`] body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadResponseHeader {
    /// The requesting port.
    pub dst_port: u8,
    /// Its incarnation.
    pub dst_gen: u32,
    /// The requester's identifier.
    pub msg_id: u32,
    /// Length of the whole response.
    pub total_len: u32,
    /// Offset of this fragment.
    pub offset: u32,
}

/// What an [`Abort`] refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AbortWhat {
    /// A message (tagged or RDMA write) the abort's sender was sending;
    /// `msg_id` is the sender's.
    Message = 1,
    /// The response to a read; `msg_id` is the requester's.
    ReadResponse = 2,
}

/// Body of a [`Kind::Abort`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Abort {
    /// Message or read response.
    pub what: AbortWhat,
    /// The identifier, see [`AbortWhat`].
    pub msg_id: u32,
}

/// The fixed part of a [`Kind::Coll`] body: one packet of a collective
/// operation. The receiving engine files it under (group, epoch) at the
/// destination port incarnation, whether or not its host has started that
/// collective yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CollHeader {
    /// Sending port.
    pub src_port: u8,
    /// Receiving port.
    pub dst_port: u8,
    /// Incarnation of the sending port.
    pub src_gen: u32,
    /// Incarnation of the receiving port; never delivered to another.
    pub dst_gen: u32,
    /// The sender's identifier, echoed in a [`Reject`].
    pub msg_id: u32,
    /// The group (communicator) identifier, agreed by its members.
    pub group: u64,
    /// Which collective of the group: the members' count of collectives
    /// started on it before this one.
    pub epoch: u32,
    /// The ordinal of this packet among those the sender sends to this
    /// receiver in this collective: the receiver matches it to its own
    /// schedule by (source rank, round), whatever order packets arrive in.
    pub round: u16,
    /// The sender's rank in the group.
    pub src_rank: u32,
    /// Length of the whole contribution.
    pub total_len: u32,
    /// Offset of this packet's bytes in it.
    pub offset: u32,
    /// The sender's schedule for this collective (ids are agreed by the
    /// group's members, like the group id). A receiver whose host has not
    /// started the collective yet can still run it from this - forwarding
    /// a broadcast before, and independently of, its host.
    pub schedule: u16,
}

/// Body of a [`Kind::PeerFailed`]: the sender declared `node` dead by its
/// own timeout (ULFM's "process failure": a fact about the job, not about
/// one operation).
///
/// `boot` names the incarnation that died, when the sender had heard from it:
/// a receiver that knows `node` by another incarnation (it restarted) ignores
/// the notice, so a late notice never kills a live, restarted peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerFailed {
    /// The node declared dead.
    pub node: u32,
    /// Its engine incarnation as the sender knew it; `None` if the sender
    /// never heard from it.
    pub boot: Option<u64>,
}

/// Body of a [`Kind::PortClosed`]: the sender's port `port`, incarnation
/// `gen`, was closed (the node is the header's source). Eight bytes: the
/// port, three reserved zero bytes, the incarnation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortClosed {
    /// The closed port slot.
    pub port: u8,
    /// The incarnation of that slot that closed.
    pub gen: u32,
}

/// Body of a [`Kind::CollResume`]: the bytes of collective packets the
/// sender's pool can take now, which the receiver's refused packets to it
/// may use. Four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CollResume {
    /// Room in bytes (payload and bookkeeping).
    pub room: u32,
}

/// A parsed body, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// See [`Kind::Ack`].
    Ack,
    /// See [`Kind::Nop`].
    Nop,
    /// A message fragment and its bytes.
    Data(DataHeader, &'a [u8]),
    /// A refusal.
    Reject(Reject),
    /// An RDMA read request.
    ReadRequest(ReadRequest),
    /// A fragment of read data.
    ReadResponse(ReadResponseHeader, &'a [u8]),
    /// A message or read response given up.
    Abort(Abort),
    /// A collective packet and its bytes.
    Coll(CollHeader, &'a [u8]),
    /// A failure notice.
    PeerFailed(PeerFailed),
    /// An atomic operation request.
    AtomicRequest(AtomicRequest),
    /// An atomic operation's outcome.
    AtomicReply(AtomicReply),
    /// A NICVM module invocation and its packet.
    Nicvm(NicvmHeader, &'a [u8]),
    /// A collective-protocol notification or request.
    NicColl(NicCollHeader),
    /// A port-closure notice.
    PortClosed(PortClosed),
    /// Room again for refused collective packets.
    CollResume(CollResume),
}

/// The fixed part of a body, without payload: what the sender writes before
/// it copies the payload in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRepr {
    /// See [`Kind::Ack`].
    Ack,
    /// See [`Kind::Nop`].
    Nop,
    /// See [`Kind::Data`].
    Data(DataHeader),
    /// See [`Kind::Reject`].
    Reject(Reject),
    /// See [`Kind::ReadRequest`].
    ReadRequest(ReadRequest),
    /// See [`Kind::ReadResponse`].
    ReadResponse(ReadResponseHeader),
    /// See [`Kind::Abort`].
    Abort(Abort),
    /// See [`Kind::Coll`].
    Coll(CollHeader),
    /// See [`Kind::PeerFailed`].
    PeerFailed(PeerFailed),
    /// See [`Kind::AtomicRequest`].
    AtomicRequest(AtomicRequest),
    /// See [`Kind::AtomicReply`].
    AtomicReply(AtomicReply),
    /// See [`Kind::Nicvm`].
    Nicvm(NicvmHeader),
    /// See [`Kind::NicColl`].
    NicColl(NicCollHeader),
    /// See [`Kind::PortClosed`].
    PortClosed(PortClosed),
    /// See [`Kind::CollResume`].
    CollResume(CollResume),
}

const DATA_LEN: usize = DATA_FIXED_LEN;
const REJECT_LEN: usize = 12;
const READ_REQUEST_LEN: usize = 36;
const READ_RESPONSE_LEN: usize = READ_RESPONSE_FIXED_LEN;

/// Bytes of a [`Kind::Data`] body before its payload.
pub const DATA_FIXED_LEN: usize = 44;
/// Bytes of a [`Kind::ReadResponse`] body before its payload.
pub const READ_RESPONSE_FIXED_LEN: usize = 20;
const ABORT_LEN: usize = 8;
/// Bytes of a [`Kind::Coll`] body before its payload.
pub const COLL_FIXED_LEN: usize = 42;

/// Bit of [`CollHeader::round`]: the sender's collective failed (a
/// user-defined operator ran out of fuel or trapped, the members' calls
/// differ, or a member left or died), so this packet carries no value but
/// the cause ([`CollFailure`](crate::CollFailure)) and its receiver fails
/// its collective too, instead of waiting or using it. Rounds are below 2^15 (a schedule has
/// at most 4,096 steps), so the bit is free; the header's encoding is
/// unchanged and parsers pass the bit through (the engine reads the
/// payload's cause).
pub const COLL_ROUND_FAILED: u16 = 0x8000;
const PEER_FAILED_LEN: usize = 16;
const PORT_CLOSED_LEN: usize = 8;
const COLL_RESUME_LEN: usize = 4;
/// `PeerFailed` flag: the `boot` field is meaningful.
const PEER_FAILED_BOOT_KNOWN: u8 = 1;

const TARGET_TAGGED: u8 = 0;
const TARGET_RDMA: u8 = 1;
const TARGET_VOID: u8 = 2;
const TARGET_ANNOUNCE: u8 = 3;

impl<'a> Body<'a> {
    pub(crate) fn parse(kind: Kind, b: &'a [u8]) -> Result<Body<'a>, WireError> {
        let need = |n: usize| {
            if b.len() < n {
                Err(WireError::MalformedBody { kind: kind.name(), why: "shorter than its fixed layout" })
            } else {
                Ok(())
            }
        };
        let exact = |n: usize| {
            if b.len() != n {
                Err(WireError::MalformedBody { kind: kind.name(), why: "wrong length" })
            } else {
                Ok(())
            }
        };
        Ok(match kind {
            Kind::Ack => {
                exact(0)?;
                Body::Ack
            }
            Kind::Nop => {
                exact(0)?;
                Body::Nop
            }
            Kind::Data => {
                need(DATA_LEN)?;
                let target = match b[2] {
                    TARGET_TAGGED => Target::Tagged { tag: be64(b, 28..36) },
                    TARGET_RDMA => Target::Rdma { key: be64(b, 28..36), offset: be64(b, 36..44) },
                    TARGET_VOID => Target::Void,
                    TARGET_ANNOUNCE => Target::Announce { tag: be64(b, 28..36) },
                    _ => return Err(WireError::MalformedBody { kind: "data", why: "unknown target" }),
                };
                let h = DataHeader {
                    src_port: b[0],
                    dst_port: b[1],
                    src_gen: be32(b, 4..8),
                    dst_gen: be32(b, 8..12),
                    msg_id: be32(b, 12..16),
                    stream_seq: be32(b, 16..20),
                    total_len: be32(b, 20..24),
                    offset: be32(b, 24..28),
                    target,
                };
                let payload = &b[DATA_LEN..];
                check_fragment("data", h.offset, payload.len(), h.total_len)?;
                Body::Data(h, payload)
            }
            Kind::Reject => {
                exact(REJECT_LEN)?;
                Body::Reject(Reject {
                    port: b[0],
                    reason: RejectReason::from_u8(b[2])?,
                    msg_id: be32(b, 4..8),
                    gen: be32(b, 8..12),
                })
            }
            Kind::ReadRequest => {
                exact(READ_REQUEST_LEN)?;
                Body::ReadRequest(ReadRequest {
                    src_port: b[0],
                    dst_port: b[1],
                    src_gen: be32(b, 4..8),
                    dst_gen: be32(b, 8..12),
                    msg_id: be32(b, 12..16),
                    key: be64(b, 16..24),
                    offset: be64(b, 24..32),
                    len: be32(b, 32..36),
                })
            }
            Kind::ReadResponse => {
                need(READ_RESPONSE_LEN)?;
                let h = ReadResponseHeader {
                    dst_port: b[0],
                    dst_gen: be32(b, 4..8),
                    msg_id: be32(b, 8..12),
                    total_len: be32(b, 12..16),
                    offset: be32(b, 16..20),
                };
                let payload = &b[READ_RESPONSE_LEN..];
                check_fragment("read-response", h.offset, payload.len(), h.total_len)?;
                Body::ReadResponse(h, payload)
            }
            Kind::Abort => {
                exact(ABORT_LEN)?;
                let what = match b[0] {
                    1 => AbortWhat::Message,
                    2 => AbortWhat::ReadResponse,
                    _ => return Err(WireError::MalformedBody { kind: "abort", why: "unknown subject" }),
                };
                Body::Abort(Abort { what, msg_id: be32(b, 4..8) })
            }
            Kind::Coll => {
                need(COLL_FIXED_LEN)?;
                let h = CollHeader {
                    src_port: b[0],
                    dst_port: b[1],
                    round: u16::from_be_bytes([b[2], b[3]]),
                    src_gen: be32(b, 4..8),
                    dst_gen: be32(b, 8..12),
                    msg_id: be32(b, 12..16),
                    group: be64(b, 16..24),
                    epoch: be32(b, 24..28),
                    src_rank: be32(b, 28..32),
                    total_len: be32(b, 32..36),
                    offset: be32(b, 36..40),
                    schedule: u16::from_be_bytes([b[40], b[41]]),
                };
                let payload = &b[COLL_FIXED_LEN..];
                check_fragment("coll", h.offset, payload.len(), h.total_len)?;
                Body::Coll(h, payload)
            }
            Kind::PeerFailed => {
                exact(PEER_FAILED_LEN)?;
                let boot = match b[12] {
                    0 => None,
                    PEER_FAILED_BOOT_KNOWN => Some(be64(b, 4..12)),
                    _ => return Err(WireError::MalformedBody { kind: "peer-failed", why: "unknown flags" }),
                };
                Body::PeerFailed(PeerFailed { node: be32(b, 0..4), boot })
            }
            Kind::AtomicRequest => Body::AtomicRequest(AtomicRequest::parse(b)?),
            Kind::AtomicReply => Body::AtomicReply(AtomicReply::parse(b)?),
            Kind::Nicvm => {
                let (h, payload) = NicvmHeader::parse(b)?;
                Body::Nicvm(h, payload)
            }
            Kind::NicColl => Body::NicColl(NicCollHeader::parse(b)?),
            Kind::PortClosed => {
                exact(PORT_CLOSED_LEN)?;
                if b[1..4] != [0; 3] {
                    return Err(WireError::MalformedBody { kind: "port-closed", why: "reserved bytes not zero" });
                }
                Body::PortClosed(PortClosed { port: b[0], gen: be32(b, 4..8) })
            }
            Kind::CollResume => {
                exact(COLL_RESUME_LEN)?;
                Body::CollResume(CollResume { room: be32(b, 0..4) })
            }
        })
    }

    /// The fixed part of this body.
    pub fn repr(&self) -> BodyRepr {
        match *self {
            Body::Ack => BodyRepr::Ack,
            Body::Nop => BodyRepr::Nop,
            Body::Data(h, _) => BodyRepr::Data(h),
            Body::Reject(r) => BodyRepr::Reject(r),
            Body::ReadRequest(r) => BodyRepr::ReadRequest(r),
            Body::ReadResponse(h, _) => BodyRepr::ReadResponse(h),
            Body::Abort(a) => BodyRepr::Abort(a),
            Body::Coll(h, _) => BodyRepr::Coll(h),
            Body::PeerFailed(n) => BodyRepr::PeerFailed(n),
            Body::AtomicRequest(r) => BodyRepr::AtomicRequest(r),
            Body::AtomicReply(r) => BodyRepr::AtomicReply(r),
            Body::Nicvm(h, _) => BodyRepr::Nicvm(h),
            Body::NicColl(h) => BodyRepr::NicColl(h),
            Body::PortClosed(c) => BodyRepr::PortClosed(c),
            Body::CollResume(c) => BodyRepr::CollResume(c),
        }
    }

    /// The payload bytes (empty for kinds without payload).
    pub fn payload(&self) -> &'a [u8] {
        match *self {
            Body::Data(_, p) | Body::ReadResponse(_, p) | Body::Coll(_, p) | Body::Nicvm(_, p) => p,
            _ => &[],
        }
    }
}

/// A fragment must lie inside its message; an empty fragment is only valid as
/// the single fragment of an empty message.
fn check_fragment(kind: &'static str, offset: u32, len: usize, total: u32) -> Result<(), WireError> {
    let end = u64::from(offset) + len as u64;
    if end > u64::from(total) {
        return Err(WireError::MalformedBody { kind, why: "fragment extends past the message" });
    }
    if len == 0 && !(offset == 0 && total == 0) {
        return Err(WireError::MalformedBody { kind, why: "empty fragment of a non-empty message" });
    }
    Ok(())
}

impl BodyRepr {
    /// The packet kind of this body.
    pub fn kind(&self) -> Kind {
        match self {
            BodyRepr::Ack => Kind::Ack,
            BodyRepr::Nop => Kind::Nop,
            BodyRepr::Data(_) => Kind::Data,
            BodyRepr::Reject(_) => Kind::Reject,
            BodyRepr::ReadRequest(_) => Kind::ReadRequest,
            BodyRepr::ReadResponse(_) => Kind::ReadResponse,
            BodyRepr::Abort(_) => Kind::Abort,
            BodyRepr::Coll(_) => Kind::Coll,
            BodyRepr::PeerFailed(_) => Kind::PeerFailed,
            BodyRepr::AtomicRequest(_) => Kind::AtomicRequest,
            BodyRepr::AtomicReply(_) => Kind::AtomicReply,
            BodyRepr::Nicvm(_) => Kind::Nicvm,
            BodyRepr::NicColl(_) => Kind::NicColl,
            BodyRepr::PortClosed(_) => Kind::PortClosed,
            BodyRepr::CollResume(_) => Kind::CollResume,
        }
    }

    /// Length of the fixed part in bytes.
    pub fn fixed_len(&self) -> usize {
        match self {
            BodyRepr::Ack | BodyRepr::Nop => 0,
            BodyRepr::Data(_) => DATA_LEN,
            BodyRepr::Reject(_) => REJECT_LEN,
            BodyRepr::ReadRequest(_) => READ_REQUEST_LEN,
            BodyRepr::ReadResponse(_) => READ_RESPONSE_LEN,
            BodyRepr::Abort(_) => ABORT_LEN,
            BodyRepr::Coll(_) => COLL_FIXED_LEN,
            BodyRepr::PeerFailed(_) => PEER_FAILED_LEN,
            BodyRepr::AtomicRequest(_) => ATOMIC_REQUEST_LEN,
            BodyRepr::AtomicReply(_) => ATOMIC_REPLY_LEN,
            BodyRepr::Nicvm(_) => NICVM_FIXED_LEN,
            BodyRepr::NicColl(_) => NIC_COLL_LEN,
            BodyRepr::PortClosed(_) => PORT_CLOSED_LEN,
            BodyRepr::CollResume(_) => COLL_RESUME_LEN,
        }
    }

    /// Writes the fixed part into exactly `fixed_len()` bytes.
    pub(crate) fn emit(&self, b: &mut [u8]) {
        match self {
            BodyRepr::Ack | BodyRepr::Nop => {}
            BodyRepr::Data(h) => {
                b[0] = h.src_port;
                b[1] = h.dst_port;
                b[3] = 0;
                b[4..8].copy_from_slice(&h.src_gen.to_be_bytes());
                b[8..12].copy_from_slice(&h.dst_gen.to_be_bytes());
                b[12..16].copy_from_slice(&h.msg_id.to_be_bytes());
                b[16..20].copy_from_slice(&h.stream_seq.to_be_bytes());
                b[20..24].copy_from_slice(&h.total_len.to_be_bytes());
                b[24..28].copy_from_slice(&h.offset.to_be_bytes());
                match h.target {
                    Target::Tagged { tag } => {
                        b[2] = TARGET_TAGGED;
                        b[28..36].copy_from_slice(&tag.to_be_bytes());
                        b[36..44].copy_from_slice(&[0; 8]);
                    }
                    Target::Rdma { key, offset } => {
                        b[2] = TARGET_RDMA;
                        b[28..36].copy_from_slice(&key.to_be_bytes());
                        b[36..44].copy_from_slice(&offset.to_be_bytes());
                    }
                    Target::Announce { tag } => {
                        b[2] = TARGET_ANNOUNCE;
                        b[28..36].copy_from_slice(&tag.to_be_bytes());
                        b[36..44].copy_from_slice(&[0; 8]);
                    }
                    Target::Void => {
                        b[2] = TARGET_VOID;
                        b[28..44].copy_from_slice(&[0; 16]);
                    }
                }
            }
            BodyRepr::Reject(r) => {
                b[0] = r.port;
                b[1] = 0;
                b[2] = r.reason as u8;
                b[3] = 0;
                b[4..8].copy_from_slice(&r.msg_id.to_be_bytes());
                b[8..12].copy_from_slice(&r.gen.to_be_bytes());
            }
            BodyRepr::ReadRequest(r) => {
                b[0] = r.src_port;
                b[1] = r.dst_port;
                b[2..4].copy_from_slice(&[0; 2]);
                b[4..8].copy_from_slice(&r.src_gen.to_be_bytes());
                b[8..12].copy_from_slice(&r.dst_gen.to_be_bytes());
                b[12..16].copy_from_slice(&r.msg_id.to_be_bytes());
                b[16..24].copy_from_slice(&r.key.to_be_bytes());
                b[24..32].copy_from_slice(&r.offset.to_be_bytes());
                b[32..36].copy_from_slice(&r.len.to_be_bytes());
            }
            BodyRepr::ReadResponse(h) => {
                b[0] = h.dst_port;
                b[1..4].copy_from_slice(&[0; 3]);
                b[4..8].copy_from_slice(&h.dst_gen.to_be_bytes());
                b[8..12].copy_from_slice(&h.msg_id.to_be_bytes());
                b[12..16].copy_from_slice(&h.total_len.to_be_bytes());
                b[16..20].copy_from_slice(&h.offset.to_be_bytes());
            }
            BodyRepr::Abort(a) => {
                b[0] = a.what as u8;
                b[1..4].copy_from_slice(&[0; 3]);
                b[4..8].copy_from_slice(&a.msg_id.to_be_bytes());
            }
            BodyRepr::Coll(h) => {
                b[0] = h.src_port;
                b[1] = h.dst_port;
                b[2..4].copy_from_slice(&h.round.to_be_bytes());
                b[4..8].copy_from_slice(&h.src_gen.to_be_bytes());
                b[8..12].copy_from_slice(&h.dst_gen.to_be_bytes());
                b[12..16].copy_from_slice(&h.msg_id.to_be_bytes());
                b[16..24].copy_from_slice(&h.group.to_be_bytes());
                b[24..28].copy_from_slice(&h.epoch.to_be_bytes());
                b[28..32].copy_from_slice(&h.src_rank.to_be_bytes());
                b[32..36].copy_from_slice(&h.total_len.to_be_bytes());
                b[36..40].copy_from_slice(&h.offset.to_be_bytes());
                b[40..42].copy_from_slice(&h.schedule.to_be_bytes());
            }
            BodyRepr::PeerFailed(n) => {
                b[0..4].copy_from_slice(&n.node.to_be_bytes());
                b[4..12].copy_from_slice(&n.boot.unwrap_or(0).to_be_bytes());
                b[12] = if n.boot.is_some() { PEER_FAILED_BOOT_KNOWN } else { 0 };
                b[13..16].copy_from_slice(&[0; 3]);
            }
            BodyRepr::AtomicRequest(r) => r.emit(b),
            BodyRepr::AtomicReply(r) => r.emit(b),
            BodyRepr::Nicvm(h) => h.emit(b),
            BodyRepr::NicColl(h) => h.emit(b),
            BodyRepr::PortClosed(c) => {
                b[0] = c.port;
                b[1..4].copy_from_slice(&[0; 3]);
                b[4..8].copy_from_slice(&c.gen.to_be_bytes());
            }
            BodyRepr::CollResume(c) => b[0..4].copy_from_slice(&c.room.to_be_bytes()),
        }
    }
}
