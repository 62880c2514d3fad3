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
//! Multi-send (`t_send + (k-1) x t_xmit + t_recv` = 153.2089 us,
//! `fm-closed-multisend`) needs the engine's multi-send command, which the
//! multicast issue adds. [`multi_send`] is the hook: it reports that it is
//! not available until then, and says what to write.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{Endpoint, NodeId, PortId, RecvMatch};
use outboard_host::HostError;

use super::{FirstError, ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::profile::Profile;
use crate::sim::{RunReport, Simulation};
use crate::time::Time;

/// The endpoint of port 0 on `node` after its first open.
pub(crate) fn first_port(node: u32) -> Endpoint {
    Endpoint { node: NodeId(node), port: PortId(0), gen: 1 }
}

/// Sends one `size`-byte message from node 0 to nodes 1..=k by k host
/// sends; returns when the last destination's host has it, in
/// microseconds, and the run's report.
pub fn point_to_point(profile: &Profile, k: u32, size: u32, seed: u64) -> Result<(f64, RunReport), ExperimentError> {
    if k == 0 {
        return Err(ExperimentError::Param("closed-form needs at least one destination (2 nodes)".into()));
    }
    let mut sim = Simulation::with_config(profile, k + 1, seed, |c| c.max_ports = 1)?;
    let done: Shared<Vec<Time>> = Rc::new(RefCell::new(Vec::new()));
    let err = FirstError::default();
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

/// Multi-send: the hook for the multicast issue. Once the engine has a
/// multi-send command (and the host library a `start_multi_send`), this
/// runs the same scenario with one multi-send from node 0 and the test
/// `closed_form_multi_send_matches_the_dissertation` (to be added with it)
/// asserts 153.2089 us (`fm-closed-multisend`).
pub fn multi_send(_profile: &Profile, _k: u32, _size: u32, _seed: u64) -> Result<(f64, RunReport), ExperimentError> {
    Err(ExperimentError::NotYet("multi-send", "the engine has no multi-send command until the multicast issue (5)"))
}

pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![1536] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![7] } else { p.nodes.clone() };
    let total = p.profiles.len() * sizes.len() * nodes.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        for &n in &nodes {
            for &size in &sizes {
                let (us, _) = point_to_point(prof, n.saturating_sub(1), size, p.seed)?;
                let mut row = Row {
                    series: format!("{} host-p2p", prof.name),
                    nodes: n,
                    size,
                    metric: "latency",
                    value: us,
                    unit: "us",
                    paper_id: None,
                    paper: None,
                };
                if prof.name == "fm-lanai43" && n == 7 && size == 1536 {
                    row = row.with_paper(&["fm-closed-p2p"]);
                }
                rows.push(row);
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "Closed form (dissertation 2.1): one packet to nodes-1 destinations by host sends".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "multi-send (fm-closed-multisend, 153.2089 us) waits for the engine's multi-send command (issue 5)".into(),
        ],
    })
}
