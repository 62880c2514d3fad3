//! Flow control between a collective's members: in a loop of large
//! reductions, the members that only send run ahead of a root that is
//! slower to call by whole calls and fill its early-packet pool. The root
//! refuses what does not fit and tells the refused peers when it has room
//! again, or when a call it starts waits for them; they relaunch their
//! refused packets then, oldest first, instead of on a timer.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

mod common;
use common::binomial;

const P0: PortId = PortId(0);
const G: GroupId = GroupId(9);
const REDUCE: ScheduleId = ScheduleId(4);

/// Binomial reduction to rank 0.
fn reduce_to_0(rank: u32, n: u32) -> Schedule {
    let (parent, children) = binomial(rank, n);
    let mut steps = vec![Step::recv(children, Fold::Combine)];
    if let Some(p) = parent {
        steps.push(Step::send([p]));
    }
    Schedule::new(steps)
}

/// What one loop came to.
struct Run {
    /// Virtual time from the first call to the last completion.
    took: Duration,
    stats: Vec<Stats>,
    /// The root's results, call by call.
    results: Vec<Vec<u8>>,
}

/// `calls` reductions of `bytes` (i64 sums) on `n` members, each calling
/// the next as soon as its last returned, except the root, which takes
/// `root_delay` between calls (its host's work).
fn run(n: u32, bytes: usize, calls: u64, root_delay: Duration, retry: Duration) -> Run {
    let mut net = Network::new(n, LinkConfig::default(), 1, |node| {
        let mut c = EngineConfig::new(node, 0xC0FFEE, 1000 + u64::from(node.0));
        c.coll_unexpected_bytes = 1 << 20;
        c.retry_interval = retry;
        c
    });
    let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    for r in 0..n {
        let node = NodeId(r);
        let m = net.memory(node).alloc_with(&MemberList::from_endpoints(eps.clone()).encode());
        net.command(node, P0, Command::CreateGroup { op: OpId(1), group: G, rank: r, members: m }).unwrap();
        let s = net.memory(node).alloc_with(&reduce_to_0(r, n).encode());
        net.command(node, P0, Command::SetSchedule { op: OpId(2), group: G, schedule: REDUCE, buf: s }).unwrap();
        assert!(net.take_events(node).iter().all(|e| e.result.is_ok()));
    }
    let sum = Reduction::new(ReduceOp::Sum, Datatype::I64).unwrap();
    // Rank r contributes r + i + call at element i.
    let data = |r: u32, k: u64| -> Vec<u8> { (0..bytes as i64 / 8).flat_map(|i| (i64::from(r) + i + k as i64).to_ne_bytes()).collect() };
    let mut posted = vec![0u64; n as usize];
    let mut done = vec![0u64; n as usize];
    let mut root_bufs = Vec::new();
    let mut root_ready = None;
    let t0 = net.now();
    let mut ticks = 0;
    while !done.iter().all(|&d| d == calls) {
        ticks += 1;
        assert!(ticks < 1_000_000, "stalled: {done:?} of {calls}");
        for r in 0..n {
            for e in net.take_events(NodeId(r)) {
                assert!(e.result.is_ok(), "rank {r}: {e:?}");
                done[r as usize] += 1;
                if r == 0 {
                    root_ready = Some(net.now() + root_delay);
                }
            }
            if r == 0 && root_ready.is_some_and(|t| net.now() < t) {
                continue;
            }
            if done[r as usize] == posted[r as usize] && posted[r as usize] < calls {
                let k = posted[r as usize];
                let node = NodeId(r);
                let send = net.memory(node).alloc_with(&data(r, k));
                let recv = net.memory(node).alloc(if r == 0 { bytes as u32 } else { 0 });
                let cmd = Command::Collective { op: OpId(100 + k), group: G, schedule: REDUCE, reduction: Some(sum), send, recv };
                net.command(node, P0, cmd).unwrap();
                if r == 0 {
                    root_bufs.push(recv);
                }
                posted[r as usize] += 1;
            }
        }
        net.run_for(Duration::from_micros(2)).unwrap();
    }
    let took = net.now().saturating_since(t0);
    let stats = (0..n).map(|r| net.engine(NodeId(r)).stats().clone()).collect();
    let results = root_bufs.iter().map(|&b| net.memory(NodeId(0)).bytes(b).to_vec()).collect();
    Run { took, stats, results }
}

/// The loop keeps the root's pace, whatever the retry timer: with a retry
/// interval of 50 ms, far beyond the run, only the root's notices can
/// bring the refused packets back in time (before them, each refusal cost
/// a retry interval: 0.8 ms and 3.2 ms for these loops at 200 us, seconds
/// at 50 ms). Every result is exact.
#[test]
fn a_full_pool_says_when_it_has_room_and_a_reduction_loop_keeps_the_roots_pace() {
    let n = 4u32;
    let calls = 20u64;
    for (bytes, delay_us) in [(64usize << 10, 20u64), (256 << 10, 80)] {
        let delay = Duration::from_micros(delay_us);
        let r = run(n, bytes, calls, delay, Duration::from_millis(50));
        let refused: u64 = r.stats.iter().map(|s| s.coll_refused).sum();
        let resumes: u64 = r.stats.iter().map(|s| s.coll_resumes_sent).sum();
        // The figure docs/performance.md quotes (`-- --nocapture`).
        eprintln!("{calls} reductions of {bytes} bytes, root {delay:?} between calls: {:?} ({refused} refused, {resumes} notices)", r.took);
        assert!(refused > 0 && resumes > 0, "{bytes} bytes: the pool never filled ({refused} refused, {resumes} notices)");
        // The root's pace: its delay per call, plus a little for the last
        // call's packets.
        let bound = delay * calls as u32 + delay * calls as u32 / 4 + Duration::from_micros(200);
        assert!(r.took < bound, "{bytes} bytes: {:?} for {calls} calls, over {bound:?} ({refused} refused, {resumes} notices)", r.took);
        for (k, got) in r.results.iter().enumerate() {
            let want: Vec<u8> = (0..bytes as i64 / 8)
                .flat_map(|i| (0..i64::from(n)).map(|m| m + i + k as i64).sum::<i64>().to_ne_bytes())
                .collect();
            assert!(got == &want, "{bytes} bytes: call {k}'s result differs");
        }
    }
}
