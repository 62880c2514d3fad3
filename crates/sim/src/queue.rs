//! The event queue: a radix heap on (time, insertion number).
//!
//! Ties are broken by insertion order, so two events scheduled for the same
//! picosecond always run in the order they were scheduled: with one seeded
//! RNG and no hash-ordered iteration anywhere, that makes a run a pure
//! function of its seed and inputs.
//!
//! Why a radix heap: virtual time never goes back, so every key pushed is
//! larger than the last one popped - the condition under which a radix heap
//! is exact. Its buckets are plain vectors walked in order, where a binary
//! heap of several hundred thousand pending events (65,536 nodes all busy
//! at once) spends most of its time on cache misses while sifting. The key
//! is `time << 64 | insertion number`, unique and increasing with both, so
//! the order is exactly (time, insertion). Events sit in a slab; buckets
//! hold 20-byte (key, slot) pairs.

use crate::time::Time;

/// Pending events in virtual time.
pub struct EventQueue<E> {
    /// Bucket `i > 0` holds keys whose highest bit differing from `last`
    /// is bit `i - 1`; bucket 0 holds the key equal to `last`.
    buckets: Vec<Vec<(u128, u32)>>,
    /// Bit `i - 1` set when bucket `i > 0` is non-empty: `settle` finds
    /// the first such bucket without walking 128 vectors.
    nonempty: u128,
    /// The last key taken out (or the smallest, once found by `settle`).
    last: u128,
    len: usize,
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    next_seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            buckets: (0..=128).map(|_| Vec::new()).collect(),
            nonempty: 0,
            last: 0,
            len: 0,
            slab: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            popped: 0,
        }
    }
}

fn bucket(key: u128, last: u128) -> usize {
    (128 - (key ^ last).leading_zeros()) as usize
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
        let seq = self.next_seq;
        self.next_seq += 1;
        let last_time = (self.last >> 64) as u64;
        debug_assert!(self.popped == 0 || time.0 >= last_time, "event scheduled in the past");
        let key = (u128::from(time.0.max(last_time)) << 64) | u128::from(seq);
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
        self.put(key, slot);
        self.len += 1;
    }

    /// Makes bucket 0 hold the smallest key, if any.
    fn settle(&mut self) -> bool {
        if !self.buckets[0].is_empty() {
            return true;
        }
        if self.nonempty == 0 {
            return false;
        }
        let i = self.nonempty.trailing_zeros() as usize + 1;
        self.nonempty &= !(1u128 << (i - 1));
        let items = std::mem::take(&mut self.buckets[i]);
        let min = items.iter().map(|&(k, _)| k).min().expect("non-empty bucket");
        self.last = min;
        for (k, slot) in items.iter().copied() {
            self.put(k, slot);
        }
        // Keep the emptied vector's allocation for reuse.
        let mut items = items;
        items.clear();
        if self.buckets[i].is_empty() {
            self.buckets[i] = items;
        }
        true
    }

    /// Files `(key, slot)` in its bucket relative to `last`.
    fn put(&mut self, key: u128, slot: u32) {
        let b = bucket(key, self.last);
        if b > 0 {
            self.nonempty |= 1u128 << (b - 1);
        }
        self.buckets[b].push((key, slot));
    }

    /// Removes the earliest event (the first scheduled among equals).
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if !self.settle() {
            return None;
        }
        let (key, slot) = self.buckets[0].pop().expect("settled");
        self.len -= 1;
        self.popped += 1;
        self.free.push(slot);
        let event = self.slab[slot as usize].take().expect("a queued slot holds its event");
        Some((Time((key >> 64) as u64), event))
    }

    /// When the earliest event is due.
    pub fn peek_time(&mut self) -> Option<Time> {
        if !self.settle() {
            return None;
        }
        self.buckets[0].last().map(|&(k, _)| Time((k >> 64) as u64))
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

    #[test]
    fn matches_a_sorted_order_under_random_monotone_use() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeMap::new();
        let (mut now, mut n) = (0u64, 0u64);
        for _ in 0..20_000 {
            if rng.gen_bool(0.55) || reference.is_empty() {
                let t = now + rng.gen_range(0..50);
                q.push(Time(t), n);
                reference.insert((t, n), n);
                n += 1;
            } else {
                let ((t, _), want) = reference.pop_first().unwrap();
                assert_eq!(q.peek_time(), Some(Time(t)));
                assert_eq!(q.pop(), Some((Time(t), want)));
                now = t;
            }
        }
        assert_eq!(q.len(), reference.len());
    }
}
