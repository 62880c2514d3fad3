//! Split-phase operations under way: [`outboard_test`] and
//! [`outboard_wait`] finish any of them, copy results out, free what the
//! library allocated and free the request.

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use outboard_host::{CollRequest, Completion, DirectAtomic, HostBuf, HostError, OpError, PortIo, Request};
use outboard_runtime::node_coll::{NodeColl, Ticket};

use crate::error::{guard, Error, OUTBOARD_OK};
use crate::group::lock_node;
use crate::world::{outboard_world, Shared};

/// An operation under way (opaque); freed by the test or wait that
/// completes it.
pub struct outboard_request {
    shared: Arc<Shared>,
    kind: Kind,
}

/// Where a collective's result goes in the program's buffer.
pub(crate) enum Place {
    /// Its first bytes, up to this many (all of a shorter result).
    Prefix(usize),
    /// These ranges of it, each to the same offsets: the v-forms' blocks,
    /// with what lies between them untouched. A result shorter than a
    /// range (an exclusive scan's at rank 0) places nothing there.
    Blocks(Vec<std::ops::Range<usize>>),
}

impl Place {
    /// Copies `result` to `out`, which is null or holds what the program
    /// promised for this place.
    ///
    /// # Safety
    /// A non-null `out` must be writable for the place's bytes.
    unsafe fn copy(&self, result: &[u8], out: *mut u8) {
        if out.is_null() {
            return;
        }
        let prefix = match self {
            Place::Prefix(len) => Some(0..result.len().min(*len)),
            Place::Blocks(_) => None,
        };
        let blocks = match self {
            Place::Blocks(b) => &b[..],
            Place::Prefix(_) => &[],
        };
        for r in prefix.iter().chain(blocks).filter(|r| !r.is_empty() && r.end <= result.len()) {
            // SAFETY: the caller promises the bytes writable at `out`.
            unsafe { std::ptr::copy_nonoverlapping(result[r.clone()].as_ptr(), out.add(r.start), r.len()) };
        }
    }
}

/// What a request is and where its result goes.
pub(crate) enum Kind {
    /// A collective; its result bytes go to `out` (if not null) as `place`
    /// says. `module`: the name of the module that is its operator, which
    /// its failure names.
    Coll { req: CollRequest, out: *mut u8, place: Place, module: Option<Arc<str>> },
    /// A send from a buffer the library allocated.
    Send { req: Request, buf: HostBuf },
    /// A receive into a buffer the library allocated, copied to `out`.
    Recv { req: Request, buf: HostBuf, out: *mut u8, cap: usize },
    /// An RDMA operation on the program's registered memory.
    Rdma { req: Request },
    /// A remote atomic; the word's old value goes to `out` (if not null).
    Atomic { req: Request, out: *mut u64 },
    /// A direct-form remote atomic: the engine writes the old value and a
    /// flag into this process's memory, which the test reads before the
    /// event queue; the value goes to `out` (if not null).
    Direct { d: DirectAtomic, out: *mut u64 },
    /// A collective in the group's shared memory; what it gives this rank
    /// (if anything) goes to `out`.
    Node { node: Arc<Mutex<NodeColl>>, ticket: Ticket, out: *mut u8, len: usize, _open: NodeOpen },
}

/// Longest an idle step waits on a group's shared memory: the caller may
/// be waiting on other requests too.
const NODE_IDLE_MAX: Duration = Duration::from_micros(200);

/// Longest one wait step of [`outboard_wait`] on a group's shared memory
/// before it tests again (it wakes as soon as what it waits for comes).
const NODE_WAIT_STEP: Duration = Duration::from_millis(10);

/// Counts a collective in shared memory among the world's open ones
/// ([`Shared::node_open`]) for as long as its request lives.
pub(crate) struct NodeOpen(Arc<Shared>);

impl NodeOpen {
    /// Counts one on `node`'s group.
    pub(crate) fn new(shared: &Arc<Shared>, node: &Arc<Mutex<NodeColl>>) -> NodeOpen {
        shared.node_open.fetch_add(1, Ordering::AcqRel);
        *shared.node_last.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::downgrade(node));
        NodeOpen(shared.clone())
    }
}

impl Drop for NodeOpen {
    fn drop(&mut self) {
        self.0.node_open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a finished request reports.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct outboard_status {
    /// A receive's sender (world rank); -1 otherwise.
    pub source: i32,
    /// A receive's tag.
    pub tag: u64,
    /// A receive's message length (the full length when truncated).
    pub len: u64,
    /// The operation's error code (also returned by test and wait).
    pub error: c_int,
}

pub(crate) unsafe fn hand_out(shared: Arc<Shared>, kind: Kind, out: *mut *mut outboard_request) -> Result<(), Error> {
    let h = Box::into_raw(Box::new(outboard_request { shared, kind }));
    // SAFETY: the callers checked `out` for null.
    unsafe { out.write(h) };
    Ok(())
}

/// A finished operation's result and status.
type Finished = (Result<(), Error>, outboard_status);

/// The result of a collective in shared memory, `v`, copied to `out`.
fn node_done(nc: &mut NodeColl, v: Result<Vec<u8>, outboard_runtime::node_coll::NodeCollError>, out: *mut u8, len: usize) -> Finished {
    let st = outboard_status { source: -1, ..Default::default() };
    match v {
        Ok(v) => {
            if !out.is_null() && !v.is_empty() {
                // SAFETY: the program promised `len` writable bytes at
                // `out` until completion.
                unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len().min(len)) };
            }
            nc.recycle(v);
            (Ok(()), st)
        }
        Err(e) => (Err(Error::from(e)), st),
    }
}

/// Whether `r` finished; if so, its result and status.
fn poll(r: &mut outboard_request) -> Result<Option<Finished>, Error> {
    if let Kind::Node { node, ticket, out, len, .. } = &r.kind {
        // Never the world's lock: the group's own is enough.
        let mut nc = lock_node(node)?;
        return Ok(nc.test(ticket).map(|v| node_done(&mut nc, v, *out, *len)));
    }
    let mut st = outboard_status { source: -1, ..Default::default() };
    r.shared.with(|w| {
        let mut from = None;
        let port = w.port();
        let res = match &mut r.kind {
            Kind::Coll { req, out, place, module } => match port.coll_test(req) {
                None => return Ok(None),
                Some(Ok(v)) => {
                    // SAFETY: the program promised the place's bytes
                    // writable at `out` until completion.
                    unsafe { place.copy(&v, *out) };
                    Ok(())
                }
                Some(Err(e)) => Err(Error::from(e).with_operator(module.as_deref())),
            },
            Kind::Send { req, buf } => match port.test(*req) {
                None => return Ok(None),
                Some(r) => {
                    let _ = port.free(*buf);
                    r.map(|_| ()).map_err(Error::from)
                }
            },
            Kind::Rdma { req } => match port.test(*req) {
                None => return Ok(None),
                Some(r) => r.map(|_| ()).map_err(Error::from),
            },
            Kind::Atomic { req, out } => match port.atomic_result(*req) {
                None => return Ok(None),
                Some(Ok(v)) => {
                    if !out.is_null() {
                        // SAFETY: the program promised a writable u64 at
                        // `out` until completion.
                        unsafe { out.write(v) };
                    }
                    Ok(())
                }
                Some(Err(e)) => Err(Error::from(e)),
            },
            Kind::Direct { d, out } => match port.poll_direct(d) {
                None => return Ok(None),
                Some(Ok(v)) => {
                    if !out.is_null() {
                        // SAFETY: the program promised a writable u64 at
                        // `out` until completion.
                        unsafe { out.write(v) };
                    }
                    Ok(())
                }
                Some(Err(e)) => Err(Error::from(e)),
            },
            Kind::Node { .. } => unreachable!("handled above without the world"),
            Kind::Recv { req, buf, out, cap } => match port.test(*req) {
                None => return Ok(None),
                Some(r) => {
                    let (res, got) = match r {
                        Ok(Completion::Received { src, tag, len }) => (Ok(()), Some((src, tag, len))),
                        Ok(other) => (Err(Error::new(crate::OUTBOARD_ERR_OTHER, format!("receive completed as {other:?}"))), None),
                        Err(e @ HostError::Op(OpError::Truncated { src, tag, len })) => (Err(Error::from(e)), Some((src, tag, len))),
                        Err(e) => (Err(Error::from(e)), None),
                    };
                    if let Some((src, tag, len)) = got {
                        from = Some(src);
                        st.tag = tag;
                        st.len = u64::from(len);
                        let n = (len as usize).min(*cap);
                        if n > 0 {
                            // SAFETY: the program promised `cap` writable bytes
                            // at `out` (not null when `cap` > 0) until the
                            // receive completes, which is now.
                            let into = unsafe { std::slice::from_raw_parts_mut(*out, n) };
                            port.io_ref().read(buf.addr, into).map_err(|e| Error::from(HostError::from(e)))?;
                        }
                    }
                    let _ = port.free(*buf);
                    res
                }
            },
        };
        if let Some(src) = from {
            st.source = w.rank_of(src).map_or(-1, |r| r as i32);
        }
        Ok(Some((res.map_err(|e| e.in_ranks(w)), st)))
    })
}

/// Tests `*req`: sets `*done` to 1 when it finished (then frees it, sets
/// `*req` to null, fills `*status` if not null and returns the operation's
/// code), to 0 otherwise (returning `OUTBOARD_OK`). A null `*req` counts
/// as finished.
#[no_mangle]
pub unsafe extern "C" fn outboard_test(req: *mut *mut outboard_request, done: *mut c_int, status: *mut outboard_status) -> c_int {
    guard(|| {
        if req.is_null() || done.is_null() {
            return Err(Error::arg("req or done is null"));
        }
        // SAFETY: checked above; `*req` is a handle from this library or null.
        let Some(r) = (unsafe { (*req).as_mut() }) else {
            unsafe { done.write(1) };
            return Ok(());
        };
        match poll(r)? {
            None => {
                unsafe { done.write(0) };
                Ok(())
            }
            Some((res, mut st)) => {
                unsafe {
                    drop(Box::from_raw(*req));
                    *req = std::ptr::null_mut();
                    done.write(1);
                }
                st.error = res.as_ref().map_or_else(|e| e.code, |()| OUTBOARD_OK);
                if !status.is_null() {
                    unsafe { status.write(st) };
                }
                res
            }
        }
    })
}

/// Blocks until `*req` finishes; then as [`outboard_test`]. Several
/// threads may wait at once (on different operations): while more than
/// one does, each pauses briefly outside the world's lock instead of
/// idling inside it.
#[no_mangle]
pub unsafe extern "C" fn outboard_wait(req: *mut *mut outboard_request, status: *mut outboard_status) -> c_int {
    let mut done: c_int = 0;
    // The world outlives the request (the request holds it).
    let shared = match unsafe { req.as_ref().and_then(|r| r.as_ref()) } {
        Some(r) => r.shared.clone(),
        None => return unsafe { outboard_test(req, &mut done, status) },
    };
    // A collective in a group's shared memory: tests and waits on the
    // group alone, never the world's lock.
    if let Some(Kind::Node { node, .. }) = unsafe { (*req).as_ref() }.map(|r| &r.kind) {
        let node = node.clone();
        loop {
            let rc = unsafe { outboard_test(req, &mut done, status) };
            if rc != OUTBOARD_OK || done != 0 {
                return rc;
            }
            let idle = guard(|| {
                lock_node(&node)?.idle(NODE_WAIT_STEP);
                Ok(())
            });
            if idle != OUTBOARD_OK {
                return idle;
            }
        }
    }
    let _waiting = shared.waiting();
    loop {
        let rc = unsafe { outboard_test(req, &mut done, status) };
        if rc != OUTBOARD_OK || done != 0 {
            return rc;
        }
        let idle = guard(|| shared.pause());
        if idle != OUTBOARD_OK {
            return idle;
        }
    }
}

/// One idle step of the world's waiting policy, for a program that runs its
/// own wait loop over Outboard requests (an MPI library waiting on a mix of
/// its own requests and Outboard's): spin, yield, or park until the engine
/// delivers an event or a short bound passes, as [`outboard_wait`] does
/// between its tests. A busy loop of [`outboard_test`] instead keeps the
/// core from the engine's thread when cores are few. With `may_block` 0
/// it only yields the core (the caller has other requests to poll soon).
#[no_mangle]
pub unsafe extern "C" fn outboard_idle(world: *const outboard_world, may_block: c_int) -> c_int {
    guard(|| {
        // SAFETY: `world` is a handle from `outboard_init*` or null.
        let w = unsafe { world.as_ref() }.ok_or_else(|| Error::arg("world is null"))?;
        let _waiting = w.shared.waiting();
        if may_block == 0 || w.shared.contended() {
            std::thread::yield_now();
            return Ok(());
        }
        // Nothing from the engine ends a collective in shared memory: wait
        // on its group instead, briefly (the caller may await others).
        if w.shared.node_open.load(Ordering::Acquire) > 0 {
            let last = w.shared.node_last.lock().ok().and_then(|l| l.as_ref().and_then(Weak::upgrade));
            match last.as_ref().map(|n| n.try_lock()) {
                Some(Ok(mut nc)) => nc.idle(NODE_IDLE_MAX),
                _ => std::thread::yield_now(),
            }
            return Ok(());
        }
        w.shared.with(|w| {
            w.port().io().idle();
            Ok(())
        })
    })
}

/// A blocking call's end: the start's code, or the wait's.
pub(crate) unsafe fn finish(started: c_int, mut req: *mut outboard_request) -> c_int {
    if started != OUTBOARD_OK {
        return started;
    }
    unsafe { outboard_wait(&mut req, std::ptr::null_mut()) }
}
