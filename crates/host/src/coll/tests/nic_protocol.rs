//! Barriers on the engines' collective protocol
//! ([`crate::BarrierProtocol::NicCollective`]) through the host library and
//! the lossy test network: selected per group, every algorithm's schedule
//! runs on it, no barrier completes before every rank entered, and it
//! mixes with the group's point-to-point collectives without confusion.

use outboard_engine::{Datatype, ReduceOp, Reduction};
use outboard_testnet::LinkConfig;
use proptest::prelude::*;

use super::harness::Cluster;
use super::network::run_skewed;
use crate::coll::options::{AllreduceAlgorithm, BarrierAlgorithm};
use crate::{BarrierProtocol, Group, Mode, Port};

fn algo_strategy() -> impl Strategy<Value = BarrierAlgorithm> {
    prop_oneof![
        Just(BarrierAlgorithm::PairwiseExchange),
        Just(BarrierAlgorithm::Dissemination),
        (0u32..5).prop_map(|degree| BarrierAlgorithm::GatherBroadcast { degree }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// 30 % loss and duplication, skewed entry, 1..16 ranks.
    #[test]
    fn protocol_barriers_complete_only_after_all_entered(
        n in 1u32..=16, algo in algo_strategy(), seed in any::<u64>(),
        skew in proptest::collection::vec(0u32..400, 16),
    ) {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.3, 0.01), seed);
        let mut groups = c.world();
        for g in &mut groups {
            g.set_barrier_protocol(BarrierProtocol::NicCollective);
        }
        for _ in 0..2 {
            let mut start = |p: &mut Port<super::harness::NetIo>, g: &mut Group| p.start_barrier(g, Mode::Offloaded, algo).unwrap();
            for (r, (res, all_in)) in run_skewed(&mut c, &mut groups, &skew[..n as usize], &mut start).into_iter().enumerate() {
                prop_assert_eq!(res, Ok(Vec::new()));
                prop_assert!(all_in, "rank {} finished before everyone entered", r);
            }
        }
    }
}

#[test]
fn protocol_barriers_and_point_to_point_allreduces_interleave_on_one_group() {
    let n = 6;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.3, 0.0), 5);
    let mut groups = c.world();
    for g in &mut groups {
        g.set_barrier_protocol(BarrierProtocol::NicCollective);
        assert_eq!(g.barrier_protocol(), BarrierProtocol::NicCollective);
    }
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
    // Per rank: (request, expected result), barriers and allreduces
    // alternating, all posted before any completes.
    let mut reqs: Vec<Vec<(Option<crate::CollRequest>, Vec<u8>)>> = (0..n as usize).map(|_| Vec::new()).collect();
    for it in 0..4i64 {
        let sum: i64 = (0..n as i64).map(|r| r * 10 + it).sum();
        for r in 0..n as usize {
            let p = &mut c.ports[r];
            let b = p.start_barrier(&mut groups[r], Mode::Offloaded, BarrierAlgorithm::Dissemination).unwrap();
            reqs[r].push((Some(b), Vec::new()));
            let v = (r as i64 * 10 + it).to_ne_bytes();
            let a = p.start_allreduce(&mut groups[r], Mode::Offloaded, AllreduceAlgorithm::RecursiveDoubling, red, &v).unwrap();
            reqs[r].push((Some(a), sum.to_ne_bytes().to_vec()));
        }
    }
    let mut left: usize = reqs.iter().map(Vec::len).sum();
    for _ in 0..5_000_000 {
        for (r, rank_reqs) in reqs.iter_mut().enumerate() {
            for (q, want) in rank_reqs {
                if let Some(req) = q.as_mut() {
                    if let Some(res) = c.ports[r].coll_test(req) {
                        assert_eq!(res, Ok(want.clone()), "rank {r}");
                        *q = None;
                        left -= 1;
                    }
                }
            }
        }
        if left == 0 {
            return;
        }
        assert!(c.step(), "stalled with {left} requests open");
    }
    panic!("did not finish");
}
