//! Waiting for another member's word: spin first (a node's collective
//! round takes about a microsecond when every member runs), yield a
//! while, then sleep on the word ([`super::futex`]) until its publisher wakes the sleepers, and
//! every millisecond ask whether the member waited for still lives, so
//! that a killed process fails its group's collective instead of hanging
//! it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::futex;

/// Spins before the waiter sleeps, when every rank of the node has a
/// core; with more ranks than cores a waiter sleeps at once, leaving the
/// core to the member it waits for.
pub const SPINS: u32 = 4_000;

/// Yields before the waiter sleeps.
const YIELDS: u32 = 100;

/// How often a waiter checks that the process it waits for lives.
pub const CHECK_EVERY: Duration = Duration::from_millis(1);

/// The process waited for is gone and the word never got there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gone;

/// Waits until `word` reaches `target` (Acquire), spinning `spins` times
/// before sleeping; [`Gone`] once process `pid` is gone while it had not.
/// `sleepers` counts the waiters asleep on the region's words, so that a
/// publisher ([`publish`]) makes the wake-up call only when one is.
pub fn wait_for(word: &AtomicU64, target: u64, pid: u32, spins: u32, sleepers: &AtomicU64) -> Result<(), Gone> {
    wait_until(word, target, pid, spins, sleepers, None).map(|_| ())
}

/// [`wait_for`], giving up at `deadline` if there is one: `Ok(true)` once
/// `word` reached `target`, `Ok(false)` at the deadline.
pub fn wait_until(word: &AtomicU64, target: u64, pid: u32, spins: u32, sleepers: &AtomicU64, deadline: Option<Instant>) -> Result<bool, Gone> {
    for _ in 0..spins {
        if word.load(Ordering::Acquire) >= target {
            return Ok(true);
        }
        std::hint::spin_loop();
    }
    // The awaited member usually needs only a time slice: yielding hands
    // it over sooner than a sleep and a wake-up would.
    for _ in 0..YIELDS {
        if word.load(Ordering::Acquire) >= target {
            return Ok(true);
        }
        std::thread::yield_now();
    }
    let mut last_check = Instant::now();
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(false);
        }
        let nap = deadline.map_or(CHECK_EVERY, |d| (d - now).min(CHECK_EVERY));
        // Announced before the last look, so that a publisher storing
        // after that look sees the sleeper (both sequentially consistent).
        sleepers.fetch_add(1, Ordering::SeqCst);
        let seen = word.load(Ordering::SeqCst);
        if seen < target {
            futex::wait(word, seen, nap);
        }
        sleepers.fetch_sub(1, Ordering::SeqCst);
        if word.load(Ordering::Acquire) >= target {
            return Ok(true);
        }
        if last_check.elapsed() >= CHECK_EVERY {
            last_check = Instant::now();
            if !alive(pid) {
                // It may have published and then exited.
                return if word.load(Ordering::Acquire) >= target { Ok(true) } else { Err(Gone) };
            }
        }
    }
}

/// Stores `value` in `word` and wakes whoever sleeps on the region's
/// words ([`wait_for`]).
pub fn publish(word: &AtomicU64, value: u64, sleepers: &AtomicU64) {
    word.store(value, Ordering::SeqCst);
    if sleepers.load(Ordering::SeqCst) > 0 {
        futex::wake_all(word);
    }
}

/// Whether process `pid` runs: it has a `/proc` entry and is not a zombie
/// (a killed rank stays one until its launcher reaps it).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the command name, which is in parentheses
            // and may itself hold any character.
            let state = stat.rfind(')').and_then(|i| stat[i + 1..].trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lives_and_a_reaped_child_does_not() {
        assert!(alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn an_unreaped_child_counts_as_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let t = Instant::now();
        while alive(pid) {
            assert!(t.elapsed() < Duration::from_secs(10), "the child never exited");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.wait().unwrap();
    }

    #[test]
    fn a_waiter_with_a_deadline_gives_up_at_it_and_not_before() {
        let w = AtomicU64::new(0);
        let sleepers = AtomicU64::new(0);
        let me = std::process::id();
        let t = Instant::now();
        let deadline = t + Duration::from_millis(3);
        assert_eq!(wait_until(&w, 1, me, 100, &sleepers, Some(deadline)), Ok(false));
        assert!(Instant::now() >= deadline && t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        w.store(1, Ordering::Release);
        assert_eq!(wait_until(&w, 1, me, 100, &sleepers, Some(Instant::now())), Ok(true));
        assert_eq!(sleepers.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_waiter_for_a_dead_process_gives_up_and_one_for_a_set_word_does_not() {
        let w = AtomicU64::new(0);
        let sleepers = AtomicU64::new(0);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(wait_for(&w, 1, pid, SPINS, &sleepers), Err(Gone));
        assert_eq!(wait_for(&w, 1, pid, 0, &sleepers), Err(Gone));
        w.store(3, Ordering::Release);
        assert_eq!(wait_for(&w, 2, pid, SPINS, &sleepers), Ok(()));
        assert_eq!(sleepers.load(Ordering::SeqCst), 0);
    }
}
