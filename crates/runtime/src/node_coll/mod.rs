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
//! round `s` each member writes its data, if any, publishes its call
//! ([`op::Call`]) and stores `s` as its arrival (Release), then reads
//! every other member's record. Every member checks every call against
//! its own: members that called different collectives at the same place
//! all read the same records, so all of them fail the round, with an
//! error that names both calls, instead of hanging.
//!
//! Short calls (data of at most [`region::FLAT_DATA`] bytes, up to
//! [`FLAT_MAX_MEMBERS`] members) go flat: each member's data lies beside
//! its record (in its cache line up to [`region::INLINE`] bytes) and
//! every member that gets a result reads every other's, so a round costs
//! one transfer each way, in parallel.
//!
//! Longer calls go through the slots, one slot of data
//! ([`region::SLOT`]) per round: each member writes its data to its
//! slot. A broadcast's members read the root's slot. A reduction's
//! members each fold their share (an `n`th of the elements) of every
//! slot, in group-rank order, into the result slot and publish that they
//! did; those that get the result read it once every share is in. So the
//! fold of a large reduction is spread over the members, as the copies
//! are, and the result is the same `((r0 op r1) op r2) ...` wherever it
//! is computed. Slots are single: a round through them is published only
//! once every member finished every round before it (its *done* word).
//!
//! Waiting members check every millisecond that the member they wait for
//! still runs ([`wait`]): a killed rank fails its group's collective at
//! every survivor.
//!
//! # Split-phase calls
//!
//! Calls can also start and finish apart (`*_start`, then
//! [`NodeColl::test`] or [`NodeColl::wait`]), as MPI's non-blocking
//! collectives do: the start publishes the member's record, the test
//! reads the others'. A member has a ring of [`region::RECORDS`] records
//! and writes one again only after every member has finished reading the
//! round it held, so a start whose record is still being read (or whose
//! slots are) is queued and published by a later test or wait instead of
//! waiting: a start never waits for another member, because a program
//! may start a collective and only then send the message another member
//! waits for before it starts its own. A call longer than a slot is
//! queued as one round per slot. Rounds finish in order at each member;
//! a blocking call finishes every round started before it, then runs its
//! own rounds without a copy of its data.

mod futex;
pub mod op;
pub mod region;
pub mod span;
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
            outputs: HashMap::new(),
            spare: Vec::new(),
            inputs: HashMap::new(),
            spare_in: Vec::new(),
            dead: None,
            last_check: Instant::now(),
            cut_short: HashMap::new(),
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

/// The largest buffer a group keeps for reuse ([`NodeColl::recycle`]):
/// enough for calls of many slots, without holding a huge call's memory
/// for the group's lifetime.
const SPARE_MAX: usize = 16 << 20;

/// Most members of a group whose short calls go flat: beyond, each
/// member's reading every other's record costs more than a round through
/// the slots.
const FLAT_MAX_MEMBERS: usize = 16;

/// A split-phase collective under way at this member (from a `*_start`
/// call), finished by [`NodeColl::test`] or [`NodeColl::wait`]: the rounds
/// `first..=last` it took (a call longer than a slot takes one per slot).
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    first: u64,
    last: u64,
}

/// How a started round finishes, and what it gives this member.
#[derive(Debug, Clone, Copy)]
enum Finish {
    /// Flat, nothing: a barrier, a broadcast's root, a reduce's non-root.
    Nothing,
    /// Flat, the broadcast root's data (the root's group rank).
    Root(usize),
    /// Flat, every member's data folded in group-rank order.
    Fold(Reduction),
    /// Through the slots: a broadcast from `root`, whose slot the others
    /// read.
    Bcast { root: usize },
    /// Through the slots: a reduction; every member folds its share of
    /// the elements into the result slot, and reads the whole result when
    /// it `gets` one.
    Combine { red: Reduction, gets: bool },
}

impl Finish {
    fn in_slots(self) -> bool {
        matches!(self, Finish::Bcast { .. } | Finish::Combine { .. })
    }
}

/// A round started here and not finished yet.
struct Pending {
    s: u64,
    call: Call,
    /// The bytes this round moves: the call's, or one slot's share of a
    /// call longer than a slot.
    len: usize,
    /// The first and last rounds of the call this round belongs to.
    first: u64,
    last: u64,
    /// Where this round's data lies in the call's.
    at: usize,
    /// This member's data for a flat round, if it has any, while its
    /// record waits to be published.
    data: Option<Vec<u8>>,
    /// Whether this member's data for a round through the slots waits
    /// among the call's kept input ([`NodeColl::inputs`]).
    kept: bool,
    /// Whether its record is out.
    published: bool,
    /// Whether this member folded its share (a reduction through the
    /// slots).
    folded: bool,
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
    /// Rounds started and not finished, in round order.
    pending: VecDeque<Pending>,
    /// Rounds finished before their caller asked, and how.
    finished: HashMap<u64, Result<(), NodeCollError>>,
    /// What split-phase calls give this member, by first round, filled
    /// round by round.
    outputs: HashMap<u64, Vec<u8>>,
    /// A spent output given back ([`Self::recycle`]), whose memory the
    /// next call's output takes instead of fresh pages.
    spare: Vec<u8>,
    /// The data of split-phase calls through the slots whose rounds wait
    /// to be published, by first round: one copy of a call's data,
    /// whatever its number of rounds.
    inputs: HashMap<u64, Vec<u8>>,
    /// The last input given up, whose memory the next one takes (a fresh
    /// megabyte costs more in page faults than its copy).
    spare_in: Vec<u8>,
    /// A member found gone: every round that waits for anyone fails.
    dead: Option<usize>,
    /// When split-phase progress last asked whether a member lives.
    last_check: Instant,
    /// Calls of several rounds that failed before their last, by first
    /// round: the round that failed (the rest were given up, and their
    /// numbers given back).
    cut_short: HashMap<u64, u64>,
}

impl NodeColl {
    fn n(&self) -> usize {
        self.members.len()
    }

    /// Whether a call of `len` bytes goes flat: every member publishes its
    /// data in its record and reads every other's (one cache line each
    /// way, in parallel), rather than through the slots (a copy in, a
    /// fold, a copy out, with a meeting between each). Decided from what
    /// every member agrees on.
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
        self.start_call(Call { op: Op::Barrier, len: 0 }, None, 1, Finish::Nothing)
    }

    /// Starts a broadcast of `data.len()` bytes from group rank `root`
    /// (checked by the caller to be a member), `data` at the root
    /// (ignored elsewhere): the others get it from [`Self::test`] or
    /// [`Self::wait`].
    pub fn bcast_start(&mut self, data: &[u8], root: u32) -> Ticket {
        let len = data.len();
        let call = Call { op: Op::Bcast { root }, len: len as u64 };
        let root = root as usize;
        let mine = (self.me == root).then_some(data);
        let finish = match (self.flat(len), mine.is_some()) {
            (true, true) => Finish::Nothing,
            (true, false) => Finish::Root(root),
            (false, _) => Finish::Bcast { root },
        };
        self.start_call(call, mine, 1, finish)
    }

    /// Starts a reduction with `red` of `contribution` to group rank
    /// `root`; the root gets the result from [`Self::test`] or
    /// [`Self::wait`].
    pub fn reduce_start(&mut self, contribution: &[u8], red: Reduction, root: u32) -> Result<Ticket, NodeCollError> {
        let gets = self.me == root as usize;
        self.combine_start(contribution, red, Op::Reduce { root, red }, gets)
    }

    /// Starts an allreduce with `red` of `contribution`; every member
    /// gets the result from [`Self::test`] or [`Self::wait`].
    pub fn allreduce_start(&mut self, contribution: &[u8], red: Reduction) -> Result<Ticket, NodeCollError> {
        self.combine_start(contribution, red, Op::Allreduce { red }, true)
    }

    fn combine_start(&mut self, contribution: &[u8], red: Reduction, op: Op, gets: bool) -> Result<Ticket, NodeCollError> {
        let len = contribution.len();
        red.check_len(len)?;
        let call = Call { op, len: len as u64 };
        let finish = match (self.flat(len), gets) {
            (true, true) => Finish::Fold(red),
            (true, false) => Finish::Nothing,
            (false, _) => Finish::Combine { red, gets },
        };
        Ok(self.start_call(call, Some(contribution), red.dtype.size(), finish))
    }

    /// Whether the collective of `t` finished, and if so its result: the
    /// broadcast's data at a non-root, the reduction's where this member
    /// gets it, else nothing. Finishes whatever earlier rounds it can
    /// (rounds finish in order), never waits. After `Some`, the ticket is
    /// spent.
    pub fn test(&mut self, t: &Ticket) -> Option<Result<Vec<u8>, NodeCollError>> {
        if !self.over(t) {
            self.progress();
        }
        self.over(t).then(|| self.collect(t))
    }

    /// Whether every round of `t`'s call finished (or the call failed).
    fn over(&self, t: &Ticket) -> bool {
        self.cut_short.contains_key(&t.first) || self.finished.contains_key(&t.last)
    }

    /// Waits for the collective of `t` (see [`Self::test`]).
    pub fn wait(&mut self, t: Ticket) -> Result<Vec<u8>, NodeCollError> {
        self.settle(t.last);
        self.collect(&t)
    }

    /// The result of a call whose rounds all finished: what its rounds
    /// gave, or the first error.
    fn collect(&mut self, t: &Ticket) -> Result<Vec<u8>, NodeCollError> {
        let last = self.cut_short.remove(&t.first).unwrap_or(t.last);
        let mut failed = None;
        for s in t.first..=last {
            if let Some(Err(e)) = self.finished.remove(&s) {
                failed = failed.or(Some(e));
            }
        }
        let out = self.outputs.remove(&t.first).unwrap_or_default();
        match failed {
            Some(e) => {
                self.recycle(out);
                Err(e)
            }
            None => Ok(out),
        }
    }

    /// Gives back a result the caller has copied out, so that a later
    /// call reuses its memory (a large call's output then costs no fresh
    /// pages).
    pub fn recycle(&mut self, spent: Vec<u8>) {
        if spent.capacity() > self.spare.capacity() && spent.capacity() <= SPARE_MAX {
            self.spare = spent;
        }
    }

    /// Room for the output of a call of `len` bytes.
    fn output(&mut self, len: usize) -> Vec<u8> {
        let mut v = if self.spare.capacity() >= len { std::mem::take(&mut self.spare) } else { Vec::with_capacity(len) };
        // Its rounds overwrite every byte: a spare long enough is only
        // cut to length, never cleared.
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0);
        }
        v
    }

    /// A broadcast of `buf` from group rank `root` (checked by the caller
    /// to be a member).
    pub fn bcast(&mut self, buf: &mut [u8], root: u32) -> Result<(), NodeCollError> {
        let len = buf.len();
        if self.flat(len) {
            let t = self.bcast_start(buf, root);
            let data = self.wait(t)?;
            if !data.is_empty() {
                buf.copy_from_slice(&data);
            }
            // Given back, or the next call's output would take the spare
            // and a large split-phase call after it would find none.
            self.recycle(data);
            return Ok(());
        }
        let call = Call { op: Op::Bcast { root }, len: len as u64 };
        let finish = Finish::Bcast { root: root as usize };
        let at_root = self.me == root as usize;
        for r in rounds(len, 1) {
            let s = self.enter_now(call, at_root.then_some(&buf[r.clone()]), r.len(), finish)?;
            self.leave_now(s, finish, &mut buf[r])?;
        }
        Ok(())
    }

    /// A reduction with `red` to group rank `root`.
    pub fn reduce(&mut self, bufs: Buffers<'_>, red: Reduction, root: u32) -> Result<(), NodeCollError> {
        self.combine(bufs, red, Op::Reduce { root, red }, self.me == root as usize)
    }

    /// An allreduce with `red`.
    pub fn allreduce(&mut self, bufs: Buffers<'_>, red: Reduction) -> Result<(), NodeCollError> {
        self.combine(bufs, red, Op::Allreduce { red }, true)
    }

    /// A reduce or an allreduce, folded in group-rank order,
    /// `((r0 op r1) op r2) ...`: flat, by every member that gets the
    /// result, or through the slots, each member folding its share.
    fn combine(&mut self, mut bufs: Buffers<'_>, red: Reduction, op: Op, gets: bool) -> Result<(), NodeCollError> {
        let len = bufs.len();
        if self.flat(len) {
            let t = self.combine_start(bufs.contribution(0..len), red, op, gets)?;
            let result = self.wait(t)?;
            if let Some(out) = bufs.result(0..len).filter(|_| gets) {
                out.copy_from_slice(&result);
            }
            self.recycle(result);
            return Ok(());
        }
        red.check_len(len)?;
        let call = Call { op, len: len as u64 };
        let finish = Finish::Combine { red, gets };
        for r in rounds(len, red.dtype.size()) {
            let s = self.enter_now(call, Some(bufs.contribution(r.clone())), r.len(), finish)?;
            match bufs.result(r).filter(|_| gets) {
                Some(out) => self.leave_now(s, finish, out)?,
                None => self.leave_now(s, finish, &mut [])?,
            }
        }
        Ok(())
    }

    /// A blocking round through the slots, up to what it gives this
    /// member: every round started before it finished, its slots free,
    /// its record out, every member's in and agreeing, and this member's
    /// share folded. [`Self::leave_now`] finishes it.
    fn enter_now(&mut self, call: Call, data: Option<&[u8]>, len: usize, finish: Finish) -> Result<u64, NodeCollError> {
        self.settle(self.seq);
        self.seq += 1;
        let s = self.seq;
        while let Some(j) = self.lagging(s, true) {
            self.wait_word(self.region.done(j), s - 1, j).map_err(|j| self.gone(j))?;
        }
        self.write_record(s, call, data, false);
        while let Some(j) = self.missing(s) {
            self.wait_word(self.region.arrival(j, s), s, j).map_err(|j| self.gone(j))?;
        }
        let entered = self.check_calls(s, call).and_then(|()| match finish {
            Finish::Combine { red, .. } => self.fold_share(s, len, red),
            _ => Ok(()),
        });
        if entered.is_err() {
            self.done(s);
        }
        entered.map(|()| s)
    }

    /// Finishes blocking round `s`: what it gives this member to `out`
    /// (the whole result, once every member folded its share; a
    /// broadcast's data from the root's slot), then this member's done.
    fn leave_now(&mut self, s: u64, finish: Finish, out: &mut [u8]) -> Result<(), NodeCollError> {
        if let Finish::Combine { gets: true, .. } = finish {
            while let Some(j) = self.unfolded(s) {
                self.wait_word(self.region.folded(j), s, j).map_err(|j| self.gone(j))?;
            }
        }
        let read = self.read_result(s, finish, out);
        self.done(s);
        read
    }

    /// Waits until `word` reaches `target` while member `j` lives; `j`
    /// when it is gone.
    fn wait_word(&self, word: &std::sync::atomic::AtomicU64, target: u64, j: usize) -> Result<(), usize> {
        wait::wait_for(word, target, self.pids[j], self.spins, self.region.sleepers()).map_err(|_| j)
    }

    /// Notes member `j` gone: every round that waits for anyone fails.
    fn gone(&mut self, j: usize) -> NodeCollError {
        self.dead = Some(j);
        self.died(j)
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

    /// A member (this one included) that has not finished reading what
    /// round `s` would overwrite: the round its records held before
    /// (`s - RECORDS`), or, for a round through the slots, any round
    /// before it (slots are single). `None` when it may go.
    fn lagging(&self, s: u64, slots: bool) -> Option<usize> {
        let before = Self::free_after(s, slots);
        (before > 0).then(|| (0..self.n()).find(|&j| self.region.done(j).load(Ordering::Acquire) < before))?
    }

    /// The round that must be finished everywhere before round `s` may
    /// be published (see [`Self::lagging`]).
    fn free_after(s: u64, slots: bool) -> u64 {
        if slots {
            s - 1
        } else {
            s.saturating_sub(RECORDS)
        }
    }

    /// A member whose record of round `s` is not in yet.
    fn missing(&self, s: u64) -> Option<usize> {
        (0..self.n()).filter(|&j| j != self.me).find(|&j| self.region.arrival(j, s).load(Ordering::Acquire) < s)
    }

    /// A member that has not folded its share of round `s` yet.
    fn unfolded(&self, s: u64) -> Option<usize> {
        (0..self.n()).filter(|&j| j != self.me).find(|&j| self.region.folded(j).load(Ordering::Acquire) < s)
    }

    /// Notes that this member finished reading round `s` (its records and
    /// slots).
    fn done(&self, s: u64) {
        wait::publish(self.region.done(self.me), s, self.region.sleepers());
    }

    /// Starts the rounds of a call: one when it goes flat, else one per
    /// slot of its data (whole elements of `elem` bytes).
    fn start_call(&mut self, call: Call, data: Option<&[u8]>, elem: usize, finish: Finish) -> Ticket {
        let first = self.seq + 1;
        let len = call.len as usize;
        if !finish.in_slots() {
            self.start(call, data, (0, len), (first, first), finish);
        } else {
            let last = first + rounds(len, elem).count() as u64 - 1;
            for r in rounds(len, elem) {
                self.start(call, data, (r.start, r.len()), (first, last), finish);
            }
        }
        Ticket { first, last: self.seq }
    }

    /// Starts the round of a call (whose data is `data`) that moves its
    /// `len` bytes at `at`: published at once if it may be (see
    /// [`Self::lagging`]), else queued with a copy of its data and
    /// published by a later test or wait. A round through the slots may go
    /// only once every round before it finished at every member.
    fn start(&mut self, call: Call, data: Option<&[u8]>, (at, len): (usize, usize), (first, last): (u64, u64), finish: Finish) {
        self.seq += 1;
        let s = self.seq;
        let slots = finish.in_slots();
        let mine = data.map(|d| &d[at..at + len]);
        // Out at once when it may go (the usual case: nothing before it
        // waits, its record is free); else its data is kept until it can.
        let now = self.pending.back().is_none_or(|p| p.published) && self.lagging(s, slots).is_none();
        if now {
            self.write_record(s, call, mine, !slots);
        }
        let kept = !now && slots && data.is_some();
        if let (true, Some(d)) = (kept, data) {
            self.keep_input(first, d);
        }
        let data = mine.filter(|_| !now && !slots).map(<[u8]>::to_vec);
        self.pending.push_back(Pending { s, call, len, first, last, at, data, kept, published: now, folded: false, finish });
    }

    /// Keeps a copy of the data of the call that began at round `first`,
    /// once, for its rounds that wait.
    fn keep_input(&mut self, first: u64, data: &[u8]) {
        if !self.inputs.contains_key(&first) {
            let mut v = std::mem::take(&mut self.spare_in);
            v.clear();
            v.extend_from_slice(data);
            self.inputs.insert(first, v);
        }
    }

    /// Gives up the kept data of the call that began at round `first`.
    fn release_input(&mut self, first: u64) {
        if let Some(v) = self.inputs.remove(&first) {
            if v.capacity() > self.spare_in.capacity() && v.capacity() <= SPARE_MAX {
                self.spare_in = v;
            }
        }
    }

    /// Publishes queued rounds, in order, while they may go (see
    /// [`Self::start`]).
    fn publish_ready(&mut self) {
        for i in 0..self.pending.len() {
            let p = &self.pending[i];
            if p.published {
                continue;
            }
            let slots = p.finish.in_slots();
            if self.lagging(p.s, slots).is_some() {
                break;
            }
            let data = if p.kept { self.inputs.get(&p.first).map(|d| &d[p.at..p.at + p.len]) } else { p.data.as_deref() };
            self.write_record(p.s, p.call, data, !slots);
            // Once one round of a call waits, every later one does: the
            // last one out gives its call's input up.
            let spent = (p.kept && p.s == p.last).then_some(p.first);
            let p = &mut self.pending[i];
            p.published = true;
            p.data = None;
            if let Some(first) = spent {
                self.release_input(first);
            }
        }
    }

    /// What the oldest round waits for: a member's done (before its
    /// record may be written), a member's arrival, or (a reduction's
    /// result through the slots) a member's folding of its share; `None`
    /// when it can take its next step.
    fn blocker(&self, p: &Pending) -> Option<(&std::sync::atomic::AtomicU64, u64, usize)> {
        if !p.published {
            let slots = p.finish.in_slots();
            return self.lagging(p.s, slots).map(|j| (self.region.done(j), Self::free_after(p.s, slots), j));
        }
        if let Some(j) = self.missing(p.s) {
            return Some((self.region.arrival(j, p.s), p.s, j));
        }
        match p.finish {
            Finish::Combine { gets: true, .. } if p.folded => self.unfolded(p.s).map(|j| (self.region.folded(j), p.s, j)),
            _ => None,
        }
    }

    /// Publishes what it can and takes the oldest rounds, in order, as far
    /// as they can go without waiting; fails the oldest with
    /// [`NodeCollError::Died`] once a member it waits for is found gone
    /// (asked at most every millisecond).
    fn progress(&mut self) {
        self.publish_ready();
        while let Some(p) = self.pending.front() {
            let s = p.s;
            let Some((_, _, j)) = self.blocker(p) else {
                self.step();
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
                    let first = p.first;
                    self.pending.pop_front();
                    if self.pending.front().is_none_or(|q| q.first != first) {
                        self.release_input(first);
                    }
                    self.done(s);
                    self.finished.insert(s, Err(self.died(d)));
                }
                Some(_) => continue,
                None => return,
            }
        }
    }

    /// Takes the oldest round, whose blocker is gone, its next step: puts
    /// its record out; or checks every member's call and folds this
    /// member's share (a reduction through the slots); or finishes it.
    fn step(&mut self) {
        let p = self.pending.front().expect("the caller looked");
        let (s, call, len, finish) = (p.s, p.call, p.len, p.finish);
        if !p.published {
            self.publish_ready();
            return;
        }
        let checked = match finish {
            Finish::Combine { red, gets } if !p.folded => {
                let folded = self.check_calls(s, call).and_then(|()| self.fold_share(s, len, red));
                if folded.is_ok() && gets {
                    self.pending[0].folded = true;
                    return;
                }
                folded
            }
            Finish::Combine { .. } => Ok(()),
            _ => self.check_calls(s, call),
        };
        let p = self.pending.pop_front().expect("looked at above");
        let r = checked.and_then(|()| {
            if len == 0 || !self.gives(finish) {
                return Ok(());
            }
            let mut out = match self.outputs.remove(&p.first) {
                Some(v) => v,
                None => self.output(call.len as usize),
            };
            let read = self.read_result(s, finish, &mut out[p.at..p.at + len]);
            self.outputs.insert(p.first, out);
            read
        });
        self.done(s);
        if r.is_err() && p.last > s {
            self.cut_short(&p);
        }
        self.finished.insert(s, r);
        self.publish_ready();
    }

    /// Gives up the rounds of `p`'s call after it, which failed: none of
    /// them is out (a round through the slots goes only once the one
    /// before it finished everywhere), and every member failed this round
    /// alike (they read the same records), so none waits for them. Their
    /// numbers are given back, so that every member numbers its next call
    /// alike, whatever length each gave this one; where the program
    /// started calls after this one, they keep theirs (the members may
    /// then disagree about every later call: the program was in error).
    fn cut_short(&mut self, p: &Pending) {
        self.pending.retain(|q| q.s > p.last);
        self.release_input(p.first);
        self.cut_short.insert(p.first, p.s);
        if self.seq == p.last {
            self.seq = p.s;
        }
    }

    /// Whether a round that finishes so gives this member data.
    fn gives(&self, finish: Finish) -> bool {
        match finish {
            Finish::Nothing => false,
            Finish::Root(_) | Finish::Fold(_) => true,
            Finish::Bcast { root } => root != self.me,
            Finish::Combine { gets, .. } => gets,
        }
    }

    /// Every other member's call in round `s` (all in) against this
    /// one's: every member reads the same records, so every one fails a
    /// round alike, whatever path each took for its own call.
    fn check_calls(&self, s: u64, call: Call) -> Result<(), NodeCollError> {
        match (0..self.n()).filter(|&j| j != self.me).map(|j| self.published(j, s)).find(|c| *c != Some(call)) {
            Some(theirs) => Err(mismatch(call, theirs)),
            None => Ok(()),
        }
    }

    /// Folds this member's share of round `s`'s `len` bytes (see
    /// [`share`]): those elements of every member's slot, in group-rank
    /// order, into the result slot; then publishes that it did, also when
    /// the fold failed, so that nobody waits for it.
    fn fold_share(&mut self, s: u64, len: usize, red: Reduction) -> Result<(), NodeCollError> {
        let n = self.n();
        let r = share(len, red.dtype.size(), self.me, n);
        let (acc, tmp) = (&mut self.acc[..r.len()], &mut self.tmp[..r.len()]);
        let at = r.start as u64;
        self.region.read(self.region.slot(0) + at, acc);
        let mut folded = Ok(());
        for j in 1..n {
            self.region.read(self.region.slot(j) + at, tmp);
            if let Err(e) = red.fold(acc, tmp, false) {
                folded = Err(e.into());
                break;
            }
        }
        if folded.is_ok() {
            self.region.write(self.region.result_slot() + at, acc);
        }
        wait::publish(self.region.folded(self.me), s, self.region.sleepers());
        folded
    }

    /// Copies what a round that finishes so gives this member to `out`
    /// (empty where it gives nothing), every record in (and, for a
    /// reduction through the slots, every share folded).
    fn read_result(&mut self, s: u64, finish: Finish, out: &mut [u8]) -> Result<(), NodeCollError> {
        if out.is_empty() || !self.gives(finish) {
            return Ok(());
        }
        let len = out.len();
        match finish {
            Finish::Nothing => {}
            Finish::Root(r) => self.region.read(self.region.flat_data(r, s, len), out),
            Finish::Fold(red) => {
                self.region.read(self.region.flat_data(0, s, len), out);
                for j in 1..self.n() {
                    let tmp = &mut self.tmp[..len];
                    self.region.read(self.region.flat_data(j, s, len), tmp);
                    red.fold(out, tmp, false)?;
                }
            }
            Finish::Bcast { root } => self.region.read(self.region.slot(root), out),
            Finish::Combine { .. } => self.region.read(self.region.result_slot(), out),
        }
        Ok(())
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

/// Member `i`'s share of a reduction of `len` bytes among `n` members:
/// an `n`th of the elements (of `elem` bytes), so that the members fold
/// a round's slots in parallel, each reading every slot's share once.
fn share(len: usize, elem: usize, i: usize, n: usize) -> std::ops::Range<usize> {
    let elems = len / elem;
    (i * elems / n) * elem..((i + 1) * elems / n) * elem
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
