//! One collective under way at one member ([`Running`]), as a state
//! machine of its own: it takes arriving packets, folds them and says
//! which packets its steps send ([`PendingSends`]); it reads no host
//! memory and queues nothing. The engine files packets into it and turns
//! what it returns into outgoing packets ([`super::step`]).

use std::sync::Arc;

use super::super::{CollError, Fold, ReduceOp, Reduction};
use super::install::Compiled;
use crate::nicvm::Combiner;
use super::out::{Lazy, OutData, OUT_OVERHEAD};
use super::Arrival;
use crate::{Endpoint, HostBuf, NodeId, OpError, OpId, PortId, Work};

/// One collective under way at one member.
///
/// The packets it sends are not waited for: their value lives in engine
/// memory and the connection delivers it reliably, so the host gets its
/// result as soon as its own steps are done (a leaf of a reduction returns
/// at once, as an eager send does). A packet that fails after the
/// collective completed is counted in `Stats::coll_abandoned`.
#[derive(Debug)]
pub(crate) struct Running {
    pub epoch: u32,
    /// The host's command; `None` while the engine runs it on its own
    /// (see [`Compiled::forwards_alone`]).
    pub op: Option<OpId>,
    pub sched: Arc<Compiled>,
    pub reduction: Option<Reduction>,
    pub value: Vec<u8>,
    pub recv: HostBuf,
    pub step: usize,
    pub sent: bool,
    pub next_recv: usize,
    pub arrived: Vec<Arrival>,
    pub outcome: Option<Result<(), OpError>>,
    /// Pool bytes it holds while no host command owns it.
    pub held: usize,
    /// Whether it is the last piece of its host command (a command longer
    /// than one packet runs as consecutive collectives, one per piece, and
    /// completes once, with its last piece).
    pub last: bool,
    /// Its value, when it is sent unchanged from host memory and read per
    /// packet (the pieces of a multi-piece command's root).
    pub lazy: Option<Lazy>,
    /// A module operator failed here, or a packet came flagged failed, or
    /// the members disagree on which collective this is: the steps go on
    /// without combining, their packets flagged failed
    /// ([`wire::COLL_ROUND_FAILED`](outboard_wire::COLL_ROUND_FAILED)), so
    /// that every member waiting for them completes; this is the outcome
    /// at the end.
    pub failed: Option<CollError>,
    /// It started after its group lost a member (or waits for one known
    /// gone): it fails with this, but runs its steps hurried first, its
    /// packets flagged failed, so that the members they reach fail too
    /// rather than wait for packets that will not come.
    pub lost: Option<OpError>,
}

/// Packets a collective's step sends, before they become
/// [`CollOut`](super::CollOut)s.
pub(super) struct PendingSends {
    pub epoch: u32,
    pub schedule: u16,
    pub data: OutData,
    /// (rank, round) of each receiver.
    pub to: Vec<(u32, u16)>,
    /// The value came (in part) from the network: see `Work::coll_relays_out`.
    pub relay: bool,
}

/// The room a port has under its send bound
/// ([`EngineConfig::coll_send_bytes`](crate::EngineConfig::coll_send_bytes)),
/// used up as steps send.
pub(super) struct Room {
    /// Bytes the port's unconfirmed packets hold, with those of the steps
    /// run so far.
    pub held: usize,
    pub bound: usize,
}

impl Running {
    /// A collective of `epoch` that runs `sched` from its first step.
    pub(super) fn new(epoch: u32, sched: Arc<Compiled>, arrived: Vec<Arrival>) -> Running {
        Running {
            epoch,
            op: None,
            sched,
            reduction: None,
            value: Vec::new(),
            recv: HostBuf { addr: 0, len: 0 },
            step: 0,
            sent: false,
            next_recv: 0,
            arrived,
            outcome: None,
            held: 0,
            last: false,
            lazy: None,
            failed: None,
            lost: None,
        }
    }

    /// Runs the steps as far as the packets that arrived and the port's
    /// `room` allow: each step's sends go to `sends` (and take their room),
    /// then its receives fold in the listed order. A step that would send
    /// while the port is full waits, unless `may_pass` (asked only then)
    /// lets it through; its receives are still taken as they come.
    /// Returns whether it waits for room.
    pub(super) fn run_steps(
        &mut self,
        rank: u32,
        room: &mut Room,
        may_pass: impl Fn(u32) -> bool,
        work: &mut Work,
        comb: &mut Combiner<'_>,
        sends: &mut Vec<PendingSends>,
    ) -> bool {
        if self.stalled() {
            // Nothing to do: a group's collectives are all run on every
            // arrival for any of them (up to 64 pieces of one command).
            return false;
        }
        let sched = Arc::clone(&self.sched);
        let steps = &sched.schedule.steps;
        loop {
            if self.step == steps.len() {
                self.outcome = Some(match (self.lost, self.failed) {
                    (Some(e), _) => Err(e),
                    (None, Some(e)) => Err(e.into()),
                    (None, None) => Ok(()),
                });
                return false;
            }
            let st = &steps[self.step];
            if !self.sent {
                if !st.send_to.is_empty() && room.held >= room.bound && !may_pass(self.epoch) {
                    // The port's unconfirmed packets fill its bound:
                    // this step's sends (and so the collective) wait.
                    return true;
                }
                self.sent = true;
                let failure = self.failure();
                let len = match (failure, &self.lazy) {
                    (Some(_), _) => outboard_wire::COLL_FAILURE_LEN,
                    (None, Some(l)) => l.buf.len as usize,
                    (None, None) => self.value.len(),
                };
                room.held += st.send_to.len() * (len + OUT_OVERHEAD);
                if !st.send_to.is_empty() {
                    let flag = if failure.is_some() { outboard_wire::COLL_ROUND_FAILED } else { 0 };
                    let to = st.send_to.iter().copied().zip(sched.send_round[self.step].iter().map(|r| r | flag)).collect();
                    let data = match (failure, &self.lazy) {
                        (Some(cause), _) => OutData::Ready(Arc::from(cause.encode())),
                        (None, Some(l)) => OutData::Host(l.clone()),
                        (None, None) => OutData::Ready(Arc::from(&self.value[..])),
                    };
                    let relay = steps[..self.step].iter().any(|s| !s.recv_from.is_empty());
                    sends.push(PendingSends { epoch: self.epoch, schedule: sched.id, data, to, relay });
                }
            }
            if self.failed.is_none() && self.lost.is_none() {
                // A packet flagged failed for a later step: the collective
                // has failed upstream, whatever this step still waits for
                // (a departure first, so that every member names it).
                let flagged = self.arrived.iter().filter(|a| a.failure.is_some());
                if let Some(a) = flagged.min_by_key(|a| a.failure == Some(outboard_wire::CollFailure::Other)) {
                    let (src, cause) = (a.src_rank, a.failure);
                    self.fail_upstream(src, cause);
                }
            }
            if self.hurried() {
                // What this step waits for may never come (the peers run
                // another schedule, or one that failed and sends what it
                // can at once). Its sends still go, flagged failed, so the
                // members they reach fail instead of waiting.
                self.next_recv = st.recv_from.len();
            }
            while self.next_recv < st.recv_from.len() {
                let src = st.recv_from[self.next_recv];
                let round = sched.recv_round[self.step][self.next_recv];
                let Some(i) = self.arrival(src, round) else { break };
                let a = self.arrived.swap_remove(i);
                if self.failed.is_some() || self.lost.is_some() {
                    // Nothing more is combined; the steps go on.
                } else if a.failure.is_some() {
                    self.fail_upstream(src, a.failure);
                } else if let Err(e) = self.fold(st.fold(), a, (rank, src), work, comb) {
                    if !matches!(e, CollError::ModuleFailed { .. }) {
                        self.outcome = Some(Err(e.into()));
                        return false;
                    }
                    self.failed = Some(e);
                }
                self.next_recv += 1;
            }
            if self.next_recv < st.recv_from.len() {
                return false;
            }
            self.step += 1;
            self.sent = false;
            self.next_recv = 0;
        }
    }

    /// Whether running its steps now would change nothing: the current
    /// step has sent, nothing failed that it must act on, and the packet
    /// it waits for next has not arrived. Cheap, so that running every
    /// collective of a group on each arrival costs little for those it
    /// is not for.
    fn stalled(&self) -> bool {
        if !self.sent || self.hurried() {
            return false;
        }
        if self.failed.is_none() && self.lost.is_none() && self.arrived.iter().any(|a| a.failure.is_some()) {
            return false;
        }
        let Some(st) = self.sched.schedule.steps.get(self.step) else { return false };
        match st.recv_from.get(self.next_recv) {
            None => false,
            Some(&src) => {
                let round = self.sched.recv_round[self.step][self.next_recv];
                self.arrival(src, round).is_none()
            }
        }
    }

    /// Where the packet from rank `src` for `round` is among the arrivals,
    /// if it came.
    fn arrival(&self, src: u32, round: u16) -> Option<usize> {
        self.arrived.iter().position(|a| a.src_rank == src && a.round == round)
    }

    /// The cause its packets carry once it has failed, if it has.
    fn failure(&self) -> Option<outboard_wire::CollFailure> {
        use outboard_wire::CollFailure;
        match (self.lost, &self.failed) {
            (Some(OpError::PeerUnreachable(n)), _) => Some(CollFailure::NodeDied { node: n.0 }),
            (Some(OpError::SourceClosed(ep)), _) => Some(CollFailure::PortClosed { node: ep.node.0, port: ep.port.0, gen: ep.gen }),
            (Some(_), _) | (None, Some(_)) => Some(CollFailure::Other),
            (None, None) => None,
        }
    }

    /// A packet from rank `src` came flagged failed, for `cause`. A
    /// departure fails this collective as if this engine had learned of it
    /// itself - naming the member that left, not the messenger - since the
    /// notice of it may reach here later than the packet, or after the
    /// collective's end. Any other cause began at a member's own step.
    fn fail_upstream(&mut self, src: u32, cause: Option<outboard_wire::CollFailure>) {
        use outboard_wire::CollFailure;
        let departure = match cause {
            Some(CollFailure::NodeDied { node }) => Some(OpError::PeerUnreachable(NodeId(node))),
            Some(CollFailure::PortClosed { node, port, gen }) => Some(OpError::SourceClosed(Endpoint { node: NodeId(node), port: PortId(port), gen })),
            Some(CollFailure::Other) | None => None,
        };
        match departure {
            Some(e) => {
                self.lost.get_or_insert(e);
            }
            None => self.failed = Some(CollError::FailedUpstream { rank: src }),
        }
    }

    /// Folds packet `a` from rank `src` into the value at rank `rank` (a
    /// packet from a lower rank is the left operand).
    fn fold(&mut self, fold: Fold, a: Arrival, (rank, src): (u32, u32), work: &mut Work, comb: &mut Combiner<'_>) -> Result<(), CollError> {
        let from_lower = src < rank;
        match fold {
            Fold::Ignore => Ok(()),
            Fold::Replace => {
                self.value = a.data;
                Ok(())
            }
            Fold::Combine => match self.reduction {
                None => Err(CollError::BadReduction),
                Some(Reduction { op: ReduceOp::Module { module, generation }, .. }) => {
                    if self.value.len() != a.data.len() {
                        return Err(CollError::LengthMismatch { expected: self.value.len() as u32, got: a.data.len() as u32 });
                    }
                    comb.combine(module, generation, (rank, src), &mut self.value, &a.data, work)
                        .map_err(|failure| CollError::ModuleFailed { module: module.0, failure })
                }
                Some(red) => {
                    let n = (self.value.len() / red.dtype.size()) as u64;
                    if red.dtype.is_float() {
                        work.combine_float += n;
                    } else {
                        work.combine_int += n;
                    }
                    red.fold(&mut self.value, &a.data, from_lower)
                }
            },
        }
    }

    /// Whether it can complete: its host's command owns it (one the
    /// engine runs on its own waits, done or not, for that command), and
    /// it failed, or finished its steps and, if read per packet
    /// ([`Lazy`]), was read.
    pub(super) fn can_complete(&self) -> bool {
        self.op.is_some()
            && match &self.outcome {
                None => false,
                Some(Err(_)) => true,
                Some(Ok(())) => self.lazy.as_ref().is_none_or(|l| l.cell.get().is_some()),
            }
    }

    /// Its value as the host receives it.
    pub(super) fn result_value(&self) -> &[u8] {
        match &self.lazy {
            Some(l) => l.cell.get().map_or(&[][..], |d| &d[..]),
            None => &self.value,
        }
    }

    /// Whether its members disagree on which collective this is.
    pub(super) fn mismatched(&self) -> bool {
        matches!(self.failed, Some(CollError::ScheduleMismatch { .. }))
    }

    /// Whether it has failed in a way whose packets may not all come: it
    /// then runs its remaining steps without waiting, so that the failure
    /// reaches every member its steps send to (a member whose module
    /// failed here still waits: its peers run the same schedule and send
    /// everything).
    fn hurried(&self) -> bool {
        self.lost.is_some()
            || matches!(self.failed, Some(CollError::ScheduleMismatch { .. } | CollError::FailedUpstream { .. }))
    }

    /// The ranks whose packets its remaining steps still wait for.
    pub(super) fn awaited_ranks(&self) -> impl Iterator<Item = u32> + '_ {
        let steps = &self.sched.schedule.steps;
        steps.iter().enumerate().skip(self.step).flat_map(move |(i, st)| {
            let from = if i == self.step { self.next_recv } else { 0 };
            st.recv_from.iter().enumerate().skip(from).filter_map(move |(j, &src)| {
                let round = self.sched.recv_round[i][j];
                self.arrival(src, round).is_none().then_some(src)
            })
        })
    }

    /// Whether it still waits for its steps (it has neither finished nor
    /// failed).
    pub(super) fn is_waiting(&self) -> bool {
        self.outcome.is_none()
    }

    /// Fails it with `err` if a failure can still reach its host: it is
    /// under way, or done but not yet read from host memory (see
    /// [`Lazy`]). Returns whether it took the failure.
    pub(super) fn fail(&mut self, err: OpError) -> bool {
        let unread = self.lazy.as_ref().is_some_and(|l| l.cell.get().is_none());
        if self.outcome.is_none() || (unread && self.outcome == Some(Ok(()))) {
            self.outcome = Some(Err(err));
            true
        } else {
            false
        }
    }
}
