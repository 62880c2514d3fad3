//! Collectives among the processes of one node through shared memory.
//!
//! The papers' NICs deliver between the processes of one node without the
//! network (GM's same-NIC path, QsNet's Tports through shared memory); a
//! node engine that carried a barrier between two local ranks through its
//! reliable protocol would cost tens of microseconds where a cache line
//! costs a hundred nanoseconds. So a group whose members all live on this
//! node runs its blocking barrier, broadcast, reduce and allreduce here:
//! the members meet in a region of shared memory ([`region`]) and never
//! reach the engine.
//!
//! # The round
//!
//! Every collective is one or more rounds, numbered alike at every member
//! (MPI's rule that members call a group's collectives in one order). In
//! round `s` each member writes its data, if any, to its slot, publishes
//! its call ([`op::Call`]) and stores `s` as its arrival (Release). The
//! leader (group rank 0) waits for every arrival, checks that the calls
//! agree, does the round's work (folds the slots in group-rank order, or
//! copies the broadcast root's slot) into the result slot, and stores `s`
//! as its release; members wait for it and copy the result out.
//!
//! That one leader checks every call is what turns an erroneous program
//! (members calling different collectives at the same place) into an
//! error at every member instead of a hang. No slot needs double
//! buffering: a member writes its slot for round `s + 1` only after seeing
//! release `s`, after which the leader never reads it again, and the
//! leader writes the result slot for round `s + 1` only after every member
//! arrived at it, which each does only after copying result `s` out.
//!
//! Short calls (data of at most [`region::INLINE`] bytes, up to
//! [`FLAT_MAX_MEMBERS`] members) go flat instead: every member publishes
//! its call and data in one cache line and reads every other's, so a
//! round costs one transfer each way, in parallel, and every member
//! checks the calls itself. Data longer than a slot ([`region::SLOT`])
//! goes in rounds of a slot each. Waiting members check every millisecond that the member they
//! wait for still runs ([`wait`]): a killed rank fails its group's
//! collective at every survivor.

mod futex;
pub mod op;
pub mod region;
pub mod wait;

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;

use outboard_engine::{CollError, Reduction};
use thiserror::Error;

pub use op::{Call, Op};
use region::{Region, RegionName, INLINE, SLOT};

/// Why a node collective failed.
#[derive(Debug, Error)]
pub enum NodeCollError {
    /// The members called different collectives (or one with different
    /// roots, reductions or lengths) at the same place.
    #[error("the group's members called different collectives at the same place in the group's order: this rank {ours}, another member {theirs}")]
    Mismatch {
        /// This member's call, in words.
        ours: String,
        /// A disagreeing member's call, in words.
        theirs: String,
    },
    /// A member's process is gone.
    #[error("rank {rank} died during a collective of its group (its process {pid} is gone)")]
    Died {
        /// Its world rank.
        rank: u32,
        /// Its process id.
        pid: u32,
    },
    /// The reduction cannot apply to data of this length.
    #[error(transparent)]
    Reduction(#[from] CollError),
}

/// This process's view of its node for node collectives: the job and node
/// that name regions, and the process id of every rank on the node.
#[derive(Debug)]
pub struct NodeLocal {
    job_key: u64,
    boot: u64,
    node: u32,
    /// Per world rank: its process id when it runs on this node, else 0.
    pids: Vec<u32>,
    /// Groups made so far, per id and membership.
    made: HashMap<(u64, Vec<u32>), u32>,
    /// How long a waiter spins before yielding its core.
    spins: u32,
}

impl NodeLocal {
    /// The node `node` of job `job_key` (started at `boot`), whose ranks
    /// run as processes `pids` (0 for ranks on other nodes), on `cores`
    /// cores.
    pub fn new(job_key: u64, boot: u64, node: u32, pids: Vec<u32>, cores: usize) -> NodeLocal {
        let local = pids.iter().filter(|&&p| p != 0).count();
        let spins = if local > cores { 0 } else { wait::SPINS };
        NodeLocal { job_key, boot, node, pids, made: HashMap::new(), spins }
    }

    /// The node collectives of group `group`, whose members are the world
    /// ranks `members` in group-rank order, this process at `me`; `None`
    /// when some member lives on another node, or there is only one.
    /// Every member must call it, once per group it makes.
    pub fn open(&mut self, group: u64, me: usize, members: Vec<u32>) -> io::Result<Option<NodeColl>> {
        let pids: Option<Vec<u32>> = members.iter().map(|&r| self.pids.get(r as usize).copied().filter(|&p| p != 0)).collect();
        let Some(pids) = pids.filter(|p| p.len() >= 2) else { return Ok(None) };
        let made = self.made.entry((group, members.clone())).or_insert(0);
        let incarnation = *made;
        *made += 1;
        let name = RegionName { job_key: self.job_key, boot: self.boot, node: self.node, group, members: members.clone(), incarnation };
        let region = Region::attach(&name)?;
        Ok(Some(NodeColl { region, me, members, pids, seq: 0, spins: self.spins, acc: vec![0; SLOT as usize], tmp: vec![0; SLOT as usize] }))
    }
}

/// A reduction's buffers at one member.
pub enum Buffers<'a> {
    /// The contribution, and where the result goes (where this rank gets
    /// one: every rank of an allreduce, the root of a reduce).
    Separate {
        /// This rank's contribution.
        send: &'a [u8],
        /// Room for the result.
        recv: Option<&'a mut [u8]>,
    },
    /// The contribution, replaced by the result where this rank gets one.
    InPlace(&'a mut [u8]),
}

impl Buffers<'_> {
    fn len(&self) -> usize {
        match self {
            Buffers::Separate { send, .. } => send.len(),
            Buffers::InPlace(b) => b.len(),
        }
    }

    fn contribution(&self, r: std::ops::Range<usize>) -> &[u8] {
        match self {
            Buffers::Separate { send, .. } => &send[r],
            Buffers::InPlace(b) => &b[r],
        }
    }

    fn result(&mut self, r: std::ops::Range<usize>) -> Option<&mut [u8]> {
        match self {
            Buffers::Separate { recv, .. } => recv.as_deref_mut().map(|b| &mut b[r]),
            Buffers::InPlace(b) => Some(&mut b[r]),
        }
    }
}

/// Most members of a group whose short calls go flat: beyond, each
/// member's reading every other's record costs more than two transfers
/// through the leader.
const FLAT_MAX_MEMBERS: usize = 16;

/// Status words of a release.
const RELEASED: u64 = 0;
const MISMATCH: u64 = 1;
const DIED: u64 = 2;

/// One group's collectives on its node (see the module docs).
pub struct NodeColl {
    region: Region,
    me: usize,
    members: Vec<u32>,
    pids: Vec<u32>,
    seq: u64,
    spins: u32,
    acc: Vec<u8>,
    tmp: Vec<u8>,
}

impl NodeColl {
    fn n(&self) -> usize {
        self.members.len()
    }

    fn leader(&self) -> bool {
        self.me == 0
    }

    /// Whether a call of `len` bytes goes flat: every member publishes its
    /// data in its record and reads every other's (one cache line each
    /// way, in parallel), rather than through the leader (two transfers in
    /// a row). Decided from what every member agrees on.
    fn flat(&self, len: usize) -> bool {
        len <= INLINE && self.n() <= FLAT_MAX_MEMBERS
    }

    /// A barrier.
    pub fn barrier(&mut self) -> Result<(), NodeCollError> {
        let call = Call { op: Op::Barrier, len: 0 };
        self.meet(call, None).map(|_| ())
    }

    /// A broadcast of `buf` from group rank `root` (checked by the caller
    /// to be a member).
    pub fn bcast(&mut self, buf: &mut [u8], root: u32) -> Result<(), NodeCollError> {
        let call = Call { op: Op::Bcast { root }, len: buf.len() as u64 };
        let root = root as usize;
        if self.flat(buf.len()) {
            let s = self.meet(call, (self.me == root).then_some(&buf[..]))?;
            if self.me != root {
                self.region.read(self.region.inline_data(root, s), buf);
            }
            return Ok(());
        }
        for r in rounds(buf.len(), 1) {
            if self.leader() {
                let s = self.gather(call)?;
                if root != 0 {
                    self.region.read(self.region.slot(root), &mut buf[r.clone()]);
                }
                self.region.write(self.region.result_slot(), &buf[r]);
                self.release(s);
            } else if self.me == root {
                self.arrive(call, Some(&buf[r]))?;
            } else {
                self.arrive(call, None)?;
                self.region.read(self.region.result_slot(), &mut buf[r]);
            }
        }
        Ok(())
    }

    /// A reduction with `red` to group rank `root`.
    pub fn reduce(&mut self, bufs: Buffers<'_>, red: Reduction, root: u32) -> Result<(), NodeCollError> {
        self.combine(bufs, red, Op::Reduce { root, red }, Some(root as usize))
    }

    /// An allreduce with `red`.
    pub fn allreduce(&mut self, bufs: Buffers<'_>, red: Reduction) -> Result<(), NodeCollError> {
        self.combine(bufs, red, Op::Allreduce { red }, None)
    }

    /// A reduce (`root` given) or an allreduce, folded in group-rank order,
    /// `((r0 op r1) op r2) ...`: flat, by every member that gets the
    /// result, or by the leader, round by round.
    fn combine(&mut self, mut bufs: Buffers<'_>, red: Reduction, op: Op, root: Option<usize>) -> Result<(), NodeCollError> {
        red.check_len(bufs.len())?;
        let len = bufs.len();
        let call = Call { op, len: len as u64 };
        let gets = |i: usize| root.is_none_or(|r| r == i);
        if self.flat(len) {
            let s = self.meet(call, Some(bufs.contribution(0..len)))?;
            if gets(self.me) {
                let mut acc = [0u8; INLINE];
                let mut tmp = [0u8; INLINE];
                self.region.read(self.region.inline_data(0, s), &mut acc[..len]);
                for j in 1..self.n() {
                    self.region.read(self.region.inline_data(j, s), &mut tmp[..len]);
                    red.fold(&mut acc[..len], &tmp[..len], false)?;
                }
                if let Some(out) = bufs.result(0..len) {
                    out.copy_from_slice(&acc[..len]);
                }
            }
            return Ok(());
        }
        let others_get = (1..self.n()).any(gets);
        for r in rounds(len, red.dtype.size()) {
            let c = r.len();
            if self.leader() {
                self.acc[..c].copy_from_slice(bufs.contribution(r.clone()));
                let s = self.gather(call)?;
                let n = self.n();
                let (acc, tmp) = (&mut self.acc[..c], &mut self.tmp[..c]);
                for j in 1..n {
                    self.region.read(self.region.slot(j), tmp);
                    red.fold(acc, tmp, false)?;
                }
                if others_get {
                    self.region.write(self.region.result_slot(), acc);
                }
                if gets(0) {
                    if let Some(out) = bufs.result(r) {
                        out.copy_from_slice(acc);
                    }
                }
                self.release(s);
            } else {
                self.arrive(call, Some(bufs.contribution(r.clone())))?;
                if gets(self.me) {
                    if let Some(out) = bufs.result(r) {
                        self.region.read(self.region.result_slot(), out);
                    }
                }
            }
        }
        Ok(())
    }

    /// Publishes this member's record for a new round: its short data (in
    /// the record, flat) or its slot's, its call, then its arrival.
    fn publish(&mut self, call: Call, data: Option<&[u8]>, inline: bool) -> u64 {
        self.seq += 1;
        let s = self.seq;
        if let Some(d) = data {
            let at = if inline { self.region.inline_data(self.me, s) } else { self.region.slot(self.me) };
            self.region.write(at, d);
        }
        let [a, b] = call.encode();
        self.region.call_word(self.me, s, 0).store(a, Ordering::Relaxed);
        self.region.call_word(self.me, s, 1).store(b, Ordering::Relaxed);
        wait::publish(self.region.arrival(self.me, s), s, self.region.sleepers());
        s
    }

    /// A flat round: this member's record published, then every other's
    /// awaited and checked ([`Self::await_others`]).
    fn meet(&mut self, call: Call, data: Option<&[u8]>) -> Result<u64, NodeCollError> {
        let s = self.publish(call, data, true);
        self.await_others(s, call)
    }

    /// Every other member's record of round `s` awaited and its call
    /// checked against `call`. The leader releases the round with any
    /// error, so that a member waiting for its release fails alike (in a
    /// flat round only one that took a mismatched call for a long one
    /// waits so).
    fn await_others(&mut self, s: u64, call: Call) -> Result<u64, NodeCollError> {
        let mut disagree: Option<(usize, Option<Call>)> = None;
        for j in (0..self.n()).filter(|&j| j != self.me) {
            if wait::wait_for(self.region.arrival(j, s), s, self.pids[j], self.spins, self.region.sleepers()).is_err() {
                if self.leader() {
                    self.region.release_detail(5).store(j as u64, Ordering::Relaxed);
                    self.finish(s, DIED);
                }
                return Err(self.died(j));
            }
            let theirs = self.published(j, s);
            if disagree.is_none() && theirs != Some(call) {
                disagree = Some((j, theirs));
            }
        }
        match disagree {
            None => Ok(s),
            Some((j, theirs)) => {
                if self.leader() {
                    self.release_mismatch(s, call, j, theirs);
                }
                Err(mismatch(call, theirs))
            }
        }
    }

    /// A member's round through the leader: its data to its slot, its
    /// record published, then the leader's release awaited and read.
    fn arrive(&mut self, call: Call, data: Option<&[u8]>) -> Result<u64, NodeCollError> {
        let s = self.publish(call, data, false);
        if wait::wait_for(self.region.release(), s, self.pids[0], self.spins, self.region.sleepers()).is_err() {
            return Err(self.died(0));
        }
        match self.region.release_detail(0).load(Ordering::Acquire) {
            RELEASED => Ok(s),
            DIED => Err(self.died(self.region.release_detail(5).load(Ordering::Acquire) as usize)),
            _ => {
                // The leader's call as it stood in this round (it may be
                // a round ahead by now).
                let d = |k| self.region.release_detail(k).load(Ordering::Acquire);
                let leaders = Call::decode([d(1), d(2)]);
                let theirs = if leaders != Some(call) { leaders } else { Call::decode([d(3), d(4)]) };
                Err(mismatch(call, theirs))
            }
        }
    }

    /// The leader's round: its record published (members that took the
    /// call for a flat one wait for it), every member's awaited and
    /// checked; the round's work and release follow.
    fn gather(&mut self, call: Call) -> Result<u64, NodeCollError> {
        let s = self.publish(call, None, false);
        self.await_others(s, call)
    }

    /// Releases round `s` with the leader's call and member `j`'s, which
    /// differ.
    fn release_mismatch(&mut self, s: u64, ours: Call, j: usize, theirs: Option<Call>) {
        let [a, b] = ours.encode();
        let [x, y] = theirs.map_or([0, 0], Call::encode);
        for (k, w) in [(1, a), (2, b), (3, x), (4, y), (5, j as u64)] {
            self.region.release_detail(k).store(w, Ordering::Relaxed);
        }
        self.finish(s, MISMATCH);
    }

    /// Ends the leader's round `s` without error.
    fn release(&mut self, s: u64) {
        self.finish(s, RELEASED);
    }

    fn finish(&mut self, s: u64, status: u64) {
        self.region.release_detail(0).store(status, Ordering::Relaxed);
        wait::publish(self.region.release(), s, self.region.sleepers());
    }

    /// The call member `i` published for round `s`.
    fn published(&self, i: usize, s: u64) -> Option<Call> {
        Call::decode([self.region.call_word(i, s, 0).load(Ordering::Relaxed), self.region.call_word(i, s, 1).load(Ordering::Relaxed)])
    }

    fn died(&self, i: usize) -> NodeCollError {
        NodeCollError::Died { rank: self.members[i], pid: self.pids[i] }
    }
}

fn mismatch(ours: Call, theirs: Option<Call>) -> NodeCollError {
    NodeCollError::Mismatch { ours: ours.describe(), theirs: theirs.map_or_else(|| "a call this version does not know".into(), Call::describe) }
}

/// The rounds of `len` bytes: slot-sized ranges (whole elements of
/// `elem` bytes), and one empty round for no data, so that every call
/// meets the others.
fn rounds(len: usize, elem: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let step = (SLOT as usize / elem.max(1)) * elem.max(1);
    let n = len.div_ceil(step).max(1);
    (0..n).map(move |k| k * step..((k + 1) * step).min(len))
}

#[cfg(test)]
mod tests;
