//! Collectives through the simulator: determinism, barrier safety,
//! reductions equal to a sequential evaluation, and figure tolerances.

use outboard_host::coll::{reference, schedules};
use outboard_host::{BarrierAlgorithm, Mode, TreeShape};
use outboard_sim::experiments::coll::{contribution, sum_of};
use outboard_sim::experiments::{barrier, reduction};
use outboard_sim::{paper, Profile};

fn within(sim: f64, paper: f64, tol: f64) -> bool {
    (sim - paper).abs() / paper <= tol
}

#[test]
fn the_same_seed_gives_the_same_figures() {
    let p = Profile::builtin("gm-lanai43");
    for mode in [Mode::HostBased, Mode::Offloaded] {
        let a = barrier::latency(&p, 6, mode, BarrierAlgorithm::PairwiseExchange, 5, 7).unwrap();
        let b = barrier::latency(&p, 6, mode, BarrierAlgorithm::PairwiseExchange, 5, 7).unwrap();
        assert_eq!(a.to_bits(), b.to_bits());
        let a = reduction::cpu(&p, 6, mode, true, 50.0, 5, 7).unwrap();
        let b = reduction::cpu(&p, 6, mode, true, 50.0, 5, 7).unwrap();
        assert_eq!(a.to_bits(), b.to_bits());
    }
}

#[test]
fn no_barrier_completes_before_every_process_entered_it() {
    let p = Profile::builtin("gm-lanai72");
    let algos = [
        BarrierAlgorithm::PairwiseExchange,
        BarrierAlgorithm::Dissemination,
        BarrierAlgorithm::GatherBroadcast { degree: 0 },
        BarrierAlgorithm::GatherBroadcast { degree: 3 },
    ];
    for (seed, algo) in algos.into_iter().enumerate() {
        for mode in [Mode::HostBased, Mode::Offloaded] {
            let n = 7;
            let log = barrier::entries_and_exits(&p, n, mode, algo, 6, 80.0, seed as u64).unwrap();
            for k in 0..6 {
                let last_in = log.iter().map(|l| l[k].0).max().unwrap();
                for (r, l) in log.iter().enumerate() {
                    assert!(l[k].1 >= last_in, "{mode:?} {algo:?}: rank {r} left barrier {k} before the last entered");
                }
            }
        }
    }
}

#[test]
fn reductions_equal_the_sequential_evaluation() {
    let p = Profile::builtin("gm-lanai91");
    let iters = 4;
    for shape in [TreeShape::Binomial, TreeShape::Chain, TreeShape::Kary(3)] {
        for n in [2u32, 5, 9] {
            let t = reduction::tree(shape, n);
            let scheds: Vec<_> = (0..n).map(|r| schedules::reduce(&t, r)).collect();
            for float in [false, true] {
                for mode in [Mode::HostBased, Mode::Offloaded] {
                    let run = reduction::latency(&p, n, mode, shape, float, iters, 3).unwrap();
                    assert_eq!(run.results.len(), iters as usize);
                    for (it, got) in run.results.iter().enumerate() {
                        let inputs: Vec<Vec<u8>> = (0..n).map(|r| contribution(float, r, it as u32)).collect();
                        let want = reference::evaluate(&scheds, &inputs, Some(sum_of(float))).unwrap();
                        assert_eq!(Some(got), want[0].as_ref(), "{shape:?} n={n} float={float} {mode:?} iteration {it}");
                    }
                }
            }
        }
    }
}

#[test]
fn calibrated_and_predicted_figures_stay_within_tolerance() {
    // Predicted: the host PE barrier through the host library at 16 nodes
    // (the profile was fitted on a bare dissemination exchange).
    let p43 = Profile::builtin("gm-lanai43");
    let h = barrier::latency(&p43, 16, Mode::HostBased, BarrierAlgorithm::PairwiseExchange, 10, 1).unwrap();
    let want = paper::product(&["barrier-gm-pe-nic-16", "barrier-gm-pe-foi-16"]).unwrap();
    assert!(within(h, want, 0.15), "host PE 16 nodes: {h} us vs {want} us");
    // Calibrated: the chain's per-level gap on LANai 9.1.
    let p91 = Profile::builtin("gm-lanai91");
    let gaps: Vec<(f64, f64)> = [4u32, 8, 12, 16]
        .iter()
        .map(|&n| {
            let h = reduction::latency(&p91, n, Mode::HostBased, TreeShape::Chain, false, 5, 1).unwrap().us;
            let o = reduction::latency(&p91, n, Mode::Offloaded, TreeShape::Chain, false, 5, 1).unwrap().us;
            (f64::from(n - 1), h - o)
        })
        .collect();
    let s = reduction::slope(&gaps);
    let want = paper::value("reduce-chain-int-slope").unwrap();
    assert!(within(s, want, 0.15), "chain slope {s} vs {want}");
}
