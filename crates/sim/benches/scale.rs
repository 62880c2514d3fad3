//! Scale and speed of the simulator (a plain benchmark that prints).
//!
//! 1. Event core: processes that only `compute`, so every event is a
//!    wake-up through the full loop (queue, RefCell, future poll) with no
//!    engine work: the simulator's own events per second.
//! 2. Full stack: barrier, allreduce (8 B) and broadcast (8 B, 64 KiB),
//!    host-based and offloaded, on the `dpu400` profile at 1,024, 16,384 and
//!    65,536 nodes (real engines, host library, cost model, wire). Each
//!    point runs in a child process of its own, so its peak memory (VmHWM)
//!    is its own: bytes per node = (peak - the child's resident size before
//!    the simulation was built) / nodes. Every process runs one collective
//!    to install the group and schedule, then `TIMED` more; the wall time
//!    per collective is the wall time from the moment the last process
//!    finished the first one to the moment the last finished them all,
//!    divided by `TIMED` (the simulator runs events in virtual-time order,
//!    so that stretch is the simulation of the timed collectives; at 1,024
//!    nodes, 10 timed collectives, and the median of 5 runs). Events
//!    per second are of the whole run: every event the simulation took off
//!    its queue (packet arrivals, NIC inputs, timers, process wake-ups)
//!    over the whole run's wall time, set-up included.
//!
//! `cargo bench -p outboard-sim --bench scale` (`-- quick`: 1,024 nodes
//! only; `-- huge`: also 1,048,576 nodes, offloaded allreduce and
//! broadcast of 8 B; a collective's name, e.g. `bcast-64KiB`: only that
//! one; `full-memory`: node memories hold every payload byte, instead of
//! keeping large buffers as runs of equal bytes,
//! `Simulation::compact_payloads`).
//! LogGOPSim (Hoefler et al., HPDC 2010) reports over a million events per
//! second and runs of 8 million processes on one machine; its events are
//! LogGOPS message events without protocol state, ours are engine inputs.

use std::cell::Cell;
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use outboard_host::{Mode, TreeShape};
use outboard_sim::experiments::coll::{run_all_in, sum_of};
use outboard_sim::{Dur, Profile, Simulation};

/// Collectives timed after the first (one at 1,048,576 nodes).
const TIMED: u32 = 3;
/// At 1,024 nodes a point takes well under a second, so it runs with
/// `SMALL_TIMED` timed collectives, `SMALL_RUNS` times, and the row is the
/// run of median wall time per collective: on a shared machine single
/// runs of the same point vary by half (other tenants' use of the caches
/// the simulated nodes' state lives in).
const SMALL_TIMED: u32 = 10;
const SMALL_RUNS: usize = 5;

fn proc_status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
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
        "event core: {} events in {:.3} s wall = {:.2} M events/s (1,000 processes x 5,000 compute steps)",
        r.stats.events,
        wall,
        r.stats.events as f64 / wall / 1e6,
    );
}

/// The collectives measured.
#[derive(Debug, Clone, Copy)]
enum Coll {
    Barrier,
    Allreduce8,
    Bcast8,
    Bcast64K,
}

impl Coll {
    const ALL: [Coll; 4] = [Coll::Barrier, Coll::Allreduce8, Coll::Bcast8, Coll::Bcast64K];

    fn name(self) -> &'static str {
        match self {
            Coll::Barrier => "barrier",
            Coll::Allreduce8 => "allreduce-8B",
            Coll::Bcast8 => "bcast-8B",
            Coll::Bcast64K => "bcast-64KiB",
        }
    }

    fn parse(s: &str) -> Option<Coll> {
        Coll::ALL.into_iter().find(|c| c.name() == s)
    }
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::HostBased => "host",
        Mode::Offloaded => "offloaded",
    }
}

/// Wall and CPU time of this process, and the simulation's virtual time,
/// as a set of stamps.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    wall: Instant,
    cpu_s: f64,
    virtual_us: f64,
}

impl Stamp {
    fn now(virtual_us: f64) -> Stamp {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        let cpu_s = if rc == 0 { ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9 } else { f64::NAN };
        Stamp { wall: Instant::now(), cpu_s, virtual_us }
    }

    /// (wall s, CPU s, virtual us) since `earlier`.
    fn since(self, earlier: Stamp) -> (f64, f64, f64) {
        (self.wall.duration_since(earlier.wall).as_secs_f64(), self.cpu_s - earlier.cpu_s, self.virtual_us - earlier.virtual_us)
    }
}

/// Counts one more process past a point; the last one stamps the time.
fn mark(c: &(Cell<u32>, Cell<Option<Stamp>>), nodes: u32, virtual_us: f64) {
    c.0.set(c.0.get() + 1);
    if c.0.get() == nodes {
        c.1.set(Some(Stamp::now(virtual_us)));
    }
}

/// One point, in this process: prints one `point ...` line.
fn one(coll: Coll, mode: Mode, nodes: u32, timed: u32, compact: bool) {
    let rss_before = proc_status_kib("VmRSS:").unwrap_or(0);
    let profile = Profile::builtin("dpu400");
    // (processes done with the first collective, wall time when the last
    // was), (done with all, wall time then).
    let warm = Rc::new((Cell::new(0u32), Cell::new(None::<Stamp>)));
    let done = Rc::new((Cell::new(0u32), Cell::new(None::<Stamp>)));
    let t = Stamp::now(0.0);
    let len = match coll {
        Coll::Bcast64K => 65_536,
        _ => 8,
    };
    let others = Rc::new(vec![0u8; len]);
    let mut sim = Simulation::with_config(&profile, nodes, 1, |c| c.max_ports = 1).expect("a simulation");
    if compact {
        sim.compact_payloads();
    }
    let report = run_all_in(sim, nodes, |p, rank, mut port, mut g| {
        let (warm, done, others) = (warm.clone(), done.clone(), others.clone());
        async move {
            let d = g.defaults();
            // The root's message; the others pass one shared buffer of the
            // same length (its contents are ignored), as a real program
            // would pass its receive buffer, without a copy per node here.
            let data: Rc<Vec<u8>> = if rank == 0 { Rc::new(vec![7u8; len]) } else { others.clone() };
            for i in 0..=timed {
                let req = match coll {
                    Coll::Barrier => port.start_barrier(&mut g, mode, d.barrier)?,
                    Coll::Allreduce8 => {
                        port.start_allreduce(&mut g, mode, d.allreduce, sum_of(false), &(i64::from(rank)).to_ne_bytes())?
                    }
                    Coll::Bcast8 | Coll::Bcast64K => port.start_bcast(&mut g, mode, TreeShape::Binomial, 0, &data)?,
                };
                let out = p.coll_wait(&mut port, req).await?;
                match coll {
                    Coll::Allreduce8 => {
                        let n = i64::from(nodes);
                        assert_eq!(out, (n * (n - 1) / 2).to_ne_bytes(), "allreduce result");
                    }
                    Coll::Bcast8 | Coll::Bcast64K => assert!(out.len() == len && out.iter().all(|&b| b == 7), "broadcast result"),
                    Coll::Barrier => {}
                }
                if i == 0 {
                    mark(&warm, nodes, p.now().as_us());
                }
            }
            mark(&done, nodes, p.now().as_us());
            Ok(())
        }
    })
    .unwrap_or_else(|e| panic!("{} {} {nodes}: {e}", coll.name(), mode_name(mode)));
    let (wall, cpu, _) = Stamp::now(report.end.as_us()).since(t);
    let peak = proc_status_kib("VmHWM:").unwrap_or(0);
    let (per_coll, per_coll_cpu, virtual_us) = match (warm.1.get(), done.1.get()) {
        (Some(a), Some(b)) => {
            let (w, c, v) = b.since(a);
            let k = f64::from(timed);
            (w / k, c / k, v / k)
        }
        _ => (f64::NAN, f64::NAN, f64::NAN),
    };
    println!(
        "point coll={} mode={} nodes={} virtual_us={:.3} per_coll_s={:.6} per_coll_cpu_s={:.6} wall_s={:.3} cpu_s={:.3} events={} peak_kib={} bytes_per_node={:.0}",
        coll.name(),
        mode_name(mode),
        nodes,
        virtual_us,
        per_coll,
        per_coll_cpu,
        wall,
        cpu,
        report.stats.events,
        peak,
        (peak.saturating_sub(rss_before) as f64 * 1024.0) / f64::from(nodes),
    );
}

/// One field of a `point ...` line.
fn point_field(line: &str, k: &str) -> String {
    line.split_whitespace().find_map(|f| f.strip_prefix(k).and_then(|v| v.strip_prefix('='))).unwrap_or("?").to_string()
}

/// Runs one point in a child process `runs` times; its `point ...` line
/// of median wall time per collective, or the error of the first run that
/// printed none.
fn run_point(coll: Coll, mode: Mode, nodes: u32, timed: u32, compact: bool, runs: usize) -> Result<String, String> {
    let exe = std::env::current_exe().expect("own path");
    let mut lines = Vec::new();
    for _ in 0..runs {
        let out = Command::new(&exe)
            .args(["one", coll.name(), mode_name(mode), &nodes.to_string(), &timed.to_string(), if compact { "compact" } else { "full" }])
            .output()
            .expect("run a child");
        let text = String::from_utf8_lossy(&out.stdout);
        match text.lines().find(|l| l.starts_with("point ")) {
            Some(l) => lines.push(l.to_string()),
            None => return Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").to_string()),
        }
    }
    let wall = |l: &String| point_field(l, "per_coll_s").parse::<f64>().unwrap_or(f64::NAN);
    lines.sort_by(|a, b| wall(a).total_cmp(&wall(b)));
    Ok(lines.swap_remove(lines.len() / 2))
}

/// Runs one point in a child process (several times at 1,024 nodes and
/// below) and prints its row.
fn measure(coll: Coll, mode: Mode, nodes: u32, timed: u32, compact: bool) {
    let (timed, runs) = if nodes <= 1_024 { (SMALL_TIMED, SMALL_RUNS) } else { (timed, 1) };
    let line = match run_point(coll, mode, nodes, timed, compact, runs) {
        Ok(l) => l,
        Err(e) => {
            println!("{:<13} {:<9} {:>9}  FAILED: {e}", coll.name(), mode_name(mode), nodes);
            return;
        }
    };
    let field = |k: &str| point_field(&line, k);
    let num = |k: &str| field(k).parse::<f64>().unwrap_or(f64::NAN);
    println!(
        "{:<13} {:<9} {:>9} {:>11.2} {:>9.1} {:>9.1} {:>8.2} {:>8.2} {:>10} {:>8.2} {:>9.0} {:>8.0}",
        coll.name(),
        mode_name(mode),
        nodes,
        num("virtual_us"),
        num("per_coll_s") * 1e3,
        num("per_coll_cpu_s") * 1e3,
        num("wall_s"),
        num("cpu_s"),
        field("events"),
        num("events") / num("wall_s") / 1e6,
        num("peak_kib") / 1024.0,
        num("bytes_per_node"),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("one") {
        let coll = Coll::parse(&args[1]).expect("a collective name");
        let mode = if args[2] == "host" { Mode::HostBased } else { Mode::Offloaded };
        let compact = args.get(5).map(String::as_str) != Some("full");
        one(coll, mode, args[3].parse().expect("a node count"), args[4].parse().expect("a count of timed collectives"), compact);
        return;
    }
    let quick = args.iter().any(|a| a == "quick");
    let huge = args.iter().any(|a| a == "huge");
    // Node memories keep large buffers as runs of equal bytes
    // (`Simulation::compact_payloads`) unless `full-memory` is given.
    let compact = !args.iter().any(|a| a == "full-memory");
    let only: Option<Coll> = args.iter().find_map(|a| Coll::parse(a));
    event_core();
    println!(
        "{:<13} {:<9} {:>9} {:>11} {:>9} {:>9} {:>8} {:>8} {:>10} {:>8} {:>9} {:>8}",
        "collective", "mode", "nodes", "virtual us", "ms/coll", "cpu ms", "run s", "cpu s", "events", "M ev/s", "peak MiB", "B/node"
    );
    let sizes: &[u32] = if quick { &[1_024] } else { &[1_024, 16_384, 65_536] };
    for &n in sizes {
        for coll in Coll::ALL.into_iter().filter(|c| only.is_none_or(|o| o.name() == c.name())) {
            for mode in [Mode::HostBased, Mode::Offloaded] {
                measure(coll, mode, n, TIMED, compact);
            }
        }
    }
    if huge {
        // The dissemination barrier keeps about 40 connections per node at
        // this size (30 GB): the tree collectives fit this machine's 24 GB.
        for coll in [Coll::Allreduce8, Coll::Bcast8] {
            measure(coll, Mode::Offloaded, 1 << 20, 1, compact);
        }
    }
    println!("virtual us: simulated time per timed collective (as the wall time; {TIMED} timed, {SMALL_TIMED} at 1,024 nodes (the median of {SMALL_RUNS} runs), 1 at 1,048,576 nodes); ms/coll and cpu ms: wall and CPU time per timed collective (see the file's doc); M ev/s: events over the run's wall time");
}
