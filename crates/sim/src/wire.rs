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
//! the NIC fed it, or when the link is busy with another packet. Link
//! reservations are made when a packet leaves its NIC, in global event
//! order: with equal path lengths that is the order packets reach a switch.

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
    downlink_free: Vec<Time>,
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
            downlink_free: vec![Time::ZERO; nodes as usize],
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
        let down = &mut self.downlink_free[dst as usize];
        let tail_down = through.max(*down + ser);
        *down = tail_down;
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
}
