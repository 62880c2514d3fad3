//! Error codes, the per-thread last-error message, and [`guard`], which
//! every exported function runs its body in.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use outboard_host::{CommandError, HostError, OpError};
use outboard_runtime::InitError;

/// Success.
pub const OUTBOARD_OK: c_int = 0;
/// A null pointer, a bad datatype, operation, rank or length.
pub const OUTBOARD_ERR_ARG: c_int = 1;
/// Joining the job failed (environment, bootstrap, engine start).
pub const OUTBOARD_ERR_INIT: c_int = 2;
/// A peer died or stopped answering within the peer timeout.
pub const OUTBOARD_ERR_PEER: c_int = 3;
/// A message longer than the receive buffer (the buffer holds its start).
pub const OUTBOARD_ERR_TRUNCATED: c_int = 4;
/// An RDMA or atomic access with a wrong key, out of the region's bounds
/// or (atomics) misaligned.
pub const OUTBOARD_ERR_RDMA: c_int = 5;
/// The engine is out of tokens or the message is too long for it.
pub const OUTBOARD_ERR_RESOURCE: c_int = 6;
/// Registered memory: exhausted, or an access outside a buffer.
pub const OUTBOARD_ERR_MEMORY: c_int = 7;
/// A collective refused (group busy, id clash, length mismatch ...).
pub const OUTBOARD_ERR_COLL: c_int = 8;
/// The operation was cancelled.
pub const OUTBOARD_ERR_CANCELLED: c_int = 9;
/// The world was finalized, or an earlier call panicked and left it
/// unusable.
pub const OUTBOARD_ERR_STATE: c_int = 10;
/// Any other failure of an operation.
pub const OUTBOARD_ERR_OTHER: c_int = 11;
/// A bug: the library panicked (the message says where).
pub const OUTBOARD_ERR_PANIC: c_int = 12;
/// The port a receive named closed (its process left or closed it) after
/// everything it sent was delivered: nothing more can come from it. Not a
/// failed process: receives from any source are unaffected.
pub const OUTBOARD_ERR_SOURCE_CLOSED: c_int = 13;

/// A failure: its code and its message.
#[derive(Debug)]
pub(crate) struct Error {
    pub code: c_int,
    pub msg: String,
}

impl Error {
    pub fn new(code: c_int, msg: impl Into<String>) -> Error {
        Error { code, msg: msg.into() }
    }

    pub fn arg(msg: impl Into<String>) -> Error {
        Error::new(OUTBOARD_ERR_ARG, msg)
    }
}

impl From<HostError> for Error {
    fn from(e: HostError) -> Error {
        let code = match e {
            HostError::Op(OpError::PeerUnreachable(_)) | HostError::Command(CommandError::PeerUnreachable(_)) => OUTBOARD_ERR_PEER,
            HostError::Op(OpError::Truncated { .. }) => OUTBOARD_ERR_TRUNCATED,
            HostError::Op(OpError::BadKey | OpError::OutOfBounds | OpError::Misaligned) => OUTBOARD_ERR_RDMA,
            HostError::Op(OpError::Cancelled) => OUTBOARD_ERR_CANCELLED,
            HostError::Op(OpError::SourceClosed(_)) => OUTBOARD_ERR_SOURCE_CLOSED,
            HostError::Command(_) => OUTBOARD_ERR_RESOURCE,
            HostError::Memory(_) | HostError::Op(OpError::DmaFault) => OUTBOARD_ERR_MEMORY,
            HostError::Coll(_) | HostError::Op(OpError::Collective(_)) => OUTBOARD_ERR_COLL,
            HostError::UnknownRequest => OUTBOARD_ERR_ARG,
            HostError::Op(_) => OUTBOARD_ERR_OTHER,
        };
        Error::new(code, e.to_string())
    }
}

impl From<InitError> for Error {
    fn from(e: InitError) -> Error {
        Error::new(OUTBOARD_ERR_INIT, e.to_string())
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
}

/// Runs an exported function's body: a panic becomes
/// [`OUTBOARD_ERR_PANIC`], an error its code; either leaves its message for
/// [`outboard_last_error`].
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OUTBOARD_OK,
        Ok(Err(e)) => {
            set_last(&e.msg);
            e.code
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last(&format!("outboard panicked: {what}"));
            OUTBOARD_ERR_PANIC
        }
    }
}

/// A short description of an error code (static; never null).
#[no_mangle]
pub extern "C" fn outboard_strerror(code: c_int) -> *const c_char {
    let s: &'static [u8] = match code {
        OUTBOARD_OK => b"success\0",
        OUTBOARD_ERR_ARG => b"invalid argument\0",
        OUTBOARD_ERR_INIT => b"joining the job failed\0",
        OUTBOARD_ERR_PEER => b"a peer is unreachable\0",
        OUTBOARD_ERR_TRUNCATED => b"message truncated\0",
        OUTBOARD_ERR_RDMA => b"remote memory access refused (key, bounds or alignment)\0",
        OUTBOARD_ERR_RESOURCE => b"engine resources exhausted or message too long\0",
        OUTBOARD_ERR_MEMORY => b"registered memory exhausted or access out of bounds\0",
        OUTBOARD_ERR_COLL => b"collective refused\0",
        OUTBOARD_ERR_CANCELLED => b"cancelled\0",
        OUTBOARD_ERR_STATE => b"world finalized or unusable after an earlier failure\0",
        OUTBOARD_ERR_OTHER => b"operation failed\0",
        OUTBOARD_ERR_PANIC => b"internal error (panic)\0",
        OUTBOARD_ERR_SOURCE_CLOSED => b"the port a receive named has closed\0",
        _ => b"unknown error code\0",
    };
    s.as_ptr().cast()
}

/// The message of the last failed call on this thread (valid until the
/// next failing call on this thread; empty if none failed).
#[no_mangle]
pub extern "C" fn outboard_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// `p` as a reference, or an argument error naming `what`.
pub(crate) unsafe fn deref<'a, T>(p: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller passes a pointer it got from this library (or
    // null, refused here).
    unsafe { p.as_ref() }.ok_or_else(|| Error::arg(format!("{what} is null")))
}

/// Writes `v` to an out-pointer, refusing null.
pub(crate) unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::arg(format!("{what} is null")));
    }
    // SAFETY: non-null, and the caller promises it points at a writable T.
    unsafe { out.write(v) };
    Ok(())
}

/// A byte slice from a C pointer and length (null allowed when empty).
pub(crate) unsafe fn bytes<'a>(p: *const std::ffi::c_void, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::arg(format!("{what} is null")));
    }
    // SAFETY: the caller promises `len` readable bytes at `p`.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}
