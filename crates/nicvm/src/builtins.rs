//! The built-in functions and named constants of the language.
//!
//! One table serves the compiler (names, argument types), the verifier
//! (arity) and the interpreter (dispatch by [`Builtin`]). The first four
//! built-ins and the constants are the paper's (its Figure 2); the rest are
//! what a reduction operator or an echo module needs: read the packet, keep
//! an accumulator, send or deliver it.

use crate::ast::Type;

/// A built-in function, as the interpreter dispatches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Builtin {
    /// `mpi_get_size()`: number of ranks in the group.
    GetSize = 0,
    /// `mpi_get_rank()`: this node's rank.
    GetRank = 1,
    /// `mpi_get_root()`: the root of the current operation.
    GetRoot = 2,
    /// `mpi_send_message(type, rank)`: send the current packet to `rank`.
    SendMessage = 3,
    /// `mpi_send_acc(type, rank)`: send the accumulator as a new packet.
    SendAcc = 4,
    /// `nicvm_deliver_acc()`: hand the accumulator to the host as a new message.
    DeliverAcc = 5,
    /// `nicvm_consume()`: the current packet is not to be delivered to the host.
    Consume = 6,
    /// `packet_length()`: bytes in the current packet's payload.
    PacketLength = 7,
    /// `packet_get_byte(off)`: payload byte at `off`, 0..=255.
    PacketGetByte = 8,
    /// `packet_get_i64(off)`: little-endian i64 at byte offset `off`.
    PacketGetI64 = 9,
    /// `packet_get_f64(off)`: little-endian f64 at byte offset `off`.
    PacketGetF64 = 10,
    /// `acc_length()`: bytes in the accumulator area.
    AccLength = 11,
    /// `acc_get_byte(off)`
    AccGetByte = 12,
    /// `acc_get_i64(off)`
    AccGetI64 = 13,
    /// `acc_get_f64(off)`
    AccGetF64 = 14,
    /// `acc_set_byte(off, v)`: stores the low 8 bits of `v`.
    AccSetByte = 15,
    /// `acc_set_i64(off, v)`
    AccSetI64 = 16,
    /// `acc_set_f64(off, v)`
    AccSetF64 = 17,
    /// `mpi_get_source()`: the rank the current packet came from.
    GetSource = 18,
}

/// What the compiler and verifier know about a built-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinInfo {
    /// The built-in.
    pub builtin: Builtin,
    /// Its source name.
    pub name: &'static str,
    /// Argument types, in order (their count is the arity).
    pub params: &'static [Type],
    /// Result type (built-ins that only act return int 0).
    pub ret: Type,
    /// One line for the language reference and the disassembler.
    pub doc: &'static str,
}

use Type::{Float as F, Int as I};

/// Every built-in, indexed by its id (`Builtin as u8`).
pub const BUILTINS: &[BuiltinInfo] = &[
    BuiltinInfo {
        builtin: Builtin::GetSize,
        name: "mpi_get_size",
        params: &[],
        ret: I,
        doc: "number of ranks in the group",
    },
    BuiltinInfo {
        builtin: Builtin::GetRank,
        name: "mpi_get_rank",
        params: &[],
        ret: I,
        doc: "this node's rank",
    },
    BuiltinInfo {
        builtin: Builtin::GetRoot,
        name: "mpi_get_root",
        params: &[],
        ret: I,
        doc: "root rank of the current operation",
    },
    BuiltinInfo {
        builtin: Builtin::SendMessage,
        name: "mpi_send_message",
        params: &[I, I],
        ret: I,
        doc: "send the current packet with a packet type to a rank",
    },
    BuiltinInfo {
        builtin: Builtin::SendAcc,
        name: "mpi_send_acc",
        params: &[I, I],
        ret: I,
        doc: "send the accumulator as a new packet with a packet type to a rank",
    },
    BuiltinInfo {
        builtin: Builtin::DeliverAcc,
        name: "nicvm_deliver_acc",
        params: &[],
        ret: I,
        doc: "deliver the accumulator to the host as a new message",
    },
    BuiltinInfo {
        builtin: Builtin::Consume,
        name: "nicvm_consume",
        params: &[],
        ret: I,
        doc: "mark the current packet consumed (not delivered to the host)",
    },
    BuiltinInfo {
        builtin: Builtin::PacketLength,
        name: "packet_length",
        params: &[],
        ret: I,
        doc: "payload length of the current packet in bytes",
    },
    BuiltinInfo {
        builtin: Builtin::PacketGetByte,
        name: "packet_get_byte",
        params: &[I],
        ret: I,
        doc: "payload byte at an offset",
    },
    BuiltinInfo {
        builtin: Builtin::PacketGetI64,
        name: "packet_get_i64",
        params: &[I],
        ret: I,
        doc: "little-endian i64 at a byte offset of the payload",
    },
    BuiltinInfo {
        builtin: Builtin::PacketGetF64,
        name: "packet_get_f64",
        params: &[I],
        ret: F,
        doc: "little-endian f64 at a byte offset of the payload",
    },
    BuiltinInfo {
        builtin: Builtin::AccLength,
        name: "acc_length",
        params: &[],
        ret: I,
        doc: "length of the accumulator area in bytes",
    },
    BuiltinInfo {
        builtin: Builtin::AccGetByte,
        name: "acc_get_byte",
        params: &[I],
        ret: I,
        doc: "accumulator byte at an offset",
    },
    BuiltinInfo {
        builtin: Builtin::AccGetI64,
        name: "acc_get_i64",
        params: &[I],
        ret: I,
        doc: "little-endian i64 at a byte offset of the accumulator",
    },
    BuiltinInfo {
        builtin: Builtin::AccGetF64,
        name: "acc_get_f64",
        params: &[I],
        ret: F,
        doc: "little-endian f64 at a byte offset of the accumulator",
    },
    BuiltinInfo {
        builtin: Builtin::AccSetByte,
        name: "acc_set_byte",
        params: &[I, I],
        ret: I,
        doc: "store the low 8 bits of a value at an accumulator offset",
    },
    BuiltinInfo {
        builtin: Builtin::AccSetI64,
        name: "acc_set_i64",
        params: &[I, I],
        ret: I,
        doc: "store an i64 at a byte offset of the accumulator",
    },
    BuiltinInfo {
        builtin: Builtin::AccSetF64,
        name: "acc_set_f64",
        params: &[I, F],
        ret: I,
        doc: "store an f64 at a byte offset of the accumulator",
    },
    BuiltinInfo {
        builtin: Builtin::GetSource,
        name: "mpi_get_source",
        params: &[],
        ret: I,
        doc: "rank the current packet came from (this rank if from the local host)",
    },
];

impl Builtin {
    /// The built-in with this id, if any.
    pub fn from_id(id: u8) -> Option<Builtin> {
        BUILTINS.get(usize::from(id)).map(|b| b.builtin)
    }

    /// Its table entry.
    pub fn info(self) -> &'static BuiltinInfo {
        // Ids are dense and the table is in id order (a unit test checks it);
        // the fallback keeps this total without a panic path.
        BUILTINS.get(self as usize).unwrap_or(&BUILTINS[0])
    }

    /// Number of arguments.
    pub fn arity(self) -> usize {
        self.info().params.len()
    }

    /// Looks a built-in up by source name.
    pub fn by_name(name: &str) -> Option<Builtin> {
        BUILTINS.iter().find(|b| b.name == name).map(|b| b.builtin)
    }
}

/// `NICVM_RESULT_SUCCESS`: the module is done; the packet takes its default path.
pub const NICVM_RESULT_SUCCESS: i64 = 0;
/// `NICVM_RESULT_PACKET_CONSUMED`: the module handled the packet; drop it.
pub const NICVM_RESULT_PACKET_CONSUMED: i64 = 1;
/// `NICVM_RESULT_FAILURE`: the module reports a failure; the packet takes its default path.
pub const NICVM_RESULT_FAILURE: i64 = -1;
/// `GM_ST_RELIABLE_NICVM_NIC_DATA`: a reliable packet for the peer's NIC module.
pub const GM_ST_RELIABLE_NICVM_NIC_DATA: i64 = 1;
/// `GM_ST_RELIABLE_NICVM_HOST_DATA`: a reliable packet for the peer's host.
pub const GM_ST_RELIABLE_NICVM_HOST_DATA: i64 = 2;

/// Named constants every module sees, with their values.
pub const CONSTANTS: &[(&str, i64)] = &[
    ("NICVM_RESULT_SUCCESS", NICVM_RESULT_SUCCESS),
    ("NICVM_RESULT_PACKET_CONSUMED", NICVM_RESULT_PACKET_CONSUMED),
    ("NICVM_RESULT_FAILURE", NICVM_RESULT_FAILURE),
    (
        "GM_ST_RELIABLE_NICVM_NIC_DATA",
        GM_ST_RELIABLE_NICVM_NIC_DATA,
    ),
    (
        "GM_ST_RELIABLE_NICVM_HOST_DATA",
        GM_ST_RELIABLE_NICVM_HOST_DATA,
    ),
];

/// Looks up a predefined constant.
pub fn constant(name: &str) -> Option<i64> {
    CONSTANTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_dense_and_in_id_order() {
        for (i, b) in BUILTINS.iter().enumerate() {
            assert_eq!(b.builtin as usize, i, "{}", b.name);
            assert_eq!(Builtin::from_id(i as u8), Some(b.builtin));
            assert_eq!(Builtin::by_name(b.name), Some(b.builtin));
        }
        assert_eq!(Builtin::from_id(BUILTINS.len() as u8), None);
        assert_eq!(Builtin::SendMessage.arity(), 2);
    }
}
