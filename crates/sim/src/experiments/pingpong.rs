//! Ping-pong: one-way latency and bandwidth against message size.
//!
//! Node 0 sends a message to node 1, which sends it back; the one-way
//! figure is half the round trip, averaged over `iters` consecutive round
//! trips, as the papers' ping tests do. Receives are posted before the
//! message can arrive, so no message takes the unexpected path.
//!
//! A profile whose MPI layer simulates its rendezvous (`[mpi] rendezvous`)
//! also gets the MPI-level curves beside the raw one: `mpi-eager` (every
//! message copied through pre-registered buffers at both ends) and
//! `mpi-rndv` (copies below the eager limit, the host library's real
//! rendezvous - announcement, RDMA read into the receive buffer, finish -
//! from it up). The raw curve is the communication layer itself (verbs
//! send and receive into pre-posted buffers, no MPI costs, no copies).

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::RecvMatch;
use outboard_host::HostError;

use super::common::first_port;
use super::{FirstError, ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::sim::Simulation;
use crate::time::Time;

/// One-way latency in microseconds of a `size`-byte message, averaged over
/// `iters` round trips.
pub fn one_way(profile: &Profile, size: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let mut sim = Simulation::with_config(profile, 2, seed, |c| {
        c.max_ports = 1;
        c.max_message = c.max_message.max(size);
    })?;
    let end: Shared<Time> = Rc::new(RefCell::new(Time::ZERO));
    let err = FirstError::default();
    for me in 0..2u32 {
        let (end, err) = (end.clone(), err.clone());
        sim.spawn(me, move |p| async move {
            let r: Result<(), HostError> = async {
                let peer = first_port(1 - me);
                let mut port = p.open_port(0).expect("fresh port");
                let sbuf = port.buffer_from(&vec![7; size as usize])?;
                let rbuf = port.buffer(size)?;
                let mut sends = Vec::new();
                for i in 0..u64::from(iters) {
                    let recv = port.start_recv(RecvMatch::tag(i), rbuf)?;
                    if me == 0 {
                        sends.push(port.start_send(peer, i, sbuf)?);
                        p.wait(&mut port, recv).await?;
                    } else {
                        p.wait(&mut port, recv).await?;
                        sends.push(port.start_send(peer, i, sbuf)?);
                    }
                }
                if me == 0 {
                    *end.borrow_mut() = p.now();
                }
                for r in p.wait_all(&mut port, &sends).await {
                    r?;
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    sim.run()?;
    err.check()?;
    let t = *end.borrow();
    Ok(t.as_us() / (2.0 * f64::from(iters)))
}

pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes =
        if p.sizes.is_empty() { vec![0, 8, 64, 512, 4096, 32_768, 262_144, 1_048_576] } else { p.sizes.clone() };
    let total = p.profiles.len() * sizes.len();
    let mut rows = Vec::new();
    let mut bw_rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        let largest = sizes.iter().copied().max().unwrap_or(0);
        for &size in &sizes {
            let us = one_way(prof, size, p.iters, p.seed)?;
            let mut lat = Row::new(prof.name.clone(), 2, size, "one-way", us, "us");
            if prof.name == "elan3" && size == 0 {
                lat = lat.with_paper(&["elan3-lat"]);
            }
            rows.push(lat);
            if size > 0 {
                let mut bw = Row::new(prof.name.clone(), 2, size, "bandwidth", f64::from(size) / us, "MB/s");
                if prof.name == "elan3" && size == largest && size >= 1 << 20 {
                    bw = bw.with_paper(&["elan3-bw-main"]);
                }
                bw_rows.push(bw);
            }
            done += 1;
            progress(done, total);
        }
    }
    let largest = sizes.iter().copied().max().unwrap_or(0);
    for prof in p.profiles.iter().filter(|p| p.mpi.rendezvous) {
        let mpi_rndv = prof.at_mpi_level();
        let mut mpi_eager = mpi_rndv.clone();
        mpi_eager.host.rendezvous_from_bytes = None;
        mpi_eager.host.copy_below_bytes = u32::MAX;
        let levels = [("one-way mpi-eager", "bandwidth mpi-eager", &mpi_eager), ("one-way mpi-rndv", "bandwidth mpi-rndv", &mpi_rndv)];
        for (lat_metric, bw_metric, level) in levels {
            // MPICH2 over InfiniBand (seed 004 b) with its zero-copy design:
            // the rendezvous level on ib-sdr, its small-message latency at
            // 8 B and its bandwidth at 1 MiB.
            let mpich2 = prof.name == "ib-sdr" && lat_metric == "one-way mpi-rndv";
            for &size in &sizes {
                let us = one_way(level, size, p.iters, p.seed)?;
                let mut lat = Row::new(prof.name.clone(), 2, size, lat_metric, us, "us");
                if mpich2 && size == 8 {
                    lat = lat.with_paper(&["mpich2-ib-latency"]);
                }
                rows.push(lat);
                if size > 0 {
                    let mut bw = Row::new(prof.name.clone(), 2, size, bw_metric, f64::from(size) / us, "MB/s");
                    if mpich2 && size == largest && size >= 1 << 20 {
                        bw = bw.with_paper(&["mpich2-ib-bandwidth"]);
                    }
                    bw_rows.push(bw);
                }
            }
        }
    }
    rows.extend(bw_rows);
    Ok(Outcome {
        title: "Ping-pong: one-way latency (half the round trip) and bandwidth".into(),
        x: XAxis::Size,
        rows,
        notes: vec!["bandwidth = size / one-way latency of that size".into()],
    })
}
