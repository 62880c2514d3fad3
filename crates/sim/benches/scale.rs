//! Scale and speed of the simulator (a plain benchmark that prints).
//!
//! 1. Event core: processes that only `compute`, so every event is a
//!    wake-up through the full loop (queue, RefCell, future poll) with no
//!    engine work: the simulator's own events per second.
//! 2. Full stack: the dissemination exchange (real engines, host library,
//!    cost model, wire) at 1,024 and 65,536 nodes: wall time, events per
//!    second and peak memory (VmHWM, whole process, so it only grows).
//!
//! `cargo bench -p outboard-sim --bench scale` (add `-- quick` to skip
//! 65,536 nodes).

use std::time::Instant;

use outboard_sim::experiments::dissemination;
use outboard_sim::{Dur, Profile, Simulation};

fn vm_hwm_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn mem() -> String {
    vm_hwm_mib().map(|m| format!("{m:.0} MiB")).unwrap_or_else(|| "n/a".into())
}

fn event_core() {
    let profile = Profile::builtin("dpu400");
    let procs = 1_000u32;
    let steps = 5_000u32;
    let mut sim = Simulation::new(&profile, 1, 1).unwrap();
    for i in 0..procs {
        sim.spawn(0, move |p| async move {
            for s in 0..steps {
                p.compute(Dur(1_000 + u64::from((i * 7 + s) % 13))).await;
            }
        });
    }
    let t = Instant::now();
    let r = sim.run().unwrap();
    let wall = t.elapsed().as_secs_f64();
    println!(
        "event core: {} events in {:.3} s wall = {:.2} M events/s (1,000 processes x 5,000 compute steps; peak RSS {})",
        r.stats.events,
        wall,
        r.stats.events as f64 / wall / 1e6,
        mem()
    );
}

fn dissemination_at(n: u32) {
    let profile = Profile::builtin("dpu400");
    let t = Instant::now();
    let (us, r) = dissemination::exchange(&profile, n, 0, 1, 1).unwrap();
    let wall = t.elapsed().as_secs_f64();
    println!(
        "dissemination {n} nodes ({} rounds, dpu400, 0 B): virtual {us:.3} us; wall {wall:.3} s; {} events ({:.2} M/s); {} engine calls ({:.2} M/s); {} packets; peak RSS {}",
        dissemination::rounds(n),
        r.stats.events,
        r.stats.events as f64 / wall / 1e6,
        r.stats.nic_inputs,
        r.stats.nic_inputs as f64 / wall / 1e6,
        r.stats.packets,
        mem()
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    event_core();
    dissemination_at(1_024);
    if !quick {
        dissemination_at(65_536);
    }
}
