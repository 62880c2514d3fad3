//! [`ConnTable`]: the engine's connections, and the earliest of their
//! timer deadlines without a scan over all of them.
//!
//! The driver asks for the next deadline after every input
//! ([`Engine::poll_timeout`](crate::Engine::poll_timeout)). Scanning every
//! connection for it costs a cache miss per peer the engine ever talked to;
//! in a simulation of thousands of engines that was the largest single
//! cost per packet. Instead the table keeps a min-heap of (deadline,
//! connection) entries, refreshed lazily: every mutable access to a
//! connection marks it *dirty* (its deadline may have moved);
//! [`settle`](ConnTable::settle), called at the end of the engine's input
//! handlers, pushes the dirty connections' current deadlines and drops
//! entries at the top that no longer match their connection. An entry is
//! valid while its connection's deadline equals it, so the heap's valid
//! top, with the deadlines of connections dirtied since, is exactly the
//! minimum a full scan would give; where the top is stale (accesses after
//! the last settle), the table falls back to the scan. Stale entries below
//! the top are dropped when they surface, and the heap is rebuilt when they
//! outnumber the connections.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::{Index, IndexMut};

use crate::conn::Conn;
use crate::Instant;

/// The engine's connections by index, with their deadlines in a heap.
#[derive(Debug, Default)]
pub(crate) struct ConnTable {
    /// Boxed: a connection is large and most engines hold a few, so the
    /// vector's spare capacity holds pointers, not connections.
    #[allow(clippy::vec_box)]
    conns: Vec<Box<Conn>>,
    /// Connections touched since the last settle (`Conn::timer_dirty`
    /// marks them). A connection whose deadline still equals
    /// `Conn::timer_pushed` has a valid entry, so still one in the heap
    /// (only invalid entries are dropped): it needs no new one.
    dirty: Vec<usize>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Every connection's `Conn::timer_pushed`, side by side: with no
    /// connection dirty, an entry is valid iff it equals its connection's
    /// value here (each equals that connection's deadline then), so the
    /// heap's top is checked without fetching the connection - in a
    /// large simulation, a cache miss per engine input.
    pushed: Vec<Option<Instant>>,
}

impl ConnTable {
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Adds a connection; its index.
    pub fn push(&mut self, conn: Conn) -> usize {
        let i = self.conns.len();
        self.pushed.push(conn.timer_pushed);
        self.conns.push(Box::new(conn));
        self.mark(i);
        i
    }

    pub fn iter(&self) -> impl Iterator<Item = &Conn> + '_ {
        self.conns.iter().map(|c| &**c)
    }

    fn mark(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.timer_dirty {
            c.timer_dirty = true;
            self.dirty.push(i);
        }
    }

    fn is_valid(&self, &Reverse((at, i)): &Reverse<(Instant, usize)>) -> bool {
        if self.dirty.is_empty() {
            self.pushed[i] == Some(at)
        } else {
            self.conns[i].deadline() == Some(at)
        }
    }

    /// Brings the heap up to date with the connections touched since the
    /// last call.
    pub fn settle(&mut self) {
        // Nothing touched: the heap's top was valid at the last settle and
        // nothing can have changed it.
        if self.dirty.is_empty() {
            return;
        }
        if self.heap.len() > 2 * self.conns.len() + 64 {
            self.heap.clear();
            self.dirty.clear();
            for (i, c) in self.conns.iter_mut().enumerate() {
                c.timer_dirty = false;
                c.timer_pushed = c.deadline();
                self.pushed[i] = c.timer_pushed;
                if let Some(d) = c.timer_pushed {
                    self.heap.push(Reverse((d, i)));
                }
            }
            return;
        }
        for k in 0..self.dirty.len() {
            let i = self.dirty[k];
            let c = &mut self.conns[i];
            c.timer_dirty = false;
            let d = c.deadline();
            if let Some(at) = d.filter(|_| d != c.timer_pushed) {
                self.heap.push(Reverse((at, i)));
            }
            c.timer_pushed = d;
            self.pushed[i] = d;
        }
        self.dirty.clear();
        while let Some(top) = self.heap.peek() {
            if self.is_valid(top) {
                break;
            }
            self.heap.pop();
        }
    }

    /// The connections whose deadline is at or before `now`, in index
    /// order (the order a scan over all of them visits them), taken off
    /// the heap: each is marked touched, so the next
    /// [`settle`](ConnTable::settle) pushes whatever deadline its timer
    /// handler leaves. A timer pass then costs the due connections, not
    /// every peer the engine ever talked to.
    pub fn take_due(&mut self, now: Instant) -> Vec<usize> {
        self.settle();
        let mut due = Vec::new();
        while let Some(&top) = self.heap.peek() {
            let Reverse((at, i)) = top;
            let valid = self.is_valid(&top);
            if valid && at > now {
                break;
            }
            self.heap.pop();
            if valid {
                due.push(i);
                self.conns[i].timer_pushed = None;
                self.pushed[i] = None;
                self.mark(i);
            }
        }
        due.sort_unstable();
        due.dedup();
        due
    }

    /// The earliest deadline of any connection: the same value a scan over
    /// all of them gives.
    pub fn next_deadline(&self) -> Option<Instant> {
        let dirty = self.dirty.iter().filter_map(|&i| self.conns[i].deadline()).min();
        let settled = match self.heap.peek() {
            None => None,
            Some(top) if self.is_valid(top) => Some(top.0 .0),
            Some(_) => return self.iter().filter_map(Conn::deadline).min(),
        };
        dirty.into_iter().chain(settled).min()
    }
}

impl Index<usize> for ConnTable {
    type Output = Conn;

    fn index(&self, i: usize) -> &Conn {
        &self.conns[i]
    }
}

impl IndexMut<usize> for ConnTable {
    fn index_mut(&mut self, i: usize) -> &mut Conn {
        self.mark(i);
        &mut self.conns[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EngineConfig, NodeId};
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        /// Whatever the sequence of deadline changes, settles and timer
        /// passes, the table's next deadline is the one a scan over all
        /// connections gives, and a pass takes exactly the connections a
        /// scan finds due, in index order.
        #[test]
        fn next_deadline_and_take_due_equal_a_full_scan(
            ops in proptest::collection::vec(
                (0usize..6, proptest::option::of(0u64..50), any::<bool>(), any::<bool>(), proptest::option::of(0u64..50)),
                1..200,
            )
        ) {
            let cfg = EngineConfig::new(NodeId(0), 1, 1);
            let mut t = ConnTable::default();
            for n in 0..6 {
                t.push(Conn::new(NodeId(n), &cfg, Instant::ZERO));
            }
            for (i, at, which, settle, pass_at) in ops {
                let at = at.map(|ms| Instant::ZERO + Duration::from_millis(ms));
                if which {
                    t[i].rto_deadline = at;
                } else {
                    t[i].ack_due = at;
                }
                if settle {
                    t.settle();
                }
                if let Some(ms) = pass_at {
                    let now = Instant::ZERO + Duration::from_millis(ms);
                    let scan: Vec<usize> =
                        (0..t.len()).filter(|&c| t[c].deadline().is_some_and(|d| d <= now)).collect();
                    let due = t.take_due(now);
                    prop_assert_eq!(&due, &scan);
                    // What a timer handler does: a due connection's
                    // deadline moves past `now` or goes away.
                    for c in due {
                        t[c].rto_deadline = if which { Some(now + Duration::from_millis(7)) } else { None };
                        t[c].ack_due = None;
                    }
                    t.settle();
                }
                let scan = t.iter().filter_map(Conn::deadline).min();
                prop_assert_eq!(t.next_deadline(), scan);
            }
        }
    }
}
