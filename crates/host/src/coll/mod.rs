//! Collective operations for the host library: groups, trees and
//! schedules computed on the host, and two ways to run the same schedule -
//! **offloaded** (installed at the engine, which runs it packet by packet)
//! and **host-based** (the host runs it over tagged point-to-point messages,
//! advancing only while the application is inside the library).
//!
//! - [`tree`]: spanning trees (binomial, k-ary, chain, or any parent list).
//! - [`schedules`]: per-rank schedules for barrier, reduce, allreduce and
//!   broadcast, and the floating-point order they fix.
//! - [`reference`]: a sequential evaluator of schedules, the tests' oracle.
//! - `group`: [`Group`], its schedule cache and group-id allocation.
//! - `options`: the modes, algorithms and tree shapes a call names.
//! - `hostbased` / `offload`: the two executors of schedules;
//!   `nicassist`: NIC-assisted broadcast (hosts re-send with one
//!   multi-send per piece); `run`: the one trait over the three, and how
//!   a call's mode starts one.
//! - `setup`: groups registered at the port and installed at the engine.
//! - `api`: the split-phase calls on [`crate::Port`].
//! - `movement`: allgather, gather, scatter, alltoall, reduce-scatter and
//!   the scans, on the same schedules and both modes.
//! - `split`: `Port::split` (MPI_Comm_split).

mod api;
pub(crate) mod blocks;
mod group;
mod hostbased;
mod movement;
mod nicassist;
mod offload;
mod options;
pub mod reference;
mod run;
pub mod schedules;
mod setup;
mod split;
pub mod tree;

#[cfg(test)]
mod tests;

use outboard_engine::{CollError, GroupId};
use thiserror::Error;

pub(crate) use api::CollState;
pub use api::CollRequest;
pub use movement::{Layout, PLACE};
pub use options::{
    AllreduceAlgorithm, BarrierAlgorithm, BarrierProtocol, BcastMode, CollDefaults, Mode, ReduceAlgorithm, TreeShape,
};
pub use group::{describe_allreduce, describe_reduce, describe_barrier, describe_schedule, describe_tree, Group, APP_GROUP_ID_LIMIT, LEADERS_GROUP_FIRST, SPLIT_GROUP_IDS, UNDEFINED};
pub use tree::Tree;

/// Why a collective call was refused by the host library (errors the
/// engine reports arrive as [`crate::OpError::Collective`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CollectiveError {
    /// A group needs at least one member.
    #[error("a group needs at least one member")]
    EmptyGroup,
    /// The rank is not inside the group.
    #[error("rank {rank} outside a group of {size}")]
    RankOutOfRange {
        /// The rank.
        rank: u32,
        /// The group size.
        size: u32,
    },
    /// A root outside the group.
    #[error("root {root} outside a group of {size}")]
    RootOutOfRange {
        /// The root.
        root: u32,
        /// The group size.
        size: u32,
    },
    /// The member list names a port twice.
    #[error("the member list names a port twice")]
    DuplicateMember,
    /// The group's entry at its rank is not this port.
    #[error("the group's member at its rank is not this port")]
    NotMember,
    /// Application-chosen group ids must stay below
    /// [`APP_GROUP_ID_LIMIT`]; the ids above are allocated by `split`.
    #[error("group id {0:?} is outside the application range")]
    GroupIdOutOfRange(GroupId),
    /// Another group with the same id but different members is in use at
    /// this port.
    #[error("group id {0:?} is already used by another group at this port")]
    GroupIdInUse(GroupId),
    /// `split` found no group id free at every member.
    #[error("no group id is free at every member")]
    NoFreeGroupId,
    /// A group has used all 32,768 schedule numbers handed out by first use
    /// (trees other than binomial, binomial roots from 8,192 up).
    #[error("the group has no schedule number left")]
    TooManySchedules,
    /// A host-based collective's message came from a member running
    /// another schedule: the members called different collectives (or one
    /// with different roots) at the same place of the group's order.
    #[error("the members called different collectives at the same place of the group's order: this member {}, a peer another", describe_schedule(*ours))]
    Mismatch {
        /// This member's schedule number.
        ours: u16,
    },
    /// Blocks of a gather, scatter, allgather or reduce-scatter that
    /// overlap, hold partial elements, or are not one per member.
    #[error("bad block layout: {0}")]
    BadLayout(&'static str),
    /// A tree that is not a spanning tree, or a degree of 0.
    #[error("bad tree: {0}")]
    BadTree(&'static str),
    /// A NIC-assisted broadcast would need more pieces than its tags can
    /// number: use a larger chunk.
    #[error("{chunks} pieces, at most {max}: use a larger chunk")]
    TooManyChunks {
        /// Pieces the chunk size gives.
        chunks: u32,
        /// The most one broadcast may have.
        max: u32,
    },
    /// Data whose length does not fit the operation (a broadcast of a
    /// different length, a message of the wrong length in a host-based
    /// collective), or a bad reduction.
    #[error(transparent)]
    Engine(#[from] CollError),
}
