//! Collective operations offloaded to the engine: groups, schedules, and
//! the per-packet machinery that runs them (dissertation chapters 3 and 4).
//!
//! - A **group** is an ordered list of port incarnations (an MPI
//!   communicator) installed at each member's engine, with this member's
//!   rank. Its identifier is agreed by the members (the host library
//!   allocates it); packets name it.
//! - A **schedule** ([`Schedule`]) is one member's list of steps, computed
//!   by the host and installed once per group; collectives name it.
//! - Each collective started on a group takes the group's next **epoch**.
//!   Every member starts the group's collectives in the same order, so an
//!   epoch names the same operation everywhere, and consecutive or
//!   concurrent collectives never mix.
//! - A packet's **round** is its ordinal among the packets between the
//!   same two members in one collective ([`rounds`]): with the epoch and
//!   the sender's rank it names the one receive the packet is for. The
//!   host library's host-based runs number their messages the same way.
//! - Packets that arrive before their host started the collective (the
//!   dissertation's *unexpected* barrier messages, 3.2.1, and early
//!   reduction contributions, 4.2.1) are kept in a bounded pool; when it is
//!   full the sender is refused and retries later.

mod member_list;
pub(crate) mod proto;
mod reduce;
mod rounds;
pub(crate) mod run;
mod schedule;

use thiserror::Error;

pub use proto::NicCollStats;
pub use member_list::{MemberList, MAX_GROUP_MEMBERS, MEMBER_RUN_LEN};
pub use reduce::{Datatype, ReduceOp, Reduction};
pub use rounds::{rounds, Rounds};
pub use schedule::{Fold, Schedule, Step, MAX_FANOUT, MAX_STEPS};

/// Largest contribution one collective packet carries in datagrams of
/// `mtu` bytes: a longer command runs as consecutive collectives of at most
/// this size (its pieces), and all members of a group must split alike.
pub const fn max_collective_len_for(mtu: usize) -> u32 {
    (mtu - outboard_wire::HEADER_LEN - outboard_wire::COLL_FIXED_LEN) as u32
}

/// Most packets one `Collective` command carries: a longer contribution
/// runs as that many consecutive one-packet collectives under one command,
/// token and completion (see `Engine::max_collective_command_len`). It
/// bounds the engine memory one command can hold (one packet per piece).
/// Hosts cut longer data into several commands; all members of a group
/// must cut alike.
pub const MAX_COLL_PIECES: u32 = 64;

/// Largest contribution one `Collective` command takes in datagrams of
/// `mtu` bytes.
pub const fn max_collective_command_len_for(mtu: usize) -> u32 {
    max_collective_len_for(mtu) * MAX_COLL_PIECES
}

/// A group's identifier, agreed by its members (unique among the groups a
/// port belongs to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u64);

/// A schedule's number inside its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ScheduleId(pub u16);

/// Why a group, schedule or collective command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CollError {
    /// A member list or schedule in host memory is malformed.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// A rank beyond the group.
    #[error("rank {rank} outside a group of {size}")]
    RankOutOfRange {
        /// The rank.
        rank: u32,
        /// The group size.
        size: u32,
    },
    /// The member list does not name this port at the given rank.
    #[error("the member list does not name this port at its rank")]
    NotMember,
    /// The port already has a group with that identifier.
    #[error("group already exists on this port")]
    GroupExists,
    /// No group with that identifier on this port.
    #[error("no such group on this port")]
    NoSuchGroup,
    /// No schedule with that number in the group.
    #[error("no such schedule in the group")]
    NoSuchSchedule,
    /// The group still has collectives under way.
    #[error("the group has collectives under way")]
    GroupBusy,
    /// This member's collective and the one its peers run under the same
    /// epoch use different schedules: the members called different
    /// collectives (or the same with different roots) in the same place.
    #[error("the members called different collectives at the same place of the group's order (schedule {ours} here, {theirs} at a peer)")]
    ScheduleMismatch {
        /// The schedule this member's host asked for.
        ours: u16,
        /// The schedule the peers' packets carried.
        theirs: u16,
    },
    /// A bitwise operation on a floating-point type.
    #[error("operation not defined for the type")]
    BadReduction,
    /// Contributions of different lengths, or not whole elements.
    #[error("contribution of {got} bytes where {expected} were expected")]
    LengthMismatch {
        /// Expected length.
        expected: u32,
        /// Length found.
        got: u32,
    },
    /// A contribution larger than one packet can carry.
    #[error("contribution of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Requested length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A user-defined operator ([`ReduceOp::Module`]) folded outside an
    /// engine (a host-based run): only engines run modules.
    #[error("a module operator combines only on the engine")]
    EngineOnly,
    /// This member's engine could not combine a contribution with the
    /// module operator: the module ran out of fuel, trapped, reported
    /// failure, or is not loaded (in that generation). The collective goes
    /// on without combining, its packets flagged failed, so every member
    /// waiting for them completes with [`CollError::FailedUpstream`].
    #[error("module {module:#010x} failed to combine: {failure}")]
    ModuleFailed {
        /// The module's id.
        module: u32,
        /// What went wrong.
        failure: crate::nicvm::CombineFailure,
    },
    /// A packet this member needed came flagged failed: the collective
    /// failed at rank `rank` or before it - a combination on its way (see
    /// that member's [`CollError::ModuleFailed`]) or members that called
    /// different collectives ([`CollError::ScheduleMismatch`]). (A member
    /// that left or died is not this: its departure travels on the flagged
    /// packets, and fails the collective naming that member.)
    #[error("the collective failed at another member (a packet from rank {rank} said so): a module's operator failed there, or the members called different collectives at the same place of the group's order")]
    FailedUpstream {
        /// The sender of the flagged packet.
        rank: u32,
    },
}
