//! Registered memory and RDMA. Memory the engine reaches by DMA is the
//! runtime's, not the program's (the engine checks every access against
//! it): the program allocates it here, copies in and out with
//! [`outboard_mem_write`] / [`outboard_mem_read`], registers it for remote
//! access, and names it as the local side of RDMA.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use outboard_host::{HostBuf, HostError, PortIo};

use crate::error::{bytes, deref, guard, put, Error, OUTBOARD_ERR_STATE};
use crate::request::{finish, hand_out, outboard_request, Kind};
use crate::world::{outboard_world, Shared};

/// A buffer of registered (DMA-reachable) memory (opaque).
pub struct outboard_mem {
    shared: Arc<Shared>,
    buf: HostBuf,
    /// Its remote-access key once registered.
    key: Mutex<Option<u64>>,
}

impl outboard_mem {
    /// The world it belongs to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Its key, once registered.
    pub(crate) fn key(&self) -> Option<u64> {
        *self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The whole buffer.
    pub(crate) fn buf(&self) -> HostBuf {
        self.buf
    }

    /// `len` bytes at `offset`, checked against the buffer.
    fn part(&self, offset: u64, len: usize) -> Result<HostBuf, Error> {
        let len32 = u32::try_from(len).map_err(|_| Error::arg("length beyond 4 GiB"))?;
        let end = offset.checked_add(u64::from(len32)).ok_or_else(|| Error::arg("offset overflows"))?;
        if end > u64::from(self.buf.len) {
            return Err(Error::arg(format!("{len} bytes at offset {offset} leave a {}-byte buffer", self.buf.len)));
        }
        Ok(HostBuf { addr: self.buf.addr + offset, len: len32 })
    }
}

/// Allocates `len` zeroed bytes of registered memory.
#[no_mangle]
pub unsafe extern "C" fn outboard_mem_alloc(world: *const outboard_world, len: usize, out: *mut *mut outboard_mem) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        if out.is_null() {
            return Err(Error::arg("out is null"));
        }
        let len = u32::try_from(len).map_err(|_| Error::arg("length beyond 4 GiB"))?;
        let buf = w.shared.with(|w| Ok(w.port().buffer(len)?))?;
        let h = Box::new(outboard_mem { shared: w.shared.clone(), buf, key: Mutex::new(None) });
        unsafe { put(out, Box::into_raw(h), "out") }
    })
}

/// Copies `len` bytes from `src` into the buffer at `offset`.
#[no_mangle]
pub unsafe extern "C" fn outboard_mem_write(mem: *const outboard_mem, offset: u64, src: *const c_void, len: usize) -> c_int {
    guard(|| {
        let m = unsafe { deref(mem, "mem") }?;
        let data = unsafe { bytes(src, len, "src") }?;
        let part = m.part(offset, len)?;
        m.shared.with(|w| w.port().io().write(part.addr, data).map_err(|e| HostError::from(e).into()))
    })
}

/// Copies `len` bytes at `offset` of the buffer to `dst`.
#[no_mangle]
pub unsafe extern "C" fn outboard_mem_read(mem: *const outboard_mem, offset: u64, dst: *mut c_void, len: usize) -> c_int {
    guard(|| {
        let m = unsafe { deref(mem, "mem") }?;
        if dst.is_null() && len > 0 {
            return Err(Error::arg("dst is null"));
        }
        let part = m.part(offset, len)?;
        let mut v = vec![0u8; len];
        m.shared.with(|w| w.port().io_ref().read(part.addr, &mut v).map_err(|e| HostError::from(e).into()))?;
        // SAFETY: the program promised `len` writable bytes at `dst`.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), dst.cast::<u8>(), len) };
        Ok(())
    })
}

/// Registers the whole buffer for remote access (once; again returns the
/// same key); `*key` is what peers name in RDMA.
#[no_mangle]
pub unsafe extern "C" fn outboard_mem_register(mem: *const outboard_mem, key: *mut u64) -> c_int {
    guard(|| {
        let m = unsafe { deref(mem, "mem") }?;
        let mut k = m.key.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "poisoned"))?;
        let v = match *k {
            Some(v) => v,
            None => {
                let v = m.shared.with(|w| Ok(w.port().register(m.buf)?))?;
                *k = Some(v);
                v
            }
        };
        unsafe { put(key, v, "key") }
    })
}

/// Withdraws the registration (if any) and frees the buffer and handle.
#[no_mangle]
pub unsafe extern "C" fn outboard_mem_free(mem: *mut outboard_mem) -> c_int {
    guard(|| {
        if mem.is_null() {
            return Err(Error::arg("mem is null"));
        }
        // SAFETY: a handle from `outboard_mem_alloc`, freed only here.
        let m = unsafe { Box::from_raw(mem) };
        let key = *m.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        m.shared.with(|w| {
            if let Some(k) = key {
                w.port().deregister(k)?;
            }
            Ok(w.port().free(m.buf)?)
        })
    })
}

// The C functions' arguments plus the direction.
#[allow(clippy::too_many_arguments)]
unsafe fn rdma_start(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    remote_offset: u64,
    mem: *const outboard_mem,
    local_offset: u64,
    len: usize,
    req: *mut *mut outboard_request,
    write: bool,
) -> Result<(), Error> {
    let w = unsafe { deref(world, "world") }?;
    let m = unsafe { deref(mem, "mem") }?;
    if req.is_null() {
        return Err(Error::arg("request is null"));
    }
    if !Arc::ptr_eq(&w.shared, &m.shared) {
        return Err(Error::arg("mem belongs to another world"));
    }
    let local = m.part(local_offset, len)?;
    let r = w.shared.with(|w| {
        if rank >= w.size() {
            return Err(Error::arg(format!("rank {rank} outside a world of {}", w.size())));
        }
        let ep = w.endpoint(rank);
        let port = w.port();
        Ok(if write { port.start_write(ep, key, remote_offset, local)? } else { port.start_read(ep, key, remote_offset, local)? })
    })?;
    unsafe { hand_out(w.shared.clone(), Kind::Rdma { req: r }, req) }
}

/// Starts an RDMA write of `len` bytes at `local_offset` of `mem` into the
/// region `key` of world rank `rank` at `remote_offset`.
#[no_mangle]
pub unsafe extern "C" fn outboard_rdma_write_start(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    remote_offset: u64,
    mem: *const outboard_mem,
    local_offset: u64,
    len: usize,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| unsafe { rdma_start(world, rank, key, remote_offset, mem, local_offset, len, req, true) })
}

/// Starts an RDMA read of `len` bytes of region `key` of world rank `rank`
/// at `remote_offset` into `mem` at `local_offset`.
#[no_mangle]
pub unsafe extern "C" fn outboard_rdma_read_start(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    remote_offset: u64,
    mem: *const outboard_mem,
    local_offset: u64,
    len: usize,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| unsafe { rdma_start(world, rank, key, remote_offset, mem, local_offset, len, req, false) })
}

/// Blocking RDMA write (see [`outboard_rdma_write_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_rdma_write(world: *const outboard_world, rank: u32, key: u64, remote_offset: u64, mem: *const outboard_mem, local_offset: u64, len: usize) -> c_int {
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_rdma_write_start(world, rank, key, remote_offset, mem, local_offset, len, &mut r), r) }
}

/// Blocking RDMA read (see [`outboard_rdma_read_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_rdma_read(world: *const outboard_world, rank: u32, key: u64, remote_offset: u64, mem: *const outboard_mem, local_offset: u64, len: usize) -> c_int {
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_rdma_read_start(world, rank, key, remote_offset, mem, local_offset, len, &mut r), r) }
}
