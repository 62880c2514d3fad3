//! Single-producer single-consumer rings of fixed-size byte slots inside a
//! [`Segment`], between a client process and the node's engine process:
//! a port's command ring (client to engine) and completion ring (engine to
//! client). Another module encodes commands and events into the slots.
//!
//! The algorithm is that of [`crate::ring`]: a power-of-two number of
//! slots, a consumer index (`head`) and a producer index (`tail`) that only
//! grow, each on its own 64-byte line, and on each side a private copy of
//! the other side's index, reread only when the copy says full (producer)
//! or empty (consumer). The producer copies an entry into its slot, then
//! publishes the new `tail` with a Release store; the consumer loads `tail`
//! with Acquire before copying the slot out, and publishes `head` with
//! Release after. Layout at the ring's offset (64-byte aligned):
//!
//! ```text
//! +0    magic u64, slot count u64, slot size u64   (written by init)
//! +64   head u64   (consumer index)
//! +128  tail u64   (producer index)
//! +192  slots: slot count x slot size bytes
//! ```
//!
//! The other process is untrusted. Each half reads the header once, at
//! attach, and keeps its own copy of the geometry and of its own index; the
//! only thing it rereads from shared memory is the other side's index, and
//! a value that cannot happen (the consumer past the producer, more than a
//! ring's worth of entries outstanding, an index going backwards) is
//! [`RingError::Corrupt`], after which the half stays broken. Slot offsets
//! are computed from private values only, and every access goes through
//! the segment's bounds checks, so a hostile peer can make the ring deliver
//! garbage bytes or stop, never reach outside the segment. This module has
//! no `unsafe` code of its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::segment::Segment;

/// "OBSHMRG1", little-endian.
const MAGIC: u64 = u64::from_le_bytes(*b"OBSHMRG1");
const LINE: u64 = 64;
const HEAD: u64 = LINE;
const TAIL: u64 = 2 * LINE;
const HEADER: usize = 3 * LINE as usize;

/// Bytes a ring of `slots` slots of `slot_bytes` bytes takes in a segment:
/// the three-line header and the slots. Saturates at `usize::MAX` (a size no
/// segment holds) instead of overflowing.
pub fn ring_bytes(slots: usize, slot_bytes: usize) -> usize {
    slots.saturating_mul(slot_bytes).saturating_add(HEADER)
}

/// Why a ring operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The caller's geometry or offset is unusable (not 64-byte aligned,
    /// slot count not a power of two, slot size not a nonzero multiple of
    /// 8, the ring not inside the segment).
    #[error("bad ring layout: {what}")]
    Layout {
        /// What is wrong.
        what: &'static str,
    },
    /// Shared memory holds something the other side could not have
    /// written by following the protocol: a bad header, or an impossible
    /// index. The half that saw it stays broken.
    #[error("ring corrupt: {what}")]
    Corrupt {
        /// What was seen.
        what: &'static str,
    },
    /// The entry (push) or output buffer (pop) is longer than a slot.
    #[error("{len}-byte entry for {slot_bytes}-byte slots")]
    EntrySize {
        /// Length given.
        len: usize,
        /// The ring's slot size.
        slot_bytes: usize,
    },
}

fn layout(what: &'static str) -> RingError {
    RingError::Layout { what }
}

fn corrupt(what: &'static str) -> RingError {
    RingError::Corrupt { what }
}

/// The ring's layout operations (a namespace; the halves are
/// [`ShmProducer`] and [`ShmConsumer`]).
#[derive(Debug)]
pub enum ShmRing {}

/// Geometry checked against a segment.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    off: u64,
    slots: u64,
    slot_bytes: usize,
}

impl Geometry {
    fn check(
        seg: &Segment,
        off: u64,
        slots: u64,
        slot_bytes: u64,
    ) -> Result<Geometry, &'static str> {
        if off % LINE != 0 {
            return Err("offset not 64-byte aligned");
        }
        if !slots.is_power_of_two() {
            return Err("slot count not a power of two");
        }
        if slot_bytes == 0 || slot_bytes % 8 != 0 {
            return Err("slot size not a nonzero multiple of 8");
        }
        let (Ok(n), Ok(b)) = (usize::try_from(slots), usize::try_from(slot_bytes)) else {
            return Err("ring larger than the segment");
        };
        let end = u64::try_from(ring_bytes(n, b))
            .ok()
            .and_then(|r| off.checked_add(r));
        match end {
            Some(end) if end <= seg.len() as u64 && ring_bytes(n, b) != usize::MAX => {}
            _ => return Err("ring larger than the segment"),
        }
        Ok(Geometry {
            off,
            slots,
            slot_bytes: b,
        })
    }

    fn slot_off(&self, index: u64) -> u64 {
        // In range: `index & (slots - 1) < slots`, and the whole ring was
        // checked to lie inside the segment.
        self.off + HEADER as u64 + (index & (self.slots - 1)) * self.slot_bytes as u64
    }
}

impl ShmRing {
    /// Writes an empty ring's header at `off` of `seg`: `slots` (a power
    /// of two) slots of `slot_bytes` (a nonzero multiple of 8) bytes,
    /// [`ring_bytes`] in all, `off` 64-byte aligned. Call it before telling
    /// the other side where the ring is; the magic is stored last, with
    /// Release, so an attach that sees it sees the rest.
    pub fn init(seg: &Segment, off: u64, slots: usize, slot_bytes: usize) -> Result<(), RingError> {
        let g = Geometry::check(seg, off, slots as u64, slot_bytes as u64).map_err(layout)?;
        let word = |o: u64| {
            seg.atomic_u64(g.off + o)
                .ok_or(layout("header outside the segment"))
        };
        word(0)?.store(0, Ordering::Relaxed);
        word(8)?.store(g.slots, Ordering::Relaxed);
        word(16)?.store(slot_bytes as u64, Ordering::Relaxed);
        word(HEAD)?.store(0, Ordering::Relaxed);
        word(TAIL)?.store(0, Ordering::Relaxed);
        word(0)?.store(MAGIC, Ordering::Release);
        Ok(())
    }
}

/// Both halves' view: the segment, the checked geometry, and the two
/// shared indices (read at attach).
#[derive(Debug)]
struct Shared {
    seg: Arc<Segment>,
    g: Geometry,
    head0: u64,
    tail0: u64,
}

impl Shared {
    fn attach(seg: Arc<Segment>, off: u64) -> Result<Shared, RingError> {
        if off % LINE != 0 {
            return Err(layout("offset not 64-byte aligned"));
        }
        let word = |o: u64| {
            off.checked_add(o)
                .and_then(|a| seg.atomic_u64(a))
                .map(|w| w.load(Ordering::Acquire))
        };
        let magic = word(0).ok_or(layout("header outside the segment"))?;
        if magic != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let (Some(slots), Some(slot_bytes), Some(head), Some(tail)) =
            (word(8), word(16), word(HEAD), word(TAIL))
        else {
            return Err(corrupt("header outside the segment"));
        };
        let g = Geometry::check(&seg, off, slots, slot_bytes).map_err(corrupt)?;
        if tail.wrapping_sub(head) > g.slots {
            return Err(corrupt("more entries outstanding than slots"));
        }
        Ok(Shared {
            seg,
            g,
            head0: head,
            tail0: tail,
        })
    }

    fn index(&self, which: u64) -> Result<&AtomicU64, RingError> {
        // Checked at attach; cannot fail.
        self.seg
            .atomic_u64(self.g.off + which)
            .ok_or(corrupt("index outside the segment"))
    }
}

/// The writing half of a ring in shared memory. Not `Clone`; every
/// operation takes `&mut self`, so one process-side owner writes.
#[derive(Debug)]
pub struct ShmProducer {
    s: Shared,
    /// Our own index: the shared one is written only by us, never reread.
    tail: u64,
    /// Last consumer index we read.
    head_seen: u64,
    broken: Option<RingError>,
}

impl ShmProducer {
    /// Attaches to the ring [`ShmRing::init`] wrote at `off` of `seg`,
    /// after checking its header (magic, geometry, the whole ring inside
    /// the segment, consistent indices).
    pub fn attach(seg: Arc<Segment>, off: u64) -> Result<ShmProducer, RingError> {
        let s = Shared::attach(seg, off)?;
        Ok(ShmProducer {
            tail: s.tail0,
            head_seen: s.head0,
            s,
            broken: None,
        })
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.s.g.slot_bytes
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.s.g.slots as usize
    }

    /// Copies `entry` (at most a slot; the rest of the slot is zeroed) into
    /// the next slot and publishes it. `Ok(false)`: the ring is full.
    pub fn push(&mut self, entry: &[u8]) -> Result<bool, RingError> {
        if let Some(e) = self.broken {
            return Err(e);
        }
        let sb = self.s.g.slot_bytes;
        if entry.len() > sb {
            return Err(RingError::EntrySize {
                len: entry.len(),
                slot_bytes: sb,
            });
        }
        let cap = self.s.g.slots;
        if self.tail.wrapping_sub(self.head_seen) == cap {
            let head = self.s.index(HEAD)?.load(Ordering::Acquire);
            // The consumer only moves forward, and never past us.
            if head.wrapping_sub(self.head_seen) > self.tail.wrapping_sub(self.head_seen) {
                return Err(self.fail("consumer index behind its last value or past the producer"));
            }
            self.head_seen = head;
            if self.tail.wrapping_sub(head) == cap {
                return Ok(false);
            }
        }
        let at = self.s.g.slot_off(self.tail);
        let seg = &self.s.seg;
        seg.write(at, entry)
            .map_err(|_| corrupt("slot outside the segment"))?;
        seg.fill(at + entry.len() as u64, sb - entry.len(), 0)
            .map_err(|_| corrupt("slot outside the segment"))?;
        self.tail = self.tail.wrapping_add(1);
        self.s.index(TAIL)?.store(self.tail, Ordering::Release);
        Ok(true)
    }

    /// Whether the consumer has taken every entry pushed so far (a fresh
    /// look at its index).
    pub fn is_drained(&self) -> bool {
        self.s
            .index(HEAD)
            .is_ok_and(|h| h.load(Ordering::Acquire) == self.tail)
    }

    fn fail(&mut self, what: &'static str) -> RingError {
        let e = corrupt(what);
        self.broken = Some(e);
        e
    }
}

/// The reading half of a ring in shared memory. Not `Clone`; every
/// operation takes `&mut self`.
#[derive(Debug)]
pub struct ShmConsumer {
    s: Shared,
    /// Our own index: the shared one is written only by us, never reread.
    head: u64,
    /// Last producer index we read.
    tail_seen: u64,
    broken: Option<RingError>,
}

impl ShmConsumer {
    /// Attaches to the ring [`ShmRing::init`] wrote at `off` of `seg`,
    /// after checking its header as [`ShmProducer::attach`] does.
    pub fn attach(seg: Arc<Segment>, off: u64) -> Result<ShmConsumer, RingError> {
        let s = Shared::attach(seg, off)?;
        Ok(ShmConsumer {
            head: s.head0,
            tail_seen: s.tail0,
            s,
            broken: None,
        })
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.s.g.slot_bytes
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.s.g.slots as usize
    }

    /// Copies the first `out.len()` bytes (at most a slot) of the oldest
    /// entry into `out` and frees its slot. `Ok(false)`: the ring is empty.
    pub fn pop(&mut self, out: &mut [u8]) -> Result<bool, RingError> {
        if let Some(e) = self.broken {
            return Err(e);
        }
        let sb = self.s.g.slot_bytes;
        if out.len() > sb {
            return Err(RingError::EntrySize {
                len: out.len(),
                slot_bytes: sb,
            });
        }
        if self.head == self.tail_seen {
            let tail = self.s.index(TAIL)?.load(Ordering::Acquire);
            // The producer only moves forward, and never more than a ring
            // ahead of us. (We are at `tail_seen`, so an index behind it
            // wraps to a huge distance.)
            if tail.wrapping_sub(self.head) > self.s.g.slots {
                return Err(
                    self.fail("producer index behind its last value or more than a ring ahead")
                );
            }
            self.tail_seen = tail;
            if self.head == tail {
                return Ok(false);
            }
        }
        let at = self.s.g.slot_off(self.head);
        self.s
            .seg
            .read(at, out)
            .map_err(|_| corrupt("slot outside the segment"))?;
        self.head = self.head.wrapping_add(1);
        self.s.index(HEAD)?.store(self.head, Ordering::Release);
        Ok(true)
    }

    /// Whether an entry is waiting (a fresh look at the producer's index;
    /// a corrupt index also says yes, and the next [`ShmConsumer::pop`]
    /// reports it).
    pub fn has_pending(&self) -> bool {
        self.broken.is_some()
            || self
                .s
                .index(TAIL)
                .map_or(true, |t| t.load(Ordering::Acquire) != self.head)
    }

    fn fail(&mut self, what: &'static str) -> RingError {
        let e = corrupt(what);
        self.broken = Some(e);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(slots: usize, slot_bytes: usize) -> (ShmProducer, ShmConsumer, Arc<Segment>) {
        let seg =
            Arc::new(Segment::create("ring-test", ring_bytes(slots, slot_bytes) + 64).unwrap());
        ShmRing::init(&seg, 64, slots, slot_bytes).unwrap();
        let p = ShmProducer::attach(seg.clone(), 64).unwrap();
        let c = ShmConsumer::attach(seg.clone(), 64).unwrap();
        (p, c, seg)
    }

    #[test]
    fn fifo_order_full_and_empty() {
        let (mut p, mut c, _seg) = ring(4, 16);
        let mut out = [0u8; 16];
        assert!(!c.has_pending());
        assert_eq!(c.pop(&mut out), Ok(false));
        for i in 0..4u8 {
            assert_eq!(p.push(&[i; 3]), Ok(true));
        }
        assert_eq!(p.push(&[99]), Ok(false), "full");
        assert!(c.has_pending());
        assert_eq!(c.pop(&mut out), Ok(true));
        assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p.push(&[4; 16]), Ok(true));
        let mut got = Vec::new();
        while c.pop(&mut out).unwrap() {
            got.push(out);
        }
        let short = |v: u8| {
            let mut s = [0u8; 16];
            s[..3].fill(v);
            s
        };
        assert_eq!(
            got,
            vec![short(1), short(2), short(3), [4; 16]],
            "rest of the slot zeroed"
        );
        assert!(p.is_drained());
        assert_eq!(
            p.push(&[0; 17]),
            Err(RingError::EntrySize {
                len: 17,
                slot_bytes: 16
            })
        );
        assert_eq!(
            c.pop(&mut [0; 24]),
            Err(RingError::EntrySize {
                len: 24,
                slot_bytes: 16
            })
        );
        let mut first = [0u8; 4];
        p.push(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(
            c.pop(&mut first),
            Ok(true),
            "a shorter read takes the slot's start"
        );
        assert_eq!(first, [1, 2, 3, 4]);
    }

    #[test]
    fn init_and_attach_check_the_layout() {
        let seg = Arc::new(Segment::create("ring-test", 4096).unwrap());
        assert!(
            matches!(ShmRing::init(&seg, 8, 4, 16), Err(RingError::Layout { .. })),
            "misaligned"
        );
        assert!(
            matches!(ShmRing::init(&seg, 0, 3, 16), Err(RingError::Layout { .. })),
            "not a power of two"
        );
        assert!(
            matches!(ShmRing::init(&seg, 0, 4, 12), Err(RingError::Layout { .. })),
            "slot size"
        );
        assert!(
            matches!(ShmRing::init(&seg, 0, 4, 0), Err(RingError::Layout { .. })),
            "slot size"
        );
        assert!(
            matches!(
                ShmRing::init(&seg, 0, 64, 64),
                Err(RingError::Layout { .. })
            ),
            "too big"
        );
        assert!(
            matches!(
                ShmRing::init(&seg, u64::MAX - 63, 1, 8),
                Err(RingError::Layout { .. })
            ),
            "overflow"
        );
        assert!(
            matches!(
                ShmRing::init(&seg, 0, usize::MAX / 2 + 1, 8),
                Err(RingError::Layout { .. })
            ),
            "overflow"
        );
        ShmRing::init(&seg, 4096 - ring_bytes(2, 32) as u64, 2, 32).expect("exactly fits");
        assert!(
            matches!(
                ShmConsumer::attach(seg.clone(), 0),
                Err(RingError::Corrupt { .. })
            ),
            "no magic"
        );
        assert!(matches!(
            ShmConsumer::attach(seg.clone(), 1 << 40),
            Err(RingError::Layout { .. })
        ));
        assert!(matches!(
            ShmProducer::attach(seg.clone(), u64::MAX - 63),
            Err(RingError::Layout { .. })
        ));
    }

    /// Garbage in every header word an attacher reads, and in the live
    /// indices: always `Corrupt` (or a harmless outcome), never a panic or
    /// an access outside the segment.
    #[test]
    fn corrupted_header_or_indices_are_errors() {
        let bad_words = [0u64, 3, 7, 12, u64::MAX, 1 << 63, 1 << 32, 1 << 20, MAGIC];
        for word in [0u64, 8, 16] {
            for &v in bad_words
                .iter()
                .chain(if word == 16 { &[1u64][..] } else { &[] })
            {
                if word == 0 && v == MAGIC {
                    continue;
                }
                let (_p, _c, seg) = ring(4, 16);
                seg.atomic_u64(64 + word)
                    .unwrap()
                    .store(v, Ordering::Relaxed);
                assert!(
                    matches!(
                        ShmConsumer::attach(seg.clone(), 64),
                        Err(RingError::Corrupt { .. })
                    ),
                    "word {word} = {v}"
                );
                assert!(matches!(
                    ShmProducer::attach(seg.clone(), 64),
                    Err(RingError::Corrupt { .. })
                ));
            }
        }
        // Outstanding entries beyond the ring at attach.
        let (_p, _c, seg) = ring(4, 16);
        seg.atomic_u64(64 + TAIL)
            .unwrap()
            .store(5, Ordering::Relaxed);
        assert!(matches!(
            ShmConsumer::attach(seg.clone(), 64),
            Err(RingError::Corrupt { .. })
        ));

        // The consumer sees a producer index more than a ring ahead, and
        // stays broken.
        let (mut p, mut c, seg) = ring(4, 16);
        p.push(&[1]).unwrap();
        let mut out = [0u8; 16];
        assert_eq!(c.pop(&mut out), Ok(true));
        let tail = seg.atomic_u64(64 + TAIL).unwrap();
        tail.store(1 + 5, Ordering::Release);
        assert!(c.has_pending());
        assert!(matches!(c.pop(&mut out), Err(RingError::Corrupt { .. })));
        tail.store(1, Ordering::Release);
        assert!(
            matches!(c.pop(&mut out), Err(RingError::Corrupt { .. })),
            "stays broken"
        );

        // A producer index going backwards.
        let (mut p, mut c, seg) = ring(4, 16);
        for _ in 0..3 {
            p.push(&[1]).unwrap();
        }
        for _ in 0..3 {
            assert_eq!(c.pop(&mut out), Ok(true));
        }
        seg.atomic_u64(64 + TAIL)
            .unwrap()
            .store(u64::MAX, Ordering::Release);
        assert!(matches!(c.pop(&mut out), Err(RingError::Corrupt { .. })));

        // A producer index behind what the consumer already saw.
        let (mut p, mut c, seg) = ring(8, 16);
        for _ in 0..5 {
            p.push(&[1]).unwrap();
        }
        assert_eq!(c.pop(&mut out), Ok(true)); // sees tail 5
        seg.atomic_u64(64 + TAIL)
            .unwrap()
            .store(3, Ordering::Release);
        for _ in 0..4 {
            assert_eq!(
                c.pop(&mut out),
                Ok(true),
                "entries it already saw published"
            );
        }
        assert!(
            matches!(c.pop(&mut out), Err(RingError::Corrupt { .. })),
            "tail 3 < seen 5"
        );

        // The producer sees a consumer index past itself, then behind.
        for bad in [3u64, u64::MAX, 9] {
            let (mut p, _c, seg) = ring(2, 8);
            p.push(&[1]).unwrap();
            p.push(&[2]).unwrap();
            seg.atomic_u64(64 + HEAD)
                .unwrap()
                .store(bad, Ordering::Release);
            assert!(
                matches!(p.push(&[3]), Err(RingError::Corrupt { .. })),
                "head {bad}"
            );
            assert!(
                matches!(p.push(&[3]), Err(RingError::Corrupt { .. })),
                "stays broken"
            );
        }
        // Garbage in the slots is just bytes.
        let (mut p, mut c, seg) = ring(2, 8);
        p.push(&[1]).unwrap();
        seg.fill(64 + HEADER as u64, 8, 0xff).unwrap();
        assert_eq!(c.pop(&mut out[..8]), Ok(true));
        assert_eq!(out[..8], [0xff; 8]);
    }

    fn entry(i: u64, slot: usize) -> Vec<u8> {
        // The counter, then bytes derived from it, so a torn or stale slot
        // shows.
        let mut e = vec![0u8; slot];
        e[..8].copy_from_slice(&i.to_le_bytes());
        for (k, b) in e[8..].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(k as u8);
        }
        e
    }

    fn consume_in_order(c: &mut ShmConsumer, n: u64, mut alive: impl FnMut() -> bool) {
        let slot = c.slot_bytes();
        let mut out = vec![0u8; slot];
        let mut next = 0u64;
        // Spin while empty (to pop a slot the moment it is published, which
        // is what catches a producer publishing before it writes), yielding
        // now and then for a loaded machine.
        let mut idle = 0u32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while next < n {
            if c.pop(&mut out).unwrap() {
                assert_eq!(out, entry(next, slot), "entry {next}");
                next += 1;
                idle = 0;
            } else {
                assert!(
                    alive() || c.has_pending(),
                    "producer gone after {next} entries"
                );
                assert!(
                    std::time::Instant::now() < deadline,
                    "stuck after {next} entries"
                );
                idle += 1;
                if idle % 1024 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        let mut extra = vec![0u8; slot];
        assert_eq!(
            c.pop(&mut extra),
            Ok(false),
            "exactly once: nothing after the last"
        );
    }

    /// Pushes entries `0..n`, waiting while the ring is full unless
    /// `consumer_alive` says the consumer is gone (then it panics).
    fn produce(p: &mut ShmProducer, n: u64, consumer_alive: impl Fn() -> bool) {
        let slot = p.slot_bytes();
        for i in 0..n {
            let e = entry(i, slot);
            while !p.push(&e).unwrap() {
                assert!(consumer_alive(), "consumer gone before entry {i}");
                std::thread::yield_now();
            }
        }
    }

    #[test]
    fn entries_cross_threads_in_order_exactly_once() {
        // Small slots (many entries), then large ones (a long copy, which
        // widens the window in which a consumer could see a slot published
        // before it is written).
        for (slots, slot_bytes, n) in [(64, 24, 300_000), (4, 4096, 30_000)] {
            let (mut p, mut c, _seg) = ring(slots, slot_bytes);
            let t = std::thread::spawn(move || produce(&mut p, n, || true));
            consume_in_order(&mut c, n, || true);
            t.join().unwrap();
        }
    }

    const CHILD_ENV: &str = "OUTBOARD_SHM_RING_CHILD_FD";
    const PARENT_ENV: &str = "OUTBOARD_SHM_RING_PARENT";
    const CROSS_N: u64 = 100_000;
    const CROSS_SLOTS: usize = 32;
    const CROSS_SLOT: usize = 40;

    /// The child half of `entries_cross_processes_in_order`, which runs it
    /// with `--ignored`; run alone it does nothing.
    #[test]
    #[ignore = "the child process of entries_cross_processes_in_order; its parent runs it"]
    #[allow(unsafe_code)]
    fn cross_process_child_pushes() {
        use std::os::fd::{FromRawFd, OwnedFd, RawFd};
        let Ok(v) = std::env::var(CHILD_ENV) else {
            return;
        };
        let raw: RawFd = v.parse().unwrap();
        // SAFETY: the parent left this fd open across exec for us alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let seg = Arc::new(Segment::open(fd).unwrap());
        let mut p = ShmProducer::attach(seg, 0).unwrap();
        // Stop (rather than spin on a full ring for ever) if the parent
        // died: we are then reparented.
        let parent: u32 = std::env::var(PARENT_ENV).unwrap().parse().unwrap();
        produce(&mut p, CROSS_N, || {
            std::os::unix::process::parent_id() == parent
        });
    }

    /// Kills the child when the parent's test fails.
    struct KillOnDrop(std::process::Child);

    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if let Ok(None) = self.0.try_wait() {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }

    #[test]
    fn entries_cross_processes_in_order() {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        use std::os::fd::AsRawFd;
        let seg =
            Arc::new(Segment::create("ring-xproc", ring_bytes(CROSS_SLOTS, CROSS_SLOT)).unwrap());
        ShmRing::init(&seg, 0, CROSS_SLOTS, CROSS_SLOT).unwrap();
        let mut c = ShmConsumer::attach(seg.clone(), 0).unwrap();
        let inherited = seg.fd().try_clone_to_owned().unwrap();
        fcntl(&inherited, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
        let path = module_path!().split_once("::").unwrap().1;
        let name = format!("{path}::cross_process_child_pushes");
        let mut child = KillOnDrop(
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", &name, "--ignored", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, inherited.as_raw_fd().to_string())
                .env(PARENT_ENV, std::process::id().to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        drop(inherited);
        let mut exited = None;
        consume_in_order(&mut c, CROSS_N, || {
            if exited.is_none() {
                exited = child.0.try_wait().unwrap();
            }
            exited.is_none()
        });
        let status = match exited {
            Some(s) => s,
            None => child.0.wait().unwrap(),
        };
        assert!(status.success(), "child: {status}");
    }
}
