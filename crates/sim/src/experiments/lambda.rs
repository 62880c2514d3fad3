//! Where each broadcast tree wins (dissertation 2.3): the postal model's
//! lambda for a message, derived from a profile's costs, and the simulated
//! latency of the binomial, k-ary and postal trees over a sweep of message
//! sizes (lambda falls as messages grow and per-byte costs take over).
//!
//! Lambda follows 2.3's definition from the sender's point of view
//! ([`lambda`]): the host library's postal model with the profile's costs
//! (NIC pipeline included), computed per size and given to the postal
//! tree ([`outboard_host::Lambda::Given`]).

use outboard_host::{BcastMode, Lambda, TreeShape};

use super::multicast::{latency, mode_name, shape_name, MPICH_BINOMIAL};
use super::{ExperimentError, Outcome, Params, Row, XAxis};
use crate::profile::Profile;

/// Lambda for one copy of `len` bytes sent by `mode`'s sender under
/// profile `p` (2.3's ratio): the host library's postal model
/// ([`outboard_host::LinkCosts`]) with the profile's costs
/// ([`Profile::link_costs`], which says what goes where).
pub fn lambda(p: &Profile, mode: BcastMode, len: u32) -> f64 {
    p.link_costs(mode).lambda(len)
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
