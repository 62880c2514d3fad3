//! Commands and events as bytes: the checked encoding of [`Command`] and
//! [`Event`] for the rings between a node's engine process (`outboard
//! node`) and the processes it serves.
//!
//! **Why.** Once the engine runs in a process of its own, a port's
//! commands arrive as bytes another process wrote into shared memory, and
//! its events leave the same way. Reading a Rust enum's raw bytes written
//! by another process is undefined behaviour as soon as the bytes are bad
//! (an unknown discriminant, a `bool` that is 2), and a buggy or hostile
//! process must not be able to crash the engine: commands from a port are
//! untrusted input. So every value crosses as an explicit encoding that
//! [`decode_command`] and [`decode_event`] check field by field; they
//! never panic, whatever the bytes, and refuse what no value encodes to
//! with a [`CodecError`] naming what was wrong. Every value fits a slot
//! of fixed size ([`COMMAND_BYTES`], [`EVENT_BYTES`]), so a ring is an
//! array of equal slots; nothing here allocates.
//!
//! **Layout.** Little-endian, packed (no alignment), fields in declaration
//! order. A command slot starts with its kind (one byte, 1 to 21 in the
//! order of [`Command`]'s variants) and its [`OpId`] (8 bytes), then the
//! variant's other fields. An event slot holds the port (1 byte), the
//! [`OpId`] (8), the result (1 byte: 0 `Ok`, 1 `Err`), then the
//! [`Completion`] or [`OpError`] as a variant tag and its fields. Every
//! enum is a tag byte counting its variants from 1 in declaration order (0
//! is never a variant, so a zeroed slot or field is refused), then its
//! fields; a nested enum followed by more fields (a receive's source, a
//! reduction, an atomic operation and return) always takes the width of
//! its largest variant. `Option` is a byte 0 (`None`) or 1 (`Some`) and
//! the value's width; `bool` a byte 0 or 1; ids, tags, keys and addresses
//! their integer type; an [`Endpoint`] node (4), port (1), generation (4);
//! a [`HostBuf`] address (8) and length (4); a [`ReduceOp`] its
//! [`ReduceOp::code`], module and generation (4 + 4, zero but for a module
//! operator); a [`CollError::Malformed`] reason its number in a table of
//! the engine's reasons.
//!
//! **One value, one encoding.** Every byte that no field of the value
//! occupies (the unused width of a nested variant, the bytes of an
//! announcement after its length, the rest of the slot) must be zero, and
//! is refused otherwise ([`CodecError::Padding`]): trailing garbage is
//! refused, not ignored. So anything that decodes re-encodes to the same
//! bytes, and [`encode_command`] / [`encode_event`] write the whole slot.
//!
//! **What is checked where.** Decoding refuses what the types cannot hold
//! or their documented invariants exclude: unknown tags, bools that are
//! not 0 or 1, an announcement longer than [`ANNOUNCE_MAX`] in a
//! completion, an unknown reduction code (through
//! [`ReduceOp::from_code`]). What the engine checks of every command
//! anyway - a buffer's length against its limit (a
//! [`Command::Announce`] over [`ANNOUNCE_MAX`] is refused with
//! [`CommandError::TooLong`]), a reduction's operation against its type
//! ([`Reduction::validate`]), ranks, groups, modules - is carried faithfully
//! and left to it, so a port in another process sees the refusals an
//! in-process port sees.
//!
//! A new variant or field: `encode_*` match exhaustively, so the compiler
//! asks for it there; add it to the decoder, the test strategies and, when
//! it grows the largest variant, the slot sizes (a test checks they fit).

use thiserror::Error;

use crate::coll::{CollError, Datatype, GroupId, ReduceOp, Reduction, ScheduleId};
use crate::nicvm::{CombineFailure, ModuleId, NicvmError};
use crate::{
    AtomicOp, AtomicReturn, AtomicWidth, Command, CommandError, Completion, Endpoint, Event, HostBuf, NodeId, OpError, OpId, PortId, RecvMatch, ANNOUNCE_MAX,
};

/// Bytes of one encoded command slot (a multiple of 8; every command fits:
/// the largest, [`Command::Atomic`], takes 69).
pub const COMMAND_BYTES: usize = 72;

/// Bytes of one encoded event slot (a multiple of 8; every event fits: the
/// largest, a [`Completion::Announced`], takes all 64).
pub const EVENT_BYTES: usize = 64;

const _: () = assert!(COMMAND_BYTES % 8 == 0 && EVENT_BYTES % 8 == 0);

/// Why a slot's bytes are not an encoded value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The command kind (the slot's first byte) is not one of [`Command`]'s.
    #[error("unknown command kind {0}")]
    UnknownCommand(u8),
    /// A tag (an enum's variant, an `Option`, a `Result`, a table index)
    /// names nothing; `field` says whose.
    #[error("bad tag {tag} for {field}")]
    BadTag {
        /// The enum or field.
        field: &'static str,
        /// The byte found.
        tag: u8,
    },
    /// A `bool` field holds neither 0 nor 1.
    #[error("{field} is {value}, not a bool (0 or 1)")]
    BadBool {
        /// The field.
        field: &'static str,
        /// The byte found.
        value: u8,
    },
    /// A length beyond its documented maximum.
    #[error("{field} of {len} exceeds its maximum of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The length found.
        len: u32,
        /// The maximum.
        max: u32,
    },
    /// A nonzero byte where the value has no field (unused width of a
    /// nested variant, an announcement's bytes after its length, the rest
    /// of the slot): refused so that each value has one encoding.
    #[error("nonzero byte at offset {offset} where the layout has no field")]
    Padding {
        /// Offset of the first such byte in the slot.
        offset: usize,
    },
    /// A variant's layout runs past the slot: a bug of this build (the
    /// tests decode every variant at its largest), never the bytes' fault.
    #[error("the layout runs past the slot")]
    SlotOverrun,
}

/// Reasons [`CollError::Malformed`] carries, numbered from 1 in this
/// order; the first stands in for a reason this table lacks (a test checks
/// that it holds every reason the engine's source names).
const MALFORMED_REASONS: [&str; 22] = [
    "malformed (a reason the port codec does not list)",
    "member count out of range",
    "run count out of range",
    "member list length does not match its run count",
    "member run empty or beyond the last node",
    "member runs exceed the count",
    "member runs not maximal",
    "member runs fall short of the count",
    "member list length does not match its count",
    "the collective protocol runs barriers only (every fold Ignore)",
    "more than 65,536 packets between two members",
    "unknown fold",
    "too many steps",
    "step lists too many ranks",
    "a step names the member itself",
    "a step names a rank twice",
    "not a schedule (bad magic)",
    "unknown schedule version",
    "a receiving step without a fold",
    "trailing bytes after the schedule",
    "truncated",
    "message longer than 4 GiB",
];

/// Command kinds (the slot's first byte).
mod kind {
    pub const SEND: u8 = 1;
    pub const ANNOUNCE: u8 = 2;
    pub const SEND_MARKED: u8 = 3;
    pub const SET_INTERRUPT_FLAG: u8 = 4;
    pub const RECV: u8 = 5;
    pub const REGISTER: u8 = 6;
    pub const DEREGISTER: u8 = 7;
    pub const RDMA_WRITE: u8 = 8;
    pub const RDMA_READ: u8 = 9;
    pub const CANCEL: u8 = 10;
    pub const MULTI_SEND: u8 = 11;
    pub const CREATE_GROUP: u8 = 12;
    pub const DESTROY_GROUP: u8 = 13;
    pub const SET_SCHEDULE: u8 = 14;
    pub const COLLECTIVE: u8 = 15;
    pub const NIC_BARRIER: u8 = 16;
    pub const ATOMIC: u8 = 17;
    pub const NICVM_LOAD: u8 = 18;
    pub const NICVM_PURGE: u8 = 19;
    pub const NICVM_LIST: u8 = 20;
    pub const NICVM_SEND: u8 = 21;
}

/// Width of a [`RecvMatch`]'s source: `Option` tag, node, port.
const SOURCE_W: usize = 1 + 4 + 1;
/// Width of an `Option<Reduction>`: `Option` tag, op code, module,
/// generation, datatype.
const REDUCTION_W: usize = 1 + 1 + 4 + 4 + 1;
/// Width of an [`AtomicOp`]: tag and two operands.
const ATOMIC_OP_W: usize = 1 + 8 + 8;
/// Width of an [`AtomicReturn`]: tag, value and flag addresses.
const ATOMIC_RET_W: usize = 1 + 8 + 8;

/// Encodes `cmd` into a whole slot (bytes no field occupies are zeroed).
pub fn encode_command(cmd: &Command, out: &mut [u8; COMMAND_BYTES]) {
    write_command(cmd, out);
}

/// Decodes a command slot, checking every field; never panics.
pub fn decode_command(bytes: &[u8; COMMAND_BYTES]) -> Result<Command, CodecError> {
    let mut r = Reader { b: bytes, pos: 0 };
    let k = r.u8()?;
    let op = OpId(r.u64()?);
    // Struct expressions evaluate their fields in the order written: each
    // variant's fields are read in declaration order.
    let cmd = match k {
        kind::SEND => Command::Send { op, dest: r.endpoint()?, tag: r.u64()?, buf: r.buf()? },
        kind::ANNOUNCE => Command::Announce { op, dest: r.endpoint()?, tag: r.u64()?, buf: r.buf()? },
        kind::SEND_MARKED => Command::SendMarked { op, dest: r.endpoint()?, tag: r.u64()?, buf: r.buf()? },
        kind::SET_INTERRUPT_FLAG => Command::SetInterruptFlag { op, word: r.buf()? },
        kind::RECV => Command::Recv { op, matching: r.recv_match()?, buf: r.buf()? },
        kind::REGISTER => Command::Register { op, buf: r.buf()? },
        kind::DEREGISTER => Command::Deregister { op, key: r.u64()? },
        kind::RDMA_WRITE => Command::RdmaWrite { op, dest: r.endpoint()?, key: r.u64()?, offset: r.u64()?, buf: r.buf()? },
        kind::RDMA_READ => Command::RdmaRead { op, dest: r.endpoint()?, key: r.u64()?, offset: r.u64()?, buf: r.buf()? },
        kind::CANCEL => Command::Cancel { op, target: OpId(r.u64()?) },
        kind::MULTI_SEND => Command::MultiSend { op, dests: r.buf()?, tag: r.u64()?, buf: r.buf()? },
        kind::CREATE_GROUP => Command::CreateGroup { op, group: GroupId(r.u64()?), rank: r.u32()?, members: r.buf()? },
        kind::DESTROY_GROUP => Command::DestroyGroup { op, group: GroupId(r.u64()?) },
        kind::SET_SCHEDULE => Command::SetSchedule { op, group: GroupId(r.u64()?), schedule: ScheduleId(r.u16()?), buf: r.buf()? },
        kind::COLLECTIVE => {
            Command::Collective { op, group: GroupId(r.u64()?), schedule: ScheduleId(r.u16()?), reduction: r.reduction()?, send: r.buf()?, recv: r.buf()? }
        }
        kind::NIC_BARRIER => Command::NicBarrier { op, group: GroupId(r.u64()?), schedule: ScheduleId(r.u16()?) },
        kind::ATOMIC => Command::Atomic {
            op,
            dest: r.endpoint()?,
            key: r.u64()?,
            offset: r.u64()?,
            width: r.atomic_width()?,
            atomic: r.atomic_op()?,
            ret: r.atomic_return()?,
        },
        kind::NICVM_LOAD => Command::NicvmLoad {
            op,
            module: ModuleId(r.u32()?),
            name: r.buf()?,
            code: r.buf()?,
            acc_len: r.u32()?,
            persist: r.bool("Command::NicvmLoad.persist")?,
            replace: r.bool("Command::NicvmLoad.replace")?,
        },
        kind::NICVM_PURGE => Command::NicvmPurge { op, module: ModuleId(r.u32()?) },
        kind::NICVM_LIST => Command::NicvmList { op, buf: r.buf()? },
        kind::NICVM_SEND => {
            Command::NicvmSend { op, module: ModuleId(r.u32()?), generation: r.u32()?, group: GroupId(r.u64()?), root: r.u32()?, dest: r.u32()?, buf: r.buf()? }
        }
        k => return Err(CodecError::UnknownCommand(k)),
    };
    r.finish()?;
    Ok(cmd)
}

/// Encodes `ev` into a whole slot (bytes no field occupies are zeroed).
pub fn encode_event(ev: &Event, out: &mut [u8; EVENT_BYTES]) {
    write_event(ev, out);
}

/// Decodes an event slot, checking every field; never panics.
pub fn decode_event(bytes: &[u8; EVENT_BYTES]) -> Result<Event, CodecError> {
    let mut r = Reader { b: bytes, pos: 0 };
    let port = PortId(r.u8()?);
    let op = OpId(r.u64()?);
    let result = match r.u8()? {
        0 => Ok(r.completion()?),
        1 => Err(r.op_error()?),
        tag => return Err(CodecError::BadTag { field: "Event.result", tag }),
    };
    r.finish()?;
    Ok(Event { port, op, result })
}

/// [`encode_command`], returning the bytes the layout used.
fn write_command(cmd: &Command, out: &mut [u8; COMMAND_BYTES]) -> usize {
    out.fill(0);
    let mut w = Writer { b: out, pos: 0 };
    match *cmd {
        Command::Send { op, dest, tag, buf } => {
            w.head(kind::SEND, op);
            w.endpoint(dest);
            w.u64(tag);
            w.buf(buf);
        }
        Command::Announce { op, dest, tag, buf } => {
            w.head(kind::ANNOUNCE, op);
            w.endpoint(dest);
            w.u64(tag);
            w.buf(buf);
        }
        Command::SendMarked { op, dest, tag, buf } => {
            w.head(kind::SEND_MARKED, op);
            w.endpoint(dest);
            w.u64(tag);
            w.buf(buf);
        }
        Command::SetInterruptFlag { op, word } => {
            w.head(kind::SET_INTERRUPT_FLAG, op);
            w.buf(word);
        }
        Command::Recv { op, matching, buf } => {
            w.head(kind::RECV, op);
            w.recv_match(matching);
            w.buf(buf);
        }
        Command::Register { op, buf } => {
            w.head(kind::REGISTER, op);
            w.buf(buf);
        }
        Command::Deregister { op, key } => {
            w.head(kind::DEREGISTER, op);
            w.u64(key);
        }
        Command::RdmaWrite { op, dest, key, offset, buf } => {
            w.head(kind::RDMA_WRITE, op);
            w.endpoint(dest);
            w.u64(key);
            w.u64(offset);
            w.buf(buf);
        }
        Command::RdmaRead { op, dest, key, offset, buf } => {
            w.head(kind::RDMA_READ, op);
            w.endpoint(dest);
            w.u64(key);
            w.u64(offset);
            w.buf(buf);
        }
        Command::Cancel { op, target } => {
            w.head(kind::CANCEL, op);
            w.u64(target.0);
        }
        Command::MultiSend { op, dests, tag, buf } => {
            w.head(kind::MULTI_SEND, op);
            w.buf(dests);
            w.u64(tag);
            w.buf(buf);
        }
        Command::CreateGroup { op, group, rank, members } => {
            w.head(kind::CREATE_GROUP, op);
            w.u64(group.0);
            w.u32(rank);
            w.buf(members);
        }
        Command::DestroyGroup { op, group } => {
            w.head(kind::DESTROY_GROUP, op);
            w.u64(group.0);
        }
        Command::SetSchedule { op, group, schedule, buf } => {
            w.head(kind::SET_SCHEDULE, op);
            w.u64(group.0);
            w.u16(schedule.0);
            w.buf(buf);
        }
        Command::Collective { op, group, schedule, reduction, send, recv } => {
            w.head(kind::COLLECTIVE, op);
            w.u64(group.0);
            w.u16(schedule.0);
            w.reduction(reduction);
            w.buf(send);
            w.buf(recv);
        }
        Command::NicBarrier { op, group, schedule } => {
            w.head(kind::NIC_BARRIER, op);
            w.u64(group.0);
            w.u16(schedule.0);
        }
        Command::Atomic { op, dest, key, offset, width, atomic, ret } => {
            w.head(kind::ATOMIC, op);
            w.endpoint(dest);
            w.u64(key);
            w.u64(offset);
            w.u8(match width {
                AtomicWidth::W32 => 1,
                AtomicWidth::W64 => 2,
            });
            w.atomic_op(atomic);
            w.atomic_return(ret);
        }
        Command::NicvmLoad { op, module, name, code, acc_len, persist, replace } => {
            w.head(kind::NICVM_LOAD, op);
            w.u32(module.0);
            w.buf(name);
            w.buf(code);
            w.u32(acc_len);
            w.bool(persist);
            w.bool(replace);
        }
        Command::NicvmPurge { op, module } => {
            w.head(kind::NICVM_PURGE, op);
            w.u32(module.0);
        }
        Command::NicvmList { op, buf } => {
            w.head(kind::NICVM_LIST, op);
            w.buf(buf);
        }
        Command::NicvmSend { op, module, generation, group, root, dest, buf } => {
            w.head(kind::NICVM_SEND, op);
            w.u32(module.0);
            w.u32(generation);
            w.u64(group.0);
            w.u32(root);
            w.u32(dest);
            w.buf(buf);
        }
    }
    w.pos
}

/// [`encode_event`], returning the bytes the layout used.
fn write_event(ev: &Event, out: &mut [u8; EVENT_BYTES]) -> usize {
    out.fill(0);
    let mut w = Writer { b: out, pos: 0 };
    w.u8(ev.port.0);
    w.u64(ev.op.0);
    match ev.result {
        Ok(c) => {
            w.u8(0);
            w.completion(c);
        }
        Err(e) => {
            w.u8(1);
            w.op_error(e);
        }
    }
    w.pos
}

/// Writes fields at a cursor. The slot is zeroed first, so skipping bytes
/// leaves them zero. The layouts are fixed, so a write past the slot is a
/// bug the tests find (every variant is encoded there).
struct Writer<'a> {
    b: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put<const K: usize>(&mut self, v: [u8; K]) {
        self.b[self.pos..self.pos + K].copy_from_slice(&v);
        self.pos += K;
    }

    fn u8(&mut self, v: u8) {
        self.put([v]);
    }

    fn u16(&mut self, v: u16) {
        self.put(v.to_le_bytes());
    }

    fn u32(&mut self, v: u32) {
        self.put(v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.put(v.to_le_bytes());
    }

    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    /// Leaves the rest of a fixed-width field (started at `start`) zero.
    fn pad(&mut self, start: usize, width: usize) {
        debug_assert!(self.pos <= start + width, "a nested value overran its width");
        self.pos = start + width;
    }

    fn head(&mut self, kind: u8, op: OpId) {
        self.u8(kind);
        self.u64(op.0);
    }

    fn endpoint(&mut self, e: Endpoint) {
        self.u32(e.node.0);
        self.u8(e.port.0);
        self.u32(e.gen);
    }

    fn buf(&mut self, b: HostBuf) {
        self.u64(b.addr);
        self.u32(b.len);
    }

    fn recv_match(&mut self, m: RecvMatch) {
        let start = self.pos;
        if let Some((node, port)) = m.source {
            self.u8(1);
            self.u32(node.0);
            self.u8(port.0);
        }
        self.pad(start, SOURCE_W);
        self.u64(m.tag);
        self.u64(m.tag_mask);
    }

    fn reduction(&mut self, r: Option<Reduction>) {
        let start = self.pos;
        if let Some(r) = r {
            self.u8(1);
            self.u8(r.op.code());
            let (module, generation) = match r.op {
                ReduceOp::Module { module, generation } => (module.0, generation),
                _ => (0, 0),
            };
            self.u32(module);
            self.u32(generation);
            self.u8(r.dtype as u8);
        }
        self.pad(start, REDUCTION_W);
    }

    fn atomic_op(&mut self, a: AtomicOp) {
        let start = self.pos;
        match a {
            AtomicOp::FetchAdd(v) => {
                self.u8(1);
                self.u64(v);
            }
            AtomicOp::Swap(v) => {
                self.u8(2);
                self.u64(v);
            }
            AtomicOp::CompareSwap { compare, new } => {
                self.u8(3);
                self.u64(compare);
                self.u64(new);
            }
        }
        self.pad(start, ATOMIC_OP_W);
    }

    fn atomic_return(&mut self, r: AtomicReturn) {
        let start = self.pos;
        match r {
            AtomicReturn::Event => self.u8(1),
            AtomicReturn::Direct { value, flag } => {
                self.u8(2);
                self.u64(value);
                self.u64(flag);
            }
        }
        self.pad(start, ATOMIC_RET_W);
    }

    fn completion(&mut self, c: Completion) {
        match c {
            Completion::Sent => self.u8(1),
            Completion::Received { src, tag, len } => {
                self.u8(2);
                self.endpoint(src);
                self.u64(tag);
                self.u32(len);
            }
            Completion::Announced { src, tag, len, info } => {
                self.u8(3);
                self.endpoint(src);
                self.u64(tag);
                self.u32(len);
                self.put(info);
            }
            Completion::Registered { key } => {
                self.u8(4);
                self.u64(key);
            }
            Completion::Deregistered => self.u8(5),
            Completion::Written => self.u8(6),
            Completion::Read => self.u8(7),
            Completion::Cancelled => self.u8(8),
            Completion::GroupCreated => self.u8(9),
            Completion::GroupDestroyed => self.u8(10),
            Completion::ScheduleSet => self.u8(11),
            Completion::Collective { epoch, len } => {
                self.u8(12);
                self.u32(epoch);
                self.u32(len);
            }
            Completion::Atomic { value } => {
                self.u8(13);
                self.u64(value);
            }
            Completion::NicvmLoaded { generation } => {
                self.u8(14);
                self.u32(generation);
            }
            Completion::NicvmPurged => self.u8(15),
            Completion::InterruptFlagSet => self.u8(16),
            Completion::NicvmListed { count } => {
                self.u8(17);
                self.u32(count);
            }
            Completion::NicvmSent { failed } => {
                self.u8(18);
                self.bool(failed);
            }
        }
    }

    fn op_error(&mut self, e: OpError) {
        match e {
            OpError::PeerUnreachable(node) => {
                self.u8(1);
                self.u32(node.0);
            }
            OpError::ProcFailedPending(node) => {
                self.u8(2);
                self.u32(node.0);
            }
            OpError::SourceClosed(ep) => {
                self.u8(3);
                self.endpoint(ep);
            }
            OpError::PortGone => self.u8(4),
            OpError::NoSuchPort => self.u8(5),
            OpError::NotReadyTimeout => self.u8(6),
            OpError::BadKey => self.u8(7),
            OpError::OutOfBounds => self.u8(8),
            OpError::Cancelled => self.u8(9),
            OpError::Truncated { src, tag, len } => {
                self.u8(10);
                self.endpoint(src);
                self.u64(tag);
                self.u32(len);
            }
            OpError::SenderAborted => self.u8(11),
            OpError::Refused(c) => {
                self.u8(12);
                self.command_error(c);
            }
            OpError::BadAnnouncement => self.u8(13),
            OpError::DmaFault => self.u8(14),
            OpError::NotCancellable => self.u8(15),
            OpError::NoSuchRegion => self.u8(16),
            OpError::Misaligned => self.u8(17),
            OpError::Collective(c) => {
                self.u8(18);
                self.coll_error(c);
            }
            OpError::Nicvm(n) => {
                self.u8(19);
                self.u8(nicvm_error_tag(n));
            }
            OpError::EngineLost => self.u8(20),
        }
    }

    fn command_error(&mut self, e: CommandError) {
        match e {
            CommandError::PortNotOpen(port) => {
                self.u8(1);
                self.u8(port.0);
            }
            CommandError::NoSendToken => self.u8(2),
            CommandError::NoRecvToken => self.u8(3),
            CommandError::NoCollToken => self.u8(4),
            CommandError::TooLong { len, max } => {
                self.u8(5);
                self.u64(len);
                self.u32(max);
            }
            CommandError::BadDestination => self.u8(6),
            CommandError::PeerUnreachable(node) => {
                self.u8(7);
                self.u32(node.0);
            }
        }
    }

    fn coll_error(&mut self, e: CollError) {
        match e {
            CollError::Malformed(reason) => {
                self.u8(1);
                let i = MALFORMED_REASONS.iter().position(|&r| r == reason).unwrap_or(0);
                self.u8(i as u8 + 1);
            }
            CollError::RankOutOfRange { rank, size } => {
                self.u8(2);
                self.u32(rank);
                self.u32(size);
            }
            CollError::NotMember => self.u8(3),
            CollError::GroupExists => self.u8(4),
            CollError::NoSuchGroup => self.u8(5),
            CollError::NoSuchSchedule => self.u8(6),
            CollError::GroupBusy => self.u8(7),
            CollError::ScheduleMismatch { ours, theirs } => {
                self.u8(8);
                self.u16(ours);
                self.u16(theirs);
            }
            CollError::BadReduction => self.u8(9),
            CollError::LengthMismatch { expected, got } => {
                self.u8(10);
                self.u32(expected);
                self.u32(got);
            }
            CollError::TooLong { len, max } => {
                self.u8(11);
                self.u32(len);
                self.u32(max);
            }
            CollError::EngineOnly => self.u8(12),
            CollError::ModuleFailed { module, failure } => {
                self.u8(13);
                self.u32(module);
                match failure {
                    CombineFailure::OutOfFuel => self.u8(1),
                    CombineFailure::Trap => self.u8(2),
                    CombineFailure::Refused => self.u8(3),
                    CombineFailure::NotLoaded => self.u8(4),
                    CombineFailure::Stale { loaded, wanted } => {
                        self.u8(5);
                        self.u32(loaded);
                        self.u32(wanted);
                    }
                }
            }
            CollError::FailedUpstream { rank } => {
                self.u8(14);
                self.u32(rank);
            }
        }
    }
}

fn nicvm_error_tag(e: NicvmError) -> u8 {
    match e {
        NicvmError::Decode => 1,
        NicvmError::Verify => 2,
        NicvmError::Taken => 3,
        NicvmError::NotFound => 4,
        NicvmError::BadName => 5,
        NicvmError::Full => 6,
        NicvmError::NoGroup => 7,
        NicvmError::BadRank => 8,
        NicvmError::Generation => 9,
        NicvmError::TooLong => 10,
        NicvmError::DmaFault => 11,
        NicvmError::NotDelivered => 12,
    }
}

fn nicvm_error_from_tag(tag: u8) -> Option<NicvmError> {
    Some(match tag {
        1 => NicvmError::Decode,
        2 => NicvmError::Verify,
        3 => NicvmError::Taken,
        4 => NicvmError::NotFound,
        5 => NicvmError::BadName,
        6 => NicvmError::Full,
        7 => NicvmError::NoGroup,
        8 => NicvmError::BadRank,
        9 => NicvmError::Generation,
        10 => NicvmError::TooLong,
        11 => NicvmError::DmaFault,
        12 => NicvmError::NotDelivered,
        _ => return None,
    })
}

/// Reads and checks fields at a cursor; every read is bounds-checked, so
/// no input makes it panic.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const K: usize>(&mut self) -> Result<[u8; K], CodecError> {
        let s = self.b.get(self.pos..self.pos.saturating_add(K)).ok_or(CodecError::SlotOverrun)?;
        let mut a = [0u8; K];
        a.copy_from_slice(s);
        self.pos += K;
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn bool(&mut self, field: &'static str) -> Result<bool, CodecError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(CodecError::BadBool { field, value }),
        }
    }

    /// Checks that the bytes up to `end` are zero and moves there.
    fn zeros_to(&mut self, end: usize) -> Result<(), CodecError> {
        let s = self.b.get(self.pos..end).ok_or(CodecError::SlotOverrun)?;
        if let Some(i) = s.iter().position(|&x| x != 0) {
            return Err(CodecError::Padding { offset: self.pos + i });
        }
        self.pos = end;
        Ok(())
    }

    /// Checks that the rest of the slot is zero.
    fn finish(mut self) -> Result<(), CodecError> {
        self.zeros_to(self.b.len())
    }

    fn endpoint(&mut self) -> Result<Endpoint, CodecError> {
        Ok(Endpoint { node: NodeId(self.u32()?), port: PortId(self.u8()?), gen: self.u32()? })
    }

    fn buf(&mut self) -> Result<HostBuf, CodecError> {
        Ok(HostBuf { addr: self.u64()?, len: self.u32()? })
    }

    fn recv_match(&mut self) -> Result<RecvMatch, CodecError> {
        let start = self.pos;
        let source = match self.u8()? {
            0 => None,
            1 => Some((NodeId(self.u32()?), PortId(self.u8()?))),
            tag => return Err(CodecError::BadTag { field: "RecvMatch.source", tag }),
        };
        self.zeros_to(start + SOURCE_W)?;
        Ok(RecvMatch { source, tag: self.u64()?, tag_mask: self.u64()? })
    }

    fn reduction(&mut self) -> Result<Option<Reduction>, CodecError> {
        let start = self.pos;
        let r = match self.u8()? {
            0 => None,
            1 => {
                let code = self.u8()?;
                let op = if code == (ReduceOp::Module { module: ModuleId(0), generation: 0 }).code() {
                    ReduceOp::Module { module: ModuleId(self.u32()?), generation: self.u32()? }
                } else {
                    let op = ReduceOp::from_code(code).ok_or(CodecError::BadTag { field: "ReduceOp", tag: code })?;
                    // No module and generation but for a module operator.
                    self.zeros_to(self.pos + 8)?;
                    op
                };
                let dtype = match self.u8()? {
                    1 => Datatype::I32,
                    2 => Datatype::I64,
                    3 => Datatype::U64,
                    4 => Datatype::F32,
                    5 => Datatype::F64,
                    tag => return Err(CodecError::BadTag { field: "Datatype", tag }),
                };
                Some(Reduction { op, dtype })
            }
            tag => return Err(CodecError::BadTag { field: "Command::Collective.reduction", tag }),
        };
        self.zeros_to(start + REDUCTION_W)?;
        Ok(r)
    }

    fn atomic_width(&mut self) -> Result<AtomicWidth, CodecError> {
        match self.u8()? {
            1 => Ok(AtomicWidth::W32),
            2 => Ok(AtomicWidth::W64),
            tag => Err(CodecError::BadTag { field: "AtomicWidth", tag }),
        }
    }

    fn atomic_op(&mut self) -> Result<AtomicOp, CodecError> {
        let start = self.pos;
        let a = match self.u8()? {
            1 => AtomicOp::FetchAdd(self.u64()?),
            2 => AtomicOp::Swap(self.u64()?),
            3 => AtomicOp::CompareSwap { compare: self.u64()?, new: self.u64()? },
            tag => return Err(CodecError::BadTag { field: "AtomicOp", tag }),
        };
        self.zeros_to(start + ATOMIC_OP_W)?;
        Ok(a)
    }

    fn atomic_return(&mut self) -> Result<AtomicReturn, CodecError> {
        let start = self.pos;
        let r = match self.u8()? {
            1 => AtomicReturn::Event,
            2 => AtomicReturn::Direct { value: self.u64()?, flag: self.u64()? },
            tag => return Err(CodecError::BadTag { field: "AtomicReturn", tag }),
        };
        self.zeros_to(start + ATOMIC_RET_W)?;
        Ok(r)
    }

    fn completion(&mut self) -> Result<Completion, CodecError> {
        Ok(match self.u8()? {
            1 => Completion::Sent,
            2 => Completion::Received { src: self.endpoint()?, tag: self.u64()?, len: self.u32()? },
            3 => {
                let (src, tag, len) = (self.endpoint()?, self.u64()?, self.u32()?);
                if len > ANNOUNCE_MAX {
                    return Err(CodecError::TooLong { field: "Completion::Announced.len", len, max: ANNOUNCE_MAX });
                }
                let start = self.pos;
                let info = self.take::<{ ANNOUNCE_MAX as usize }>()?;
                // The bytes after the length are zero.
                if let Some(i) = info.iter().skip(len as usize).position(|&x| x != 0) {
                    return Err(CodecError::Padding { offset: start + len as usize + i });
                }
                Completion::Announced { src, tag, len, info }
            }
            4 => Completion::Registered { key: self.u64()? },
            5 => Completion::Deregistered,
            6 => Completion::Written,
            7 => Completion::Read,
            8 => Completion::Cancelled,
            9 => Completion::GroupCreated,
            10 => Completion::GroupDestroyed,
            11 => Completion::ScheduleSet,
            12 => Completion::Collective { epoch: self.u32()?, len: self.u32()? },
            13 => Completion::Atomic { value: self.u64()? },
            14 => Completion::NicvmLoaded { generation: self.u32()? },
            15 => Completion::NicvmPurged,
            16 => Completion::InterruptFlagSet,
            17 => Completion::NicvmListed { count: self.u32()? },
            18 => Completion::NicvmSent { failed: self.bool("Completion::NicvmSent.failed")? },
            tag => return Err(CodecError::BadTag { field: "Completion", tag }),
        })
    }

    fn op_error(&mut self) -> Result<OpError, CodecError> {
        Ok(match self.u8()? {
            1 => OpError::PeerUnreachable(NodeId(self.u32()?)),
            2 => OpError::ProcFailedPending(NodeId(self.u32()?)),
            3 => OpError::SourceClosed(self.endpoint()?),
            4 => OpError::PortGone,
            5 => OpError::NoSuchPort,
            6 => OpError::NotReadyTimeout,
            7 => OpError::BadKey,
            8 => OpError::OutOfBounds,
            9 => OpError::Cancelled,
            10 => OpError::Truncated { src: self.endpoint()?, tag: self.u64()?, len: self.u32()? },
            11 => OpError::SenderAborted,
            12 => OpError::Refused(self.command_error()?),
            13 => OpError::BadAnnouncement,
            14 => OpError::DmaFault,
            15 => OpError::NotCancellable,
            16 => OpError::NoSuchRegion,
            17 => OpError::Misaligned,
            18 => OpError::Collective(self.coll_error()?),
            19 => {
                let tag = self.u8()?;
                OpError::Nicvm(nicvm_error_from_tag(tag).ok_or(CodecError::BadTag { field: "NicvmError", tag })?)
            }
            20 => OpError::EngineLost,
            tag => return Err(CodecError::BadTag { field: "OpError", tag }),
        })
    }

    fn command_error(&mut self) -> Result<CommandError, CodecError> {
        Ok(match self.u8()? {
            1 => CommandError::PortNotOpen(PortId(self.u8()?)),
            2 => CommandError::NoSendToken,
            3 => CommandError::NoRecvToken,
            4 => CommandError::NoCollToken,
            5 => CommandError::TooLong { len: self.u64()?, max: self.u32()? },
            6 => CommandError::BadDestination,
            7 => CommandError::PeerUnreachable(NodeId(self.u32()?)),
            tag => return Err(CodecError::BadTag { field: "CommandError", tag }),
        })
    }

    fn coll_error(&mut self) -> Result<CollError, CodecError> {
        Ok(match self.u8()? {
            1 => {
                let tag = self.u8()?;
                let reason = usize::from(tag)
                    .checked_sub(1)
                    .and_then(|i| MALFORMED_REASONS.get(i))
                    .ok_or(CodecError::BadTag { field: "CollError::Malformed reason", tag })?;
                CollError::Malformed(reason)
            }
            2 => CollError::RankOutOfRange { rank: self.u32()?, size: self.u32()? },
            3 => CollError::NotMember,
            4 => CollError::GroupExists,
            5 => CollError::NoSuchGroup,
            6 => CollError::NoSuchSchedule,
            7 => CollError::GroupBusy,
            8 => CollError::ScheduleMismatch { ours: self.u16()?, theirs: self.u16()? },
            9 => CollError::BadReduction,
            10 => CollError::LengthMismatch { expected: self.u32()?, got: self.u32()? },
            11 => CollError::TooLong { len: self.u32()?, max: self.u32()? },
            12 => CollError::EngineOnly,
            13 => {
                let module = self.u32()?;
                let failure = match self.u8()? {
                    1 => CombineFailure::OutOfFuel,
                    2 => CombineFailure::Trap,
                    3 => CombineFailure::Refused,
                    4 => CombineFailure::NotLoaded,
                    5 => CombineFailure::Stale { loaded: self.u32()?, wanted: self.u32()? },
                    tag => return Err(CodecError::BadTag { field: "CombineFailure", tag }),
                };
                CollError::ModuleFailed { module, failure }
            }
            14 => CollError::FailedUpstream { rank: self.u32()? },
            tag => return Err(CodecError::BadTag { field: "CollError", tag }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn command_round_trip(cmd: &Command) -> [u8; COMMAND_BYTES] {
        let mut b = [0xA5; COMMAND_BYTES];
        encode_command(cmd, &mut b);
        assert_eq!(decode_command(&b).as_ref(), Ok(cmd), "bytes {b:?}");
        b
    }

    fn event_round_trip(ev: &Event) -> [u8; EVENT_BYTES] {
        let mut b = [0xA5; EVENT_BYTES];
        encode_event(ev, &mut b);
        assert_eq!(decode_event(&b).as_ref(), Ok(ev), "bytes {b:?}");
        b
    }

    /// Whatever decodes re-encodes to the same bytes (so decoding again
    /// gives the same value).
    fn check_canonical_command(b: &[u8; COMMAND_BYTES]) {
        if let Ok(cmd) = decode_command(b) {
            let mut again = [0; COMMAND_BYTES];
            encode_command(&cmd, &mut again);
            assert_eq!(&again, b, "{cmd:?}");
            assert_eq!(decode_command(&again), Ok(cmd));
        }
    }

    fn check_canonical_event(b: &[u8; EVENT_BYTES]) {
        if let Ok(ev) = decode_event(b) {
            let mut again = [0; EVENT_BYTES];
            encode_event(&ev, &mut again);
            assert_eq!(&again, b, "{ev:?}");
            assert_eq!(decode_event(&again), Ok(ev));
        }
    }

    mod strategies {
        use super::super::*;
        use proptest::prelude::*;

        // Extremes are common: the largest ids and lengths must fit too.
        pub fn u64s() -> impl Strategy<Value = u64> {
            prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]
        }
        pub fn u32s() -> impl Strategy<Value = u32> {
            prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()]
        }
        pub fn u16s() -> impl Strategy<Value = u16> {
            prop_oneof![Just(0u16), Just(u16::MAX), any::<u16>()]
        }
        pub fn u8s() -> impl Strategy<Value = u8> {
            prop_oneof![Just(0u8), Just(u8::MAX), any::<u8>()]
        }
        pub fn op() -> impl Strategy<Value = OpId> {
            u64s().prop_map(OpId)
        }
        pub fn endpoint() -> impl Strategy<Value = Endpoint> {
            (u32s(), u8s(), u32s()).prop_map(|(n, p, gen)| Endpoint { node: NodeId(n), port: PortId(p), gen })
        }
        pub fn host_buf() -> impl Strategy<Value = HostBuf> {
            (u64s(), u32s()).prop_map(|(addr, len)| HostBuf { addr, len })
        }
        pub fn group() -> impl Strategy<Value = GroupId> {
            u64s().prop_map(GroupId)
        }
        pub fn schedule() -> impl Strategy<Value = ScheduleId> {
            u16s().prop_map(ScheduleId)
        }
        pub fn module() -> impl Strategy<Value = ModuleId> {
            u32s().prop_map(ModuleId)
        }
        pub fn recv_match() -> impl Strategy<Value = RecvMatch> {
            (proptest::option::of((u32s(), u8s())), u64s(), u64s()).prop_map(|(s, tag, tag_mask)| RecvMatch {
                source: s.map(|(n, p)| (NodeId(n), PortId(p))),
                tag,
                tag_mask,
            })
        }
        /// Every operation on every type, those the engine refuses
        /// (bitwise on floats) included: the codec carries them.
        pub fn reduction() -> impl Strategy<Value = Reduction> {
            let op = prop_oneof![
                (0..ReduceOp::ALL.len()).prop_map(|i| ReduceOp::ALL[i]),
                (module(), u32s()).prop_map(|(module, generation)| ReduceOp::Module { module, generation }),
            ];
            (op, 0..Datatype::ALL.len()).prop_map(|(op, t)| Reduction { op, dtype: Datatype::ALL[t] })
        }
        pub fn atomic_width() -> impl Strategy<Value = AtomicWidth> {
            prop_oneof![Just(AtomicWidth::W32), Just(AtomicWidth::W64)]
        }
        pub fn atomic_op() -> impl Strategy<Value = AtomicOp> {
            prop_oneof![
                u64s().prop_map(AtomicOp::FetchAdd),
                u64s().prop_map(AtomicOp::Swap),
                (u64s(), u64s()).prop_map(|(compare, new)| AtomicOp::CompareSwap { compare, new }),
            ]
        }
        pub fn atomic_return() -> impl Strategy<Value = AtomicReturn> {
            prop_oneof![Just(AtomicReturn::Event), (u64s(), u64s()).prop_map(|(value, flag)| AtomicReturn::Direct { value, flag })]
        }

        pub fn command() -> impl Strategy<Value = Command> {
            prop_oneof![
                (op(), endpoint(), u64s(), host_buf()).prop_map(|(op, dest, tag, buf)| Command::Send { op, dest, tag, buf }),
                (op(), endpoint(), u64s(), host_buf()).prop_map(|(op, dest, tag, buf)| Command::Announce { op, dest, tag, buf }),
                (op(), endpoint(), u64s(), host_buf()).prop_map(|(op, dest, tag, buf)| Command::SendMarked { op, dest, tag, buf }),
                (op(), host_buf()).prop_map(|(op, word)| Command::SetInterruptFlag { op, word }),
                (op(), recv_match(), host_buf()).prop_map(|(op, matching, buf)| Command::Recv { op, matching, buf }),
                (op(), host_buf()).prop_map(|(op, buf)| Command::Register { op, buf }),
                (op(), u64s()).prop_map(|(op, key)| Command::Deregister { op, key }),
                (op(), endpoint(), u64s(), u64s(), host_buf()).prop_map(|(op, dest, key, offset, buf)| Command::RdmaWrite { op, dest, key, offset, buf }),
                (op(), endpoint(), u64s(), u64s(), host_buf()).prop_map(|(op, dest, key, offset, buf)| Command::RdmaRead { op, dest, key, offset, buf }),
                (op(), op()).prop_map(|(op, target)| Command::Cancel { op, target }),
                (op(), host_buf(), u64s(), host_buf()).prop_map(|(op, dests, tag, buf)| Command::MultiSend { op, dests, tag, buf }),
                (op(), group(), u32s(), host_buf()).prop_map(|(op, group, rank, members)| Command::CreateGroup { op, group, rank, members }),
                (op(), group()).prop_map(|(op, group)| Command::DestroyGroup { op, group }),
                (op(), group(), schedule(), host_buf()).prop_map(|(op, group, schedule, buf)| Command::SetSchedule { op, group, schedule, buf }),
                (op(), group(), schedule(), proptest::option::of(reduction()), host_buf(), host_buf())
                    .prop_map(|(op, group, schedule, reduction, send, recv)| Command::Collective { op, group, schedule, reduction, send, recv }),
                (op(), group(), schedule()).prop_map(|(op, group, schedule)| Command::NicBarrier { op, group, schedule }),
                (op(), endpoint(), u64s(), u64s(), atomic_width(), atomic_op(), atomic_return())
                    .prop_map(|(op, dest, key, offset, width, atomic, ret)| Command::Atomic { op, dest, key, offset, width, atomic, ret }),
                (op(), module(), host_buf(), host_buf(), u32s(), any::<bool>(), any::<bool>())
                    .prop_map(|(op, module, name, code, acc_len, persist, replace)| Command::NicvmLoad { op, module, name, code, acc_len, persist, replace }),
                (op(), module()).prop_map(|(op, module)| Command::NicvmPurge { op, module }),
                (op(), host_buf()).prop_map(|(op, buf)| Command::NicvmList { op, buf }),
                (op(), module(), u32s(), group(), u32s(), u32s(), host_buf()).prop_map(|(op, module, generation, group, root, dest, buf)| Command::NicvmSend {
                    op,
                    module,
                    generation,
                    group,
                    root,
                    dest,
                    buf
                }),
            ]
        }

        pub fn completion() -> impl Strategy<Value = Completion> {
            prop_oneof![
                Just(Completion::Sent),
                (endpoint(), u64s(), u32s()).prop_map(|(src, tag, len)| Completion::Received { src, tag, len }),
                (endpoint(), u64s(), 0..=ANNOUNCE_MAX, any::<[u8; ANNOUNCE_MAX as usize]>()).prop_map(|(src, tag, len, mut info)| {
                    info[len as usize..].fill(0);
                    Completion::Announced { src, tag, len, info }
                }),
                u64s().prop_map(|key| Completion::Registered { key }),
                Just(Completion::Deregistered),
                Just(Completion::Written),
                Just(Completion::Read),
                Just(Completion::Cancelled),
                Just(Completion::GroupCreated),
                Just(Completion::GroupDestroyed),
                Just(Completion::ScheduleSet),
                (u32s(), u32s()).prop_map(|(epoch, len)| Completion::Collective { epoch, len }),
                u64s().prop_map(|value| Completion::Atomic { value }),
                u32s().prop_map(|generation| Completion::NicvmLoaded { generation }),
                Just(Completion::NicvmPurged),
                Just(Completion::InterruptFlagSet),
                u32s().prop_map(|count| Completion::NicvmListed { count }),
                any::<bool>().prop_map(|failed| Completion::NicvmSent { failed }),
            ]
        }

        pub fn command_error() -> impl Strategy<Value = CommandError> {
            prop_oneof![
                u8s().prop_map(|p| CommandError::PortNotOpen(PortId(p))),
                Just(CommandError::NoSendToken),
                Just(CommandError::NoRecvToken),
                Just(CommandError::NoCollToken),
                (u64s(), u32s()).prop_map(|(len, max)| CommandError::TooLong { len, max }),
                Just(CommandError::BadDestination),
                u32s().prop_map(|n| CommandError::PeerUnreachable(NodeId(n))),
            ]
        }

        pub fn combine_failure() -> impl Strategy<Value = CombineFailure> {
            prop_oneof![
                Just(CombineFailure::OutOfFuel),
                Just(CombineFailure::Trap),
                Just(CombineFailure::Refused),
                Just(CombineFailure::NotLoaded),
                (u32s(), u32s()).prop_map(|(loaded, wanted)| CombineFailure::Stale { loaded, wanted }),
            ]
        }

        pub fn coll_error() -> impl Strategy<Value = CollError> {
            prop_oneof![
                (0..MALFORMED_REASONS.len()).prop_map(|i| CollError::Malformed(MALFORMED_REASONS[i])),
                (u32s(), u32s()).prop_map(|(rank, size)| CollError::RankOutOfRange { rank, size }),
                Just(CollError::NotMember),
                Just(CollError::GroupExists),
                Just(CollError::NoSuchGroup),
                Just(CollError::NoSuchSchedule),
                Just(CollError::GroupBusy),
                (u16s(), u16s()).prop_map(|(ours, theirs)| CollError::ScheduleMismatch { ours, theirs }),
                Just(CollError::BadReduction),
                (u32s(), u32s()).prop_map(|(expected, got)| CollError::LengthMismatch { expected, got }),
                (u32s(), u32s()).prop_map(|(len, max)| CollError::TooLong { len, max }),
                Just(CollError::EngineOnly),
                (u32s(), combine_failure()).prop_map(|(module, failure)| CollError::ModuleFailed { module, failure }),
                u32s().prop_map(|rank| CollError::FailedUpstream { rank }),
            ]
        }

        pub const NICVM_ERRORS: [NicvmError; 12] = [
            NicvmError::Decode,
            NicvmError::Verify,
            NicvmError::Taken,
            NicvmError::NotFound,
            NicvmError::BadName,
            NicvmError::Full,
            NicvmError::NoGroup,
            NicvmError::BadRank,
            NicvmError::Generation,
            NicvmError::TooLong,
            NicvmError::DmaFault,
            NicvmError::NotDelivered,
        ];

        pub fn op_error() -> impl Strategy<Value = OpError> {
            prop_oneof![
                u32s().prop_map(|n| OpError::PeerUnreachable(NodeId(n))),
                u32s().prop_map(|n| OpError::ProcFailedPending(NodeId(n))),
                endpoint().prop_map(OpError::SourceClosed),
                Just(OpError::PortGone),
                Just(OpError::NoSuchPort),
                Just(OpError::NotReadyTimeout),
                Just(OpError::BadKey),
                Just(OpError::OutOfBounds),
                Just(OpError::Cancelled),
                (endpoint(), u64s(), u32s()).prop_map(|(src, tag, len)| OpError::Truncated { src, tag, len }),
                Just(OpError::SenderAborted),
                command_error().prop_map(OpError::Refused),
                Just(OpError::BadAnnouncement),
                Just(OpError::DmaFault),
                Just(OpError::NotCancellable),
                Just(OpError::NoSuchRegion),
                Just(OpError::Misaligned),
                Just(OpError::EngineLost),
                coll_error().prop_map(OpError::Collective),
                (0..NICVM_ERRORS.len()).prop_map(|i| OpError::Nicvm(NICVM_ERRORS[i])),
            ]
        }

        pub fn event() -> impl Strategy<Value = Event> {
            let result = prop_oneof![completion().prop_map(Ok), op_error().prop_map(Err)];
            (u8s(), op(), result).prop_map(|(p, op, result)| Event { port: PortId(p), op, result })
        }

        /// Slot bytes: a prefix of mostly small values, then zeros, so
        /// tags often name something and the rest of the slot is often
        /// clean (uniform bytes almost never decode).
        pub fn sparse_bytes(n: usize) -> impl Strategy<Value = Vec<u8>> {
            (proptest::collection::vec(prop_oneof![3 => Just(0u8), 2 => 0u8..24, 1 => any::<u8>()], n), 0..=n).prop_map(|(mut v, cut)| {
                v[cut..].fill(0);
                v
            })
        }
    }

    use strategies::*;

    fn to_command_slot(v: &[u8]) -> [u8; COMMAND_BYTES] {
        let mut b = [0; COMMAND_BYTES];
        b.copy_from_slice(v);
        b
    }

    fn to_event_slot(v: &[u8]) -> [u8; EVENT_BYTES] {
        let mut b = [0; EVENT_BYTES];
        b.copy_from_slice(v);
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        #[test]
        fn commands_round_trip(cmd in command()) {
            let b = command_round_trip(&cmd);
            check_canonical_command(&b);
        }

        #[test]
        fn events_round_trip(ev in event()) {
            let b = event_round_trip(&ev);
            check_canonical_event(&b);
        }

        /// Random slots never panic the decoders; what decodes is canonical.
        #[test]
        fn arbitrary_slots_decode_safely(
            c in proptest::collection::vec(any::<u8>(), COMMAND_BYTES),
            e in proptest::collection::vec(any::<u8>(), EVENT_BYTES),
            cs in sparse_bytes(COMMAND_BYTES),
            es in sparse_bytes(EVENT_BYTES),
            kind in 0u8..=22,
            result in 0u8..=2,
        ) {
            check_canonical_command(&to_command_slot(&c));
            check_canonical_event(&to_event_slot(&e));
            let mut cs = to_command_slot(&cs);
            cs[0] = kind;
            check_canonical_command(&cs);
            let mut es = to_event_slot(&es);
            es[9] = result;
            check_canonical_event(&es);
        }

        /// Valid slots with a few bytes overwritten: close to valid, so
        /// the checks of each field are reached.
        #[test]
        fn mutated_slots_decode_safely(
            cmd in command(),
            ev in event(),
            cmuts in proptest::collection::vec((0..COMMAND_BYTES, any::<u8>()), 1..4),
            emuts in proptest::collection::vec((0..EVENT_BYTES, any::<u8>()), 1..4),
        ) {
            let mut c = [0; COMMAND_BYTES];
            encode_command(&cmd, &mut c);
            for (i, v) in cmuts {
                c[i] = v;
            }
            check_canonical_command(&c);
            let mut e = [0; EVENT_BYTES];
            encode_event(&ev, &mut e);
            for (i, v) in emuts {
                e[i] = v;
            }
            check_canonical_event(&e);
        }
    }

    /// Every command variant with its largest values, and the bytes each
    /// layout uses: all fit, and the slot is no larger than it must be.
    #[test]
    fn largest_commands_fit() {
        let op = OpId(u64::MAX);
        let dest = Endpoint { node: NodeId(u32::MAX), port: PortId(u8::MAX), gen: u32::MAX };
        let buf = HostBuf { addr: u64::MAX, len: u32::MAX };
        let group = GroupId(u64::MAX);
        let schedule = ScheduleId(u16::MAX);
        let module = ModuleId(u32::MAX);
        let m = u64::MAX;
        let commands = [
            Command::Send { op, dest, tag: m, buf },
            Command::Announce { op, dest, tag: m, buf },
            Command::SendMarked { op, dest, tag: m, buf },
            Command::SetInterruptFlag { op, word: buf },
            Command::Recv { op, matching: RecvMatch { source: Some((dest.node, dest.port)), tag: m, tag_mask: m }, buf },
            Command::Register { op, buf },
            Command::Deregister { op, key: m },
            Command::RdmaWrite { op, dest, key: m, offset: m, buf },
            Command::RdmaRead { op, dest, key: m, offset: m, buf },
            Command::Cancel { op, target: op },
            Command::MultiSend { op, dests: buf, tag: m, buf },
            Command::CreateGroup { op, group, rank: u32::MAX, members: buf },
            Command::DestroyGroup { op, group },
            Command::SetSchedule { op, group, schedule, buf },
            Command::Collective { op, group, schedule, reduction: Some(Reduction::module(module, u32::MAX, Datatype::F64)), send: buf, recv: buf },
            Command::NicBarrier { op, group, schedule },
            Command::Atomic {
                op,
                dest,
                key: m,
                offset: m,
                width: AtomicWidth::W64,
                atomic: AtomicOp::CompareSwap { compare: m, new: m },
                ret: AtomicReturn::Direct { value: m, flag: m },
            },
            Command::NicvmLoad { op, module, name: buf, code: buf, acc_len: u32::MAX, persist: true, replace: true },
            Command::NicvmPurge { op, module },
            Command::NicvmList { op, buf },
            Command::NicvmSend { op, module, generation: u32::MAX, group, root: u32::MAX, dest: u32::MAX, buf },
        ];
        let mut kinds = Vec::new();
        let mut largest = 0;
        for cmd in &commands {
            let b = command_round_trip(cmd);
            kinds.push(b[0]);
            let mut out = [0; COMMAND_BYTES];
            largest = largest.max(write_command(cmd, &mut out));
        }
        assert_eq!(kinds, (1..=21).collect::<Vec<u8>>(), "one kind per variant, in order");
        assert_eq!(largest, 69, "Command::Atomic");
        assert!(largest <= COMMAND_BYTES && COMMAND_BYTES - largest < 8, "{largest} of {COMMAND_BYTES}");
    }

    /// The same for events: each completion and error at its largest.
    #[test]
    fn largest_events_fit() {
        let src = Endpoint { node: NodeId(u32::MAX), port: PortId(u8::MAX), gen: u32::MAX };
        let m = u32::MAX;
        let results = [
            Ok(Completion::Sent),
            Ok(Completion::Received { src, tag: u64::MAX, len: m }),
            Ok(Completion::Announced { src, tag: u64::MAX, len: ANNOUNCE_MAX, info: [0xFF; ANNOUNCE_MAX as usize] }),
            Ok(Completion::Registered { key: u64::MAX }),
            Ok(Completion::Collective { epoch: m, len: m }),
            Ok(Completion::Atomic { value: u64::MAX }),
            Ok(Completion::NicvmLoaded { generation: m }),
            Ok(Completion::NicvmListed { count: m }),
            Ok(Completion::NicvmSent { failed: true }),
            Err(OpError::SourceClosed(src)),
            Err(OpError::Truncated { src, tag: u64::MAX, len: m }),
            Err(OpError::Refused(CommandError::TooLong { len: u64::MAX, max: m })),
            Err(OpError::Collective(CollError::ModuleFailed { module: m, failure: CombineFailure::Stale { loaded: m, wanted: m } })),
            Err(OpError::Collective(CollError::Malformed(MALFORMED_REASONS[MALFORMED_REASONS.len() - 1]))),
            Err(OpError::Nicvm(NicvmError::NotDelivered)),
        ];
        let mut largest = 0;
        for result in results {
            let ev = Event { port: PortId(u8::MAX), op: OpId(u64::MAX), result };
            event_round_trip(&ev);
            let mut out = [0; EVENT_BYTES];
            largest = largest.max(write_event(&ev, &mut out));
        }
        assert_eq!(largest, EVENT_BYTES, "Completion::Announced fills the slot");
    }

    #[test]
    fn bad_bytes_name_what_is_wrong() {
        let mut b = [0; COMMAND_BYTES];
        assert_eq!(decode_command(&b), Err(CodecError::UnknownCommand(0)), "an empty slot");
        b[0] = 22;
        assert_eq!(decode_command(&b), Err(CodecError::UnknownCommand(22)));

        // NicvmLoad: kind, op (8), module (4), name (12), code (12),
        // acc_len (4), then persist at 41 and replace at 42.
        let load = Command::NicvmLoad {
            op: OpId(7),
            module: ModuleId(3),
            name: HostBuf { addr: 64, len: 5 },
            code: HostBuf { addr: 128, len: 40 },
            acc_len: 16,
            persist: true,
            replace: false,
        };
        encode_command(&load, &mut b);
        assert_eq!(b[41], 1);
        b[42] = 2;
        assert_eq!(decode_command(&b), Err(CodecError::BadBool { field: "Command::NicvmLoad.replace", value: 2 }));
        b[42] = 0;
        b[COMMAND_BYTES - 1] = 1;
        assert_eq!(decode_command(&b), Err(CodecError::Padding { offset: COMMAND_BYTES - 1 }), "trailing garbage");

        // Recv: the source's Option tag at 9; a None source's node bytes
        // are padding.
        encode_command(&Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: HostBuf { addr: 0, len: 0 } }, &mut b);
        b[10] = 1;
        assert_eq!(decode_command(&b), Err(CodecError::Padding { offset: 10 }));
        b[10] = 0;
        b[9] = 2;
        assert_eq!(decode_command(&b), Err(CodecError::BadTag { field: "RecvMatch.source", tag: 2 }));

        // Collective: reduction at 19 (Option tag, op code at 20, dtype at 29).
        let coll = Command::Collective {
            op: OpId(1),
            group: GroupId(2),
            schedule: ScheduleId(3),
            reduction: Some(Reduction { op: ReduceOp::Sum, dtype: Datatype::I32 }),
            send: HostBuf { addr: 0, len: 4 },
            recv: HostBuf { addr: 8, len: 4 },
        };
        encode_command(&coll, &mut b);
        assert_eq!((b[19], b[20], b[29]), (1, 1, 1));
        b[20] = 12;
        assert_eq!(decode_command(&b), Err(CodecError::BadTag { field: "ReduceOp", tag: 12 }));
        b[20] = 1;
        b[29] = 6;
        assert_eq!(decode_command(&b), Err(CodecError::BadTag { field: "Datatype", tag: 6 }));
        b[29] = 1;
        b[21] = 1;
        assert_eq!(decode_command(&b), Err(CodecError::Padding { offset: 21 }), "a module id on a built-in operation");

        // Atomic: dest at 9, key at 18, offset at 26, width at 34,
        // operation tag at 35.
        let atomic = Command::Atomic {
            op: OpId(1),
            dest: Endpoint { node: NodeId(1), port: PortId(0), gen: 1 },
            key: 9,
            offset: 8,
            width: AtomicWidth::W64,
            atomic: AtomicOp::FetchAdd(1),
            ret: AtomicReturn::Event,
        };
        encode_command(&atomic, &mut b);
        b[34] = 8;
        assert_eq!(decode_command(&b), Err(CodecError::BadTag { field: "AtomicWidth", tag: 8 }));
        b[34] = 2;
        b[35] = 0;
        assert_eq!(decode_command(&b), Err(CodecError::BadTag { field: "AtomicOp", tag: 0 }));

        // Events: result at 9, completion or error tag at 10.
        let mut e = [0; EVENT_BYTES];
        let announced = Completion::Announced { src: Endpoint { node: NodeId(1), port: PortId(2), gen: 3 }, tag: 4, len: 2, info: [0; 32] };
        encode_event(&Event { port: PortId(0), op: OpId(1), result: Ok(announced) }, &mut e);
        // Length at 28, info from 32.
        e[28] = 33;
        assert_eq!(decode_event(&e), Err(CodecError::TooLong { field: "Completion::Announced.len", len: 33, max: ANNOUNCE_MAX }));
        e[28] = 2;
        e[33] = 7;
        let mut info = [0; 32];
        info[1] = 7;
        let within = Completion::Announced { src: Endpoint { node: NodeId(1), port: PortId(2), gen: 3 }, tag: 4, len: 2, info };
        assert_eq!(decode_event(&e), Ok(Event { port: PortId(0), op: OpId(1), result: Ok(within) }), "a byte inside the length");
        e[34] = 7;
        assert_eq!(decode_event(&e), Err(CodecError::Padding { offset: 34 }), "announcement bytes after its length");
        e[34] = 0;
        e[9] = 2;
        assert_eq!(decode_event(&e), Err(CodecError::BadTag { field: "Event.result", tag: 2 }));
        e[9] = 0;
        e[10] = 19;
        assert_eq!(decode_event(&e), Err(CodecError::BadTag { field: "Completion", tag: 19 }));

        encode_event(&Event { port: PortId(0), op: OpId(1), result: Err(OpError::Refused(CommandError::NoSendToken)) }, &mut e);
        e[11] = 8;
        assert_eq!(decode_event(&e), Err(CodecError::BadTag { field: "CommandError", tag: 8 }));
        encode_event(&Event { port: PortId(0), op: OpId(1), result: Ok(Completion::NicvmSent { failed: false }) }, &mut e);
        e[11] = 3;
        assert_eq!(decode_event(&e), Err(CodecError::BadBool { field: "Completion::NicvmSent.failed", value: 3 }));
        encode_event(&Event { port: PortId(0), op: OpId(1), result: Err(OpError::Collective(CollError::Malformed("truncated"))) }, &mut e);
        e[12] = 0;
        assert_eq!(decode_event(&e), Err(CodecError::BadTag { field: "CollError::Malformed reason", tag: 0 }));
        e[12] = MALFORMED_REASONS.len() as u8 + 1;
        assert!(matches!(decode_event(&e), Err(CodecError::BadTag { field: "CollError::Malformed reason", .. })));
    }

    /// A reason the table lacks crosses as the table's stand-in.
    #[test]
    fn unlisted_malformed_reason_has_a_stand_in() {
        let ev = Event { port: PortId(0), op: OpId(1), result: Err(OpError::Collective(CollError::Malformed("not a reason anywhere"))) };
        let mut e = [0; EVENT_BYTES];
        encode_event(&ev, &mut e);
        assert_eq!(decode_event(&e).map(|ev| ev.result), Ok(Err(OpError::Collective(CollError::Malformed(MALFORMED_REASONS[0])))));
    }

    /// Every `CollError::Malformed` reason in the engine's source is in the
    /// table, so every event the engine makes round-trips exactly.
    #[test]
    fn malformed_reasons_are_all_listed() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("port_codec.rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (i, _) in text.match_indices("Malformed(\"") {
                        let rest = &text[i + "Malformed(\"".len()..];
                        found.push(rest[..rest.find('"').unwrap()].to_string());
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
        assert!(found.len() > 15, "{found:?}");
        for reason in &found {
            assert!(MALFORMED_REASONS[1..].contains(&reason.as_str()), "reason {reason:?} missing from MALFORMED_REASONS");
        }
    }
}
