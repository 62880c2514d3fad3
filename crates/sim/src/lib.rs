//! Outboard's discrete-event simulator: a deterministic, hardware-costed
//! cluster that drives the real [`outboard_engine::Engine`] and the real
//! host library ([`outboard_host`]) in virtual time.
//!
//! No protocol logic lives here. Each simulated node has a NIC that runs the
//! engine as a serialised resource (every engine call's reported work is
//! turned into busy time by a hardware [`Profile`]), a host on which
//! processes written as ordinary async Rust call the host library through
//! [`SimIo`], and two edge links into a cut-through switch fabric with
//! per-link queues. Loss, duplication, corruption, reordering and node
//! death come from one seeded RNG; every container is ordered and ties in
//! the event queue go by insertion order, so a seed and its inputs give
//! bit-identical results.
//!
//! Layers, one module each: [`time`] (picosecond clock), [`queue`] (event
//! queue), [`profile`] (data files) and [`cost`] (charges), [`wire`]
//! (links, switches, faults), `nic` (the engine as a resource), [`process`]
//! (simulated processes and their port interface), [`sim`] (the event loop),
//! [`experiments`] (the papers' figures) with [`paper`] (the quoted numbers) and [`calibration`] (which of them
//! were fitted on)
//! and [`plot`] (SVG).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod calibration;
pub mod cost;
pub mod experiments;
mod nic;
pub mod paper;
pub mod plot;
pub mod process;
pub mod profile;
pub mod qsnet;
pub mod queue;
pub mod reproduce;
pub mod sim;
pub mod time;
pub mod wire;
mod world;

pub use process::{Proc, SimIo};
pub use profile::{Profile, ProfileError};
pub use sim::{RunReport, SimError, Simulation};
pub use time::{Dur, Time};
pub use world::SimStats;
