//! Latency-optimal broadcast trees in the postal model (dissertation 2.3,
//! after Bar-Noy and Kipnis).
//!
//! In the postal model a sender spends one unit of time per packet it
//! sends, and a packet is fully received `lambda` units after its sender
//! started sending it; a node forwards as soon as it has received. The
//! number of nodes a broadcast can reach by time `t` is
//! `F(t) = 1` for `0 <= t < lambda`, `F(t) = F(t-1) + F(t-lambda)` after.
//! With `lambda = 1` the optimal tree is the binomial tree; the larger
//! `lambda` (slow wire relative to the send overhead), the flatter it gets.
//!
//! The tree is built with the dissertation's greedy top-down algorithm and
//! its two queues: `new` holds nodes by the time they will have received
//! the packet, `old` holds senders by the time they are free for their next
//! send. Each next node is given to whichever queued node is free first.

use std::cmp::Ordering;
use std::collections::VecDeque;

/// A broadcast tree over ranks `0..n` relative to the root (rank 0 is the
/// root). `children[q]` is in sending order: the first child gets the first
/// packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostalTree {
    /// The parent of each rank (`None` for the root).
    pub parent: Vec<Option<u32>>,
    /// The children of each rank, in the order they are sent to.
    pub children: Vec<Vec<u32>>,
}

/// The number of nodes a broadcast reaches by time `t` (the recurrence
/// `F_lambda(t)`), saturating at `u64::MAX`. `lambda >= 1`.
pub fn reachable(lambda: u32, t: u32) -> u64 {
    assert!(lambda >= 1, "lambda is at least one send time");
    let mut f = vec![1u64; t as usize + 1];
    for i in lambda as usize..=t as usize {
        f[i] = f[i - 1].saturating_add(f[i - lambda as usize]);
    }
    f[t as usize]
}

/// The least time by which `n` nodes can all hold the packet: the least
/// `t` with `F_lambda(t) >= n`.
pub fn optimal_time(lambda: u32, n: u32) -> u32 {
    let mut t = 0;
    while reachable(lambda, t) < u64::from(n) {
        t += 1;
    }
    t
}

#[derive(Clone, Copy)]
struct Entry {
    time: f64,
    node: u32,
}

/// Builds the greedy tree for `n` nodes and latency ratio `lambda` (the
/// one-way time from the start of a send until the receiver can forward,
/// divided by the sender's time per packet; values below 1 are taken as 1).
/// Ties go to the `new` queue first, then to the earlier entry, so the tree
/// is deterministic.
pub fn build(n: u32, lambda: f64) -> PostalTree {
    let lambda = if lambda.is_finite() {
        lambda.max(1.0)
    } else {
        1.0
    };
    let mut parent = vec![None; n as usize];
    let mut children = vec![Vec::new(); n as usize];
    let mut new_q: VecDeque<Entry> = VecDeque::new();
    let mut old_q: VecDeque<Entry> = VecDeque::new();
    if n > 0 {
        new_q.push_back(Entry { time: 0.0, node: 0 });
    }
    // Both queues stay sorted by time: entries are appended with times
    // that never decrease within each queue.
    for p in 1..n {
        let take_new = match (new_q.front(), old_q.front()) {
            (Some(a), Some(b)) => a.time.partial_cmp(&b.time) != Some(Ordering::Greater),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let q = if take_new {
            new_q.pop_front()
        } else {
            old_q.pop_front()
        }
        .expect("a queue holds the root's turn");
        children[q.node as usize].push(p);
        parent[p as usize] = Some(q.node);
        insert_sorted(
            &mut new_q,
            Entry {
                time: q.time + lambda,
                node: p,
            },
        );
        insert_sorted(
            &mut old_q,
            Entry {
                time: q.time + 1.0,
                node: q.node,
            },
        );
    }
    PostalTree { parent, children }
}

fn insert_sorted(q: &mut VecDeque<Entry>, e: Entry) {
    let at = q.iter().position(|x| x.time > e.time).unwrap_or(q.len());
    q.insert(at, e);
}

impl PostalTree {
    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether the tree is empty.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// When each node has received the packet in the postal model: the
    /// `i`-th child (from 0) of a node informed at `t` has it at
    /// `t + i + lambda`.
    pub fn arrival_times(&self, lambda: f64) -> Vec<f64> {
        let mut at = vec![0.0; self.len()];
        let mut stack = vec![0u32];
        while let Some(q) = stack.pop() {
            for (i, &c) in self.children[q as usize].iter().enumerate() {
                at[c as usize] = at[q as usize] + i as f64 + lambda;
                stack.push(c);
            }
        }
        at
    }

    /// When the last node has the packet.
    pub fn completion_time(&self, lambda: f64) -> f64 {
        self.arrival_times(lambda).into_iter().fold(0.0, f64::max)
    }

    /// The same tree with ranks relabelled so that `root` is the root in a
    /// group of `len()` members (relative rank `r` becomes `(r + root) % n`).
    pub fn rooted_at(&self, root: u32) -> PostalTree {
        let n = self.len() as u32;
        let abs = |r: u32| (r + root) % n;
        let mut parent = vec![None; n as usize];
        let mut children = vec![Vec::new(); n as usize];
        for r in 0..n {
            parent[abs(r) as usize] = self.parent[r as usize].map(abs);
            children[abs(r) as usize] = self.children[r as usize].iter().map(|&c| abs(c)).collect();
        }
        PostalTree { parent, children }
    }
}

/// Lambda for a message: the one-way time until the receiver can forward
/// it (`latency`), over the sender's time per copy (`per_send`), both in
/// the same unit; at least 1.
pub fn lambda_for(latency: f64, per_send: f64) -> f64 {
    if per_send <= 0.0 {
        return 1.0;
    }
    (latency / per_send).max(1.0)
}

/// What a link costs one message of `len` bytes, split the way the postal
/// model needs it: the time its *sender* is busy with one copy (the
/// model's unit of time), and the time after that until the *receiver* can
/// pass it on. All in microseconds (any one unit works: only ratios are
/// used).
///
/// With these, lambda for a message of `len` bytes is, as 2.3 defines it,
/// the time from when the sender starts sending until the receiver can
/// send it on, over the time the sender spends sending it:
///
/// ```text
/// send(len)  = send_overhead_us + send_per_byte_us * len
/// after(len) = latency_us + latency_per_byte_us * len
/// lambda     = (send(len) + after(len)) / send(len)      (>= 1)
/// ```
///
/// Which costs go where depends on who sends: for NIC-assisted broadcast
/// (2.3's NIC view) `send` is the NIC's time to transmit one packet and
/// `after` the wire, the receiving host taking the packet and handing it
/// back to its NIC; for host-based broadcast `send` is the host's send
/// overhead and `after` everything up to the receiving host's library
/// having it. Small messages have a large lambda when fixed latency
/// dominates the per-copy cost (flat trees win); large ones approach
/// `1 + latency_per_byte_us / send_per_byte_us`.
#[derive(Debug, Clone, Copy)]
pub struct LinkCosts {
    /// Sender busy time per copy, fixed part.
    pub send_overhead_us: f64,
    /// Sender busy time per byte of a copy.
    pub send_per_byte_us: f64,
    /// Time after the sender is done until the receiver can forward, fixed
    /// part.
    pub latency_us: f64,
    /// Per-byte part of that time.
    pub latency_per_byte_us: f64,
}

impl LinkCosts {
    /// Lambda for a message (or pipelined piece) of `len` bytes; 1 when
    /// the costs are not positive and finite.
    pub fn lambda(&self, len: u32) -> f64 {
        let len = f64::from(len);
        let send = self.send_overhead_us + self.send_per_byte_us * len;
        let after = self.latency_us + self.latency_per_byte_us * len;
        let l = (send + after) / send;
        if l.is_finite() && send > 0.0 {
            l.max(1.0)
        } else {
            1.0
        }
    }
}

/// Where a postal tree's lambda comes from.
#[derive(Debug, Clone, Copy)]
pub enum Lambda {
    /// This value (below 1 is taken as 1).
    Given(f64),
    /// Derived per message size from these costs, so each size gets its
    /// own tree.
    Link(LinkCosts),
}

impl Lambda {
    /// The value for a message (or pipelined piece) of `len` bytes.
    pub fn value(&self, len: u32) -> f64 {
        match self {
            Lambda::Given(l) if l.is_finite() => l.max(1.0),
            Lambda::Given(_) => 1.0,
            Lambda::Link(c) => c.lambda(len),
        }
    }

    /// The bit patterns of the numbers inside, for equality and hashing.
    fn bits(&self) -> (u8, [u64; 4]) {
        match self {
            Lambda::Given(l) => (0, [l.to_bits(), 0, 0, 0]),
            Lambda::Link(c) => (
                1,
                [
                    c.send_overhead_us,
                    c.send_per_byte_us,
                    c.latency_us,
                    c.latency_per_byte_us,
                ]
                .map(f64::to_bits),
            ),
        }
    }
}

// Equal when the numbers are bit for bit the same, so lambdas can name
// cached schedules (`TreeShape` is a hash key).
impl PartialEq for Lambda {
    fn eq(&self, other: &Self) -> bool {
        self.bits() == other.bits()
    }
}

impl Eq for Lambda {}

impl std::hash::Hash for Lambda {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bits().hash(state);
    }
}

/// A link-derived lambda rounded to this fraction, and capped at `n - 1`
/// (where the tree is flat anyway), so that the messages of a group map to
/// few distinct trees (each is a schedule the engine keeps).
pub const LAMBDA_STEP: f64 = 1.0 / 16.0;

/// `lambda` as the API builds trees for it in a group of `n`: at least 1,
/// at most `n - 1`, rounded to [`LAMBDA_STEP`].
pub fn canonical_lambda(lambda: f64, n: u32) -> f64 {
    let cap = f64::from(n.saturating_sub(1).max(1));
    let l = if lambda.is_finite() {
        lambda.clamp(1.0, cap)
    } else {
        1.0
    };
    (l / LAMBDA_STEP).round() * LAMBDA_STEP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recurrence_values() {
        // lambda = 1: doubling (binomial); lambda = 2: Fibonacci.
        assert_eq!(
            (0..6).map(|t| reachable(1, t)).collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32]
        );
        assert_eq!(
            (0..8).map(|t| reachable(2, t)).collect::<Vec<_>>(),
            [1, 1, 2, 3, 5, 8, 13, 21]
        );
        assert_eq!(
            (0..6).map(|t| reachable(3, t)).collect::<Vec<_>>(),
            [1, 1, 1, 2, 3, 4]
        );
    }

    #[test]
    fn the_greedy_tree_meets_the_recurrence_up_to_1024_nodes() {
        for lambda in 1..=8u32 {
            for n in 1..=1024u32 {
                let tree = build(n, f64::from(lambda));
                let done = tree.completion_time(f64::from(lambda));
                assert_eq!(
                    done,
                    f64::from(optimal_time(lambda, n)),
                    "lambda {lambda}, n {n}"
                );
                // A tree over all nodes: every non-root has a parent.
                assert!(tree.parent[1..].iter().all(Option::is_some));
            }
        }
    }

    /// Every ordered tree shape on `n` nodes, as children lists.
    fn all_shapes(n: usize) -> Vec<Vec<Vec<u32>>> {
        // Sequences of subtree sizes: a root with children subtrees in order.
        fn forests(n: usize, base: u32) -> Vec<Vec<Vec<u32>>> {
            // Returns children-lists for nodes base..base+n forming a forest
            // of ordered trees whose roots are returned at index `n`.
            if n == 0 {
                return vec![vec![Vec::new()]]; // only the roots list, empty
            }
            let mut out = Vec::new();
            for first in 1..=n {
                for t in trees(first, base) {
                    for mut rest in forests(n - first, base + first as u32) {
                        let roots = rest.pop().expect("roots last");
                        let mut all = t.clone();
                        all.extend(rest);
                        let mut r = vec![base];
                        r.extend(roots);
                        all.push(r);
                        out.push(all);
                    }
                }
            }
            out
        }
        fn trees(n: usize, base: u32) -> Vec<Vec<Vec<u32>>> {
            let mut out = Vec::new();
            for mut f in forests(n - 1, base + 1) {
                let roots = f.pop().expect("roots last");
                let mut all = vec![roots];
                all.extend(f);
                out.push(all);
            }
            out
        }
        trees(n, 0)
    }

    #[test]
    fn no_tree_does_better_on_small_cases() {
        for n in 1..=8usize {
            let shapes = all_shapes(n);
            let catalan = [1, 1, 2, 5, 14, 42, 132, 429];
            assert_eq!(
                shapes.len(),
                catalan[n - 1],
                "every ordered tree on {n} nodes"
            );
            for lambda in 1..=4u32 {
                let best = shapes
                    .iter()
                    .map(|children| {
                        let parent = vec![None; n];
                        PostalTree {
                            parent,
                            children: children.clone(),
                        }
                        .completion_time(f64::from(lambda))
                    })
                    .fold(f64::INFINITY, f64::min);
                assert_eq!(
                    best,
                    build(n as u32, f64::from(lambda)).completion_time(f64::from(lambda)),
                    "n {n} lambda {lambda}"
                );
            }
        }
    }

    #[test]
    fn lambda_follows_the_definition_and_the_message_size() {
        let c = LinkCosts {
            send_overhead_us: 2.0,
            send_per_byte_us: 0.01,
            latency_us: 8.0,
            latency_per_byte_us: 0.01,
        };
        // (2 + 8) / 2 at 0 bytes; (12 + 18) / 12 at 1,000.
        assert_eq!(c.lambda(0), 5.0);
        assert_eq!(c.lambda(1000), 2.5);
        assert!(
            c.lambda(1 << 30) < 2.0 + 1e-6,
            "large messages tend to 1 + 0.01/0.01"
        );
        assert!(
            (1..20).all(|k| c.lambda(k * 100) < c.lambda((k - 1) * 100)),
            "lambda falls with size here"
        );
        assert_eq!(
            LinkCosts {
                send_overhead_us: 0.0,
                ..c
            }
            .lambda(0),
            1.0,
            "no send cost: no ratio"
        );
        assert_eq!(Lambda::Given(0.5).value(9), 1.0);
        assert_eq!(Lambda::Link(c).value(0), 5.0);
        assert_eq!(canonical_lambda(2.51, 10), 2.5);
        assert_eq!(canonical_lambda(40.0, 10), 9.0);
        assert_eq!(canonical_lambda(f64::NAN, 10), 1.0);
        assert_eq!(canonical_lambda(3.0, 1), 1.0);
    }

    #[test]
    fn rooting_relabels() {
        let t = build(5, 2.0).rooted_at(3);
        assert_eq!(t.parent[3], None);
        assert!(t.children[3]
            .iter()
            .all(|&c| t.parent[c as usize] == Some(3)));
    }
}
