//! Bounded single-producer single-consumer rings between a host thread and
//! the engine: the send queue (commands) and the completion queue (events)
//! of a port, the way a host talks to a NIC.
//!
//! **The rings' `unsafe` code is in this module** (the runtime's other
//! `unsafe` code is in `interrupt` and `shm::segment`). Everything else
//! uses the safe [`Producer`] / [`Consumer`] halves, whose types make the
//! single-producer, single-consumer discipline a compile-time fact: neither
//! half is `Clone`, and every operation takes `&mut self`.
//!
//! Layout (after libfabric's `ofi_atomic_queue.h`): a power-of-two array of
//! slots, a producer index and a consumer index that only ever grow
//! (wrapping), each on its own cache line so the two sides do not bounce one
//! line between cores. Each side also keeps a private copy of the other's
//! index and rereads the shared one only when the copy says the ring is full
//! (producer) or empty (consumer), so in steady state a push or pop touches
//! one shared line.
//!
//! Entries are [`RingEntry`] values: `Copy`, no pointers, no destructors
//! (host buffers are named by address offsets into runtime-allocated
//! memory), so the same layout could later live in memory shared between
//! processes.
//!
//! # Model checking
//!
//! Under `cfg(loom)` the atomics and cells come from loom, and the tests at
//! the bottom explore every interleaving of a producer and a consumer:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p outboard-runtime --lib --release ring::loom_tests
//! ```

#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};

/// `std`'s cell behind loom's closure-based API, so one code path serves
/// both builds.
#[cfg(not(loom))]
struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    fn new(v: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }
    fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// A value that may travel through a ring: plain data, no pointers, no
/// destructor. Implemented for the engine's commands and events, which hold
/// only integers and host-buffer offsets.
pub trait RingEntry: Copy + Send + 'static {}

impl RingEntry for outboard_engine::Command {}
impl RingEntry for outboard_engine::Event {}
impl RingEntry for u64 {}

struct Ring<T> {
    /// Next slot the consumer reads; written only by the consumer.
    head: CachePadded<AtomicUsize>,
    /// Next slot the producer writes; written only by the producer.
    tail: CachePadded<AtomicUsize>,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
}

// SAFETY: a slot is written only by the single producer while it is outside
// `head..tail` and read only by the single consumer while it is inside; the
// Release store of `tail` (after the write) and the Acquire load of it
// (before the read) order the two, and symmetrically for `head`. `T: Send`
// because values move between threads.
unsafe impl<T: RingEntry> Sync for Ring<T> {}
// SAFETY: as above; the ring owns only `T: Send` values.
unsafe impl<T: RingEntry> Send for Ring<T> {}

/// Creates a ring with room for `capacity` entries (rounded up to a power of
/// two, at least 2).
pub fn channel<T: RingEntry>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let ring = Arc::new(Ring {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        slots,
        mask: cap - 1,
    });
    (
        Producer { ring: ring.clone(), tail: 0, head_seen: 0 },
        Consumer { ring, head: 0, tail_seen: 0 },
    )
}

/// The writing half of a ring.
pub struct Producer<T: RingEntry> {
    ring: Arc<Ring<T>>,
    /// Our own index (the shared one is only ever written by us).
    tail: usize,
    /// Last consumer index we read.
    head_seen: usize,
}

impl<T: RingEntry> Producer<T> {
    /// Appends `v`, or hands it back when the ring is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let cap = self.ring.mask + 1;
        if self.tail.wrapping_sub(self.head_seen) == cap {
            self.head_seen = self.ring.head.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_seen) == cap {
                return Err(v);
            }
        }
        let slot = &self.ring.slots[self.tail & self.ring.mask];
        // SAFETY: the slot is outside `head..tail` (checked above against a
        // head value the consumer published with Release after its last read
        // of this slot), so the consumer does not touch it until we publish
        // the new tail below. Only this `Producer` (not `Clone`, `&mut self`)
        // writes slots.
        slot.with_mut(|p| unsafe { (*p).write(v) });
        self.tail = self.tail.wrapping_add(1);
        self.ring.tail.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Whether the consumer has taken every entry pushed so far.
    pub fn is_drained(&self) -> bool {
        self.ring.head.load(Ordering::Acquire) == self.tail
    }
}

/// The reading half of a ring.
pub struct Consumer<T: RingEntry> {
    ring: Arc<Ring<T>>,
    /// Our own index.
    head: usize,
    /// Last producer index we read.
    tail_seen: usize,
}

impl<T: RingEntry> Consumer<T> {
    /// Takes the oldest entry, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.tail_seen {
            self.tail_seen = self.ring.tail.load(Ordering::Acquire);
            if self.head == self.tail_seen {
                return None;
            }
        }
        let slot = &self.ring.slots[self.head & self.ring.mask];
        // SAFETY: the slot is inside `head..tail`; the producer initialised
        // it before its Release store of a tail we loaded with Acquire, and
        // it does not write the slot again until we publish a head past it.
        // `T: Copy`, so reading it out leaves nothing to drop.
        let v = slot.with(|p| unsafe { (*p).assume_init_read() });
        self.head = self.head.wrapping_add(1);
        self.ring.head.store(self.head, Ordering::Release);
        Some(v)
    }

    /// Whether an entry is waiting (a fresh look at the producer's index).
    pub fn has_pending(&self) -> bool {
        self.ring.tail.load(Ordering::Acquire) != self.head
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_full_ring_hands_the_value_back() {
        let (mut p, mut c) = channel::<u64>(3);
        assert!(c.pop().is_none());
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(99), Err(99), "capacity rounds 3 up to 4");
        assert!(c.has_pending());
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        assert_eq!((1..5).map(|_| c.pop().unwrap()).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        assert!(c.pop().is_none());
        assert!(p.is_drained());
    }

    #[test]
    fn a_million_values_cross_threads_in_order() {
        let (mut p, mut c) = channel::<u64>(64);
        const N: u64 = 1_000_000;
        let t = std::thread::spawn(move || {
            for i in 0..N {
                let mut v = i;
                while let Err(back) = p.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0;
        while next < N {
            if let Some(v) = c.pop() {
                assert_eq!(v, next);
                next += 1;
            } else {
                std::thread::yield_now();
            }
        }
        t.join().unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Every interleaving of a producer pushing three values through a
    /// two-slot ring (so it fills and wraps) and a consumer taking them:
    /// values arrive once, in order, and never torn.
    #[test]
    fn spsc_delivers_in_order_under_every_interleaving() {
        loom::model(|| {
            let (mut p, mut c) = channel::<u64>(2);
            let t = loom::thread::spawn(move || {
                for i in 1..=3u64 {
                    let mut v = i * 0x0101_0101_0101_0101;
                    while let Err(back) = p.push(v) {
                        v = back;
                        loom::thread::yield_now();
                    }
                }
            });
            let mut got = Vec::new();
            while got.len() < 3 {
                match c.pop() {
                    Some(v) => got.push(v),
                    None => loom::thread::yield_now(),
                }
            }
            t.join().unwrap();
            assert_eq!(got, vec![0x0101_0101_0101_0101, 0x0202_0202_0202_0202, 0x0303_0303_0303_0303]);
            assert!(c.pop().is_none());
        });
    }
}
