//! The granularity experiment compares the paper's 3.5.4 figures with the
//! GM-level series (they imply the paper's GM-level barrier latencies, not
//! its MPI ones: `experiments::granularity` module doc) and still prints
//! the MPI level beside them, without ids.

use outboard_sim::experiments::{self, Params};
use outboard_sim::{paper, Profile};

#[test]
fn paper_ids_sit_on_the_gm_level_series_and_the_mpi_level_is_printed_beside() {
    let p = Params { profiles: vec![Profile::builtin("gm-lanai43")], nodes: vec![16], sizes: vec![], seed: 1, iters: 3 };
    let out = experiments::run("granularity", &p, &mut |_, _| {}).unwrap();
    let with_ids: Vec<_> = out.rows.iter().filter(|r| r.paper_id.is_some()).collect();
    assert!(!with_ids.is_empty());
    assert!(with_ids.iter().all(|r| !r.series.contains("+mpi")), "an MPI-level row carries a paper id");
    let mpi: Vec<_> = out.rows.iter().filter(|r| r.series.contains("+mpi")).collect();
    assert!(!mpi.is_empty(), "the MPI level is no longer printed");
    // The host-based 0.5 point: the GM level against the paper, and the
    // MPI level above it by the layer's cost (the reason for the choice).
    let pick = |mpi: bool| {
        out.rows
            .iter()
            .find(|r| r.series.contains("+mpi") == mpi && r.size == 50 && r.metric == "host compute")
            .expect("a host-based 0.5 row")
            .value
    };
    let want = paper::value("gran-eff50-hb-16-l43").unwrap();
    let (gm, at_mpi) = (pick(false), pick(true));
    assert!((gm - want).abs() / want < 0.05, "GM level {gm} us vs paper {want} us");
    assert!(at_mpi > want * 1.1, "MPI level {at_mpi} us should sit well above the paper's {want} us");
}
