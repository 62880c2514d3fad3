//! The event queue: a radix heap on time, ties in insertion order.
//!
//! Ties are broken by insertion order, so two events scheduled for the same
//! picosecond always run in the order they were scheduled: with one seeded
//! RNG and no hash-ordered iteration anywhere, that makes a run a pure
//! function of its seed and inputs.
//!
//! Why a radix heap: virtual time never goes back, so every time pushed is
//! at least the last one popped - the condition under which a radix heap
//! is exact. Its buckets are plain vectors walked in order, where a binary
//! heap of several hundred thousand pending events (65,536 nodes all busy
//! at once) spends most of its time on cache misses while sifting.
//!
//! The key is the time alone: every bucket holds its events in insertion
//! order (a push appends the newest; redistributing a bucket walks it in
//! order into buckets that were empty), so the events due at the earliest
//! time leave a bucket already in insertion order, and a symmetric
//! collective's thousands of simultaneous events cost one pass, not one
//! redistribution per bit of an insertion number. Events sit in a slab;
//! buckets hold 12-byte (time, slot) pairs.

use std::collections::VecDeque;

use crate::time::Time;

/// Pending events in virtual time.
pub struct EventQueue<E> {
    /// Bucket `i > 0` holds times whose highest bit differing from `last`
    /// is bit `i - 1` (bucket 0 is unused: see `current`).
    buckets: Vec<Vec<(u64, u32)>>,
    /// Bit `i - 1` set when bucket `i > 0` is non-empty: `settle` finds
    /// the first such bucket without walking the vectors.
    nonempty: u64,
    /// The slots of the events due at `last`, in insertion order.
    current: VecDeque<u32>,
    /// The time of the last event taken out (or the smallest, once found
    /// by `settle`).
    last: u64,
    len: usize,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            buckets: (0..=64).map(|_| Vec::new()).collect(),
            nonempty: 0,
            current: VecDeque::new(),
            last: 0,
            len: 0,
            slab: Vec::new(),
            free: Vec::new(),
            popped: 0,
        }
    }
}

fn bucket(time: u64, last: u64) -> usize {
    (64 - (time ^ last).leading_zeros()) as usize
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `time`. Scheduling before the last event taken
    /// out would break the queue's order (and causality): it runs at that
    /// last event's time instead, which a debug build reports.
    pub fn push(&mut self, time: Time, event: E) {
        debug_assert!(self.popped == 0 || time.0 >= self.last, "event scheduled in the past");
        let t = time.0.max(self.last);
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
        self.put(t, slot);
        self.len += 1;
    }

    /// Files `(time, slot)` behind every event already filed for its
    /// bucket relative to `last`.
    fn put(&mut self, time: u64, slot: u32) {
        let b = bucket(time, self.last);
        if b == 0 {
            self.current.push_back(slot);
        } else {
            self.nonempty |= 1u64 << (b - 1);
            self.buckets[b].push((time, slot));
        }
    }

    /// Makes `current` hold the earliest events, if any.
    fn settle(&mut self) -> bool {
        if !self.current.is_empty() {
            return true;
        }
        if self.nonempty == 0 {
            return false;
        }
        let i = self.nonempty.trailing_zeros() as usize + 1;
        self.nonempty &= !(1u64 << (i - 1));
        let mut items = std::mem::take(&mut self.buckets[i]);
        let min = items.iter().map(|&(t, _)| t).min().expect("non-empty bucket");
        self.last = min;
        for &(t, slot) in &items {
            self.put(t, slot);
        }
        // Keep the emptied vector's allocation for reuse (every item went
        // to a lower bucket or to `current`).
        items.clear();
        self.buckets[i] = items;
        true
    }

    /// Removes the earliest event (the first scheduled among equals).
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if !self.settle() {
            return None;
        }
        let slot = self.current.pop_front().expect("settled");
        self.len -= 1;
        self.popped += 1;
        self.free.push(slot);
        let event = self.slab[slot as usize].take().expect("a queued slot holds its event");
        Some((Time(self.last), event))
    }

    /// When the earliest event is due.
    pub fn peek_time(&mut self) -> Option<Time> {
        if !self.settle() {
            return None;
        }
        Some(Time(self.last))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    /// Against a sorted map of (time, insertion number), with times spread
    /// thin (many ties, as in a symmetric collective), moderately and
    /// across the whole range of bits.
    #[test]
    fn matches_a_sorted_order_under_random_monotone_use() {
        use rand::{Rng, SeedableRng};
        for spread in [3u64, 50, 1 << 50] {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            let mut q = EventQueue::new();
            let mut reference = std::collections::BTreeMap::new();
            let (mut now, mut n) = (0u64, 0u64);
            for _ in 0..20_000 {
                if rng.gen_bool(0.55) || reference.is_empty() {
                    let t = now + rng.gen_range(0..spread);
                    q.push(Time(t), n);
                    reference.insert((t, n), n);
                    n += 1;
                } else {
                    let ((t, _), want) = reference.pop_first().unwrap();
                    assert_eq!(q.peek_time(), Some(Time(t)));
                    assert_eq!(q.pop(), Some((Time(t), want)), "spread {spread}");
                    now = t;
                }
            }
            assert_eq!(q.len(), reference.len());
            while let Some((t, want)) = reference.pop_first() {
                assert_eq!(q.pop(), Some((Time(t.0), want)));
            }
            assert!(q.is_empty() && q.pop().is_none());
        }
    }
}
