//! The calibrated profiles still hit the paper figures they were fitted to.
//! If an engine change moves these (more packets, other acknowledgement
//! timing), re-fit the profiles as their files describe.

use outboard_sim::experiments::{dissemination, pingpong};
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
