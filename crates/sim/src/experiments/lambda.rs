//! Where each broadcast tree wins (dissertation 2.3): the postal model's
//! lambda for a message, derived from a profile's costs, and the simulated
//! latency of the binomial, k-ary and postal trees over a sweep of message
//! sizes (lambda falls as messages grow and per-byte costs take over).
//!
//! Lambda follows 2.3's definition from the sender's point of view
//! ([`lambda`]), computed per size from the profile and given to the
//! postal tree ([`outboard_host::Lambda::Given`]).

use outboard_host::{BcastMode, Lambda, TreeShape};

use super::multicast::{latency, mode_name, shape_name, MPICH_BINOMIAL};
use super::{ExperimentError, Outcome, Params, Row, XAxis};
use crate::profile::Profile;

/// Lambda for one copy of `len` bytes sent by `mode`'s sender under
/// profile `p`: the one-way time until the receiver can send it on, over
/// the sender's busy time per copy (2.3's ratio).
///
/// Host-based, the sender's busy time per copy is the slower of its host
/// (the send call) and its NIC (command, DMA, transmit): on GM the NIC is
/// the bottleneck, on FM the host's programmed-I/O write. NIC-assisted, it
/// is the NIC's transmit of one copy (its processor's share or the link,
/// whichever is slower), and the receiver can send on once its host took
/// the packet and handed it back with a multi-send.
pub fn lambda(p: &Profile, mode: BcastMode, len: u32) -> f64 {
    let m = f64::from(len);
    let cyc = |c: f64| c / p.nic.clock_mhz;
    let wire = 2.0 * p.wire.cable_latency_us + p.wire.switch_latency_us;
    let host_send = p.host.send_us + p.host.send_us_per_byte * m;
    let bus_read = if p.host_nic.pio_send { 0.0 } else { p.host_nic.dma_setup_us + p.host_nic.dma_us_per_byte * m };
    let xmit = cyc(p.nic.tx_packet_cycles) + p.nic.tx_us_per_byte.max(p.wire.link_us_per_byte) * m;
    let rx = wire
        + cyc(p.nic.rx_packet_cycles)
        + p.nic.rx_us_per_byte * m
        + p.host_nic.dma_setup_us
        + p.host_nic.dma_us_per_byte * m
        + cyc(p.nic.event_cycles)
        + p.host.recv_us
        + p.host.recv_us_per_byte * m;
    let hand_over = host_send + p.host_nic.doorbell_us + cyc(p.nic.command_cycles) + bus_read;
    let (busy, one_way) = match mode {
        BcastMode::HostBased => {
            let nic = cyc(p.nic.command_cycles) + bus_read + xmit;
            (host_send.max(nic), hand_over + xmit + rx)
        }
        _ => (xmit, xmit + rx + hand_over),
    };
    if busy > 0.0 {
        (one_way / busy).max(1.0)
    } else {
        1.0
    }
}

/// The trees compared: binomial (the library's order and MPICH's), k-ary
/// for k = 2, 4, 8, and the postal tree for `lambda`.
fn shapes(lambda: f64) -> Vec<TreeShape> {
    vec![
        TreeShape::Binomial,
        MPICH_BINOMIAL,
        TreeShape::Kary(2),
        TreeShape::Kary(4),
        TreeShape::Kary(8),
        TreeShape::Postal(Lambda::Given(lambda)),
    ]
}

/// `outboard sim lambda-sweep`: per profile, node count and size, lambda
/// and the latency of each tree, host-based and NIC-assisted (pipelined).
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![8, 128, 1024, 4096, 16384, 65536] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![16, 64] } else { p.nodes.clone() };
    let modes = [BcastMode::HostBased, BcastMode::nic_assisted()];
    let total = p.profiles.len() * sizes.len() * nodes.len() * modes.len();
    let (mut rows, mut notes, mut done) = (Vec::new(), Vec::new(), 0);
    for prof in &p.profiles {
        for mode in modes {
            let series = format!("{} {}", prof.name, mode_name(mode));
            for &n in &nodes {
                for &size in &sizes {
                    // Pipelined NIC-assisted broadcast forwards packet-sized
                    // pieces: lambda of one piece.
                    let unit = match mode {
                        BcastMode::HostBased => size,
                        _ => size.min(prof.nic.max_payload),
                    };
                    let lambda = lambda(prof, mode, unit);
                    rows.push(Row::new(series.clone(), n, size, "lambda", lambda, ""));
                    let mut best: Option<(f64, String)> = None;
                    let mut line = Vec::new();
                    for shape in shapes(lambda) {
                        let us = latency(prof, n, size, mode, shape, p.iters, p.seed)?;
                        let name = shape_name(shape);
                        line.push(format!("{name} {us:.1}"));
                        rows.push(Row::new(series.clone(), n, size, tree_metric(shape), us, "us"));
                        if best.as_ref().is_none_or(|(b, _)| us < *b) {
                            best = Some((us, name));
                        }
                    }
                    let (b, name) = best.expect("at least one tree");
                    notes.push(format!(
                        "{series}, {n} nodes, {size} B, lambda {lambda:.2}: {name} wins ({b:.1} us); {}",
                        line.join(", ")
                    ));
                    done += 1;
                    progress(done, total);
                }
            }
        }
    }
    Ok(Outcome {
        title: "Lambda sweep: binomial, k-ary and postal (profile lambda) broadcast trees by message size".into(),
        x: XAxis::Size,
        rows,
        notes,
    })
}

/// The metric name of a tree's latency row.
fn tree_metric(s: TreeShape) -> &'static str {
    match s {
        TreeShape::Binomial => "binomial",
        TreeShape::Kary(2) => "2-ary",
        TreeShape::Kary(4) => "4-ary",
        TreeShape::Kary(8) => "8-ary",
        TreeShape::Kary(_) => "k-ary",
        TreeShape::Chain => "chain",
        TreeShape::Postal(Lambda::Given(1.0)) => "binomial-mpich",
        TreeShape::Postal(_) => "postal",
    }
}
