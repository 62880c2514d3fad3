//! Collectives through the simulator: determinism, barrier safety,
//! reductions equal to a sequential evaluation, and figure tolerances.

use outboard_host::coll::{reference, schedules};
use outboard_host::{BarrierAlgorithm, Mode, TreeShape};
use outboard_sim::experiments::coll::{contribution, sum_of};
use outboard_sim::experiments::{barrier, reduction};
use outboard_sim::{Dur, Profile};

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
                        assert_eq!(
                            Some(got),
                            want[0].as_ref(),
                            "{shape:?} n={n} float={float} {mode:?} iteration {it}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn timed_leaf_latency_does_not_depend_on_the_lead_once_the_others_are_in() {
    // The paper's steady state (docs/simulator.md): the other members'
    // contributions are in before the timed leaf starts. Any lead of twice
    // the all-start-together latency or more gives the same figure; on a
    // depth-1 tree it is below that latency, since the timed leaf no longer
    // waits behind its siblings at the root.
    let p = Profile::builtin("gm-lanai91");
    let shape = TreeShape::Kary(15);
    for mode in [Mode::HostBased, Mode::Offloaded] {
        let together = reduction::latency_lined_up(&p, 16, mode, shape, false, 4, 1).unwrap().us;
        let lead =
            |us: f64| reduction::latency_with_lead(&p, 16, mode, shape, false, 4, 1, Dur::from_us(us)).unwrap().us;
        let (a, b) = (lead((2.0 * together).ceil()), lead(5.0 * together));
        assert!(within(b, a, 0.001), "{mode:?}: {a} us with a lead of twice {together} us, {b} us with five times");
        assert!(a < together, "{mode:?}: {a} us timed-leaf vs {together} us all together");
        let paper = reduction::latency(&p, 16, mode, shape, false, 4, 1).unwrap().us;
        assert_eq!(paper.to_bits(), a.to_bits(), "latency() is the lead run");
    }
}

#[test]
fn only_collective_packets_with_data_pay_the_collective_receive_price() {
    // gm-lanai91 prices a received contribution beyond a plain packet; a
    // barrier's signals carry no data and must not pay it, and each hop of
    // an offloaded chain reduction pays it once.
    let with = Profile::builtin("gm-lanai91");
    let mut without = with.clone();
    without.nic.coll_data_rx_cycles = None;
    let pe = BarrierAlgorithm::PairwiseExchange;
    let a = barrier::latency(&with, 8, Mode::Offloaded, pe, 5, 1).unwrap();
    let b = barrier::latency(&without, 8, Mode::Offloaded, pe, 5, 1).unwrap();
    assert_eq!(a.to_bits(), b.to_bits(), "barrier {a} us vs {b} us");
    let n = 6;
    let chain =
        |p: &Profile| reduction::latency_lined_up(p, n, Mode::Offloaded, TreeShape::Chain, false, 3, 1).unwrap().us;
    let per_hop = with.nic.coll_data_rx_cycles.unwrap() / with.nic.clock_mhz;
    let grew = chain(&with) - chain(&without);
    assert!(within(grew, f64::from(n - 1) * per_hop, 0.01), "chain grew {grew} us, {per_hop} us per hop");
}

#[test]
fn paced_latency_iterations_see_no_other_traffic() {
    // Each latency iteration starts at a set time once the previous one is
    // over, so every level of a chain adds the same time: with a barrier
    // between iterations, members that were done sent its packets to NICs
    // still on the timed path and some levels cost more.
    let p = Profile::builtin("gm-lanai91");
    for mode in [Mode::HostBased, Mode::Offloaded] {
        let lat: Vec<f64> =
            (2u32..=9).map(|n| reduction::latency(&p, n, mode, TreeShape::Chain, false, 3, 1).unwrap().us).collect();
        let steps: Vec<f64> = lat.windows(2).map(|w| w[1] - w[0]).collect();
        for s in &steps {
            assert!(within(*s, steps[0], 0.001), "{mode:?}: per-level steps {steps:?}");
        }
    }
}

#[test]
fn host_time_per_reduction_is_a_steady_state_figure() {
    // Without skew every timed iteration costs the same: the untimed first
    // one pays the group's set-up and the last offloaded contributions are
    // collected after a barrier like the others, so the iteration count
    // does not move the mean.
    let p = Profile::builtin("gm-lanai91");
    for mode in [Mode::HostBased, Mode::Offloaded] {
        let a = reduction::cpu(&p, 16, mode, false, 0.0, 3, 1).unwrap();
        let b = reduction::cpu(&p, 16, mode, false, 0.0, 12, 1).unwrap();
        assert!(within(b, a, 0.001), "{mode:?}: {a} us with 3 iterations, {b} us with 12");
    }
}

/// `Simulation::compact_payloads` changes how node memories hold large
/// buffers, nothing else: a 64 KiB broadcast (uniform payload) and one of
/// mixed bytes deliver the root's bytes and run the same events to the
/// same end time as with plain memory.
#[test]
fn compact_payload_memory_changes_no_result_and_no_event() {
    use outboard_sim::experiments::coll::run_all_in;
    use outboard_sim::Simulation;
    use std::rc::Rc;
    let p = Profile::builtin("dpu400");
    let n = 9;
    for mode in [Mode::HostBased, Mode::Offloaded] {
        for uniform in [true, false] {
            let run = |compact: bool| {
                let mut sim = Simulation::with_config(&p, n, 3, |c| c.max_ports = 1).unwrap();
                if compact {
                    sim.compact_payloads();
                }
                let msg: Rc<Vec<u8>> =
                    Rc::new((0..65_536u32).map(|i| if uniform { 7 } else { (i * 31 % 251) as u8 }).collect());
                let got = Rc::new(std::cell::RefCell::new(Vec::new()));
                let g2 = got.clone();
                let report = run_all_in(sim, n, move |proc, rank, mut port, mut g| {
                    let (msg, got) = (msg.clone(), g2.clone());
                    async move {
                        for _ in 0..2 {
                            let data = if rank == 0 { msg.to_vec() } else { vec![0; msg.len()] };
                            let req = port.start_bcast(&mut g, mode, TreeShape::Binomial, 0, &data)?;
                            let out = proc.coll_wait(&mut port, req).await?;
                            got.borrow_mut().push(out == *msg);
                        }
                        Ok(())
                    }
                })
                .unwrap();
                let ok = got.borrow().iter().all(|&b| b) && got.borrow().len() == 2 * n as usize;
                (report.end, report.stats.events, ok)
            };
            let (plain, compact) = (run(false), run(true));
            assert!(plain.2 && compact.2, "{mode:?} uniform={uniform}: every node got the root's bytes");
            assert_eq!(plain, compact, "{mode:?} uniform={uniform}");
        }
    }
}
