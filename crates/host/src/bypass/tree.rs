//! The binomial tree of an application-bypass collective, computed without
//! allocating (a signal handler walks it): MPICH's tree over ranks
//! relative to the root, children largest subtree first.

/// Rank `r`'s position relative to `root` in a group of `n`.
fn rel(n: u32, root: u32, r: u32) -> u32 {
    (r + n - root) % n
}

fn abs(n: u32, root: u32, v: u32) -> u32 {
    (v + root) % n
}

/// The highest child offset of relative rank `v` (exclusive bound).
fn top(n: u32, v: u32) -> u32 {
    if v == 0 {
        n.next_power_of_two()
    } else {
        v & v.wrapping_neg()
    }
}

/// `r`'s parent in the tree rooted at `root`; `None` at the root.
pub(crate) fn parent(n: u32, root: u32, r: u32) -> Option<u32> {
    let v = rel(n, root, r);
    (v != 0).then(|| abs(n, root, v - (v & v.wrapping_neg())))
}

/// `r`'s children, largest subtree first.
pub(crate) fn children(n: u32, root: u32, r: u32) -> impl Iterator<Item = u32> {
    let v = rel(n, root, r);
    let mut m = top(n, v) >> 1;
    std::iter::from_fn(move || {
        while m > 0 {
            let c = v + m;
            m >>= 1;
            if c < n {
                return Some(abs(n, root, c));
            }
        }
        None
    })
}

/// Whether `r` has children (an inner member, which acts in its handler).
pub(crate) fn is_inner(n: u32, root: u32, r: u32) -> bool {
    children(n, root, r).next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_but_the_root_has_one_parent_that_lists_it() {
        for n in 1..40 {
            for root in [0, n / 2, n - 1] {
                let mut seen = vec![0; n as usize];
                for r in 0..n {
                    for c in children(n, root, r) {
                        assert_eq!(parent(n, root, c), Some(r), "n={n} root={root} r={r} c={c}");
                        seen[c as usize] += 1;
                    }
                }
                assert_eq!(parent(n, root, root), None);
                for r in 0..n {
                    assert_eq!(seen[r as usize], u32::from(r != root), "n={n} root={root} r={r}");
                }
                // The same tree as the library's binomial one.
                let t = crate::coll::tree::Tree::binomial(n, root).unwrap();
                for r in 0..n {
                    let mut a: Vec<u32> = children(n, root, r).collect();
                    let mut b = t.children(r);
                    a.sort_unstable();
                    b.sort_unstable();
                    assert_eq!(a, b, "n={n} root={root} r={r}");
                }
            }
        }
    }
}
