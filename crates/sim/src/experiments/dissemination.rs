//! A dissemination-pattern exchange over point-to-point messages.
//!
//! In round r (0 <= r < ceil(log2 N)) rank i posts a receive from
//! `i - 2^r`, sends to `i + 2^r` (mod N) and waits for its receive, as
//! MPICH's dissemination barrier does over `MPI_Sendrecv`. For a power of
//! two it has the rounds and messages of the pairwise-exchange barrier, so
//! on the GM profiles it is compared with the dissertation's host-based PE
//! barrier. Send completions are collected one exchange later (an eager
//! MPI send completes locally), so they cost host time but never wait.
//!
//! The figure is the time from the start until the last rank finished,
//! divided by the number of consecutive exchanges (`iters`).

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{NodeId, PortId, RecvMatch};
use outboard_host::HostError;

use super::common::first_port;
use super::{FirstError, ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::sim::{RunReport, Simulation};
use crate::time::Time;

/// Rounds of the exchange for `n` ranks.
pub fn rounds(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// Runs `iters` consecutive exchanges of `size`-byte messages on `n`
/// nodes; returns microseconds per exchange and the run's report.
pub fn exchange(
    profile: &Profile,
    n: u32,
    size: u32,
    iters: u32,
    seed: u64,
) -> Result<(f64, RunReport), ExperimentError> {
    let iters = iters.max(1);
    let mut sim = Simulation::with_config(profile, n, seed, |c| c.max_ports = 1)?;
    let finish: Shared<Time> = Rc::new(RefCell::new(Time::ZERO));
    let err = FirstError::default();
    let r = rounds(n);
    for me in 0..n {
        let (finish, err) = (finish.clone(), err.clone());
        sim.spawn(me, move |p| async move {
            let res: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let sbuf = port.buffer(size)?;
                let rbufs: Vec<_> = (0..r).map(|_| port.buffer(size)).collect::<Result<_, _>>()?;
                let mut previous = Vec::new();
                for it in 0..iters {
                    let mut sends = Vec::with_capacity(r as usize);
                    for k in 0..r {
                        let d = 1u32 << k;
                        let to = (me + d) % n;
                        let from = (me + n - d % n) % n;
                        let tag = u64::from(it) << 8 | u64::from(k);
                        let recv = port.start_recv(RecvMatch::from(NodeId(from), PortId(0), tag), rbufs[k as usize])?;
                        sends.push(port.start_send(first_port(to), tag, sbuf)?);
                        p.wait(&mut port, recv).await?;
                    }
                    for s in p.wait_all(&mut port, &previous).await {
                        s?;
                    }
                    previous = sends;
                }
                {
                    let mut f = finish.borrow_mut();
                    *f = (*f).max(p.now());
                }
                for s in p.wait_all(&mut port, &previous).await {
                    s?;
                }
                Ok(())
            }
            .await;
            err.record(res);
        });
    }
    let report = sim.run()?;
    err.check()?;
    let t = *finish.borrow();
    Ok((t.as_us() / f64::from(iters), report))
}

/// The paper figure a (profile, nodes) point is compared with, if any.
fn paper_ids(profile: &str, n: u32) -> Option<&'static [&'static str]> {
    match (profile, n) {
        ("gm-lanai72", 8) => Some(&["barrier-gm-pe-host-8-l72"]),
        ("gm-lanai43", 16) => Some(&["barrier-gm-pe-nic-16", "barrier-gm-pe-foi-16"]),
        _ => None,
    }
}

pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = if p.nodes.is_empty() { vec![2, 4, 8, 16] } else { p.nodes.clone() };
    let size = p.sizes.first().copied().unwrap_or(0);
    let total = p.profiles.len() * nodes.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        for &n in &nodes {
            if n < 2 {
                return Err(ExperimentError::Param(format!("dissemination needs at least 2 nodes, got {n}")));
            }
            let (us, _) = exchange(prof, n, size, p.iters, p.seed)?;
            let mut row = Row::new(prof.name.clone(), n, size, "latency", us, "us");
            if let Some(ids) = paper_ids(&prof.name, n) {
                row = row.with_paper(ids);
            }
            rows.push(row);
            done += 1;
            progress(done, total);
        }
    }
    Ok(Outcome {
        title: format!("Dissemination exchange over host point-to-point messages ({size}-byte messages)"),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "compared with the dissertation's host-based pairwise-exchange barrier (same rounds and messages for 2^k nodes)".into(),
            "barrier-gm-pe-nic-16*barrier-gm-pe-foi-16: the host PE barrier implied by the NIC latency and its factor of improvement".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_ceil_log2() {
        assert_eq!([1, 2, 3, 4, 5, 8, 9, 1024, 65_536].map(rounds), [0, 1, 2, 2, 3, 3, 4, 10, 16]);
    }
}
