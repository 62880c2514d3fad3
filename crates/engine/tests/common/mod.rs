//! What the engine's failure tests share: engines with a short peer
//! timeout (so deaths are noticed in a few simulated milliseconds), and
//! driving the test network until one operation completes.
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use outboard_engine::*;
use outboard_testnet::Network;

pub const P0: PortId = PortId(0);
pub const PEER_TIMEOUT: Duration = Duration::from_millis(40);
pub const JOB: u64 = 9;

/// Node `n`'s configuration: a 40 ms peer timeout, retransmissions at
/// most 5 ms apart.
pub fn cfg(n: NodeId) -> EngineConfig {
    let mut c = EngineConfig::new(n, JOB, 0);
    c.peer_timeout = PEER_TIMEOUT;
    c.rto_max = Duration::from_millis(5);
    c
}

/// Runs until every one of nodes `0..n` has completed a barrier: exactly
/// one empty collective completion each, with epoch 0.
pub fn run_until_every_barrier_completes(net: &mut Network, n: u32) {
    let mut done = vec![false; n as usize];
    net.run_until("barrier", |net| {
        for r in 0..n {
            for e in net.take_events(NodeId(r)) {
                assert_eq!(e.result, Ok(Completion::Collective { epoch: 0, len: 0 }));
                done[r as usize] = true;
            }
        }
        done.iter().all(|d| *d)
    })
    .unwrap();
}

/// Runs until `op` completes on `node`; its result.
pub fn result_of(net: &mut Network, node: NodeId, op: OpId) -> Result<Completion, OpError> {
    let mut r = None;
    net.run_until("completion", |n| {
        for e in n.take_events(node) {
            assert_eq!(e.op, op, "only {op:?} completes: {e:?}");
            r = Some(e.result);
        }
        r.is_some()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    r.unwrap()
}

/// Dissemination barrier: step k sends to rank + 2^k, waits for rank - 2^k.
pub fn dissemination(rank: u32, n: u32) -> Schedule {
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        steps.push(Step::exchange([(rank + d) % n], [(rank + n - d) % n], Fold::Ignore));
        d *= 2;
    }
    Schedule::new(steps)
}

/// A rank's parent and children in the binomial tree rooted at rank 0.
pub fn binomial(rank: u32, n: u32) -> (Option<u32>, Vec<u32>) {
    let mut children = Vec::new();
    let mut mask = 1;
    while mask < n {
        if rank & mask != 0 {
            return (Some(rank - mask), children);
        }
        if rank + mask < n {
            children.push(rank + mask);
        }
        mask <<= 1;
    }
    (None, children)
}
