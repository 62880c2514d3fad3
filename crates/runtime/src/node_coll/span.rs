//! A group whose members live on several nodes, cut node by node: each
//! node's members meet in shared memory ([`super::NodeColl`]) and each
//! node's leader (its lowest group rank) stands for them in a group of
//! leaders that the engines run. A blocking collective then crosses the
//! network once per node, as the node engine's own node-then-network
//! schedules do, but without every member's part passing through the
//! engine's ports: on 4 emulated nodes of 3 ranks (16-core machine) an
//! engine group of one rank per node took 10-14 us for an 8-byte
//! broadcast or reduce where the 12 ranks' group took 16-19.
//!
//! Which collective goes in which order is the caller's (the C ABI's
//! blocking calls): a broadcast goes through the root's node first, then
//! the leaders, then the other nodes; a reduction folds within each node
//! to its leader, then among the leaders (so members fold node by node,
//! in group-rank order within each).

use outboard_engine::{Datatype, ReduceOp, Reduction};
use outboard_host::Group;

use super::NodeColl;

/// One member's view of its group cut node by node.
pub struct Span {
    /// Per group rank: the index of its node among the group's nodes,
    /// numbered in order of their leaders (so a node's index is its
    /// leader's rank in the leaders' group).
    pub node_of: Vec<u32>,
    /// Per group rank: its index among its node's members (the leader's
    /// is 0).
    pub local_rank: Vec<u32>,
    /// Per node: its leader's group rank.
    pub leaders: Vec<u32>,
    /// This member's node.
    pub my_node: u32,
    /// This node's members in shared memory, when it has two or more.
    pub local: Option<NodeColl>,
    /// The leaders' group, at a leader.
    pub leaders_group: Option<Group>,
}

impl Span {
    /// The layout of `g`, whose members' nodes are their engines': `None`
    /// when it does not span two nodes or no node holds two of its
    /// members (no node would save anything).
    pub fn layout(g: &Group) -> Option<(Vec<u32>, Vec<u32>, Vec<u32>)> {
        let leaders = g.node_leaders();
        let node_id = |r: u32| g.member(r).expect("a member's rank").node;
        let mut node_of = vec![0; g.size() as usize];
        let mut local_rank = vec![0; g.size() as usize];
        let mut counts = vec![0u32; leaders.len()];
        for r in 0..g.size() {
            let k = leaders.iter().position(|&l| node_id(l) == node_id(r)).expect("every node has a leader");
            node_of[r as usize] = k as u32;
            local_rank[r as usize] = counts[k];
            counts[k] += 1;
        }
        (leaders.len() >= 2 && counts.iter().any(|&c| c >= 2)).then_some((node_of, local_rank, leaders))
    }

    /// Whether this member leads its node.
    pub fn leads(&self) -> bool {
        self.leaders_group.is_some()
    }
}

/// Why a node's part of a collective failed, as its leader tells the
/// other leaders: so that every survivor names the rank that died, not
/// the leader that gave up because of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// This world rank died.
    Died(u32),
    /// Something else failed there (the members disagreed, say).
    Elsewhere,
}

/// What the leaders learn from the status their collective carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Every node's part went well.
    Fine,
    /// One node's part failed so.
    One(Fault),
    /// Several nodes' parts failed at once.
    Several,
}

/// A fault as a number of at most 24 bits (exact even in an `f32`);
/// ranks above are reported as [`Fault::Elsewhere`].
fn code(f: Fault) -> u64 {
    match f {
        Fault::Died(r) if u64::from(r) + 1 < ELSEWHERE => u64::from(r) + 1,
        _ => ELSEWHERE,
    }
}

const ELSEWHERE: u64 = (1 << 24) - 1;

fn fault(c: u64) -> Option<Fault> {
    match c {
        0 => None,
        ELSEWHERE => Some(Fault::Elsewhere),
        c if c < ELSEWHERE => Some(Fault::Died((c - 1) as u32)),
        _ => Some(Fault::Elsewhere),
    }
}

/// How many elements of a reduction's type the status takes.
pub const STATUS_ELEMS: usize = 2;

/// A value of a reduction's element type, widened.
#[derive(Clone, Copy)]
enum Val {
    Int(i128),
    Float(f64),
}

/// Writes `v` in the host's byte order: the engines fold status elements
/// as they fold the data, in native order.
fn put(dtype: Datatype, v: Val, out: &mut Vec<u8>) {
    match (dtype, v) {
        (Datatype::I32, Val::Int(x)) => out.extend_from_slice(&(x as i32).to_ne_bytes()),
        (Datatype::I64, Val::Int(x)) => out.extend_from_slice(&(x as i64).to_ne_bytes()),
        (Datatype::U64, Val::Int(x)) => out.extend_from_slice(&(x as u64).to_ne_bytes()),
        (Datatype::F32, Val::Float(x)) => out.extend_from_slice(&(x as f32).to_ne_bytes()),
        (Datatype::F64, Val::Float(x)) => out.extend_from_slice(&x.to_ne_bytes()),
        (d, Val::Int(x)) => put(d, Val::Float(x as f64), out),
        (d, Val::Float(x)) => put(d, Val::Int(x as i128), out),
    }
}

fn get(dtype: Datatype, b: &[u8]) -> Val {
    match dtype {
        Datatype::I32 => Val::Int(i32::from_ne_bytes(b[..4].try_into().expect("4 bytes")).into()),
        Datatype::I64 => Val::Int(i64::from_ne_bytes(b[..8].try_into().expect("8 bytes")).into()),
        Datatype::U64 => Val::Int(u64::from_ne_bytes(b[..8].try_into().expect("8 bytes")).into()),
        Datatype::F32 => Val::Float(f32::from_ne_bytes(b[..4].try_into().expect("4 bytes")).into()),
        Datatype::F64 => Val::Float(f64::from_ne_bytes(b[..8].try_into().expect("8 bytes"))),
    }
}

/// The all-ones pattern of an integer type, as a widened value.
fn ones(dtype: Datatype) -> i128 {
    match dtype {
        Datatype::U64 => i128::from(u64::MAX),
        _ => -1,
    }
}

/// The largest and smallest values of a type (infinities for floats).
fn extremes(dtype: Datatype) -> (Val, Val) {
    match dtype {
        Datatype::I32 => (Val::Int(i32::MAX.into()), Val::Int(i32::MIN.into())),
        Datatype::I64 => (Val::Int(i64::MAX.into()), Val::Int(i64::MIN.into())),
        Datatype::U64 => (Val::Int(u64::MAX.into()), Val::Int(0)),
        Datatype::F32 | Datatype::F64 => (Val::Float(f64::INFINITY), Val::Float(f64::NEG_INFINITY)),
    }
}

/// The pair a leader contributes for fault code `c` (0: none) in `red`'s
/// own algebra: a healthy leader's pair is the operation's identity, so
/// that folding leaves a single failed node's pair as it was, and the
/// second element is built so that two failed nodes' pairs fold to a
/// pair that says so. `None` for operations whose folds cannot keep a
/// rank (the logical ones, exclusive or, user modules).
fn pair(red: Reduction, c: u64) -> Option<[Val; 2]> {
    let c = c as i128;
    let signed_or_float = |x: i128| match red.dtype {
        Datatype::F32 | Datatype::F64 => Val::Float(x as f64),
        _ => Val::Int(x),
    };
    let (max, min) = extremes(red.dtype);
    Some(match (red.op, c) {
        (ReduceOp::Sum, 0) => [signed_or_float(0), signed_or_float(0)],
        (ReduceOp::Sum, c) => [signed_or_float(c), signed_or_float(1)],
        (ReduceOp::Prod, 0) => [signed_or_float(1), signed_or_float(1)],
        (ReduceOp::Prod, c) => [signed_or_float(c + 1), signed_or_float(2)],
        (ReduceOp::Min, 0) => [max, max],
        (ReduceOp::Max, 0) => [min, min],
        (ReduceOp::Min | ReduceOp::Max, c) if red.dtype == Datatype::U64 => [Val::Int(c), Val::Int(i128::from(u64::MAX) - c)],
        (ReduceOp::Min | ReduceOp::Max, c) => [signed_or_float(c), signed_or_float(-c)],
        (ReduceOp::Band, 0) => [Val::Int(ones(red.dtype)), Val::Int(ones(red.dtype))],
        (ReduceOp::Bor, 0) => [Val::Int(0), Val::Int(0)],
        (ReduceOp::Band | ReduceOp::Bor, c) => [Val::Int(c), Val::Int(ones(red.dtype) ^ c)],
        _ => return None,
    })
}

/// Whether a reduction with `red` can carry the leaders' status (see
/// [`status`]); the others go through the engines whole.
pub fn carries_status(red: Reduction) -> bool {
    pair(red, 0).is_some()
}

/// The [`STATUS_ELEMS`] elements a leader appends to its contribution to
/// the leaders' reduction with `red`: its node's fault, if any.
pub fn status(red: Reduction, f: Option<Fault>) -> Vec<u8> {
    let mut out = Vec::with_capacity(STATUS_ELEMS * red.dtype.size());
    for v in pair(red, f.map_or(0, code)).expect("checked with carries_status") {
        put(red.dtype, v, &mut out);
    }
    out
}

/// What the folded status elements of a leaders' reduction with `red`
/// say.
pub fn heard(red: Reduction, folded: &[u8]) -> Heard {
    let n = red.dtype.size();
    let (a, b) = (get(red.dtype, &folded[..n]), get(red.dtype, &folded[n..2 * n]));
    let int = |v: Val| match v {
        Val::Int(x) => x,
        Val::Float(x) => x as i128,
    };
    let fine = pair(red, 0).expect("checked with carries_status");
    let is = |v: Val, w: Val| match (v, w) {
        (Val::Float(x), Val::Float(y)) => x == y,
        _ => int(v) == int(w),
    };
    if is(a, fine[0]) && is(b, fine[1]) {
        return Heard::Fine;
    }
    let (a, b) = (int(a), int(b));
    let single = match red.op {
        ReduceOp::Sum => b == 1,
        ReduceOp::Prod => b == 2,
        ReduceOp::Min | ReduceOp::Max if red.dtype == Datatype::U64 => b == i128::from(u64::MAX) - a,
        ReduceOp::Min | ReduceOp::Max => b == -a,
        ReduceOp::Band | ReduceOp::Bor => a ^ b == ones(red.dtype),
        _ => false,
    };
    let c = if red.op == ReduceOp::Prod { a - 1 } else { a };
    match (single, u64::try_from(c).ok().and_then(fault)) {
        (true, Some(f)) => Heard::One(f),
        _ => Heard::Several,
    }
}

/// The status a leader appends to a broadcast's data: its node's fault.
pub fn bcast_status(f: Option<Fault>) -> [u8; 8] {
    f.map_or(0, code).to_le_bytes()
}

/// What a broadcast's status says.
pub fn bcast_heard(b: &[u8]) -> Heard {
    match fault(u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))) {
        None => Heard::Fine,
        Some(f) => Heard::One(f),
    }
}

#[cfg(test)]
mod tests {
    use outboard_engine::{Datatype, Endpoint, GroupId, NodeId, PortId, ReduceOp, Reduction};
    use outboard_host::Group;

    use super::Span;

    /// A group whose rank `r` runs on node `nodes[r]` (port `r`).
    fn group(nodes: &[u32], rank: u32) -> Group {
        let members = nodes.iter().enumerate().map(|(r, &n)| Endpoint { node: NodeId(n), port: PortId(r as u8), gen: 1 }).collect();
        Group::new(GroupId(7), rank, members).unwrap()
    }

    #[test]
    fn nodes_are_numbered_by_their_leaders_and_members_within_each() {
        // Ranks 0..5 on nodes 9, 4, 9, 4, 2: leaders 0 (node 9), 1 (node 4), 4 (node 2).
        let g = group(&[9, 4, 9, 4, 2], 0);
        assert_eq!(g.node_leaders(), vec![0, 1, 4]);
        let (node_of, local_rank, leaders) = Span::layout(&g).expect("three nodes, two with two members");
        assert_eq!(node_of, vec![0, 1, 0, 1, 2]);
        assert_eq!(local_rank, vec![0, 0, 1, 1, 0]);
        assert_eq!(leaders, vec![0, 1, 4]);
    }

    /// Every operation that carries the status, on every type it takes:
    /// healthy leaders' pairs fold to fine, one failed node's pair comes
    /// through whole, two failed nodes' pairs say so.
    #[test]
    fn the_leaders_status_survives_every_fold_that_carries_it() {
        use super::{carries_status, heard, status, Fault, Heard};
        let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Band, ReduceOp::Bor];
        let mut checked = 0;
        for op in ops {
            for dtype in Datatype::ALL {
                let red = Reduction { op, dtype };
                if red.validate().is_err() {
                    continue;
                }
                assert!(carries_status(red), "{red:?}");
                let fold = |parts: &[Option<Fault>]| {
                    let mut acc = status(red, parts[0]);
                    for p in &parts[1..] {
                        red.fold(&mut acc, &status(red, *p), false).unwrap();
                    }
                    heard(red, &acc)
                };
                assert_eq!(fold(&[None, None, None]), Heard::Fine, "{red:?}");
                for f in [Fault::Died(0), Fault::Died(5), Fault::Died(70_000), Fault::Elsewhere] {
                    assert_eq!(fold(&[None, Some(f), None]), Heard::One(f), "{red:?} {f:?}");
                    assert_eq!(fold(&[Some(f), None]), Heard::One(f), "{red:?} {f:?}");
                }
                assert_eq!(fold(&[Some(Fault::Died(3)), None, Some(Fault::Died(9))]), Heard::Several, "{red:?}");
                checked += 1;
            }
        }
        assert!(checked >= 20, "{checked} reductions checked");
        for op in [ReduceOp::Bxor, ReduceOp::Land, ReduceOp::Lor, ReduceOp::Lxor] {
            assert!(!carries_status(Reduction { op, dtype: Datatype::I64 }));
        }
    }

    #[test]
    fn a_group_on_one_node_or_one_member_per_node_is_not_cut() {
        assert!(Span::layout(&group(&[3, 3, 3], 1)).is_none());
        assert!(Span::layout(&group(&[1, 2, 3], 1)).is_none());
    }
}
