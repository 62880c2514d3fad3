//! The engine's only way into host memory.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::{AtomicOp, AtomicWidth, HostBuf, PortId};

/// Host memory could not be accessed at that address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("DMA fault at {addr:#x}+{len}")]
pub struct DmaFault {
    /// Start of the access.
    pub addr: u64,
    /// Its length.
    pub len: usize,
}

/// Reads and writes the memory of the process that owns a port, the way a
/// NIC's DMA engine reaches host memory across the bus.
///
/// The runtime implements it on real memory, the simulator and tests on
/// [`VecMemory`]. The engine checks registered-region bounds itself before
/// it calls these; an implementation only has to refuse addresses it cannot
/// reach.
pub trait Dma {
    /// Copies `out.len()` bytes at `addr` of `port`'s process into `out`.
    fn read(&mut self, port: PortId, addr: u64, out: &mut [u8]) -> Result<(), DmaFault>;
    /// Copies `data` to `addr` of `port`'s process.
    fn write(&mut self, port: PortId, addr: u64, data: &[u8]) -> Result<(), DmaFault>;

    /// Performs `op` on the `width` word at `addr` (aligned to its width,
    /// native byte order) and returns the word's old value.
    ///
    /// Why it is a method of its own: an atomic operation must be atomic
    /// against the host's own accesses to the word, which two separate DMA
    /// transfers are not. A PCIe NIC does this with one PCIe AtomicOp
    /// (FetchAdd, Swap, CAS) that the root complex performs as a locked
    /// read-modify-write; the dissertation's LANai could only DMA, and
    /// needed a mutex with its host (5.2.3). The runtime overrides this with
    /// an access its host's own atomics serialise with. This default, a
    /// read and (when the value changes) a write, is right only where
    /// nothing else touches the memory meanwhile: the simulator and tests.
    fn atomic(&mut self, port: PortId, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, DmaFault> {
        let n = width.bytes() as usize;
        let mut word = [0u8; 8];
        self.read(port, addr, &mut word[..n])?;
        let old = match width {
            AtomicWidth::W32 => u64::from(u32::from_ne_bytes(word[..4].try_into().expect("4 bytes"))),
            AtomicWidth::W64 => u64::from_ne_bytes(word),
        };
        let new = op.apply(width, old);
        if new != old {
            match width {
                AtomicWidth::W32 => self.write(port, addr, &(new as u32).to_ne_bytes())?,
                AtomicWidth::W64 => self.write(port, addr, &new.to_ne_bytes())?,
            }
        }
        Ok(old)
    }
}

/// Simulated host memory: separate allocations at distinct addresses, shared
/// by all ports of a node (like processes that share a physical memory).
/// Accesses that straddle or miss an allocation fault.
#[derive(Debug, Default, Clone)]
pub struct VecMemory {
    blocks: BTreeMap<u64, Vec<u8>>,
    next: u64,
}

impl VecMemory {
    /// Empty memory.
    pub fn new() -> Self {
        VecMemory { blocks: BTreeMap::new(), next: 0x1000 }
    }

    /// Allocates `len` zeroed bytes.
    pub fn alloc(&mut self, len: u32) -> HostBuf {
        let addr = self.next;
        // Leave a gap so an off-by-one access faults instead of reaching a
        // neighbour.
        self.next += u64::from(len) + 64;
        self.blocks.insert(addr, vec![0; len as usize]);
        HostBuf { addr, len }
    }

    /// Allocates and fills.
    pub fn alloc_with(&mut self, data: &[u8]) -> HostBuf {
        let b = self.alloc(data.len() as u32);
        self.blocks.get_mut(&b.addr).expect("just allocated").copy_from_slice(data);
        b
    }

    /// Frees an allocation made by [`VecMemory::alloc`].
    pub fn free(&mut self, buf: HostBuf) {
        self.blocks.remove(&buf.addr);
    }

    /// The bytes of an allocation.
    pub fn bytes(&self, buf: HostBuf) -> &[u8] {
        self.slice(buf.addr, buf.len as usize).expect("valid allocation")
    }

    /// Mutable bytes of an allocation.
    pub fn bytes_mut(&mut self, buf: HostBuf) -> &mut [u8] {
        self.slice_mut(buf.addr, buf.len as usize).expect("valid allocation")
    }

    /// Number of live allocations.
    pub fn live(&self) -> usize {
        self.blocks.len()
    }

    fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (&start, block) = self.blocks.range(..=addr).next_back()?;
        let off = usize::try_from(addr - start).ok()?;
        block.get(off..off.checked_add(len)?)
    }

    fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let (&start, block) = self.blocks.range_mut(..=addr).next_back()?;
        let off = usize::try_from(addr - start).ok()?;
        block.get_mut(off..off.checked_add(len)?)
    }
}

impl Dma for VecMemory {
    fn read(&mut self, _port: PortId, addr: u64, out: &mut [u8]) -> Result<(), DmaFault> {
        let src = self.slice(addr, out.len()).ok_or(DmaFault { addr, len: out.len() })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn write(&mut self, _port: PortId, addr: u64, data: &[u8]) -> Result<(), DmaFault> {
        let dst = self.slice_mut(addr, data.len()).ok_or(DmaFault { addr, len: data.len() })?;
        dst.copy_from_slice(data);
        Ok(())
    }
}
