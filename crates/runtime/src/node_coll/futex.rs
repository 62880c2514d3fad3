//! Sleeping on a word of shared memory until another process changes it
//! (Linux futexes, the shared kind, which key on the mapped file's page,
//! so processes that map one region at different addresses meet).
//!
//! A waiter that has spun long enough sleeps instead of yielding: with
//! more ranks than cores, yielding lets the scheduler pick anyone, while a
//! sleeper leaves the core to exactly the processes with work, and the
//! publisher wakes it. The futex word is the low half of a 64-bit
//! sequence word (sequence numbers only grow, so its low half changes
//! with every publication that matters to a waiter).

#![allow(unsafe_code)]

use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The address of `word`'s low 32 bits.
fn low_half(word: &AtomicU64) -> *const u32 {
    let p = word.as_ptr().cast::<u32>();
    if cfg!(target_endian = "big") {
        p.wrapping_add(1)
    } else {
        p
    }
}

/// Sleeps while `word`'s low half equals `seen`, for at most `timeout`
/// (a wake-up, a changed value, a signal or the timeout all return).
pub fn wait(word: &AtomicU64, seen: u64, timeout: Duration) {
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: the address is that of a live, aligned 32-bit half of an
    // atomic word in a mapping the caller borrows for the call; the kernel
    // only reads it (compares it with `seen`) and `ts` outlives the call.
    unsafe {
        libc::syscall(libc::SYS_futex, low_half(word), libc::FUTEX_WAIT, seen as u32, &ts as *const libc::timespec, std::ptr::null::<u32>(), 0u32);
    }
}

/// Wakes every process sleeping on `word`.
pub fn wake_all(word: &AtomicU64) {
    // SAFETY: as in `wait`; FUTEX_WAKE does not access the word at all.
    unsafe {
        libc::syscall(libc::SYS_futex, low_half(word), libc::FUTEX_WAKE, i32::MAX, std::ptr::null::<libc::timespec>(), std::ptr::null::<u32>(), 0u32);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_sleeper_wakes_when_woken_and_one_that_is_not_after_its_timeout() {
        let w = AtomicU64::new(5);
        let t = Instant::now();
        wait(&w, 5, Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(15), "returned before its timeout");
        // A value other than the one seen returns at once.
        let t = Instant::now();
        wait(&w, 4, Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                w.store(6, Ordering::SeqCst);
                wake_all(&w);
            });
            let t = Instant::now();
            while w.load(Ordering::SeqCst) == 5 {
                wait(&w, 5, Duration::from_secs(10));
            }
            assert!(t.elapsed() < Duration::from_secs(5), "the wake-up was lost");
        });
    }
}
