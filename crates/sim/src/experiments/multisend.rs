//! Multi-send against repeated host sends, by message size and destination
//! count (dissertation 2.5, Figure 2.5, on FM / LANai 4.3; the GM-2 slides'
//! "Multi-send Primitive" figure on LANai 9.1).
//!
//! The dissertation's test: in each iteration the root sends the message
//! to every destination, then the last destination sends a zero-byte
//! message back; the figure is the mean time per iteration. Host-based,
//! the root posts one send per destination (the host hands the payload to
//! the NIC once per copy); with multi-send it starts one multi-send
//! (`Port::start_multi_send`: the payload crosses once, the NIC sends the
//! copies). One untimed iteration first sets up the connections. The
//! paper's factors are host / multi-send.
//!
//! Where the host writes send data itself (`pio_send`, FM), a message goes
//! out a packet at a time, as FM's `FM_send_piece` writes it: each
//! packet-sized piece is its own send (or multi-send), so the NIC sends
//! packet i while the host writes packet i+1, and each packet pays FM's
//! per-packet host cost. A DMA-based library (GM) hands the whole message
//! over at once and its NIC cuts it into packets.

use std::cell::RefCell;
use std::rc::Rc;

use std::collections::VecDeque;

use outboard_engine::{CommandError, Endpoint, HostBuf, RecvMatch};
use outboard_host::{HostError, MultiSend, Port, Request};

use super::common::first_port;
use super::coll::side_by_side;
use super::{ExperimentError, FirstError, Outcome, Params, Row, Shared, XAxis};
use crate::process::{Proc, SimIo};
use crate::profile::Profile;
use crate::sim::Simulation;
use crate::time::Time;

/// How the root reaches its destinations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// One host send per destination.
    HostSends,
    /// One engine multi-send.
    MultiSend,
}

const DATA_TAG: u64 = 1;
const REPLY_TAG: u64 = 2;

/// What one point measured, in microseconds (means over the timed
/// iterations).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Time per iteration: sending to every destination and getting the
    /// last one's zero-byte reply (the dissertation's test, 2.5).
    pub iteration: f64,
    /// From the root's start until the last destination's host has the
    /// whole message (the latency of 2.1's timing diagram).
    pub last_arrival: f64,
}

/// Sends `size` bytes from node 0 to nodes 1..=k, `iters` times after one
/// untimed round, each round ending with a zero-byte reply from node k.
pub fn iteration(
    profile: &Profile,
    k: u32,
    size: u32,
    method: Method,
    iters: u32,
    seed: u64,
) -> Result<Timing, ExperimentError> {
    if k == 0 {
        return Err(ExperimentError::Param("multi-send needs at least one destination (2 nodes)".into()));
    }
    let iters = iters.max(1);
    let profile_pieces = piece_len(profile);
    let mut sim = Simulation::with_config(profile, k + 1, seed, |c| c.max_ports = 1)?;
    let span: Shared<f64> = Rc::new(RefCell::new(0.0));
    // Per round: when the root started it, and when each destination had
    // all of it (rounds from 0, the untimed one included).
    let starts: Shared<Vec<Time>> = Rc::new(RefCell::new(Vec::new()));
    let arrivals: Shared<Vec<Time>> = Rc::new(RefCell::new(vec![Time::ZERO; iters as usize + 1]));
    let err = FirstError::default();
    {
        let (err, span, starts) = (err.clone(), span.clone(), starts.clone());
        sim.spawn(0, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let dests: Vec<Endpoint> = (1..=k).map(first_port).collect();
                let pieces = split(profile_pieces, size);
                let mut t0 = p.now();
                for it in 0..=iters {
                    if it == 1 {
                        t0 = p.now();
                    }
                    starts.borrow_mut().push(p.now());
                    send_all(&p, &mut port, &dests, &pieces, method).await?;
                    p.recv(&mut port, RecvMatch::tag(REPLY_TAG), 0).await?;
                }
                *span.borrow_mut() = p.now().since(t0).as_us() / f64::from(iters);
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    for d in 1..=k {
        let (err, arrivals) = (err.clone(), arrivals.clone());
        sim.spawn(d, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let pieces = split(profile_pieces, size);
                for it in 0..=iters as usize {
                    for &len in &pieces {
                        p.recv(&mut port, RecvMatch::tag(DATA_TAG), len).await?;
                    }
                    record_arrival(&arrivals, it, p.now());
                    if d == k {
                        p.send(&mut port, first_port(0), REPLY_TAG, &[]).await?;
                    }
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    sim.run()?;
    err.check()?;
    let (starts, arrivals) = (starts.borrow(), arrivals.borrow());
    let last = (1..=iters as usize).map(|i| arrivals[i].since(starts[i]).as_us()).sum::<f64>() / f64::from(iters);
    let v = *span.borrow();
    Ok(Timing { iteration: v, last_arrival: last })
}

/// Keeps the latest arrival of round `it`.
fn record_arrival(arrivals: &Shared<Vec<Time>>, it: usize, now: Time) {
    let mut a = arrivals.borrow_mut();
    a[it] = a[it].max(now);
}

/// The piece a host hands its NIC per send: one packet's payload where
/// the host writes the data itself (FM), the whole message otherwise.
pub fn piece_len(profile: &Profile) -> Option<u32> {
    profile.host_nic.pio_send.then_some(profile.nic.max_payload)
}

/// `size` cut into pieces of at most `piece` bytes (one piece for an
/// empty message or no limit).
pub fn split(piece: Option<u32>, size: u32) -> Vec<u32> {
    match piece {
        Some(p) if size > p => {
            let mut v = vec![p; (size / p) as usize];
            if size % p > 0 {
                v.push(size % p);
            }
            v
        }
        _ => vec![size],
    }
}

/// Sends every piece to every destination, host-based (destination by
/// destination, each its pieces in order) or by one multi-send per piece,
/// and waits until all are sent. When the port runs out of send tokens
/// the oldest outstanding send is waited for first, as FM blocks for
/// credits.
async fn send_all(
    p: &Proc,
    port: &mut Port<SimIo>,
    dests: &[Endpoint],
    pieces: &[u32],
    method: Method,
) -> Result<(), HostError> {
    let mut outstanding: VecDeque<Pending> = VecDeque::new();
    let jobs: Vec<(Option<Endpoint>, u32)> = match method {
        Method::HostSends => dests.iter().flat_map(|&d| pieces.iter().map(move |&l| (Some(d), l))).collect(),
        Method::MultiSend => pieces.iter().map(|&l| (None, l)).collect(),
    };
    for (dest, len) in jobs {
        let data = vec![0x5a; len as usize];
        loop {
            let posted = match dest {
                Some(d) => {
                    let buf = port.buffer_from(&data)?;
                    match port.start_send(d, DATA_TAG, buf) {
                        Ok(r) => Ok(Pending::Send(r, buf)),
                        Err(e) => {
                            port.free(buf)?;
                            Err(e)
                        }
                    }
                }
                None => port.start_multi_send(dests, DATA_TAG, &data).map(Pending::Multi),
            };
            match posted {
                Ok(x) => {
                    outstanding.push_back(x);
                    break;
                }
                Err(HostError::Command(CommandError::NoSendToken)) if !outstanding.is_empty() => {
                    let oldest = outstanding.pop_front().expect("not empty");
                    finish(p, port, oldest).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    while let Some(x) = outstanding.pop_front() {
        finish(p, port, x).await?;
    }
    Ok(())
}

/// A send (with its buffer) or multi-send posted and not yet waited for.
enum Pending {
    Send(Request, HostBuf),
    Multi(MultiSend),
}

/// Waits for `x` and frees its buffers.
async fn finish(p: &Proc, port: &mut Port<SimIo>, x: Pending) -> Result<(), HostError> {
    match x {
        Pending::Send(r, buf) => {
            p.wait(port, r).await?;
            port.free(buf)
        }
        Pending::Multi(ms) => p.wait_multi_send(port, ms).await,
    }
}

/// Paper id of the factor at a point, where the paper quotes one, and
/// whether it is the last-arrival factor (else the iteration time's). The
/// dissertation states its test (iteration with a reply, 2.5); the GM-2
/// slides do not, and show the primitive's "latency", which is compared
/// with the last-arrival latency of 2.1's definition.
fn factor_id(profile: &str, nodes: u32, size: u32) -> Option<(&'static [&'static str], bool)> {
    match (profile, nodes, size) {
        ("fm-lanai43", 16, 16384) => Some((&["multisend-foi"], false)),
        ("gm2-lanai91", 5, 128) => Some((&["gm2-multisend-foi"], true)),
        _ => None,
    }
}

pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![0, 16, 32, 128, 512, 1024, 1536, 4096, 16384] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![2, 5, 8, 16] } else { p.nodes.clone() };
    let total = p.profiles.len() * sizes.len() * nodes.len();
    let mut rows: Vec<Row> = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        for &n in &nodes {
            for &size in &sizes {
                let k = n.saturating_sub(1);
                let host = iteration(prof, k, size, Method::HostSends, p.iters, p.seed)?;
                let multi = iteration(prof, k, size, Method::MultiSend, p.iters, p.seed)?;
                let (it_id, last_id) = match factor_id(&prof.name, n, size) {
                    Some((ids, true)) => (None, Some(ids)),
                    Some((ids, false)) => (Some(ids), None),
                    None => (None, None),
                };
                let mut rs = side_by_side(
                    &prof.name,
                    n,
                    size,
                    "latency",
                    "us",
                    host.iteration,
                    multi.iteration,
                    [None, None, it_id],
                );
                rs[0].metric = "host sends";
                rs[1].metric = "multi-send";
                rows.extend(rs);
                let mut rs = side_by_side(
                    &prof.name,
                    n,
                    size,
                    "latency",
                    "us",
                    host.last_arrival,
                    multi.last_arrival,
                    [None, None, last_id],
                );
                rs[0].metric = "host last";
                rs[1].metric = "multi last";
                rs[2].metric = "factor last";
                rows.extend(rs);
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title:
            "Multi-send vs repeated host sends: root to nodes-1 destinations, zero-byte reply from the last (2.5, 003)"
                .into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "host sends / multi-send / factor: time per iteration (send to all + zero-byte reply from the last), the dissertation's test".into(),
            "host last / multi last / factor last: until the last destination has the message (2.1's latency)".into(),
            "mean of --iters rounds after one untimed round".into(),
        ],
    })
}
