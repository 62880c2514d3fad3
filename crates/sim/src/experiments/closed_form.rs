//! The dissertation's closed-form example (section 2.1): one packet to k
//! destinations.
//!
//! By host point-to-point sends the k-th destination has the packet after
//! `k x t_send + t_recv`: the host's sends are the bottleneck, and each
//! packet's transmit and receive overlap the next send. With FM's measured
//! costs and a 1,536-byte packet to 6 destinations that is 333.7294 us
//! (`fm-closed-p2p`). Here the real engine does the sending, receiving and
//! acknowledging under the `fm-lanai43` profile, and the figure must come
//! out to the picosecond.
//!
//! By one multi-send the host writes the packet once and the NIC sends the
//! copies back to back: the k-th destination has it after `t_send + (k-1)
//! x t_xmit + t_recv` = 153.2089 us (`fm-closed-multisend`), a factor of
//! 2.18. With write-combining (profile `fm-lanai43-wc`, the text's 90 MB/s
//! estimate) the host send is cheaper and the figures become 123.2569 vs
//! 154.0174 us (1.25). For the multi-send half to come out exact, each
//! copy must pay the NIC's per-byte transmit (`tx_us_per_byte`) as a
//! unicast packet does, though its payload is read from the host only
//! once. That needs the cost model to charge `tx_us_per_byte` on the
//! payload bytes of every datagram sent (a `Work::payload_out` count)
//! rather than on the bytes read from host memory; until then a copy pays
//! only the fixed part and the figure is 148.5691 us (-3.0 %), see
//! docs/multicast.md.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{Endpoint, RecvMatch};
use outboard_host::HostError;

use super::common::{first_port, multi_send_once};
use super::{ExperimentError, FirstError, Outcome, Params, Shared, XAxis};
use crate::profile::Profile;
use crate::sim::{RunReport, Simulation};
use crate::time::Time;

/// The simulation both halves run in: node 0 sends, nodes 1..=k receive.
fn setup(profile: &Profile, k: u32, seed: u64) -> Result<(Simulation, FirstError), ExperimentError> {
    if k == 0 {
        return Err(ExperimentError::Param("closed-form needs at least one destination (2 nodes)".into()));
    }
    Ok((Simulation::with_config(profile, k + 1, seed, |c| c.max_ports = 1)?, FirstError::default()))
}

/// Spawns the k receivers, runs the simulation and returns when the last
/// destination's host had the message, in microseconds, and the report.
fn finish(mut sim: Simulation, k: u32, size: u32, err: FirstError) -> Result<(f64, RunReport), ExperimentError> {
    let done: Shared<Vec<Time>> = Rc::new(RefCell::new(Vec::new()));
    for d in 1..=k {
        let (done, err) = (done.clone(), err.clone());
        sim.spawn(d, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let buf = port.buffer(size)?;
                let req = port.start_recv(RecvMatch::tag(1), buf)?;
                p.wait(&mut port, req).await?;
                done.borrow_mut().push(p.now());
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    let report = sim.run()?;
    err.check()?;
    let last = done.borrow().iter().copied().max().unwrap_or(Time::ZERO);
    Ok((last.as_us(), report))
}

/// Sends one `size`-byte message from node 0 to nodes 1..=k by k host
/// sends; returns when the last destination's host has it, in
/// microseconds, and the run's report.
pub fn point_to_point(profile: &Profile, k: u32, size: u32, seed: u64) -> Result<(f64, RunReport), ExperimentError> {
    let (mut sim, err) = setup(profile, k, seed)?;
    {
        let err = err.clone();
        sim.spawn(0, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let buf = port.buffer_from(&vec![0xab; size as usize])?;
                let mut reqs = Vec::new();
                for d in 1..=k {
                    reqs.push(port.start_send(first_port(d), 1, buf)?);
                }
                for r in p.wait_all(&mut port, &reqs).await {
                    r?;
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    finish(sim, k, size, err)
}

/// Sends one `size`-byte message from node 0 to nodes 1..=k with one
/// multi-send (the host hands the payload over once, the NIC sends a
/// copy to each destination); returns when the last destination's host has
/// it, in microseconds, and the run's report.
pub fn multi_send(profile: &Profile, k: u32, size: u32, seed: u64) -> Result<(f64, RunReport), ExperimentError> {
    let (mut sim, err) = setup(profile, k, seed)?;
    {
        let err = err.clone();
        sim.spawn(0, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let dests: Vec<Endpoint> = (1..=k).map(first_port).collect();
                multi_send_once(&p, &mut port, &dests, 1, &vec![0xab; size as usize]).await
            }
            .await;
            err.record(r);
        });
    }
    finish(sim, k, size, err)
}

/// The write-combining variant the text pairs with `profile`, if any
/// (fm-lanai43 -> fm-lanai43-wc).
fn write_combining_twin(profile: &Profile) -> Option<Profile> {
    (profile.name == "fm-lanai43").then(|| Profile::builtin("fm-lanai43-wc"))
}

/// Paper ids of (host sends, multi-send, factor) for a profile at the
/// dissertation's point.
fn ids(profile: &str) -> Option<[&'static [&'static str]; 3]> {
    match profile {
        "fm-lanai43" => {
            Some([&["fm-closed-p2p"], &["fm-closed-multisend"], &["fm-closed-p2p", "/", "fm-closed-multisend"]])
        }
        "fm-lanai43-wc" => Some([
            &["fm-closed-p2p-wc"],
            &["fm-closed-multisend-wc"],
            &["fm-closed-p2p-wc", "/", "fm-closed-multisend-wc"],
        ]),
        _ => None,
    }
}

pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![1536] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![7] } else { p.nodes.clone() };
    let mut profiles = Vec::new();
    for prof in &p.profiles {
        profiles.push(prof.clone());
        if let Some(wc) = write_combining_twin(prof) {
            if !p.profiles.iter().any(|q| q.name == wc.name) {
                profiles.push(wc);
            }
        }
    }
    let total = profiles.len() * sizes.len() * nodes.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &profiles {
        for &n in &nodes {
            for &size in &sizes {
                let k = n.saturating_sub(1);
                let (host, _) = point_to_point(prof, k, size, p.seed)?;
                let (multi, _) = multi_send(prof, k, size, p.seed)?;
                let paper = if n == 7 && size == 1536 { ids(&prof.name) } else { None };
                let mut rs = super::coll::side_by_side(
                    &prof.name,
                    n,
                    size,
                    "latency",
                    "us",
                    host,
                    multi,
                    paper.map_or([None, None, None], |[a, b, c]| [Some(a), Some(b), Some(c)]),
                );
                rs[0].metric = "host sends";
                rs[1].metric = "multi-send";
                rows.extend(rs);
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "Closed form (dissertation 2.1): one packet to nodes-1 destinations, host sends vs one multi-send"
            .into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "host sends: k x t_send + t_recv; multi-send: t_send + (k-1) x t_xmit + t_recv (the text's model)".into(),
            "fm-lanai43-wc (write-combining, the text's 90 MB/s estimate) runs beside fm-lanai43".into(),
        ],
    })
}
