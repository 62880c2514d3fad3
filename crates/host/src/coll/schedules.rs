//! Schedules for one member of a group: pure functions of (rank, size,
//! tree or algorithm). The same schedule runs offloaded (installed at the
//! engine) and host-based ([`super::hostbased`]), so the two modes combine
//! values identically.
//!
//! # Floating-point combination order
//!
//! A `Combine` step folds the packets of its `recv_from` list one after the
//! other, in list order, into the member's current value; for each packet
//! the value from the lower rank is the left operand
//! (`acc = other op acc` when the sender's rank is lower, `acc op other`
//! otherwise). On a tree a rank's value starts as its own contribution and
//! its children are folded in [`Tree::children`] order; so a binomial tree
//! over 4 ranks rooted at 0 computes `((v0 + v1) + (v2 + v3))`, and a chain
//! rooted at 0 computes `v0 + (v1 + (v2 + v3))`. In recursive doubling both
//! partners compute `lower op higher`, so every rank ends with the same bits.
//! [`super::reference`] evaluates exactly this order.

use outboard_engine::{Fold, Schedule, Step};

use super::tree::Tree;

/// The largest power of two not above `n` (n > 0).
fn pof2_below(n: u32) -> u32 {
    1 << (31 - n.leading_zeros())
}

fn push(steps: &mut Vec<Step>, s: Step) {
    if !s.send_to.is_empty() || !s.recv_from.is_empty() {
        steps.push(s);
    }
}

/// Reduce to the tree's root: fold the children's values (in listed
/// order), then send to the parent. With `Fold::Ignore` this is the gather
/// half of a gather-and-broadcast barrier.
fn gather(tree: &Tree, rank: u32, fold: Fold, steps: &mut Vec<Step>) {
    push(steps, Step::recv(tree.children(rank), fold));
    if let Some(p) = tree.parent(rank) {
        push(steps, Step::send([p]));
    }
}

/// Broadcast from the tree's root: take the parent's value, pass it to the
/// children.
fn scatter(tree: &Tree, rank: u32, fold: Fold, steps: &mut Vec<Step>) {
    if let Some(p) = tree.parent(rank) {
        push(steps, Step::recv([p], fold));
    }
    push(steps, Step::send(tree.send_order(rank)));
}

/// Reduction to `tree.root()`: the root ends with the combined value.
pub fn reduce(tree: &Tree, rank: u32) -> Schedule {
    let mut steps = Vec::new();
    gather(tree, rank, Fold::Combine, &mut steps);
    Schedule::new(steps)
}

/// Reduction to `tree.root()`, which then hands the combined value to
/// `to` (a block of a reduce on block trees, reduced at a rank of its own
/// and gathered at the reduce's root). `to` at the tree's root is
/// [`reduce`] itself.
pub fn reduce_then_send(tree: &Tree, rank: u32, to: u32) -> Schedule {
    let mut steps = Vec::new();
    gather(tree, rank, Fold::Combine, &mut steps);
    let at = tree.root();
    if at != to {
        if rank == at {
            push(&mut steps, Step::send([to]));
        } else if rank == to {
            push(&mut steps, Step::recv([at], Fold::Replace));
        }
    }
    Schedule::new(steps)
}

/// Broadcast of the root's value down `tree`.
pub fn bcast(tree: &Tree, rank: u32) -> Schedule {
    let mut steps = Vec::new();
    scatter(tree, rank, Fold::Replace, &mut steps);
    Schedule::new(steps)
}

/// Allreduce as reduce to the root, then broadcast of the result down the
/// same tree.
pub fn allreduce_tree(tree: &Tree, rank: u32) -> Schedule {
    let mut steps = Vec::new();
    gather(tree, rank, Fold::Combine, &mut steps);
    scatter(tree, rank, Fold::Replace, &mut steps);
    Schedule::new(steps)
}

/// Gather-and-broadcast barrier on `tree`: signals go up to the root, then
/// the release comes down.
pub fn barrier_gb(tree: &Tree, rank: u32) -> Schedule {
    let mut steps = Vec::new();
    gather(tree, rank, Fold::Ignore, &mut steps);
    scatter(tree, rank, Fold::Ignore, &mut steps);
    Schedule::new(steps)
}

/// Recursive doubling / pairwise exchange (MPICH) with `fold` (Ignore for
/// the barrier, Combine for allreduce). For a size that is not a power of
/// two, with `p` the largest power of two below it, rank `p + i` first hands
/// its value to rank `i` and sits out, and gets the result back at the end.
fn pairwise(rank: u32, size: u32, fold: Fold) -> Schedule {
    let p = pof2_below(size);
    let rem = size - p;
    let mut steps = Vec::new();
    let post = if fold == Fold::Combine {
        Fold::Replace
    } else {
        Fold::Ignore
    };
    if rank >= p {
        steps.push(Step::exchange([rank - p], [rank - p], post));
        return Schedule::new(steps);
    }
    if rank < rem {
        steps.push(Step::recv([rank + p], fold));
    }
    let mut mask = 1;
    while mask < p {
        steps.push(Step::exchange([rank ^ mask], [rank ^ mask], fold));
        mask <<= 1;
    }
    if rank < rem {
        steps.push(Step::send([rank + p]));
    }
    Schedule::new(steps)
}

/// Pairwise-exchange barrier (MPICH's recursive doubling, with the extra
/// pre and post steps for a size that is not a power of two).
pub fn barrier_pairwise(rank: u32, size: u32) -> Schedule {
    pairwise(rank, size, Fold::Ignore)
}

/// Recursive-doubling allreduce (the pairwise-exchange pattern folding
/// values).
pub fn allreduce_recursive_doubling(rank: u32, size: u32) -> Schedule {
    pairwise(rank, size, Fold::Combine)
}

/// Inclusive scan on a chain in rank order: rank `r` folds rank `r - 1`'s
/// prefix in as the left operand, then hands the result to `r + 1`, so
/// rank `r` ends with `v0 op v1 op ... op vr` combined left to right (any
/// associative operation, commutative or not). `size - 1` hops: the
/// latency-bound form, whose every message is one element vector long.
pub fn scan_chain(rank: u32, size: u32) -> Schedule {
    let mut steps = Vec::new();
    if rank > 0 {
        steps.push(Step::recv([rank - 1], Fold::Combine));
    }
    if rank + 1 < size {
        steps.push(Step::send([rank + 1]));
    }
    Schedule::new(steps)
}

/// Exclusive scan on a chain: the inclusive chain ([`scan_chain`]), each
/// rank sending its prefix twice, and each rank's value then replaced by
/// the second copy of its predecessor's prefix, `v0 op ... op v(r-1)`.
/// Rank 0's value is its own contribution (MPI leaves it undefined).
pub fn exscan_chain(rank: u32, size: u32) -> Schedule {
    let mut steps = Vec::new();
    if rank > 0 {
        steps.push(Step::recv([rank - 1], Fold::Combine));
    }
    if rank + 1 < size {
        steps.push(Step::send([rank + 1]));
        steps.push(Step::send([rank + 1]));
    }
    if rank > 0 {
        steps.push(Step::recv([rank - 1], Fold::Replace));
    }
    Schedule::new(steps)
}

/// Step `shift` of a pairwise exchange (an alltoall's long-data form):
/// rank `r` sends its value to `r + shift` and takes the one of
/// `r - shift` (modulo `size`) in its place. Shift 0 (and a group of one)
/// is no step at all: the value stays.
pub fn shift_exchange(rank: u32, size: u32, shift: u32) -> Schedule {
    let shift = shift % size.max(1);
    if shift == 0 {
        return Schedule::new(Vec::new());
    }
    let to = ((u64::from(rank) + u64::from(shift)) % u64::from(size)) as u32;
    let from = ((u64::from(rank) + u64::from(size) - u64::from(shift)) % u64::from(size)) as u32;
    Schedule::new(vec![Step::exchange([to], [from], Fold::Replace)])
}

/// One value moved from rank `from` to rank `to` (a gather's or a
/// scatter's long-data form: one per block): `from` sends, `to` takes it
/// in place of its own, every other rank does nothing.
pub fn transfer(rank: u32, from: u32, to: u32) -> Schedule {
    let steps = match (rank == from, rank == to, from == to) {
        (_, _, true) => Vec::new(),
        (true, _, _) => vec![Step::send([to])],
        (_, true, _) => vec![Step::recv([from], Fold::Replace)],
        _ => Vec::new(),
    };
    Schedule::new(steps)
}

/// Dissemination barrier: in round k send to `rank + 2^k`, wait for
/// `rank - 2^k` (mod size); ceil(log2 size) rounds for any size.
pub fn barrier_dissemination(rank: u32, size: u32) -> Schedule {
    let mut steps = Vec::new();
    let mut d = 1u64;
    let n = u64::from(size);
    while d < n {
        let to = ((u64::from(rank) + d) % n) as u32;
        let from = ((u64::from(rank) + n - d) % n) as u32;
        steps.push(Step::exchange([to], [from], Fold::Ignore));
        d *= 2;
    }
    Schedule::new(steps)
}

/// A node-then-network form of a barrier or allreduce for a group whose
/// members share nodes (`nodes[r]` is member `r`'s node): each node's
/// lowest-ranked member (its leader) first folds its node-mates' values in
/// rank order, the leaders then run `inner` among themselves (leader `i`
/// of `inner`'s ranks is the `i`-th node in order of its lowest rank),
/// and each leader hands the result back to its node-mates. Between
/// nodes it sends one message per node where `inner` over all members
/// would send one per member; node-mates talk through their shared
/// engine. `fold` is `Combine` (allreduce) or `Ignore` (barrier).
pub fn node_then_network<E>(nodes: &[u32], rank: u32, fold: Fold, inner: impl FnOnce(u32, u32) -> Result<Schedule, E>) -> Result<Schedule, E> {
    let (leaders, leader) = node_leaders(nodes, rank, None);
    let back = if fold == Fold::Combine { Fold::Replace } else { Fold::Ignore };
    if rank != leader {
        return Ok(Schedule::new(vec![Step::send([leader]), Step::recv([leader], back)]));
    }
    let mates = node_mates(nodes, rank);
    let mut steps = Vec::new();
    push(&mut steps, Step::recv(mates.iter().copied(), fold));
    let me = leaders.iter().position(|&l| l == rank).expect("a leader") as u32;
    steps.extend(on_leaders(inner(me, leaders.len() as u32)?, &leaders));
    push(&mut steps, Step::send(mates));
    Ok(Schedule::new(steps))
}

/// The node-then-network form of a reduction to `root`: each node's
/// leader (the root on the root's node, else the node's lowest rank)
/// folds its node-mates' values in rank order, then the leaders run
/// `inner(leader index, leaders, root's index)` - a reduction among them
/// to the root.
pub fn node_then_network_reduce<E>(
    nodes: &[u32],
    rank: u32,
    root: u32,
    inner: impl FnOnce(u32, u32, u32) -> Result<Schedule, E>,
) -> Result<Schedule, E> {
    let (leaders, leader) = node_leaders(nodes, rank, Some(root));
    if rank != leader {
        return Ok(Schedule::new(vec![Step::send([leader])]));
    }
    let mut steps = Vec::new();
    push(&mut steps, Step::recv(node_mates(nodes, rank), Fold::Combine));
    steps.extend(among_leaders(&leaders, rank, root, inner)?);
    Ok(Schedule::new(steps))
}

/// `inner(leader index, leaders, root's index)` run by leader `rank`, its
/// steps in ranks: the leaders' part of a rooted node form.
fn among_leaders<E>(leaders: &[u32], rank: u32, root: u32, inner: impl FnOnce(u32, u32, u32) -> Result<Schedule, E>) -> Result<Vec<Step>, E> {
    let me = leaders.iter().position(|&l| l == rank).expect("a leader") as u32;
    let root_at = leaders.iter().position(|&l| l == root).expect("the root leads its node") as u32;
    Ok(on_leaders(inner(me, leaders.len() as u32, root_at)?, leaders))
}

/// The network-then-node form of a broadcast from `root`: the leaders
/// (the root on the root's node, else each node's lowest rank) run
/// `inner(leader index, leaders, root's index)` - a broadcast among them
/// from the root - and each leader then hands the value to its
/// node-mates, so one message per node crosses the network.
pub fn network_then_node_bcast<E>(
    nodes: &[u32],
    rank: u32,
    root: u32,
    inner: impl FnOnce(u32, u32, u32) -> Result<Schedule, E>,
) -> Result<Schedule, E> {
    let (leaders, leader) = node_leaders(nodes, rank, Some(root));
    if rank != leader {
        return Ok(Schedule::new(vec![Step::recv([leader], Fold::Replace)]));
    }
    let mut steps = among_leaders(&leaders, rank, root, inner)?;
    push(&mut steps, Step::send(node_mates(nodes, rank)));
    Ok(Schedule::new(steps))
}

/// Every node's leader, in order of the node's lowest rank (the leader is
/// that rank, or `root` on the root's node), and the leader of `rank`'s
/// node.
fn node_leaders(nodes: &[u32], rank: u32, root: Option<u32>) -> (Vec<u32>, u32) {
    let mut leaders: Vec<u32> = Vec::new();
    let mut of_node = std::collections::HashMap::new();
    for (r, &n) in nodes.iter().enumerate() {
        of_node.entry(n).or_insert_with(|| {
            let lead = root.filter(|&x| nodes[x as usize] == n).unwrap_or(r as u32);
            leaders.push(lead);
            lead
        });
    }
    let leader = of_node[&nodes[rank as usize]];
    (leaders, leader)
}

/// The other members on `rank`'s node, in rank order.
fn node_mates(nodes: &[u32], rank: u32) -> Vec<u32> {
    let mine = nodes[rank as usize];
    (0..nodes.len() as u32).filter(|&r| r != rank && nodes[r as usize] == mine).collect()
}

/// `inner`'s steps with its ranks (leader indices) mapped to the leaders'
/// ranks.
fn on_leaders(inner: Schedule, leaders: &[u32]) -> Vec<Step> {
    let map = |v: Vec<u32>| v.into_iter().map(|i| leaders[i as usize]).collect::<Vec<u32>>();
    inner.steps.into_iter().map(|st| Step { send_to: map(st.send_to), recv_from: map(st.recv_from), fold: st.fold }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_then_network_schedules_validate_and_send_one_message_per_node_between_nodes() {
        for layout in [vec![0, 0, 1, 1], vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3], vec![5, 1, 5, 1, 7], vec![0, 0, 0]] {
            let n = layout.len() as u32;
            let ok = |s| Ok::<_, ()>(s);
            let barrier: Vec<Schedule> =
                (0..n).map(|r| node_then_network(&layout, r, Fold::Ignore, |i, k| ok(barrier_dissemination(i, k))).unwrap()).collect();
            let allreduce: Vec<Schedule> =
                (0..n).map(|r| node_then_network(&layout, r, Fold::Combine, |i, k| ok(allreduce_recursive_doubling(i, k))).unwrap()).collect();
            for (r, s) in barrier.iter().chain(&allreduce).enumerate() {
                s.validate(r as u32 % n, n).unwrap_or_else(|e| panic!("{layout:?} r={}: {e} in {s:?}", r as u32 % n));
            }
            // Messages between nodes: one per pair of leaders per round.
            let nodes: std::collections::BTreeSet<u32> = layout.iter().copied().collect();
            let between: usize = barrier
                .iter()
                .enumerate()
                .flat_map(|(r, s)| s.steps.iter().flat_map(move |st| st.send_to.iter().map(move |&to| (r, to))))
                .filter(|&(r, to)| layout[r] != layout[to as usize])
                .count();
            let k = nodes.len() as u32;
            let flat_leaders: usize = (0..k).map(|i| barrier_dissemination(i, k).steps.iter().map(|st| st.send_to.len()).sum::<usize>()).sum();
            assert_eq!(between, flat_leaders, "{layout:?}");
            for root in 0..n {
                let reduce: Vec<Schedule> = (0..n)
                    .map(|r| node_then_network_reduce(&layout, r, root, |i, k, at| ok(super::reduce(&Tree::binomial(k, at).unwrap(), i))).unwrap())
                    .collect();
                for (r, s) in reduce.iter().enumerate() {
                    s.validate(r as u32, n).unwrap_or_else(|e| panic!("{layout:?} root {root} r={r}: {e} in {s:?}"));
                }
                assert!(reduce[root as usize].steps.iter().all(|st| st.send_to.is_empty()), "the root sends nothing: {layout:?} {root}");
                let bcast: Vec<Schedule> = (0..n)
                    .map(|r| network_then_node_bcast(&layout, r, root, |i, k, at| ok(super::bcast(&Tree::binomial(k, at).unwrap(), i))).unwrap())
                    .collect();
                for (r, s) in bcast.iter().enumerate() {
                    s.validate(r as u32, n).unwrap_or_else(|e| panic!("{layout:?} root {root} r={r}: {e} in {s:?}"));
                    // Everyone but the root hears once, from its leader or
                    // (a leader) from its parent leader.
                    let hears: usize = s.steps.iter().map(|st| st.recv_from.len()).sum();
                    assert_eq!(hears, usize::from(r as u32 != root), "{layout:?} root {root} r={r}: {s:?}");
                }
                // One message per node other than the root's crosses the
                // network.
                let between = bcast
                    .iter()
                    .enumerate()
                    .flat_map(|(r, s)| s.steps.iter().flat_map(move |st| st.send_to.iter().map(move |&to| (r, to))))
                    .filter(|&(r, to)| layout[r] != layout[to as usize])
                    .count();
                assert_eq!(between, nodes.len() - 1, "{layout:?} root {root}");
            }
        }
    }

    /// A block of a reduce on block trees, flat and in its node form
    /// (the block's tree among the node leaders): valid, and the root ends
    /// with every member's contribution once, whichever member roots the
    /// block's tree.
    #[test]
    fn a_reduce_block_reaches_the_root_whole_from_any_tree_root() {
        use outboard_engine::{Datatype, ReduceOp, Reduction};
        let sum = Reduction { op: ReduceOp::Sum, dtype: Datatype::U64 };
        for layout in [vec![0, 1, 2, 3, 4], vec![0, 0, 1, 1], vec![0, 0, 0, 1, 1, 1, 2, 2, 2], vec![5, 1, 5, 1, 7], vec![0, 0, 0]] {
            let n = layout.len() as u32;
            let k = layout.iter().collect::<std::collections::BTreeSet<_>>().len() as u32;
            let inputs: Vec<Vec<u8>> = (0..n).map(|r| (1u64 << r).to_ne_bytes().to_vec()).collect();
            let all = ((1u64 << n) - 1).to_ne_bytes().to_vec();
            for root in 0..n {
                for b in 0..k {
                    let ok = |s| Ok::<_, ()>(s);
                    let node: Vec<Schedule> = (0..n)
                        .map(|r| node_then_network_reduce(&layout, r, root, |i, m, at| ok(reduce_then_send(&Tree::binomial(m, (at + b) % m).unwrap(), i, at))).unwrap())
                        .collect();
                    let flat: Vec<Schedule> = (0..n).map(|r| reduce_then_send(&Tree::kary(n, 2, (root + b) % n).unwrap(), r, root)).collect();
                    for schedules in [&node, &flat] {
                        for (r, s) in schedules.iter().enumerate() {
                            s.validate(r as u32, n).unwrap_or_else(|e| panic!("{layout:?} root {root} block {b} r={r}: {e} in {s:?}"));
                        }
                        let got = crate::coll::reference::evaluate(schedules, &inputs, Some(sum)).unwrap();
                        assert_eq!(got[root as usize].as_ref(), Some(&all), "{layout:?} root {root} block {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn schedules_validate_for_every_size_and_root() {
        for n in 1..=40u32 {
            for r in 0..n {
                let trees = [
                    Tree::binomial(n, n / 3).unwrap(),
                    Tree::kary(n, 3, n - 1).unwrap(),
                    Tree::chain(n, 0).unwrap(),
                ];
                let mut all = vec![
                    barrier_pairwise(r, n),
                    barrier_dissemination(r, n),
                    allreduce_recursive_doubling(r, n),
                ];
                for t in &trees {
                    all.extend([
                        reduce(t, r),
                        bcast(t, r),
                        allreduce_tree(t, r),
                        barrier_gb(t, r),
                    ]);
                }
                for s in all {
                    s.validate(r, n)
                        .unwrap_or_else(|e| panic!("n={n} r={r}: {e} in {s:?}"));
                }
            }
        }
    }

    #[test]
    fn pairwise_non_power_of_two_has_pre_and_post_steps() {
        // size 6: p = 4, ranks 4 and 5 pair with 0 and 1.
        assert_eq!(
            barrier_pairwise(4, 6).steps,
            vec![Step::exchange([0], [0], Fold::Ignore)]
        );
        let s = barrier_pairwise(1, 6).steps;
        assert_eq!(s.first(), Some(&Step::recv([5], Fold::Ignore)));
        assert_eq!(s.last(), Some(&Step::send([5])));
        assert_eq!(s.len(), 4);
        assert_eq!(barrier_pairwise(3, 6).steps.len(), 2);
    }
}
