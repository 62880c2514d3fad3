//! A user-defined reduction operator on the engines: every rank loads
//! `crates/nicvm/modules/combine_max_i64.nvm` and runs offloaded
//! allreduces whose combine step is that module, then the same with the
//! engine's built-in MAX. Each rank checks every result against a Rust
//! reference (the element-wise maximum of every rank's vector, which each
//! rank can compute), and prints the time per allreduce of both and its
//! engine's module time.
//!
//! ```text
//! cargo build --release -p outboard-cli -p outboard-runtime --examples
//! target/release/outboard run -n 4 target/release/examples/nicvm_allreduce [iterations] [elements]
//! ```

use outboard_host::nicvm::LoadOptions;
use outboard_host::{AllreduceAlgorithm, Datatype, Mode, ReduceOp, Reduction};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MAX: &str = include_str!("../../nicvm/modules/combine_max_i64.nvm");

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

/// Rank `rank`'s vector in iteration `k`: values that differ by rank, so
/// the maximum comes from different ranks element by element.
fn contribution(rank: u32, k: u64, n: usize) -> Vec<i64> {
    (0..n).map(|i| ((i as i64 * 7919 + k as i64 * 31 + i64::from(rank) * 104_729) % 1_000_003) - 500_000).collect()
}

fn bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn run(world: &mut outboard_runtime::World) -> Res<()> {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(64);
    for line in check(world, count, n)? {
        println!("{line}");
    }
    Ok(())
}

/// Runs `count` allreduces of `n` elements with each operator, checking
/// every result; what to print (this rank's counters; rank 0's timings).
pub fn check(world: &mut outboard_runtime::World, count: u64, n: usize) -> Res<Vec<String>> {
    let (rank, size) = (world.rank(), world.size());
    let mut g = world.group()?;
    let m = world.port().nicvm_load(&mut g, "combine_max_i64", MAX, LoadOptions::default())?;
    world.barrier()?;
    let algo = AllreduceAlgorithm::default();
    let builtin = Reduction { op: ReduceOp::Max, dtype: Datatype::I64 };
    let mut times = [0.0f64; 2];
    for (which, t) in times.iter_mut().enumerate() {
        let start = std::time::Instant::now();
        for k in 0..count {
            let want: Vec<i64> =
                (0..n).map(|i| (0..size).map(|r| contribution(r, k, n)[i]).max().unwrap_or(0)).collect();
            let data = bytes(&contribution(rank, k, n));
            let got = if which == 0 {
                world.port().nicvm_allreduce(&mut g, &m, Datatype::I64, algo, &data)?
            } else {
                world.port().allreduce(&mut g, Mode::Offloaded, algo, builtin, &data)?
            };
            if got != bytes(&want) {
                return Err(format!("rank {rank}: allreduce {k} ({}) differs from the reference", ["module", "built-in"][which]).into());
            }
        }
        *t = start.elapsed().as_secs_f64() * 1e6 / count as f64;
        world.barrier()?;
    }
    let report = world.port().nicvm_list()?.into_iter().find(|r| r.name == "combine_max_i64").ok_or("module gone")?;
    if report.errors() != 0 {
        return Err(format!("rank {rank}: module report {report:?}").into());
    }
    let module = world.stats().1.module_time;
    let mut lines = vec![format!(
        "rank {rank}: {} combines, {} VM instructions, {:.1} us in {} engine calls that ran them",
        report.invocations,
        report.instructions,
        module.ns as f64 / 1e3,
        module.calls
    )];
    if rank == 0 {
        lines.push(format!(
            "{size} ranks, {count} allreduces of {n} x i64, all equal to the reference: module operator {:.1} us, built-in MAX {:.1} us per allreduce",
            times[0], times[1]
        ));
    }
    Ok(lines)
}
