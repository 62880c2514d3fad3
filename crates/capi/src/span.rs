//! Blocking collectives of a group that spans nodes, node by node
//! (`outboard_runtime::node_coll::span`): the node's members meet in
//! shared memory and each node's leader stands for them in the leaders'
//! group, which the engines run. The order of the parts is what makes
//! each call right:
//!
//! - barrier: the node, the leaders, the node again;
//! - broadcast: the root's node from the root, then the leaders from the
//!   root's node's leader, then every other node from its leader;
//! - reduce: each node folds to its leader, the leaders fold to the root's
//!   node's leader, who hands the result to the root through its node;
//! - allreduce: each node folds to its leader, the leaders allreduce, each
//!   leader hands the result to its node.
//!
//! Members of one node fold in group-rank order, then the nodes in the
//! order of their leaders: the same order at every rank and every run.
//!
//! # Failures
//!
//! A member that dies is seen by its node's members only. So that every
//! survivor names it (as the engines' own collectives do, not the leader
//! that gave up because of it), a leader whose node's part failed still
//! takes part in the leaders' part, with a status beside its data that
//! says why ([`span::Fault`]), and every leader that waits on its node
//! after the leaders' part first tells it the outcome (a *verdict*: the
//! error, worded, or none). A leader never leaves its node waiting: its
//! node's members either failed with it in the node's part or hear its
//! verdict - in every call, also where the data needs nothing from the
//! leaders (a broadcast's root's node, a reduction's other nodes), so
//! that a death the leaders learn of in one call is named by every
//! member in that call, not by the next call's cascade.

use std::ptr::null_mut;

use outboard_host::{CollRequest, Group, HostError, Mode, Port, Reduction};
use outboard_runtime::node_coll::span::{self, Fault, Heard};
use outboard_runtime::node_coll::{Buffers, NodeColl, NodeCollError};
use outboard_runtime::RtPort;

use crate::error::{Error, OUTBOARD_ERR_COLL, OUTBOARD_ERR_PEER, OUTBOARD_OK};
use crate::group::{lock_node, outboard_group, SpanPath};
use crate::request::{finish, hand_out, Kind, Place};

/// Bytes of a verdict: its code, its message's length, the message (cut).
const VERDICT: usize = 512;

/// Runs `start` on the leaders' group (this rank leads its node), always
/// offloaded (only groups that run offloaded take this path), and
/// waits for it, without holding the world meanwhile; its result, if any,
/// goes to `out`.
fn on_leaders(g: &outboard_group, sp: &SpanPath, out: &mut [u8], start: impl FnOnce(&mut Port<RtPort>, &mut Group) -> Result<CollRequest, HostError>) -> Result<(), Error> {
    let leaders = sp.leaders.as_ref().expect("only a node's leader runs the leaders' part");
    let req = g.shared.with(|w| {
        let mut lg = leaders.lock().map_err(|_| Error::new(crate::error::OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?;
        Ok(start(w.port(), &mut lg)?)
    })?;
    let mut r = null_mut();
    let (ptr, len) = if out.is_empty() { (null_mut(), 0) } else { (out.as_mut_ptr(), out.len()) };
    // SAFETY: `r` is a valid place for the handle; `out` outlives the wait.
    unsafe { hand_out(g.shared.clone(), Kind::Coll { req, out: ptr, place: Place::Prefix(len), module: None }, &mut r) }?;
    match unsafe { finish(OUTBOARD_OK, r) } {
        OUTBOARD_OK => Ok(()),
        code => Err(Error::last(code)),
    }
}

/// Runs `f` on this node's members in shared memory, if the node has
/// two or more.
fn on_local(g: &outboard_group, sp: &SpanPath, f: impl FnOnce(&mut NodeColl) -> Result<(), NodeCollError>) -> Result<(), Error> {
    match &sp.local {
        Some(l) => g.run_on_node(l, f),
        None => Ok(()),
    }
}

/// The node's part at a leader: its error, if any, and the fault it
/// tells the other leaders.
fn node_part(g: &outboard_group, sp: &SpanPath, f: impl FnOnce(&mut NodeColl) -> Result<(), NodeCollError>) -> Result<(), (Error, Fault)> {
    let Some(l) = &sp.local else { return Ok(()) };
    let elsewhere = |e| (e, Fault::Elsewhere);
    g.shared.live().map_err(elsewhere)?;
    let mut nc = lock_node(l).map_err(elsewhere)?;
    f(&mut nc).map_err(|e| {
        let fault = match &e {
            NodeCollError::Died { rank, .. } => Fault::Died(*rank),
            _ => Fault::Elsewhere,
        };
        (Error::from(e), fault)
    })
}

/// The error every survivor reports for what the leaders heard.
fn heard_error(h: Heard) -> Option<Error> {
    match h {
        Heard::Fine => None,
        Heard::One(Fault::Died(r)) => Some(Error::new(OUTBOARD_ERR_PEER, format!("rank {r} died during a collective of its group"))),
        Heard::One(Fault::Elsewhere) => Some(Error::new(OUTBOARD_ERR_COLL, "the collective failed on another node of the group (the members there disagreed, or one died)")),
        Heard::Several => Some(Error::new(OUTBOARD_ERR_PEER, "ranks on several nodes of the group died during a collective")),
    }
}

/// A leader's last word to its node: the outcome it reports.
fn tell_node(g: &outboard_group, sp: &SpanPath, verdict: &Result<(), Error>) -> Result<(), Error> {
    let mut b = [0u8; VERDICT];
    if let Err(e) = verdict {
        let msg = e.msg.as_bytes();
        let n = msg.len().min(VERDICT - 8);
        b[..4].copy_from_slice(&e.code.to_le_bytes());
        b[4..8].copy_from_slice(&(n as u32).to_le_bytes());
        b[8..8 + n].copy_from_slice(&msg[..n]);
    }
    on_local(g, sp, |nc| nc.bcast(&mut b, 0))
}

/// A leader's return when its node's part failed: where a member died,
/// the node's other members may have finished that part (a reduction's
/// members finish once every contribution is in, before the leader has
/// folded them all) and now wait for the verdict, so the leader still
/// tells it. That round cannot complete without the dead member, so
/// every member in it fails naming it. (Other failures - members that
/// disagreed - fail every member alike, and none waits.)
fn give_up(g: &outboard_group, sp: &SpanPath, e: Error, fault: Fault) -> Result<(), Error> {
    if matches!(fault, Fault::Died(_)) {
        let _ = tell_node(g, sp, &Err(Error::new(e.code, e.msg.clone())));
    }
    Err(e)
}

/// A member's hearing of its leader's verdict.
fn hear_leader(g: &outboard_group, sp: &SpanPath) -> Result<(), Error> {
    let mut b = [0u8; VERDICT];
    on_local(g, sp, |nc| nc.bcast(&mut b, 0))?;
    let code = i32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
    if code == OUTBOARD_OK {
        return Ok(());
    }
    let n = (u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize).min(VERDICT - 8);
    Err(Error::new(code, String::from_utf8_lossy(&b[8..8 + n]).into_owned()))
}

/// The outcome at a leader of the leaders' part: its own error, else
/// what the status says.
fn verdict(leaders: Result<(), Error>, h: impl FnOnce() -> Heard) -> Result<(), Error> {
    leaders?;
    heard_error(h()).map_or(Ok(()), Err)
}

/// A barrier.
pub(crate) fn barrier(g: &outboard_group, sp: &SpanPath) -> Result<(), Error> {
    if sp.leaders.is_none() {
        on_local(g, sp, NodeColl::barrier)?;
        return hear_leader(g, sp);
    }
    let mine = node_part(g, sp, NodeColl::barrier);
    let red = Reduction { op: outboard_host::ReduceOp::Max, dtype: outboard_host::Datatype::U64 };
    let mut folded = span::status(red, mine.as_ref().err().map(|(_, f)| *f));
    let status = folded.clone();
    let leaders = on_leaders(g, sp, &mut folded, |p, lg| {
        let d = lg.defaults();
        p.start_allreduce(lg, Mode::Offloaded, d.allreduce, red, &status)
    });
    let v = verdict(leaders, || span::heard(red, &folded));
    if let Err((e, fault)) = mine {
        return give_up(g, sp, e, fault);
    }
    tell_node(g, sp, &v)?;
    v
}

/// A broadcast of `buf` from group rank `root` (a member).
pub(crate) fn bcast(g: &outboard_group, sp: &SpanPath, buf: &mut [u8], root: u32) -> Result<(), Error> {
    let root_node = sp.node_of[root as usize];
    let len = buf.len();
    let leaders_bcast = |data: Vec<u8>, out: &mut [u8]| {
        on_leaders(g, sp, out, |p, lg| {
            let d = lg.defaults();
            p.start_bcast(lg, Mode::Offloaded, d.tree, root_node, &data)
        })
    };
    if sp.my_node == root_node {
        let local_root = sp.local_rank[root as usize];
        if sp.leaders.is_none() {
            on_local(g, sp, |nc| nc.bcast(buf, local_root))?;
            return hear_leader(g, sp);
        }
        let mine = node_part(g, sp, |nc| nc.bcast(buf, local_root));
        let mut data = buf.to_vec();
        data.extend_from_slice(&span::bcast_status(mine.as_ref().err().map(|(_, f)| *f)));
        // The root's node has the data: nothing to take back.
        let leaders = leaders_bcast(data, &mut []);
        if let Err((e, fault)) = mine {
            return give_up(g, sp, e, fault);
        }
        tell_node(g, sp, &leaders)?;
        return leaders;
    }
    if sp.leaders.is_none() {
        hear_leader(g, sp)?;
        return on_local(g, sp, |nc| nc.bcast(buf, 0));
    }
    let mut got = vec![0; len + 8];
    let leaders = leaders_bcast(vec![0; len + 8], &mut got);
    let v = verdict(leaders, || span::bcast_heard(&got[len..]));
    tell_node(g, sp, &v)?;
    v?;
    buf.copy_from_slice(&got[..len]);
    on_local(g, sp, |nc| nc.bcast(buf, 0))
}

/// This node's fold of `contribution` at its leader, with the status
/// elements appended (see [`span::status`]): its error and fault too when
/// it failed.
fn fold_node(g: &outboard_group, sp: &SpanPath, contribution: &[u8], red: Reduction) -> (Vec<u8>, Option<(Error, Fault)>) {
    let mut partial = vec![0; contribution.len()];
    let mine = if sp.local.is_some() {
        node_part(g, sp, |nc| nc.reduce(Buffers::Separate { send: contribution, recv: Some(&mut partial[..]) }, red, 0))
    } else {
        partial.copy_from_slice(contribution);
        Ok(())
    };
    partial.extend_from_slice(&span::status(red, mine.as_ref().err().map(|(_, f)| *f)));
    (partial, mine.err())
}

/// A reduction with `red` of `contribution` to group rank `root`, whose
/// result goes to `result` there. `red` carries a status
/// ([`span::carries_status`]).
pub(crate) fn reduce(g: &outboard_group, sp: &SpanPath, contribution: &[u8], result: Option<&mut [u8]>, red: Reduction, root: u32) -> Result<(), Error> {
    let root_node = sp.node_of[root as usize];
    let at_root_node = sp.my_node == root_node;
    let len = contribution.len();
    if sp.leaders.is_none() {
        on_local(g, sp, |nc| nc.reduce(Buffers::Separate { send: contribution, recv: None }, red, 0))?;
        hear_leader(g, sp)?;
        if !at_root_node || sp.local_rank[root as usize] == 0 {
            // The root leads the node: it has the result already.
            return Ok(());
        }
        let mut scratch;
        let buf = match result {
            Some(out) => out,
            None => {
                scratch = vec![0; len];
                &mut scratch[..]
            }
        };
        return on_local(g, sp, |nc| nc.bcast(buf, 0));
    }
    let (mut partial, mine) = fold_node(g, sp, contribution, red);
    let data = partial.clone();
    let out: &mut [u8] = if at_root_node { &mut partial } else { &mut [] };
    let leaders = on_leaders(g, sp, out, |port, lg| {
        let d = lg.defaults();
        port.start_reduce(lg, Mode::Offloaded, d.reduce, root_node, red, &data)
    });
    if let Some((e, fault)) = mine {
        return give_up(g, sp, e, fault);
    }
    if !at_root_node {
        tell_node(g, sp, &leaders)?;
        return leaders;
    }
    let v = verdict(leaders, || span::heard(red, &partial[len..]));
    tell_node(g, sp, &v)?;
    v?;
    if sp.local_rank[root as usize] == 0 {
        // The root leads its node: the leaders' result is its.
        if let Some(out) = result {
            out.copy_from_slice(&partial[..len]);
        }
        return Ok(());
    }
    on_local(g, sp, |nc| nc.bcast(&mut partial[..len], 0))
}

/// An allreduce with `red` of `contribution`, the result to `result`.
/// `red` carries a status ([`span::carries_status`]).
pub(crate) fn allreduce(g: &outboard_group, sp: &SpanPath, contribution: &[u8], result: &mut [u8], red: Reduction) -> Result<(), Error> {
    let len = contribution.len();
    if sp.leaders.is_none() {
        on_local(g, sp, |nc| nc.reduce(Buffers::Separate { send: contribution, recv: None }, red, 0))?;
        hear_leader(g, sp)?;
        return on_local(g, sp, |nc| nc.bcast(result, 0));
    }
    let (partial, mine) = fold_node(g, sp, contribution, red);
    let mut folded = vec![0; partial.len()];
    let leaders = on_leaders(g, sp, &mut folded, |port, lg| {
        let d = lg.defaults();
        port.start_allreduce(lg, Mode::Offloaded, d.allreduce, red, &partial)
    });
    if let Some((e, fault)) = mine {
        return give_up(g, sp, e, fault);
    }
    let v = verdict(leaders, || span::heard(red, &folded[len..]));
    tell_node(g, sp, &v)?;
    v?;
    result.copy_from_slice(&folded[..len]);
    on_local(g, sp, |nc| nc.bcast(result, 0))
}
