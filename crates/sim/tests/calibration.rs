//! The calibrated profiles still hit the paper figures they were fitted to.
//! If an engine change moves these (more packets, other acknowledgement
//! timing), re-fit the profiles as their files describe.

use outboard_host::{BarrierAlgorithm, Mode, TreeShape};
use outboard_sim::experiments::{barrier, dissemination, pingpong, reduction};
use outboard_sim::{paper, Profile};

fn within(sim: f64, paper: f64, tol: f64) -> bool {
    (sim - paper).abs() / paper <= tol
}

#[test]
fn gm_profiles_match_the_host_pairwise_exchange_barrier() {
    let (l72, _) = dissemination::exchange(&Profile::builtin("gm-lanai72"), 8, 0, 10, 1).unwrap();
    let want = paper::value("barrier-gm-pe-host-8-l72").unwrap();
    assert!(within(l72, want, 0.02), "LANai 7.2, 8 nodes: {l72} us vs {want} us");
    let (l43, _) = dissemination::exchange(&Profile::builtin("gm-lanai43"), 16, 0, 10, 1).unwrap();
    let want = paper::product(&["barrier-gm-pe-nic-16", "barrier-gm-pe-foi-16"]).unwrap();
    assert!(within(l43, want, 0.02), "LANai 4.3, 16 nodes: {l43} us vs {want} us");
}

#[test]
fn gm_mpi_layer_matches_its_overhead_and_the_host_based_mpi_barrier() {
    let gm = Profile::builtin("gm-lanai43");
    let mpi = gm.at_mpi_level();
    let pe = BarrierAlgorithm::PairwiseExchange;
    let h = barrier::latency(&mpi, 16, Mode::HostBased, pe, 20, 1).unwrap();
    let want = paper::value("barrier-mpi-hb-16-l43").unwrap();
    assert!(within(h, want, 0.02), "host-based MPI_Barrier, 16 nodes: {h} us vs {want} us");
    let over = barrier::latency(&mpi, 16, Mode::Offloaded, pe, 20, 1).unwrap()
        - barrier::latency(&gm, 16, Mode::Offloaded, pe, 20, 1).unwrap();
    let want = paper::value("barrier-mpi-overhead-16-l43").unwrap();
    assert!(within(over, want, 0.02), "MPI overhead, 16 nodes: {over} us vs {want} us");
}

#[test]
fn gm_lanai91_matches_the_integer_chain_slope_and_depth_one_gap() {
    // As `outboard sim reduce-chain` / `reduce-degree` (2..=16 nodes, 10
    // iterations, seed 1), on which the profile was fitted.
    let p = Profile::builtin("gm-lanai91");
    let lat = |n: u32, mode, shape| reduction::latency(&p, n, mode, shape, false, 10, 1).unwrap().us;
    let chain: Vec<(f64, f64)> = (2u32..=16)
        .map(|n| {
            (f64::from(n - 1), lat(n, Mode::HostBased, TreeShape::Chain) - lat(n, Mode::Offloaded, TreeShape::Chain))
        })
        .collect();
    let s = reduction::slope(&chain);
    let want = paper::value("reduce-chain-int-slope").unwrap();
    assert!(within(s, want, 0.02), "chain slope {s} us/level vs {want}");
    let gap = (2u32..=16)
        .map(|n| lat(n, Mode::Offloaded, TreeShape::Kary(n - 1)) - lat(n, Mode::HostBased, TreeShape::Kary(n - 1)))
        .sum::<f64>()
        / 15.0;
    let want = paper::value("reduce-degree-int-gap").unwrap();
    assert!(within(gap, want, 0.02), "depth-1 gap {gap} us vs {want} us");
}

#[test]
fn elan3_matches_its_latency_and_main_memory_bandwidth() {
    let elan = Profile::builtin("elan3");
    let lat = pingpong::one_way(&elan, 0, 3, 1).unwrap();
    let want = paper::value("elan3-lat").unwrap();
    assert!(within(lat, want, 0.01), "{lat} us vs {want} us");
    let size = 1 << 20;
    let bw = f64::from(size) / pingpong::one_way(&elan, size, 2, 1).unwrap();
    let want = paper::value("elan3-bw-main").unwrap();
    assert!(within(bw, want, 0.03), "{bw} MB/s vs {want} MB/s");
}
