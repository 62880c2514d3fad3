//! QsNet (Petrini et al., seed 001) as a network model: Elite switches in a
//! quaternary fat tree with two virtual channels per link and adaptive
//! up-routing, hardware multicast serialised at its root switch with
//! combined acknowledgements (worst status wins), remote test-and-write
//! and fetch-and-add, the Elan3's DMA engine, inputter and thread
//! processor as serialised resources, Elanlib's barriers and broadcasts,
//! and background traffic.
//!
//! This is switch behaviour Outboard's own network does not have, so it
//! lives here and not in the engine: Elanlib's algorithms run on the model
//! Elan's thread processor, charged by `data/qsnet-elan3.toml`, on top of
//! the `elan3` profile's wire and host costs. It has its own event loop
//! (picoseconds, ties in scheduling order) and is seeded like the rest of
//! the simulator: a seed gives the same figures.
//!
//! One module per job: [`topology`] (the tree), [`txn`] (transactions,
//! statuses, memory), [`fabric`] (circuits, multicast, acks, events),
//! [`params`], [`noise`] (hosts' OS noise), [`traffic`] (background
//! generators), [`elanlib`] (the measured collectives), [`world`] (the
//! loop), [`stats`] (distributions). The experiments are in
//! `experiments/qsnet.rs`.

pub mod elanlib;
pub mod fabric;
pub mod noise;
pub mod params;
pub mod stats;
pub mod topology;
pub mod traffic;
pub mod txn;
pub mod world;

use crate::profile::Profile;
use elanlib::{Algo, Elanlib};
use fabric::{Fabric, FabricStats};
use params::Params;
use traffic::{Pattern, Traffic};
use txn::Status;

/// One measured run.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Nodes (one benchmark process each, plus a traffic process if any).
    pub nodes: u32,
    /// What is measured.
    pub algo: Algo,
    /// Consecutive operations.
    pub iters: u32,
    /// Background traffic.
    pub traffic: Option<Pattern>,
    /// Broadcast buffers in main memory (else Elan memory).
    pub main_memory: bool,
    /// Seed.
    pub seed: u64,
    /// Chance a packet is corrupted on a link.
    pub loss: f64,
    /// Dead nodes.
    pub dead: Vec<u32>,
}

impl Setup {
    /// `iters` operations of `algo` on `nodes` nodes, empty network.
    pub fn new(nodes: u32, algo: Algo, iters: u32, seed: u64) -> Setup {
        Setup { nodes, algo, iters, traffic: None, main_memory: false, seed, loss: 0.0, dead: Vec::new() }
    }

    /// `count` distinct dead nodes other than the root, drawn from the seed.
    pub fn with_dead_from_seed(mut self, count: u32) -> Setup {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed ^ 0x4445_4144_0000_0004);
        let mut others: Vec<u32> = (1..self.nodes).collect();
        others.shuffle(&mut rng);
        self.dead = others.into_iter().take(count as usize).collect();
        self.dead.sort_unstable();
        self
    }
}

/// What a run gave.
#[derive(Debug, Clone)]
pub struct Result {
    /// Per-operation times (us), root exit to root exit.
    pub times_us: Vec<f64>,
    /// The status an operation failed with, if one did.
    pub failed: Option<Status>,
    /// Whether every operation completed.
    pub completed: bool,
    /// Probes the hardware barrier's root sent.
    pub probes: u64,
    /// Background packets acknowledged.
    pub background: u64,
    /// Fabric counters.
    pub fabric: FabricStats,
}

/// Runs `setup` with `profile`'s costs and the QsNet table.
pub fn run(profile: &Profile, setup: &Setup) -> Result {
    run_with(Params::new(profile), setup)
}

/// Runs `setup` with the given parameters.
pub fn run_with(p: Params, setup: &Setup) -> Result {
    let mut f = Fabric::new(setup.nodes, p, setup.seed, setup.loss, &setup.dead);
    let mut bench = Elanlib::start(&mut f, 0, setup.algo, setup.iters, setup.main_memory, setup.seed);
    let mut bg = setup.traffic.map(|pat| Traffic::start(&mut f, 1, pat, setup.seed));
    let completed = match bg.as_mut() {
        Some(t) => world::run(&mut f, &mut [&mut bench, t], 0),
        None => world::run(&mut f, &mut [&mut bench], 0),
    } && bench.failed.is_none();
    Result {
        times_us: bench.op_times_us(),
        failed: bench.failed,
        completed,
        probes: bench.probes,
        background: bg.map_or(0, |t| t.delivered),
        fabric: f.stats.clone(),
    }
}

#[cfg(test)]
mod tests;
