//! The engine's exactly-once promise, through the simulator: many tagged
//! messages under loss, duplication, corruption and reordering on a costed
//! wire; and determinism: one seed, one result, bit for bit.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use outboard_engine::{Completion, Endpoint, NodeId, PortId, RecvMatch};
use outboard_sim::profile::FaultRates;
use outboard_sim::{Profile, RunReport, Simulation, Time};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const NODES: u32 = 8;
const PER_NODE: usize = 40;
const MAX_LEN: u32 = 12 * 1024;

fn pattern(src: u32, seq: u64, i: usize) -> u8 {
    let x = (u64::from(src) << 40) ^ seq.wrapping_mul(0x9E37_79B9) ^ (i as u64).wrapping_mul(31);
    (x ^ (x >> 7) ^ (x >> 13)) as u8
}

fn endpoint(node: u32) -> Endpoint {
    Endpoint { node: NodeId(node), port: PortId(0), gen: 1 }
}

/// (completion time, source node, tag, length) of every receive, per node.
type Log = Vec<Vec<(Time, u32, u64, u32)>>;

fn lossy_profile() -> Profile {
    let mut p = Profile::builtin("elan3");
    p.faults = FaultRates { loss: 0.1, duplicate: 0.05, corrupt: 0.02, jitter_us: 20.0 };
    p
}

/// Every node sends PER_NODE messages of random sizes to random peers
/// (plan drawn from `seed`), a bounded number at a time; every node
/// receives what the plan sends it. Returns the receive log and the run.
fn traffic(profile: &Profile, seed: u64) -> (Log, RunReport) {
    let mut plan_rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let plan: Vec<Vec<(u32, u32)>> = (0..NODES)
        .map(|src| {
            (0..PER_NODE)
                .map(|_| {
                    let dst = (src + plan_rng.gen_range(1..NODES)) % NODES;
                    let len = if plan_rng.gen_bool(0.05) { MAX_LEN } else { plan_rng.gen_range(0..2048) };
                    (dst, len)
                })
                .collect()
        })
        .collect();
    let mut sim = Simulation::with_config(profile, NODES, seed, |c| c.max_ports = 1).unwrap();
    let log: Rc<RefCell<Log>> = Rc::new(RefCell::new(vec![Vec::new(); NODES as usize]));
    for me in 0..NODES {
        let mine = plan[me as usize].clone();
        let expected = plan.iter().flatten().filter(|(d, _)| *d == me).count();
        let log = log.clone();
        sim.spawn(me, move |p| async move {
            let mut port = p.open_port(0).unwrap();
            let mut recvs = Vec::new();
            for _ in 0..expected {
                let buf = port.buffer(MAX_LEN).unwrap();
                recvs.push((port.start_recv(RecvMatch::any(), buf).unwrap(), buf));
            }
            let mut seqs: BTreeMap<u32, u64> = BTreeMap::new();
            let mut window = std::collections::VecDeque::new();
            for (dst, len) in mine {
                let seq = seqs.entry(dst).or_insert(0);
                let tag = (u64::from(me) << 32) | *seq;
                let data: Vec<u8> = (0..len as usize).map(|i| pattern(me, *seq, i)).collect();
                *seq += 1;
                let buf = port.buffer_from(&data).unwrap();
                window.push_back((port.start_send(endpoint(dst), tag, buf).unwrap(), buf));
                if window.len() >= 16 {
                    let (r, b) = window.pop_front().unwrap();
                    assert_eq!(p.wait(&mut port, r).await.unwrap(), Completion::Sent);
                    port.free(b).unwrap();
                }
            }
            for (r, b) in window {
                assert_eq!(p.wait(&mut port, r).await.unwrap(), Completion::Sent);
                port.free(b).unwrap();
            }
            for (r, buf) in recvs {
                let Completion::Received { src, tag, len } = p.wait(&mut port, r).await.unwrap() else {
                    panic!("not a receive")
                };
                let data = port.read_buffer(buf).unwrap();
                let seq = tag & 0xffff_ffff;
                assert_eq!(tag >> 32, u64::from(src.node.0), "tag names its sender");
                for (i, b) in data[..len as usize].iter().enumerate() {
                    assert_eq!(*b, pattern(src.node.0, seq, i), "byte {i} of message {seq} from {src:?}");
                }
                log.borrow_mut()[me as usize].push((p.now(), src.node.0, tag, len));
            }
        });
    }
    let report = sim.run().unwrap_or_else(|e| panic!("{e}"));
    assert!(sim.engines_quiet(), "everything acknowledged at the end");
    let log = Rc::try_unwrap(log).ok().unwrap().into_inner();
    (log, report)
}

#[test]
fn many_tagged_messages_arrive_exactly_once_in_order_over_a_lossy_wire() {
    let (log, report) = traffic(&lossy_profile(), 11);
    assert!(
        report.wire.lost > 10 && report.wire.duplicated > 5 && report.wire.corrupted > 2,
        "faults happened: {report:?}"
    );
    let mut total = 0;
    for (me, entries) in log.iter().enumerate() {
        // Per sender, sequence numbers 0, 1, 2, ... each exactly once.
        let mut next: BTreeMap<u32, u64> = BTreeMap::new();
        for &(_, src, tag, _) in entries {
            let want = next.entry(src).or_insert(0);
            assert_eq!(tag & 0xffff_ffff, *want, "node {me}: from {src} in order, no gap, no duplicate");
            *want += 1;
        }
        total += entries.len();
    }
    assert_eq!(total, NODES as usize * PER_NODE, "every message delivered once");
}

#[test]
fn the_same_seed_gives_bit_identical_results() {
    let p = lossy_profile();
    let (a, ra) = traffic(&p, 5);
    let (b, rb) = traffic(&p, 5);
    assert_eq!(ra, rb);
    assert_eq!(a, b, "same completion times to the picosecond");
    let (c, rc) = traffic(&p, 6);
    assert!(ra != rc || a != c, "another seed is another run");
}

#[test]
fn a_dead_peer_fails_sends_instead_of_hanging() {
    let mut profile = Profile::builtin("gm-lanai72");
    profile.faults = FaultRates::default();
    let mut sim = Simulation::with_config(&profile, 2, 3, |c| {
        c.max_ports = 1;
        c.peer_timeout = std::time::Duration::from_millis(5);
    })
    .unwrap();
    let result = Rc::new(RefCell::new(None));
    let r2 = result.clone();
    sim.spawn(0, move |p| async move {
        let mut port = p.open_port(0).unwrap();
        p.compute(outboard_sim::Dur::from_us(100.0)).await;
        let buf = port.buffer(64).unwrap();
        let s = port.start_send(endpoint(1), 1, buf).unwrap();
        *r2.borrow_mut() = Some(p.wait(&mut port, s).await);
    });
    sim.spawn(1, |p| async move {
        let _port = p.open_port(0).unwrap();
        // Never returns: it dies with its node.
        std::future::pending::<()>().await;
    });
    sim.kill_at(1, Time(50_000_000));
    sim.run().unwrap();
    let got = result.borrow_mut().take().expect("send completed");
    assert!(
        matches!(got, Err(outboard_host::HostError::Op(outboard_engine::OpError::PeerUnreachable(NodeId(1))))),
        "{got:?}"
    );
}
