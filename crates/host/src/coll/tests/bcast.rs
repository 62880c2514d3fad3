//! Broadcast in all three modes through the lossy test network, with the
//! NIC-assisted mode's own properties: every member ends with the root's
//! bytes for sizes around the chunk boundaries, any root, any group size,
//! members that post late; the root's payload is read from host memory once
//! per piece however many children it has; no buffer is left behind.

use outboard_engine::NodeId;
use outboard_testnet::LinkConfig;
use proptest::prelude::*;

use super::harness::{Cluster, NetIo};
use super::network::run_skewed;
use crate::coll::options::{BcastMode, TreeShape};
use crate::postal::{Lambda, LinkCosts};
use crate::{CollectiveError, Group, HostError, Mode, Port};

fn payload(len: usize, salt: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            (i.wrapping_mul(0x9E37_79B9)
                .wrapping_add(salt.wrapping_mul(131))
                >> 3) as u8
        })
        .collect()
}

/// Broadcasts `root`'s data with every member starting after `skew[r]`
/// network steps; returns what each member got.
fn bcast_all(
    c: &mut Cluster,
    groups: &mut [Group],
    mode: BcastMode,
    shape: TreeShape,
    root: u32,
    data: &[u8],
    skew: &[u32],
) -> Vec<Result<Vec<u8>, HostError>> {
    let zeros = vec![0u8; data.len()];
    let mut start = |p: &mut Port<NetIo>, g: &mut Group| {
        let mine = if g.rank() == root { data } else { &zeros[..] };
        p.start_bcast(g, mode, shape, root, mine).unwrap()
    };
    run_skewed(c, groups, skew, &mut start)
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

const SHAPES: [TreeShape; 4] = [
    TreeShape::Binomial,
    TreeShape::Kary(3),
    TreeShape::Chain,
    TreeShape::Kary(2),
];

/// Sizes 0, 1, chunk - 1, chunk, chunk + 1 and many chunks, in groups of
/// 1 to 7 (mostly not powers of two), every root, pipelined with a small
/// chunk and unpipelined, at 20 % loss with duplication, some members
/// posting long after the root: everyone gets the root's bytes, and no
/// host buffer is leaked.
#[test]
fn nic_assisted_delivers_the_roots_bytes_at_every_member() {
    let chunk = 100u32;
    let sizes = [0usize, 1, 99, 100, 101, 1000, 1234];
    for n in [1u32, 2, 3, 5, 6, 7] {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), u64::from(n));
        let mut groups = c.world();
        for (k, &len) in sizes.iter().enumerate() {
            for mode in [
                BcastMode::NicAssisted { chunk },
                BcastMode::nic_assisted_whole(),
            ] {
                let root = (k as u32 * 5 + 3) % n;
                let shape = SHAPES[k % SHAPES.len()];
                let data = payload(len, k as u64);
                let skew: Vec<u32> = (0..n).map(|r| (r * 97 + k as u32 * 31) % 300).collect();
                for (r, got) in bcast_all(&mut c, &mut groups, mode, shape, root, &data, &skew)
                    .into_iter()
                    .enumerate()
                {
                    assert_eq!(
                        got.as_deref(),
                        Ok(&data[..]),
                        "n {n}, len {len}, root {root}, {shape:?}, {mode:?}, rank {r}"
                    );
                }
            }
        }
        for node in 0..n {
            assert_eq!(c.live(node), 0, "buffers leaked at node {node}");
        }
    }
}

/// The default piece is exactly one packet: a broadcast of k pieces on a
/// flat tree makes the root send k data packets per child, no more.
#[test]
fn a_default_piece_is_one_packet() {
    let n = 3u32;
    let mut c = Cluster::new(n, LinkConfig::default(), 5);
    let mut groups = c.world();
    let piece = super::super::nicassist::packet_payload(c.ports[0].io_ref()) as usize;
    let flat = TreeShape::Kary(n - 1);
    // Once to open the connections, then counted.
    bcast_all(
        &mut c,
        &mut groups,
        BcastMode::nic_assisted(),
        flat,
        0,
        b"hi",
        &[0; 3],
    );
    while c.step() {}
    for k in [1usize, 3] {
        let data = payload(k * piece, k as u64);
        let _ = c.net.lock().unwrap().engine(NodeId(0)).take_work();
        let got = bcast_all(
            &mut c,
            &mut groups,
            BcastMode::nic_assisted(),
            flat,
            0,
            &data,
            &[0; 3],
        );
        assert!(got.iter().all(|g| g.as_deref() == Ok(&data[..])));
        while c.step() {}
        let w = c.net.lock().unwrap().engine(NodeId(0)).take_work();
        assert_eq!(
            w.packets_out - w.acks_out,
            2 * k as u64,
            "{k} pieces to 2 children"
        );
        // One more byte in one piece needs one more packet per child.
        let data = payload(k * piece + 1, 9);
        let whole = BcastMode::NicAssisted {
            chunk: (k * piece + 1) as u32,
        };
        bcast_all(&mut c, &mut groups, whole, flat, 0, &data, &[0; 3]);
        while c.step() {}
        let w = c.net.lock().unwrap().engine(NodeId(0)).take_work();
        assert_eq!(
            w.packets_out - w.acks_out,
            2 * (k as u64 + 1),
            "{k} pieces and a byte, whole"
        );
    }
}

/// The default chunk is one packet: a message of a few packets is
/// pipelined in packet-sized pieces and arrives whole.
#[test]
fn packet_sized_pieces_by_default() {
    let n = 5u32;
    let pkt = crate::DEFAULT_COLL_MAX_LEN as usize;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.0), 9);
    let mut groups = c.world();
    for len in [pkt - 1, pkt, pkt + 1, 3 * pkt + 17] {
        let data = payload(len, len as u64);
        let got = bcast_all(
            &mut c,
            &mut groups,
            BcastMode::nic_assisted(),
            TreeShape::Binomial,
            2,
            &data,
            &[0, 50, 0, 400, 10],
        );
        assert!(
            got.iter().all(|g| g.as_deref() == Ok(&data[..])),
            "len {len}"
        );
    }
}

/// A member that joins after the others finished still gets every piece:
/// they waited in its engine's unexpected store.
#[test]
fn a_member_posting_after_everyone_else_finished_still_gets_the_data() {
    let n = 4u32;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 3);
    let mut groups = c.world();
    let data = payload(777, 7);
    let mode = BcastMode::NicAssisted { chunk: 64 };
    // Chain 0 -> 1 -> 2 -> 3: rank 3 is a leaf, so nobody waits for it.
    let mut reqs: Vec<_> = (0..3)
        .map(|r| {
            let mine = if r == 0 {
                data.clone()
            } else {
                vec![0; data.len()]
            };
            c.ports[r]
                .start_bcast(&mut groups[r], mode, TreeShape::Chain, 0, &mine)
                .unwrap()
        })
        .collect();
    let mut done = [false; 3];
    for _ in 0..2_000_000 {
        for r in 0..3 {
            if !done[r] {
                if let Some(res) = c.ports[r].coll_test(&mut reqs[r]) {
                    assert_eq!(res.unwrap(), data, "rank {r}");
                    done[r] = true;
                }
            }
        }
        if done.iter().all(|d| *d) {
            break;
        }
        c.step();
    }
    assert!(done.iter().all(|d| *d));
    while c.step() {}
    let got = c.ports[3]
        .bcast(
            &mut groups[3],
            mode,
            TreeShape::Chain,
            0,
            &vec![0; data.len()],
        )
        .unwrap();
    assert_eq!(got, data);
}

/// The root of a flat tree reads its payload from host memory once per
/// piece for all children (one multi-send), where host-based broadcast
/// hands the NIC one copy per child; both deliver the same bytes.
#[test]
fn the_root_hands_its_nic_one_copy_for_all_children() {
    let n = 6u32;
    let len = 3000usize;
    let mut c = Cluster::new(n, LinkConfig::default(), 4);
    let mut groups = c.world();
    let data = payload(len, 1);
    let flat = TreeShape::Kary(n - 1);
    let mut read_at_root = Vec::new();
    for mode in [BcastMode::nic_assisted_whole(), BcastMode::HostBased] {
        let _ = c.net.lock().unwrap().engine(NodeId(0)).take_work();
        let got = bcast_all(&mut c, &mut groups, mode, flat, 0, &data, &[0; 6]);
        assert!(
            got.iter().all(|g| g.as_deref() == Ok(&data[..])),
            "{mode:?}"
        );
        read_at_root.push(c.net.lock().unwrap().engine(NodeId(0)).take_work().dma_read);
    }
    // NIC-assisted: the payload once plus the encoded child list (a few
    // bytes per child); host-based: the payload once per child.
    assert!(
        read_at_root[0] >= len as u64 && read_at_root[0] < 2 * len as u64,
        "{read_at_root:?}"
    );
    assert!(
        read_at_root[1] >= (n as u64 - 1) * len as u64,
        "{read_at_root:?}"
    );
}

/// Broadcasts of the three modes interleaved on one group, started in the
/// same order everywhere, each get their own root's data (the modes' tags
/// never match each other's receives).
#[test]
fn the_three_modes_interleave_on_one_group() {
    let n = 5u32;
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 12);
    let mut groups = c.world();
    let modes = [
        BcastMode::Offloaded,
        BcastMode::HostBased,
        BcastMode::NicAssisted { chunk: 50 },
        BcastMode::nic_assisted_whole(),
    ];
    let k = 12usize;
    let datas: Vec<Vec<u8>> = (0..k).map(|i| payload(40 + i * 37, i as u64)).collect();
    let mut reqs: Vec<Vec<_>> = (0..n as usize)
        .map(|r| {
            (0..k)
                .map(|i| {
                    let root = (i as u32) % n;
                    let mine = if root == r as u32 {
                        datas[i].clone()
                    } else {
                        vec![0; datas[i].len()]
                    };
                    let q = c.ports[r]
                        .start_bcast(
                            &mut groups[r],
                            modes[i % 4],
                            TreeShape::Binomial,
                            root,
                            &mine,
                        )
                        .unwrap();
                    Some(q)
                })
                .collect()
        })
        .collect();
    let mut left = n as usize * k;
    for _ in 0..5_000_000 {
        for (r, mine) in reqs.iter_mut().enumerate() {
            for (i, slot) in mine.iter_mut().enumerate() {
                if let Some(q) = slot.as_mut() {
                    if let Some(res) = c.ports[r].coll_test(q) {
                        assert_eq!(res.unwrap(), datas[i], "rank {r}, broadcast {i}");
                        *slot = None;
                        left -= 1;
                    }
                }
            }
        }
        if left == 0 {
            break;
        }
        c.step();
    }
    assert_eq!(left, 0);
}

/// Too many pieces for the tag space is a typed error, before anything is
/// sent; a plain `Mode` still works as a broadcast mode.
#[test]
fn too_many_pieces_is_refused() {
    let mut c = Cluster::new(2, LinkConfig::default(), 1);
    let mut groups = c.world();
    let data = vec![0u8; 70_000];
    let e = c.ports[0]
        .start_bcast(
            &mut groups[0],
            BcastMode::NicAssisted { chunk: 1 },
            TreeShape::Binomial,
            0,
            &data,
        )
        .unwrap_err();
    assert_eq!(
        e,
        HostError::Coll(CollectiveError::TooManyChunks {
            chunks: 70_000,
            max: 65_536
        })
    );
    let got = bcast_all(
        &mut c,
        &mut groups,
        Mode::HostBased.into(),
        TreeShape::Chain,
        1,
        b"abc",
        &[0, 0],
    );
    assert!(got.iter().all(|g| g.as_deref() == Ok(&b"abc"[..])));
}

/// Costs where fixed latency dominates small messages (large lambda,
/// flat trees) and per-byte costs large ones (lambda near 2).
const LINK: LinkCosts = LinkCosts {
    send_overhead_us: 1.0,
    send_per_byte_us: 0.01,
    latency_us: 12.0,
    latency_per_byte_us: 0.01,
};

/// A postal shape with link-derived lambda picks its tree per message
/// size, and broadcasts on it deliver in all three modes.
#[test]
fn postal_trees_follow_the_message_size_in_every_mode() {
    let n = 9u32;
    let shape = TreeShape::Postal(Lambda::Link(LINK));
    let small = shape.tree(n, 0, 8).unwrap();
    let large = shape.tree(n, 0, 1 << 16).unwrap();
    assert_eq!(small.children(0).len(), 8, "lambda 13: flat");
    assert!(
        large.children(0).len() < 8 && large.depth() > 1,
        "lambda ~2: deeper"
    );
    assert_eq!(
        shape.for_len(n, 8),
        TreeShape::Postal(Lambda::Given(8.0)),
        "capped at n - 1"
    );
    let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.0), 77);
    let mut groups = c.world();
    for len in [8usize, 3000, 20_000] {
        let data = payload(len, 3);
        for mode in [
            BcastMode::Offloaded,
            BcastMode::HostBased,
            BcastMode::nic_assisted(),
            BcastMode::NicAssisted { chunk: 1024 },
            BcastMode::nic_assisted_whole(),
        ] {
            let skew: Vec<u32> = (0..n).map(|r| r * 13 % 70).collect();
            let got = bcast_all(&mut c, &mut groups, mode, shape, 4, &data, &skew);
            assert!(
                got.iter().all(|g| g.as_deref() == Ok(&data[..])),
                "len {len} {mode:?}"
            );
        }
    }
    // Different sizes with the same rounded lambda share one schedule.
    let before = groups[0].schedules.len();
    let data = payload(9, 1);
    bcast_all(
        &mut c,
        &mut groups,
        BcastMode::HostBased,
        shape,
        4,
        &data,
        &[0; 9],
    );
    assert_eq!(
        groups[0].schedules.len(),
        before,
        "8 and 9 bytes: both flat"
    );
}

fn bcast_mode_strategy() -> impl Strategy<Value = BcastMode> {
    prop_oneof![
        Just(BcastMode::Offloaded),
        Just(BcastMode::HostBased),
        (1u32..3000).prop_map(|chunk| BcastMode::NicAssisted { chunk }),
        Just(BcastMode::nic_assisted()),
        Just(BcastMode::nic_assisted_whole()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random sizes, groups, roots, shapes, chunk sizes and arrival skew
    /// at 20 % loss: every member ends with the root's bytes.
    #[test]
    fn every_mode_delivers_random_broadcasts(
        n in 1u32..10, root in 0u32..10, len in 0usize..20_000, mode in bcast_mode_strategy(),
        shape in prop_oneof![
            Just(TreeShape::Binomial), (1u32..5).prop_map(TreeShape::Kary), Just(TreeShape::Chain),
            (1.0f64..9.0).prop_map(|l| TreeShape::Postal(Lambda::Given(l))),
            Just(TreeShape::Postal(Lambda::Link(LINK))),
        ],
        seed in any::<u64>(), skew in proptest::collection::vec(0u32..300, 10),
    ) {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.2, 0.1, 0.01), seed);
        let mut groups = c.world();
        let data = payload(len, seed);
        let root = root % n;
        for (r, got) in bcast_all(&mut c, &mut groups, mode, shape, root, &data, &skew[..n as usize]).into_iter().enumerate() {
            prop_assert_eq!(got.as_deref(), Ok(&data[..]), "rank {}", r);
        }
    }
}
