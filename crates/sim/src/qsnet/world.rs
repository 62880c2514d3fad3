//! The event loop: the fabric's events, and the jobs (collective
//! benchmark, background traffic) that react to its notes. A job sees
//! only its own packets' notes and its own timers; it sends packets and
//! uses its nodes' Elan engines through the [`Fabric`].

use super::fabric::{Fabric, Note};

/// A job running on the QsNet nodes.
pub trait Job {
    /// React to a note at `fabric.now()`.
    fn on(&mut self, fabric: &mut Fabric, note: Note);
    /// Whether the job is done (the run stops when the measured job is).
    fn finished(&self) -> bool;
}

/// Runs until job `measured` is finished or nothing is left to do; jobs
/// are started by the caller (their first packets or timers queued).
/// Returns false if the events ran out before the job finished.
pub fn run(fabric: &mut Fabric, jobs: &mut [&mut dyn Job], measured: usize) -> bool {
    loop {
        while let Some(n) = fabric.note() {
            let a = n.agent();
            jobs[a].on(fabric, n);
        }
        if jobs[measured].finished() {
            return true;
        }
        if !fabric.step() {
            return jobs[measured].finished();
        }
    }
}
