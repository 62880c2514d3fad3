//! The NIC collective protocol's barrier (`Command::NicBarrier`, wire kind
//! 13) between engines over the lossy test network: no barrier completes
//! before every member entered it, consecutive barriers never mix, losses
//! and duplicates are recovered by the collective itself (requests to
//! resend), a dead member is reported, and the protocol sends no
//! acknowledgements.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

mod common;
use common::{binomial, dissemination};
use proptest::prelude::*;

const P0: PortId = PortId(0);
const G: GroupId = GroupId(41);
const DISSEMINATION: ScheduleId = ScheduleId(1);
const GATHER_BCAST: ScheduleId = ScheduleId(2);

/// Gather to rank 0 up a binomial tree, release back down it.
fn gather_bcast(rank: u32, n: u32) -> Schedule {
    let (parent, children) = binomial(rank, n);
    let mut steps = vec![Step::recv(children.clone(), Fold::Ignore)];
    if let Some(p) = parent {
        steps.push(Step::exchange([p], [p], Fold::Ignore));
    }
    steps.push(Step::send(children));
    Schedule::new(steps)
}

fn cluster(n: u32, link: LinkConfig, seed: u64) -> Network {
    let mut net = Network::new(n, link, seed, |node| {
        let mut c = EngineConfig::new(node, 0xBA22, 500 + u64::from(node.0));
        // Long enough that 30 % loss never outlasts it (a live peer
        // declared dead would fail a barrier); deaths are still noticed, in
        // virtual time.
        c.peer_timeout = Duration::from_millis(500);
        c.rto_max = Duration::from_millis(5);
        c
    });
    let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    let members = MemberList::from_endpoints(eps.iter().copied()).encode();
    for rank in 0..n {
        let node = NodeId(rank);
        let m = net.memory(node).alloc_with(&members);
        net.command(node, P0, Command::CreateGroup { op: OpId(1), group: G, rank, members: m }).unwrap();
        for (id, s) in [(DISSEMINATION, dissemination(rank, n)), (GATHER_BCAST, gather_bcast(rank, n))] {
            let buf = net.memory(node).alloc_with(&s.encode());
            net.command(node, P0, Command::SetSchedule { op: OpId(2), group: G, schedule: id, buf }).unwrap();
        }
        let evs = net.take_events(node);
        assert_eq!(evs.len(), 3);
        assert!(evs.iter().all(|e| e.result.is_ok()), "{evs:?}");
    }
    net
}

fn barrier(op: u64, schedule: ScheduleId) -> Command {
    Command::NicBarrier { op: OpId(op), group: G, schedule }
}

/// Per rank, its completions in the order they came: (op, result, time
/// seen).
type Seen = Vec<Vec<(OpId, Result<Completion, OpError>, Instant)>>;

/// Each rank posts `entries[r].len()` barriers, barrier j at time
/// `entries[r][j]` (us), whether or not its earlier ones completed (so a
/// fast rank runs ahead of a slow one by several barriers). Returns, per
/// rank, the completions in the order they came.
fn run(net: &mut Network, entries: &[Vec<u64>], schedule: ScheduleId) -> Seen {
    let n = entries.len();
    let k = entries[0].len();
    let t0 = net.now();
    let tick = Duration::from_micros(10);
    let mut posted = vec![0usize; n];
    let mut seen: Vec<Vec<_>> = vec![Vec::new(); n];
    for _ in 0..200_000 {
        for r in 0..n {
            while posted[r] < k && t0 + Duration::from_micros(entries[r][posted[r]]) <= net.now() {
                net.command(NodeId(r as u32), P0, barrier(100 + posted[r] as u64, schedule)).unwrap();
                posted[r] += 1;
            }
        }
        net.run_for(tick).unwrap();
        let now = net.now();
        for (r, s) in seen.iter_mut().enumerate() {
            s.extend(net.take_events(NodeId(r as u32)).into_iter().map(|e| (e.op, e.result, now)));
        }
        if seen.iter().all(|s| s.len() == k) {
            return seen;
        }
    }
    panic!("barriers did not complete: {:?}", seen.iter().map(Vec::len).collect::<Vec<_>>());
}

/// Checks the run: rank r's j-th completion is barrier j (epoch j), and it
/// came after the last rank entered barrier j.
fn check(entries: &[Vec<u64>], seen: &Seen, t0: Instant) {
    let k = entries[0].len();
    for j in 0..k {
        let last_entry = t0 + Duration::from_micros(entries.iter().map(|e| e[j]).max().unwrap());
        for (r, s) in seen.iter().enumerate() {
            let (op, result, at) = s[j];
            assert_eq!(op, OpId(100 + j as u64), "rank {r}: barriers complete in start order");
            assert_eq!(result, Ok(Completion::Collective { epoch: j as u32, len: 0 }), "rank {r} barrier {j}");
            assert!(at > last_entry, "rank {r} left barrier {j} at {at:?}, before the last member entered at {last_entry:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Under 30 % loss and 30 % duplication (and some corruption, and
    /// reordering), at 2..16 ranks, with ranks entering at random times
    /// and running up to three barriers ahead of each other.
    #[test]
    fn barriers_complete_after_all_entered_and_never_mix(
        n in 2u32..=16,
        seed in any::<u64>(),
        tree in any::<bool>(),
        gaps in proptest::collection::vec(proptest::collection::vec(0u64..400, 3), 16),
    ) {
        let mut net = cluster(n, LinkConfig::lossy(0.3, 0.3, 0.01), seed);
        let entries: Vec<Vec<u64>> = gaps[..n as usize]
            .iter()
            .map(|g| g.iter().scan(0, |t, d| { *t += d; Some(*t) }).collect())
            .collect();
        let t0 = net.now();
        let schedule = if tree { GATHER_BCAST } else { DISSEMINATION };
        let seen = run(&mut net, &entries, schedule);
        check(&entries, &seen, t0);
        let lost = net.link_stats().lost;
        let stats: Vec<NicCollStats> = (0..n).map(|r| net.engine(NodeId(r)).nic_coll_stats()).collect();
        prop_assert!(stats.iter().all(|s| s.barriers == 3));
        if lost > 0 {
            prop_assert!(stats.iter().map(|s| s.nacks).sum::<u64>() > 0, "losses were recovered by requests");
        }
    }
}

#[test]
fn a_missing_member_holds_everyone_back() {
    let n = 6;
    let mut net = cluster(n, LinkConfig::lossy(0.3, 0.3, 0.0), 7);
    for r in 0..n - 1 {
        net.command(NodeId(r), P0, barrier(100, DISSEMINATION)).unwrap();
    }
    net.run_for(Duration::from_millis(30)).unwrap();
    for r in 0..n {
        assert!(net.take_events(NodeId(r)).is_empty(), "rank {r} left a barrier rank {} never entered", n - 1);
    }
    net.command(NodeId(n - 1), P0, barrier(100, DISSEMINATION)).unwrap();
    common::run_until_every_barrier_completes(&mut net, n);
}

#[test]
fn a_dead_member_is_reported_not_waited_for() {
    let n = 5;
    let mut net = cluster(n, LinkConfig::lossy(0.3, 0.3, 0.0), 3);
    net.kill(NodeId(3));
    for r in (0..n).filter(|&r| r != 3) {
        net.command(NodeId(r), P0, barrier(100, GATHER_BCAST)).unwrap();
    }
    let mut got: Vec<Option<Result<Completion, OpError>>> = vec![None; n as usize];
    net.run_until("failure reports", |net| {
        for r in (0..n).filter(|&r| r != 3) {
            if let Some(e) = net.take_events(NodeId(r)).pop() {
                got[r as usize] = Some(e.result);
            }
        }
        (0..n).filter(|&r| r != 3).all(|r| got[r as usize].is_some())
    })
    .unwrap();
    for r in (0..n).filter(|&r| r != 3) {
        assert_eq!(got[r as usize], Some(Err(OpError::PeerUnreachable(NodeId(3)))), "rank {r}");
    }
    // The group's later barriers fail at once: the member is known dead.
    net.command(NodeId(0), P0, barrier(101, GATHER_BCAST)).unwrap();
    net.run_for(Duration::from_micros(10)).unwrap();
    let e = net.take_events(NodeId(0));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].result, Err(OpError::PeerUnreachable(NodeId(3))));
}

#[test]
fn on_a_clean_link_a_barrier_is_its_notifications_and_nothing_else() {
    for n in [2u32, 5, 8, 16] {
        let mut net = cluster(n, LinkConfig::default(), 1);
        let before = net.link_stats().sent;
        for r in 0..n {
            net.command(NodeId(r), P0, barrier(100, DISSEMINATION)).unwrap();
        }
        net.run_until_quiet().unwrap();
        let rounds = u64::from(32 - (n - 1).leading_zeros());
        assert_eq!(net.link_stats().sent - before, u64::from(n) * rounds, "{n} ranks: one datagram per notification, no acknowledgement");
        for r in 0..n {
            let e = net.take_events(NodeId(r));
            assert_eq!(e.len(), 1);
            assert!(e[0].result.is_ok());
            let s = net.engine(NodeId(r)).nic_coll_stats();
            assert_eq!((s.nacks, s.resent, s.duplicates), (0, 0, 0));
        }
    }
}

#[test]
fn the_point_to_point_default_and_the_protocol_share_a_group_without_mixing() {
    let n = 4;
    let mut net = cluster(n, LinkConfig::lossy(0.2, 0.2, 0.0), 11);
    let empty = HostBuf { addr: 0, len: 0 };
    for r in 0..n {
        let p2p = Command::Collective { op: OpId(50), group: G, schedule: DISSEMINATION, reduction: None, send: empty, recv: empty };
        net.command(NodeId(r), P0, p2p).unwrap();
        net.command(NodeId(r), P0, barrier(51, DISSEMINATION)).unwrap();
        let p2p = Command::Collective { op: OpId(52), group: G, schedule: DISSEMINATION, reduction: None, send: empty, recv: empty };
        net.command(NodeId(r), P0, p2p).unwrap();
    }
    let mut got = vec![Vec::new(); n as usize];
    net.run_until("all", |net| {
        for r in 0..n {
            got[r as usize].extend(net.take_events(NodeId(r)));
        }
        got.iter().all(|g| g.len() == 3)
    })
    .unwrap();
    for g in got {
        let mut ops: Vec<(u64, Result<Completion, OpError>)> = g.iter().map(|e| (e.op.0, e.result)).collect();
        ops.sort_by_key(|o| o.0);
        assert_eq!(
            ops,
            vec![
                (50, Ok(Completion::Collective { epoch: 0, len: 0 })),
                (51, Ok(Completion::Collective { epoch: 0, len: 0 })),
                (52, Ok(Completion::Collective { epoch: 1, len: 0 })),
            ]
        );
    }
}

#[test]
fn a_reduction_schedule_is_refused() {
    let n = 3;
    let mut net = cluster(n, LinkConfig::default(), 2);
    let s = Schedule::new(vec![Step::recv([1], Fold::Combine)]);
    let buf = net.memory(NodeId(0)).alloc_with(&s.encode());
    net.command(NodeId(0), P0, Command::SetSchedule { op: OpId(3), group: G, schedule: ScheduleId(9), buf }).unwrap();
    net.take_events(NodeId(0));
    net.command(NodeId(0), P0, barrier(100, ScheduleId(9))).unwrap();
    let e = net.take_events(NodeId(0));
    assert!(matches!(e[0].result, Err(OpError::Collective(CollError::Malformed(_)))), "{e:?}");
    net.command(NodeId(0), P0, barrier(101, ScheduleId(8))).unwrap();
    let e = net.take_events(NodeId(0));
    assert_eq!(e[0].result, Err(OpError::Collective(CollError::NoSuchSchedule)));
}


/// A protocol packet from `from` to node 0, sealed under the job's key.
fn forged(net: &mut Network, from: u32, h: outboard_wire::NicCollHeader) -> Vec<u8> {
    use outboard_wire::{BodyRepr, Header, Kind, Seq, HEADER_LEN, NIC_COLL_LEN};
    let key = net.engine(NodeId(0)).config().mac_key();
    let boot = net.engine(NodeId(from)).config().boot;
    let hdr = Header { kind: Kind::NicColl, flags: 0, src_node: from, dst_node: 0, boot, seq: Seq(0), ack: Seq(0), horizon: Seq(0) };
    let mut buf = vec![0u8; HEADER_LEN + NIC_COLL_LEN];
    outboard_wire::emit_prefix(&hdr, &BodyRepr::NicColl(h), 0, &mut buf).unwrap();
    outboard_wire::seal(&mut buf, &key);
    buf
}

#[test]
fn impostors_strangers_and_far_epochs_are_dropped() {
    use outboard_wire::{NicCollHeader, NicCollType};
    let n = 3;
    let mut net = cluster(n, LinkConfig::default(), 9);
    net.command(NodeId(0), P0, barrier(100, DISSEMINATION)).unwrap();
    net.run_for(Duration::from_micros(100)).unwrap();
    // Rank 0 of 3 waits first for rank 2's round 0.
    let genuine = NicCollHeader {
        src_port: 0,
        dst_port: 0,
        ptype: NicCollType::Notify,
        src_gen: 1,
        dst_gen: 1,
        group: G.0,
        epoch: 0,
        src_rank: 2,
        round: 0,
        schedule: DISSEMINATION.0,
    };
    let now = net.now();
    let bad = [
        (1, genuine),                                     // node 1 claiming rank 2
        (2, NicCollHeader { dst_gen: 2, ..genuine }),     // another incarnation
        (2, NicCollHeader { group: 99, ..genuine }),      // no such group
        (2, NicCollHeader { round: 3, ..genuine }),       // a round rank 2 never sends
    ];
    for (from, h) in bad {
        let bytes = forged(&mut net, from, h);
        net.engine(NodeId(0)).handle_packet(now, NodeId(from), &bytes);
    }
    let far = forged(&mut net, 2, NicCollHeader { epoch: 2, ..genuine });
    net.engine(NodeId(0)).handle_packet(now, NodeId(2), &far);
    let s = net.engine(NodeId(0)).nic_coll_stats();
    assert_eq!((s.dropped, s.out_of_window), (4, 1), "{s:?}");
    // The genuine one counts once, however often it comes.
    let ok = forged(&mut net, 2, genuine);
    net.engine(NodeId(0)).handle_packet(now, NodeId(2), &ok);
    net.engine(NodeId(0)).handle_packet(now, NodeId(2), &ok);
    assert_eq!(net.engine(NodeId(0)).nic_coll_stats().duplicates, 1);
    assert!(net.take_events(NodeId(0)).is_empty(), "one arrival of two: still waiting");
    // The others enter: everyone completes epoch 0.
    for r in 1..n {
        net.command(NodeId(r), P0, barrier(100, DISSEMINATION)).unwrap();
    }
    net.run_until_quiet().unwrap();
    for r in 0..n {
        let e = net.take_events(NodeId(r));
        assert_eq!(e.len(), 1, "rank {r}");
        assert_eq!(e[0].result, Ok(Completion::Collective { epoch: 0, len: 0 }));
    }
    // A stale notification of the finished epoch changes nothing.
    let later = net.now();
    let stale = net.engine(NodeId(0)).nic_coll_stats().stale;
    net.engine(NodeId(0)).handle_packet(later, NodeId(2), &ok);
    assert_eq!(net.engine(NodeId(0)).nic_coll_stats().stale, stale + 1);
    assert!(net.take_events(NodeId(0)).is_empty());
}
