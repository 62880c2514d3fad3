//! The client side's allocator of registered memory inside its segment:
//! the shared-memory counterpart of [`crate::memory::HostMemory`]'s address
//! bookkeeping. Addresses are segment offsets (what commands carry and the
//! engine checks against the segment); the heap only keeps the books and
//! never touches the bytes, so a block is not zeroed on allocation.
//!
//! Like `HostMemory`, every block is 64-byte aligned and followed by a
//! guard gap of at least 64 bytes, so an off-by-one access reaches no
//! neighbour. Free space is a set of extents, coalesced with its neighbours
//! on free, found best-fit (smallest extent that fits, lowest address among
//! equals) through an index by size: `alloc`, `free` and `check` are
//! O(log n) in the number of blocks and extents.

use std::collections::{BTreeMap, BTreeSet};

use outboard_host::MemoryError;

/// Alignment of every block and the least gap after it.
const GUARD: u64 = 64;

/// Bytes a block of `len` bytes takes: itself and its guard, in whole
/// 64-byte units.
fn span(len: u32) -> u64 {
    (u64::from(len) + GUARD).div_ceil(GUARD) * GUARD
}

/// An allocator over `[start, end)` of a segment.
#[derive(Debug, Clone)]
pub struct ShmHeap {
    /// Live blocks: address to requested length.
    live: BTreeMap<u64, u32>,
    /// Free extents: address to length.
    free_by_addr: BTreeMap<u64, u64>,
    /// The same extents as (length, address).
    free_by_size: BTreeSet<(u64, u64)>,
    live_bytes: u64,
}

impl ShmHeap {
    /// A heap over `[start, end)`, shrunk inward to 64-byte boundaries
    /// (empty when nothing is left).
    pub fn new(start: u64, end: u64) -> ShmHeap {
        let mut h = ShmHeap {
            live: BTreeMap::new(),
            free_by_addr: BTreeMap::new(),
            free_by_size: BTreeSet::new(),
            live_bytes: 0,
        };
        if let Some(s) = start.checked_next_multiple_of(GUARD) {
            let e = end / GUARD * GUARD;
            if s < e {
                h.insert_free(s, e - s);
            }
        }
        h
    }

    fn insert_free(&mut self, addr: u64, len: u64) {
        self.free_by_addr.insert(addr, len);
        self.free_by_size.insert((len, addr));
    }

    fn remove_free(&mut self, addr: u64, len: u64) {
        self.free_by_addr.remove(&addr);
        self.free_by_size.remove(&(len, addr));
    }

    /// Allocates `len` bytes and returns their address (64-byte aligned).
    /// [`MemoryError::Exhausted`] when no free extent holds the block and
    /// its guard.
    pub fn alloc(&mut self, len: u32) -> Result<u64, MemoryError> {
        let need = span(len);
        let Some(&(size, addr)) = self.free_by_size.range((need, 0)..).next() else {
            return Err(MemoryError::Exhausted { len });
        };
        self.remove_free(addr, size);
        if size > need {
            self.insert_free(addr + need, size - need);
        }
        self.live.insert(addr, len);
        self.live_bytes += u64::from(len);
        Ok(addr)
    }

    /// Frees the block at `addr` (exactly what [`ShmHeap::alloc`] returned)
    /// and returns its length; an address that is not a live block's start
    /// (never allocated, already freed, inside a block) is
    /// [`MemoryError::Invalid`].
    pub fn free(&mut self, addr: u64) -> Result<u32, MemoryError> {
        let len = self
            .live
            .remove(&addr)
            .ok_or(MemoryError::Invalid { addr, len: 0 })?;
        self.live_bytes -= u64::from(len);
        let (mut start, mut size) = (addr, span(len));
        if let Some((&pa, &ps)) = self.free_by_addr.range(..addr).next_back() {
            if pa + ps == addr {
                self.remove_free(pa, ps);
                start = pa;
                size += ps;
            }
        }
        if let Some(&ns) = self.free_by_addr.get(&(addr + span(len))) {
            self.remove_free(addr + span(len), ns);
            size += ns;
        }
        self.insert_free(start, size);
        Ok(len)
    }

    /// Whether `addr..addr+len` lies inside one live block;
    /// [`MemoryError::Invalid`] when it misses, straddles or overflows, as
    /// `HostMemory::read` and `write` report it.
    pub fn check(&self, addr: u64, len: usize) -> Result<(), MemoryError> {
        let invalid = MemoryError::Invalid { addr, len };
        let (&start, &blen) = self.live.range(..=addr).next_back().ok_or(invalid)?;
        let end = u64::try_from(len)
            .ok()
            .and_then(|l| (addr - start).checked_add(l))
            .ok_or(invalid)?;
        if end <= u64::from(blen) {
            Ok(())
        } else {
            Err(invalid)
        }
    }

    /// Number of live blocks.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Bytes requested by the live blocks.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Length of the largest free extent (a block of up to this minus the
    /// 64-byte guard fits).
    pub fn largest_free(&self) -> u64 {
        self.free_by_size.last().map_or(0, |&(len, _)| len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn alloc_free_reuse_and_coalescing() {
        let mut h = ShmHeap::new(100, 100 + 4096);
        let a = h.alloc(100).unwrap();
        let b = h.alloc(10).unwrap();
        let c = h.alloc(0).unwrap();
        assert_eq!(a, 128, "aligned up");
        assert_eq!(
            b,
            a + 192,
            "100 bytes and a 64-byte guard, in 64-byte units"
        );
        assert_eq!(c, b + 128);
        assert_eq!((h.live(), h.live_bytes()), (3, 110));
        assert_eq!(h.free(b), Ok(10));
        assert_eq!(h.alloc(64), Ok(b), "the freed block is reused");
        assert_eq!(h.free(b), Ok(64));
        h.free(a).unwrap();
        assert_eq!(h.alloc(250), Ok(a), "a and b coalesced");
        h.free(a).unwrap();
        h.free(c).unwrap();
        assert_eq!(h.live(), 0);
        assert_eq!(
            h.largest_free(),
            4096 - 64,
            "one extent again (start aligned up to 128, end down to 4160)"
        );
    }

    #[test]
    fn double_free_and_unknown_addresses_are_invalid() {
        let mut h = ShmHeap::new(0, 4096);
        let a = h.alloc(100).unwrap();
        assert_eq!(
            h.free(a + 64),
            Err(MemoryError::Invalid {
                addr: a + 64,
                len: 0
            }),
            "inside a block"
        );
        assert_eq!(h.free(a), Ok(100));
        assert_eq!(
            h.free(a),
            Err(MemoryError::Invalid { addr: a, len: 0 }),
            "double free"
        );
        assert!(h.free(1 << 40).is_err());
    }

    #[test]
    fn check_accepts_exactly_the_live_bytes() {
        let mut h = ShmHeap::new(0, 4096);
        assert_eq!(
            h.check(0, 1),
            Err(MemoryError::Invalid { addr: 0, len: 1 }),
            "nothing live"
        );
        let a = h.alloc(100).unwrap();
        let b = h.alloc(10).unwrap();
        h.check(a, 100).unwrap();
        h.check(a + 90, 10).unwrap();
        assert_eq!(
            h.check(a + 91, 10),
            Err(MemoryError::Invalid {
                addr: a + 91,
                len: 10
            }),
            "straddles the end"
        );
        assert!(h.check(a + 100, 1).is_err(), "guard gap");
        assert!(h.check(b + 10, 1).is_err(), "after the last block");
        assert!(h.check(a + 1, usize::MAX).is_err(), "overflowing length");
        assert!(h.check(u64::MAX, 2).is_err());
        h.free(a).unwrap();
        assert!(h.check(a, 1).is_err(), "freed");
    }

    #[test]
    fn exhaustion_and_recovery() {
        let mut h = ShmHeap::new(0, 1024);
        assert_eq!(
            h.alloc(1024 - 64),
            Ok(0),
            "a block and its guard fill the heap"
        );
        assert_eq!(h.alloc(0), Err(MemoryError::Exhausted { len: 0 }));
        h.free(0).unwrap();
        assert_eq!(
            h.alloc(1024 - 63),
            Err(MemoryError::Exhausted { len: 961 }),
            "no room for the guard"
        );
        assert_eq!(
            h.alloc(u32::MAX),
            Err(MemoryError::Exhausted { len: u32::MAX })
        );
        let blocks: Vec<u64> = (0..8).map(|_| h.alloc(64).unwrap()).collect();
        assert!(h.alloc(1).is_err());
        for &b in blocks.iter().step_by(2) {
            h.free(b).unwrap();
        }
        assert!(h.alloc(65).is_err(), "fragmented: no two neighbours free");
        h.free(blocks[1]).unwrap();
        assert_eq!(h.alloc(300), Ok(blocks[0]), "three neighbours coalesced");
        assert!(ShmHeap::new(0, 63).alloc(0).is_err(), "empty heap");
        assert!(ShmHeap::new(u64::MAX - 10, u64::MAX).alloc(0).is_err());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u32),
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..3000).prop_map(Op::Alloc),
            1 => (0u32..10).prop_map(|n| Op::Alloc(n * 64)),
            3 => any::<usize>().prop_map(Op::Free),
        ]
    }

    proptest! {
        /// Random alloc/free sequences: live blocks are aligned, inside the
        /// heap, never overlap each other or each other's guard, `check`
        /// agrees, and once everything is freed the free space is one
        /// extent again.
        #[test]
        fn live_blocks_never_overlap(start in 0u64..500, ops in proptest::collection::vec(op(), 1..300)) {
            let end = start + 32 * 1024;
            let mut h = ShmHeap::new(start, end);
            let whole = h.largest_free();
            let mut live: BTreeMap<u64, u32> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Alloc(len) => match h.alloc(len) {
                        Ok(a) => {
                            prop_assert!(live.insert(a, len).is_none(), "address handed out twice");
                        }
                        Err(e) => {
                            prop_assert_eq!(e, MemoryError::Exhausted { len });
                            prop_assert!(h.largest_free() < span(len));
                        }
                    },
                    Op::Free(i) => {
                        if live.is_empty() {
                            continue;
                        }
                        let (&a, &len) = live.iter().nth(i % live.len()).unwrap();
                        prop_assert_eq!(h.free(a), Ok(len));
                        live.remove(&a);
                        prop_assert!(h.free(a).is_err());
                    }
                }
                let mut prev_end = start;
                for (&a, &len) in &live {
                    prop_assert_eq!(a % 64, 0);
                    prop_assert!(a >= prev_end, "{a:#x} overlaps the block or guard before it");
                    prev_end = a + u64::from(len) + GUARD;
                    prop_assert!(prev_end <= end);
                    prop_assert!(h.check(a, len as usize).is_ok());
                    prop_assert!(h.check(a + u64::from(len), 1).is_err());
                }
                prop_assert_eq!(h.live(), live.len());
                prop_assert_eq!(h.live_bytes(), live.values().map(|&l| u64::from(l)).sum::<u64>());
            }
            for &a in live.keys() {
                h.free(a).unwrap();
            }
            prop_assert_eq!(h.largest_free(), whole);
            prop_assert_eq!(h.free_by_addr.len(), 1);
        }
    }
}
