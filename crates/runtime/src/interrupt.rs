//! Delivering the engine's selective interrupts to an application-bypass
//! port ([`outboard_host::bypass`]), in the two forms dissertation 6.2.1
//! weighs:
//!
//! - [`deliver_by_signal`]: a POSIX realtime signal to the application
//!   thread itself (`tgkill` from the engine thread), whose handler runs
//!   [`Interruptible::on_interrupt`] (for a [`Bypass`],
//!   [`Bypass::on_interrupt`]) - the design the chapter chose (one thread,
//!   a signal handler, no CPU spent while nothing arrives);
//! - [`deliver_by_thread`]: a progress thread blocked on an eventfd, which
//!   the engine thread writes - the alternative (the "broadcast thread that
//!   blocks", today's asynchronous-progress threads).
//!
//! The handler is async-signal-safe: it reads a thread-local pointer,
//! tries the bypass port's progress lock (an atomic compare-and-swap) and,
//! only if it got it, runs allocation-free progress (`outboard_host::bypass`
//! says what that touches). A signal that finds the library busy sets a
//! flag the library re-polls on.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::ptr::NonNull;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::Duration;

use outboard_host::bypass::Bypass;

use crate::{Progress, RtPort};

/// Where a port's interrupts go: what the engine thread does when its
/// engine raises one.
#[derive(Debug)]
pub(crate) enum Target {
    /// `tgkill(pid, tid, signo)`.
    Signal { pid: libc::pid_t, tid: libc::pid_t, signo: libc::c_int },
    /// Add 1 to an eventfd.
    EventFd(Arc<OwnedFd>),
}

impl Target {
    /// Delivers one interrupt (engine thread).
    pub(crate) fn raise(&self) {
        match self {
            Target::Signal { pid, tid, signo } => {
                // SAFETY: a plain system call on integers; a thread that
                // exited first only makes it fail (the guard withdraws the
                // target before its thread can exit).
                unsafe {
                    libc::syscall(libc::SYS_tgkill, *pid, *tid, *signo);
                }
            }
            Target::EventFd(fd) => write_one(fd.as_raw_fd()),
        }
    }
}

fn write_one(fd: libc::c_int) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64 to a descriptor we own.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), 8);
    }
}

/// The signal: a realtime one, queued, never one the runtime or std uses.
pub fn signal_number() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// What a port's interrupts run: the driver of its bypass groups - a
/// [`Bypass`] (a port of its own), or a library that keeps bypass groups on
/// the port it uses for everything else (the C ABI's world).
pub trait Interruptible: Send + Sync + 'static {
    /// The handler: async-signal-safe (a try of the driver's progress lock,
    /// then [`outboard_host::Port::bypass_progress`]; a lock found held is
    /// noted for the holder to re-poll).
    fn on_interrupt(&self);
    /// Runs `f` on the port's transport with the driver's lock held and
    /// interrupts off.
    fn with_port(&self, f: &mut dyn FnMut(&mut RtPort));
}

impl Interruptible for Bypass<RtPort> {
    fn on_interrupt(&self) {
        Bypass::on_interrupt(self);
    }

    fn with_port(&self, f: &mut dyn FnMut(&mut RtPort)) {
        self.with_io(|io| f(io));
    }
}

thread_local! {
    /// The driver whose interrupts this thread's signal handler serves
    /// (none: the handler only counts).
    static TARGET: Cell<Option<NonNull<dyn Interruptible>>> = const { Cell::new(None) };
}

/// Points the port's interrupts at `set`'s target when it is `Some` (its
/// `None`: nowhere); returns whether the port took it (a node engine's
/// cannot be interrupted) and whether its node's progress is
/// host-assisted.
fn point(target: &dyn Interruptible, mut set: Option<Option<Target>>) -> (bool, bool) {
    let (mut ok, mut assisted) = (false, false);
    target.with_port(&mut |io| {
        assisted = matches!(io.progress(), Progress::HostAssisted { .. });
        if let Some(t) = set.take() {
            ok = io.set_irq(t);
        }
    });
    (ok, assisted)
}

/// Handler entries (all threads), and the monotonic time of the last, for
/// [`measure_signal_cost`].
static ENTRIES: AtomicU64 = AtomicU64::new(0);
static LAST_ENTRY_NS: AtomicU64 = AtomicU64::new(0);

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: fills a live timespec; clock_gettime is async-signal-safe.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

extern "C" fn on_signal(_sig: libc::c_int) {
    LAST_ENTRY_NS.store(mono_ns(), Ordering::SeqCst);
    ENTRIES.fetch_add(1, Ordering::SeqCst);
    if let Some(p) = TARGET.with(Cell::get) {
        // SAFETY: set by `deliver_by_signal` on this thread from an `Arc`
        // its guard keeps alive, and cleared (on this thread) before the
        // guard lets it go.
        unsafe { p.as_ref().on_interrupt() };
    }
}

static INSTALL: Once = Once::new();
static INSTALL_ERR: AtomicBool = AtomicBool::new(false);

fn install() -> io::Result<()> {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler; SA_RESTART so that
        // the interrupted application's system calls resume.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(signal_number(), &sa, std::ptr::null_mut()) != 0 {
                INSTALL_ERR.store(true, Ordering::SeqCst);
            }
        }
    });
    if INSTALL_ERR.load(Ordering::SeqCst) {
        return Err(io::Error::other("sigaction failed for the interrupt signal"));
    }
    Ok(())
}

fn gettid() -> libc::pid_t {
    // SAFETY: a system call without arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// The calling thread's kernel id (for [`signal_thread`]).
pub fn thread_id() -> libc::pid_t {
    gettid()
}

/// Sends the interrupt signal to thread `tid` of this process, as the
/// engine thread does: for tests that interrupt a library call at random
/// points.
pub fn signal_thread(tid: libc::pid_t) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    Target::Signal { pid, tid, signo: signal_number() }.raise();
}

/// Why interrupts cannot be delivered.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// Under host-assisted progress a post may run an engine turn on the
    /// posting thread - not something a signal handler may do.
    #[error("signal delivery needs the dedicated or spin-then-block progress policy")]
    HostAssisted,
    /// The port is on a node engine process that could not be told where
    /// to deliver (its socket is gone, or it refused).
    #[error("the node engine could not be told where to deliver interrupts (it is gone, or refused)")]
    NodeEngine,
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Interrupts for `target`'s port go to the calling thread as a realtime
/// signal until the guard is dropped (on this thread: the guard is not
/// `Send`).
pub fn deliver_by_signal<T: Interruptible>(target: &Arc<T>) -> Result<SignalGuard, DeliveryError> {
    let target: Arc<dyn Interruptible> = target.clone();
    if point(&*target, None).1 {
        return Err(DeliveryError::HostAssisted);
    }
    install()?;
    TARGET.with(|t| t.set(Some(NonNull::from(&*target))));
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let signal = Target::Signal { pid, tid: gettid(), signo: signal_number() };
    if !point(&*target, Some(Some(signal))).0 {
        TARGET.with(|t| t.set(None));
        return Err(DeliveryError::NodeEngine);
    }
    Ok(SignalGuard { target, _thread: PhantomData })
}

/// Withdraws signal delivery when dropped.
pub struct SignalGuard {
    target: Arc<dyn Interruptible>,
    _thread: PhantomData<*const ()>,
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let _ = point(&*self.target, Some(None));
        TARGET.with(|t| t.set(None));
    }
}

/// Interrupts for `target`'s port wake a progress thread (blocked reading
/// an eventfd) that runs its handler, until the guard is dropped.
pub fn deliver_by_thread<T: Interruptible>(target: &Arc<T>) -> Result<ThreadGuard, DeliveryError> {
    let target: Arc<dyn Interruptible> = target.clone();
    if !point(&*target, Some(None)).0 {
        return Err(DeliveryError::NodeEngine);
    }
    // SAFETY: creates a descriptor we then own.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let fd = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (fd, stop, t) = (fd.clone(), stop.clone(), target.clone());
        std::thread::Builder::new().name("outboard-progress".into()).spawn(move || {
            let mut n = 0u64;
            loop {
                // SAFETY: reads 8 bytes into a live u64.
                let r = unsafe { libc::read(fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if r == 8 {
                    t.on_interrupt();
                }
            }
        })?
    };
    let guard = ThreadGuard { target, fd, stop, thread: Some(thread) };
    if !point(&*guard.target, Some(Some(Target::EventFd(guard.fd.clone())))).0 {
        // The guard's drop stops the thread.
        return Err(DeliveryError::NodeEngine);
    }
    Ok(guard)
}

/// Stops the progress thread when dropped.
pub struct ThreadGuard {
    target: Arc<dyn Interruptible>,
    fd: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        let _ = point(&*self.target, Some(None));
        self.stop.store(true, Ordering::SeqCst);
        write_one(self.fd.as_raw_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The cost of one interrupt in the signal form, measured `n` times: from
/// just before `tgkill` on one thread to the handler's entry on another
/// that is busy computing (delivery, the kernel's switch into the handler),
/// and the whole round on one thread (signal sent to itself: system call,
/// delivery, handler entry and return). Returns the medians.
pub fn measure_signal_cost(n: u32) -> io::Result<(Duration, Duration)> {
    install()?;
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicU64::new(0));
    let spinner = {
        let (stop, tid) = (stop.clone(), tid.clone());
        std::thread::spawn(move || {
            tid.store(gettid() as u64, Ordering::SeqCst);
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let remote = Target::Signal { pid, tid: tid.load(Ordering::SeqCst) as libc::pid_t, signo: signal_number() };
    let mut cross = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let before = ENTRIES.load(Ordering::SeqCst);
        let t0 = mono_ns();
        remote.raise();
        while ENTRIES.load(Ordering::SeqCst) == before {
            std::hint::spin_loop();
        }
        cross.push(LAST_ENTRY_NS.load(Ordering::SeqCst).saturating_sub(t0));
    }
    stop.store(true, Ordering::SeqCst);
    let _ = spinner.join();
    let own = Target::Signal { pid, tid: gettid(), signo: signal_number() };
    let mut round = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let t0 = mono_ns();
        own.raise();
        round.push(mono_ns() - t0);
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        Duration::from_nanos(v[v.len() / 2])
    };
    Ok((median(&mut cross), median(&mut round)))
}
