//! One barrier's progress at one member under the collective protocol:
//! which step it is at, whether that step's notifications went out, and
//! which notifications arrived - the whole of its reliability state. It
//! touches no engine state: the engine feeds it arrivals and sends what it
//! returns.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::coll::run::Compiled;

/// A barrier's progress: steps before `step` have sent and received
/// everything.
#[derive(Debug)]
pub(crate) struct Progress {
    pub epoch: u32,
    pub sched: Arc<Compiled>,
    /// The step under way (`steps.len()` once finished).
    pub step: usize,
    /// Whether `step`'s notifications went out.
    pub sent: bool,
    /// Notifications received, as (sender's rank, round). Bounded by the
    /// schedule's receives: only expected ones are kept.
    pub got: BTreeSet<(u32, u16)>,
}

/// Whether schedule `c` receives a notification numbered `round` from `src`.
pub(crate) fn expects(c: &Compiled, src: u32, round: u16) -> bool {
    c.schedule.steps.iter().zip(&c.recv_round).any(|(s, rr)| s.recv_from.iter().zip(rr).any(|(&r, &n)| r == src && n == round))
}

/// Where schedule `c` sends its notification numbered `round` to `to`:
/// (step, index in the step's list).
pub(crate) fn send_of(c: &Compiled, to: u32, round: u16) -> Option<(usize, usize)> {
    c.schedule.steps.iter().zip(&c.send_round).enumerate().find_map(|(si, (s, sr))| {
        s.send_to.iter().zip(sr).position(|(&r, &n)| r == to && n == round).map(|i| (si, i))
    })
}

impl Progress {
    pub(crate) fn new(epoch: u32, sched: Arc<Compiled>, got: BTreeSet<(u32, u16)>) -> Progress {
        Progress { epoch, sched, step: 0, sent: false, got }
    }

    /// Records an arrival. `false`: a duplicate, or not one this schedule
    /// expects (both are dropped).
    pub(crate) fn arrive(&mut self, src: u32, round: u16) -> bool {
        expects(&self.sched, src, round) && self.got.insert((src, round))
    }

    /// Runs as far as the arrivals allow, pushing each step whose
    /// notifications are due now. `true` once every step is done.
    pub(crate) fn advance(&mut self, due: &mut Vec<usize>) -> bool {
        let steps = &self.sched.schedule.steps;
        while self.step < steps.len() {
            if !self.sent {
                due.push(self.step);
                self.sent = true;
            }
            let rr = &self.sched.recv_round[self.step];
            if !steps[self.step].recv_from.iter().zip(rr).all(|(&r, &n)| self.got.contains(&(r, n))) {
                return false;
            }
            self.step += 1;
            self.sent = false;
        }
        true
    }

    /// The notifications the step under way still waits for.
    pub(crate) fn missing(&self) -> Vec<(u32, u16)> {
        let Some(s) = self.sched.schedule.steps.get(self.step) else { return Vec::new() };
        s.recv_from.iter().copied().zip(self.sched.recv_round[self.step].iter().copied()).filter(|k| !self.got.contains(k)).collect()
    }

    /// Whether notification `round` to `to` has gone out already: where
    /// it is in the schedule, if so.
    pub(crate) fn sent_to(&self, to: u32, round: u16) -> Option<(usize, usize)> {
        send_of(&self.sched, to, round).filter(|&(s, _)| s < self.step || (s == self.step && self.sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::{Fold, Schedule, Step};

    fn compiled(s: Schedule) -> Arc<Compiled> {
        Arc::new(Compiled::new(0, s).unwrap())
    }

    /// Rank 0 of a 4-rank dissemination barrier: to 1 from 3, to 2 from 2.
    fn dissemination0() -> Arc<Compiled> {
        compiled(Schedule::new(vec![Step::exchange([1], [3], Fold::Ignore), Step::exchange([2], [2], Fold::Ignore)]))
    }

    #[test]
    fn steps_wait_for_their_arrivals_in_order() {
        let mut p = Progress::new(0, dissemination0(), BTreeSet::new());
        let mut due = Vec::new();
        assert!(!p.advance(&mut due));
        assert_eq!(due, vec![0], "the first step's notifications go at once");
        assert_eq!(p.missing(), vec![(3, 0)]);
        // The second step's arrival comes first: kept, nothing more sent.
        assert!(p.arrive(2, 0));
        assert!(!p.advance(&mut due));
        assert_eq!(due, vec![0]);
        assert!(p.arrive(3, 0));
        assert!(p.advance(&mut due), "both arrivals in: done");
        assert_eq!(due, vec![0, 1]);
        assert!(p.missing().is_empty());
    }

    #[test]
    fn duplicates_and_strangers_are_refused() {
        let mut p = Progress::new(0, dissemination0(), BTreeSet::new());
        assert!(p.arrive(3, 0));
        assert!(!p.arrive(3, 0), "duplicate");
        assert!(!p.arrive(1, 0), "rank 1 sends this member nothing");
        assert!(!p.arrive(3, 1), "no second round from 3");
        assert_eq!(p.got.len(), 1);
    }

    #[test]
    fn only_notifications_already_sent_are_resent() {
        let mut p = Progress::new(0, dissemination0(), BTreeSet::new());
        assert_eq!(p.sent_to(1, 0), None, "nothing sent before the first advance");
        p.advance(&mut Vec::new());
        assert_eq!(p.sent_to(1, 0), Some((0, 0)));
        assert_eq!(p.sent_to(2, 0), None, "the second step was not reached");
        p.arrive(3, 0);
        p.advance(&mut Vec::new());
        assert_eq!(p.sent_to(2, 0), Some((1, 0)));
        assert_eq!(p.sent_to(3, 0), None, "never sent to 3");
    }
}
