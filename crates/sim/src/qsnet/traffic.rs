//! Background traffic (section 5): a second process per node sends
//! packets at maximum load, from Elan memory, while the collectives are
//! measured. Complement: node a sends to the node whose binary
//! coordinates are a's complemented (on a partly used tree, the mirror
//! image `nodes - 1 - a`). Uniform: every packet to a destination drawn
//! at random. Each sender keeps `traffic_window` messages (one packet
//! each) open. The background job is an MPI-style program (128 processes,
//! one sender and one receiver per node): each message is matched by the
//! Tport thread on the receiving Elan's thread processor (6.1: MPI "needs
//! to run a thread in the Elan microprocessor in order to match the
//! message tags"), for `tport_thread_us`, and the sender sends its next
//! message when the last one was matched. That thread time competes with
//! elan_gsync's and elan_hgsync's thread work on the same Elan.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::fabric::{AgentId, Close, Dest, Fabric, Note, Send};
use super::txn::Txn;
use super::world::Job;

/// The traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Each node to its complement.
    Complement,
    /// Each packet to a random other node.
    Uniform,
}

impl Pattern {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Complement => "complement",
            Pattern::Uniform => "uniform",
        }
    }
}

/// The background job.
pub struct Traffic {
    id: AgentId,
    pattern: Pattern,
    nodes: u32,
    rng: ChaCha8Rng,
    /// Packets acknowledged.
    pub delivered: u64,
}

impl Traffic {
    /// Starts `traffic_window` packets from every live node.
    pub fn start(f: &mut Fabric, id: AgentId, pattern: Pattern, seed: u64) -> Traffic {
        let nodes = f.tree.nodes;
        let mut t = Traffic { id, pattern, nodes, rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5452_4146_4600_0003), delivered: 0 };
        for n in 0..nodes {
            if f.is_dead(n) {
                continue;
            }
            for _ in 0..f.p.t.traffic_window {
                t.next(f, n);
            }
        }
        t
    }

    fn dest(&mut self, n: u32) -> u32 {
        match self.pattern {
            Pattern::Complement => {
                let c = !n & (self.nodes.next_power_of_two() - 1);
                if c < self.nodes { c } else { self.nodes - 1 - n }
            }
            Pattern::Uniform => {
                let d = self.rng.gen_range(0..self.nodes - 1);
                if d >= n { d + 1 } else { d }
            }
        }
    }

    fn next(&mut self, f: &mut Fabric, n: u32) {
        let d = self.dest(n);
        if d == n {
            return;
        }
        let data = f.p.t.traffic_packet_bytes;
        let at = f.dma(n, f.now(), data, false);
        let s = Send { agent: self.id, tag: u64::from(n), src: n, dest: Dest::One(d), txn: Txn::Data, data, close: Close::OnAck, high: false, main_memory: false, notify: true };
        f.send(s, at);
    }
}

impl Job for Traffic {
    fn on(&mut self, f: &mut Fabric, note: Note) {
        match note {
            Note::Delivered { tag, node, .. } => {
                // Matched by the receiver's Tport thread; then the sender
                // (its process learns of it) goes on.
                let us = f.p.t.tport_thread_us;
                let t = f.thread_for(node, f.now(), us);
                f.timer(self.id, t, tag);
            }
            Note::Timer { token, .. } => {
                self.delivered += 1;
                self.next(f, token as u32);
            }
            Note::Done { .. } => {}
        }
    }

    fn finished(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complement_pairs_nodes_and_uniform_never_picks_itself() {
        let mut t = Traffic { id: 0, pattern: Pattern::Complement, nodes: 64, rng: ChaCha8Rng::seed_from_u64(1), delivered: 0 };
        assert_eq!(t.dest(0), 63);
        assert_eq!(t.dest(5), 58);
        t.nodes = 6;
        assert_eq!(t.dest(0), 5, "7 is not there: mirror");
        assert_eq!(t.dest(2), 5, "!2 & 7 = 5");
        t.pattern = Pattern::Uniform;
        for n in 0..6 {
            for _ in 0..50 {
                let d = t.dest(n);
                assert!(d != n && d < 6);
            }
        }
    }
}
