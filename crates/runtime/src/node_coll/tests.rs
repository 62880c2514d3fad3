//! Node collectives with threads for members: each thread maps the group's
//! region for itself, as a process would.

use std::sync::atomic::AtomicU64;
use std::sync::Barrier;

use outboard_engine::{Datatype, ReduceOp};
use proptest::prelude::*;

use super::*;

static NEXT_JOB: AtomicU64 = AtomicU64::new(1);

/// `n` members of one fresh group, each running `f(member, its NodeColl)`
/// on a thread of its own; their results in member order.
fn run<T: Send>(n: usize, f: impl Fn(usize, &mut NodeColl) -> T + Sync) -> Vec<T> {
    let job = NEXT_JOB.fetch_add(1, Ordering::Relaxed) ^ u64::from(std::process::id()) << 32;
    let pid = std::process::id();
    let members: Vec<u32> = (0..n as u32).collect();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let (f, members) = (&f, members.clone());
                s.spawn(move || {
                    let mut local = NodeLocal::new(job, 1, 0, vec![pid; n], 64);
                    let mut nc = local.open(9, i, members).unwrap().expect("every member is local");
                    f(i, &mut nc)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// What member `i` contributes to reduction number `k`: `len` elements.
fn contribution(i: usize, k: usize, len: usize, float: bool) -> Vec<u8> {
    if float {
        // Sums whose value depends on the order they are added in:
        // (1e16 + 1) - 1e16 is 0, (1e16 - 1e16) + 1 is 1.
        let big = [1e16, 1.0, -1e16];
        f64s(&(0..len).map(|e| big[i % 3] * (1 + (k + e) % 2) as f64).collect::<Vec<_>>())
    } else {
        i64s(&(0..len).map(|e| (i as i64 + 1) * 1_000_003 + (k * 31 + e) as i64).collect::<Vec<_>>())
    }
}

/// The left fold in group-rank order.
fn reference(red: Reduction, inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = inputs[0].clone();
    for x in &inputs[1..] {
        red.fold(&mut acc, x, false).unwrap();
    }
    acc
}

#[derive(Debug, Clone)]
enum Step {
    Barrier,
    Bcast { root: usize, len: usize },
    Reduce { root: usize, len: usize, float: bool, in_place: bool },
    Allreduce { len: usize, float: bool, in_place: bool },
}

fn step(n: usize) -> impl Strategy<Value = Step> {
    // Lengths around a slot's, in elements of 8 bytes.
    // Around a flat call's longest (512 elements), and a slot's.
    let len = prop_oneof![0..4usize, 510..514usize, 8190..8200usize, 17000..17001usize];
    prop_oneof![
        Just(Step::Barrier),
        (0..n, len.clone()).prop_map(|(root, len)| Step::Bcast { root, len: len * 8 + 3 }),
        (0..n, len.clone(), any::<bool>(), any::<bool>()).prop_map(|(root, len, float, in_place)| Step::Reduce { root, len, float, in_place }),
        (len, any::<bool>(), any::<bool>()).prop_map(|(len, float, in_place)| Step::Allreduce { len, float, in_place }),
    ]
}

fn red(float: bool) -> Reduction {
    Reduction { op: ReduceOp::Sum, dtype: if float { Datatype::F64 } else { Datatype::I64 } }
}

/// What member `i` ends step `k` with (`None`: nothing to check).
fn run_step(i: usize, k: usize, s: &Step, nc: &mut NodeColl) -> Option<Vec<u8>> {
    match *s {
        Step::Barrier => {
            nc.barrier().unwrap();
            None
        }
        Step::Bcast { root, len } => {
            let mut buf = if i == root { (0..len).map(|b| (b * 13 + k) as u8).collect() } else { vec![0xee; len] };
            nc.bcast(&mut buf, root as u32).unwrap();
            Some(buf)
        }
        Step::Reduce { root, len, float, in_place } => {
            let mine = contribution(i, k, len, float);
            let out = reduce_at(i, nc, mine, float, in_place, Some(root));
            (i == root).then_some(out)
        }
        Step::Allreduce { len, float, in_place } => Some(reduce_at(i, nc, contribution(i, k, len, float), float, in_place, None)),
    }
}

fn reduce_at(i: usize, nc: &mut NodeColl, mine: Vec<u8>, float: bool, in_place: bool, root: Option<usize>) -> Vec<u8> {
    let gets = root.is_none_or(|r| r == i);
    let mut out = vec![0xee; mine.len()];
    let mut mine = mine;
    let bufs = if in_place {
        Buffers::InPlace(&mut mine)
    } else {
        Buffers::Separate { send: &mine, recv: gets.then_some(&mut out[..]) }
    };
    match root {
        Some(r) => nc.reduce(bufs, red(float), r as u32).unwrap(),
        None => nc.allreduce(bufs, red(float)).unwrap(),
    }
    if in_place { mine } else { out }
}

fn expected(n: usize, k: usize, s: &Step, i: usize) -> Option<Vec<u8>> {
    match *s {
        Step::Barrier => None,
        Step::Bcast { root, len } => Some((0..len).map(|b| (b * 13 + k) as u8).collect::<Vec<u8>>()).filter(|_| root < n),
        Step::Reduce { root, len, float, .. } => (i == root).then(|| reference(red(float), &(0..n).map(|j| contribution(j, k, len, float)).collect::<Vec<_>>())),
        Step::Allreduce { len, float, .. } => Some(reference(red(float), &(0..n).map(|j| contribution(j, k, len, float)).collect::<Vec<_>>())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Any sequence of collectives gives every member what a sequential
    /// left fold in group-rank order gives (bit for bit, floats too), at
    /// lengths below, at and across a slot's.
    #[test]
    fn every_collective_equals_the_rank_order_fold(n in 2usize..5, steps in prop::collection::vec(step(4), 1..8)) {
        let steps: Vec<Step> = steps.into_iter().map(|s| match s {
            Step::Bcast { root, len } => Step::Bcast { root: root % n, len },
            Step::Reduce { root, len, float, in_place } => Step::Reduce { root: root % n, len, float, in_place },
            s => s,
        }).collect();
        let got = run(n, |i, nc| steps.iter().enumerate().map(|(k, s)| run_step(i, k, s, nc)).collect::<Vec<_>>());
        for (i, mine) in got.iter().enumerate() {
            for (k, s) in steps.iter().enumerate() {
                prop_assert_eq!(&mine[k], &expected(n, k, s, i), "member {} step {} {:?}", i, k, s);
            }
        }
    }
}

/// Members that call different collectives at one place all get an error
/// that names both calls, and the group goes on with the next agreed call.
#[test]
fn different_calls_fail_at_every_member_and_the_group_goes_on() {
    let got = run(3, |i, nc| {
        let first = if i == 2 { nc.allreduce(Buffers::Separate { send: &i64s(&[1]), recv: Some(&mut [0; 8]) }, red(false)) } else { nc.barrier() };
        let mut b = vec![i as u8; 4];
        nc.bcast(&mut b, 1).unwrap();
        (first.map_err(|e| e.to_string()), b)
    });
    for (i, (first, b)) in got.iter().enumerate() {
        let e = first.as_ref().expect_err("a mismatch must fail");
        assert!(e.contains("different collectives"), "{e}");
        let (ours, theirs) = if i == 2 { ("an allreduce (sum on i64) of 8 bytes", "a barrier") } else { ("a barrier", "an allreduce (sum on i64) of 8 bytes") };
        assert!(e.contains(&format!("this rank {ours}, another member {theirs}")), "member {i}: {e}");
        assert_eq!(b, &vec![1u8; 4], "member {i}");
    }
}

/// Members that disagree only about the root or the length disagree too.
#[test]
fn a_different_root_or_length_is_a_different_call() {
    let got = run(2, |i, nc| {
        let mut b = vec![0u8; 8];
        let root = nc.bcast(&mut b, i as u32).map_err(|e| e.to_string());
        let mut c = vec![0u8; 8 + i];
        let len = nc.bcast(&mut c, 0).map_err(|e| e.to_string());
        (root, len)
    });
    for (root, len) in got {
        assert!(root.unwrap_err().contains("different collectives"));
        assert!(len.unwrap_err().contains("different collectives"));
    }
}

/// The region's name is gone once every member attached: nothing is left
/// in /dev/shm by a group whose members all came.
#[test]
fn the_last_member_to_attach_removes_the_name() {
    let job = NEXT_JOB.fetch_add(1, Ordering::Relaxed) ^ 0xabcd << 40;
    let prefix = RegionName::job_prefix(job, 1, 0);
    let listed = || std::fs::read_dir("/dev/shm").unwrap().filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&prefix)).count();
    let pid = std::process::id();
    let mut a = NodeLocal::new(job, 1, 0, vec![pid; 2], 64);
    let mut b = NodeLocal::new(job, 1, 0, vec![pid; 2], 64);
    let first = a.open(4, 0, vec![0, 1]).unwrap().unwrap();
    assert_eq!(listed(), 1);
    let second = b.open(4, 1, vec![0, 1]).unwrap().unwrap();
    assert_eq!(listed(), 0);
    drop((first, second));
    // A group with a member elsewhere (pid 0) has no region.
    let mut c = NodeLocal::new(job, 1, 0, vec![pid, 0], 64);
    assert!(c.open(5, 0, vec![0, 1]).unwrap().is_none());
    assert!(c.open(6, 0, vec![0]).unwrap().is_none());
}

/// A member whose process is gone fails every other member's wait for it,
/// with an error that names the rank.
#[test]
fn a_member_that_is_gone_fails_the_collective_at_every_other() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let job = NEXT_JOB.fetch_add(1, Ordering::Relaxed) ^ 0xdead << 40;
    let pid = std::process::id();
    let pids = vec![pid, pid, dead];
    let start = Barrier::new(2);
    let got: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let (pids, start) = (pids.clone(), &start);
                s.spawn(move || {
                    let mut local = NodeLocal::new(job, 1, 0, pids, 1);
                    let mut nc = local.open(3, i, vec![0, 1, 2]).unwrap().unwrap();
                    start.wait();
                    nc.barrier().unwrap_err().to_string()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for e in got {
        assert_eq!(e, format!("rank 2 died during a collective of its group (its process {dead} is gone)"));
    }
    // The third member never attached: its region's name is left for the
    // node engine to remove with the job's.
    let prefix = RegionName::job_prefix(job, 1, 0);
    let listed = || std::fs::read_dir("/dev/shm").unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).count();
    assert_eq!(listed(), 1);
    region::remove_job_regions(job, 1, 0);
    assert_eq!(listed(), 0);
}

/// A short call (flat) against a long one (through the slots, several
/// rounds) at the same place fails at every member, whichever member
/// calls it, and the group goes on.
#[test]
fn a_short_call_against_a_long_one_fails_at_every_member() {
    for long in [0usize, 1] {
        let got = run(3, |i, nc| {
            let mut b = vec![7u8; if i == long { 100_000 } else { 8 }];
            let first = nc.bcast(&mut b, 2).map_err(|e| e.to_string());
            nc.barrier().unwrap();
            first
        });
        for (i, r) in got.iter().enumerate() {
            let e = r.as_ref().expect_err("a mismatch must fail");
            assert!(e.contains("different collectives"), "long at {long}, member {i}: {e}");
        }
    }
}


/// Floats fold in group-rank order, short and long alike: with these
/// contributions any other order gives another sum.
#[test]
fn floats_fold_in_rank_order() {
    for elems in [1, 5000] {
        let want = reference(red(true), &(0..3).map(|j| contribution(j, 0, elems, true)).collect::<Vec<_>>());
        let got = run(3, |i, nc| reduce_at(i, nc, contribution(i, 0, elems, true), true, false, None));
        for g in got {
            assert_eq!(g, want, "{elems} elements");
        }
    }
}


/// A step started split-phase: its ticket.
fn start_step(i: usize, k: usize, s: &Step, nc: &mut NodeColl) -> Ticket {
    match *s {
        Step::Barrier => nc.barrier_start(),
        Step::Bcast { root, len } => {
            let data: Vec<u8> = if i == root { (0..len).map(|b| (b * 13 + k) as u8).collect() } else { vec![0xee; len] };
            nc.bcast_start(&data, root as u32)
        }
        Step::Reduce { root, len, float, .. } => nc.reduce_start(&contribution(i, k, len, float), red(float), root as u32).unwrap(),
        Step::Allreduce { len, float, .. } => nc.allreduce_start(&contribution(i, k, len, float), red(float)).unwrap(),
    }
}

/// What a split-phase step gives member `i` (the broadcast's root gets
/// nothing back: its data never left its buffer).
fn split_expected(n: usize, k: usize, s: &Step, i: usize) -> Vec<u8> {
    match *s {
        Step::Bcast { root, .. } if root == i => Vec::new(),
        _ => expected(n, k, s, i).unwrap_or_default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Collectives started split-phase (flat, through the slots, and
    /// longer than a slot), more of them outstanding than a member has
    /// records,
    /// finished by tests in any order and by blocking calls between them,
    /// give what the rank-order fold gives.
    #[test]
    fn split_phase_collectives_finish_in_any_order_with_right_results(
        n in 2usize..5,
        steps in prop::collection::vec((step(4), any::<bool>()), 1..24),
        order in any::<u64>(),
    ) {
        let steps: Vec<(Step, bool)> = steps.into_iter().map(|(s, split)| (match s {
            Step::Bcast { root, len } => Step::Bcast { root: root % n, len },
            Step::Reduce { root, len, float, in_place } => Step::Reduce { root: root % n, len, float, in_place },
            s => s,
        }, split)).collect();
        let got = run(n, |i, nc| {
            let mut results: Vec<Option<Vec<u8>>> = vec![None; steps.len()];
            let mut open: Vec<(usize, Ticket)> = Vec::new();
            for (k, (s, split)) in steps.iter().enumerate() {
                if *split {
                    let t = start_step(i, k, s, nc);
                    open.push((k, t));
                } else {
                    results[k] = run_step(i, k, s, nc).or(Some(Vec::new()));
                }
            }
            // Test the open ones in an order of their own, then wait.
            let mut rot = order as usize;
            while !open.is_empty() {
                rot = rot.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let at = rot % open.len();
                if let Some(r) = nc.test(&open[at].1) {
                    let (k, _) = open.swap_remove(at);
                    results[k] = Some(r.unwrap());
                } else if rot % 7 == 0 {
                    let (k, t) = open.swap_remove(at);
                    results[k] = Some(nc.wait(t).unwrap());
                }
            }
            results
        });
        for (i, mine) in got.iter().enumerate() {
            for (k, (s, split)) in steps.iter().enumerate() {
                let want = if *split { Some(split_expected(n, k, s, i)) } else { Some(expected(n, k, s, i).unwrap_or_default()) };
                prop_assert_eq!(&mine[k], &want, "member {} step {} {:?} split {}", i, k, s, split);
            }
        }
    }
}

/// A start never waits, even when a member has published all its records
/// and another has not read them: member 0 starts three times as many
/// barriers as it has records and only then tells member 1 to begin (a
/// program whose other message comes after its starts), and both finish.
#[test]
fn starts_never_wait_for_other_members() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    let many = 3 * region::RECORDS as usize;
    let got = run(2, |i, nc| {
        if i == 1 {
            rx.lock().unwrap().recv().unwrap();
        }
        let tickets: Vec<Ticket> = (0..many).map(|_| nc.barrier_start()).collect();
        if i == 0 {
            tx.send(()).unwrap();
        }
        tickets.into_iter().map(|t| nc.wait(t).is_ok()).filter(|&ok| ok).count()
    });
    assert_eq!(got, vec![many, many]);
}

/// A member gone before it arrives fails a split-phase collective at
/// every test and wait of the others, instead of leaving it open.
#[test]
fn a_gone_member_fails_a_split_phase_collective() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let job = NEXT_JOB.fetch_add(1, Ordering::Relaxed) ^ 0xdeaf << 40;
    let pid = std::process::id();
    let mut local = NodeLocal::new(job, 1, 0, vec![pid, dead], 1);
    let mut nc = local.open(3, 0, vec![0, 1]).unwrap().unwrap();
    let t = nc.allreduce_start(&i64s(&[1]), red(false)).unwrap();
    let e = loop {
        if let Some(r) = nc.test(&t) {
            break r.unwrap_err();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(e.to_string(), format!("rank 1 died during a collective of its group (its process {dead} is gone)"));
    let t = nc.barrier_start();
    assert!(matches!(nc.wait(t), Err(NodeCollError::Died { rank: 1, .. })));
    region::remove_job_regions(job, 1, 0);
}

/// A split-phase call of several rounds against a short call at the same
/// place fails at both members, at its first round, and gives back the
/// numbers of the rounds it did not run: the group goes on with the next
/// agreed call, whichever member made the long one.
#[test]
fn a_long_split_phase_call_against_a_short_one_fails_and_the_group_goes_on() {
    for long in [0usize, 1] {
        let got = run(2, |i, nc| {
            let first = if i == long {
                let t = nc.allreduce_start(&vec![1u8; 3 * region::SLOT as usize], red(false)).unwrap();
                nc.wait(t).map(|_| ())
            } else {
                nc.barrier()
            };
            let mut b = vec![i as u8; 100_000];
            nc.bcast(&mut b, 1).unwrap();
            (first.map_err(|e| e.to_string()), b)
        });
        for (i, (first, b)) in got.iter().enumerate() {
            let e = first.as_ref().expect_err("a mismatch must fail");
            assert!(e.contains("different collectives"), "long at {long}, member {i}: {e}");
            assert!(b.iter().all(|&x| x == 1), "long at {long}, member {i}");
        }
    }
}
