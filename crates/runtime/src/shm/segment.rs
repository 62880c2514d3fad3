//! A shared-memory segment: a sealed memfd mapped `MAP_SHARED` read/write,
//! by the client process that creates it and by the node's engine process
//! that receives its fd.
//!
//! Every access names a byte offset and is bounds-checked against the
//! mapping, so an offset that came from the other process (an untrusted
//! command field, a ring index) can fault but never reach memory outside
//! the segment.
//!
//! # The DMA model
//!
//! [`Segment::read`] and [`Segment::write`] copy with raw pointer copies
//! while the peer process (or another thread of this one) may write the
//! same bytes, as a NIC's DMA may write a buffer the CPU is reading. The
//! values are plain bytes, every bit pattern is valid, so a racing copy
//! yields unspecified bytes (a mix of old and new), never an invalid value;
//! nothing the Rust compiler can reason about lives in the mapping (no
//! reference into it escapes except the atomics below). Ordering between
//! the two sides is the job of the atomic words ([`Segment::atomic_u64`],
//! [`Segment::atomic`]): a writer publishes with a Release store after its
//! copy, a reader copies after an Acquire load that saw it, which is how
//! the rings of [`super::ring`] use them.
//!
//! # Lengths and seals
//!
//! [`Segment::create`] rounds the length up to a whole number of pages and
//! seals the memfd against shrinking and growing. [`Segment::open`] refuses
//! an fd whose size is 0 or not a multiple of the page size, and one that
//! is not sealed against shrinking: a peer that could truncate the file
//! under our mapping would turn our next access into a `SIGBUS`.

#![allow(unsafe_code)]

use std::ffi::c_void;
use std::fmt;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};
use nix::sys::stat::fstat;
use nix::unistd::ftruncate;
use outboard_engine::{AtomicOp, AtomicWidth};

/// An access that leaves the segment (or whose end overflows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("segment access {off:#x}+{len} leaves the segment")]
pub struct OutOfRange {
    /// Offset of the access.
    pub off: u64,
    /// Length of the access.
    pub len: usize,
}

/// Why [`Segment::atomic`] did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AtomicFault {
    /// The word does not lie inside the segment.
    #[error(transparent)]
    OutOfRange(#[from] OutOfRange),
    /// The word's offset is not a multiple of its width.
    #[error("atomic word at {off:#x} is not aligned to its width")]
    Misaligned {
        /// Offset of the word.
        off: u64,
    },
}

/// A memfd mapped shared and read/write; unmapped (and the fd closed) on
/// drop.
pub struct Segment {
    base: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain memory owned by this value until drop; all
// access goes through `&self` methods that copy bytes (the DMA model in the
// module docs) or through atomics, so sharing and sending it between
// threads adds nothing the other process does not already do.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("fd", &self.fd.as_raw_fd())
            .field("len", &self.len)
            .finish()
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a process constant; no pointers involved.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Segment {
    /// Creates a memfd called `name` (for `/proc/*/fd` and `/proc/*/maps`
    /// only), sizes it to `len` rounded up to whole pages, seals its size
    /// and maps it. The memory starts zeroed. `len` of 0 is an error.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        if len == 0 {
            return Err(invalid("a segment of 0 bytes"));
        }
        let page = page_size();
        let len = len
            .checked_next_multiple_of(page)
            .ok_or_else(|| invalid("segment length overflows"))?;
        let size = i64::try_from(len).map_err(|_| invalid("segment length overflows off_t"))?;
        let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
        ftruncate(&fd, size)?;
        fcntl(
            &fd,
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )?;
        Self::map(fd, len)
    }

    /// Maps an fd received from another process. Its length is the file's
    /// size, which must be nonzero, a multiple of the page size, and sealed
    /// against shrinking (see the module docs).
    pub fn open(fd: OwnedFd) -> io::Result<Segment> {
        let st = fstat(&fd)?;
        let len = usize::try_from(st.st_size).map_err(|_| invalid("negative segment size"))?;
        if len == 0 || len % page_size() != 0 || isize::try_from(len).is_err() {
            return Err(invalid("segment size is 0 or not a whole number of pages"));
        }
        let seals = SealFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GET_SEALS)?);
        if !seals.contains(SealFlag::F_SEAL_SHRINK) {
            return Err(invalid("segment fd is not sealed against shrinking"));
        }
        Self::map(fd, len)
    }

    /// Maps a file that processes of this job share by name (a node's
    /// collectives, `crate::node_coll`), whose size every opener sets to
    /// `len` (a whole number of pages) before mapping it. Unlike
    /// [`Segment::open`] there is no seal: the file's other users are the
    /// job's own processes running this library, which never resize it.
    pub fn open_file(fd: OwnedFd, len: usize) -> io::Result<Segment> {
        let st = fstat(&fd)?;
        if len == 0 || len % page_size() != 0 || usize::try_from(st.st_size).ok() != Some(len) {
            return Err(invalid("shared file size is 0, not a whole number of pages, or not the size its users agree on"));
        }
        Self::map(fd, len)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<Segment> {
        let nz = NonZeroUsize::new(len).ok_or_else(|| invalid("a segment of 0 bytes"))?;
        // SAFETY: a fresh mapping chosen by the kernel (no address hint), so
        // it replaces nothing of ours; `len` is the file's sealed size.
        let p = unsafe {
            mmap(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )?
        };
        Ok(Segment {
            base: p.cast(),
            len,
            fd,
        })
    }

    /// The memfd, to pass to the other process (or `dup` it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Length of the mapping in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a segment has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of `off..off+n` in the mapping when it lies inside it.
    fn range(&self, off: u64, n: usize) -> Result<*mut u8, OutOfRange> {
        let err = OutOfRange { off, len: n };
        let start = usize::try_from(off).map_err(|_| err)?;
        let end = start.checked_add(n).ok_or(err)?;
        if end > self.len {
            return Err(err);
        }
        // SAFETY: `start <= end <= len`, inside (or one past) the mapping.
        Ok(unsafe { self.base.as_ptr().add(start) })
    }

    /// Copies the bytes at `off` into `out` (see the DMA model).
    pub fn read(&self, off: u64, out: &mut [u8]) -> Result<(), OutOfRange> {
        let src = self.range(off, out.len())?;
        // SAFETY: `src..src+out.len()` is inside the mapping (checked), which
        // lives as long as `self`; `out` is a Rust slice and so not part of
        // the mapping (no slice into the mapping is ever handed out). Racing
        // writers yield unspecified bytes, the DMA model.
        unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` to `off` (see the DMA model).
    pub fn write(&self, off: u64, data: &[u8]) -> Result<(), OutOfRange> {
        let dst = self.range(off, data.len())?;
        // SAFETY: as in `read`, the other way round.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    /// Copies `len` bytes at `off` to `dst_off` of `dst` (another mapping,
    /// or this one with ranges that do not overlap): one copy between two
    /// shared mappings, with both ranges checked.
    pub fn copy_to(&self, off: u64, dst: &Segment, dst_off: u64, len: usize) -> Result<(), OutOfRange> {
        let src = self.range(off, len)?;
        let to = dst.range(dst_off, len)?;
        if std::ptr::eq(self, dst) && (src as usize) < (to as usize) + len && (to as usize) < (src as usize) + len {
            return Err(OutOfRange { off: dst_off, len });
        }
        // SAFETY: both ranges lie inside their mappings (checked), which
        // live as long as the borrows, and do not overlap (checked when the
        // mappings are one; two mappings of one file are the callers'
        // protocol, where racing writers yield unspecified bytes, the DMA
        // model).
        unsafe { std::ptr::copy_nonoverlapping(src, to, len) };
        Ok(())
    }

    /// Fills `off..off+len` with `byte`.
    pub fn fill(&self, off: u64, len: usize, byte: u8) -> Result<(), OutOfRange> {
        let dst = self.range(off, len)?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::write_bytes(dst, byte, len) };
        Ok(())
    }

    /// The 32-bit word at `off`, when it is 4-byte aligned and inside.
    pub fn atomic_u32(&self, off: u64) -> Option<&AtomicU32> {
        if off % 4 != 0 {
            return None;
        }
        let p = self.range(off, 4).ok()?;
        // SAFETY: inside the mapping, which outlives the borrow of `self`;
        // aligned (the mapping is page-aligned and `off` a multiple of 4).
        // Bytes the DMA copies also touch are the caller's protocol error,
        // as with hardware: the word then holds unspecified bytes.
        Some(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// The 64-bit word at `off`, when it is 8-byte aligned and inside.
    pub fn atomic_u64(&self, off: u64) -> Option<&AtomicU64> {
        if off % 8 != 0 {
            return None;
        }
        let p = self.range(off, 8).ok()?;
        // SAFETY: as in `atomic_u32`, with 8-byte alignment.
        Some(unsafe { AtomicU64::from_ptr(p.cast()) })
    }

    /// Performs `op` on the `width` word at `off` (aligned to its width,
    /// native byte order) with one atomic instruction and returns its old
    /// value: the semantics of [`crate::memory::HostMemory::atomic`]
    /// (operands cut to the word's width; compare-and-swap returns the old
    /// value whether or not it swapped), and atomic with respect to the
    /// other process's atomics on the same word. Sequentially consistent.
    pub fn atomic(&self, off: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, AtomicFault> {
        if off % width.bytes() != 0 {
            return Err(AtomicFault::Misaligned { off });
        }
        let range = OutOfRange {
            off,
            len: width.bytes() as usize,
        };
        const SC: Ordering = Ordering::SeqCst;
        let old = match width {
            AtomicWidth::W32 => {
                let w = self.atomic_u32(off).ok_or(range)?;
                let old = match op.truncated(width) {
                    AtomicOp::FetchAdd(v) => w.fetch_add(v as u32, SC),
                    AtomicOp::Swap(v) => w.swap(v as u32, SC),
                    AtomicOp::CompareSwap { compare, new } => w
                        .compare_exchange(compare as u32, new as u32, SC, SC)
                        .unwrap_or_else(|x| x),
                };
                u64::from(old)
            }
            AtomicWidth::W64 => {
                let w = self.atomic_u64(off).ok_or(range)?;
                match op {
                    AtomicOp::FetchAdd(v) => w.fetch_add(v, SC),
                    AtomicOp::Swap(v) => w.swap(v, SC),
                    AtomicOp::CompareSwap { compare, new } => w
                        .compare_exchange(compare, new, SC, SC)
                        .unwrap_or_else(|x| x),
                }
            }
        };
        Ok(old)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, of this length; no reference
        // into it outlives `self` (the atomics borrow `self`).
        let _ = unsafe { munmap(self.base.cast::<c_void>(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(len: usize) -> Segment {
        Segment::create("outboard-test", len).unwrap()
    }

    #[test]
    fn create_rounds_to_pages_and_refuses_zero() {
        let s = seg(100);
        assert_eq!(s.len(), page_size());
        assert!(!s.is_empty());
        assert!(Segment::create("zero", 0).is_err());
        let mut b = [1u8; 8];
        s.read(0, &mut b).unwrap();
        assert_eq!(b, [0; 8], "starts zeroed");
    }

    #[test]
    fn accesses_outside_the_segment_fault() {
        let s = seg(4096);
        let n = s.len() as u64;
        s.write(n - 10, &[7; 10]).unwrap();
        let mut out = [0; 10];
        s.read(n - 10, &mut out).unwrap();
        assert_eq!(out, [7; 10]);
        assert_eq!(
            s.write(n - 9, &[0; 10]),
            Err(OutOfRange {
                off: n - 9,
                len: 10
            }),
            "straddles the end"
        );
        assert!(s.read(n, &mut [0]).is_err(), "one past the end");
        s.read(n, &mut []).unwrap();
        assert!(
            s.write(u64::MAX - 3, &[0; 8]).is_err(),
            "overflowing offset"
        );
        assert!(s.read(u64::MAX, &mut [0; 2]).is_err(), "overflowing offset");
        assert!(s.fill(n - 1, 2, 0).is_err());
        assert!(s.atomic_u64(n - 8).is_some());
        assert!(s.atomic_u64(n).is_none());
        assert!(s.atomic_u64(u64::MAX - 7).is_none());
        assert!(s.atomic_u32(2).is_none(), "misaligned");
        assert_eq!(
            s.atomic(u64::MAX - 7, AtomicWidth::W64, AtomicOp::Swap(0)),
            Err(AtomicFault::OutOfRange(OutOfRange {
                off: u64::MAX - 7,
                len: 8
            }))
        );
    }

    #[test]
    fn atomics_have_host_memory_semantics() {
        let s = seg(4096);
        assert_eq!(
            s.atomic(0, AtomicWidth::W32, AtomicOp::Swap(0x1_0000_0005)),
            Ok(0)
        );
        assert_eq!(
            s.atomic(0, AtomicWidth::W32, AtomicOp::FetchAdd(u64::from(u32::MAX))),
            Ok(5),
            "operand cut to 32 bits"
        );
        assert_eq!(
            s.atomic(
                0,
                AtomicWidth::W32,
                AtomicOp::CompareSwap { compare: 9, new: 1 }
            ),
            Ok(4),
            "no swap"
        );
        assert_eq!(
            s.atomic(
                0,
                AtomicWidth::W32,
                AtomicOp::CompareSwap {
                    compare: 0x7_0000_0004,
                    new: 1
                }
            ),
            Ok(4)
        );
        assert_eq!(s.atomic(0, AtomicWidth::W32, AtomicOp::FetchAdd(0)), Ok(1));
        assert_eq!(
            s.atomic(8, AtomicWidth::W64, AtomicOp::FetchAdd(u64::MAX)),
            Ok(0)
        );
        assert_eq!(
            s.atomic(8, AtomicWidth::W64, AtomicOp::FetchAdd(2)),
            Ok(u64::MAX),
            "wraps"
        );
        assert_eq!(s.atomic(8, AtomicWidth::W64, AtomicOp::FetchAdd(0)), Ok(1));
        assert_eq!(
            s.atomic(4, AtomicWidth::W64, AtomicOp::Swap(0)),
            Err(AtomicFault::Misaligned { off: 4 })
        );
        assert_eq!(
            s.atomic(2, AtomicWidth::W32, AtomicOp::Swap(0)),
            Err(AtomicFault::Misaligned { off: 2 })
        );
        // Native byte order, as HostMemory.
        let mut w = [0u8; 4];
        s.read(0, &mut w).unwrap();
        assert_eq!(u32::from_ne_bytes(w), 1);
    }

    /// The memory.rs test, over two mappings of one memfd: atomics on one
    /// word from two threads (standing for the two processes) lose no
    /// update and keep the 32-bit neighbours apart.
    #[test]
    fn atomics_from_two_mappings_interleave_without_losing_updates() {
        let a = std::sync::Arc::new(seg(4096));
        let b = Segment::open(a.fd().try_clone_to_owned().unwrap()).unwrap();
        let per = 20_000u64;
        let engine = {
            let a = a.clone();
            std::thread::spawn(move || {
                for _ in 0..per {
                    a.atomic(8, AtomicWidth::W64, AtomicOp::FetchAdd(1))
                        .unwrap();
                    a.atomic(0, AtomicWidth::W32, AtomicOp::FetchAdd(3))
                        .unwrap();
                }
            })
        };
        let mut cas_hits = 0;
        for _ in 0..per {
            b.atomic(8, AtomicWidth::W64, AtomicOp::FetchAdd(2))
                .unwrap();
            let old = b
                .atomic(4, AtomicWidth::W32, AtomicOp::FetchAdd(0))
                .unwrap();
            if b.atomic(
                4,
                AtomicWidth::W32,
                AtomicOp::CompareSwap {
                    compare: old,
                    new: old + 1,
                },
            )
            .unwrap()
                == old
            {
                cas_hits += 1;
            }
        }
        engine.join().unwrap();
        let mut w = [0u8; 16];
        b.read(0, &mut w).unwrap();
        assert_eq!(u64::from_ne_bytes(w[8..].try_into().unwrap()), 3 * per);
        assert_eq!(
            u64::from(u32::from_ne_bytes(w[..4].try_into().unwrap())),
            3 * per,
            "the 32-bit neighbour kept apart"
        );
        assert_eq!(u32::from_ne_bytes(w[4..8].try_into().unwrap()), cas_hits);
    }

    #[test]
    fn two_mappings_of_one_fd_see_each_others_writes() {
        let a = seg(3 * 4096);
        let b = Segment::open(a.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(a.len(), b.len());
        a.write(5000, b"from a").unwrap();
        let mut out = [0u8; 6];
        b.read(5000, &mut out).unwrap();
        assert_eq!(&out, b"from a");
        b.write(0, b"from b").unwrap();
        a.read(0, &mut out).unwrap();
        assert_eq!(&out, b"from b");
        b.atomic_u64(64).unwrap().store(42, Ordering::Release);
        assert_eq!(a.atomic_u64(64).unwrap().load(Ordering::Acquire), 42);
        drop(a);
        b.read(5000, &mut out).unwrap();
        assert_eq!(&out, b"from a", "the mapping outlives the other side");
    }

    #[test]
    fn open_refuses_unsealed_or_odd_sized_files() {
        let unsealed = memfd_create("unsealed", MFdFlags::MFD_CLOEXEC).unwrap();
        ftruncate(&unsealed, 4096).unwrap();
        assert!(Segment::open(unsealed).is_err(), "could shrink under us");
        let empty =
            memfd_create("empty", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING).unwrap();
        fcntl(&empty, FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK)).unwrap();
        assert!(Segment::open(empty).is_err(), "zero length");
        let odd = memfd_create("odd", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING).unwrap();
        ftruncate(&odd, 100).unwrap();
        fcntl(&odd, FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK)).unwrap();
        assert!(Segment::open(odd).is_err(), "not whole pages");
        // A created segment cannot be shrunk by whoever holds its fd.
        let s = seg(4096);
        assert!(ftruncate(s.fd(), 0).is_err());
    }
}
