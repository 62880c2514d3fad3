//! Spanning trees over the ranks of a group, computed on the host (as the
//! papers do) and turned into schedules by [`super::schedules`].
//!
//! A [`Tree`] answers parent and children per rank, so any shape plugs in:
//! the builders here (binomial, k-ary, chain) and trees optimal under a
//! cost model (postal, or any parent list). The regular shapes work on
//! ranks *relative to the root* (`v = (rank - root) mod n`) and map back,
//! so any rank can be the root; they are computed per rank when asked,
//! never stored: a member of a 65,536-rank group builds its schedule from
//! its own few neighbours, not from a list of every rank (in a simulation
//! of the whole job, lists would cost N per member, N^2 in all).
//!
//! The order of a rank's children is the order a reduction folds them in
//! (see [`super::schedules`] for the resulting floating-point order).

use super::CollectiveError;

/// A spanning tree over ranks `0..size`: a parent for every rank but the
/// root, and each rank's children in the order they are folded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tree {
    root: u32,
    size: u32,
    shape: Shape,
}

/// How a tree's edges are known.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Shape {
    /// MPICH's binomial tree, computed per rank.
    Binomial,
    /// The complete k-ary tree in breadth-first order, computed per rank.
    Kary(u32),
    /// Lists for every rank (postal trees, parent lists).
    Listed {
        parent: Vec<Option<u32>>,
        children: Vec<Vec<u32>>,
    },
}

/// Relative rank `v`'s lowest set bit (2^32 for the root, which has them all).
fn low_bit(v: u32) -> u64 {
    if v == 0 {
        1u64 << 32
    } else {
        1u64 << v.trailing_zeros()
    }
}

/// `rank`'s position relative to `root` in a group of `n` (`root < n`).
fn relative(n: u32, root: u32, rank: u32) -> u64 {
    (u64::from(rank) + u64::from(n) - u64::from(root)) % u64::from(n)
}

/// `rank`'s parent in MPICH's binomial tree of `n` rooted at `root`
/// (`None` at the root): relative rank `v` with its lowest set bit cleared.
/// What [`Tree::binomial`]'s trees answer, without a `Tree`.
pub(crate) fn binomial_parent(n: u32, root: u32, rank: u32) -> Option<u32> {
    let v = relative(n, root, rank);
    (v != 0).then(|| ((v & (v - 1)) + u64::from(root)) as u32 % n)
}

/// `rank`'s children in MPICH's binomial tree of `n` rooted at `root`:
/// nearest first (the order reductions fold in, [`Tree::children`]);
/// reversed, farthest first. Computed without allocating, so application
/// bypass walks it in a signal handler.
pub(crate) fn binomial_children(n: u32, root: u32, rank: u32) -> BinomialChildren {
    let v = relative(n, root, rank);
    let mut hi = 0;
    let mut m = 1u64;
    while m < low_bit(v as u32) && v + m < u64::from(n) {
        hi = m;
        m <<= 1;
    }
    BinomialChildren { n: u64::from(n), root: u64::from(root), v, lo: 1, hi }
}

/// The iterator of [`binomial_children`]: offsets `lo..=hi`, powers of two.
#[derive(Debug, Clone)]
pub(crate) struct BinomialChildren {
    n: u64,
    root: u64,
    v: u64,
    lo: u64,
    hi: u64,
}

impl BinomialChildren {
    fn rank(&self, m: u64) -> u32 {
        ((self.v + m + self.root) % self.n) as u32
    }
}

impl Iterator for BinomialChildren {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.hi == 0 || self.lo > self.hi {
            return None;
        }
        let r = self.rank(self.lo);
        self.lo <<= 1;
        Some(r)
    }
}

impl DoubleEndedIterator for BinomialChildren {
    fn next_back(&mut self) -> Option<u32> {
        if self.hi == 0 || self.lo > self.hi {
            return None;
        }
        let r = self.rank(self.hi);
        self.hi >>= 1;
        Some(r)
    }
}

impl Tree {
    /// A tree from a parent list: `parent[root]` must be `None`, every other
    /// rank must reach the root. Children are listed in ascending rank order
    /// relative to the root.
    pub fn from_parents(root: u32, parent: Vec<Option<u32>>) -> Result<Tree, CollectiveError> {
        let n = parent.len() as u32;
        if n == 0 {
            return Err(CollectiveError::EmptyGroup);
        }
        if root >= n {
            return Err(CollectiveError::RootOutOfRange { root, size: n });
        }
        if parent[root as usize].is_some() {
            return Err(CollectiveError::BadTree("the root has a parent"));
        }
        let mut children = vec![Vec::new(); n as usize];
        for v in 0..n {
            let r = (v + root) % n;
            if let Some(p) = parent[r as usize] {
                if p >= n || p == r {
                    return Err(CollectiveError::BadTree("parent out of range or itself"));
                }
                children[p as usize].push(r);
            } else if r != root {
                return Err(CollectiveError::BadTree("a second root"));
            }
        }
        // Every rank must reach the root (no cycles): walk up at most n steps.
        for r in 0..n {
            let (mut x, mut hops) = (r, 0);
            while let Some(p) = parent[x as usize] {
                x = p;
                hops += 1;
                if hops > n {
                    return Err(CollectiveError::BadTree("a cycle"));
                }
            }
        }
        Ok(Tree {
            root,
            size: n,
            shape: Shape::Listed { parent, children },
        })
    }

    /// Rank `rank` relative to the root.
    fn rel(&self, rank: u32) -> u32 {
        ((u64::from(rank) + u64::from(self.size) - u64::from(self.root)) % u64::from(self.size)) as u32
    }

    /// Relative rank `v` as a rank.
    fn abs(&self, v: u32) -> u32 {
        ((u64::from(v) + u64::from(self.root)) % u64::from(self.size)) as u32
    }

    fn check(n: u32, root: u32) -> Result<(), CollectiveError> {
        if n == 0 {
            return Err(CollectiveError::EmptyGroup);
        }
        if root >= n {
            return Err(CollectiveError::RootOutOfRange { root, size: n });
        }
        Ok(())
    }

    /// The binomial tree of MPICH: relative rank `v`'s parent is `v` with
    /// its lowest set bit cleared; its children are `v + 1, v + 2, v + 4,
    /// ...` below that bit (nearest first, the order MPICH's reduce folds).
    pub fn binomial(n: u32, root: u32) -> Result<Tree, CollectiveError> {
        Self::check(n, root)?;
        Ok(Tree { root, size: n, shape: Shape::Binomial })
    }

    /// The complete k-ary tree in breadth-first order: relative rank `v`'s
    /// children are `k*v + 1 ..= k*v + k`.
    pub fn kary(n: u32, k: u32, root: u32) -> Result<Tree, CollectiveError> {
        Self::check(n, root)?;
        if k == 0 {
            return Err(CollectiveError::BadTree("degree 0"));
        }
        Ok(Tree { root, size: n, shape: Shape::Kary(k) })
    }

    /// A chain: relative rank `v`'s parent is `v - 1` (a k-ary tree of
    /// degree 1; best for pipelining large messages).
    pub fn chain(n: u32, root: u32) -> Result<Tree, CollectiveError> {
        Self::kary(n, 1, root)
    }

    /// The postal-model optimal tree for `lambda` (dissertation 2.3; built
    /// by [`crate::postal::build`], the greedy algorithm with the new and
    /// old queues), rooted at `root`. Each rank's children are in the order
    /// the greedy algorithm gives them the message, which is the order the
    /// broadcast sends in: the first child must be sent to first for the
    /// tree to finish when the recurrence says.
    pub fn postal(n: u32, root: u32, lambda: f64) -> Result<Tree, CollectiveError> {
        Self::check(n, root)?;
        let t = crate::postal::build(n, lambda).rooted_at(root);
        Ok(Tree {
            root,
            size: n,
            shape: Shape::Listed { parent: t.parent, children: t.children },
        })
    }

    /// The order a rank sends to its children going down the tree: largest
    /// subtree first (ties in listed order), as MPICH's binomial broadcast
    /// does, since the deepest subtree has the most left to do. The listed
    /// order ([`Tree::children`]) stays the order reductions fold in.
    pub fn send_order(&self, rank: u32) -> Vec<u32> {
        let mut kids: Vec<(u32, u32)> = self.children(rank).iter().map(|&c| (self.subtree_size(c), c)).collect();
        kids.sort_by_key(|k| std::cmp::Reverse(k.0));
        kids.into_iter().map(|(_, c)| c).collect()
    }

    /// Ranks in the subtree under `rank`, itself included.
    pub fn subtree_size(&self, rank: u32) -> u32 {
        if self.shape == Shape::Binomial {
            // Relative rank v's subtree is v .. v + lowbit(v), cut at n.
            let v = self.rel(rank);
            return (low_bit(v).min(u64::from(self.size - v))) as u32;
        }
        let mut n = 0;
        let mut stack = vec![rank];
        while let Some(q) = stack.pop() {
            n += 1;
            stack.extend(self.children(q));
        }
        n
    }

    /// When each rank has the message in the postal model with `lambda`,
    /// sending to children in [`Tree::send_order`]: the `i`-th child (from
    /// 0) of a rank that has it at `t` has it at `t + i + lambda`.
    pub fn postal_arrivals(&self, lambda: f64) -> Vec<f64> {
        let mut at = vec![0.0; self.size() as usize];
        let mut stack = vec![self.root];
        while let Some(q) = stack.pop() {
            for (i, c) in self.send_order(q).into_iter().enumerate() {
                at[c as usize] = at[q as usize] + i as f64 + lambda;
                stack.push(c);
            }
        }
        at
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The root.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// `rank`'s parent (`None` for the root).
    pub fn parent(&self, rank: u32) -> Option<u32> {
        let v = self.rel(rank);
        match &self.shape {
            Shape::Listed { parent, .. } => parent[rank as usize],
            _ if v == 0 => None,
            Shape::Binomial => binomial_parent(self.size, self.root, rank),
            Shape::Kary(k) => Some(self.abs((v - 1) / k)),
        }
    }

    /// `rank`'s children, in folding order.
    pub fn children(&self, rank: u32) -> Vec<u32> {
        let v = self.rel(rank);
        let n = u64::from(self.size);
        match &self.shape {
            Shape::Listed { children, .. } => children[rank as usize].clone(),
            Shape::Binomial => binomial_children(self.size, self.root, rank).collect(),
            Shape::Kary(k) => {
                let first = u64::from(*k) * u64::from(v) + 1;
                (first..(first + u64::from(*k)).min(n)).map(|c| self.abs(c as u32)).collect()
            }
        }
    }

    /// The longest root-to-leaf path, in edges.
    pub fn depth(&self) -> u32 {
        (0..self.size())
            .map(|mut r| {
                let mut d = 0;
                while let Some(p) = self.parent(r) {
                    r = p;
                    d += 1;
                }
                d
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation-free binomial tree (what application bypass walks):
    /// every rank but the root has one parent that lists it; reversed, the
    /// children go farthest first, one at each power of two below the
    /// rank's lowest set bit (relative to the root).
    #[test]
    fn the_binomial_walk_is_a_tree_and_runs_both_ways() {
        for n in 1..40u32 {
            for root in [0, n / 2, n - 1] {
                let mut seen = vec![0; n as usize];
                for r in 0..n {
                    let kids: Vec<u32> = binomial_children(n, root, r).collect();
                    let mut back: Vec<u32> = binomial_children(n, root, r).rev().collect();
                    back.reverse();
                    assert_eq!(kids, back, "n={n} root={root} r={r}");
                    for &c in &kids {
                        assert_eq!(binomial_parent(n, root, c), Some(r), "n={n} root={root} r={r} c={c}");
                        seen[c as usize] += 1;
                    }
                    let v = (r + n - root) % n;
                    let want: Vec<u32> = (0..32).map(|b| 1u32 << b).take_while(|&m| (v == 0 || m < (v & v.wrapping_neg())) && v + m < n).map(|m| (v + m + root) % n).collect();
                    assert_eq!(kids, want, "n={n} root={root} r={r}");
                }
                assert_eq!(binomial_parent(n, root, root), None);
                for r in 0..n {
                    assert_eq!(seen[r as usize], u32::from(r != root), "n={n} root={root} r={r}");
                }
            }
        }
    }

    #[test]
    fn broadcasts_serve_the_largest_subtree_first() {
        let t = Tree::binomial(8, 0).unwrap();
        assert_eq!(t.children(0), &[1, 2, 4], "listed nearest first: the reduction fold order");
        assert_eq!(t.send_order(0), vec![4, 2, 1]);
        // So a binomial broadcast meets the postal optimum at lambda 1
        // (nearest first it would take 4 steps where 3 do).
        for n in 1..=64 {
            let at = Tree::binomial(n, 0).unwrap().postal_arrivals(1.0);
            let last = at.iter().copied().fold(0.0, f64::max);
            assert_eq!(last, f64::from(crate::postal::optimal_time(1, n)), "n = {n}");
        }
    }

    #[test]
    fn builders_give_spanning_trees_for_every_root() {
        for n in 1..=33 {
            for root in [0, n / 2, n - 1] {
                for t in [
                    Tree::binomial(n, root),
                    Tree::kary(n, 3, root),
                    Tree::chain(n, root),
                    Tree::kary(n, 7, root),
                ] {
                    let t = t.unwrap();
                    let again = Tree::from_parents(root, (0..n).map(|r| t.parent(r)).collect()).unwrap();
                    // Subtree sizes (closed form for the binomial tree) agree
                    // with counting the listed tree's subtrees.
                    for r in 0..n {
                        assert_eq!(t.subtree_size(r), again.subtree_size(r), "n {n} root {root} rank {r}");
                        assert_eq!(t.send_order(r), again.send_order(r));
                    }
                    let mut a: Vec<_> = (0..n)
                        .map(|r| {
                            let mut c = t.children(r).to_vec();
                            c.sort();
                            c
                        })
                        .collect();
                    let b: Vec<_> = (0..n)
                        .map(|r| {
                            let mut c = again.children(r).to_vec();
                            c.sort();
                            c
                        })
                        .collect();
                    assert_eq!(a, b);
                    a.clear();
                    assert_eq!(t.root(), root);
                }
            }
        }
    }

    #[test]
    fn binomial_matches_mpich() {
        let t = Tree::binomial(8, 0).unwrap();
        assert_eq!(t.children(0), &[1, 2, 4]);
        assert_eq!(t.children(4), &[5, 6]);
        assert_eq!(t.parent(6), Some(4));
        assert_eq!(t.depth(), 3);
        let t = Tree::binomial(5, 2).unwrap();
        assert_eq!(t.children(2), &[3, 4, 1]);
        assert_eq!(Tree::chain(4, 1).unwrap().depth(), 3);
    }

    /// The postal tree through the API finishes, for every root, exactly
    /// when the recurrence says (so the children order survived rooting),
    /// and no later than binomial, k-ary or chain trees.
    #[test]
    fn postal_trees_meet_the_optimum_for_every_root() {
        for lambda in 1..=8u32 {
            let l = f64::from(lambda);
            for n in (1..=64).chain([100, 257, 1024]) {
                let best = f64::from(crate::postal::optimal_time(lambda, n));
                for root in [0, n / 2, n - 1] {
                    let t = Tree::postal(n, root, l).unwrap();
                    assert_eq!(t.root(), root);
                    let done = t.postal_arrivals(l).into_iter().fold(0.0, f64::max);
                    assert_eq!(done, best, "lambda {lambda} n {n} root {root}");
                    for other in [
                        Tree::binomial(n, root),
                        Tree::kary(n, 2, root),
                        Tree::kary(n, 4, root),
                        Tree::chain(n, root),
                    ] {
                        let o = other
                            .unwrap()
                            .postal_arrivals(l)
                            .into_iter()
                            .fold(0.0, f64::max);
                        assert!(
                            o >= best,
                            "lambda {lambda} n {n}: a fixed shape beat the optimum"
                        );
                    }
                }
            }
        }
    }

    /// lambda 1 gives the binomial tree's fan-out, a lambda of at least
    /// n - 1 a flat tree; in between the root's fan-out grows with lambda.
    #[test]
    fn postal_shape_changes_with_lambda() {
        let n = 16;
        let fanout = |l: f64| Tree::postal(n, 3, l).unwrap().children(3).len();
        assert_eq!(fanout(1.0), 4, "binomial: log2 16 children");
        assert_eq!(Tree::postal(n, 3, 1.0).unwrap().depth(), 4);
        assert_eq!(fanout(15.0), 15, "flat");
        assert_eq!(Tree::postal(n, 3, 15.0).unwrap().depth(), 1);
        let mut last = 0;
        for l in 1..=15 {
            let f = fanout(f64::from(l));
            assert!(f >= last, "fan-out never shrinks as lambda grows");
            last = f;
        }
        assert_ne!(
            Tree::postal(n, 0, 2.0).unwrap(),
            Tree::postal(n, 0, 3.0).unwrap()
        );
    }

    #[test]
    fn bad_trees_are_refused() {
        assert!(Tree::from_parents(0, vec![None, Some(2), Some(1)]).is_err());
        assert!(Tree::from_parents(0, vec![None, None]).is_err());
        assert!(Tree::kary(3, 0, 0).is_err());
        assert!(Tree::binomial(3, 3).is_err());
        assert!(Tree::binomial(0, 0).is_err());
    }
}
