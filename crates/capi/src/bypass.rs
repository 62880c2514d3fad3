//! Application bypass on a group's broadcasts and reduces (dissertation
//! chapter 6), on the port the world uses for everything else.
//!
//! A group whose broadcast mode is `OUTBOARD_BCAST_BYPASS` (or reduce mode
//! `OUTBOARD_REDUCE_BYPASS`) keeps a bypass group on the world's port
//! (`outboard_host::Port::bypass_attach_group`). Its blocking broadcasts
//! and reduces of at most [`MAX_LEN`] bytes run there: an inner member's
//! engine interrupts the process when a value for it arrives, and the
//! handler forwards (broadcast) or folds and sends up (reduce) whatever the
//! application is doing. Longer messages, the split-phase forms and module
//! operators run in the group's mode.
//!
//! The world's lock is the progress lock of chapter 6.2.3: every call takes
//! it (`Shared::with`) with interrupts off and leaves with them on, one more
//! poll and a re-poll for every interrupt that found the lock held; the
//! handler ([`Interruptible::on_interrupt`]) only tries it. Interrupts come
//! as `OUTBOARD_BYPASS_DELIVERY` says: a realtime signal to the thread that
//! first chose bypass, or a progress thread.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use outboard_host::bypass::{BypassError, BypassId, MAX_LEN};
use outboard_runtime::interrupt::{deliver_by_signal, deliver_by_thread, DeliveryError, Interruptible, SignalGuard, ThreadGuard};
use outboard_runtime::RtPort;
use outboard_settings::registry;

use crate::coll::{contribution, reduction};
use crate::error::{bytes_mut, guard, Error, OUTBOARD_ERR_ARG, OUTBOARD_ERR_COLL, OUTBOARD_ERR_RESOURCE, OUTBOARD_ERR_STATE};
use crate::group::outboard_group;
use crate::nicvm::is_module;
use crate::world::Shared;

/// Temporary slots per kind of collective: values of later calls that
/// may arrive before this member's call (more are added as needed). One:
/// every slot is a receive kept posted, and a program may have many
/// groups (an MPI program, a communicator each) on a port whose receive
/// tokens are shared with everything else it does.
const SLOTS: usize = 1;

/// Reduces run in the group's mode (the default).
pub const OUTBOARD_REDUCE_GROUP_MODE: c_int = 0;
/// Reduces of at most 16384 bytes of a built-in operation run by
/// application bypass.
pub const OUTBOARD_REDUCE_BYPASS: c_int = 1;

/// A group's application-bypass choices and what its bypass calls did.
#[derive(Debug, Default)]
pub(crate) struct GroupBypass {
    /// Its bypass group on the world's port, once a mode chose bypass.
    pub id: Option<BypassId>,
    pub bcast: bool,
    pub reduce: bool,
    /// Broadcasts and reduces that ran by application bypass.
    pub bcasts: u64,
    pub reduces: u64,
}

impl GroupBypass {
    /// Whether reduces (`reduce`) or broadcasts run by application bypass.
    fn chosen(&self, reduce: bool) -> bool {
        if reduce {
            self.reduce
        } else {
            self.bcast
        }
    }
}

/// The world's side of application bypass: whether interrupts are on, the
/// lost-signal flag, and the handler's counters.
#[derive(Default)]
pub(crate) struct Interrupts {
    /// Set once the port's interrupt flag is named and delivery is on:
    /// from then, every call brackets its work with interrupts off.
    pub on: AtomicBool,
    /// An interrupt found the world's lock held: its holder re-polls.
    pub missed: AtomicBool,
    /// Handler runs that moved bypass traffic, and ones that found the
    /// library busy.
    pub runs: AtomicU64,
    pub busy: AtomicU64,
    /// Serializes turning interrupts on.
    setup: Mutex<()>,
    /// The progress thread, under thread delivery.
    thread: Mutex<Option<ThreadGuard>>,
}

thread_local! {
    /// Signal delivery to this thread (the guard must be dropped on the
    /// thread it was made on): until the world is finalized here, or the
    /// thread exits.
    static SIGNALS: RefCell<Option<SignalGuard>> = const { RefCell::new(None) };
}

impl Interruptible for Shared {
    fn on_interrupt(&self) {
        // Noted before the try: a holder that lets the lock go between a
        // failed try and a later note would leave it unserved.
        self.interrupts.missed.store(true, Ordering::SeqCst);
        let mut w = match self.world_try_lock() {
            Ok(w) => w,
            Err(TryLockError::WouldBlock) => {
                self.interrupts.busy.fetch_add(1, Ordering::Relaxed);
                return;
            }
            // A panic left the world half-changed: nothing to move.
            Err(TryLockError::Poisoned(_)) => return,
        };
        self.interrupts.missed.store(false, Ordering::SeqCst);
        if let Some(w) = w.as_mut() {
            w.port().bypass_progress();
            self.interrupts.runs.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn with_port(&self, f: &mut dyn FnMut(&mut RtPort)) {
        let _ = self.with(|w| {
            f(w.port().io());
            Ok(())
        });
    }
}

/// Stops interrupt delivery as the world goes (finalize, abandon).
pub(crate) fn stop_delivery(shared: &Shared) {
    shared.interrupts.on.store(false, Ordering::SeqCst);
    drop(shared.interrupts.thread.lock().unwrap_or_else(PoisonError::into_inner).take());
    let _ = SIGNALS.try_with(|s| s.borrow_mut().take());
}

/// Turns the world's interrupts on (once): names the port's flag to the
/// engine and starts delivery as `OUTBOARD_BYPASS_DELIVERY` says.
fn start_delivery(shared: &Arc<Shared>) -> Result<(), Error> {
    let _once = shared.interrupts.setup.lock().unwrap_or_else(PoisonError::into_inner);
    if shared.interrupts.on.load(Ordering::SeqCst) {
        return Ok(());
    }
    let how = registry::BYPASS_DELIVERY.get(&outboard_settings::ProcessEnv).map_err(|e| Error::arg(e.to_string()))?;
    // A guard left on this thread by a world finalized on another goes
    // first: its drop would clear the new one's handler.
    drop(SIGNALS.with(|s| s.borrow_mut().take()));
    shared.with(|w| w.port().name_bypass_flag().map_err(bypass_error))?;
    let refused = |how: &'static str| move |e: DeliveryError| {
        let why = match e {
            DeliveryError::HostAssisted => {
                "a signal handler cannot run the engine's turns that host-assisted progress puts on the application's thread: set OUTBOARD_BYPASS_DELIVERY=thread, or OUTBOARD_PROGRESS=dedicated or spin-then-block".to_string()
            }
            DeliveryError::NodeEngine => "this rank's node engine could not be told where to deliver them (it is gone, or refused: see its messages on stderr)".to_string(),
            DeliveryError::Io(e) => e.to_string(),
        };
        Error::new(OUTBOARD_ERR_STATE, format!("application bypass needs the engine's interrupts ({how} delivery): {why}"))
    };
    let by_thread = |refused: &dyn Fn(DeliveryError) -> Error| -> Result<(), Error> {
        let g = deliver_by_thread(shared).map_err(refused)?;
        *shared.interrupts.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(g);
        Ok(())
    };
    match how {
        Some("thread") => by_thread(&refused("thread"))?,
        Some(_) => {
            let g = deliver_by_signal(shared).map_err(refused("signal"))?;
            SIGNALS.with(|s| *s.borrow_mut() = Some(g));
        }
        // Signals where a handler may run the library's progress; a
        // progress thread where that would run the engine too.
        None => match deliver_by_signal(shared) {
            Ok(g) => SIGNALS.with(|s| *s.borrow_mut() = Some(g)),
            Err(DeliveryError::HostAssisted) => by_thread(&refused("thread"))?,
            Err(e) => return Err(refused("signal")(e)),
        },
    }
    shared.interrupts.on.store(true, Ordering::SeqCst);
    Ok(())
}

/// The C ABI's error for a bypass call's.
fn bypass_error(e: BypassError) -> Error {
    match e {
        BypassError::Host(h) => h.into(),
        BypassError::BadRoot(_) | BypassError::TooLong { .. } => Error::new(OUTBOARD_ERR_ARG, format!("application bypass: {e}")),
        BypassError::LengthMismatch { .. } => Error::new(OUTBOARD_ERR_COLL, format!("application bypass: {e}")),
        BypassError::ReceiveBudget { .. } | BypassError::TooManyGroups(_) => Error::new(OUTBOARD_ERR_RESOURCE, format!("application bypass: {e}")),
        BypassError::NotMember(_) | BypassError::NoSuchGroup => Error::new(OUTBOARD_ERR_STATE, format!("application bypass: {e}")),
    }
}

impl outboard_group {
    fn bypass_state(&self) -> std::sync::MutexGuard<'_, GroupBypass> {
        self.bypass.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Chooses (or drops) application bypass for the group's broadcasts
    /// or reduces: the first choice turns the world's interrupts on and
    /// makes the group's bypass group. A group of one has nobody to wait
    /// for: its calls stay in its mode.
    pub(crate) fn set_bypass(&self, bcast: Option<bool>, reduce: Option<bool>) -> Result<(), Error> {
        // The group's bypass lock is never held while the world's is taken
        // (`outboard_group_taken` takes them the other way round).
        let (attached, b0, r0) = {
            let b = self.bypass_state();
            (b.id.is_some(), b.bcast, b.reduce)
        };
        let wants = bcast.unwrap_or(b0) || reduce.unwrap_or(r0);
        let made = if wants && !attached && self.size > 1 {
            start_delivery(&self.shared)?;
            Some(self.with(|g, w| w.port().bypass_attach_group(g, SLOTS).map_err(bypass_error))?)
        } else {
            None
        };
        let spare = {
            let mut b = self.bypass_state();
            b.bcast = bcast.unwrap_or(b.bcast);
            b.reduce = reduce.unwrap_or(b.reduce);
            match (made, b.id) {
                (Some(id), None) => {
                    b.id = Some(id);
                    None
                }
                // Another thread attached meanwhile: ours goes.
                (made, _) => made,
            }
        };
        if let Some(id) = spare {
            self.shared.with(|w| w.port().bypass_detach(id).map_err(bypass_error))?;
        }
        Ok(())
    }

    /// Whether broadcasts (`reduce` false) or reduces run by application
    /// bypass.
    pub(crate) fn bypass_chosen(&self, reduce: bool) -> bool {
        self.bypass_state().chosen(reduce)
    }

    /// The group's bypass group, when a `len`-byte broadcast (`reduce`
    /// false) or reduce runs by application bypass.
    fn bypass_for(&self, reduce: bool, len: usize) -> Option<BypassId> {
        let b = self.bypass_state();
        b.id.filter(|_| b.chosen(reduce) && len <= MAX_LEN as usize)
    }

    fn count_bypass(&self, reduce: bool) {
        let mut b = self.bypass_state();
        if reduce {
            b.reduces += 1;
        } else {
            b.bcasts += 1;
        }
    }

    /// Lines for `outboard_group_taken`: what ran by application bypass,
    /// and what the group's bypass traffic and the world's handler (for
    /// every group of the process) did, once something ran by it.
    pub(crate) fn bypass_taken(&self, w: &mut outboard_runtime::World) -> String {
        let b = self.bypass_state();
        let Some(id) = b.id.filter(|_| b.bcasts + b.reduces > 0) else { return String::new() };
        let st = w.port().bypass_stats(id).unwrap_or_default();
        let i = &self.shared.interrupts;
        let mut s = String::new();
        for (n, what) in [
            (b.bcasts, "broadcast application bypass"),
            (b.reduces, "reduce application bypass"),
            (st.forwarded, "application bypass values forwarded"),
            (st.combined, "application bypass contributions folded"),
            (i.runs.load(Ordering::Relaxed), "application bypass interrupts handled"),
        ] {
            if n > 0 {
                s.push_str(&format!("{n} {what}\n"));
            }
        }
        s
    }

    /// Ends the group's bypass group (when it is freed): once everything
    /// it sent is confirmed, its memory goes back.
    pub(crate) fn detach_bypass(&self, w: &mut outboard_runtime::World) -> Result<(), Error> {
        match self.bypass_state().id.take() {
            Some(id) => w.port().bypass_detach(id).map_err(bypass_error),
            None => Ok(()),
        }
    }
}

/// A blocking broadcast by application bypass, when the group chose it
/// for this length; `None` sends the call on.
pub(crate) unsafe fn bcast(group: *const outboard_group, buf: *mut c_void, len: usize, root: u32) -> Option<c_int> {
    // SAFETY: a handle from this library or null, as the caller promises.
    let g = unsafe { group.as_ref() }?;
    let id = g.bypass_for(false, len)?;
    Some(guard(|| {
        let data = unsafe { bytes_mut(buf, len, "buf") }?;
        let mut call = g.shared.with(|w| w.port().bypass_bcast_call(id, root, len).map_err(bypass_error))?;
        // Stepped with the world's lock let go between steps, as every
        // wait of the C ABI is: other threads keep using the world.
        while !g.shared.with(|w| w.port().bypass_bcast_step(id, &mut call, data).map_err(bypass_error))? {
            g.shared.pause()?;
        }
        g.count_bypass(false);
        Ok(())
    }))
}

/// A blocking reduce by application bypass, when the group chose it for
/// this length and the operation is a built-in one; `None` sends the call
/// on.
pub(crate) unsafe fn reduce(group: *const outboard_group, sendbuf: *const c_void, recvbuf: *mut c_void, count: usize, dtype: c_int, op: c_int, root: u32) -> Option<c_int> {
    // SAFETY: a handle from this library or null, as the caller promises.
    let g = unsafe { group.as_ref() }?;
    let red = reduction(dtype, op).ok().filter(|r| !is_module(r))?;
    let len = count.checked_mul(red.dtype.size())?;
    let id = g.bypass_for(true, len)?;
    Some(guard(|| {
        let mine = unsafe { contribution(sendbuf, recvbuf, len) }.ok_or_else(|| Error::arg("sendbuf or recvbuf is null"))?;
        let out: &mut [u8] = if g.rank == root { unsafe { bytes_mut(recvbuf, len, "recvbuf") }? } else { &mut [] };
        let call = g.shared.with(|w| w.port().bypass_reduce_call(id, root, red, &mine, out.len()).map_err(bypass_error))?;
        if let Some(mut call) = call {
            while !g.shared.with(|w| w.port().bypass_reduce_step(id, &mut call, out).map_err(bypass_error))? {
                g.shared.pause()?;
            }
        }
        g.count_bypass(true);
        Ok(())
    }))
}
