//! The quaternary fat tree of Elite switches (Petrini et al. 2.2).
//!
//! A tree of dimension `n` has `4^n` node slots and `n * 4^(n-1)` switches,
//! each with 4 links down and (below the top) 4 up: the Elite's 8 ports. A
//! switch is named by its level (1 next to the nodes, `n` at the top), the
//! group of `4^level` consecutive nodes below it and its replica among the
//! `4^(level-1)` switches that serve that group. Up-link `j` of replica `r`
//! at level `l` goes to replica `r + j * 4^(l-1)` of the parent group, so
//! the replica reached at the top fixes the whole way down: routing is
//! adaptive going up and deterministic coming down (2.2.1).
//!
//! Vertices are numbered: nodes first (`0..4^n`), then switches level by
//! level. Directed links are numbered densely for the fabric's tables.

use std::collections::HashMap;

/// A vertex: a node slot or a switch.
pub type Vertex = u32;

/// The tree and its links.
#[derive(Debug, Clone)]
pub struct FatTree {
    /// Nodes in use (`<= slots`).
    pub nodes: u32,
    /// Dimension (levels of switches), at least 1.
    pub dim: u32,
    /// `4^dim` node slots.
    pub slots: u32,
    /// Directed links: (from, to).
    pub links: Vec<(Vertex, Vertex)>,
    index: HashMap<(Vertex, Vertex), usize>,
}

fn pow4(e: u32) -> u32 {
    1u32 << (2 * e)
}

impl FatTree {
    /// The smallest quaternary fat tree with room for `nodes` nodes.
    pub fn new(nodes: u32) -> FatTree {
        let mut dim = 1;
        while pow4(dim) < nodes {
            dim += 1;
        }
        let slots = pow4(dim);
        let mut t = FatTree { nodes, dim, slots, links: Vec::new(), index: HashMap::new() };
        for level in 1..=dim {
            for group in 0..pow4(dim - level) {
                for replica in 0..pow4(level - 1) {
                    let s = t.switch(level, group, replica);
                    for c in 0..4 {
                        let child = t.child(level, group, replica, c);
                        t.add(s, child);
                        t.add(child, s);
                    }
                }
            }
        }
        t
    }

    fn add(&mut self, a: Vertex, b: Vertex) {
        self.index.insert((a, b), self.links.len());
        self.links.push((a, b));
    }

    /// The switch vertex (level 1..=dim).
    pub fn switch(&self, level: u32, group: u32, replica: u32) -> Vertex {
        self.slots + (level - 1) * pow4(self.dim - 1) + group * pow4(level - 1) + replica
    }

    /// (level, group, replica) of a switch vertex.
    pub fn coords(&self, v: Vertex) -> (u32, u32, u32) {
        let i = v - self.slots;
        let per = pow4(self.dim - 1);
        let level = i / per + 1;
        let k = i % per;
        (level, k / pow4(level - 1), k % pow4(level - 1))
    }

    /// Whether `v` is a node slot.
    pub fn is_node(&self, v: Vertex) -> bool {
        v < self.slots
    }

    /// Child `c` (0..4) of a switch: a node at level 1, else a switch one
    /// level down with the same replica modulo the lower level's count.
    pub fn child(&self, level: u32, group: u32, replica: u32, c: u32) -> Vertex {
        if level == 1 {
            group * 4 + c
        } else {
            self.switch(level - 1, group * 4 + c, replica % pow4(level - 2))
        }
    }

    /// The four up-links' far ends of a switch below the top.
    pub fn parents(&self, v: Vertex) -> Vec<Vertex> {
        let (level, group, replica) = self.coords(v);
        if level == self.dim {
            return Vec::new();
        }
        (0..4).map(|j| self.switch(level + 1, group / 4, replica + j * pow4(level - 1))).collect()
    }

    /// The nodes below vertex `v`, as a half-open range.
    pub fn span(&self, v: Vertex) -> (u32, u32) {
        if self.is_node(v) {
            return (v, v + 1);
        }
        let (level, group, _) = self.coords(v);
        (group * pow4(level), (group + 1) * pow4(level))
    }

    /// The four children of a switch.
    pub fn children(&self, v: Vertex) -> [Vertex; 4] {
        let (l, g, r) = self.coords(v);
        [0, 1, 2, 3].map(|c| self.child(l, g, r, c))
    }

    /// The level-1 switch of node `n`.
    pub fn leaf_switch(&self, n: u32) -> Vertex {
        self.switch(1, n / 4, 0)
    }

    /// The lowest level at which all the given nodes share a subtree.
    pub fn common_level(&self, nodes: &[u32]) -> u32 {
        let mut l = 1;
        while l < self.dim && !nodes.iter().all(|&n| n / pow4(l) == nodes[0] / pow4(l)) {
            l += 1;
        }
        l
    }

    /// The directed link from `a` to `b`.
    pub fn link(&self, a: Vertex, b: Vertex) -> usize {
        self.index[&(a, b)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_paper() {
        // 4^n nodes, n * 4^(n-1) switches, 8 links per switch (4 at the top).
        for (nodes, dim, switches) in [(4, 1, 1), (16, 2, 8), (64, 3, 48), (20, 3, 48)] {
            let t = FatTree::new(nodes);
            assert_eq!((t.dim, t.dim * pow4(t.dim - 1)), (dim, switches));
            // Each switch: 4 children, each link both ways.
            assert_eq!(t.links.len() as u32, 2 * 4 * switches);
        }
    }

    #[test]
    fn every_up_path_reaches_a_switch_over_both_nodes() {
        let t = FatTree::new(64);
        for v in t.slots..t.slots + 48 {
            let (lo, hi) = t.span(v);
            for p in t.parents(v) {
                let (plo, phi) = t.span(p);
                assert!(plo <= lo && hi <= phi);
                assert!(t.children(p).contains(&v), "{p} does not list {v} as a child");
            }
        }
        assert_eq!(t.common_level(&[0, 3]), 1);
        assert_eq!(t.common_level(&[0, 4]), 2);
        assert_eq!(t.common_level(&[0, 63]), 3);
    }
}
