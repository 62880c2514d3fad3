//! Collectives on a group: barrier, broadcast, reduce and allreduce, each
//! blocking and split-phase (`*_start`, then [`crate::outboard_test`] /
//! [`crate::outboard_wait`]). They run in the group's mode with its
//! default algorithm and tree. In a group whose members all run on this
//! node, offloaded calls meet in shared memory instead of the engine:
//! blocking ones always, split-phase ones when short (see
//! `outboard_runtime::node_coll`).

use std::ffi::{c_int, c_void};

use std::sync::Arc;

use outboard_host::{Datatype, Mode, ReduceOp, Reduction};
use outboard_runtime::node_coll::{Buffers, NodeColl, NodeCollError, Ticket};

use crate::error::{bytes, bytes_mut, deref, guard, Error};
use crate::group::{outboard_group, SpanPath};
use crate::nicvm::{is_module, module_op};
use crate::span;
use crate::request::{finish, hand_out, outboard_request, Kind, NodeOpen, Place};

/// 32-bit signed integers (`int32_t`).
pub const OUTBOARD_INT32: c_int = 1;
/// 64-bit signed integers (`int64_t`).
pub const OUTBOARD_INT64: c_int = 2;
/// 64-bit unsigned integers (`uint64_t`).
pub const OUTBOARD_UINT64: c_int = 3;
/// IEEE 754 single (`float`).
pub const OUTBOARD_FLOAT: c_int = 4;
/// IEEE 754 double (`double`).
pub const OUTBOARD_DOUBLE: c_int = 5;

/// Sum (integers wrap).
pub const OUTBOARD_SUM: c_int = 1;
/// Minimum (floats: a NaN loses to a number).
pub const OUTBOARD_MIN: c_int = 2;
/// Maximum (floats: a NaN loses to a number).
pub const OUTBOARD_MAX: c_int = 3;
/// Bitwise and (integer types).
pub const OUTBOARD_BAND: c_int = 4;
/// Bitwise or (integer types).
pub const OUTBOARD_BOR: c_int = 5;
/// Product (integers wrap; floats depend on the order of combination).
pub const OUTBOARD_PROD: c_int = 6;
/// Bitwise exclusive or (integer types).
pub const OUTBOARD_BXOR: c_int = 7;
/// Logical and: 1 if both are non-zero, else 0 (integer types).
pub const OUTBOARD_LAND: c_int = 8;
/// Logical or: 1 if either is non-zero, else 0 (integer types).
pub const OUTBOARD_LOR: c_int = 9;
/// Logical exclusive or: 1 if exactly one is non-zero, else 0 (integer
/// types).
pub const OUTBOARD_LXOR: c_int = 10;

pub(crate) fn reduction(dtype: c_int, op: c_int) -> Result<Reduction, Error> {
    operator(dtype, op).map(|(r, _)| r)
}

/// The reduction `dtype` and `op` name and, for a module's operator
/// ([`crate::outboard_op_from_module`]), the module's name, which its
/// failures are reported under.
pub(crate) fn operator(dtype: c_int, op: c_int) -> Result<(Reduction, Option<Arc<str>>), Error> {
    let dtype = match dtype {
        OUTBOARD_INT32 => Datatype::I32,
        OUTBOARD_INT64 => Datatype::I64,
        OUTBOARD_UINT64 => Datatype::U64,
        OUTBOARD_FLOAT => Datatype::F32,
        OUTBOARD_DOUBLE => Datatype::F64,
        _ => return Err(Error::arg(format!("unknown datatype {dtype}"))),
    };
    if let Some(m) = module_op(op, dtype) {
        return m.map(|(r, name)| (r, Some(name)));
    }
    let op = match op {
        OUTBOARD_SUM => ReduceOp::Sum,
        OUTBOARD_MIN => ReduceOp::Min,
        OUTBOARD_MAX => ReduceOp::Max,
        OUTBOARD_BAND => ReduceOp::Band,
        OUTBOARD_BOR => ReduceOp::Bor,
        OUTBOARD_PROD => ReduceOp::Prod,
        OUTBOARD_BXOR => ReduceOp::Bxor,
        OUTBOARD_LAND => ReduceOp::Land,
        OUTBOARD_LOR => ReduceOp::Lor,
        OUTBOARD_LXOR => ReduceOp::Lxor,
        _ => return Err(Error::arg(format!("unknown operation {op}"))),
    };
    let r = Reduction { op, dtype };
    r.validate().map_err(|e| Error::arg(format!("{} on {}: {e}", op.name(), dtype.name())))?;
    Ok((r, None))
}

/// A built-in reduction for the node's and the spanning paths, which do
/// not run modules (`None` sends a module's operator to the engine).
pub(crate) fn on_host(dtype: c_int, op: c_int) -> Option<Reduction> {
    reduction(dtype, op).ok().filter(|r| !is_module(r))
}

/// The mode a collective with reduction `r` runs in: a module's operator
/// only on the engines, whatever the group's mode.
pub(crate) fn mode_for(r: &Reduction, group_mode: Mode) -> Mode {
    if is_module(r) {
        Mode::Offloaded
    } else {
        group_mode
    }
}

pub(crate) unsafe fn start(group: *const outboard_group, out: *mut *mut outboard_request, kind: impl FnOnce(&outboard_group) -> Result<Kind, Error>) -> Result<(), Error> {
    let g = unsafe { deref(group, "group") }?;
    if out.is_null() {
        return Err(Error::arg("request is null"));
    }
    let k = kind(g)?;
    unsafe { hand_out(g.shared.clone(), k, out) }
}

/// A split-phase collective in the group's shared memory, when the group
/// takes that path ([`outboard_group::node_path`]): `begin` starts it
/// there; what it gives this rank goes to `out`. `None` sends the call to
/// the engine.
pub(crate) fn start_on_node(
    g: &outboard_group,
    out: *mut u8,
    len: usize,
    begin: impl FnOnce(&mut NodeColl) -> Result<Ticket, NodeCollError>,
) -> Result<Option<Kind>, Error> {
    let Some(node) = g.node_path() else { return Ok(None) };
    let ticket = g.run_on_node(node, begin)?;
    Ok(Some(Kind::Node { node: node.clone(), ticket, out, len, _open: NodeOpen::new(&g.shared, node) }))
}

/// Starts a barrier.
#[no_mangle]
pub unsafe extern "C" fn outboard_barrier_start(group: *const outboard_group, req: *mut *mut outboard_request) -> c_int {
    guard(|| unsafe {
        start(group, req, |g| {
            if let Some(k) = start_on_node(g, std::ptr::null_mut(), 0, |nc| Ok(nc.barrier_start()))? {
                return Ok(k);
            }
            let r = g.with(|g, w| {
                let d = g.defaults();
                Ok(w.port().start_barrier(g, d.mode, d.barrier)?)
            })?;
            Ok(Kind::Coll { req: r, out: std::ptr::null_mut(), place: Place::Prefix(0), module: None })
        })
    })
}

/// Starts a broadcast of `len` bytes at `buf` from `root` (a group rank);
/// at the other ranks the data lands in `buf` on completion. `buf` must
/// stay valid until then.
#[no_mangle]
pub unsafe extern "C" fn outboard_bcast_start(group: *const outboard_group, buf: *mut c_void, len: usize, root: u32, req: *mut *mut outboard_request) -> c_int {
    guard(|| unsafe {
        let data = bytes(buf, len, "buf")?;
        start(group, req, |g| {
            if root < g.size {
                let out = if g.rank == root { std::ptr::null_mut() } else { buf.cast() };
                if let Some(k) = start_on_node(g, out, len, |nc| Ok(nc.bcast_start(data, root)))? {
                    return Ok(k);
                }
            }
            let grp = g;
            let r = g.with(|g, w| {
                let d = g.defaults();
                let (mode, tree) = grp.bcast_choice(d.mode, d.tree)?;
                let zeros;
                let mine = if g.rank() == root {
                    data
                } else {
                    zeros = vec![0u8; len];
                    &zeros[..]
                };
                Ok(w.port().start_bcast(g, mode, tree, root, mine)?)
            })?;
            Ok(Kind::Coll { req: r, out: buf.cast(), place: Place::Prefix(len), module: None })
        })
    })
}

/// Starts a reduction of `count` elements of `dtype` with `op` to `root`:
/// `sendbuf` is this rank's contribution (null, or equal to `recvbuf`:
/// taken from `recvbuf`, in place); the result lands in `recvbuf` at the
/// root on completion (ignored elsewhere, may be null there).
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: u32,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| unsafe {
        let (red, module) = operator(dtype, op)?;
        let len = count.checked_mul(red.dtype.size()).ok_or_else(|| Error::arg("count too large"))?;
        start(group, req, |g| {
            let at_root = g.rank == root;
            if root < g.size && !(at_root && len > 0 && recvbuf.is_null()) && module.is_none() {
                let src = input(sendbuf, recvbuf);
                let data = bytes(src, len, "sendbuf")?;
                let out = if at_root { recvbuf.cast() } else { std::ptr::null_mut() };
                if let Some(k) = start_on_node(g, out, len, |nc| nc.reduce_start(data, red, root))? {
                    return Ok(k);
                }
            }
            let r = g.with(|g, w| {
                let src = input(sendbuf, recvbuf);
                let data = bytes(src, len, "sendbuf")?;
                let d = g.defaults();
                let at_root = g.rank() == root;
                if at_root && len > 0 && recvbuf.is_null() {
                    return Err(Error::arg("recvbuf is null at the root"));
                }
                let r = w.port().start_reduce(g, mode_for(&red, d.mode), d.reduce, root, red, data)?;
                Ok((r, at_root))
            })?;
            let out = if r.1 { recvbuf.cast() } else { std::ptr::null_mut() };
            Ok(Kind::Coll { req: r.0, out, place: Place::Prefix(len), module })
        })
    })
}

/// Starts an allreduce of `count` elements of `dtype` with `op`: `sendbuf`
/// as in [`outboard_reduce_start`] (null for in place); every rank gets
/// the result in `recvbuf` on completion.
#[no_mangle]
pub unsafe extern "C" fn outboard_allreduce_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| unsafe {
        let (red, module) = operator(dtype, op)?;
        let len = count.checked_mul(red.dtype.size()).ok_or_else(|| Error::arg("count too large"))?;
        if len > 0 && recvbuf.is_null() {
            return Err(Error::arg("recvbuf is null"));
        }
        start(group, req, |g| {
            let src = input(sendbuf, recvbuf);
            let data = bytes(src, len, "sendbuf")?;
            if module.is_none() {
                if let Some(k) = start_on_node(g, recvbuf.cast(), len, |nc| nc.allreduce_start(data, red))? {
                    return Ok(k);
                }
            }
            let r = g.with(|g, w| {
                let src = input(sendbuf, recvbuf);
                let data = bytes(src, len, "sendbuf")?;
                let d = g.defaults();
                Ok(w.port().start_allreduce(g, mode_for(&red, d.mode), d.allreduce, red, data)?)
            })?;
            Ok(Kind::Coll { req: r, out: recvbuf.cast(), place: Place::Prefix(len), module })
        })
    })
}

/// Runs a blocking collective through the group's shared memory when the
/// group takes that path ([`outboard_group::node_path`]) and `prepare`,
/// given the group, finds the call's arguments sound and returns the
/// collective to run; `None` sends the call to the engine's path, which
/// reports unsound arguments. The collective runs inside [`guard`].
pub(crate) unsafe fn on_node<F>(group: *const outboard_group, prepare: impl FnOnce(&outboard_group) -> Option<F>) -> Option<c_int>
where
    F: FnOnce(&mut NodeColl) -> Result<(), NodeCollError>,
{
    // SAFETY: the caller passes a handle from `outboard_group_*` or null.
    let g = unsafe { group.as_ref() }?;
    let node = g.node_path()?;
    // A panic while preparing (it must not unwind out of the C call) sends
    // the call to the engine's path, which reports what is wrong.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(g))).ok().flatten()?;
    Some(guard(|| g.run_on_node(node, run)))
}

/// Runs a blocking collective node by node (`crate::span`) when the group
/// spans nodes and takes that path ([`outboard_group::span_path`]) and
/// `prepare` finds the call's arguments sound; `None` sends the call to
/// the engine's path, which reports unsound arguments.
unsafe fn on_span<F>(group: *const outboard_group, prepare: impl FnOnce(&outboard_group) -> Option<F>) -> Option<c_int>
where
    F: FnOnce(&outboard_group, &SpanPath) -> Result<(), Error>,
{
    // SAFETY: the caller passes a handle from `outboard_group_*` or null.
    let g = unsafe { group.as_ref() }?;
    let sp = g.span_path()?;
    let run = prepare(g)?;
    Some(guard(|| run(g, sp)))
}

/// Where a rank's input is: `sendbuf`, or (null: in place) `recvbuf`.
pub(crate) fn input(sendbuf: *const c_void, recvbuf: *mut c_void) -> *const c_void {
    if sendbuf.is_null() {
        recvbuf.cast_const()
    } else {
        sendbuf
    }
}

/// A reduction's contribution at this rank, copied when it is to be
/// replaced by the result (in place: `sendbuf` null or `recvbuf`).
pub(crate) unsafe fn contribution<'a>(sendbuf: *const c_void, recvbuf: *mut c_void, len: usize) -> Option<std::borrow::Cow<'a, [u8]>> {
    if sendbuf.is_null() || sendbuf == recvbuf.cast_const() {
        return Some(std::borrow::Cow::Owned(unsafe { bytes(recvbuf, len, "recvbuf") }.ok()?.to_vec()));
    }
    Some(std::borrow::Cow::Borrowed(unsafe { bytes(sendbuf, len, "sendbuf") }.ok()?))
}

/// A reduction's buffers at this rank: in place when `sendbuf` is null or
/// `recvbuf`; `None` when a buffer this rank needs is null.
unsafe fn reduce_buffers<'a>(sendbuf: *const c_void, recvbuf: *mut c_void, len: usize, gets: bool) -> Option<Buffers<'a>> {
    if sendbuf.is_null() || sendbuf == recvbuf.cast_const() {
        return Some(Buffers::InPlace(unsafe { bytes_mut(recvbuf, len, "recvbuf") }.ok()?));
    }
    let send = unsafe { bytes(sendbuf, len, "sendbuf") }.ok()?;
    let recv = if gets { Some(unsafe { bytes_mut(recvbuf, len, "recvbuf") }.ok()?) } else { None };
    Some(Buffers::Separate { send, recv })
}

/// Blocking barrier.
#[no_mangle]
pub unsafe extern "C" fn outboard_barrier(group: *const outboard_group) -> c_int {
    if let Some(rc) = unsafe { on_node(group, |_| Some(|nc: &mut NodeColl| nc.barrier())) } {
        return rc;
    }
    if let Some(rc) = unsafe { on_span(group, |_| Some(span::barrier)) } {
        return rc;
    }
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_barrier_start(group, &mut r), r) }
}

/// Blocking broadcast (see [`outboard_bcast_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_bcast(group: *const outboard_group, buf: *mut c_void, len: usize, root: u32) -> c_int {
    if let Some(rc) = unsafe { crate::bypass::bcast(group, buf, len, root) } {
        return rc;
    }
    let node = |g: &outboard_group| {
        let data = unsafe { bytes_mut(buf, len, "buf") }.ok().filter(|_| root < g.size)?;
        Some(move |nc: &mut NodeColl| nc.bcast(data, root))
    };
    if let Some(rc) = unsafe { on_node(group, node) } {
        return rc;
    }
    let spanning = |g: &outboard_group| {
        let data = unsafe { bytes_mut(buf, len, "buf") }.ok().filter(|_| root < g.size)?;
        Some(move |g: &outboard_group, sp: &SpanPath| span::bcast(g, sp, data, root))
    };
    if let Some(rc) = unsafe { on_span(group, spanning) } {
        return rc;
    }
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_bcast_start(group, buf, len, root, &mut r), r) }
}

/// Blocking reduce (see [`outboard_reduce_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: u32,
) -> c_int {
    if let Some(rc) = unsafe { crate::bypass::reduce(group, sendbuf, recvbuf, count, dtype, op, root) } {
        return rc;
    }
    let node = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        let len = count.checked_mul(red.dtype.size())?;
        let bufs = unsafe { reduce_buffers(sendbuf, recvbuf, len, g.rank == root) }.filter(|_| root < g.size)?;
        Some(move |nc: &mut NodeColl| nc.reduce(bufs, red, root))
    };
    if let Some(rc) = unsafe { on_node(group, node) } {
        return rc;
    }
    let spanning = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        let len = count.checked_mul(red.dtype.size())?;
        let at_root = g.rank == root;
        let mine = unsafe { contribution(sendbuf, recvbuf, len) }.filter(|_| root < g.size && outboard_runtime::node_coll::span::carries_status(red))?;
        let result = if at_root { Some(unsafe { bytes_mut(recvbuf, len, "recvbuf") }.ok()?) } else { None };
        Some(move |g: &outboard_group, sp: &SpanPath| span::reduce(g, sp, &mine, result, red, root))
    };
    if let Some(rc) = unsafe { on_span(group, spanning) } {
        return rc;
    }
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_reduce_start(group, sendbuf, recvbuf, count, dtype, op, root, &mut r), r) }
}

/// Blocking allreduce (see [`outboard_allreduce_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_allreduce(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
) -> c_int {
    let node = |_: &outboard_group| {
        let red = on_host(dtype, op)?;
        let len = count.checked_mul(red.dtype.size())?;
        let bufs = unsafe { reduce_buffers(sendbuf, recvbuf, len, true) }?;
        Some(move |nc: &mut NodeColl| nc.allreduce(bufs, red))
    };
    if let Some(rc) = unsafe { on_node(group, node) } {
        return rc;
    }
    let spanning = |_: &outboard_group| {
        let red = on_host(dtype, op)?;
        let len = count.checked_mul(red.dtype.size())?;
        let mine = unsafe { contribution(sendbuf, recvbuf, len) }.filter(|_| outboard_runtime::node_coll::span::carries_status(red))?;
        let result = unsafe { bytes_mut(recvbuf, len, "recvbuf") }.ok()?;
        Some(move |g: &outboard_group, sp: &SpanPath| span::allreduce(g, sp, &mine, result, red))
    };
    if let Some(rc) = unsafe { on_span(group, spanning) } {
        return rc;
    }
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_allreduce_start(group, sendbuf, recvbuf, count, dtype, op, &mut r), r) }
}
