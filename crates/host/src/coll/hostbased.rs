//! Host-based execution of a schedule over tagged point-to-point messages.
//!
//! The same [`Schedule`] the engine would run, as a non-blocking state
//! machine: [`HostRun::advance`] posts what it can and folds what arrived,
//! and is called only from [`crate::Port::progress`] (so from every
//! `test`/`wait`) - a host-based collective advances only while the
//! application is inside the library.
//!
//! # Tags
//!
//! Bit 63 is reserved for collectives (applications must not use it); bits
//! 40..63 hold the group id (unique per port and agreed by the members),
//! bits 16..40 the group's host-based epoch (mod 2^24), bits 0..16 the
//! round (the ordinal of this message among those between the same two
//! members in the schedule). Receives name their source port. So traffic of
//! different groups, epochs and rounds never matches another's receive; an
//! epoch is reused only after 2^24 further host-based collectives on the
//! same group.

use std::sync::Arc;

use smallvec::SmallVec;
use outboard_engine::coll::Rounds;
use outboard_engine::{
    CollError, Completion, Fold, GroupId, HostBuf, MemberList, RecvMatch, Reduction, Schedule,
    ScheduleId,
};

use crate::{CommandError, HostError, OpError, Port, PortIo, Request};

/// The tag bit reserved for collective traffic.
pub const COLL_TAG_BIT: u64 = 1 << 63;
const EPOCH_BITS: u32 = 19;
/// Where a tag carries its schedule's check (see [`schedule_check`]).
const CHECK_SHIFT: u32 = 16 + EPOCH_BITS;
const CHECK_MASK: u64 = 0xF << CHECK_SHIFT;
/// The epoch-field bit of NIC-assisted broadcasts.
const NIC_EPOCH_BIT: u64 = 1 << 39;
/// Rounds per epoch: the round field's 16 bits.
pub(crate) const MAX_ROUNDS: u32 = 1 << 16;

/// The tag of one message of a host-based collective.
pub(crate) fn tag(group: GroupId, epoch: u32, round: u16) -> u64 {
    debug_assert!(group.0 < 1 << 23, "group ids fit 23 bits");
    COLL_TAG_BIT
        | (group.0 << 40)
        | (u64::from(epoch & ((1 << EPOCH_BITS) - 1)) << 16)
        | u64::from(round)
}

/// Four bits of a schedule's number, carried in every message of a
/// host-based collective and checked on arrival: members that called
/// different collectives at the same place of the group's order meet as
/// a mismatch instead of folding each other's data. (A receive matches
/// whatever the check, so that the two meet; 1 in 16 pairs of schedules
/// share a check and are not told apart.)
fn schedule_check(id: ScheduleId) -> u64 {
    (u64::from(id.0).wrapping_mul(0x9E37_79B9) >> 16) % CHECK_FAILED
}

/// The check of a message sent by a member whose collective failed (a
/// mismatch, or a failed message before): its receivers fail too and pass
/// the failure on, as the engine's packets flagged failed do.
const CHECK_FAILED: u64 = 0xF;

/// The tag of chunk `round` of a NIC-assisted broadcast.
pub(crate) fn nic_tag(group: GroupId, epoch: u32, round: u16) -> u64 {
    tag(group, epoch, round) | NIC_EPOCH_BIT
}

/// A posted receive of the current step.
#[derive(Debug)]
struct RecvSlot {
    req: Request,
    buf: HostBuf,
    data: Option<Vec<u8>>,
}

/// One host-based collective at one member.
#[derive(Debug)]
pub(crate) struct HostRun {
    group: GroupId,
    epoch: u32,
    rank: u32,
    members: MemberList,
    schedule: Arc<Schedule>,
    /// Its number, for [`schedule_check`].
    schedule_id: ScheduleId,
    /// Rounds per send and receive, numbered per peer by
    /// [`outboard_engine::coll::rounds`] (the numbering the engine's
    /// packets carry), shared by every run of the schedule.
    rounds: Arc<(Rounds, Rounds)>,
    reduction: Option<Reduction>,
    /// The current value; empty until the first replacing receive where
    /// the schedule never reads the member's input (see [`reads_input`]).
    value: Vec<u8>,
    /// The length of every value of the collective (the input's).
    len: usize,
    step: usize,
    sends_posted: usize,
    /// Inline for the usual step of one or two messages each way: a
    /// heap list would be one more cache line to fetch on every progress
    /// call (at 1,024 simulated nodes, each a miss).
    recvs: SmallVec<[RecvSlot; 2]>,
    sends: SmallVec<[(Request, HostBuf); 2]>,
}

/// Whether `schedule` reads the member's own input: it sends or combines
/// before its first replacing receive, or never replaces the value (the
/// input is then the result). A broadcast's non-root members do not, so
/// they need not hold a copy of a buffer whose contents are ignored while
/// they wait for their parent (at 65,536 simulated nodes those copies
/// were most of the memory of a 64 KiB broadcast).
fn reads_input(schedule: &Schedule) -> bool {
    for st in &schedule.steps {
        let receives = !st.recv_from.is_empty();
        if !st.send_to.is_empty() || (receives && st.fold() == Fold::Combine) {
            return true;
        }
        if receives && st.fold() == Fold::Replace {
            return false;
        }
    }
    true
}

/// Whether a refusal only means "try again later".
fn busy(e: &HostError) -> bool {
    matches!(
        e,
        HostError::Command(CommandError::NoSendToken | CommandError::NoRecvToken)
    )
}

impl HostRun {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        group: GroupId,
        epoch: u32,
        rank: u32,
        members: MemberList,
        (schedule, schedule_id): (Arc<Schedule>, ScheduleId),
        rounds: Arc<(Rounds, Rounds)>,
        reduction: Option<Reduction>,
        input: &[u8],
    ) -> HostRun {
        let value = if reads_input(&schedule) { input.to_vec() } else { Vec::new() };
        HostRun {
            group,
            epoch,
            rank,
            members,
            schedule,
            schedule_id,
            rounds,
            reduction,
            value,
            len: input.len(),
            step: 0,
            sends_posted: 0,
            recvs: SmallVec::new(),
            sends: SmallVec::new(),
        }
    }

    /// A buffer of `len` bytes (also for empty messages: the engine needs a
    /// live address even for zero bytes): holding `data` to send, or to
    /// receive into - unzeroed, since a message of any other length than
    /// `len` fails the collective before its bytes are used.
    fn buf_for<P: PortIo>(
        port: &mut Port<P>,
        data: Option<&[u8]>,
        len: usize,
    ) -> Result<HostBuf, HostError> {
        match data {
            Some(d) => port.buffer_from(d),
            None => port.buffer_unzeroed(len as u32),
        }
    }

    fn free<P: PortIo>(port: &mut Port<P>, buf: HostBuf) -> Result<(), HostError> {
        port.free(buf)
    }

    /// Does whatever can be done now. `Some` once finished: the final value
    /// or the first error.
    pub fn advance<P: PortIo>(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        match self.advance_inner(port) {
            Ok(true) => Some(Ok(std::mem::take(&mut self.value))),
            Ok(false) => None,
            Err(e) => {
                self.abandon(port);
                Some(Err(e))
            }
        }
    }

    /// Sends still unconfirmed when the collective finished: the port frees
    /// their buffers as they complete (a late failure is counted, not
    /// reported: the collective's result is already out).
    pub fn take_trailing(&mut self) -> Vec<(Request, HostBuf)> {
        std::mem::take(&mut self.sends).into_vec()
    }

    /// The tag bits this collective's messages carry.
    fn check_tag(&self) -> u64 {
        schedule_check(self.schedule_id) << CHECK_SHIFT
    }

    /// Whether a message with `tag` from group rank `src` belongs to this
    /// collective: sent under another schedule (a mismatch), or by a
    /// member whose collective failed, it does not.
    fn check(&self, tag: u64, src: u32) -> Result<(), HostError> {
        match (tag & CHECK_MASK) >> CHECK_SHIFT {
            CHECK_FAILED => Err(super::CollectiveError::from(CollError::FailedUpstream { rank: src }).into()),
            c if c != schedule_check(self.schedule_id) => {
                Err(super::CollectiveError::Mismatch { ours: self.schedule_id.0 }.into())
            }
            _ => Ok(()),
        }
    }

    /// After a mismatch or a failed message: every send this member has
    /// not made yet goes now, checked as failed and without waiting for
    /// its receives (what they wait for may never come), so that the
    /// members waiting for them fail instead of waiting for good.
    fn fail_onward<P: PortIo>(&mut self, port: &mut Port<P>) {
        let schedule = Arc::clone(&self.schedule);
        for (s, st) in schedule.steps.iter().enumerate().skip(self.step) {
            let first = if s == self.step { self.sends_posted } else { 0 };
            for (i, &to) in st.send_to.iter().enumerate().skip(first) {
                let round = self.rounds.0[s][i];
                let Ok(buf) = port.buffer(self.len as u32) else { return };
                let tag = tag(self.group, self.epoch, round) | CHECK_FAILED << CHECK_SHIFT;
                match port.start_send(self.members.get(to).expect("schedules name members"), tag, buf) {
                    Ok(req) => self.sends.push((req, buf)),
                    Err(_) => {
                        let _ = Self::free(port, buf);
                    }
                }
            }
        }
        self.step = schedule.steps.len();
    }

    /// After a failure: receives still posted are cancelled and forgotten;
    /// their buffers are leaked rather than freed, since the engine may
    /// still write them until the cancel takes effect.
    fn abandon<P: PortIo>(&mut self, port: &mut Port<P>) {
        for r in self.recvs.drain(..) {
            if r.data.is_none() {
                port.forget(r.req);
                let target = r.req.op();
                if let Ok(c) = port.start(|op| outboard_engine::Command::Cancel { op, target }) {
                    port.forget(c);
                }
            }
        }
        for (req, _) in self.sends.drain(..) {
            port.forget(req);
        }
    }

    fn advance_inner<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, HostError> {
        // Sends of earlier steps: free their buffers as they complete.
        let mut i = 0;
        while i < self.sends.len() {
            match port.take(self.sends[i].0) {
                Some(r) => {
                    let (_, buf) = self.sends.swap_remove(i);
                    Self::free(port, buf)?;
                    r?;
                }
                None => i += 1,
            }
        }
        loop {
            // Done when its own steps are: sends still unconfirmed are
            // handed to the port (`take_trailing`), as the engine keeps an
            // offloaded collective's last packets, so both forms complete
            // at the same point of the protocol.
            // The step through a second handle on the shared schedule (a
            // reference count, not a copy of the step's lists per call).
            let schedule = Arc::clone(&self.schedule);
            let Some(st) = schedule.steps.get(self.step) else {
                // ... but not while a rendezvous send still needs this
                // library to announce it: a member that returned to its
                // application (which may then block elsewhere, in another
                // MPI's call) would leave its receivers waiting for data
                // that never leaves.
                let announced = self.sends.iter().all(|(r, _)| !port.rndv_send_needs_host(*r));
                return Ok(announced);
            };
            while self.sends_posted < st.send_to.len() {
                let to = st.send_to[self.sends_posted];
                let round = self.rounds.0[self.step][self.sends_posted];
                debug_assert_eq!(self.value.len(), self.len, "a schedule that sends reads its value");
                let buf = Self::buf_for(port, Some(&self.value), self.len)?;
                match port.start_send(
                    self.members.get(to).expect("schedules name members"),
                    tag(self.group, self.epoch, round) | self.check_tag(),
                    buf,
                ) {
                    Ok(req) => self.sends.push((req, buf)),
                    Err(e) => {
                        Self::free(port, buf)?;
                        return if busy(&e) { Ok(false) } else { Err(e) };
                    }
                }
                self.sends_posted += 1;
            }
            while self.recvs.len() < st.recv_from.len() {
                let from = self.members.get(st.recv_from[self.recvs.len()]).expect("schedules name members");
                let round = self.rounds.1[self.step][self.recvs.len()];
                let m = RecvMatch {
                    tag_mask: !CHECK_MASK,
                    ..RecvMatch::from(from.node, from.port, tag(self.group, self.epoch, round))
                };
                let buf = Self::buf_for(port, None, self.len)?;
                match port.start_recv(m, buf) {
                    Ok(req) => self.recvs.push(RecvSlot {
                        req,
                        buf,
                        data: None,
                    }),
                    Err(e) => {
                        Self::free(port, buf)?;
                        return if busy(&e) { Ok(false) } else { Err(e) };
                    }
                }
            }
            let mut all = true;
            for k in 0..self.recvs.len() {
                if self.recvs[k].data.is_some() {
                    continue;
                }
                match port.take(self.recvs[k].req) {
                    None => all = false,
                    Some(r) => {
                        let buf = self.recvs[k].buf;
                        // The check first: a message of another collective
                        // may also be longer than this one's buffers.
                        let tag = match &r {
                            Ok(Completion::Received { tag, .. }) => *tag,
                            Err(HostError::Op(OpError::Truncated { tag, .. })) => *tag,
                            _ => self.check_tag(),
                        };
                        if let Err(e) = self.check(tag, st.recv_from[k]) {
                            Self::free(port, buf)?;
                            self.fail_onward(port);
                            return Err(e);
                        }
                        let got = match r? {
                            Completion::Received { len, .. } => len,
                            other => unreachable!("receive completed as {other:?}"),
                        };
                        let data = if buf.len > 0 {
                            port.read_buffer(buf)?
                        } else {
                            Vec::new()
                        };
                        Self::free(port, buf)?;
                        if got as usize != self.len {
                            return Err(super::CollectiveError::from(CollError::LengthMismatch {
                                expected: self.len as u32,
                                got,
                            })
                            .into());
                        }
                        self.recvs[k].data = Some(data);
                    }
                }
            }
            if !all {
                return Ok(false);
            }
            // Drained from a list taken out and put back, so that its
            // allocation serves every step.
            let mut recvs = std::mem::take(&mut self.recvs);
            for (k, slot) in recvs.drain(..).enumerate() {
                let data = slot.data.expect("all arrived");
                match st.fold() {
                    Fold::Ignore => {}
                    Fold::Replace => self.value = data,
                    Fold::Combine => {
                        let red = self
                            .reduction
                            .ok_or(CollError::BadReduction)
                            .map_err(super::CollectiveError::from)?;
                        red.fold(&mut self.value, &data, st.recv_from[k] < self.rank)
                            .map_err(super::CollectiveError::from)?;
                    }
                }
            }
            self.recvs = recvs;
            self.step += 1;
            self.sends_posted = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use outboard_engine::Step;

    use super::super::schedules as s;
    use super::super::Tree;
    use super::*;

    /// Only a member whose value first arrives by replacement skips its
    /// input: broadcast non-roots; the root, reductions, and a
    /// one-member group (whose input is its result) keep it.
    #[test]
    fn only_replaced_inputs_go_unread() {
        let tree = Tree::binomial(8, 0).unwrap();
        assert!(reads_input(&s::bcast(&tree, 0)), "the root sends its input");
        for r in 1..8 {
            assert!(!reads_input(&s::bcast(&tree, r)), "rank {r} receives before it sends");
        }
        for r in 0..8 {
            assert!(reads_input(&s::reduce(&tree, r)));
            assert!(reads_input(&s::allreduce_tree(&tree, r)));
            assert!(reads_input(&s::allreduce_recursive_doubling(r, 8)));
        }
        assert!(reads_input(&s::bcast(&Tree::binomial(1, 0).unwrap(), 0)), "no steps: the input is the result");
        let send_then_replace = Schedule::new(vec![Step::exchange([1], [1], Fold::Replace)]);
        assert!(reads_input(&send_then_replace), "a step sends before it folds");
    }
}
