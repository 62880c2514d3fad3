//! Both modes through the test network: barrier ordering under skew and
//! loss, reductions against the reference bit for bit, large vectors,
//! ordering of posted requests, and many interleaved collectives on
//! overlapping groups.

use outboard_engine::{Datatype, ReduceOp, Reduction, MAX_COLL_PIECES};
use outboard_testnet::LinkConfig;
use proptest::prelude::*;

use super::harness::Cluster;
use crate::coll::options::{AllreduceAlgorithm, BarrierAlgorithm, ReduceAlgorithm, TreeShape};
use crate::coll::group::{schedule_for, ScheduleKey};
use crate::coll::reference::evaluate;
use crate::coll::CollRequest;
use crate::{Group, HostError, Mode, Port};

/// Every valid (op, type) pair: SUM/PROD/MIN/MAX on all types, the
/// bitwise and logical ops on the integer types.
fn every_reduction() -> Vec<Reduction> {
    ReduceOp::ALL
        .iter()
        .flat_map(|&op| {
            Datatype::ALL
                .iter()
                .map(move |&dtype| Reduction { op, dtype })
        })
        .filter(|r| r.validate().is_ok())
        .collect()
}

/// A rank's result and whether every rank had entered when it came back.
pub(super) type Outcome = (Result<Vec<u8>, HostError>, bool);

pub(super) type Start<'a> =
    dyn FnMut(&mut Port<super::harness::NetIo>, &mut Group) -> CollRequest + 'a;

/// Starts rank r's collective once the network has taken `skew[r]` steps,
/// tests everyone round-robin, and records for each rank whether every rank
/// had entered when its result came back.
pub(super) fn run_skewed(
    c: &mut Cluster,
    groups: &mut [Group],
    skew: &[u32],
    start: &mut Start<'_>,
) -> Vec<Outcome> {
    let n = groups.len();
    let mut reqs: Vec<Option<CollRequest>> = (0..n).map(|_| None).collect();
    let mut entered = vec![false; n];
    let mut out: Vec<Option<Outcome>> = (0..n).map(|_| None).collect();
    for tick in 0..5_000_000u32 {
        for r in 0..n {
            if !entered[r] && tick >= skew[r] {
                reqs[r] = Some(start(&mut c.ports[r], &mut groups[r]));
                entered[r] = true;
            }
            if let Some(q) = reqs[r].as_mut() {
                if let Some(res) = c.ports[r].coll_test(q) {
                    out[r] = Some((res, entered.iter().all(|e| *e)));
                    reqs[r] = None;
                }
            }
        }
        if out.iter().all(Option::is_some) {
            return out.into_iter().map(Option::unwrap).collect();
        }
        c.step();
    }
    panic!("did not finish");
}

fn barrier_strategy() -> impl Strategy<Value = BarrierAlgorithm> {
    prop_oneof![
        Just(BarrierAlgorithm::PairwiseExchange),
        Just(BarrierAlgorithm::Dissemination),
        (0u32..5).prop_map(|degree| BarrierAlgorithm::GatherBroadcast { degree }),
    ]
}

fn mode_strategy() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Offloaded), Just(Mode::HostBased)]
}

fn shape_strategy() -> impl Strategy<Value = TreeShape> {
    prop_oneof![
        Just(TreeShape::Binomial),
        (1u32..5).prop_map(TreeShape::Kary),
        Just(TreeShape::Chain)
    ]
}

fn reduction_strategy() -> impl Strategy<Value = Reduction> {
    (0..ReduceOp::ALL.len(), 0..Datatype::ALL.len())
        .prop_map(|(o, t)| Reduction {
            op: ReduceOp::ALL[o],
            dtype: Datatype::ALL[t],
        })
        .prop_filter("bitwise ops need integers", |r| r.validate().is_ok())
}

/// A collective whose result the test checks against the reference.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Reduce(ReduceAlgorithm, u32),
    Allreduce(AllreduceAlgorithm),
    Bcast(TreeShape, u32),
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (shape_strategy(), 0u32..64).prop_map(|(s, r)| Kind::Reduce(ReduceAlgorithm::Tree(s), r)),
        (shape_strategy(), 0u32..64).prop_map(|(s, r)| Kind::Reduce(ReduceAlgorithm::BlockTrees(s), r)),
        shape_strategy().prop_map(|s| Kind::Allreduce(AllreduceAlgorithm::Tree(s))),
        Just(Kind::Allreduce(AllreduceAlgorithm::RecursiveDoubling)),
        shape_strategy().prop_map(|s| Kind::Allreduce(AllreduceAlgorithm::BlockTrees(s))),
        (shape_strategy(), 0u32..64).prop_map(|(s, r)| Kind::Bcast(s, r)),
    ]
}

/// Element values: floats of very different magnitudes (so the order of
/// combination shows in the bits), integers of any bits.
fn element(dtype: Datatype, bits: u64, exp: i8) -> Vec<u8> {
    let scaled = (bits as i32 as f64) * 10f64.powi(i32::from(exp));
    match dtype {
        Datatype::F64 => scaled.to_ne_bytes().to_vec(),
        Datatype::F32 => (scaled as f32).to_ne_bytes().to_vec(),
        Datatype::I32 => (bits as u32).to_ne_bytes().to_vec(),
        Datatype::I64 | Datatype::U64 => bits.to_ne_bytes().to_vec(),
    }
}

fn run_kind(
    c: &mut Cluster,
    groups: &mut [Group],
    kind: Kind,
    mode: Mode,
    red: Reduction,
    inputs: &[Vec<u8>],
    skew: &[u32],
) -> Vec<Vec<u8>> {
    let n = groups.len() as u32;
    let mut start = |p: &mut Port<super::harness::NetIo>, g: &mut Group| {
        let data = &inputs[g.rank() as usize];
        match kind {
            Kind::Reduce(s, root) => p.start_reduce(g, mode, s, root % n, red, data),
            Kind::Allreduce(a) => p.start_allreduce(g, mode, a, red, data),
            Kind::Bcast(s, root) => p.start_bcast(g, mode, s, root % n, data),
        }
        .unwrap()
    };
    run_skewed(c, groups, skew, &mut start)
        .into_iter()
        .map(|(r, _)| r.unwrap())
        .collect()
}

/// What the reference says each rank gets back (empty where the API
/// returns nothing).
fn expected(kind: Kind, n: u32, red: Reduction, inputs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    match kind {
        Kind::Allreduce(AllreduceAlgorithm::BlockTrees(shape)) => {
            return expected_block_trees(n, red, inputs, None, |b| ScheduleKey::AllreduceAt(shape, b));
        }
        // Between two, a reduce on block trees is the plain tree reduce.
        Kind::Reduce(ReduceAlgorithm::BlockTrees(shape), root) if n > 2 => {
            return expected_block_trees(n, red, inputs, Some(root % n), |b| ScheduleKey::ReduceAt(shape, root % n, b));
        }
        _ => {}
    }
    let (key, reduction, root) = match kind {
        Kind::Reduce(a, root) => (ScheduleKey::Reduce(a.shape(), root % n), Some(red), Some(root % n)),
        Kind::Allreduce(a) => (ScheduleKey::Allreduce(a), Some(red), None),
        Kind::Bcast(s, root) => (ScheduleKey::Bcast(s, root % n), None, None),
    };
    let schedules: Vec<_> = (0..n).map(|r| schedule_for(key, r, n).unwrap()).collect();
    let got = evaluate(&schedules, inputs, reduction).unwrap();
    (0..n)
        .map(|r| match root {
            Some(root) if r != root => Vec::new(),
            _ => got[r as usize].clone().expect("reference completes"),
        })
        .collect()
}

/// The reference of a reduce (to `root`) or allreduce on block trees:
/// each block run on its own schedule (`block(b)`), the blocks joined
/// (at the root only, for a reduce).
fn expected_block_trees(n: u32, red: Reduction, inputs: &[Vec<u8>], root: Option<u32>, block: impl Fn(u32) -> ScheduleKey) -> Vec<Vec<u8>> {
    let blocks = crate::coll::blocks::cut(inputs[0].len(), red.dtype.size(), n, crate::DEFAULT_COLL_MAX_LEN as usize);
    let mut out = vec![Vec::new(); n as usize];
    for (b, range) in blocks.into_iter().enumerate() {
        let schedules: Vec<_> = (0..n).map(|r| schedule_for(block(b as u32), r, n).unwrap()).collect();
        let part: Vec<Vec<u8>> = inputs.iter().map(|i| i[range.clone()].to_vec()).collect();
        for (r, (o, got)) in out.iter_mut().zip(evaluate(&schedules, &part, Some(red)).unwrap()).enumerate() {
            if root.is_none_or(|root| root == r as u32) {
                o.extend_from_slice(&got.expect("reference completes"));
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Reduces and allreduces on block trees of several packets' worth
    /// (lengths that are no multiple of a packet, of the group size or of
    /// a block) through 30 % loss and 10 % duplication: every rank's
    /// result (the root's, for a reduce) equals the reference bit for bit,
    /// exactly once, offloaded and host-based alike, and no buffer is left
    /// behind.
    #[test]
    fn block_tree_reductions_equal_the_reference_through_heavy_loss(
        n in 2u32..7, shape in shape_strategy(), red in reduction_strategy(), seed in any::<u64>(),
        packets in 1usize..9, extra in 0usize..300, reduce_to in proptest::option::of(0u32..7),
        skew in proptest::collection::vec(0u32..200, 7),
    ) {
        let elem = red.dtype.size();
        let elems = packets * (crate::DEFAULT_COLL_MAX_LEN as usize / elem) + extra;
        let inputs: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| (0..elems as u64).flat_map(|i| element(red.dtype, (r + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i, (i % 20) as i8 - 10)).collect())
            .collect();
        let kind = match reduce_to {
            Some(root) => Kind::Reduce(ReduceAlgorithm::BlockTrees(shape), root),
            None => Kind::Allreduce(AllreduceAlgorithm::BlockTrees(shape)),
        };
        let want = expected(kind, n, red, &inputs);
        // The reference runs the blocks' own schedules; on integers, whose
        // operations are exact, the blocks must also give what one tree
        // gives. (A reduce between two is the plain tree in the reference
        // too: nothing to compare there.)
        let blocks_in_reference = !(matches!(kind, Kind::Reduce(..)) && n <= 2);
        if !red.dtype.is_float() && blocks_in_reference {
            let one_tree = match kind {
                Kind::Reduce(_, root) => Kind::Reduce(ReduceAlgorithm::Tree(shape), root),
                _ => Kind::Allreduce(AllreduceAlgorithm::Tree(shape)),
            };
            prop_assert_eq!(&want, &expected(one_tree, n, red, &inputs));
        }
        let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.1, 0.0), seed);
        let mut groups = c.world();
        let off = run_kind(&mut c, &mut groups, kind, Mode::Offloaded, red, &inputs, &skew);
        prop_assert_eq!(&off, &want);
        let host = run_kind(&mut c, &mut groups, kind, Mode::HostBased, red, &inputs, &skew);
        prop_assert_eq!(&host, &want);
        for node in 0..n {
            prop_assert_eq!(c.live(node), 0, "buffers leaked at node {}", node);
        }
    }

    /// Under loss, duplication, corruption and arrival skew, no rank's
    /// barrier completes before every rank entered, in either mode.
    #[test]
    fn barrier_completes_only_after_all_entered(
        n in 1u32..9, algo in barrier_strategy(), mode in mode_strategy(), seed in any::<u64>(),
        skew in proptest::collection::vec(0u32..400, 9),
    ) {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), seed);
        let mut groups = c.world();
        let mut start = |p: &mut Port<super::harness::NetIo>, g: &mut Group| p.start_barrier(g, mode, algo).unwrap();
        for (r, (res, all_in)) in run_skewed(&mut c, &mut groups, &skew[..n as usize], &mut start).into_iter().enumerate() {
            prop_assert_eq!(res, Ok(Vec::new()));
            prop_assert!(all_in, "rank {} finished before everyone entered", r);
        }
    }

    /// Reduce, allreduce and broadcast for every op and type equal the
    /// sequential reference bit for bit, offloaded and host-based alike.
    #[test]
    fn reductions_equal_the_reference_bit_for_bit_in_both_modes(
        n in 1u32..8, kind in kind_strategy(), red in reduction_strategy(), seed in any::<u64>(),
        vals in proptest::collection::vec((any::<u64>(), -30i8..30), 1..48usize * 8),
        skew in proptest::collection::vec(0u32..200, 8),
    ) {
        let per_rank = (vals.len() / n as usize).max(1);
        let inputs: Vec<Vec<u8>> = (0..n as usize)
            .map(|r| (0..per_rank).flat_map(|i| { let (b, e) = vals[(r * per_rank + i) % vals.len()]; element(red.dtype, b, e) }).collect())
            .collect();
        let want = expected(kind, n, red, &inputs);
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), seed);
        let mut groups = c.world();
        let off = run_kind(&mut c, &mut groups, kind, Mode::Offloaded, red, &inputs, &skew);
        let host = run_kind(&mut c, &mut groups, kind, Mode::HostBased, red, &inputs, &skew);
        prop_assert_eq!(&off, &want);
        prop_assert_eq!(&host, &off);
    }

    /// Offloaded reductions and broadcasts longer than one packet (one
    /// command of several pieces; lengths that are no multiple of a
    /// packet) through 30 % loss and 10 % duplication: every rank's result
    /// equals the reference bit for bit, exactly once.
    #[test]
    fn multi_piece_collectives_equal_the_reference_through_heavy_loss(
        n in 2u32..6, kind in kind_strategy(), red in reduction_strategy(), seed in any::<u64>(),
        packets in 1usize..4, extra in 0usize..300,
        skew in proptest::collection::vec(0u32..200, 6),
    ) {
        let elem = red.dtype.size();
        let per_packet = crate::DEFAULT_COLL_MAX_LEN as usize / elem;
        let elems = packets * per_packet + extra;
        let inputs: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| (0..elems as u64).flat_map(|i| element(red.dtype, (r + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i, (i % 20) as i8 - 10)).collect())
            .collect();
        let want = expected(kind, n, red, &inputs);
        let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.1, 0.0), seed);
        let mut groups = c.world();
        let off = run_kind(&mut c, &mut groups, kind, Mode::Offloaded, red, &inputs, &skew);
        prop_assert_eq!(&off, &want);
        for node in 0..n {
            prop_assert_eq!(c.live(node), 0, "buffers leaked at node {}", node);
        }
    }
}

/// Every op on every type, through loss and skew, equals the reference bit
/// for bit in both modes, on a tree and with recursive doubling.
#[test]
fn every_op_and_type_equals_the_reference_in_both_modes() {
    let n = 5u32;
    let reds = every_reduction();
    assert_eq!(reds.len(), 4 * 5 + 6 * 3, "SUM, PROD, MIN, MAX on 5 types; 6 bitwise and logical ops on 3");
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), 21);
    let mut groups = c.world();
    for (k, red) in reds.into_iter().enumerate() {
        let inputs: Vec<Vec<u8>> = (0..n as u64)
            .map(|r| {
                (0..7u64)
                    .flat_map(|i| {
                        element(
                            red.dtype,
                            r.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                                ^ i.wrapping_mul(0x1234_5678_9ABC),
                            ((r * 13 + i * 5) % 50) as i8 - 25,
                        )
                    })
                    .collect()
            })
            .collect();
        for kind in [
            Kind::Allreduce(AllreduceAlgorithm::RecursiveDoubling),
            Kind::Reduce(TreeShape::Binomial.into(), k as u32),
            Kind::Allreduce(AllreduceAlgorithm::Tree(TreeShape::Chain)),
        ] {
            let want = expected(kind, n, red, &inputs);
            let skew = [(k as u32 * 37) % 90, 0, 45, 10, 80];
            let off = run_kind(
                &mut c,
                &mut groups,
                kind,
                Mode::Offloaded,
                red,
                &inputs,
                &skew,
            );
            let host = run_kind(
                &mut c,
                &mut groups,
                kind,
                Mode::HostBased,
                red,
                &inputs,
                &skew,
            );
            assert!(off == want && host == want, "{red:?} {kind:?}");
        }
    }
}

/// Vectors from one element up to one packet go in one offloaded
/// collective; longer ones in one command of several one-packet pieces,
/// and past [`MAX_COLL_PIECES`] packets in several commands; all equal the
/// reference, through loss, and no host buffer is left behind.
#[test]
fn vectors_of_every_size_including_split_ones() {
    let n = 5;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.05, 0.02, 0.0), 3);
    let mut groups = c.world();
    let red = Reduction {
        op: ReduceOp::Sum,
        dtype: Datatype::F64,
    };
    let max_elems = crate::DEFAULT_COLL_MAX_LEN as usize / 8;
    for elems in [
        1usize,
        2,
        17,
        512,
        max_elems,
        max_elems + 1,
        3 * max_elems + 5,
        MAX_COLL_PIECES as usize * max_elems + 3,
    ] {
        let inputs: Vec<Vec<u8>> = (0..n)
            .map(|r| {
                (0..elems)
                    .flat_map(|i| {
                        ((i as f64 + 0.1) * 10f64.powi((r as i32 * 7 + i as i32) % 40 - 20))
                            .to_ne_bytes()
                    })
                    .collect()
            })
            .collect();
        for kind in [
            Kind::Allreduce(AllreduceAlgorithm::RecursiveDoubling),
            Kind::Reduce(TreeShape::Kary(2).into(), 3),
            Kind::Bcast(TreeShape::Chain, 1),
        ] {
            let want = expected(kind, n, red, &inputs);
            for mode in [Mode::Offloaded, Mode::HostBased] {
                let got = run_kind(&mut c, &mut groups, kind, mode, red, &inputs, &[0; 5]);
                assert!(got == want, "{elems} elements, {kind:?}, {mode:?}");
            }
        }
    }
    for node in 0..n {
        assert_eq!(c.live(node), 0, "buffers leaked at node {node}");
    }
}

/// Data longer than one packet is one engine command of several pieces,
/// up to [`MAX_COLL_PIECES`] packets; longer data becomes several commands,
/// each a whole number of elements.
#[test]
fn long_offloaded_data_is_split_into_chunks() {
    let mut c = Cluster::new(1, LinkConfig::default(), 1);
    let red = Reduction {
        op: ReduceOp::Sum,
        dtype: Datatype::I32,
    };
    let packet = crate::DEFAULT_COLL_MAX_LEN as usize / 4 * 4;
    let command = packet * MAX_COLL_PIECES as usize;
    let data = vec![0u8; command * 2 + 4];
    let run = super::super::offload::OffRun::new(
        &mut c.ports[0],
        crate::GroupId(1),
        outboard_engine::ScheduleId(0),
        Some(red),
        &data,
        true,
        None,
    )
    .unwrap();
    let lens: Vec<usize> = run.chunks.iter().map(|ch| ch.send.len as usize).collect();
    assert_eq!(lens, [command, command, 4]);
}

/// Several reductions posted before the first completes finish in the order
/// they were started, in each mode, with the right values: testing the later
/// ones first, a request is never reported in an earlier round of tests than
/// any request started before it.
#[test]
fn posted_reductions_complete_in_order() {
    let n = 6u32;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 5);
    let mut groups = c.world();
    let red = Reduction {
        op: ReduceOp::Sum,
        dtype: Datatype::I64,
    };
    let k = 10usize;
    let mut reqs: Vec<Vec<Option<(usize, Mode, CollRequest)>>> = Vec::new();
    #[allow(clippy::needless_range_loop)]
    for r in 0..n as usize {
        let mut mine = Vec::new();
        for i in 0..k {
            let mode = if i % 2 == 0 {
                Mode::Offloaded
            } else {
                Mode::HostBased
            };
            let data = (i as i64 * 100 + r as i64).to_ne_bytes();
            let q = if i % 3 == 0 {
                c.ports[r].start_reduce(
                    &mut groups[r],
                    mode,
                    TreeShape::Binomial,
                    (i % n as usize) as u32,
                    red,
                    &data,
                )
            } else {
                c.ports[r].start_allreduce(
                    &mut groups[r],
                    mode,
                    AllreduceAlgorithm::RecursiveDoubling,
                    red,
                    &data,
                )
            };
            mine.push(Some((i, mode, q.unwrap())));
        }
        reqs.push(mine);
    }
    let mut order: Vec<Vec<(Mode, usize, u32)>> = vec![Vec::new(); n as usize];
    let nn = i64::from(n);
    for tick in 0..5_000_000u32 {
        for r in 0..n as usize {
            for slot in reqs[r].iter_mut().rev() {
                let Some((i, mode, q)) = slot.as_mut() else {
                    continue;
                };
                if let Some(res) = c.ports[r].coll_test(q) {
                    let v = res.unwrap();
                    let want = (*i as i64 * 100 * nn + nn * (nn - 1) / 2)
                        .to_ne_bytes()
                        .to_vec();
                    let root = (*i % n as usize) == r;
                    if *i % 3 != 0 || root {
                        assert_eq!(v, want, "rank {r} request {i}");
                    } else {
                        assert!(v.is_empty());
                    }
                    order[r].push((*mode, *i, tick));
                    *slot = None;
                }
            }
        }
        if order.iter().all(|o| o.len() == k) {
            break;
        }
        c.step();
    }
    for (r, o) in order.iter().enumerate() {
        assert_eq!(o.len(), k);
        for mode in [Mode::Offloaded, Mode::HostBased] {
            let mut seq: Vec<(usize, u32)> = o
                .iter()
                .filter(|(m, _, _)| *m == mode)
                .map(|&(_, i, t)| (i, t))
                .collect();
            seq.sort();
            assert!(
                seq.windows(2).all(|w| w[0].1 <= w[1].1),
                "rank {r} {mode:?}: {seq:?}"
            );
        }
    }
}

/// 1,000 collectives on the world and on four split subgroups (two
/// overlapping partitions), mixed modes, several outstanding at a time per
/// process, never mix: every result is its own collective's sum.
#[test]
fn a_thousand_interleaved_collectives_on_overlapping_groups_never_mix() {
    let n = 6u32;
    let per_rank = 600usize; // each group gets 200 per member: 5 groups x 200 = 1,000 collectives
    let mut c = Cluster::new(n, LinkConfig::lossy(0.05, 0.02, 0.0), 8);
    let groups = c.world();
    std::thread::scope(|s| {
        let hs: Vec<_> = c
            .ports
            .iter_mut()
            .zip(groups)
            .map(|(p, mut world)| {
                s.spawn(move || {
                    let me = world.rank();
                    let mut parity = p.split(&mut world, me % 2, 0).unwrap().unwrap();
                    let mut half = p.split(&mut world, me / 3, 0).unwrap().unwrap();
                    assert_ne!(parity.id(), half.id());
                    let red = Reduction {
                        op: ReduceOp::Sum,
                        dtype: Datatype::I64,
                    };
                    let window = 4;
                    let mut outstanding = std::collections::VecDeque::new();
                    for k in 0..per_rank {
                        let mode = if (k / 3) % 2 == 0 {
                            Mode::Offloaded
                        } else {
                            Mode::HostBased
                        };
                        let g = match k % 3 {
                            0 => &mut world,
                            1 => &mut parity,
                            _ => &mut half,
                        };
                        let members: Vec<i64> =
                            g.members().iter().map(|e| i64::from(e.node.0)).collect();
                        let data: Vec<u8> = [k as i64 * 1000 + i64::from(me), -(k as i64)]
                            .iter()
                            .flat_map(|x| x.to_ne_bytes())
                            .collect();
                        let algo = if k % 2 == 0 {
                            AllreduceAlgorithm::RecursiveDoubling
                        } else {
                            AllreduceAlgorithm::Tree(TreeShape::Kary(2))
                        };
                        let q = p.start_allreduce(g, mode, algo, red, &data).unwrap();
                        let m = members.len() as i64;
                        let want: Vec<u8> = [
                            k as i64 * 1000 * m + members.iter().sum::<i64>(),
                            -(k as i64) * m,
                        ]
                        .iter()
                        .flat_map(|x| x.to_ne_bytes())
                        .collect();
                        outstanding.push_back((q, want));
                        if outstanding.len() == window {
                            let (q, want) = outstanding.pop_front().unwrap();
                            assert_eq!(p.coll_wait(q).unwrap(), want);
                        }
                    }
                    for (q, want) in outstanding {
                        assert_eq!(p.coll_wait(q).unwrap(), want);
                    }
                    p.barrier(&mut world, Mode::Offloaded, BarrierAlgorithm::Dissemination)
                        .unwrap();
                    for g in [parity, half] {
                        p.free_group(g).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// Virtual time of `commands` offloaded allreduces of `packets_each`
/// packets each, all started at once on 2 ranks of a loss-free network,
/// until both ranks have every result.
fn allreduce_time(algo: AllreduceAlgorithm, commands: usize, packets_each: usize) -> std::time::Duration {
    let mut c = Cluster::new(2, LinkConfig::default(), 1);
    let mut groups = c.world();
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
    let data = vec![1u8; crate::DEFAULT_COLL_MAX_LEN as usize / 8 * 8 * packets_each];
    let t0 = c.net.lock().unwrap().now();
    let mut reqs: Vec<Vec<CollRequest>> = (0..2)
        .map(|r| (0..commands).map(|_| c.ports[r].start_allreduce(&mut groups[r], Mode::Offloaded, algo, red, &data).unwrap()).collect())
        .collect();
    while reqs.iter().any(|q| !q.is_empty()) {
        for (r, q) in reqs.iter_mut().enumerate() {
            q.retain_mut(|req| c.ports[r].coll_test(req).map(|res| res.unwrap()).is_none());
        }
        c.step();
    }
    let t1 = c.net.lock().unwrap().now();
    t1.saturating_since(t0)
}

/// A multi-piece command costs no more time on the wire than one command
/// per packet started together: the pieces pipeline as the separate
/// commands did (the comparison docs/performance.md quotes; `--nocapture`
/// prints it).
#[test]
fn a_multi_piece_command_takes_no_longer_than_one_command_per_packet() {
    for algo in [AllreduceAlgorithm::Tree(TreeShape::Binomial), AllreduceAlgorithm::RecursiveDoubling] {
        for packets in [8, MAX_COLL_PIECES as usize] {
            let (one, per_packet) = (allreduce_time(algo, 1, packets), allreduce_time(algo, packets, 1));
            eprintln!("{algo:?}, {packets} packets: one command {one:?}, one command per packet {per_packet:?}");
            assert!(one <= per_packet, "{algo:?}, {packets} packets: {one:?} against {per_packet:?}");
        }
    }
}
