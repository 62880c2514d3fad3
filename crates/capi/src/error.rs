//! Error codes, the per-thread last-error message, and [`guard`], which
//! every exported function runs its body in.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use outboard_engine::CollError;
use outboard_host::coll::describe_schedule;
use outboard_host::{CollectiveError, CommandError, HostError, OpError};
use outboard_runtime::node_coll::NodeCollError;
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
/// A receive from any source was withdrawn, its buffer untouched, because
/// a process of the job failed while it waited (the failed process may
/// have been its sender; ULFM's `MPI_ERR_PROC_FAILED_PENDING`). Posted
/// again, it waits for the live ranks.
pub const OUTBOARD_ERR_PROC_FAILED_PENDING: c_int = 14;
/// The destination port is gone: closed, replaced by a newer incarnation,
/// or never opened on that engine. Nothing was delivered to it.
pub const OUTBOARD_ERR_PORT_GONE: c_int = 15;
/// The destination kept refusing the message (port not open yet, no
/// buffer) for longer than the retry timeout.
pub const OUTBOARD_ERR_NOT_READY_TIMEOUT: c_int = 16;
/// The sender gave the message up part-way (its port closed); what arrived
/// of it is discarded.
pub const OUTBOARD_ERR_SENDER_ABORTED: c_int = 17;
/// The group's members called different collectives at the same place in
/// the group's order (or the same collective with different roots): an
/// erroneous program, reported instead of waiting for good.
pub const OUTBOARD_ERR_COLL_MISMATCH: c_int = 18;
/// This process's node engine is gone (`OUTBOARD_ENGINE=node`: the engine
/// process died or detached this process); nothing more completes.
pub const OUTBOARD_ERR_ENGINE_LOST: c_int = 19;
/// A NICVM module failed: its source does not compile, its bytecode does
/// not verify, an engine refused it, or, as a reduction's operator, it ran
/// out of fuel, trapped or reported failure (the message names the
/// module).
pub const OUTBOARD_ERR_MODULE: c_int = 20;

/// A failure: its code and its message.
#[derive(Debug)]
pub(crate) struct Error {
    pub code: c_int,
    pub msg: String,
    /// The engine error it came from, so that a call holding the world can
    /// word the nodes it names as ranks ([`Error::in_ranks`]).
    pub host: Option<HostError>,
}

impl Error {
    pub fn new(code: c_int, msg: impl Into<String>) -> Error {
        Error { code, msg: msg.into(), host: None }
    }

    /// The message with the nodes and ports an engine error names worded
    /// as the job's ranks (`rank 2 is unreachable`, not `peer node
    /// NodeId(2) is unreachable`).
    pub fn in_ranks(mut self, w: &outboard_runtime::World) -> Error {
        if let Some(h) = &self.host {
            let worded = w.error_in_ranks(h);
            if worded != h.to_string() {
                self.msg = worded;
            }
        }
        self
    }

    pub fn arg(msg: impl Into<String>) -> Error {
        Error::new(OUTBOARD_ERR_ARG, msg)
    }

    /// The error of a collective whose operator is module `module` (if
    /// any): a failure of the operator, here or at another member, is
    /// [`OUTBOARD_ERR_MODULE`] and names the module. Another member's
    /// failure reaches this one only as a flag on its packets, so its
    /// message says what else may have failed there.
    pub fn with_operator(mut self, module: Option<&str>) -> Error {
        let Some(name) = module else { return self };
        let rank = match self.host.as_ref().and_then(HostError::coll_error) {
            Some(CollError::FailedUpstream { rank }) => Some(*rank),
            _ => None,
        };
        if let Some(rank) = rank {
            self.code = OUTBOARD_ERR_MODULE;
            self.msg = format!(
                "the collective whose operator is module '{name}' failed at another member (a packet from rank {rank} said so): the module failed there, or the members called different collectives"
            );
        }
        self
    }

    /// The error an exported function just returned as `code`, with the
    /// message it left ([`outboard_last_error`]).
    pub fn last(code: c_int) -> Error {
        let msg = LAST.with(|l| l.borrow().to_string_lossy().into_owned());
        if msg.is_empty() {
            // SAFETY: `outboard_strerror` returns a static C string.
            let what = unsafe { std::ffi::CStr::from_ptr(outboard_strerror(code)) };
            return Error::new(code, what.to_string_lossy().into_owned());
        }
        Error::new(code, msg)
    }
}

impl From<HostError> for Error {
    /// Each engine error gets its own code where a program would act on it
    /// differently (retry, exclude a rank, fix its collective calls); the
    /// match names every operation error, so a new one needs a decision.
    fn from(e: HostError) -> Error {
        let code = match &e {
            HostError::Command(CommandError::PeerUnreachable(_)) => OUTBOARD_ERR_PEER,
            HostError::Command(_) => OUTBOARD_ERR_RESOURCE,
            HostError::Memory(_) => OUTBOARD_ERR_MEMORY,
            HostError::UnknownRequest => OUTBOARD_ERR_ARG,
            HostError::Coll(CollectiveError::Engine(c)) => coll_code(c),
            HostError::Coll(CollectiveError::Mismatch { .. }) => OUTBOARD_ERR_COLL_MISMATCH,
            HostError::Coll(_) => OUTBOARD_ERR_COLL,
            HostError::Op(op) => op_code(op),
        };
        let msg = match (e.coll_error(), &e) {
            (Some(CollError::ModuleFailed { module, failure }), _) => module_failed(*module, failure),
            (Some(CollError::ScheduleMismatch { ours, theirs }), _) => mismatch(*ours, Some(*theirs)),
            (_, HostError::Coll(CollectiveError::Mismatch { ours })) => mismatch(*ours, None),
            _ => e.to_string(),
        };
        Error { host: Some(e), ..Error::new(code, msg) }
    }
}

/// The code of a failed operation.
fn op_code(op: &OpError) -> c_int {
    match op {
        OpError::PeerUnreachable(_) | OpError::Refused(CommandError::PeerUnreachable(_)) => OUTBOARD_ERR_PEER,
        OpError::ProcFailedPending(_) => OUTBOARD_ERR_PROC_FAILED_PENDING,
        OpError::SourceClosed(_) => OUTBOARD_ERR_SOURCE_CLOSED,
        OpError::PortGone | OpError::NoSuchPort => OUTBOARD_ERR_PORT_GONE,
        OpError::EngineLost => OUTBOARD_ERR_ENGINE_LOST,
        OpError::NotReadyTimeout => OUTBOARD_ERR_NOT_READY_TIMEOUT,
        OpError::SenderAborted => OUTBOARD_ERR_SENDER_ABORTED,
        OpError::Truncated { .. } => OUTBOARD_ERR_TRUNCATED,
        OpError::BadKey | OpError::OutOfBounds | OpError::Misaligned => OUTBOARD_ERR_RDMA,
        OpError::Cancelled => OUTBOARD_ERR_CANCELLED,
        OpError::DmaFault => OUTBOARD_ERR_MEMORY,
        OpError::NoSuchRegion => OUTBOARD_ERR_ARG,
        OpError::Refused(_) => OUTBOARD_ERR_RESOURCE,
        OpError::Collective(c) => coll_code(c),
        OpError::BadAnnouncement | OpError::NotCancellable | OpError::Nicvm(_) => OUTBOARD_ERR_OTHER,
    }
}

/// The code of a failed collective: a mismatch between the members' calls
/// has its own.
fn coll_code(c: &CollError) -> c_int {
    match c {
        CollError::ScheduleMismatch { .. } => OUTBOARD_ERR_COLL_MISMATCH,
        CollError::ModuleFailed { .. } => OUTBOARD_ERR_MODULE,
        _ => OUTBOARD_ERR_COLL,
    }
}

/// The message of a module operator's failure at this member, naming the
/// module (by the name this process loaded it under; by id if it did not).
fn module_failed(module: u32, failure: &outboard_engine::CombineFailure) -> String {
    let name = crate::nicvm::name_of(module).map_or_else(|| format!("{module:#010x}"), |n| format!("'{n}'"));
    format!("module {name}, the collective's operator, failed to combine a contribution at this rank: {failure}")
}

/// The message of a mismatch, in words: a schedule's number names its
/// collective the same at every member ([`describe_schedule`]); a
/// host-based collective learns only that the peer's differs (`None`).
fn mismatch(ours: u16, theirs: Option<u16>) -> String {
    let theirs = theirs.map_or_else(|| "another collective".to_string(), describe_schedule);
    format!(
        "the group's members called different collectives at the same place in the group's order: this rank {}, another member {theirs}",
        describe_schedule(ours)
    )
}

impl From<NodeCollError> for Error {
    /// A node collective's failure, with the code the engine's would have.
    fn from(e: NodeCollError) -> Error {
        let code = match &e {
            NodeCollError::Mismatch { .. } => OUTBOARD_ERR_COLL_MISMATCH,
            NodeCollError::Died { .. } => OUTBOARD_ERR_PEER,
            NodeCollError::Reduction(c) => coll_code(c),
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
        OUTBOARD_ERR_PROC_FAILED_PENDING => b"a receive from any source was withdrawn: a process failed while it waited\0",
        OUTBOARD_ERR_PORT_GONE => b"the destination port is gone\0",
        OUTBOARD_ERR_NOT_READY_TIMEOUT => b"the destination was not ready within the retry timeout\0",
        OUTBOARD_ERR_SENDER_ABORTED => b"the sender aborted the message\0",
        OUTBOARD_ERR_COLL_MISMATCH => b"the group's members called different collectives\0",
        OUTBOARD_ERR_ENGINE_LOST => b"this process's node engine is gone\0",
        OUTBOARD_ERR_MODULE => b"a NICVM module failed to compile, load or run\0",
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

/// `len` writable bytes at `p`, as [`bytes`] gives readable ones.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut std::ffi::c_void, len: usize, what: &str) -> Result<&'a mut [u8], Error> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::arg(format!("{what} is null")));
    }
    // SAFETY: the caller promises `len` writable bytes at `p`, not
    // aliased elsewhere for the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
}

#[cfg(test)]
mod tests {
    use outboard_engine::{Endpoint, NodeId, PortId};

    use super::*;

    fn code(e: impl Into<HostError>) -> c_int {
        Error::from(e.into()).code
    }

    #[test]
    fn each_engine_error_has_its_code() {
        assert_eq!(code(OpError::ProcFailedPending(NodeId(3))), OUTBOARD_ERR_PROC_FAILED_PENDING);
        assert_eq!(code(OpError::PortGone), OUTBOARD_ERR_PORT_GONE);
        assert_eq!(code(OpError::NoSuchPort), OUTBOARD_ERR_PORT_GONE);
        assert_eq!(code(OpError::NotReadyTimeout), OUTBOARD_ERR_NOT_READY_TIMEOUT);
        assert_eq!(code(OpError::SenderAborted), OUTBOARD_ERR_SENDER_ABORTED);
        assert_eq!(code(OpError::PeerUnreachable(NodeId(1))), OUTBOARD_ERR_PEER);
        assert_eq!(code(OpError::Refused(CommandError::PeerUnreachable(NodeId(1)))), OUTBOARD_ERR_PEER);
        assert_eq!(code(OpError::Refused(CommandError::NoSendToken)), OUTBOARD_ERR_RESOURCE);
        assert_eq!(code(OpError::SourceClosed(Endpoint { node: NodeId(1), port: PortId(0), gen: 1 })), OUTBOARD_ERR_SOURCE_CLOSED);
        assert_eq!(code(OpError::Collective(CollError::GroupBusy)), OUTBOARD_ERR_COLL);
        assert_eq!(code(OpError::NoSuchRegion), OUTBOARD_ERR_ARG);
    }

    #[test]
    fn a_mismatch_says_so_in_words_however_it_arrives() {
        // Schedule numbers as the host library gives them: a dissemination
        // barrier (1), a binomial broadcast from rank 3 (3 << 13 | 3).
        let m = CollError::ScheduleMismatch { ours: 1, theirs: 3 << 13 | 3 };
        for e in [HostError::Op(OpError::Collective(m)), HostError::Coll(CollectiveError::Engine(m))] {
            let e = Error::from(e);
            assert_eq!(e.code, OUTBOARD_ERR_COLL_MISMATCH);
            assert!(e.msg.starts_with("the group's members called different collectives"), "{}", e.msg);
            assert!(e.msg.ends_with("this rank a barrier, another member a broadcast from rank 3"), "{}", e.msg);
        }
        let e = Error::from(HostError::Coll(CollectiveError::Mismatch { ours: 2 << 13 | 1 }));
        assert_eq!(e.code, OUTBOARD_ERR_COLL_MISMATCH);
        assert!(e.msg.ends_with("this rank an allreduce, another member another collective"), "{}", e.msg);
    }

    #[test]
    fn every_code_has_its_own_description() {
        let text = |c| unsafe { std::ffi::CStr::from_ptr(outboard_strerror(c)) }.to_str().unwrap().to_string();
        let all: Vec<String> = (OUTBOARD_OK..=OUTBOARD_ERR_MODULE).map(text).collect();
        let distinct: std::collections::BTreeSet<&String> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
        assert!(!all.contains(&"unknown error code".to_string()));
        assert_eq!(text(OUTBOARD_ERR_MODULE + 1), "unknown error code");
    }
}
