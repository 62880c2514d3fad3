//! Real execution of Outboard: each node's engine on a thread of its own
//! (the "NIC"), UDP between engines, lock-free rings between the host
//! library and the engine, real-memory DMA, and the bootstrap that lets a
//! job's processes find each other under `outboard run`, `mpirun`, Hydra or
//! Slurm.
//!
//! The pieces, each in its own module:
//!
//! - [`ring`]: bounded single-producer single-consumer rings, the host's
//!   send and completion queues, model-checked with loom; with
//!   [`interrupt`] and [`shm`], one of the three modules that hold
//!   `unsafe` code;
//! - [`memory`]: DMA-reachable host memory the runtime allocates, so that
//!   every address the engine is given is checked against live buffers;
//! - [`shm`]: shared memory between a client process and a node's engine
//!   process - memfd segments, rings of byte slots in them, and the
//!   client's allocator of registered memory; the peer is untrusted;
//! - `driver`: one turn of the sans-IO engine's driving contract over a
//!   non-blocking UDP socket and the rings;
//! - [`Node`]: the engine thread and its [`Progress`] policy (dedicated,
//!   spin-then-block, host-assisted);
//! - `wait_pacer`: when a waiting host under host-assisted progress stops
//!   spinning and sleeps (after the kernel preempted it: a loaded machine);
//! - [`interrupt`]: delivery of the engine's selective interrupts to an
//!   application-bypass port - a realtime signal to the application
//!   thread, or a progress thread woken through an eventfd;
//! - [`RtPort`]: the host library's [`outboard_host::PortIo`] over the rings,
//!   so the same host code runs here and in the simulator;
//! - [`bootstrap`]: the PMI-style exchange and the launcher environments;
//! - [`init`] / [`World`]: joining a job.
//!
//! ```no_run
//! let mut world = outboard_runtime::init()?;
//! let next = world.endpoint((world.rank() + 1) % world.size());
//! world.port().send(next, 7, b"hello")?;
//! let (_src, _tag, data) = world.port().recv(outboard_host::RecvMatch::tag(7), 64)?;
//! assert_eq!(data, b"hello");
//!
//! // Collectives on the group of every rank, offloaded to the engines:
//! let mut g = world.group()?;
//! use outboard_host::{BarrierAlgorithm, Mode};
//! world.port().barrier(&mut g, Mode::Offloaded, BarrierAlgorithm::Dissemination)?;
//! world.finalize()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
// Unsafe code is allowed in `ring`, `interrupt` (signals, eventfd),
// `bootstrap::pmix` (libpmix loaded at run time), `bootstrap::pmi1` (the
// inherited PMI_FD), `shm::segment` (the shared mapping) and
// `node_engine::socket` (descriptors received from another process) only, each with `#![allow(unsafe_code)]`
// (and in the `shm::ring` test that adopts an fd inherited across exec).
#![deny(unsafe_code)]

pub mod address;
pub mod affinity;
pub mod bootstrap;
mod clock;
mod driver;
mod engine_handle;
mod exit;
mod failure;
pub mod interrupt;
pub mod memory;
mod module_time;
mod node;
pub mod node_engine;
mod node_settings;
mod outstanding;
mod port;
mod progress;
pub mod ring;
pub mod node_coll;
pub mod node_p2p;
pub mod shm;
mod stats_table;
mod udp_batch;
mod wait_pacer;
mod world;

pub use clock::Clock;
pub use exit::Exit;
pub use driver::TransportStats;
pub use module_time::ModuleTime;
pub use node::{bind_udp, random_u64, udp_engine_defaults, Node, NodeError};
pub use port::RtPort;
pub use progress::{machine_cores, ParseProgressError, Progress};
pub use world::{init, init_with, init_with_bootstrap, random_secret, InitError, Options, World, LEAVE_LINGER, WORLD_GROUP_FIRST};
