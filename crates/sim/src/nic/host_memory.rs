//! A node's host memory, with an opt-in compact form for large buffers.
//!
//! By default every allocation holds its bytes (as the engine's
//! `VecMemory`). At scale that alone exceeds a workstation: a 64 KiB
//! broadcast at 65,536 nodes puts 4 GiB into receive buffers whose bytes
//! are all the same value. With [`HostMemory::set_compact`] an allocation
//! of at least [`COMPACT_MIN`] bytes is kept as runs of equal bytes
//! (exact: every read returns what was written) and only turns into plain
//! bytes when a write is not one repeated byte or the runs grow past
//! [`MAX_RUNS`]. The engine and the host library read and write through
//! the same calls either way; addresses are allocated the same way, so a
//! run's events do not depend on the form.

use std::collections::VecDeque;

use outboard_engine::{Dma, DmaFault, HostBuf, PortId};

/// The smallest allocation kept as runs in compact mode (smaller ones cost
/// less as bytes than as a run list).
pub(crate) const COMPACT_MIN: u32 = 4096;

/// Runs past which a compact allocation turns into plain bytes.
pub(crate) const MAX_RUNS: usize = 32;

/// One allocation's contents.
#[derive(Debug)]
enum Block {
    Bytes(Vec<u8>),
    /// `len` bytes as runs `(start, byte)`, sorted by start, the first at
    /// 0, no two neighbours with the same byte: run `i` covers
    /// `[start_i, start_{i+1})` (the last up to `len`).
    Runs { len: u32, runs: Vec<(u32, u8)> },
}

impl Block {
    fn len(&self) -> usize {
        match self {
            Block::Bytes(b) => b.len(),
            Block::Runs { len, .. } => *len as usize,
        }
    }

    fn read(&self, off: usize, out: &mut [u8]) {
        match self {
            Block::Bytes(b) => out.copy_from_slice(&b[off..off + out.len()]),
            Block::Runs { len, runs } => {
                let end = off + out.len();
                let mut i = runs.partition_point(|r| r.0 as usize <= off) - 1;
                let mut pos = off;
                while pos < end {
                    let run_end = runs.get(i + 1).map_or(*len as usize, |r| r.0 as usize).min(end);
                    out[pos - off..run_end - off].fill(runs[i].1);
                    pos = run_end;
                    i += 1;
                }
            }
        }
    }

    fn write(&mut self, off: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if let Block::Runs { len, runs } = self {
            let v = data[0];
            if data.iter().all(|&b| b == v) && runs.len() < MAX_RUNS {
                let (a, b) = (off as u32, (off + data.len()) as u32);
                let after = (b < *len).then(|| runs[runs.partition_point(|r| r.0 <= b) - 1].1);
                let lo = runs.partition_point(|r| r.0 < a);
                let hi = runs.partition_point(|r| r.0 <= b);
                let tail = after.map(|t| (b, t));
                runs.splice(lo..hi, std::iter::once((a, v)).chain(tail));
                runs.dedup_by(|later, earlier| later.1 == earlier.1);
                return;
            }
            let mut bytes = vec![0u8; *len as usize];
            Block::Runs { len: *len, runs: std::mem::take(runs) }.read(0, &mut bytes);
            *self = Block::Bytes(bytes);
        }
        if let Block::Bytes(bytes) = self {
            bytes[off..off + data.len()].copy_from_slice(data);
        }
    }
}

/// Simulated host memory: allocations by address.
#[derive(Debug)]
pub(crate) struct HostMemory {
    /// Sorted by address: allocation only appends (addresses grow), and
    /// buffers are mostly freed young or old, so a deque (removal from
    /// the nearer end) costs less than a tree map's node per allocation.
    blocks: VecDeque<(u64, Block)>,
    next: u64,
    compact: bool,
}

impl Default for HostMemory {
    fn default() -> Self {
        HostMemory::new()
    }
}

impl HostMemory {
    /// Empty memory, every allocation held as bytes.
    pub fn new() -> Self {
        HostMemory { blocks: VecDeque::new(), next: 0x1000, compact: false }
    }

    /// From now on keep allocations of at least [`COMPACT_MIN`] bytes as
    /// runs of equal bytes (see the module's doc).
    pub fn set_compact(&mut self, on: bool) {
        self.compact = on;
    }

    /// Allocates `len` zeroed bytes (addresses as `VecMemory` gives them).
    pub fn alloc(&mut self, len: u32) -> HostBuf {
        let addr = self.next;
        // Leave a gap so an off-by-one access faults instead of reaching a
        // neighbour.
        self.next += u64::from(len) + 64;
        let block =
            if self.compact && len >= COMPACT_MIN { Block::Runs { len, runs: vec![(0, 0)] } } else { Block::Bytes(vec![0; len as usize]) };
        self.blocks.push_back((addr, block));
        HostBuf { addr, len }
    }

    /// Frees an allocation made by [`HostMemory::alloc`].
    pub fn free(&mut self, buf: HostBuf) {
        if let Ok(i) = self.blocks.binary_search_by_key(&buf.addr, |b| b.0) {
            self.blocks.remove(i);
        }
    }

    /// The allocation holding `[addr, addr + len)` and the offset in it.
    fn find(&mut self, addr: u64, len: usize) -> Option<(&mut Block, usize)> {
        let i = self.blocks.partition_point(|b| b.0 <= addr).checked_sub(1)?;
        let (start, block) = &mut self.blocks[i];
        let start = *start;
        let off = usize::try_from(addr - start).ok()?;
        (off.checked_add(len)? <= block.len()).then_some((block, off))
    }
}

impl Dma for HostMemory {
    fn read(&mut self, _port: PortId, addr: u64, out: &mut [u8]) -> Result<(), DmaFault> {
        let (block, off) = self.find(addr, out.len()).ok_or(DmaFault { addr, len: out.len() })?;
        block.read(off, out);
        Ok(())
    }

    fn write(&mut self, _port: PortId, addr: u64, data: &[u8]) -> Result<(), DmaFault> {
        let (block, off) = self.find(addr, data.len()).ok_or(DmaFault { addr, len: data.len() })?;
        block.write(off, data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl HostMemory {
        fn block(&self, addr: u64) -> &Block {
            let i = self.blocks.binary_search_by_key(&addr, |b| b.0).expect("allocated");
            &self.blocks[i].1
        }
    }

    /// Compact memory reads back exactly what plain memory does, through
    /// uniform writes, mixed writes (which turn a block into bytes) and
    /// faults.
    #[test]
    fn compact_reads_what_was_written() {
        let port = PortId(0);
        let mut plain = HostMemory::new();
        let mut compact = HostMemory::new();
        compact.set_compact(true);
        let (a, b) = (plain.alloc(10_000), compact.alloc(10_000));
        assert_eq!((a.addr, a.len), (b.addr, b.len));
        let writes: [(u64, Vec<u8>); 7] = [
            (0, vec![7; 100]),
            (5_000, vec![3; 4_000]),
            (50, vec![7; 100]),
            (9_990, vec![9; 10]),
            (4_000, vec![0; 1]),
            (0, vec![7; 10_000]),
            (123, vec![1, 2, 3]),
        ];
        for (i, (off, data)) in writes.iter().enumerate() {
            plain.write(port, a.addr + off, data).unwrap();
            compact.write(port, b.addr + off, data).unwrap();
            let (mut x, mut y) = (vec![0; 10_000], vec![0; 10_000]);
            plain.read(port, a.addr, &mut x).unwrap();
            compact.read(port, b.addr, &mut y).unwrap();
            assert_eq!(x, y, "after write {i}");
            let (mut x, mut y) = (vec![0; 777], vec![0; 777]);
            plain.read(port, a.addr + 4_500, &mut x).unwrap();
            compact.read(port, b.addr + 4_500, &mut y).unwrap();
            assert_eq!(x, y, "partial read after write {i}");
        }
        assert!(matches!(compact.block(b.addr), Block::Bytes(_)), "a mixed write turns the block into bytes");
        assert!(compact.read(port, b.addr + 9_999, &mut [0; 2]).is_err());
        assert!(compact.write(port, b.addr + 10_000, &[1]).is_err());
    }

    /// Many alternating runs turn a compact block into bytes, still exact.
    #[test]
    fn many_runs_fall_back_to_bytes() {
        let port = PortId(0);
        let mut m = HostMemory::new();
        m.set_compact(true);
        let b = m.alloc(8_192);
        for k in 0..100u64 {
            m.write(port, b.addr + k * 64, &[(k % 2) as u8 + 1; 32]).unwrap();
        }
        assert!(matches!(m.block(b.addr), Block::Bytes(_)));
        let mut out = vec![0; 8_192];
        m.read(port, b.addr, &mut out).unwrap();
        for k in 0..100usize {
            assert!(out[k * 64..k * 64 + 32].iter().all(|&x| x == (k % 2) as u8 + 1));
            assert!(out[k * 64 + 32..k * 64 + 64].iter().all(|&x| x == 0));
        }
    }
}
