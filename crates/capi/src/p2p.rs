//! Tagged point-to-point messages between world ranks.

use std::ffi::{c_int, c_void};

use outboard_host::RecvMatch;

use crate::error::{bytes, deref, guard, Error};
use crate::request::{finish, hand_out, outboard_request, outboard_status, Kind};
use crate::world::outboard_world;
use crate::{outboard_wait, OUTBOARD_OK};

/// `source` of a receive that accepts any sender.
pub const OUTBOARD_ANY_SOURCE: i32 = -1;

/// Starts sending `len` bytes at `buf` (copied at once: `buf` may be reused
/// when this returns) to world rank `dest` with `tag`.
#[no_mangle]
pub unsafe extern "C" fn outboard_send_start(world: *const outboard_world, dest: u32, tag: u64, buf: *const c_void, len: usize, req: *mut *mut outboard_request) -> c_int {
    guard(|| unsafe {
        let w = deref(world, "world")?;
        let data = bytes(buf, len, "buf")?;
        if req.is_null() {
            return Err(Error::arg("request is null"));
        }
        let kind = w.shared.with(|w| {
            if dest >= w.size() {
                return Err(Error::arg(format!("destination {dest} outside a world of {}", w.size())));
            }
            let ep = w.endpoint(dest);
            let port = w.port();
            let b = port.buffer_from(data)?;
            match port.start_send(ep, tag, b) {
                Ok(r) => Ok(Kind::Send { req: r, buf: b }),
                Err(e) => {
                    let _ = port.free(b);
                    Err(e.into())
                }
            }
        })?;
        hand_out(w.shared.clone(), kind, req)
    })
}

/// Starts a receive of at most `cap` bytes into `buf` (valid until
/// completion) of a message from world rank `source`
/// ([`OUTBOARD_ANY_SOURCE`] for any) whose tag equals `tag` in the bits
/// set in `tag_mask` (all ones: exactly `tag`).
#[no_mangle]
pub unsafe extern "C" fn outboard_recv_start(
    world: *const outboard_world,
    source: i32,
    tag: u64,
    tag_mask: u64,
    buf: *mut c_void,
    cap: usize,
    req: *mut *mut outboard_request,
) -> c_int {
    guard(|| unsafe {
        let w = deref(world, "world")?;
        if (buf.is_null() && cap > 0) || req.is_null() {
            return Err(Error::arg("buf or request is null"));
        }
        let cap32 = u32::try_from(cap).map_err(|_| Error::arg("cap beyond 4 GiB"))?;
        let kind = w.shared.with(|w| {
            let source = match source {
                OUTBOARD_ANY_SOURCE => None,
                s if s >= 0 && (s as u32) < w.size() => {
                    let ep = w.endpoint(s as u32);
                    Some((ep.node, ep.port))
                }
                s => return Err(Error::arg(format!("source {s} outside a world of {}", w.size()))),
            };
            let port = w.port();
            let b = port.buffer_unzeroed(cap32)?;
            match port.start_recv(RecvMatch { source, tag, tag_mask }, b) {
                Ok(r) => Ok(Kind::Recv { req: r, buf: b, out: buf.cast(), cap }),
                Err(e) => {
                    let _ = port.free(b);
                    Err(e.into())
                }
            }
        })?;
        hand_out(w.shared.clone(), kind, req)
    })
}

/// Blocking send (see [`outboard_send_start`]).
#[no_mangle]
pub unsafe extern "C" fn outboard_send(world: *const outboard_world, dest: u32, tag: u64, buf: *const c_void, len: usize) -> c_int {
    let mut r = std::ptr::null_mut();
    unsafe { finish(outboard_send_start(world, dest, tag, buf, len, &mut r), r) }
}

/// Blocking receive (see [`outboard_recv_start`]); `status` (may be null)
/// gets the sender, tag and length.
#[no_mangle]
pub unsafe extern "C" fn outboard_recv(world: *const outboard_world, source: i32, tag: u64, tag_mask: u64, buf: *mut c_void, cap: usize, status: *mut outboard_status) -> c_int {
    let mut r = std::ptr::null_mut();
    let rc = unsafe { outboard_recv_start(world, source, tag, tag_mask, buf, cap, &mut r) };
    if rc != OUTBOARD_OK {
        return rc;
    }
    unsafe { outboard_wait(&mut r, status) }
}
