//! The NICVM paper's Figure 2 broadcast as a real broadcast: every rank
//! loads the module (`crates/nicvm/modules/bcast.nvm`, compiled and
//! verified here, verified again by the engine), rank 0 hands each message
//! to its own engine's module, and the engines forward it down the binary
//! tree among themselves; the other ranks only receive. Each rank checks
//! every message arrived once, intact and unflagged, and that its module
//! ran once per message without an error.
//!
//! ```text
//! cargo build --release -p outboard-cli -p outboard-runtime --examples
//! target/release/outboard run -n 4 target/release/examples/nicvm_bcast [messages] [bytes]
//! ```

use outboard_host::nicvm::LoadOptions;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const BCAST: &str = include_str!("../../nicvm/modules/bcast.nvm");

fn main() -> outboard_runtime::Exit {
    job().into()
}

/// Joins the job, runs this rank's part, leaves the job.
fn job() -> Res<()> {
    let mut world = outboard_runtime::init()?;
    if let Err(e) = run(&mut world) {
        eprintln!("{}", world.failure_report(&*e));
        world.abort(1);
    }
    world.finalize()?;
    Ok(())
}

fn message(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 7 + k) as u8).collect()
}

fn run(world: &mut outboard_runtime::World) -> Res<()> {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let len: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1024);
    let (rank, size) = (world.rank(), world.size());
    let mut g = world.group()?;
    let m = world.port().nicvm_load(&mut g, "bcast", BCAST, LoadOptions::default())?;
    // Not needed for correctness (an engine refuses packets for a module it
    // has not loaded yet, and the sender retries), but it keeps the timing
    // free of retries.
    world.barrier()?;
    let start = std::time::Instant::now();
    for k in 0..count {
        if rank == 0 {
            if world.port().nicvm_send(&mut g, &m, 0, 0, &message(k, len))? {
                return Err("the root's module failed".into());
            }
        } else {
            let d = world.port().nicvm_recv(&m, len as u32)?;
            if d.failed || d.data != message(k, len) {
                return Err(format!("rank {rank}: message {k} wrong (failed {})", d.failed).into());
            }
        }
    }
    let elapsed = start.elapsed();
    world.barrier()?;
    let report = world.port().nicvm_list()?.into_iter().find(|r| r.name == "bcast").ok_or("module gone")?;
    // One invocation per message at each port the engine serves (a node
    // engine runs one copy of the module for all of its node's ranks).
    if report.invocations != count * u64::from(world.engine_ports()) || report.errors() != 0 {
        return Err(format!("rank {rank}: module report {report:?}").into());
    }
    let module = world.stats().1.module_time;
    println!(
        "rank {rank}: {count} x {len} B through the module, {} VM instructions, no errors; {:.1} us in {} engine calls that ran them",
        report.instructions,
        module.ns as f64 / 1e3,
        module.calls
    );
    if rank == 0 {
        println!("{size} ranks: {:.1} us per broadcast (root's view)", elapsed.as_secs_f64() * 1e6 / count as f64);
    }
    Ok(())
}
