//! The network: links with queues, switches, and faults from the seed.
//!
//! Topology: one switch while the cluster fits its radix, else a folded
//! Clos (fat tree) in which half of each switch's ports go down; a path
//! climbs to the lowest level where both ends share a subtree, so it
//! crosses 1, 3, 5, ... switches. The fat tree has full bisection, so only
//! the two edge links can be contended: each node's uplink (its NIC's
//! output) and downlink (the switch port towards it). Each is a FIFO queue,
//! so an incast or background traffic delays packets exactly as much as the
//! link is oversubscribed.
//!
//! Switching is cut-through (Myrinet and Quadrics are wormhole routed, and
//! today's switches cut through): a packet's head goes on as soon as it is
//! routed, so an uncontended path adds only latency, and a link's
//! serialisation time shows only where a packet is slower on the link than
//! the NIC fed it, or when the link is busy with another packet.
//!
//! Reservations are made when a packet leaves its NIC, in global event
//! order. An uplink serves one NIC, so that is its order. A downlink is
//! shared: a packet handed over later may reach the switch earlier (its
//! sender's uplink was idle while another sender's was backlogged), and a
//! switch serves its output port in arrival order, so a downlink keeps its
//! reserved intervals and a packet takes the earliest gap at or after its
//! arrival rather than the slot after the latest reservation. (A root that
//! queues sixty packets on its uplink must not delay, by a millisecond, an
//! acknowledgement another node sends to one of its children.)

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::cost::CostModel;
use crate::profile::FaultRates;
use crate::time::{Dur, Time};

/// What happened to the packets handed to the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireStats {
    /// Packets sent (loopback excluded).
    pub sent: u64,
    /// Lost.
    pub lost: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// One packet's fate: when (and whether twice) it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// Arrival of the (last byte of the) packet at the receiving NIC.
    pub at: Time,
    /// A duplicate's arrival.
    pub duplicate_at: Option<Time>,
    /// Flip a byte at this index (corruption).
    pub corrupt_at: Option<usize>,
}

/// Links, switches and the fault model.
pub struct Wire {
    nodes: u32,
    /// Nodes per subtree at each level of the fat tree (radix/2)^level;
    /// empty when one switch holds everybody.
    group: Vec<u64>,
    uplink_free: Vec<Time>,
    downlinks: Vec<Downlink>,
    faults: FaultRates,
    jitter: Dur,
    stats: WireStats,
}

impl Wire {
    /// The network of `nodes` nodes for a switch of `radix` ports.
    pub fn new(nodes: u32, radix: u32, faults: FaultRates) -> Wire {
        let mut group = Vec::new();
        if nodes > radix {
            let down = u64::from((radix / 2).max(2));
            let mut g = down;
            while g < u64::from(nodes) {
                group.push(g);
                g = g.saturating_mul(down);
            }
        }
        let jitter = Dur::from_us(faults.jitter_us);
        Wire {
            nodes,
            group,
            uplink_free: vec![Time::ZERO; nodes as usize],
            downlinks: (0..nodes).map(|_| Downlink::default()).collect(),
            faults,
            jitter,
            stats: WireStats::default(),
        }
    }

    /// Switches on the path from `a` to `b`.
    pub fn hops(&self, a: u32, b: u32) -> u32 {
        let (a, b) = (u64::from(a), u64::from(b));
        for (level, g) in self.group.iter().enumerate() {
            if a / g == b / g {
                return 2 * level as u32 + 1;
            }
        }
        2 * self.group.len() as u32 + 1
    }

    /// Counters so far.
    pub fn stats(&self) -> WireStats {
        self.stats
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// A packet of `len` bytes from `src` to `dst` whose transmission began
    /// on the NIC at `start` and whose last byte the NIC handed over at
    /// `end`. Returns `None` if it is lost.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        cost: &CostModel,
        rng: &mut ChaCha8Rng,
        src: u32,
        dst: u32,
        len: usize,
        start: Time,
        end: Time,
    ) -> Option<Delivery> {
        self.stats.sent += 1;
        self.stats.bytes += len as u64;
        let f = &self.faults;
        if f.loss > 0.0 && rng.gen_bool(f.loss) {
            self.stats.lost += 1;
            return None;
        }
        let ser = cost.link_byte.for_bytes(len as u64);
        let up = &mut self.uplink_free[src as usize];
        let tail_up = end.max(start + ser).max(*up + ser);
        *up = tail_up;
        let at_switch = tail_up + cost.cable;
        let through = at_switch + Dur(cost.switch_hop.0 * u64::from(self.hops(src, dst)));
        let tail_down = self.downlinks[dst as usize].reserve(through, ser, start);
        let mut at = tail_down + cost.cable;
        if self.jitter.0 > 0 {
            at += Dur(rng.gen_range(0..=self.jitter.0));
        }
        let corrupt_at = if f.corrupt > 0.0 && len > 0 && rng.gen_bool(f.corrupt) {
            self.stats.corrupted += 1;
            Some(rng.gen_range(0..len))
        } else {
            None
        };
        let duplicate_at = if f.duplicate > 0.0 && rng.gen_bool(f.duplicate) {
            self.stats.duplicated += 1;
            let extra = if self.jitter.0 > 0 { rng.gen_range(0..=self.jitter.0) } else { ser.0 };
            Some(at + Dur(extra))
        } else {
            None
        };
        Some(Delivery { at, duplicate_at, corrupt_at })
    }
}

/// A switch port towards one node: the intervals its link is reserved
/// for, sorted by start and disjoint (so also sorted by end). A plain
/// sorted list: a downlink holds a handful of intervals at a time, and a
/// tree map allocated and freed a node for nearly every packet.
#[derive(Debug, Default)]
struct Downlink {
    busy: Vec<(Time, Time)>,
}

impl Downlink {
    /// Reserves `ser` of link time for a packet whose tail could leave the
    /// switch at `tail` at the earliest: the earliest gap that holds it.
    /// Returns when its tail leaves. Intervals that ended before `now` (the
    /// current event's time: every later packet arrives after it) are
    /// dropped.
    fn reserve(&mut self, tail: Time, ser: Dur, now: Time) -> Time {
        let ended = self.busy.partition_point(|&(_, e)| e <= now);
        self.busy.drain(..ended);
        let mut begin = Time(tail.0.saturating_sub(ser.0));
        // The interval starting at or before `begin` may still cover it.
        let at = self.busy.partition_point(|&(s, _)| s <= begin);
        if let Some(&(_, e)) = at.checked_sub(1).map(|i| &self.busy[i]) {
            begin = begin.max(e);
        }
        for &(s, e) in &self.busy[self.busy.partition_point(|&(s, _)| s < begin)..] {
            if s >= begin + ser {
                break;
            }
            begin = begin.max(e);
        }
        // An interval starting at `begin` (possible only for `ser` 0) is
        // replaced, as a map keyed by start would.
        let at = self.busy.partition_point(|&(s, _)| s < begin);
        match self.busy.get_mut(at) {
            Some(same) if same.0 == begin => *same = (begin, begin + ser),
            _ => self.busy.insert(at, (begin, begin + ser)),
        }
        begin + ser
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::profile::Profile;

    #[test]
    fn fat_tree_hops_grow_with_distance() {
        let w = Wire::new(64, 8, FaultRates::default());
        assert_eq!(w.hops(0, 3), 1, "same leaf switch");
        assert_eq!(w.hops(0, 4), 3, "same 16-node subtree");
        assert_eq!(w.hops(0, 63), 5, "across the top");
        let one = Wire::new(16, 16, FaultRates::default());
        assert_eq!(one.hops(0, 15), 1);
    }

    #[test]
    fn incast_queues_on_the_downlink() {
        let cost = CostModel::new(&Profile::builtin("elan3"));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut w = Wire::new(4, 8, FaultRates::default());
        let t = Time::ZERO;
        let a = w.send(&cost, &mut rng, 1, 0, 1000, t, t).unwrap();
        let b = w.send(&cost, &mut rng, 2, 0, 1000, t, t).unwrap();
        let ser = cost.link_byte.for_bytes(1000);
        assert_eq!(b.at, a.at + ser, "second packet waits for the first on the shared downlink");
        let c = w.send(&cost, &mut rng, 3, 1, 1000, t, t).unwrap();
        assert_eq!(c.at, a.at, "another destination is not delayed");
    }

    #[test]
    fn a_backlogged_sender_does_not_hold_the_downlink_for_an_earlier_arrival() {
        let cost = CostModel::new(&Profile::builtin("gm2-lanai91"));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut w = Wire::new(4, 8, FaultRates::default());
        let t = Time::ZERO;
        let ser = cost.link_byte.for_bytes(4096);
        // Node 0 (a broadcast root) hands 30 packets for its children 1, 2
        // and 3 in turn to its uplink at once: they reach the switch one
        // serialisation time apart, so node 1's downlink is reserved one
        // slot in three, far into the future.
        let last = (0..30).map(|i| w.send(&cost, &mut rng, 0, 1 + i % 3, 4096, t, t).unwrap().at).last().unwrap();
        assert!(last.0 >= t.0 + 30 * ser.0);
        // Node 3's small packet to node 1, handed over just after, reaches
        // the switch long before the backlog's tail: it fits between two of
        // node 0's packets instead of queueing behind all of them.
        let ack = w.send(&cost, &mut rng, 3, 1, 44, t + ser, t + ser).unwrap();
        assert!(ack.at.0 < t.0 + 4 * ser.0, "ack at {:?}, backlog ends at {last:?}", ack.at);
        // And it never overlaps a reserved interval: the downlink still
        // carries every byte one at a time.
        let d = &w.downlinks[1];
        let mut prev_end = Time::ZERO;
        for &(s, e) in &d.busy {
            assert!(s >= prev_end, "overlap at {s:?}");
            prev_end = e;
        }
    }
}
