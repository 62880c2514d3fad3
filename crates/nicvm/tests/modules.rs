//! The example modules shipped in `modules/`: the paper's Figure 2
//! broadcast, the echo and no-op modules of its benchmarks, and two
//! user-defined reduction operators checked against Rust reference code.

use outboard_nicvm::harness::{Event, Recorder};
use outboard_nicvm::{compile, ModuleInstance, PacketFate, PacketType};
use proptest::prelude::*;

const BCAST: &str = include_str!("../modules/bcast.nvm");
const REDUCE_MAX: &str = include_str!("../modules/reduce_max_i64.nvm");
const REDUCE_PROD: &str = include_str!("../modules/reduce_prod_f64.nvm");
const ECHO: &str = include_str!("../modules/echo.nvm");
const NOOP: &str = include_str!("../modules/noop.nvm");

fn instance(src: &str) -> ModuleInstance {
    ModuleInstance::new(compile(src).expect("module compiles").module)
}

#[test]
fn figure2_bcast_makes_the_binary_tree_sends_for_16_ranks() {
    let mut m = instance(BCAST);
    for rank in 0..16u32 {
        let mut nic = Recorder::new(rank, 16, 0);
        let out = m.invoke(&mut nic, b"payload", &mut [], 1_000).unwrap();
        let expected: Vec<u32> = [2 * rank + 1, 2 * rank + 2]
            .into_iter()
            .filter(|&c| c < 16)
            .collect();
        assert_eq!(nic.sent_to(), expected, "rank {rank}");
        assert!(
            nic.events.iter().all(|e| matches!(
                e,
                Event::Send {
                    ptype: PacketType::NicData,
                    data: None,
                    ..
                }
            )),
            "rank {rank} forwards the current packet: {:?}",
            nic.events
        );
        // Only the root consumes; everyone else hands the packet to its host.
        if rank == 0 {
            assert_eq!((out.result, out.fate), (1, PacketFate::Consume));
        } else {
            assert_eq!((out.result, out.fate), (0, PacketFate::Deliver));
        }
        assert!(
            out.instructions > 10 && out.instructions < 100,
            "{}",
            out.instructions
        );
    }
}

#[test]
fn figure2_tree_reaches_every_rank_exactly_once() {
    // Drive the whole broadcast: each rank's module forwards what it got.
    for size in 1..=16u32 {
        let mut m = instance(BCAST);
        let mut reached = vec![0u32; size as usize];
        let mut queue = vec![0u32];
        while let Some(rank) = queue.pop() {
            reached[rank as usize] += 1;
            let mut nic = Recorder::new(rank, size, 0);
            m.invoke(&mut nic, b"x", &mut [], 1_000).unwrap();
            queue.extend(nic.sent_to());
        }
        assert!(reached.iter().all(|&n| n == 1), "size {size}: {reached:?}");
    }
}

#[test]
fn echo_sends_back_to_the_source_and_noop_delivers() {
    let mut echo = instance(ECHO);
    let mut nic = Recorder::new(3, 8, 0);
    nic.source = 5;
    let out = echo.invoke(&mut nic, b"ping", &mut [], 100).unwrap();
    assert_eq!(nic.sent_to(), vec![5]);
    assert_eq!(out.fate, PacketFate::Consume);

    let mut noop = instance(NOOP);
    let mut nic = Recorder::new(0, 2, 0);
    let out = noop.invoke(&mut nic, b"", &mut [], 100).unwrap();
    assert!(nic.events.is_empty());
    assert_eq!(
        (out.result, out.fate, out.instructions),
        (0, PacketFate::Deliver, 2)
    );
}

fn i64s_to_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s_to_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs the max-reduction module over a whole tree: every rank gets its own
/// contribution, forwards combined results up, and the root delivers.
fn tree_reduce_max(contrib: &[Vec<i64>]) -> Vec<u8> {
    let size = contrib.len() as u32;
    let width = contrib[0].len() * 8;
    let mut nics: Vec<(ModuleInstance, Vec<u8>)> = (0..size)
        .map(|_| (instance(REDUCE_MAX), vec![0u8; width]))
        .collect();
    // (destination rank, packet) in arrival order: hosts first, highest rank first
    // so that children tend to finish before parents; any order must work.
    let mut queue: std::collections::VecDeque<(u32, Vec<u8>)> = (0..size)
        .rev()
        .map(|r| (r, i64s_to_bytes(&contrib[r as usize])))
        .collect();
    let mut delivered = None;
    while let Some((rank, pkt)) = queue.pop_front() {
        let (inst, acc) = &mut nics[rank as usize];
        let mut nic = Recorder::new(rank, size, 0);
        let out = inst.invoke(&mut nic, &pkt, acc, 100_000).unwrap();
        assert_eq!(out.fate, PacketFate::Consume);
        for e in nic.events {
            match e {
                Event::Send { dest, data, .. } => {
                    assert_eq!(dest, (rank - 1) / 2, "sends go to the parent");
                    queue.push_back((dest, data.expect("a new packet")));
                }
                Event::Deliver(d) => {
                    assert_eq!(rank, 0);
                    assert!(delivered.replace(d).is_none(), "one delivery");
                }
            }
        }
    }
    delivered.expect("root delivered")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn user_defined_max_reduction_matches_rust(
        contrib in (1usize..=16, 1usize..=8).prop_flat_map(|(ranks, len)| {
            prop::collection::vec(prop::collection::vec(any::<i64>(), len), ranks)
        })
    ) {
        let expected: Vec<i64> = (0..contrib[0].len())
            .map(|i| contrib.iter().map(|v| v[i]).max().unwrap())
            .collect();
        prop_assert_eq!(tree_reduce_max(&contrib), i64s_to_bytes(&expected));
    }

    #[test]
    fn user_defined_f64_product_matches_rust_bit_for_bit(
        vectors in (2usize..=8, 1usize..=8).prop_flat_map(|(n, len)| {
            prop::collection::vec(prop::collection::vec(-1e3f64..1e3, len), n)
        })
    ) {
        let mut m = instance(REDUCE_PROD);
        let mut acc = f64s_to_bytes(&vectors[0]);
        let mut expected = vectors[0].clone();
        for v in &vectors[1..] {
            let mut nic = Recorder::new(0, 1, 0);
            let out = m.invoke(&mut nic, &f64s_to_bytes(v), &mut acc, 100_000).unwrap();
            prop_assert_eq!(out.result, 1);
            for (e, x) in expected.iter_mut().zip(v) {
                *e *= *x;
            }
        }
        prop_assert_eq!(acc, f64s_to_bytes(&expected));
    }
}

#[test]
fn reduction_rejects_mismatched_lengths_without_touching_the_accumulator() {
    let mut m = instance(REDUCE_PROD);
    let mut acc = f64s_to_bytes(&[2.0, 3.0]);
    let before = acc.clone();
    let mut nic = Recorder::new(0, 1, 0);
    let out = m
        .invoke(&mut nic, &f64s_to_bytes(&[1.0]), &mut acc, 10_000)
        .unwrap();
    assert_eq!(out.result, -1);
    assert_eq!(out.fate, PacketFate::Deliver);
    assert_eq!(acc, before);
}
