//! Outboard's offload engine: the control program of one node's NIC.
//!
//! **Sans-IO.** This crate has no threads, sockets, clocks or sleeps. An
//! [`Engine`] is driven from outside (see its driving contract): the
//! runtime drives it with a real clock and UDP, the simulator with virtual
//! time and a hardware cost model, the test network with a seeded lossy
//! wire. Time ([`Instant`]) and the only random value (`boot`) are injected.
//!
//! What lives here is every piece of offloaded protocol logic:
//!
//! - per-peer reliable connections (sequence numbers, window,
//!   cumulative piggybacked acknowledgements, Go-Back-N with backoff, peer
//!   failure, and failure notices so the whole job learns of a death);
//! - ports with GM-style send and receive tokens, incarnations
//!   (generations) so an old incarnation's traffic never reaches a new one,
//!   tagged matching with an unexpected-message queue;
//! - registered memory, directed sends (RDMA write) and RDMA reads, with
//!   keys and bounds checked before any byte moves;
//! - refusal and retry: a message for a port that is not open yet, or that
//!   finds no buffer, is refused and retried by its sender in stream order.
//!
//! - atomic fetch-and-add, swap and compare-and-swap on registered words,
//!   executed exactly once by the target engine (module `atomic`);
//! - collectives (barrier, reduction, broadcast) run by the engines among
//!   themselves from schedules the hosts install, with unexpected packets
//!   kept in a bounded pool (module [`coll`]).
//!
//! Host memory is reached only through the [`Dma`] trait. Commands and
//! events cross to an engine in another process as fixed slots of checked
//! bytes (module [`port_codec`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod api;
mod atomic;
pub mod coll;
mod config;
mod conn;
mod conn_table;
mod dma;
mod engine;
mod ids;
mod interrupt;
mod keepalive;
pub mod nicvm;
mod notice;
mod port;
mod port_closed;
pub mod port_codec;
mod rx;
mod stats;
mod subsystem;
mod time;
mod tokens;
mod tx;

pub use atomic::{AtomicOp, AtomicReturn, AtomicWidth, ATOMIC_WINDOW};
pub use api::{Command, CommandError, Completion, ConfigError, Event, Interrupt, OpError, OpenError, Transmit, ANNOUNCE_MAX};
pub use coll::{
    max_collective_command_len_for, max_collective_len_for, MAX_COLL_PIECES, CollError, NicCollStats, Datatype, Fold, GroupId, ReduceOp, Reduction,
    Schedule, ScheduleId, Step, MAX_FANOUT, MAX_STEPS, MemberList, MAX_GROUP_MEMBERS, MEMBER_RUN_LEN,
};
pub use config::DEFAULT_MTU;
pub use config::{incarnation, EngineConfig, PacketIntegrity, INCARNATION_RANDOM_BITS};
pub use outboard_wire::{JobSecret, SECRET_LEN};
pub use dma::{Dma, DmaFault, VecMemory};
pub use engine::Engine;
pub use ids::{Endpoint, Generation, HostBuf, NodeId, OpId, PortId, RecvMatch, LIBRARY_TAG_PREFIX};
pub use nicvm::{nicvm_match, nicvm_tag, CombineFailure, ModuleId, ModuleReport, NicvmError, NicvmLimits, MODULE_REPORT_LEN, NICVM_TAG, NICVM_TAG_FAILED, NICVM_TAG_NEW};
pub use stats::{MultiCopy, Stats, Work, STATS_WORDS};
pub use time::Instant;
pub use tokens::{TokenClass, TokenMirror};
pub use core::time::Duration;
