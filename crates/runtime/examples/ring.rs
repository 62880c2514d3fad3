//! A token travels around the ring of ranks: rank 0 sends it to rank 1,
//! each rank adds its number and passes it on, rank 0 checks the sum.
//!
//! ```text
//! cargo build --release -p outboard-cli -p outboard-runtime --examples
//! target/release/outboard run -n 4 target/release/examples/ring
//! ```

use outboard_host::RecvMatch;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> outboard_runtime::Exit {
    job().into()
}

/// Joins the job, runs this rank's part, leaves the job.
fn job() -> Res<()> {
    let mut world = outboard_runtime::init()?;
    if let Err(e) = laps(&mut world) {
        eprintln!("{}", world.failure_report(&*e));
        // Tell the live ranks at once, so none waits a timeout on this one.
        world.abort(1);
    }
    world.finalize()?;
    Ok(())
}

fn laps(world: &mut outboard_runtime::World) -> Res<()> {
    let (rank, size) = (world.rank(), world.size());
    let laps: u64 = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(3);
    let next = world.endpoint((rank + 1) % size);
    let prev = world.endpoint((rank + size - 1) % size);
    let from_prev = RecvMatch::from(prev.node, prev.port, 0);
    if rank == 0 {
        let (policy, why) = world.progress();
        println!("{size} ranks, {laps} laps, progress {policy} ({why})");
    }
    let start = std::time::Instant::now();
    for lap in 0..laps {
        if rank == 0 {
            world.port().send(next, 0, &lap.to_le_bytes())?;
        }
        let (_, _, data) = world.port().recv(from_prev, 8)?;
        let token = u64::from_le_bytes(data.as_slice().try_into()?);
        if rank == 0 {
            let expect = lap + u64::from(size) * u64::from(size - 1) / 2;
            if token != expect {
                return Err(format!("lap {lap}: token {token}, expected {expect}").into());
            }
            println!("lap {lap}: token {token} came back intact");
        } else {
            world.port().send(next, 0, &(token + u64::from(rank)).to_le_bytes())?;
        }
    }
    if rank == 0 {
        let per_hop = start.elapsed().as_secs_f64() * 1e6 / (laps * u64::from(size)) as f64;
        println!("{per_hop:.1} us per hop");
    }
    Ok(())
}
