//! Remote atomics and the MCS lock (dissertation ch. 5): fetch-and-add,
//! swap and compare-and-swap that the engines perform on a 32- or 64-bit
//! word of a peer's registered memory ([`crate::outboard_mem_register`]),
//! blocking and split-phase; the same operations on this process's own
//! registered word, atomic with respect to the remote ones; and the
//! distributed MCS queue lock built on them.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use outboard_engine::{Endpoint, NodeId, OpenError, PortId};
use outboard_host::atomic_server::{AtomicServer, ServerWait};
use outboard_host::lock::{LockError, McsLock};
use outboard_host::{AtomicOp, AtomicWidth, Datatype, HostBuf, Port, ReduceOp, Reduction, RemoteWord};
use outboard_runtime::RtPort;

use crate::error::{deref, guard, put, Error, OUTBOARD_ERR_OTHER, OUTBOARD_ERR_RESOURCE, OUTBOARD_ERR_STATE};
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
    let word = (rank, key, offset, bits);
    unsafe { start_on_word(world, word, op_of(op, operand, compare), req, |p, word, op| p.start_atomic(word, op), |r| Kind::Atomic { req: r, out: old }) }
}

/// What both forms of an atomic's start do: check the handles, the
/// operation and the width, name the word on rank `rank`, start it with
/// `start` on this rank's port (holding the world only meanwhile), and
/// hand out the request `kind` makes of what `start` returned.
unsafe fn start_on_word<R>(
    world: *const outboard_world,
    (rank, key, offset, bits): (u32, u64, u64, u32),
    op: Result<AtomicOp, Error>,
    req: *mut *mut outboard_request,
    start: impl FnOnce(&mut Port<RtPort>, RemoteWord, AtomicOp) -> Result<R, outboard_host::HostError>,
    kind: impl FnOnce(R) -> Kind,
) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        if req.is_null() {
            return Err(Error::arg("request is null"));
        }
        let op = op?;
        let width = width_of(bits)?;
        let r = w.shared.with(|w| {
            if rank >= w.size() {
                return Err(Error::arg(format!("rank {rank} outside a world of {}", w.size())));
            }
            let word = RemoteWord { ep: w.endpoint(rank), key, offset, width };
            Ok(start(w.port(), word, op)?)
        })?;
        unsafe { hand_out(w.shared.clone(), kind(r), req) }
    })
}

/// Starts `op` as [`outboard_atomic_start`] does, in the direct form: the
/// engine writes the word's old value and then a flag into this process's
/// memory, and [`crate::outboard_test`] / [`crate::outboard_wait`] read
/// that flag before the event queue (the dissertation's second way of
/// returning an atomic's value, which spares the host the event). On
/// completion the old value goes to `*old` if `old` is not null; it must
/// stay valid until then.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_atomic_direct_start(
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
    let word = (rank, key, offset, bits);
    unsafe { start_on_word(world, word, op_of(op, operand, compare), req, |p, word, op| p.start_atomic_direct(word, op), |d| Kind::Direct { d, out: old }) }
}

/// Blocking form of [`outboard_atomic_direct_start`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_atomic_direct(
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
    unsafe { finish(outboard_atomic_direct_start(world, rank, key, offset, bits, op, operand, compare, old, &mut r), r) }
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
            LockError::AlreadyHeld | LockError::NotHeld | LockError::Busy => Error::new(OUTBOARD_ERR_STATE, e.to_string()),
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

    /// Starts an operation on the lock and tests it until done, holding
    /// the world only for each start and test: the process's other threads
    /// go on with their calls on the world meanwhile.
    fn run(&self, start: impl FnOnce(&mut McsLock, &mut outboard_runtime::World) -> Result<(), LockError>) -> Result<(), Error> {
        if self.with(|l, w| {
            start(l, w)?;
            Ok(l.test(w.port())?)
        })? {
            return Ok(());
        }
        let _waiting = self.shared.waiting();
        while !self.with(|l, w| Ok(l.test(w.port())?))? {
            self.shared.pause()?;
        }
        Ok(())
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
/// world only for each step of the lock's protocol.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_acquire(lock: *const outboard_lock) -> c_int {
    guard(|| unsafe { deref(lock, "lock") }?.run(|l, w| l.start_acquire(w.port())))
}

/// Takes the lock if nobody holds or awaits it, never waiting for a
/// holder: `*acquired` is 1 if it was taken, else 0.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_try(lock: *const outboard_lock, acquired: *mut c_int) -> c_int {
    guard(|| {
        let l = unsafe { deref(lock, "lock") }?;
        l.run(|l, w| l.start_try(w.port()))?;
        let got = l.with(|l, _| Ok(l.is_held()))?;
        unsafe { put(acquired, c_int::from(got), "acquired") }
    })
}

/// Releases the lock, handing it to the next waiter if there is one (and
/// waiting, without holding the process's other threads, for one that
/// has queued but not yet linked itself).
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_release(lock: *const outboard_lock) -> c_int {
    guard(|| unsafe { deref(lock, "lock") }?.run(|l, w| l.start_release(w.port())))
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

/// The atomic server polls for requests without pause (GM's
/// `gm_receive`): the quickest answer, a whole core.
pub const OUTBOARD_SERVER_POLL: c_int = 0;
/// The atomic server polls `spins` times, then blocks until a request
/// comes (`gm_blocking_receive`).
pub const OUTBOARD_SERVER_SPIN_THEN_BLOCK: c_int = 1;
/// The atomic server blocks at once (`gm_blocking_receive_no_spin`).
pub const OUTBOARD_SERVER_BLOCK: c_int = 2;

/// How a server waits, from its C names.
fn server_wait(wait: c_int, spins: u32) -> Result<ServerWait, Error> {
    match wait {
        OUTBOARD_SERVER_POLL => Ok(ServerWait::Poll),
        OUTBOARD_SERVER_SPIN_THEN_BLOCK => Ok(ServerWait::SpinThenBlock { spins }),
        OUTBOARD_SERVER_BLOCK => Ok(ServerWait::Block),
        _ => Err(Error::arg(format!(
            "atomic server wait {wait} is none of OUTBOARD_SERVER_POLL (0), OUTBOARD_SERVER_SPIN_THEN_BLOCK (1) and OUTBOARD_SERVER_BLOCK (2)"
        ))),
    }
}

/// What a server's thread shares with the handle.
struct ServerShared {
    server: Mutex<AtomicServer>,
    /// Set by the handle to end the thread.
    stop: AtomicBool,
    /// Set while a caller waits to expose a region: the thread leaves its
    /// wait (and the server's lock) so the caller can.
    pending: AtomicBool,
    /// The thread's failure, if it stopped on one.
    failed: Mutex<Option<String>>,
}

/// Host-based atomics (dissertation 5.1, 5.4.1): at every member of a
/// group, a thread of the library serving atomic requests, sent as
/// messages, on a port of its own with the host's atomics (opaque). The
/// comparison point for the engines' atomics, and the way to run the MCS
/// lock without them ([`outboard_lock_create_served`]).
pub struct outboard_atomic_server {
    shared: Arc<Shared>,
    inner: Arc<ServerShared>,
    thread: Mutex<Option<std::thread::JoinHandle<Port<RtPort>>>>,
    /// Every member's server, in group-rank order.
    servers: Vec<Endpoint>,
}

/// A port on this process's engine for the server: a freed server's, or
/// a new one in the first free slot.
fn server_port(shared: &Shared, w: &outboard_runtime::World) -> Result<Port<RtPort>, Error> {
    if let Some(p) = shared.server_ports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop() {
        return Ok(p);
    }
    let node = w.node().ok_or_else(|| {
        Error::new(
            OUTBOARD_ERR_STATE,
            "an atomic server needs an engine of this process's own, and this rank uses its node's engine (OUTBOARD_ENGINE=node, or outboard run --ranks-per-node): run with an engine per process",
        )
    })?;
    let mine = w.endpoint(w.rank()).port.0;
    let mut last = None;
    for slot in (0..=u8::MAX).filter(|&p| p != mine) {
        match node.open_port(PortId(slot)) {
            Ok(p) => return Ok(Port::new(p)),
            Err(OpenError::InUse(_)) => continue,
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    Err(Error::new(OUTBOARD_ERR_RESOURCE, format!("no free port on this process's engine for an atomic server ({})", last.map_or("every slot in use".to_string(), |e| e.to_string()))))
}

/// Starts an atomic server at every member of `group` (collective; every
/// member passes the same `wait`): a thread of this library that serves
/// host-based atomic requests ([`outboard_server_atomic`]) on a port of
/// its own, waiting for each as `wait` says (`OUTBOARD_SERVER_POLL`,
/// `OUTBOARD_SERVER_SPIN_THEN_BLOCK` with `spins` polls before blocking,
/// or `OUTBOARD_SERVER_BLOCK`; `spins` is ignored otherwise). The members
/// exchange where their servers are. It serves only the memory exposed to
/// it ([`outboard_atomic_server_expose`]). Needs an engine per process
/// (`OUTBOARD_ERR_STATE` on a node engine).
#[no_mangle]
pub unsafe extern "C" fn outboard_atomic_server_create(
    group: *const outboard_group,
    wait: c_int,
    spins: u32,
    out: *mut *mut outboard_atomic_server,
) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        if out.is_null() {
            return Err(Error::arg("out is null"));
        }
        let wait = server_wait(wait, spins)?;
        let inner = Arc::new(ServerShared { server: Mutex::new(AtomicServer::new()), stop: AtomicBool::new(false), pending: AtomicBool::new(false), failed: Mutex::new(None) });
        let shared = g.shared.clone();
        let (port, servers) = g.with(|g, w| {
            let port = server_port(&shared, w)?;
            let me = port.endpoint();
            // Every member's server endpoint, each filled in at its own
            // rank and or-ed together.
            let n = g.size() as usize;
            let mut mine = vec![0u8; n * 16];
            let at = g.rank() as usize * 16;
            mine[at..][..8].copy_from_slice(&((u64::from(me.node.0) << 8) | u64::from(me.port.0)).to_ne_bytes());
            mine[at + 8..][..8].copy_from_slice(&u64::from(me.gen).to_ne_bytes());
            let d = g.defaults();
            let bor = Reduction { op: ReduceOp::Bor, dtype: Datatype::U64 };
            let all = w.port().allreduce(g, d.mode, d.allreduce, bor, &mine)?;
            let word = |i: usize| u64::from_ne_bytes(all[i * 8..][..8].try_into().expect("8 bytes"));
            let servers = (0..n)
                .map(|i| Endpoint { node: NodeId((word(2 * i) >> 8) as u32), port: PortId(word(2 * i) as u8), gen: word(2 * i + 1) as u32 })
                .collect();
            Ok((port, servers))
        })?;
        let t = inner.clone();
        let thread = std::thread::Builder::new()
            .name("outboard-atomic-server".into())
            .spawn(move || serve(port, &t, wait))
            .map_err(|e| Error::new(OUTBOARD_ERR_RESOURCE, format!("starting the atomic server's thread: {e}")))?;
        let h = Box::into_raw(Box::new(outboard_atomic_server { shared: g.shared.clone(), inner, thread: Mutex::new(Some(thread)), servers }));
        unsafe { put(out, h, "out") }.inspect_err(|_| drop(unsafe { Box::from_raw(h) }))
    })
}

/// The server's thread: serves until stopped, stepping out of its wait
/// whenever the handle needs the server. Gives its port back, its posted
/// receive withdrawn, for the next server.
fn serve(mut port: Port<RtPort>, s: &ServerShared, wait: ServerWait) -> Port<RtPort> {
    let stop = || s.stop.load(Ordering::Acquire) || s.pending.load(Ordering::Acquire);
    let fail = |e: outboard_host::HostError| *s.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
    while !s.stop.load(Ordering::Acquire) {
        let mut server = s.server.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = server.serve_one(&mut port, wait, &stop) {
            fail(e);
            break;
        }
        drop(server);
        while s.pending.load(Ordering::Acquire) && !s.stop.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }
    if let Err(e) = s.server.lock().unwrap_or_else(std::sync::PoisonError::into_inner).withdraw(&mut port) {
        fail(e);
    }
    port
}

impl outboard_atomic_server {
    /// Lets this rank's server perform operations on `buf` under `key`.
    fn expose(&self, key: u64, buf: HostBuf) -> Result<(), Error> {
        if let Some(e) = self.inner.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            return Err(Error::new(OUTBOARD_ERR_STATE, format!("the atomic server stopped: {e}")));
        }
        self.inner.pending.store(true, Ordering::Release);
        let mut s = self.inner.server.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.expose(key, buf);
        drop(s);
        self.inner.pending.store(false, Ordering::Release);
        Ok(())
    }
}

/// Lets this rank's server perform host-based atomics on `mem`, which must
/// be registered ([`crate::outboard_mem_register`]): requests name it by
/// its key, as the engines' atomics do. Memory not exposed is refused as
/// an unknown key (`OUTBOARD_ERR_RDMA` at the requester).
#[no_mangle]
pub unsafe extern "C" fn outboard_atomic_server_expose(server: *const outboard_atomic_server, mem: *const outboard_mem) -> c_int {
    guard(|| {
        let s = unsafe { deref(server, "server") }?;
        let m = unsafe { deref(mem, "mem") }?;
        s.shared.live()?;
        let key = m.key().ok_or_else(|| Error::arg("mem is not registered: outboard_mem_register it before exposing it to the atomic server"))?;
        s.expose(key, m.buf())
    })
}

/// Performs `op` (operands as in [`outboard_atomic_start`]) on the
/// `bits`-bit word at `offset` of the region with `key` at group rank
/// `rank`'s server, host-based: a request message to that server's thread,
/// which performs it with the host's atomics and replies with the old
/// value (written to `*old` if not null). Blocking; the world is held
/// while it waits, so keep it out of a wait another thread of this process
/// must end.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn outboard_server_atomic(
    server: *const outboard_atomic_server,
    rank: u32,
    key: u64,
    offset: u64,
    bits: u32,
    op: c_int,
    operand: u64,
    compare: u64,
    old: *mut u64,
) -> c_int {
    guard(|| {
        let s = unsafe { deref(server, "server") }?;
        let op = op_of(op, operand, compare)?;
        let width = width_of(bits)?;
        let ep = *s.servers.get(rank as usize).ok_or_else(|| Error::arg(format!("rank {rank} outside a group of {}", s.servers.len())))?;
        let v = s.shared.with(|w| Ok(w.port().hb_atomic(ep, key, offset, width, op)?))?;
        if !old.is_null() {
            unsafe { old.write(v) };
        }
        Ok(())
    })
}

/// How many requests this rank's server performed so far.
#[no_mangle]
pub unsafe extern "C" fn outboard_atomic_server_served(server: *const outboard_atomic_server, served: *mut u64) -> c_int {
    guard(|| {
        let s = unsafe { deref(server, "server") }?;
        if served.is_null() {
            return Err(Error::arg("served is null"));
        }
        // Step the thread out of its wait for the count.
        s.inner.pending.store(true, Ordering::Release);
        let n = s.inner.server.lock().unwrap_or_else(std::sync::PoisonError::into_inner).served;
        s.inner.pending.store(false, Ordering::Release);
        unsafe { put(served, n, "served") }
    })
}

/// Stops this rank's server and frees the handle. Every member must be
/// done sending to it first (for instance after a barrier): a request
/// that comes later is never answered. The handle is freed even on
/// failure.
#[no_mangle]
pub unsafe extern "C" fn outboard_atomic_server_free(server: *mut outboard_atomic_server) -> c_int {
    guard(|| {
        if server.is_null() {
            return Err(Error::arg("server is null"));
        }
        // SAFETY: a handle from `outboard_atomic_server_create`, freed only
        // here.
        let h = unsafe { Box::from_raw(server) };
        h.inner.stop.store(true, Ordering::Release);
        if let Some(t) = h.thread.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let port = t.join().map_err(|_| Error::new(OUTBOARD_ERR_OTHER, "the atomic server's thread panicked"))?;
            // Kept for the next server while the world lives.
            if h.shared.live().is_ok() {
                h.shared.server_ports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(port);
            }
        }
        let failed = h.inner.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        match failed {
            Some(e) => Err(Error::new(OUTBOARD_ERR_OTHER, format!("the atomic server had stopped: {e}"))),
            None => Ok(()),
        }
    })
}

/// Creates an MCS lock over `group` as [`outboard_lock_create`] does, whose
/// remote operations go to the members' atomic servers (`server`, made
/// over the same group) instead of their engines: the host-based lock the
/// dissertation compares the offloaded one with. This rank's queue words
/// are exposed to its server. Collective over `group`. Free the lock
/// before the server.
#[no_mangle]
pub unsafe extern "C" fn outboard_lock_create_served(
    group: *const outboard_group,
    home: u32,
    server: *const outboard_atomic_server,
    out: *mut *mut outboard_lock,
) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let s = unsafe { deref(server, "server") }?;
        if out.is_null() {
            return Err(Error::arg("out is null"));
        }
        if s.servers.len() != g.size as usize {
            return Err(Error::arg(format!("the server was made over a group of {} and the lock's group has {}", s.servers.len(), g.size)));
        }
        let l = g.with(|g, w| {
            let l = McsLock::create(w.port(), g, home)?;
            let (words, key) = l.words();
            s.expose(key, words)?;
            // No member may reach a server before it serves the words.
            let d = g.defaults();
            w.port().barrier(g, d.mode, d.barrier)?;
            Ok(l)
        })?;
        let l = l.over_servers(s.servers.clone())?;
        let h = Box::into_raw(Box::new(outboard_lock { shared: g.shared.clone(), lock: Mutex::new(l) }));
        unsafe { put(out, h, "out") }.inspect_err(|_| drop(unsafe { Box::from_raw(h) }))
    })
}
