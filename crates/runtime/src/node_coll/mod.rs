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
//! Short calls (data of at most [`region::FLAT_DATA`] bytes, up to
//! [`FLAT_MAX_MEMBERS`] members) go flat instead: every member publishes
//! its call and data (in one cache line up to [`region::INLINE`] bytes,
//! else beside it) and reads every other's, so a round costs one
//! transfer each way, in parallel, and every member
//! checks the calls itself. Data longer than a slot ([`region::SLOT`])
//! goes in rounds of a slot each. Waiting members check every
//! millisecond that the member they wait for still runs ([`wait`]): a
//! killed rank fails its group's collective at every survivor.
//!
//! # Split-phase calls
//!
//! Calls can also start and finish apart (`*_start`, then
//! [`NodeColl::test`] or [`NodeColl::wait`]), as MPI's non-blocking
//! collectives do: the start publishes the member's record, the test
//! reads the others'. A member has a ring of [`region::RECORDS`] records
//! and writes one again only after every member has finished reading the
//! round it held (each member's *done* word), so a start whose record is
//! still being read is queued and published by a later test or wait
//! instead of waiting: a start never waits for another member, because a
//! program may start a collective and only then send the message another
//! member waits for before it starts its own. Calls longer than a flat
//! one but within a slot start split-phase too, as one round through the
//! leader; such a round is published only once every round before it
//! finished at this member (slots and the result slot are single).
//! Rounds finish in order at each member; a blocking call finishes every
//! round started before it.

mod futex;
pub mod op;
pub mod region;
pub mod wait;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use outboard_engine::{CollError, Reduction};
use thiserror::Error;

pub use op::{Call, Op};
use region::{Region, RegionName, FLAT_DATA, RECORDS, SLOT};

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
        Ok(Some(NodeColl {
            region,
            me,
            members,
            pids,
            seq: 0,
            spins: self.spins,
            acc: vec![0; SLOT as usize],
            tmp: vec![0; SLOT as usize],
            pending: VecDeque::new(),
            finished: HashMap::new(),
            dead: None,
            last_check: Instant::now(),
        }))
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

/// A split-phase collective under way at this member (from a `*_start`
/// call), finished by [`NodeColl::test`] or [`NodeColl::wait`].
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket(u64);

/// How a started round finishes, and what it gives this member.
#[derive(Debug, Clone, Copy)]
enum Finish {
    /// Flat, nothing: a barrier, a broadcast's root, a reduce's non-root.
    Nothing,
    /// Flat, the broadcast root's data (the root's group rank).
    Root(usize),
    /// Flat, every member's data folded in group-rank order.
    Fold(Reduction),
    /// Through the leader, one slot of data: a broadcast from `root`.
    LeadBcast { root: usize },
    /// Through the leader, one slot of data: a reduction, folded by the
    /// leader; `gets` whether this member gets the result, `others` whether
    /// any member but the leader does.
    LeadFold { red: Reduction, gets: bool, others: bool },
}

impl Finish {
    fn through_leader(self) -> bool {
        matches!(self, Finish::LeadBcast { .. } | Finish::LeadFold { .. })
    }
}

/// A round started here and not finished yet.
struct Pending {
    s: u64,
    call: Call,
    /// This member's data, if it has any: kept while its record waits to
    /// be published, and by the leader until it folds.
    data: Option<Vec<u8>>,
    /// Whether its record is out (it waits while the record it goes to
    /// holds a round some member has not finished reading).
    published: bool,
    finish: Finish,
}

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
    /// Flat rounds started and not finished, in round order.
    pending: VecDeque<Pending>,
    /// Results of rounds finished before their caller asked.
    finished: HashMap<u64, Result<Vec<u8>, NodeCollError>>,
    /// A member found gone: every round that waits for anyone fails.
    dead: Option<usize>,
    /// When split-phase progress last asked whether a member lives.
    last_check: Instant,
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
        len <= FLAT_DATA && self.n() <= FLAT_MAX_MEMBERS
    }

    /// A barrier.
    pub fn barrier(&mut self) -> Result<(), NodeCollError> {
        let t = self.barrier_start();
        self.wait(t).map(|_| ())
    }

    /// Starts a barrier: this member's arrival is out when this returns.
    pub fn barrier_start(&mut self) -> Ticket {
        self.start(Call { op: Op::Barrier, len: 0 }, None, Finish::Nothing)
    }

    /// Starts a broadcast of `len` bytes from group rank `root` (checked
    /// by the caller to be a member), `data` at the root (ignored
    /// elsewhere): the root's data is out when this returns, and the
    /// others get it from [`Self::test`] or [`Self::wait`]. `None` when
    /// the call is longer than a slot (then the caller takes another
    /// path, which every member takes alike).
    pub fn bcast_start(&mut self, data: &[u8], root: u32) -> Option<Ticket> {
        let len = data.len();
        let call = Call { op: Op::Bcast { root }, len: len as u64 };
        let root = root as usize;
        let mine = (self.me == root).then_some(data);
        if self.flat(len) {
            return Some(self.start(call, mine, if mine.is_some() { Finish::Nothing } else { Finish::Root(root) }));
        }
        (len <= SLOT as usize).then(|| self.start(call, mine, Finish::LeadBcast { root }))
    }

    /// Starts a reduction with `red` of `contribution` to group rank
    /// `root`; the root gets the result from [`Self::test`] or
    /// [`Self::wait`]. `Ok(None)` when the call is longer than a slot.
    pub fn reduce_start(&mut self, contribution: &[u8], red: Reduction, root: u32) -> Result<Option<Ticket>, NodeCollError> {
        let gets = self.me == root as usize;
        self.combine_start(contribution, red, Op::Reduce { root, red }, gets)
    }

    /// Starts an allreduce with `red` of `contribution`; every member
    /// gets the result from [`Self::test`] or [`Self::wait`]. `Ok(None)`
    /// when the call is longer than a slot.
    pub fn allreduce_start(&mut self, contribution: &[u8], red: Reduction) -> Result<Option<Ticket>, NodeCollError> {
        self.combine_start(contribution, red, Op::Allreduce { red }, true)
    }

    fn combine_start(&mut self, contribution: &[u8], red: Reduction, op: Op, gets: bool) -> Result<Option<Ticket>, NodeCollError> {
        let len = contribution.len();
        red.check_len(len)?;
        let call = Call { op, len: len as u64 };
        if self.flat(len) {
            return Ok(Some(self.start(call, Some(contribution), if gets { Finish::Fold(red) } else { Finish::Nothing })));
        }
        // Whether a member other than the leader gets the result.
        let others = match op {
            Op::Reduce { root, .. } => root != 0,
            _ => true,
        };
        Ok((len <= SLOT as usize).then(|| self.start(call, Some(contribution), Finish::LeadFold { red, gets, others })))
    }

    /// Whether the collective of `t` finished, and if so its result: the
    /// broadcast's data at a non-root, the reduction's where this member
    /// gets it, else nothing. Finishes whatever earlier rounds it can
    /// (rounds finish in order), never waits. After `Some`, the ticket is
    /// spent.
    pub fn test(&mut self, t: &Ticket) -> Option<Result<Vec<u8>, NodeCollError>> {
        if let Some(r) = self.finished.remove(&t.0) {
            return Some(r);
        }
        self.progress();
        self.finished.remove(&t.0)
    }

    /// Waits for the collective of `t` (see [`Self::test`]).
    pub fn wait(&mut self, t: Ticket) -> Result<Vec<u8>, NodeCollError> {
        self.settle(t.0);
        // A ticket is only made by a start and spent by one test or wait.
        self.finished.remove(&t.0).unwrap_or_else(|| Ok(Vec::new()))
    }

    /// A broadcast of `buf` from group rank `root` (checked by the caller
    /// to be a member).
    pub fn bcast(&mut self, buf: &mut [u8], root: u32) -> Result<(), NodeCollError> {
        let call = Call { op: Op::Bcast { root }, len: buf.len() as u64 };
        if let Some(t) = self.bcast_start(buf, root) {
            let data = self.wait(t)?;
            if !data.is_empty() {
                buf.copy_from_slice(&data);
            }
            return Ok(());
        }
        let root = root as usize;
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
        let len = bufs.len();
        let call = Call { op, len: len as u64 };
        let gets = |i: usize| root.is_none_or(|r| r == i);
        if let Some(t) = self.combine_start(bufs.contribution(0..len), red, op, gets(self.me))? {
            let result = self.wait(t)?;
            if let Some(out) = bufs.result(0..len).filter(|_| gets(self.me)) {
                out.copy_from_slice(&result);
            }
            return Ok(());
        }
        let others_get = (1..self.n()).any(gets);
        for r in rounds(len, red.dtype.size()) {
            let c = r.len();
            if self.leader() {
                self.acc[..c].copy_from_slice(bufs.contribution(r.clone()));
                let s = self.gather(call)?;
                let acc = &mut self.acc[..c];
                fold_slots(&self.region, self.members.len(), acc, &mut self.tmp[..c], red)?;
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

    /// Writes this member's record of round `s`: its data (in the record
    /// or its flat data area when `flat`, else in its slot), its call,
    /// then its arrival.
    fn write_record(&self, s: u64, call: Call, data: Option<&[u8]>, flat: bool) {
        if let Some(d) = data {
            let at = if flat { self.region.flat_data(self.me, s, d.len()) } else { self.region.slot(self.me) };
            self.region.write(at, d);
        }
        let [a, b] = call.encode();
        self.region.call_word(self.me, s, 0).store(a, Ordering::Relaxed);
        self.region.call_word(self.me, s, 1).store(b, Ordering::Relaxed);
        wait::publish(self.region.arrival(self.me, s), s, self.region.sleepers());
    }

    /// A member that has not finished reading the round whose record
    /// round `s` reuses; `None` when the record is free.
    fn lagging(&self, s: u64) -> Option<usize> {
        let before = s.checked_sub(RECORDS).filter(|&b| b > 0)?;
        (0..self.n()).find(|&j| self.region.done(j).load(Ordering::Acquire) < before)
    }

    /// A member whose record of round `s` is not in yet.
    fn missing(&self, s: u64) -> Option<usize> {
        (0..self.n()).filter(|&j| j != self.me).find(|&j| self.region.arrival(j, s).load(Ordering::Acquire) < s)
    }

    /// Notes that this member finished reading the records of round `s`.
    fn done(&self, s: u64) {
        wait::publish(self.region.done(self.me), s, self.region.sleepers());
    }

    /// Starts a round: queued, and published at once if it may be (else
    /// by a later test or wait: a start never waits). A flat round may
    /// when its record is free; one through the leader only once every
    /// round before it finished here, because its slot and the result
    /// slot are single.
    fn start(&mut self, call: Call, data: Option<&[u8]>, finish: Finish) -> Ticket {
        self.seq += 1;
        let s = self.seq;
        let lead = finish.through_leader();
        // Out at once when it may go (the usual case: nothing before it
        // waits, its record is free); else its data is kept until it can.
        let may = if lead { self.pending.is_empty() } else { self.pending.back().is_none_or(|p| p.published) };
        let now = may && self.lagging(s).is_none();
        if now {
            self.write_record(s, call, if lead && self.leader() { None } else { data }, !lead);
        }
        // The leader folds its own data into the round's result later.
        let keep = !now || (lead && self.leader());
        let data = data.filter(|_| keep).map(<[u8]>::to_vec);
        self.pending.push_back(Pending { s, call, data, published: now, finish });
        Ticket(s)
    }

    /// Publishes queued rounds, in order, while they may go (see
    /// [`Self::start`]).
    fn publish_ready(&mut self) {
        for i in 0..self.pending.len() {
            let p = &self.pending[i];
            if p.published {
                continue;
            }
            let lead = p.finish.through_leader();
            if self.lagging(p.s).is_some() || (lead && i > 0) {
                break;
            }
            // Through the leader a member's data goes to its slot; the
            // leader keeps its own until it folds.
            let data = if lead && self.leader() { None } else { p.data.as_deref() };
            self.write_record(p.s, p.call, data, !lead);
            let keep = lead && self.leader();
            let p = &mut self.pending[i];
            p.published = true;
            if !keep {
                p.data = None;
            }
        }
    }

    /// What the oldest round waits for: a member's done (before its
    /// record may be written), a member's arrival, or (a member's round
    /// through the leader) the leader's release; `None` when it can
    /// finish now. A round not out yet never finishes: when the member
    /// it waited for has read on meanwhile, it waits for nothing (this
    /// member's own done, reached) until the next publish puts it out.
    fn blocker(&self, p: &Pending) -> Option<(&std::sync::atomic::AtomicU64, u64, usize)> {
        if !p.published {
            return Some(self.lagging(p.s).map_or((self.region.done(self.me), 0, self.me), |j| (self.region.done(j), p.s - RECORDS, j)));
        }
        if p.finish.through_leader() && !self.leader() {
            let release = self.region.release();
            return (release.load(Ordering::Acquire) < p.s).then_some((release, p.s, 0));
        }
        self.missing(p.s).map(|j| (self.region.arrival(j, p.s), p.s, j))
    }

    /// Publishes what it can and finishes, in order, the flat rounds whose
    /// records are all in; fails the oldest with [`NodeCollError::Died`]
    /// once a member it waits for is found gone (asked at most every
    /// millisecond).
    fn progress(&mut self) {
        self.publish_ready();
        while let Some(p) = self.pending.front() {
            if !p.published && self.lagging(p.s).is_none() {
                // Its record came free since the last look (done words
                // only grow, so the publish cannot fail to put it out).
                self.publish_ready();
                continue;
            }
            let s = p.s;
            let Some((_, _, j)) = self.blocker(p) else {
                let p = self.pending.pop_front().expect("looked at above");
                let r = match p.finish {
                    f if !f.through_leader() => self.finish_flat(&p),
                    _ if self.leader() => self.lead_round(p),
                    _ => self.member_round(&p),
                };
                self.finished.insert(s, r);
                self.publish_ready();
                continue;
            };
            if self.dead.is_none() && self.last_check.elapsed() >= wait::CHECK_EVERY {
                self.last_check = Instant::now();
                if !wait::alive(self.pids[j]) {
                    self.dead = Some(j);
                }
            }
            match self.dead {
                // It may have published and then exited.
                Some(d) if self.blocker(p).is_some() => {
                    self.pending.pop_front();
                    if self.leader() {
                        self.region.release_detail(5).store(d as u64, Ordering::Relaxed);
                        self.finish(s, DIED);
                    }
                    self.finished.insert(s, Err(self.died(d)));
                }
                Some(_) => continue,
                None => return,
            }
        }
    }

    /// One idle step for a caller that waits on several things, this
    /// group's split-phase collectives among them (an MPI library's wait
    /// loop): finishes what it can, then waits at most `max` for what the
    /// oldest round waits for, sleeping (not spinning) once its spins and
    /// yields are spent. A member found gone is noted for the next test.
    pub fn idle(&mut self, max: std::time::Duration) {
        self.progress();
        let Some(p) = self.pending.front() else { return };
        if let Some((word, target, j)) = self.blocker(p) {
            if wait::wait_until(word, target, self.pids[j], self.spins, self.region.sleepers(), Some(Instant::now() + max)).is_err() {
                self.dead = Some(j);
            }
        }
    }

    /// Until round `s` (and every round before it) finished: progress,
    /// and between tries wait for what the oldest round waits for.
    fn settle(&mut self, s: u64) {
        loop {
            self.progress();
            let Some(p) = self.pending.front().filter(|p| p.s <= s) else { return };
            if let Some((word, target, j)) = self.blocker(p) {
                if wait::wait_for(word, target, self.pids[j], self.spins, self.region.sleepers()).is_err() {
                    self.dead = Some(j);
                }
            }
        }
    }

    /// Finishes flat round `p`, whose records are all in: checks every
    /// member's call against this one's (the leader releases the round
    /// with the disagreement, for a member that took the call for a long
    /// one), then reads what this member gets.
    fn finish_flat(&mut self, p: &Pending) -> Result<Vec<u8>, NodeCollError> {
        let (s, call) = (p.s, p.call);
        let disagree = (0..self.n()).filter(|&j| j != self.me).map(|j| (j, self.published(j, s))).find(|(_, c)| *c != Some(call));
        let r = match disagree {
            Some((j, theirs)) => {
                if self.leader() {
                    self.release_mismatch(s, call, j, theirs);
                }
                Err(mismatch(call, theirs))
            }
            None => self.flat_result(p),
        };
        self.done(s);
        r
    }

    fn flat_result(&mut self, p: &Pending) -> Result<Vec<u8>, NodeCollError> {
        let len = p.call.len as usize;
        let s = p.s;
        match p.finish {
            Finish::Nothing | Finish::LeadBcast { .. } | Finish::LeadFold { .. } => Ok(Vec::new()),
            Finish::Root(r) => {
                let mut v = vec![0; len];
                self.region.read(self.region.flat_data(r, s, len), &mut v);
                Ok(v)
            }
            Finish::Fold(red) => {
                let mut acc = vec![0; len];
                self.region.read(self.region.flat_data(0, s, len), &mut acc);
                for j in 1..self.n() {
                    let tmp = &mut self.tmp[..len];
                    self.region.read(self.region.flat_data(j, s, len), tmp);
                    red.fold(&mut acc, tmp, false)?;
                }
                Ok(acc)
            }
        }
    }

    /// The leader's split-phase round through the leader, every record
    /// in: checks the calls, does the round's work into the result slot
    /// and releases it.
    fn lead_round(&mut self, p: Pending) -> Result<Vec<u8>, NodeCollError> {
        let (s, call, len) = (p.s, p.call, p.call.len as usize);
        let disagree = (1..self.n()).map(|j| (j, self.published(j, s))).find(|(_, c)| *c != Some(call));
        if let Some((j, theirs)) = disagree {
            self.release_mismatch(s, call, j, theirs);
            return Err(mismatch(call, theirs));
        }
        let own = p.data.unwrap_or_default();
        let r = match p.finish {
            Finish::LeadBcast { root: 0 } => {
                self.region.write(self.region.result_slot(), &own);
                Ok(Vec::new())
            }
            Finish::LeadBcast { root } => {
                let mut v = vec![0; len];
                self.region.read(self.region.slot(root), &mut v);
                self.region.write(self.region.result_slot(), &v);
                Ok(v)
            }
            Finish::LeadFold { red, gets, others } => {
                let mut acc = own;
                let folded = fold_slots(&self.region, self.members.len(), &mut acc, &mut self.tmp[..len], red);
                if others {
                    self.region.write(self.region.result_slot(), &acc);
                }
                folded.map(|()| if gets { acc } else { Vec::new() })
            }
            _ => unreachable!("a flat round is finished by finish_flat"),
        };
        self.release(s);
        r
    }

    /// A member's split-phase round through the leader, released: what
    /// the release says, and the result where this member gets one.
    fn member_round(&mut self, p: &Pending) -> Result<Vec<u8>, NodeCollError> {
        let r = self.released(p.call).map(|()| {
            let gets = match p.finish {
                Finish::LeadBcast { root } => root != self.me,
                Finish::LeadFold { gets, .. } => gets,
                _ => false,
            };
            let mut v = vec![0; if gets { p.call.len as usize } else { 0 }];
            self.region.read(self.region.result_slot(), &mut v);
            v
        });
        self.done(p.s);
        r
    }

    /// Starts a round through the leader (a blocking call): finishes every
    /// flat round started before, waits until its record is free, then
    /// publishes its record (data in its slot).
    fn publish(&mut self, call: Call, data: Option<&[u8]>) -> Result<u64, NodeCollError> {
        self.settle(self.seq);
        self.seq += 1;
        let s = self.seq;
        while let Some(j) = self.lagging(s) {
            if wait::wait_for(self.region.done(j), s - RECORDS, self.pids[j], self.spins, self.region.sleepers()).is_err() {
                return Err(self.died(j));
            }
        }
        self.write_record(s, call, data, false);
        Ok(s)
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
        let s = self.publish(call, data)?;
        if wait::wait_for(self.region.release(), s, self.pids[0], self.spins, self.region.sleepers()).is_err() {
            return Err(self.died(0));
        }
        self.done(s);
        self.released(call).map(|()| s)
    }

    /// What the leader's release of the round this member waited for
    /// says: released, or the member that died, or the disagreeing calls.
    fn released(&self, call: Call) -> Result<(), NodeCollError> {
        match self.region.release_detail(0).load(Ordering::Acquire) {
            RELEASED => Ok(()),
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
        let s = self.publish(call, None)?;
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

    /// Releases round `s` with `status`; the leader has finished reading
    /// its records.
    fn finish(&mut self, s: u64, status: u64) {
        self.region.release_detail(0).store(status, Ordering::Relaxed);
        wait::publish(self.region.release(), s, self.region.sleepers());
        self.done(s);
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

/// Folds the slots of members `1..n` into `acc` (`tmp` as long), in
/// group-rank order: the leader's work in a round through it.
fn fold_slots(region: &Region, n: usize, acc: &mut [u8], tmp: &mut [u8], red: Reduction) -> Result<(), NodeCollError> {
    for j in 1..n {
        region.read(region.slot(j), tmp);
        red.fold(acc, tmp, false)?;
    }
    Ok(())
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
