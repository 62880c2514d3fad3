//! Outboard's C ABI: what a C program (or the MPI interposition library,
//! `liboutboard_mpi`) links to use the runtime and the host library.
//!
//! Every object is an opaque handle (`outboard_world`, `outboard_group`,
//! `outboard_request`, `outboard_mem`); every function is `outboard_`
//! prefixed, returns an `int` error code (`OUTBOARD_OK`, 0, on success) and
//! leaves a message for [`outboard_last_error`] on failure. No Rust panic
//! crosses the boundary: one becomes `OUTBOARD_ERR_PANIC`. A world is
//! behind a mutex, so the handles may be used from several threads (calls
//! on one world are serialised).
//!
//! - `error`: codes, messages, the guard every function runs in.
//! - `world`: init (environment or the program's own allgather), finalize.
//! - `group`: world group, split, free, mode.
//! - `coll`: barrier, broadcast, reduce, allreduce, blocking and split-phase.
//! - `bypass`: application bypass on a group's broadcasts and reduces, and
//!   the engine's interrupts that drive it.
//! - `p2p`: tagged send and receive.
//! - `mem`: registered memory and RDMA.
//! - `atomic`: remote and local atomics, the MCS lock.
//! - `nicvm`: NICVM modules: compile, load, replace, purge, list, send,
//!   receive, and reduction operators whose combine step is a module.
//! - `request`: test and wait of every split-phase operation.
//! - `settings`: the `OUTBOARD_*` settings, read and checked with the
//!   runtime's parsers (for the PMPI library's C code).
//!
//! `include/outboard.h` is generated from this crate by cbindgen (the
//! `header` test fails when it is stale).
#![allow(non_camel_case_types)]
// Every `extern "C"` function checks its pointers for null and documents
// what else it expects of them; clippy's per-function lint would only
// repeat that.
#![allow(clippy::missing_safety_doc)]

mod atomic;
mod bypass;
mod coll;
mod error;
mod group;
mod mem;
mod movement;
mod nicvm;
mod p2p;
mod request;
mod settings;
mod span;
mod world;

pub use atomic::*;
pub use bypass::{OUTBOARD_REDUCE_BYPASS, OUTBOARD_REDUCE_GROUP_MODE};
pub use coll::*;
pub use error::*;
pub use group::*;
pub use mem::*;
pub use movement::*;
pub use nicvm::*;
pub use p2p::*;
pub use request::*;
pub use settings::*;
pub use world::*;
