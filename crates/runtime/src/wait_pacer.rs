//! When a waiting host under host-assisted progress stops spinning and
//! sleeps: the decision, apart from the threads and sockets it steers, so
//! that it can be checked on made-up clocks.
//!
//! A host that waits drives its engine in a loop. On a machine whose cores
//! are its own that is the fastest wait there is, for as long as it takes.
//! On a machine that other work also loads it is the slowest: the kernel
//! shares each core between the spinning host and that work in time slices
//! of milliseconds, so the peer a host waits for is off its core for whole
//! slices, and every message costs one (seen here: 2-4 ms per 8-byte
//! broadcast with two busy loops beside two ranks, against 8 us without).
//! A thread that sleeps instead is woken, ahead of that work, by the
//! datagram it waits for. The pacer tells the two machines apart by the
//! one thing a spinning thread can see of the other work: a gap between
//! two consecutive looks of one wait, where nothing but a ring check runs,
//! means the kernel took the core away. After such a gap, and for a while,
//! a wait sleeps once nothing has happened for a short spin.

use std::time::Duration;

use outboard_engine::Instant;

/// What a waiting host does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitStep {
    /// Drive the engine once more (and call [`WaitPacer::looked`] after).
    Drive,
    /// Hand the engine back to its thread and sleep until an event comes.
    Sleep,
}

/// The pacing state of one port's waits.
#[derive(Debug, Clone)]
pub(crate) struct WaitPacer {
    /// How long a wait on a loaded machine spins with nothing happening.
    spin: Duration,
    /// A gap at least this long between two looks means a preemption.
    preempted_gap: Duration,
    /// How long one preemption keeps the waits short.
    loaded_for: Duration,
    /// When the current stretch of nothing happening began.
    quiet_since: Option<Instant>,
    /// When the last look of the current wait ended.
    last_look: Option<Instant>,
    /// Until when waits are short.
    loaded_until: Option<Instant>,
}

impl WaitPacer {
    /// A pacer whose waits, once the thread was preempted, sleep after
    /// `spin` of nothing and stay short for `loaded_for`.
    pub fn new(spin: Duration, preempted_gap: Duration, loaded_for: Duration) -> WaitPacer {
        WaitPacer { spin, preempted_gap, loaded_for, quiet_since: None, last_look: None, loaded_until: None }
    }

    /// The next step of a wait at `now`.
    pub fn step(&mut self, now: Instant) -> WaitStep {
        if self.last_look.is_some_and(|last| now - last >= self.preempted_gap) {
            self.loaded_until = Some(now + self.loaded_for);
        }
        let since = *self.quiet_since.get_or_insert(now);
        if self.loaded_until.is_some_and(|until| now < until) && now - since >= self.spin {
            self.quiet_since = None;
            self.last_look = None;
            return WaitStep::Sleep;
        }
        WaitStep::Drive
    }

    /// A look (an engine turn) ended at `now`; `busy` if it did anything.
    pub fn looked(&mut self, now: Instant, busy: bool) {
        if busy {
            self.quiet_since = None;
        }
        self.last_look = Some(now);
    }

    /// Something happened for the port (an event, a post): the wait, if
    /// any, is over, and what comes before the next one is not a gap.
    pub fn progressed(&mut self) {
        self.quiet_since = None;
        self.last_look = None;
    }

    /// Whether waits are short at `now` (the thread was preempted lately).
    #[cfg(test)]
    pub fn loaded(&self, now: Instant) -> bool {
        self.loaded_until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    fn at(us: u64) -> Instant {
        Instant::from_nanos(us * US)
    }

    fn pacer() -> WaitPacer {
        WaitPacer::new(Duration::from_micros(50), Duration::from_micros(500), Duration::from_millis(100))
    }

    /// A pacer whose first wait was preempted for 1 ms (so it slept at once).
    fn preempted() -> WaitPacer {
        let mut p = pacer();
        p.step(at(0));
        p.looked(at(1), false);
        assert_eq!(p.step(at(1_000)), WaitStep::Sleep);
        p
    }

    /// Drives a wait that looks every `every` us from `from` to `to`
    /// (nothing happening); returns when it chose to sleep, if it did.
    fn wait(p: &mut WaitPacer, from: u64, to: u64, every: u64) -> Option<u64> {
        let mut t = from;
        while t < to {
            if p.step(at(t)) == WaitStep::Sleep {
                return Some(t);
            }
            p.looked(at(t + 1), false);
            t += every;
        }
        None
    }

    #[test]
    fn a_host_never_preempted_spins_for_as_long_as_it_waits() {
        let mut p = pacer();
        assert_eq!(wait(&mut p, 0, 1_000_000, 2), None, "a whole second of looks 2 us apart");
        assert!(!p.loaded(at(1_000_000)));
    }

    #[test]
    fn after_a_preemption_a_quiet_wait_sleeps_after_the_short_spin() {
        // Quiet since the wait began, then the core was taken away for 3 ms.
        let mut p = pacer();
        assert_eq!(p.step(at(0)), WaitStep::Drive);
        p.looked(at(1), false);
        assert_eq!(p.step(at(3_001)), WaitStep::Sleep);
        assert!(p.loaded(at(3_001)));
        // The look before the preemption found work: the short spin counts
        // from the first quiet look after it.
        let mut p = pacer();
        p.step(at(0));
        p.looked(at(1), true);
        assert_eq!(p.step(at(3_001)), WaitStep::Drive);
        p.looked(at(3_002), false);
        assert_eq!(wait(&mut p, 3_003, 4_000, 2), Some(3_051));
    }

    #[test]
    fn a_loaded_port_sleeps_in_later_waits_until_the_load_is_forgotten() {
        let mut p = preempted();
        // A new wait 10 ms later: short, as the machine was loaded lately.
        p.progressed();
        assert_eq!(wait(&mut p, 10_000, 20_000, 2), Some(10_050));
        // One after the 100 ms memory ran out spins on.
        p.progressed();
        assert_eq!(wait(&mut p, 200_000, 300_000, 2), None);
    }

    #[test]
    fn progress_restarts_the_spin_and_is_not_a_gap() {
        let mut p = preempted();
        // A wait whose looks find datagrams every 30 us never sleeps.
        let mut t = 2_000;
        while t < 3_000 {
            assert_eq!(p.step(at(t)), WaitStep::Drive, "at {t}");
            p.looked(at(t + 1), true);
            t += 30;
        }
        // Time spent outside a wait (computing) is no preemption.
        let mut p = pacer();
        p.step(at(0));
        p.looked(at(1), false);
        p.progressed();
        assert_eq!(wait(&mut p, 50_000, 60_000, 2), None);
        assert!(!p.loaded(at(60_000)));
    }
}
