//! Host memory the engine reaches by DMA.
//!
//! Buffers that take part in communication are allocated by the runtime
//! ([`HostMemory::alloc`]), not by the application's allocator, for the same
//! reason a NIC needs registered (pinned) memory: the engine must be able to
//! tell, for every address a command names, whether it is live memory of
//! the process. Each buffer gets an address in a private address space
//! (addresses are offsets, never pointers, so a command can cross a ring or
//! shared memory unchanged); an access that misses or straddles a live
//! allocation, or touches one that was freed, is a [`DmaFault`] or a
//! [`MemoryError`], never undefined behaviour.
//!
//! Each buffer sits behind its own mutex, so the engine thread copying one
//! buffer and the host writing another never wait for each other; the
//! allocation table is behind a read-write lock taken for reading on every
//! access and for writing only by `alloc` and `free`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use outboard_engine::{AtomicOp, AtomicWidth, Dma, DmaFault, HostBuf, PortId};
use outboard_host::MemoryError;

type Block = Arc<Mutex<Box<[u8]>>>;

/// The DMA-reachable memory of one process (shared by its ports).
#[derive(Debug)]
pub struct HostMemory {
    table: RwLock<Table>,
}

#[derive(Debug)]
struct Table {
    blocks: BTreeMap<u64, Block>,
    next: u64,
    live_bytes: u64,
    limit: u64,
}

/// Gap left after each allocation, so an off-by-one access faults instead of
/// reaching a neighbour; also the alignment of every address.
const GUARD: u64 = 64;

impl HostMemory {
    /// Memory with room for `limit` live bytes.
    pub fn new(limit: u64) -> Arc<HostMemory> {
        Arc::new(HostMemory {
            table: RwLock::new(Table { blocks: BTreeMap::new(), next: 0x10_0000, live_bytes: 0, limit }),
        })
    }

    /// Allocates `len` zeroed bytes.
    pub fn alloc(&self, len: u32) -> Result<HostBuf, MemoryError> {
        let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
        if t.live_bytes + u64::from(len) > t.limit {
            return Err(MemoryError::Exhausted { len });
        }
        let addr = t.next;
        t.next += (u64::from(len) + GUARD).div_ceil(GUARD) * GUARD;
        t.live_bytes += u64::from(len);
        t.blocks.insert(addr, Arc::new(Mutex::new(vec![0; len as usize].into_boxed_slice())));
        Ok(HostBuf { addr, len })
    }

    /// Frees a buffer; `buf` must be exactly what [`HostMemory::alloc`]
    /// returned. An engine access racing with the free either completes
    /// on the old bytes or faults.
    pub fn free(&self, buf: HostBuf) -> Result<(), MemoryError> {
        let mut t = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let invalid = MemoryError::Invalid { addr: buf.addr, len: buf.len as usize };
        match t.blocks.get(&buf.addr) {
            Some(b) if b.lock().unwrap_or_else(PoisonError::into_inner).len() == buf.len as usize => {}
            _ => return Err(invalid),
        }
        t.blocks.remove(&buf.addr);
        t.live_bytes -= u64::from(buf.len);
        Ok(())
    }

    /// Number of live buffers.
    pub fn live(&self) -> usize {
        self.table.read().unwrap_or_else(PoisonError::into_inner).blocks.len()
    }

    /// The block holding `addr..addr+len` and the offset of `addr` in it.
    fn find(&self, addr: u64, len: usize) -> Option<(Block, usize)> {
        let t = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let (&start, block) = t.blocks.range(..=addr).next_back()?;
        let off = usize::try_from(addr - start).ok()?;
        let end = off.checked_add(len)?;
        let block = block.clone();
        drop(t);
        let ok = end <= block.lock().unwrap_or_else(PoisonError::into_inner).len();
        ok.then_some((block, off))
    }

    /// The block starting at or below `addr` and the offset of `addr` in
    /// it, bounds not checked: the caller checks them under the block's
    /// lock, which it takes anyway for the copy (one lock per access, not
    /// two, on the engine's per-packet path).
    fn find_unchecked(&self, addr: u64) -> Option<(Block, usize)> {
        let t = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let (&start, block) = t.blocks.range(..=addr).next_back()?;
        let off = usize::try_from(addr - start).ok()?;
        Some((block.clone(), off))
    }

    /// Copies bytes at `addr` into `out`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        let invalid = MemoryError::Invalid { addr, len: out.len() };
        let (b, off) = self.find_unchecked(addr).ok_or(invalid)?;
        let b = b.lock().unwrap_or_else(PoisonError::into_inner);
        let src = off.checked_add(out.len()).and_then(|end| b.get(off..end)).ok_or(invalid)?;
        out.copy_from_slice(src);
        Ok(())
    }

    /// Copies `data` to `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let invalid = MemoryError::Invalid { addr, len: data.len() };
        let (b, off) = self.find_unchecked(addr).ok_or(invalid)?;
        let mut b = b.lock().unwrap_or_else(PoisonError::into_inner);
        let dst = off.checked_add(data.len()).and_then(|end| b.get_mut(off..end)).ok_or(invalid)?;
        dst.copy_from_slice(data);
        Ok(())
    }
}

impl HostMemory {
    /// Performs `op` on the `width` word at `addr` (aligned to its width,
    /// native byte order) and returns its old value.
    ///
    /// Atomic with respect to every other access to the buffer, the
    /// engine's DMA and the host's own reads, writes and atomics alike:
    /// all of them go through the buffer's lock, and this holds it across
    /// the read and the write. That is what a PCIe NIC's AtomicOp gets from
    /// the root complex (one locked read-modify-write the CPU's own locked
    /// instructions serialise with), and what the dissertation's LANai,
    /// which could only DMA, had to build with a Peterson mutex between
    /// host and NIC (5.2.3).
    pub fn atomic(&self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        let n = width.bytes() as usize;
        let invalid = MemoryError::Invalid { addr, len: n };
        if addr % width.bytes() != 0 {
            return Err(invalid);
        }
        let (b, off) = self.find(addr, n).ok_or(invalid)?;
        let mut b = b.lock().unwrap_or_else(PoisonError::into_inner);
        let w = &mut b[off..off + n];
        let old = match width {
            AtomicWidth::W32 => u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]])),
            AtomicWidth::W64 => u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        };
        let new = op.apply(width, old);
        match width {
            AtomicWidth::W32 => w.copy_from_slice(&(new as u32).to_ne_bytes()),
            AtomicWidth::W64 => w.copy_from_slice(&new.to_ne_bytes()),
        }
        Ok(old)
    }
}

/// The engine's view of host memory: a process's own [`HostMemory`] for
/// ports of an in-process engine, and, for the ports a node engine serves,
/// each attached process's shared segment (module `shm`).
#[derive(Debug, Clone)]
pub struct RtDma {
    mem: Arc<HostMemory>,
    /// Per port slot: the registered memory of the process attached there,
    /// if a process of another address space owns the port.
    shared: Vec<Option<SharedMemory>>,
    /// Bytes the engine copied out of host memory (into datagrams).
    copied_out: u64,
    /// Bytes the engine copied into host memory (out of datagrams or its
    /// own buffers).
    copied_in: u64,
}

/// The registered part of an attached process's segment: addresses are
/// offsets into the segment, from `start` to its end.
#[derive(Debug, Clone)]
pub(crate) struct SharedMemory {
    pub seg: Arc<crate::shm::Segment>,
    pub start: u64,
}

impl SharedMemory {
    fn check(&self, addr: u64, len: usize) -> Result<(), DmaFault> {
        if addr < self.start {
            return Err(DmaFault { addr, len });
        }
        Ok(())
    }
}

impl RtDma {
    /// DMA into `mem`.
    pub fn new(mem: Arc<HostMemory>) -> Self {
        RtDma { mem, shared: Vec::new(), copied_out: 0, copied_in: 0 }
    }

    /// Bytes copied out of and into host memory so far: every payload
    /// byte the engine moves between host memory and a datagram is one
    /// copy, so these over the payload bytes are the copies per message.
    pub fn copied(&self) -> (u64, u64) {
        (self.copied_out, self.copied_in)
    }

    /// Port `port`'s memory is now `mem` (a process attached there), or the
    /// engine's own again (`None`: the port closed).
    pub(crate) fn set_shared(&mut self, port: PortId, mem: Option<SharedMemory>) {
        let i = usize::from(port.0);
        if self.shared.len() <= i {
            self.shared.resize(i + 1, None);
        }
        self.shared[i] = mem;
    }

    fn shared(&self, port: PortId) -> Option<&SharedMemory> {
        self.shared.get(usize::from(port.0)).and_then(Option::as_ref)
    }
}

impl Dma for RtDma {
    fn read(&mut self, port: PortId, addr: u64, out: &mut [u8]) -> Result<(), DmaFault> {
        self.copied_out += out.len() as u64;
        let fault = DmaFault { addr, len: out.len() };
        match self.shared(port) {
            Some(m) => {
                m.check(addr, out.len())?;
                m.seg.read(addr, out).map_err(|_| fault)
            }
            None => self.mem.read(addr, out).map_err(|_| fault),
        }
    }

    fn write(&mut self, port: PortId, addr: u64, data: &[u8]) -> Result<(), DmaFault> {
        self.copied_in += data.len() as u64;
        let fault = DmaFault { addr, len: data.len() };
        match self.shared(port) {
            Some(m) => {
                m.check(addr, data.len())?;
                m.seg.write(addr, data).map_err(|_| fault)
            }
            None => self.mem.write(addr, data).map_err(|_| fault),
        }
    }

    fn atomic(&mut self, port: PortId, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, DmaFault> {
        let fault = DmaFault { addr, len: width.bytes() as usize };
        match self.shared(port) {
            Some(m) => {
                m.check(addr, width.bytes() as usize)?;
                m.seg.atomic(addr, width, op).map_err(|_| fault)
            }
            None => self.mem.atomic(addr, width, op).map_err(|_| fault),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_outside_live_allocations_fault() {
        let m = HostMemory::new(1 << 20);
        let a = m.alloc(100).unwrap();
        let b = m.alloc(10).unwrap();
        m.write(a.addr + 90, &[7; 10]).unwrap();
        let mut out = [0; 10];
        m.read(a.addr + 90, &mut out).unwrap();
        assert_eq!(out, [7; 10]);
        assert!(m.write(a.addr + 91, &[0; 10]).is_err(), "straddles the end");
        assert!(m.read(a.addr - 1, &mut out).is_err(), "before the first buffer");
        assert!(m.read(b.addr + u64::from(b.len), &mut [0]).is_err(), "guard gap");
        assert!(m.write(u64::MAX - 3, &[0; 8]).is_err(), "overflowing address");
        let mut dma = RtDma::new(m.clone());
        m.free(a).unwrap();
        assert_eq!(dma.read(PortId(0), a.addr, &mut out), Err(DmaFault { addr: a.addr, len: 10 }));
        assert!(m.free(a).is_err(), "double free");
        assert!(m.free(HostBuf { addr: b.addr, len: 3 }).is_err(), "wrong length");
        assert_eq!(m.live(), 1);
    }

    #[test]
    fn the_limit_bounds_live_bytes() {
        let m = HostMemory::new(100);
        let a = m.alloc(60).unwrap();
        assert_eq!(m.alloc(60), Err(MemoryError::Exhausted { len: 60 }));
        m.free(a).unwrap();
        m.alloc(60).unwrap();
    }

    #[test]
    fn host_and_engine_atomics_on_one_word_interleave_without_losing_updates() {
        let m = HostMemory::new(1 << 20);
        let b = m.alloc(16).unwrap();
        let per = 20_000u64;
        let engine = {
            let mut dma = RtDma::new(m.clone());
            std::thread::spawn(move || {
                for _ in 0..per {
                    dma.atomic(PortId(0), b.addr + 8, AtomicWidth::W64, AtomicOp::FetchAdd(1)).unwrap();
                    dma.atomic(PortId(0), b.addr, AtomicWidth::W32, AtomicOp::FetchAdd(3)).unwrap();
                }
            })
        };
        let mut cas_hits = 0;
        for _ in 0..per {
            m.atomic(b.addr + 8, AtomicWidth::W64, AtomicOp::FetchAdd(2)).unwrap();
            let old = m.atomic(b.addr + 4, AtomicWidth::W32, AtomicOp::FetchAdd(0)).unwrap();
            if m.atomic(b.addr + 4, AtomicWidth::W32, AtomicOp::CompareSwap { compare: old, new: old + 1 }).unwrap() == old {
                cas_hits += 1;
            }
        }
        engine.join().unwrap();
        let mut w = [0u8; 16];
        m.read(b.addr, &mut w).unwrap();
        assert_eq!(u64::from_ne_bytes(w[8..].try_into().unwrap()), 3 * per);
        assert_eq!(u64::from(u32::from_ne_bytes(w[..4].try_into().unwrap())), 3 * per, "the 32-bit neighbour kept apart");
        assert_eq!(u32::from_ne_bytes(w[4..8].try_into().unwrap()), cas_hits);
        assert!(m.atomic(b.addr + 4, AtomicWidth::W64, AtomicOp::Swap(0)).is_err(), "misaligned");
        assert!(m.atomic(b.addr + 16, AtomicWidth::W32, AtomicOp::Swap(0)).is_err(), "outside");
    }
}
