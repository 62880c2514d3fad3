//! Joining and leaving the job: [`outboard_init`] (the environment
//! `outboard run`, `mpirun`, Hydra or Slurm set), [`outboard_init_exchange`]
//! (a job that already talks, through the program's own allgather), and
//! [`outboard_finalize`].

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use outboard_runtime::bootstrap::ExchangeBootstrap;
use outboard_runtime::node_coll::NodeColl;
use outboard_host::{Port, PortIo};
use outboard_runtime::{Options, RtPort, World};

use crate::error::{deref, guard, put, Error, OUTBOARD_ERR_STATE};

/// This process's place in the job (opaque).
pub struct outboard_world {
    pub(crate) shared: Arc<Shared>,
}

/// The world behind its lock, shared with the groups, requests and memory
/// made from it; `None` once finalized.
pub(crate) struct Shared {
    world: Mutex<Option<World>>,
    /// Whether the world was taken (finalized, abandoned): read without
    /// the lock by calls that do not need the world otherwise.
    gone: AtomicBool,
    /// Threads inside a blocking wait on this world.
    waiters: AtomicUsize,
    /// Split-phase collectives under way in a group's shared memory: no
    /// engine event ends them, so an idle step must not park for one.
    pub(crate) node_open: AtomicUsize,
    /// The group of the split-phase collective in shared memory started
    /// last: what an idle step waits on while any is open.
    pub(crate) node_last: Mutex<Option<Weak<Mutex<NodeColl>>>>,
    /// Ports of freed atomic servers, kept open for the next server: a
    /// closed port's slot reopened would leave the other ranks' receives
    /// from it failing until they saw its new incarnation.
    pub(crate) server_ports: Mutex<Vec<Port<RtPort>>>,
    /// Application bypass's interrupts (module `bypass`).
    pub(crate) interrupts: crate::bypass::Interrupts,
}

/// A thread's presence in a blocking wait ([`Shared::waiting`]).
pub(crate) struct Waiting<'a>(&'a Shared);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Shared {
    /// Runs `f` on the world, or fails if it was finalized or a panic left
    /// it half-changed.
    ///
    /// Once application bypass is on, the call brackets `f` with the
    /// engine's interrupts off and, after, on again with one more poll;
    /// an interrupt that found the lock held meanwhile is served here,
    /// after the lock goes (the lost-signal loop of dissertation 6.2.3).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut World) -> Result<R, Error>) -> Result<R, Error> {
        let mut guard = self.world.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the world in use"))?;
        let w = guard.as_mut().ok_or_else(|| Error::new(OUTBOARD_ERR_STATE, "the world was finalized"))?;
        let bypass = self.interrupts.on.load(Ordering::Acquire);
        if bypass {
            w.port().bypass_enter();
        }
        let r = f(w).map_err(|e| e.in_ranks(w));
        if bypass {
            w.port().bypass_leave();
        }
        drop(guard);
        while self.interrupts.missed.swap(false, Ordering::SeqCst) {
            if let Some(w) = self.world.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
                w.port().bypass_progress();
            }
        }
        r
    }

    /// The world's lock if it is free: what an interrupt handler may take.
    pub(crate) fn world_try_lock(&self) -> Result<std::sync::MutexGuard<'_, Option<World>>, std::sync::TryLockError<std::sync::MutexGuard<'_, Option<World>>>> {
        self.world.try_lock()
    }

    /// Takes the world out (finalize, abandon, abort).
    fn take(&self) -> Option<World> {
        crate::bypass::stop_delivery(self);
        // Servers' ports close before the engine stops.
        self.server_ports.lock().unwrap_or_else(PoisonError::into_inner).clear();
        let w = self.world.lock().unwrap_or_else(PoisonError::into_inner).take();
        self.gone.store(true, Ordering::Release);
        w
    }

    /// Fails once the world was taken out, without taking its lock.
    pub(crate) fn live(&self) -> Result<(), Error> {
        if self.gone.load(Ordering::Acquire) {
            return Err(Error::new(OUTBOARD_ERR_STATE, "the world was finalized"));
        }
        Ok(())
    }

    /// Counts this thread among the waiters until the guard is dropped.
    pub(crate) fn waiting(&self) -> Waiting<'_> {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        Waiting(self)
    }

    /// Whether another thread is waiting too: then a waiter must not idle
    /// (park until an event) holding the world's lock, or the other could
    /// not even start the collective both depend on.
    pub(crate) fn contended(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 1
    }

    /// One pause of a waiting thread between two tests: a short sleep
    /// that leaves the world to the other waiters when there are some,
    /// else the port's idle step (which drives a host-driven engine).
    pub(crate) fn pause(&self) -> Result<(), Error> {
        if self.contended() {
            std::thread::sleep(std::time::Duration::from_micros(10));
            return Ok(());
        }
        self.with(|w| {
            w.port().io().idle();
            Ok(())
        })
    }
}

fn hand_out(world: World, out: *mut *mut outboard_world) -> Result<(), Error> {
    let h = Box::new(outboard_world { shared: Arc::new(Shared { world: Mutex::new(Some(world)), gone: AtomicBool::new(false), waiters: AtomicUsize::new(0), node_open: AtomicUsize::new(0), node_last: Mutex::new(None), server_ports: Mutex::new(Vec::new()), interrupts: Default::default() }) });
    // SAFETY: `out` checked non-null by `put`; on failure the box is dropped.
    unsafe { put(out, Box::into_raw(h), "out") }
}

/// Joins the job its environment describes (`outboard run`; Open MPI's
/// `mpirun` and MPICH's Hydra through their PMIx or PMI-1; Slurm's `srun`
/// with `--mpi=pmix` or `OUTBOARD_RENDEZVOUS`; alone, a job of one). Settings from `OUTBOARD_*` variables as in the
/// Rust `outboard_runtime::init`: a bad value, or an `OUTBOARD_*` variable
/// that is not a setting, fails with `OUTBOARD_ERR_INIT` and the sentence
/// `outboard_settings_check` gives.
#[no_mangle]
pub unsafe extern "C" fn outboard_init(out: *mut *mut outboard_world) -> c_int {
    guard(|| hand_out(outboard_runtime::init()?, out))
}

/// The collective [`outboard_init_exchange`] runs: every rank passes `len`
/// bytes at `mine`; on return `all` holds every rank's `len` bytes in rank
/// order (`MPI_Allgather` of `MPI_BYTE`). Returns 0 on success.
pub type outboard_allgather_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, mine: *const c_void, len: usize, all: *mut c_void) -> c_int>;

/// Joins a job whose processes already communicate, as `rank` of `size`
/// (`local_size` of them on this machine): engine addresses and rank 0's
/// job key are exchanged with `allgather(ctx, ...)`, which every rank
/// calls collectively, now and again in [`outboard_finalize`]; `ctx` must
/// stay valid until then. The engine binds `OUTBOARD_ADDR` or the
/// address of `OUTBOARD_IFACE`, else the loopback address when all ranks
/// share this machine, else the first IPv4 address of an interface that
/// is up and not loopback. The settings are checked first, as by
/// [`outboard_init`], before any allgather: ranks with the same
/// environment fail alike, without a collective left half done.
#[no_mangle]
pub unsafe extern "C" fn outboard_init_exchange(
    rank: u32,
    size: u32,
    local_size: u32,
    allgather: outboard_allgather_fn,
    ctx: *mut c_void,
    out: *mut *mut outboard_world,
) -> c_int {
    guard(|| {
        let f = allgather.ok_or_else(|| Error::arg("allgather is null"))?;
        // The context is the caller's; it promises it stays valid and may
        // be used from the thread that calls into the world.
        let ctx = ctx as usize;
        let n = size as usize;
        let ag = Box::new(move |mine: &[u8]| -> Result<Vec<u8>, String> {
            let mut all = vec![0u8; mine.len() * n];
            // SAFETY: `mine` is readable for its length and `all` writable
            // for `size` times that, as the callback's contract says.
            let rc = unsafe { f(ctx as *mut c_void, mine.as_ptr().cast(), mine.len(), all.as_mut_ptr().cast()) };
            if rc == 0 {
                Ok(all)
            } else {
                Err(format!("the program's allgather returned {rc}"))
            }
        });
        let boot = ExchangeBootstrap::new(rank, size, ag).map_err(|e| Error::arg(e.to_string()))?;
        let ip = outboard_runtime::address::host_ip(local_size >= size);
        let world = outboard_runtime::init_with_bootstrap(Options::from_env()?, Box::new(boot), local_size, ip)?;
        hand_out(world, out)
    })
}

/// Leaves the job together with every other rank (collective) and frees
/// `world`; groups, requests and memory made from it fail with
/// `OUTBOARD_ERR_STATE` afterwards (free them before). The handle is freed
/// even when leaving fails.
#[no_mangle]
pub unsafe extern "C" fn outboard_finalize(world: *mut outboard_world) -> c_int {
    guard(|| {
        if world.is_null() {
            return Err(Error::arg("world is null"));
        }
        // SAFETY: a handle from `outboard_init*`, freed only here.
        let h = unsafe { Box::from_raw(world) };
        let w = h.shared.take();
        let w = w.ok_or_else(|| Error::new(OUTBOARD_ERR_STATE, "the world was finalized"))?;
        w.finalize().map_err(|e| Error::new(crate::OUTBOARD_ERR_PEER, format!("leaving the job: {e}")))
    })
}

/// Gives the job up after a failure, without ending the process or
/// freeing `world`: tells every live rank that this one is leaving, so
/// their operations waiting on it fail at once, naming the job's first
/// failure, instead of after the peer timeout. Takes about 50 ms (the
/// notices are carried across losses). For a program about to exit after
/// an error it cannot recover from (the Python package calls it when an
/// exception escapes); `outboard_abort` also ends the process. Later calls
/// on the world fail with `OUTBOARD_ERR_STATE`; `outboard_finalize` still
/// frees the handle.
#[no_mangle]
pub unsafe extern "C" fn outboard_abandon(world: *const outboard_world) -> c_int {
    guard(|| {
        let h = unsafe { deref(world, "world") }?;
        if let Some(mut w) = h.shared.take() {
            w.abandon();
            // Dropped without the collective finalize: the others no
            // longer take part in it.
            drop(w);
        }
        Ok(())
    })
}

/// Gives the job up as `outboard_abandon` does, then ends the process
/// with exit status `code` (what `MPI_Abort` is to MPI). Returns only on
/// a null `world`.
#[no_mangle]
pub unsafe extern "C" fn outboard_abort(world: *const outboard_world, code: c_int) -> c_int {
    guard(|| {
        let h = unsafe { deref(world, "world") }?;
        let w = h.shared.take();
        match w {
            Some(w) => w.abort(code),
            None => std::process::exit(code),
        }
    })
}

/// This process's rank.
#[no_mangle]
pub unsafe extern "C" fn outboard_rank(world: *const outboard_world, rank: *mut u32) -> c_int {
    guard(|| {
        let r = unsafe { deref(world, "world") }?.shared.with(|w| Ok(w.rank()))?;
        unsafe { put(rank, r, "rank") }
    })
}

/// Writes into `text` (at most `cap` bytes with the terminating NUL) a
/// sentence saying where this rank's engine runs (a thread of the process,
/// or the node's engine process and how many ranks share it) and its
/// progress policy with the reason it was chosen. `OUTBOARD_ERR_ARG` when
/// a pointer is null or the sentence does not fit (then `text` holds the
/// empty string if `cap` > 0).
#[no_mangle]
pub unsafe extern "C" fn outboard_describe(world: *const outboard_world, text: *mut c_char, cap: usize) -> c_int {
    guard(|| {
        if text.is_null() {
            return Err(Error::arg("text is null"));
        }
        if cap > 0 {
            // SAFETY: non-null, and the caller promises `cap` writable bytes.
            unsafe { *text = 0 };
        }
        let d = unsafe { deref(world, "world") }?.shared.with(|w| Ok(w.describe_engine()))?;
        if d.len() >= cap {
            return Err(Error::arg(format!("the description needs {} bytes with its terminating NUL; cap is {cap}", d.len() + 1)));
        }
        // SAFETY: `d.len() + 1 <= cap` writable bytes at `text`; the source
        // is a distinct Rust string.
        unsafe {
            std::ptr::copy_nonoverlapping(d.as_ptr(), text.cast::<u8>(), d.len());
            *text.add(d.len()) = 0;
        }
        Ok(())
    })
}

/// The number of ranks.
#[no_mangle]
pub unsafe extern "C" fn outboard_size(world: *const outboard_world, size: *mut u32) -> c_int {
    guard(|| {
        let s = unsafe { deref(world, "world") }?.shared.with(|w| Ok(w.size()))?;
        unsafe { put(size, s, "size") }
    })
}
