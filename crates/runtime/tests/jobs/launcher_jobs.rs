//! The jobs a launcher's tests run on every rank (`tests/launchers.rs`
//! under mpirun and mpiexec, the cli's `tests/slurm.rs` under srun): one
//! copy, included by both with `#[path]`. Each file includes the runtime's
//! `collectives` example as its module `collectives` first.

use super::collectives;

/// A rank's entry point under a launcher, the job named by `OB_SCENARIO`:
/// `collectives` (rank 0 prints the bootstrap used, every rank the
/// example's checks) or `store` (the launcher's key-value store).
pub fn run_scenario() {
    let Ok(scenario) = std::env::var("OB_SCENARIO") else { return };
    if scenario == "store" {
        return store();
    }
    assert_eq!(scenario, "collectives");
    let mut world = outboard_runtime::init().expect("init");
    if world.rank() == 0 {
        println!("bootstrap: {}", world.bootstrap_via().describe());
    }
    match collectives::check_all(&mut world) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("{}", world.failure_report(&*e));
            world.abort(1);
        }
    }
    world.finalize().expect("finalize");
}

/// The launcher's store straight through the `Bootstrap` trait (PMIx, or
/// PMI-1 on `PMI_FD`): values empty, short and long (many PMI-1 chunks, a
/// large PMIx byte object) from every rank, read by every rank; a key
/// nobody put is `Missing` at once (no wait on the server); a second round
/// of puts. The long values are what Slurm's PMI-1 reads differently from
/// Hydra (a request in one read of at most 1024 bytes): the `collectives`
/// job's short values would not show it.
pub fn store() {
    use outboard_runtime::bootstrap::{Bootstrap, BootstrapError, Pmi1Bootstrap, PmixBootstrap};
    let mut b: Box<dyn Bootstrap> = match std::env::var("PMI_FD") {
        Ok(fd) => {
            let n = |k: &str| std::env::var(k).unwrap().parse().unwrap();
            Box::new(Pmi1Bootstrap::from_fd(fd.parse().unwrap(), n("PMI_RANK"), n("PMI_SIZE")).expect("PMI-1"))
        }
        Err(_) => Box::new(PmixBootstrap::init().expect("PMIx")),
    };
    let (rank, size) = (b.rank(), b.size());
    let long = |r: u32| -> Vec<u8> { (0..20_000u32).map(|i| (i * 7 + r) as u8).collect() };
    b.put("empty", b"").unwrap();
    b.put("short", format!("rank {rank}").as_bytes()).unwrap();
    b.put("long", &long(rank)).unwrap();
    b.fence().unwrap();
    for r in 0..size {
        assert_eq!(b.get(r, "empty").unwrap(), b"");
        assert_eq!(b.get(r, "short").unwrap(), format!("rank {r}").as_bytes());
        assert_eq!(b.get(r, "long").unwrap(), long(r));
    }
    let t = std::time::Instant::now();
    assert!(matches!(b.get(size - 1, "nobody"), Err(BootstrapError::Missing { .. })));
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "a missing key took {:?}", t.elapsed());
    b.put("second", &[rank as u8]).unwrap();
    b.fence().unwrap();
    assert_eq!((0..size).map(|r| b.get(r, "second").unwrap()[0]).collect::<Vec<_>>(), (0..size as u8).collect::<Vec<_>>());
    b.fence().unwrap();
    println!("rank {rank}: store intact");
}
