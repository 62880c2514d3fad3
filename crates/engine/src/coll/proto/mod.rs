//! The NIC collective protocol, barriers first: a separate protocol for
//! collective packets that bypasses the point-to-point connections.
//!
//! Offloaded collectives normally ride on the reliable connections
//! (`coll::run`): each packet takes a sequence number, waits in the
//! window, and is acknowledged per hop. For a barrier that is most of the
//! NIC's work: a notification carries no data, so its acknowledgement
//! doubles the packets and the sequencing serialises it behind whatever
//! else goes to that peer. Work from the group of the GM-2 slides proposed
//! a collective protocol that keeps reliability at the level of the
//! collective instead; this module is that design for the engine:
//!
//! - **Packets** are [`outboard_wire::Kind::NicColl`]: no sequence number,
//!   no acknowledgement, never in a connection's window or retransmission
//!   queue. They pass the same MAC, job (incarnation) and address checks as
//!   every packet; the sender must be the group's member at the rank it
//!   names, the receiver the port incarnation it names.
//! - **Progress per (group, epoch)** ([`progress::Progress`]): the step
//!   under way and the set of (rank, round) notifications received. A
//!   notification is idempotent, so duplicates are dropped by that set,
//!   and a barrier's epochs are its own count per group (the members start
//!   the group's protocol barriers in the same order), so consecutive
//!   barriers never mix: packets of a completed epoch are stale, and no
//!   honest member can be more than one epoch ahead (it cannot finish a
//!   barrier this member has not entered), so anything further is dropped.
//! - **Statically prepared packets**: when a barrier first runs a schedule,
//!   the group keeps each step's notifications with their headers built
//!   ([`Prepared`]); sending one writes its epoch only.
//! - **Reliability at the level of the collective**: a member whose step
//!   waits longer than the retransmission timeout sends each peer it
//!   still misses a request to resend (a NACK naming the epoch and round),
//!   with the timeout doubling up to its ceiling and reset by progress. A
//!   peer answers from its progress: a notification it has sent (in the
//!   barrier under way, or in the one it completed last - a member that
//!   finished may be asked by one that did not) goes again; one it has not
//!   reached yet goes when it gets there. Nothing is kept for a receiver
//!   that does not ask, so a lost packet costs one timeout and nothing
//!   else, and whatever a receiver cannot use yet (its group or schedule
//!   not installed) it may drop: it will ask again.
//! - **Failure**: a barrier waiting on a silent member has the member
//!   probed by the connection keepalive; a member declared dead (or
//!   restarted) fails every protocol barrier of the groups it belongs to.
//!
//! The engine's collectives over connections stay the default; a host
//! selects this protocol per barrier with [`crate::Command::NicBarrier`].

mod progress;
mod run;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use outboard_wire::NicCollHeader;

use super::GroupId;
use crate::{Generation, Instant, NodeId, OpError, OpId, PortId};
use progress::Progress;

/// What the collective protocol did, for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicCollStats {
    /// Barriers completed (successfully or not).
    pub barriers: u64,
    /// Notifications sent, first time.
    pub notifications: u64,
    /// Requests to resend sent (one per missing notification per timeout).
    pub nacks: u64,
    /// Notifications sent again because a peer asked.
    pub resent: u64,
    /// Requests for a notification not sent yet (it goes when its step
    /// comes) or of an epoch this member no longer knows.
    pub nacks_ignored: u64,
    /// Notifications received twice.
    pub duplicates: u64,
    /// Packets of an epoch already completed here.
    pub stale: u64,
    /// Packets of an epoch no honest member can have reached yet.
    pub out_of_window: u64,
    /// Packets dropped for their addressing: no such port incarnation or
    /// group here, a sender that is not the member it names, a round the
    /// schedule does not receive.
    pub dropped: u64,
}

/// A schedule's notifications with their headers built (epoch left 0):
/// per step, (destination node, header).
#[derive(Debug)]
pub(crate) struct Prepared {
    pub sends: Vec<Vec<(NodeId, NicCollHeader)>>,
}

/// A barrier the host started.
#[derive(Debug)]
pub(crate) struct Barrier {
    pub op: OpId,
    pub progress: Progress,
    pub prepared: Arc<Prepared>,
    /// Set when it failed; it completes (in epoch order) with this.
    pub outcome: Option<OpError>,
}

/// Notifications that arrived for an epoch the host has not started yet.
#[derive(Debug, Default)]
pub(crate) struct Early {
    /// The schedule their senders ran.
    pub schedule: u16,
    pub got: BTreeSet<(u32, u16)>,
}

/// One group's protocol state at one port incarnation.
#[derive(Debug)]
pub(crate) struct ProtoGroup {
    /// The port incarnation (the state goes with it).
    pub gen: Generation,
    /// The epoch the host's next barrier takes.
    pub next_epoch: u32,
    /// Barriers completed here: the epoch of the one under way.
    pub done: u32,
    /// Started, in epoch order; only the front runs (a barrier cannot
    /// complete anywhere before the one before it did).
    pub running: VecDeque<Barrier>,
    /// Arrivals for `done` or `done + 1` before their host started them.
    pub early: BTreeMap<u32, Early>,
    /// The last barrier completed successfully, to answer the requests of
    /// members that have not: (epoch, progress, prepared).
    pub last: Option<(Progress, Arc<Prepared>)>,
    /// Prepared notifications by schedule.
    pub prepared: BTreeMap<u16, Arc<Prepared>>,
    /// When the front barrier next asks for what it misses, and the
    /// current interval.
    pub retry_at: Option<Instant>,
    pub backoff: Duration,
}

impl ProtoGroup {
    fn new(gen: Generation) -> ProtoGroup {
        ProtoGroup {
            gen,
            next_epoch: 0,
            done: 0,
            running: VecDeque::new(),
            early: BTreeMap::new(),
            last: None,
            prepared: BTreeMap::new(),
            retry_at: None,
            backoff: Duration::ZERO,
        }
    }
}

/// Engine-wide protocol state.
#[derive(Debug, Default)]
pub(crate) struct NicCollState {
    pub groups: BTreeMap<(PortId, GroupId), ProtoGroup>,
    /// Packets to transmit, ahead of the connections' traffic.
    pub tx: VecDeque<(NodeId, NicCollHeader)>,
    pub stats: NicCollStats,
}

impl NicCollState {
    /// The earliest request deadline.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.groups.values().filter_map(|g| g.retry_at).min()
    }

    /// Nothing running, nothing to send.
    pub(crate) fn is_quiet(&self) -> bool {
        self.tx.is_empty() && self.groups.values().all(|g| g.running.is_empty())
    }
}
