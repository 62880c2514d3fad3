//! Allgather, gather, scatter, alltoall, reduce-scatter and the scans on a
//! group, blocking and split-phase, in the group's mode (a module's
//! operator: offloaded). Data-movement calls count bytes; the v-forms
//! take a count and a displacement in bytes per rank, which every rank
//! passes alike. How each runs: `outboard_host`'s `Layout` and the
//! `movement` module of its collectives.
//!
//! In a group whose members all run on this node, the blocking calls meet
//! in shared memory, as the group's reductions do: the placed blocks are
//! combined there by the same bitwise or ([`PLACE`]), and a scan is the
//! allgather of the contributions, each rank folding its prefix from them
//! left to right, the order the engine's chain folds in.

use std::ffi::{c_int, c_void};
use std::ops::Range;

use outboard_host::{Layout, Mode, Reduction, PLACE};
use outboard_runtime::node_coll::{Buffers, NodeColl, NodeCollError};

use crate::coll::{input, mode_for, on_host, on_node, operator, start, start_on_node};
use crate::error::{bytes, Error};
use crate::group::outboard_group;
use crate::request::{finish, outboard_request, Kind, Place};

/// The group's members' blocks of `len` bytes one after the other, or an
/// error naming `len` when they would span beyond the address space.
fn even(g: &outboard_group, len: usize) -> Result<Layout, Error> {
    Layout::try_even(g.size, len).map_err(|_| Error::arg(format!("len {len} times the group's {} members is beyond the address space", g.size)))
}

/// `n` byte counts or displacements at `p` (one per rank of the group).
unsafe fn per_rank<'a>(p: *const usize, n: u32, what: &str) -> Result<&'a [usize], Error> {
    if p.is_null() {
        return Err(Error::arg(format!("{what} is null (one entry per rank is needed)")));
    }
    // SAFETY: the caller promises one entry per rank of the group.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// The layout of `counts` and `displs` (null `displs`: blocks one after
/// the other).
unsafe fn layout(counts: *const usize, displs: *const usize, n: u32) -> Result<Layout, Error> {
    let counts = unsafe { per_rank(counts, n, "counts") }?;
    let l = if displs.is_null() {
        Layout::packed(counts)
    } else {
        Layout::new(counts, unsafe { per_rank(displs, n, "displs") }?)
    };
    l.map_err(|e| Error::arg(e.to_string()))
}

/// This rank's contribution: `sendbuf`, or (null: in place) its block of
/// `recvbuf`.
unsafe fn own_block<'a>(sendbuf: *const c_void, recvbuf: *mut c_void, block: Range<usize>) -> Result<&'a [u8], Error> {
    if block.is_empty() {
        return Ok(&[]);
    }
    if sendbuf.is_null() {
        let all = unsafe { bytes(recvbuf, block.end, "recvbuf (in place)") }?;
        return Ok(&all[block]);
    }
    unsafe { bytes(sendbuf, block.len(), "sendbuf") }
}

/// A request whose result's `blocks` land at the same offsets of `out`
/// (gaps between them untouched); `out` null: the rank gets nothing.
fn placed(req: outboard_host::CollRequest, out: *mut c_void, blocks: Vec<Range<usize>>, module: Option<std::sync::Arc<str>>) -> Kind {
    Kind::Coll { req, out: out.cast(), place: Place::Blocks(blocks), module }
}

/// Copies `blocks` of `from` to the same offsets at `out`.
///
/// # Safety
/// Every block must lie within the bytes the program gave at `out`.
unsafe fn place(from: &[u8], out: *mut u8, blocks: impl IntoIterator<Item = Range<usize>>) {
    for b in blocks.into_iter().filter(|b| !b.is_empty()) {
        // SAFETY: the caller promises the block's bytes writable at `out`.
        unsafe { std::ptr::copy_nonoverlapping(from[b.clone()].as_ptr(), out.add(b.start), b.len()) };
    }
}

/// Copies `from` to `out`.
///
/// # Safety
/// `from.len()` bytes must be writable at `out`.
unsafe fn copy_to(from: &[u8], out: *mut u8) {
    // Nothing to copy: `out` may be null (a rank given no buffer for no
    // bytes).
    if from.is_empty() {
        return;
    }
    // SAFETY: the caller promises the bytes writable at `out`.
    unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), out, from.len()) };
}

/// A collective in the group's shared memory that ends by writing into
/// the program's buffers.
type NodeRun = Box<dyn FnOnce(&mut NodeColl) -> Result<(), NodeCollError>>;

/// An allgather (the layout's blocks) in shared memory; `None` when an
/// argument is unsound (the engine's path reports it).
unsafe fn node_allgather(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: Layout) -> Option<NodeRun> {
    if recvbuf.is_null() && l.extent() > 0 {
        return None;
    }
    let mine = unsafe { own_block(sendbuf, recvbuf, l.block(g.rank)) }.ok()?;
    let out = recvbuf.cast::<u8>();
    if l.extent() > outboard_host::runtime_allreduce_doubling_max() {
        // Long: a broadcast of each block from its member, so that each
        // rank copies every block once instead of folding n of them.
        let (me, mine) = (g.rank, mine.to_vec());
        return Some(Box::new(move |nc: &mut NodeColl| {
            for q in 0..l.members() {
                let mut b = if q == me { mine.clone() } else { vec![0u8; l.block(q).len()] };
                nc.bcast(&mut b, q)?;
                // SAFETY: the program gave the layout's extent at `recvbuf`.
                unsafe { copy_to(&b, out.wrapping_add(l.block(q).start)) };
            }
            Ok(())
        }));
    }
    let mut buf = l.placed(g.rank, mine).ok()?;
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.allreduce(Buffers::InPlace(&mut buf), PLACE)?;
        // SAFETY: the program gave the layout's extent at `recvbuf`.
        unsafe { place(&buf, out, (0..l.members()).map(|q| l.block(q))) };
        Ok(())
    }))
}

/// A gather (the layout's blocks) to `root` in shared memory.
unsafe fn node_gather(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: Layout, root: u32) -> Option<NodeRun> {
    let at_root = g.rank == root;
    if root >= g.size || (at_root && recvbuf.is_null() && l.extent() > 0) || (!at_root && sendbuf.is_null() && !l.block(g.rank).is_empty()) {
        return None;
    }
    let mut buf = l.placed(g.rank, unsafe { own_block(sendbuf, recvbuf, l.block(g.rank)) }.ok()?).ok()?;
    let out = recvbuf.cast::<u8>();
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.reduce(Buffers::InPlace(&mut buf), PLACE, root)?;
        if at_root {
            // SAFETY: the root gave the layout's extent at `recvbuf`.
            unsafe { place(&buf, out, (0..l.members()).map(|q| l.block(q))) };
        }
        Ok(())
    }))
}

/// A scatter (the layout's blocks) from `root` in shared memory.
unsafe fn node_scatter(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: Layout, root: u32) -> Option<NodeRun> {
    let at_root = g.rank == root;
    let mine = l.block(g.rank);
    if root >= g.size || (!at_root && recvbuf.is_null() && !mine.is_empty()) {
        return None;
    }
    let mut buf = if at_root { unsafe { bytes(sendbuf, l.extent(), "sendbuf") }.ok()?.to_vec() } else { vec![0u8; l.extent()] };
    let out = recvbuf.cast::<u8>();
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.bcast(&mut buf, root)?;
        if !out.is_null() {
            // SAFETY: the program gave its block's length at `recvbuf`.
            unsafe { copy_to(&buf[mine.clone()], out) };
        }
        Ok(())
    }))
}

/// An alltoall of `len` bytes per pair in shared memory: the rows placed,
/// each rank's column copied out.
unsafe fn node_alltoall(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, len: usize) -> Option<NodeRun> {
    let n = g.size as usize;
    let row = len.checked_mul(n)?;
    row.checked_mul(n)?;
    if recvbuf.is_null() && row > 0 {
        return None;
    }
    let src = input(sendbuf, recvbuf);
    let matrix = Layout::try_even(g.size, row).ok()?;
    let mut buf = matrix.placed(g.rank, unsafe { bytes(src, row, "sendbuf") }.ok()?).ok()?;
    let (out, me) = (recvbuf.cast::<u8>(), g.rank as usize);
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.allreduce(Buffers::InPlace(&mut buf), PLACE)?;
        for i in 0..n {
            // SAFETY: the program gave `n * len` bytes at `recvbuf`.
            unsafe { copy_to(&buf[i * row + me * len..i * row + (me + 1) * len], out.wrapping_add(i * len)) };
        }
        Ok(())
    }))
}

/// A reduce-scatter (the layout's blocks, of `red`'s elements) in shared
/// memory: the whole combined there, each rank's block copied out.
unsafe fn node_reduce_scatter(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: Layout, red: Reduction) -> Option<NodeRun> {
    let mine = l.block(g.rank);
    if recvbuf.is_null() && !mine.is_empty() {
        return None;
    }
    let src = input(sendbuf, recvbuf);
    let mut buf = unsafe { bytes(src, l.extent(), "sendbuf") }.ok()?.to_vec();
    let out = recvbuf.cast::<u8>();
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.allreduce(Buffers::InPlace(&mut buf), red)?;
        // SAFETY: the program gave its block's length at `recvbuf`.
        unsafe { copy_to(&buf[mine.clone()], out) };
        Ok(())
    }))
}

/// A scan (exclusive: ranks before this one only) of `len` bytes in shared
/// memory: the contributions allgathered, this rank's prefix folded from
/// them left to right, as the engine's chain folds.
unsafe fn node_scan(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, len: usize, red: Reduction, exclusive: bool) -> Option<NodeRun> {
    if recvbuf.is_null() && len > 0 && !(exclusive && g.rank == 0) {
        return None;
    }
    let src = input(sendbuf, recvbuf);
    let l = Layout::try_even(g.size, len).ok()?;
    let mut buf = l.placed(g.rank, unsafe { bytes(src, len, "sendbuf") }.ok()?).ok()?;
    red.check_len(len).ok()?;
    let (out, upto) = (recvbuf.cast::<u8>(), if exclusive { g.rank } else { g.rank + 1 });
    Some(Box::new(move |nc: &mut NodeColl| {
        nc.allreduce(Buffers::InPlace(&mut buf), PLACE)?;
        if upto == 0 {
            return Ok(());
        }
        let mut acc = buf[l.block(0)].to_vec();
        for q in 1..upto {
            let mut next = buf[l.block(q)].to_vec();
            red.fold(&mut next, &acc, true)?;
            acc = next;
        }
        // SAFETY: the program gave `len` bytes at `recvbuf`.
        unsafe { copy_to(&acc, out) };
        Ok(())
    }))
}

/// Starts an allgather of `len` bytes per rank: `recvbuf` gets rank `r`'s
/// `sendbuf` at offset `r * len`. `sendbuf` null: in place (this rank's
/// data is already at its offset of `recvbuf`).
#[no_mangle]
pub unsafe extern "C" fn outboard_allgather_start(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let l = even(g, len)?;
            // In shared memory: the placed blocks' allreduce, whose result
            // is the receive buffer itself (no gaps).
            if !(recvbuf.is_null() && l.extent() > 0) {
                let placed = l.placed(g.rank, own_block(sendbuf, recvbuf, l.block(g.rank))?)?;
                if let Some(k) = start_on_node(g, recvbuf.cast(), l.extent(), |nc| nc.allreduce_start(&placed, PLACE))? {
                    return Ok(k);
                }
            }
            allgather_kind(g, sendbuf, recvbuf, &l)
        })
    })
}

/// Starts an allgatherv: rank `r` contributes `counts[r]` bytes, which land
/// at `recvbuf + displs[r]` everywhere (`displs` null: one after the
/// other). Every rank passes the same `counts` and `displs`; blocks must
/// not overlap. `sendbuf` null: in place.
#[no_mangle]
pub unsafe extern "C" fn outboard_allgatherv_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const usize,
    displs: *const usize,
    req: *mut *mut outboard_request,
) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let l = layout(counts, displs, g.size)?;
            allgather_kind(g, sendbuf, recvbuf, &l)
        })
    })
}

unsafe fn allgather_kind(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: &Layout) -> Result<Kind, Error> {
    if l.extent() > 0 && recvbuf.is_null() {
        return Err(Error::arg("recvbuf is null"));
    }
    let data = unsafe { own_block(sendbuf, recvbuf, l.block(g.rank)) }?;
    let r = g.with(|g, w| {
        let d = g.defaults();
        Ok(w.port().start_allgather(g, d.mode, d.allreduce, l, data)?)
    })?;
    Ok(placed(r, recvbuf, (0..l.members()).map(|q| l.block(q)).collect(), None))
}

/// Starts a gather of `len` bytes per rank to `root`, whose `recvbuf` gets
/// rank `r`'s data at offset `r * len` (ignored elsewhere, may be null).
/// `sendbuf` null at the root: in place.
#[no_mangle]
pub unsafe extern "C" fn outboard_gather_start(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, root: u32, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let l = even(g, len)?;
            let at_root = g.rank == root;
            // In shared memory: the placed blocks' reduce to the root.
            let sound = root < g.size && !(at_root && recvbuf.is_null() && l.extent() > 0) && !(!at_root && sendbuf.is_null() && len > 0);
            if sound {
                let placed = l.placed(g.rank, own_block(sendbuf, recvbuf, l.block(g.rank))?)?;
                let out = if at_root { recvbuf.cast() } else { std::ptr::null_mut() };
                if let Some(k) = start_on_node(g, out, l.extent(), |nc| nc.reduce_start(&placed, PLACE, root))? {
                    return Ok(k);
                }
            }
            gather_kind(g, sendbuf, recvbuf, &l, root)
        })
    })
}

/// Starts a gatherv to `root`: rank `r` contributes `counts[r]` bytes,
/// which land at the root's `recvbuf + displs[r]`. Unlike MPI, every rank
/// passes `counts` and `displs` (the same everywhere).
#[no_mangle]
pub unsafe extern "C" fn outboard_gatherv_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const usize,
    displs: *const usize,
    root: u32,
    req: *mut *mut outboard_request,
) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let l = layout(counts, displs, g.size)?;
            gather_kind(g, sendbuf, recvbuf, &l, root)
        })
    })
}

unsafe fn gather_kind(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: &Layout, root: u32) -> Result<Kind, Error> {
    let at_root = g.rank == root;
    if at_root && l.extent() > 0 && recvbuf.is_null() {
        return Err(Error::arg("recvbuf is null at the root"));
    }
    if !at_root && sendbuf.is_null() && !l.block(g.rank).is_empty() {
        return Err(Error::arg("sendbuf is null (in place is for the root)"));
    }
    let data = unsafe { own_block(sendbuf, recvbuf, l.block(g.rank)) }?;
    let r = g.with(|g, w| {
        let d = g.defaults();
        Ok(w.port().start_gather(g, d.mode, d.reduce, root, l, data)?)
    })?;
    let out = if at_root { recvbuf } else { std::ptr::null_mut() };
    Ok(placed(r, out, (0..l.members()).map(|q| l.block(q)).collect(), None))
}

/// Starts a scatter of `len` bytes per rank from `root`, whose `sendbuf`
/// holds rank `r`'s block at offset `r * len` (ignored elsewhere). Each
/// rank's block lands in its `recvbuf` (null at the root: kept in place).
#[no_mangle]
pub unsafe extern "C" fn outboard_scatter_start(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, root: u32, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe { start(group, req, |g| scatter_kind(g, sendbuf, recvbuf, &even(g, len)?, root)) })
}

/// Starts a scatterv from `root`: rank `r` gets the `counts[r]` bytes at
/// the root's `sendbuf + displs[r]`. Unlike MPI, every rank passes
/// `counts` and `displs` (the same everywhere).
#[no_mangle]
pub unsafe extern "C" fn outboard_scatterv_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    counts: *const usize,
    displs: *const usize,
    recvbuf: *mut c_void,
    root: u32,
    req: *mut *mut outboard_request,
) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let l = layout(counts, displs, g.size)?;
            scatter_kind(g, sendbuf, recvbuf, &l, root)
        })
    })
}

unsafe fn scatter_kind(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: &Layout, root: u32) -> Result<Kind, Error> {
    let at_root = g.rank == root;
    let mine = l.block(g.rank).len();
    if !at_root && mine > 0 && recvbuf.is_null() {
        return Err(Error::arg("recvbuf is null"));
    }
    let data = if at_root { unsafe { bytes(sendbuf, l.extent(), "sendbuf at the root") }? } else { &[] };
    let r = g.with(|g, w| {
        let d = g.defaults();
        Ok(w.port().start_scatter(g, d.mode, d.tree, root, l, data)?)
    })?;
    Ok(placed(r, recvbuf, std::iter::once(0..mine).collect(), None))
}

/// Starts an alltoall of `len` bytes per pair: block `j` of this rank's
/// `sendbuf` (offset `j * len`) goes to rank `j`, and rank `i`'s block for
/// this rank lands at offset `i * len` of `recvbuf`.
#[no_mangle]
pub unsafe extern "C" fn outboard_alltoall_start(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe {
        start(group, req, |g| {
            let total = len.checked_mul(g.size as usize).ok_or_else(|| Error::arg("len too large"))?;
            if total > 0 && recvbuf.is_null() {
                return Err(Error::arg("recvbuf is null"));
            }
            let src = input(sendbuf, recvbuf);
            let data = bytes(src, total, "sendbuf")?;
            let r = g.with(|g, w| {
                let d = g.defaults();
                Ok(w.port().start_alltoall(g, d.mode, d.allreduce, len, data)?)
            })?;
            Ok(placed(r, recvbuf, std::iter::once(0..total).collect(), None))
        })
    })
}

/// Starts a reduce-scatter of `count` elements per rank (MPI's
/// reduce-scatter-block): `sendbuf` holds `size * count` elements, and
/// this rank's `recvbuf` gets the combination over ranks of block `rank`.
/// `sendbuf` null: the data is in `recvbuf`, which must hold all of it.
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce_scatter_block_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    req: *mut *mut outboard_request,
) -> c_int {
    crate::error::guard(|| unsafe {
        let (red, module) = operator(dtype, op)?;
        let len = count.checked_mul(red.dtype.size()).ok_or_else(|| Error::arg("count too large"))?;
        start(group, req, |g| reduce_scatter_kind(g, sendbuf, recvbuf, &even(g, len)?, red, module))
    })
}

/// Starts a reduce-scatter: rank `r` gets the combination over ranks of
/// the `counts[r]` elements that follow the blocks of ranks below it in
/// `sendbuf`. `sendbuf` null: the data is in `recvbuf`, which must hold
/// all of it.
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce_scatter_start(
    group: *const outboard_group,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: *const usize,
    dtype: c_int,
    op: c_int,
    req: *mut *mut outboard_request,
) -> c_int {
    crate::error::guard(|| unsafe {
        let (red, module) = operator(dtype, op)?;
        start(group, req, |g| {
            let counts = per_rank(counts, g.size, "counts")?;
            let bytes: Vec<usize> = counts.iter().map(|c| c.checked_mul(red.dtype.size()).ok_or_else(|| Error::arg("a count is too large"))).collect::<Result<_, _>>()?;
            let l = Layout::packed(&bytes).map_err(|e| Error::arg(e.to_string()))?;
            reduce_scatter_kind(g, sendbuf, recvbuf, &l, red, module)
        })
    })
}

unsafe fn reduce_scatter_kind(g: &outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, l: &Layout, red: Reduction, module: Option<std::sync::Arc<str>>) -> Result<Kind, Error> {
    let mine = l.block(g.rank).len();
    if mine > 0 && recvbuf.is_null() {
        return Err(Error::arg("recvbuf is null"));
    }
    let src = input(sendbuf, recvbuf);
    let data = unsafe { bytes(src, l.extent(), "sendbuf") }?;
    let r = g.with(|g, w| {
        let d = g.defaults();
        Ok(w.port().start_reduce_scatter(g, mode_for(&red, d.mode), d.reduce.shape(), red, l, data)?)
    })?;
    Ok(placed(r, recvbuf, std::iter::once(0..mine).collect(), module))
}

/// Starts an inclusive scan of `count` elements: rank `r`'s `recvbuf` gets
/// the combination of ranks 0 to `r`'s `sendbuf`, left to right.
/// `sendbuf` null: in place.
#[no_mangle]
pub unsafe extern "C" fn outboard_scan_start(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe { scan_start(group, sendbuf, recvbuf, count, dtype, op, req, false) })
}

/// Starts an exclusive scan: rank `r`'s `recvbuf` gets the combination of
/// ranks 0 to `r - 1`'s `sendbuf`; rank 0's `recvbuf` is left untouched
/// (it may be null).
#[no_mangle]
pub unsafe extern "C" fn outboard_exscan_start(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int, req: *mut *mut outboard_request) -> c_int {
    crate::error::guard(|| unsafe { scan_start(group, sendbuf, recvbuf, count, dtype, op, req, true) })
}

#[allow(clippy::too_many_arguments)]
unsafe fn scan_start(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int, req: *mut *mut outboard_request, exclusive: bool) -> Result<(), Error> {
    let (red, module) = operator(dtype, op)?;
    let len = count.checked_mul(red.dtype.size()).ok_or_else(|| Error::arg("count too large"))?;
    unsafe {
        start(group, req, |g| {
            // An exclusive scan leaves rank 0's buffer alone: it may be null.
            if len > 0 && recvbuf.is_null() && !(exclusive && g.rank == 0) {
                return Err(Error::arg("recvbuf is null"));
            }
            let src = input(sendbuf, recvbuf);
            let data = bytes(src, len, "sendbuf")?;
            let r = g.with(|g, w| {
                let mode: Mode = mode_for(&red, g.defaults().mode);
                let p = w.port();
                Ok(if exclusive { p.start_exscan(g, mode, red, data)? } else { p.start_scan(g, mode, red, data)? })
            })?;
            Ok(placed(r, recvbuf, std::iter::once(0..len).collect(), module))
        })
    }
}

/// A blocking call: in the group's shared memory when `node` finds it
/// can run there, else started with `start` (given where the request
/// goes) and waited for.
unsafe fn blocking(group: *const outboard_group, node: impl FnOnce(&outboard_group) -> Option<NodeRun>, start: impl FnOnce(*mut *mut outboard_request) -> c_int) -> c_int {
    if let Some(rc) = unsafe { on_node(group, node) } {
        return rc;
    }
    let mut r = std::ptr::null_mut();
    unsafe { finish(start(&mut r), r) }
}

/// Blocking allgather (see [`outboard_allgather_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_allgather(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void) -> c_int {
    unsafe { blocking(group, |g| node_allgather(g, sendbuf, recvbuf, Layout::try_even(g.size, len).ok()?), |r| outboard_allgather_start(group, sendbuf, len, recvbuf, r)) }
}

/// Blocking allgatherv (see [`outboard_allgatherv_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_allgatherv(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, counts: *const usize, displs: *const usize) -> c_int {
    unsafe { blocking(group, |g| node_allgather(g, sendbuf, recvbuf, layout(counts, displs, g.size).ok()?), |r| outboard_allgatherv_start(group, sendbuf, recvbuf, counts, displs, r)) }
}

/// Blocking gather (see [`outboard_gather_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_gather(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, root: u32) -> c_int {
    unsafe { blocking(group, |g| node_gather(g, sendbuf, recvbuf, Layout::try_even(g.size, len).ok()?, root), |r| outboard_gather_start(group, sendbuf, len, recvbuf, root, r)) }
}

/// Blocking gatherv (see [`outboard_gatherv_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_gatherv(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, counts: *const usize, displs: *const usize, root: u32) -> c_int {
    unsafe { blocking(group, |g| node_gather(g, sendbuf, recvbuf, layout(counts, displs, g.size).ok()?, root), |r| outboard_gatherv_start(group, sendbuf, recvbuf, counts, displs, root, r)) }
}

/// Blocking scatter (see [`outboard_scatter_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_scatter(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void, root: u32) -> c_int {
    unsafe { blocking(group, |g| node_scatter(g, sendbuf, recvbuf, Layout::try_even(g.size, len).ok()?, root), |r| outboard_scatter_start(group, sendbuf, len, recvbuf, root, r)) }
}

/// Blocking scatterv (see [`outboard_scatterv_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_scatterv(group: *const outboard_group, sendbuf: *const c_void, counts: *const usize, displs: *const usize, recvbuf: *mut c_void, root: u32) -> c_int {
    unsafe { blocking(group, |g| node_scatter(g, sendbuf, recvbuf, layout(counts, displs, g.size).ok()?, root), |r| outboard_scatterv_start(group, sendbuf, counts, displs, recvbuf, root, r)) }
}

/// Blocking alltoall (see [`outboard_alltoall_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_alltoall(group: *const outboard_group, sendbuf: *const c_void, len: usize, recvbuf: *mut c_void) -> c_int {
    unsafe { blocking(group, |g| node_alltoall(g, sendbuf, recvbuf, len), |r| outboard_alltoall_start(group, sendbuf, len, recvbuf, r)) }
}

/// Blocking reduce-scatter-block (see
/// [`outboard_reduce_scatter_block_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce_scatter_block(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int) -> c_int {
    let node = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        node_reduce_scatter(g, sendbuf, recvbuf, Layout::try_even(g.size, count.checked_mul(red.dtype.size())?).ok()?, red)
    };
    unsafe { blocking(group, node, |r| outboard_reduce_scatter_block_start(group, sendbuf, recvbuf, count, dtype, op, r)) }
}

/// Blocking reduce-scatter (see [`outboard_reduce_scatter_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_reduce_scatter(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, counts: *const usize, dtype: c_int, op: c_int) -> c_int {
    let node = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        let counts = unsafe { per_rank(counts, g.size, "counts") }.ok()?;
        let bytes: Option<Vec<usize>> = counts.iter().map(|c| c.checked_mul(red.dtype.size())).collect();
        node_reduce_scatter(g, sendbuf, recvbuf, Layout::packed(&bytes?).ok()?, red)
    };
    unsafe { blocking(group, node, |r| outboard_reduce_scatter_start(group, sendbuf, recvbuf, counts, dtype, op, r)) }
}

/// Blocking inclusive scan (see [`outboard_scan_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_scan(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int) -> c_int {
    let node = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        node_scan(g, sendbuf, recvbuf, count.checked_mul(red.dtype.size())?, red, false)
    };
    unsafe { blocking(group, node, |r| outboard_scan_start(group, sendbuf, recvbuf, count, dtype, op, r)) }
}

/// Blocking exclusive scan (see [`outboard_exscan_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_exscan(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int) -> c_int {
    let node = |g: &outboard_group| {
        let red = on_host(dtype, op)?;
        node_scan(g, sendbuf, recvbuf, count.checked_mul(red.dtype.size())?, red, true)
    };
    unsafe { blocking(group, node, |r| outboard_exscan_start(group, sendbuf, recvbuf, count, dtype, op, r)) }
}
