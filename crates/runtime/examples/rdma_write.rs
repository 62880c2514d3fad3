//! One-sided communication: every rank registers a window of memory and
//! publishes its key; each rank then writes its own slice straight into
//! rank 0's window with RDMA writes (rank 0's host does nothing meanwhile),
//! and rank 0 checks the result. A write with a wrong key is refused.
//!
//! ```text
//! target/release/outboard run -n 4 target/release/examples/rdma_write
//! ```

use outboard_host::{HostError, OpError, RecvMatch};

const SLICE: usize = 4096;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> outboard_runtime::Exit {
    job().into()
}

/// Joins the job, runs this rank's part, leaves the job.
fn job() -> Res<()> {
    let mut world = outboard_runtime::init()?;
    if let Err(e) = write_slices(&mut world) {
        eprintln!("{}", world.failure_report(&*e));
        // Tell the live ranks at once, so none waits a timeout on this one.
        world.abort(1);
    }
    world.finalize()?;
    Ok(())
}

fn write_slices(world: &mut outboard_runtime::World) -> Res<()> {
    let (rank, size) = (world.rank(), world.size());
    let root = world.endpoint(0);
    // Rank 0 exposes a window with one slice per rank and tells everyone
    // its key (a plain message; the key is what grants access).
    let window = world.port().buffer((SLICE * size as usize) as u32)?;
    let key = if rank == 0 {
        let key = world.port().register(window)?;
        for r in 1..size {
            let ep = world.endpoint(r);
            world.port().send(ep, 1, &key.to_le_bytes())?;
        }
        key
    } else {
        let (_, _, k) = world.port().recv(RecvMatch::from(root.node, root.port, 1), 8)?;
        u64::from_le_bytes(k.as_slice().try_into()?)
    };
    if rank != 0 {
        let mine: Vec<u8> = (0..SLICE).map(|i| (i as u32 ^ rank) as u8).collect();
        let src = world.port().buffer_from(&mine)?;
        let w = world.port().start_write(root, key, (SLICE * rank as usize) as u64, src)?;
        world.port().wait(w)?;
        // The same write with a forged key is refused by rank 0's engine.
        let w = world.port().start_write(root, key ^ 0x5a5a, 0, src)?;
        match world.port().wait(w) {
            Err(HostError::Op(OpError::BadKey)) => println!("write with a wrong key refused, as it must be"),
            other => return Err(format!("forged key: expected BadKey, got {other:?}").into()),
        }
        world.port().send(root, 2, b"done")?;
    } else {
        for _ in 1..size {
            world.port().recv(RecvMatch::tag(2), 8)?;
        }
        let got = world.port().read_buffer(window)?;
        for r in 1..size {
            let ok = got[SLICE * r as usize..][..SLICE].iter().enumerate().all(|(i, &b)| b == (i as u32 ^ r) as u8);
            if !ok {
                return Err(format!("slice of rank {r} is wrong").into());
            }
        }
        let refused = world.stats().0.access_violations;
        println!("{} slices written by RDMA, all intact; {refused} forged writes refused", size - 1);
    }
    Ok(())
}
