//! Allgather, gather, scatter, alltoall, reduce-scatter and the scans
//! through the lossy test network, in both modes, against references
//! computed here on one process: the blocks where the layout puts them,
//! and prefixes folded left to right.

use outboard_engine::{Datatype, ReduceOp, Reduction};
use outboard_testnet::LinkConfig;
use proptest::prelude::*;

use super::harness::{Cluster, NetIo};
use super::network::run_skewed;
use crate::coll::options::{AllreduceAlgorithm, ReduceAlgorithm, TreeShape};
use crate::coll::CollRequest;
use crate::{Group, Layout, Mode, Port};

/// One collective and its arguments.
#[derive(Debug, Clone, Copy)]
enum Call {
    Allgather,
    Gather(u32),
    Scatter(u32),
    Alltoall,
    ReduceScatter,
    Scan,
    Exscan,
}

fn call_strategy() -> impl Strategy<Value = Call> {
    prop_oneof![
        Just(Call::Allgather),
        (0u32..64).prop_map(Call::Gather),
        (0u32..64).prop_map(Call::Scatter),
        Just(Call::Alltoall),
        Just(Call::ReduceScatter),
        Just(Call::Scan),
        Just(Call::Exscan),
    ]
}

/// A block length in elements: empty, one, odd, or more than a packet.
fn count_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1), (1usize..40).prop_map(|k| 2 * k + 1), (1usize..300).prop_map(|k| crate::DEFAULT_COLL_MAX_LEN as usize / 8 + k)]
}

/// Integer reductions: exact, so any order of combination gives the
/// sequential reference's bits.
fn exact_reduction() -> impl Strategy<Value = Reduction> {
    (0..ReduceOp::ALL.len(), prop_oneof![Just(Datatype::I32), Just(Datatype::I64), Just(Datatype::U64)])
        .prop_map(|(o, dtype)| Reduction { op: ReduceOp::ALL[o], dtype })
        .prop_filter("a built-in operation", |r| r.validate().is_ok())
}

/// The test's arguments at every rank.
struct Case {
    n: u32,
    call: Call,
    red: Reduction,
    /// Every rank's blocks (the v-forms' layout).
    layout: Layout,
    /// Every rank's input.
    inputs: Vec<Vec<u8>>,
    /// An alltoall's block length in bytes.
    block: usize,
}

impl Case {
    fn new(n: u32, call: Call, red: Reduction, counts: &[usize], gaps: &[usize], seed: u64) -> Case {
        let elem = red.dtype.size();
        let counts: Vec<usize> = (0..n as usize).map(|r| counts[r % counts.len()] * elem).collect();
        let layout = match call {
            Call::ReduceScatter => Layout::packed(&counts).unwrap(),
            _ => {
                let mut displs = Vec::new();
                let mut at = 0;
                for (r, c) in counts.iter().enumerate() {
                    at += gaps[r % gaps.len()];
                    displs.push(at);
                    at += c;
                }
                Layout::new(&counts, &displs).unwrap()
            }
        };
        let block = counts[0];
        let len = |r: u32| match call {
            Call::Allgather | Call::Gather(_) => layout.block(r).len(),
            Call::Scatter(root) if r == root % n => layout.extent(),
            Call::Scatter(_) => 0,
            Call::Alltoall => block * n as usize,
            Call::ReduceScatter => layout.extent(),
            Call::Scan | Call::Exscan => counts[0],
        };
        let inputs = (0..n)
            .map(|r| (0..len(r)).map(|i| (seed.wrapping_mul(31).wrapping_add(u64::from(r) * 7919 + i as u64 * 104_729) >> 3) as u8).collect())
            .collect();
        Case { n, call, red, layout, inputs, block }
    }

    fn start(&self, p: &mut Port<NetIo>, g: &mut Group, mode: Mode) -> CollRequest {
        let data = &self.inputs[g.rank() as usize];
        let n = self.n;
        match self.call {
            Call::Allgather => p.start_allgather(g, mode, AllreduceAlgorithm::Auto(TreeShape::Binomial), &self.layout, data),
            Call::Gather(root) => p.start_gather(g, mode, ReduceAlgorithm::Tree(TreeShape::Binomial), root % n, &self.layout, data),
            Call::Scatter(root) => p.start_scatter(g, mode, TreeShape::Binomial, root % n, &self.layout, data),
            Call::Alltoall => p.start_alltoall(g, mode, AllreduceAlgorithm::Auto(TreeShape::Binomial), self.block, data),
            Call::ReduceScatter => p.start_reduce_scatter(g, mode, TreeShape::Binomial, self.red, &self.layout, data),
            Call::Scan => p.start_scan(g, mode, self.red, data),
            Call::Exscan => p.start_exscan(g, mode, self.red, data),
        }
        .unwrap()
    }

    /// What rank `r` must get, computed here.
    fn expected(&self, r: u32) -> Vec<u8> {
        let n = self.n;
        let assembled = || {
            let mut out = vec![0u8; self.layout.extent()];
            for (q, input) in self.inputs.iter().enumerate() {
                out[self.layout.block(q as u32)].copy_from_slice(input);
            }
            out
        };
        let prefix = |upto: u32| {
            let mut acc = self.inputs[0].clone();
            for q in 1..upto {
                let mut next = self.inputs[q as usize].clone();
                self.red.fold(&mut next, &acc, true).unwrap();
                acc = next;
            }
            acc
        };
        match self.call {
            Call::Allgather => assembled(),
            Call::Gather(root) if r == root % n => assembled(),
            Call::Gather(_) => Vec::new(),
            Call::Scatter(root) => self.inputs[(root % n) as usize][self.layout.block(r)].to_vec(),
            Call::Alltoall => (0..n as usize).flat_map(|q| self.inputs[q][r as usize * self.block..(r as usize + 1) * self.block].to_vec()).collect(),
            Call::ReduceScatter => {
                let b = self.layout.block(r);
                let mut acc = self.inputs[0][b.clone()].to_vec();
                for input in &self.inputs[1..] {
                    self.red.fold(&mut acc, &input[b.clone()], false).unwrap();
                }
                acc
            }
            Call::Scan => prefix(r + 1),
            Call::Exscan if r == 0 => Vec::new(),
            Call::Exscan => prefix(r),
        }
    }

    /// Runs it in `mode` through `c` with arrival `skew`, and checks every
    /// rank's result.
    fn check(&self, c: &mut Cluster, groups: &mut [Group], mode: Mode, skew: &[u32]) -> Result<(), TestCaseError> {
        let mut start = |p: &mut Port<NetIo>, g: &mut Group| self.start(p, g, mode);
        let got = run_skewed(c, groups, skew, &mut start);
        for (r, (res, _)) in got.into_iter().enumerate() {
            let res = res.map_err(|e| TestCaseError::fail(format!("rank {r} {mode:?}: {e}")))?;
            prop_assert_eq!(res, self.expected(r as u32), "rank {} {:?} {:?}", r, mode, self.call);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Every data-movement collective and scan, its v-form where it has
    /// one (blocks of different lengths, with gaps), through 30 % loss and
    /// 10 % duplication with arrival skew: every rank's result equals the
    /// one computed here, offloaded and host-based, exactly once, and no
    /// buffer is left behind.
    #[test]
    fn data_movement_and_scans_equal_the_reference_through_heavy_loss(
        n in 2u32..10, call in call_strategy(), red in exact_reduction(), seed in any::<u64>(),
        counts in proptest::collection::vec(count_strategy(), 1..4),
        gaps in proptest::collection::vec(prop_oneof![Just(0usize), 1usize..20], 1..4),
        skew in proptest::collection::vec(0u32..200, 10),
    ) {
        let case = Case::new(n, call, red, &counts, &gaps, seed);
        let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.1, 0.0), seed);
        let mut groups = c.world();
        case.check(&mut c, &mut groups, Mode::Offloaded, &skew[..n as usize])?;
        case.check(&mut c, &mut groups, Mode::HostBased, &skew[..n as usize])?;
        for node in 0..n {
            prop_assert_eq!(c.live(node), 0, "buffers leaked at node {}", node);
        }
    }
}

/// 33 ranks (one more than a power of two: recursive doubling's extra
/// steps) through loss: allgather, alltoall, reduce-scatter and both scans
/// in both modes.
#[test]
fn thirty_three_ranks_move_and_scan_through_loss() {
    let n = 33;
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 33);
    let mut groups = c.world();
    let skew: Vec<u32> = (0..n).map(|r| (r * 37) % 100).collect();
    for call in [Call::Allgather, Call::Alltoall, Call::ReduceScatter, Call::Scan, Call::Exscan, Call::Gather(32), Call::Scatter(5)] {
        let case = Case::new(n, call, red, &[1, 3, 0], &[0, 5], 7);
        for mode in [Mode::Offloaded, Mode::HostBased] {
            case.check(&mut c, &mut groups, mode, &skew).unwrap();
        }
    }
}

/// Float scans combine left to right in rank order: offloaded, host-based
/// and the sequential fold give the same bits.
#[test]
fn float_scans_fold_left_to_right_bit_for_bit() {
    let n = 7;
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::F64 };
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 5);
    let mut groups = c.world();
    let mut case = Case::new(n, Call::Scan, red, &[5], &[0], 1);
    case.inputs = (0..n).map(|r| (0..5).flat_map(|i| (10f64.powi(r as i32 * 3 - 9) * f64::from(i + 1)).to_ne_bytes()).collect()).collect();
    for call in [Call::Scan, Call::Exscan] {
        case.call = call;
        for mode in [Mode::Offloaded, Mode::HostBased] {
            case.check(&mut c, &mut groups, mode, &[0; 7]).unwrap();
        }
    }
}

/// Bad layouts and lengths are refused at the call, before any member
/// waits, with errors that say what is wrong.
#[test]
fn bad_layouts_and_lengths_are_refused_at_the_call() {
    let mut c = Cluster::new(3, LinkConfig::default(), 1);
    let mut groups = c.world();
    let (p, g) = (&mut c.ports[0], &mut groups[0]);
    let auto = AllreduceAlgorithm::Auto(TreeShape::Binomial);
    let two = Layout::even(2, 8);
    let e = p.start_allgather(g, Mode::Offloaded, auto, &two, &[0; 8]).unwrap_err();
    assert!(e.to_string().contains("one block per member"), "{e}");
    let three = Layout::even(3, 8);
    let e = p.start_allgather(g, Mode::Offloaded, auto, &three, &[0; 5]).unwrap_err();
    assert!(e.to_string().contains("5 bytes where 8"), "{e}");
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
    let odd = Layout::packed(&[8, 4, 12]).unwrap();
    let e = p.start_reduce_scatter(g, Mode::HostBased, TreeShape::Binomial, red, &odd, &[0; 24]).unwrap_err();
    assert!(e.to_string().contains("whole elements"), "{e}");
    let e = p.start_scatter(g, Mode::Offloaded, TreeShape::Binomial, 3, &three, &[0; 24]).unwrap_err();
    assert!(e.to_string().contains("root 3 outside a group of 3"), "{e}");
}

/// The group's record of what ran names each data-movement call in the
/// form it took, beside the collectives it ran on.
#[test]
fn the_record_names_each_call_and_its_form() {
    let n = 3;
    let mut c = Cluster::new(n, LinkConfig::default(), 3);
    let mut groups = c.world();
    let red = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };
    let short = Case::new(n, Call::Allgather, red, &[1], &[0], 1);
    let long = Case::new(n, Call::Allgather, red, &[2000], &[0], 1);
    short.check(&mut c, &mut groups, Mode::Offloaded, &[0; 3]).unwrap();
    long.check(&mut c, &mut groups, Mode::HostBased, &[0; 3]).unwrap();
    Case::new(n, Call::Exscan, red, &[1], &[0], 1).check(&mut c, &mut groups, Mode::Offloaded, &[0; 3]).unwrap();
    let taken = groups[0].taken();
    assert_eq!(taken.get("allgather offloaded whole result per message"), Some(&1), "{taken:?}");
    assert_eq!(taken.get("allgather host-based a collective per block"), Some(&1), "{taken:?}");
    assert_eq!(taken.get("exclusive scan offloaded chain"), Some(&1), "{taken:?}");
    assert_eq!(taken.get("broadcast host-based binomial tree"), Some(&3), "a broadcast per block: {taken:?}");
}
