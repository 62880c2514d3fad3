//! The event queue: a min-heap on (time, insertion number).
//!
//! Ties are broken by insertion order, so two events scheduled for the same
//! picosecond always run in the order they were scheduled: with one seeded
//! RNG and no hash-ordered iteration anywhere, that makes a run a pure
//! function of its seed and inputs.
//!
//! The heap holds only (time, number, slot) - 24 bytes - and the events
//! themselves sit in a slab: with 65,536 nodes the heap holds hundreds of
//! thousands of entries, and sifting large entries was a third of the
//! simulator's time.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::Time;

#[derive(PartialEq, Eq)]
struct Entry {
    time: Time,
    seq: u64,
    slot: u32,
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    // Reversed: `BinaryHeap` is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Pending events in virtual time.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry>,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    next_seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), slab: Vec::new(), free: Vec::new(), next_seq: 0, popped: 0 }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: Time, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(event);
                i
            }
            None => {
                self.slab.push(Some(event));
                u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 pending events")
            }
        };
        self.heap.push(Entry { time, seq, slot });
    }

    /// Removes the earliest event (the first scheduled among equals).
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let e = self.heap.pop()?;
        self.popped += 1;
        self.free.push(e.slot);
        let event = self.slab[e.slot as usize].take().expect("a queued slot holds its event");
        Some((e.time, event))
    }

    /// When the earliest event is due.
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.time)
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Events handed out so far (the simulator's speed is quoted in these).
    pub fn popped(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(Time(5), "c");
        q.push(Time(1), "a");
        q.push(Time(5), "d");
        q.push(Time(1), "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        assert_eq!(q.popped(), 4);
    }
}
