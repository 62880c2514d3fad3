//! Running collectives inside the engine, one module per phase:
//!
//! - [`install`]: groups and their schedules, prepared for running
//!   ([`Compiled`](install::Compiled)); a group's or a port's end;
//! - [`start`]: a host's `Collective` command becomes the group's next
//!   collective (one per piece of a multi-piece command), or takes over
//!   one its engine started on its own;
//! - [`pool`]: packets that arrive before their collective started, kept
//!   in a bounded pool, and the broadcasts they start without the host;
//! - [`collective`]: one collective's own state ([`Running`]): its steps
//!   take arrivals, fold them and say what to send, without touching the
//!   engine;
//! - [`step`]: filing arriving packets and running a group's collectives,
//!   sending what they return;
//! - [`out`]: outgoing packets until confirmed, and the per-port send
//!   bound;
//! - [`retry`]: refusals and their retries, the peers a waiting collective
//!   needs probed;
//! - [`complete`]: completing in epoch order, and failures.
//!
//! Every map here is ordered (`BTreeMap`/`BTreeSet`): where the engine
//! walks one, the order reaches events and packets, and two engines given
//! the same inputs must produce the same outputs.

mod collective;
mod complete;
mod install;
mod out;
mod pool;
mod retry;
mod start;
mod step;

use std::collections::{BTreeMap, BTreeSet};

use super::GroupId;
use crate::{Dma, Engine, NodeId, PortId};

pub(crate) use collective::Running;
pub(crate) use install::{Compiled, Group};
pub(crate) use out::CollOut;
pub(crate) use pool::Arrival;
pub(crate) use start::CollRequest;

/// Collective packet keys carry this bit, so a refusal can tell them from
/// the keys of point-to-point operations.
pub(crate) const COLL_KEY_BIT: u32 = 1 << 31;

/// Engine-wide collective state.
#[derive(Debug, Default)]
pub(crate) struct CollState {
    /// Boxed: a map node has room for eleven entries, and most engines
    /// hold one group.
    pub groups: BTreeMap<(PortId, GroupId), Box<Group>>,
    /// Packets for collectives not started (or groups not created) yet.
    pub pool: BTreeMap<(PortId, GroupId, u32), Vec<Arrival>>,
    /// Bytes the pool holds: its packets, and those of collectives the
    /// engine started on its own that no host command owns yet
    /// ([`Running::held`]), each with its bookkeeping.
    pub pool_bytes: usize,
    pub out: BTreeMap<u32, CollOut>,
    pub next_key: u32,
    /// Refused packets waiting to be retried (keys).
    pub parked: BTreeSet<u32>,
    /// Per port: bytes its entries in `out` hold (payload + bookkeeping).
    pub out_bytes: BTreeMap<PortId, usize>,
    /// Groups with a collective whose sends wait for room under their
    /// port's send bound.
    pub blocked: BTreeSet<(PortId, GroupId)>,
    /// Whether packets left `out` since blocked groups were last looked at.
    pub drain_due: bool,
    /// Per peer, the packets the full pool refused that have not come
    /// again (by key), and whether the peer was told of room since the
    /// last refusal (`wire::CollResume`).
    pub refused: BTreeMap<NodeId, Refused>,
    /// Refused peers that a collective a host started since waits for:
    /// the packets it needs may be among those refused, and a running
    /// collective takes its packets whatever the pool holds, so they are
    /// told at once.
    pub resume_now: BTreeSet<NodeId>,
    /// Pool bytes promised to refused packets by the last notices (less
    /// what those took since): packets sent for the first time may not
    /// take them.
    pub promised: usize,
}

/// A peer's packets that the pool refused and that have not come again.
#[derive(Debug, Default)]
pub(crate) struct Refused {
    pub keys: BTreeSet<u32>,
    /// Told of room since the last refusal: it relaunches what fits, so it
    /// is told again only on a new refusal or a host's start.
    pub told: bool,
}

/// Whether epoch `a` comes before epoch `b` (epochs wrap).
fn epoch_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl CollState {
    /// Checks (in debug builds) that the byte counts match what is held:
    /// `pool_bytes` is the pool's packets plus what engine-started
    /// collectives hold, and each port's `out_bytes` is its outgoing
    /// packets' cost (with no entry for a port that holds nothing).
    pub(crate) fn debug_check_bytes(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let pooled: usize = self.pool.values().flatten().map(Arrival::cost).sum();
        let held: usize = self.groups.values().flat_map(|g| g.running.iter().map(|r| r.held)).sum();
        debug_assert_eq!(self.pool_bytes, pooled + held, "pool bytes: {pooled} pooled + {held} held");
        let mut out: BTreeMap<PortId, usize> = BTreeMap::new();
        for o in self.out.values() {
            *out.entry(o.port).or_default() += o.cost();
        }
        debug_assert_eq!(self.out_bytes, out, "collective send bytes per port");
    }
}

impl<D: Dma> Engine<D> {
    /// Whether no collective is under way and nothing is pooled or queued.
    pub(crate) fn coll_is_quiet(&self) -> bool {
        self.coll.out.is_empty() && self.coll.groups.values().all(|g| g.running.is_empty())
    }

    /// Bytes held for collective packets that arrived early.
    pub fn coll_unexpected_bytes(&self) -> usize {
        self.coll.pool_bytes
    }
}
