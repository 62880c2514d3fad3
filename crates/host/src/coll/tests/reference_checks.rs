//! Schedules under the sequential reference evaluator.

use outboard_engine::{Datatype, ReduceOp, Reduction, Schedule};

use crate::coll::options::{AllreduceAlgorithm, BarrierAlgorithm, TreeShape};
use crate::coll::group::{schedule_for, ScheduleKey};
use crate::coll::reference::{evaluate, evaluate_entered};
use crate::coll::{schedules, Tree};

fn all(key: ScheduleKey, n: u32) -> Vec<Schedule> {
    (0..n).map(|r| schedule_for(key, r, n).unwrap()).collect()
}

const BARRIERS: [BarrierAlgorithm; 6] = [
    BarrierAlgorithm::PairwiseExchange,
    BarrierAlgorithm::Dissemination,
    BarrierAlgorithm::GatherBroadcast { degree: 0 },
    BarrierAlgorithm::GatherBroadcast { degree: 1 },
    BarrierAlgorithm::GatherBroadcast { degree: 2 },
    BarrierAlgorithm::GatherBroadcast { degree: 5 },
];

/// Every barrier completes for sizes 1..=40, and none can complete at any
/// rank while some one rank has not entered.
#[test]
fn every_barrier_completes_and_depends_on_every_rank() {
    for n in 1..=40u32 {
        for algo in BARRIERS {
            let s = all(ScheduleKey::Barrier(algo), n);
            let inputs = vec![Vec::new(); n as usize];
            let done = evaluate(&s, &inputs, None).unwrap();
            assert!(done.iter().all(Option::is_some), "{algo:?} n={n} deadlocks");
            if n == 1 {
                continue;
            }
            for missing in 0..n as usize {
                let mut entered = vec![true; n as usize];
                entered[missing] = false;
                let done = evaluate_entered(&s, &inputs, None, &entered).unwrap();
                let early: Vec<usize> = (0..n as usize).filter(|&r| done[r].is_some()).collect();
                assert!(
                    early.is_empty(),
                    "{algo:?} n={n}: ranks {early:?} finish without rank {missing}"
                );
            }
        }
    }
}

/// Reduce, broadcast and both allreduces give the right integer result at
/// the right ranks, for sizes 1..=40 and several roots.
#[test]
fn tree_collectives_compute_the_right_values() {
    let sum = Reduction {
        op: ReduceOp::Sum,
        dtype: Datatype::I64,
    };
    for n in 1..=40u32 {
        let inputs: Vec<Vec<u8>> = (0..n)
            .map(|r| (i64::from(r) * 7 + 1).to_ne_bytes().to_vec())
            .collect();
        let want: i64 = (0..n).map(|r| i64::from(r) * 7 + 1).sum();
        for shape in [TreeShape::Binomial, TreeShape::Kary(3), TreeShape::Chain] {
            for root in [0, n / 2, n - 1] {
                let got = evaluate(
                    &all(ScheduleKey::Reduce(shape, root), n),
                    &inputs,
                    Some(sum),
                )
                .unwrap();
                assert_eq!(got[root as usize].as_deref(), Some(&want.to_ne_bytes()[..]));
                let got =
                    evaluate(&all(ScheduleKey::Bcast(shape, root), n), &inputs, None).unwrap();
                assert!(got
                    .iter()
                    .all(|v| v.as_deref() == Some(&inputs[root as usize][..])));
            }
        }
        for algo in [
            AllreduceAlgorithm::RecursiveDoubling,
            AllreduceAlgorithm::Tree(TreeShape::Kary(2)),
        ] {
            let got = evaluate(&all(ScheduleKey::Allreduce(algo), n), &inputs, Some(sum)).unwrap();
            assert!(
                got.iter()
                    .all(|v| v.as_deref() == Some(&want.to_ne_bytes()[..])),
                "{algo:?} n={n}"
            );
        }
    }
}

/// The documented float order: binomial over 4 is ((v0+v1)+(v2+v3)), a
/// chain is v0+(v1+(v2+v3)).
#[test]
fn float_order_is_the_documented_one() {
    let sum = Reduction {
        op: ReduceOp::Sum,
        dtype: Datatype::F64,
    };
    let v = [1e20f64, 1.0, -1e20, 1.0];
    let inputs: Vec<Vec<u8>> = v.iter().map(|x| x.to_ne_bytes().to_vec()).collect();
    let run = |t: Tree| {
        let s: Vec<Schedule> = (0..4).map(|r| schedules::reduce(&t, r)).collect();
        let got = evaluate(&s, &inputs, Some(sum)).unwrap();
        f64::from_ne_bytes(got[0].clone().unwrap().try_into().unwrap())
    };
    assert_eq!(
        run(Tree::binomial(4, 0).unwrap()),
        (v[0] + v[1]) + (v[2] + v[3])
    );
    assert_eq!(
        run(Tree::chain(4, 0).unwrap()),
        v[0] + (v[1] + (v[2] + v[3]))
    );
    // Recursive doubling: every rank ends with the same bits.
    let s: Vec<Schedule> = (0..4)
        .map(|r| schedules::allreduce_recursive_doubling(r, 4))
        .collect();
    let got = evaluate(&s, &inputs, Some(sum)).unwrap();
    assert!(got.windows(2).all(|w| w[0] == w[1]));
}
