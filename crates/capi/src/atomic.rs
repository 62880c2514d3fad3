//! Remote atomics and the MCS lock (dissertation ch. 5): fetch-and-add,
//! swap and compare-and-swap that the engines perform on a 32- or 64-bit
//! word of a peer's registered memory ([`crate::outboard_mem_register`]),
//! blocking and split-phase; the same operations on this process's own
//! registered word, atomic with respect to the remote ones; and the
//! distributed MCS queue lock built on them.

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use outboard_host::lock::{LockError, McsLock};
use outboard_host::{AtomicOp, AtomicWidth, RemoteWord, PortIo};

use crate::error::{deref, guard, put, Error, OUTBOARD_ERR_OTHER, OUTBOARD_ERR_STATE};
use crate::group::outboard_group;
use crate::mem::outboard_mem;
use crate::request::{finish, hand_out, outboard_request, Kind};
use crate::world::{outboard_world, Shared};

/// Fetch-and-add: the word becomes `old + operand` (wrapping).
pub const OUTBOARD_FETCH_ADD: c_int = 1;
/// Swap (fetch-and-write): the word becomes `operand`.
pub const OUTBOARD_SWAP: c_int = 2;
/// Compare-and-swap: the word becomes `operand` if it held `compare`.
pub const OUTBOARD_COMPARE_SWAP: c_int = 3;

/// The operation and width a C call names.
fn op_of(op: c_int, operand: u64, compare: u64) -> Result<AtomicOp, Error> {
    Ok(match op {
        OUTBOARD_FETCH_ADD => AtomicOp::FetchAdd(operand),
        OUTBOARD_SWAP => AtomicOp::Swap(operand),
        OUTBOARD_COMPARE_SWAP => AtomicOp::CompareSwap { compare, new: operand },
        _ => return Err(Error::arg(format!("unknown atomic operation {op}"))),
    })
}

fn width_of(bits: u32) -> Result<AtomicWidth, Error> {
    match bits {
        32 => Ok(AtomicWidth::W32),
        64 => Ok(AtomicWidth::W64),
        _ => Err(Error::arg(format!("atomic width {bits}: 32 or 64 bits"))),
    }
}

/// Starts `op` on the `bits`-bit word (32 or 64) at `offset` of region
/// `key` of world rank `rank` (which may be this rank). `operand` is the
/// addend (fetch-add) or the new value (swap, compare-and-swap); `compare`
/// is compare-and-swap's expected value (ignored otherwise). On completion
/// the word's old value (zero-extended) is written to `*old` if `old` is
/// not null; it must stay valid until then. The engine checks key, bounds
/// and alignment before touching memory (`OUTBOARD_ERR_RDMA`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_atomic_start(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    offset: u64,
    bits: u32,
    op: c_int,
    operand: u64,
    compare: u64,
    old: *mut u64,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        if req.is_null() {
            return Err(Error::arg("request is null"));
        }
        let op = op_of(op, operand, compare)?;
        let width = width_of(bits)?;
        let r = w.shared.with(|w| {
            if rank >= w.size() {
                return Err(Error::arg(format!("rank {rank} outside a world of {}", w.size())));
            }
            let word = RemoteWord { ep: w.endpoint(rank), key, offset, width };
            Ok(w.port().start_atomic(word, op)?)
        })?;
        unsafe { hand_out(w.shared.clone(), Kind::Atomic { req: r, out: old }, req) }
    })
}

/// Blocking form of [`outboard_atomic_start`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_atomic(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    offset: u64,
    bits: u32,
    op: c_int,
    operand: u64,
    compare: u64,
    old: *mut u64,
) -> c_int {
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_atomic_start(world, rank, key, offset, bits, op, operand, compare, old, &mut r), r) }
}

/// Blocking fetch-and-add on a 64-bit remote word; the old value in `*old`.
#[no_mangle]
pub unsafe extern "C" fn outboard_fetch_add(world: *const outboard_world, rank: u32, key: u64, offset: u64, add: u64, old: *mut u64) -> c_int {
    unsafe { outboard_atomic(world, rank, key, offset, 64, OUTBOARD_FETCH_ADD, add, 0, old) }
}

/// Blocking swap on a 64-bit remote word; the old value in `*old`.
#[no_mangle]
pub unsafe extern "C" fn outboard_swap(world: *const outboard_world, rank: u32, key: u64, offset: u64, value: u64, old: *mut u64) -> c_int {
    unsafe { outboard_atomic(world, rank, key, offset, 64, OUTBOARD_SWAP, value, 0, old) }
}

/// Blocking compare-and-swap on a 64-bit remote word: it becomes `new` if
/// it held `compare`; the old value in `*old` (equal to `compare` when it
/// swapped).
#[no_mangle]
pub unsafe extern "C" fn outboard_compare_swap(
    world: *const outboard_world,
    rank: u32,
    key: u64,
    offset: u64,
    compare: u64,
    new: u64,
    old: *mut u64,
) -> c_int {
    unsafe { outboard_atomic(world, rank, key, offset, 64, OUTBOARD_COMPARE_SWAP, new, compare, old) }
}

/// `op` on the `bits`-bit word at `offset` of this process's own buffer
/// `mem`, atomically with respect to the engine's remote atomics on it
/// (operands as in [`outboard_atomic_start`]); the old value in `*old`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_local_atomic(
    mem: *const outboard_mem,
    offset: u64,
    bits: u32,
    op: c_int,
    operand: u64,
    compare: u64,
    old: *mut u64,
) -> c_int {
    guard(|| {
        let m = unsafe { deref(mem, "mem") }?;
        let op = op_of(op, operand, compare)?;
        let width = width_of(bits)?;
        let v = m.shared().with(|w| Ok(w.port().local_atomic(m.buf(), offset, width, op)?))?;
        if !old.is_null() {
            unsafe { old.write(v) };
        }
        Ok(())
    })
}

/// One rank's handle on a distributed MCS queue lock (opaque).
pub struct outboard_lock {
    shared: Arc<Shared>,
    lock: Mutex<McsLock>,
}

impl From<LockError> for Error {
    fn from(e: LockError) -> Error {
        match e {
            LockError::Host(h) => Error::from(h),
            LockError::AlreadyHeld | LockError::NotHeld => Error::new(OUTBOARD_ERR_STATE, e.to_string()),
            LockError::BadTable { .. } => Error::arg(e.to_string()),
            LockError::Corrupt(_) => Error::new(OUTBOARD_ERR_OTHER, e.to_string()),
        }
    }
}

impl outboard_lock {
    fn with<R>(&self, f: impl FnOnce(&mut McsLock, &mut outboard_runtime::World) -> Result<R, Error>) -> Result<R, Error> {
        let mut l = self.lock.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the lock in use"))?;
        self.shared.with(|w| f(&mut l, w))
    }
}

/// Creates an MCS lock over `group` whose lock word lives at group rank
/// `home`. Collective over `group` (every member passes the same `home`):
/// each member registers its queue words and the members exchange where
/// they are.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_create(group: *const outboard_group, home: u32, out: *mut *mut outboard_lock) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        if out.is_null() {
            return Err(Error::arg("out is null"));
        }
        let l = g.with(|g, w| Ok(McsLock::create(w.port(), g, home)?))?;
        let h = Box::into_raw(Box::new(outboard_lock { shared: g.shared.clone(), lock: Mutex::new(l) }));
        unsafe { put(out, h, "out") }.inspect_err(|_| drop(unsafe { Box::from_raw(h) }))
    })
}

/// Blocks until this rank holds the lock (FIFO among the waiters; a
/// waiting rank polls only its own memory). The process's other threads
/// go on with their calls on the world meanwhile: the wait holds the
/// world only for each look at the lock word.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_acquire(lock: *const outboard_lock) -> c_int {
    guard(|| {
        let l = unsafe { deref(lock, "lock") }?;
        if l.with(|l, w| Ok(l.enqueue(w.port())?))? {
            return Ok(());
        }
        let _waiting = l.shared.waiting();
        loop {
            if l.with(|l, w| Ok(l.handed_over(w.port())?))? {
                return Ok(());
            }
            if l.shared.contended() {
                // Another thread waits too: leave it the world.
                std::thread::sleep(std::time::Duration::from_micros(10));
            } else {
                l.shared.with(|w| {
                    w.port().io().idle();
                    Ok(())
                })?;
            }
        }
    })
}

/// Takes the lock if nobody holds or awaits it, never waiting: `*acquired`
/// is 1 if it was taken, else 0.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_try(lock: *const outboard_lock, acquired: *mut c_int) -> c_int {
    guard(|| {
        let got = unsafe { deref(lock, "lock") }?.with(|l, w| Ok(l.try_lock(w.port())?))?;
        unsafe { put(acquired, c_int::from(got), "acquired") }
    })
}

/// Releases the lock, handing it to the next waiter if there is one.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_release(lock: *const outboard_lock) -> c_int {
    guard(|| unsafe { deref(lock, "lock") }?.with(|l, w| Ok(l.release(w.port())?)))
}

/// Frees this rank's handle and its queue words. Every rank must be done
/// with the lock first (for instance after a barrier): another rank's
/// operation on freed words fails. The handle is freed even on failure.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_free(lock: *mut outboard_lock) -> c_int {
    guard(|| {
        if lock.is_null() {
            return Err(Error::arg("lock is null"));
        }
        // SAFETY: a handle from `outboard_lock_create`, freed only here.
        let h = unsafe { Box::from_raw(lock) };
        let (words, key) = h.lock.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).words();
        h.shared.with(|w| {
            w.port().deregister(key)?;
            Ok(w.port().free(words)?)
        })
    })
}
