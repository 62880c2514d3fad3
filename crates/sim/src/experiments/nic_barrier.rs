//! The NIC collective protocol's barrier (issue 20 part 4) beside the
//! point-to-point NIC barrier and the host-based one, with an analytical
//! model: `outboard sim barrier` with profiles that price the protocol's
//! packets (`[coll_proto]`: `elan3`, `gm2-lanaixp`). The rows at 8 and
//! 1,024 nodes are compared with seed 004's abstract (a): its measured
//! 8-node barriers and factors, and its analytical model at 1,024 nodes.
//!
//! All three run the dissemination barrier (ceil(log2 N) rounds, any N):
//! host-based over point-to-point messages; offloaded with every
//! notification sequenced and acknowledged on the engines' connections
//! (the default); offloaded on the collective protocol
//! (`BarrierProtocol::NicCollective`: no sequence numbers, no
//! acknowledgements, collective-level recovery). On `elan3` the QsNet
//! model's elan_gsync (Elanlib's tree gather with a hardware-broadcast
//! release, `crate::qsnet`) is printed beside them.
//!
//! The model is the protocol barrier's critical path from the profile's
//! costs: the host's start (its send cost, the doorbell, the NIC's command
//! and the command pipeline), then per round one notification - the
//! sender's protocol-packet price or the link's serialisation, whichever
//! is longer, the send pipeline, two cables and the switches between the
//! round's partners, the receive pipeline, the receiver's protocol-packet
//! price - and the completion (the NIC's event, its DMA, the host taking
//! it). It leaves out queueing: at 1,024 nodes every node sends and
//! receives one packet per round, so the figure it misses by is the
//! simulator's contention and the engine's timers.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_host::{BarrierAlgorithm, BarrierProtocol, Mode};

use super::barrier::latency;
use super::coll::run_all;
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::cost::CostModel;
use crate::profile::{FaultRates, Profile};
use crate::qsnet::{self, elanlib::Algo};
use crate::wire::Wire;

/// The barrier every row runs.
const ALGO: BarrierAlgorithm = BarrierAlgorithm::Dissemination;

/// Bytes of a protocol packet on the wire (header and body).
const PACKET_BYTES: u64 = (outboard_wire::HEADER_LEN + outboard_wire::NIC_COLL_LEN) as u64;

/// Mean latency (us) of `iters` consecutive protocol barriers (after one
/// that installs the group and its schedule).
pub fn protocol_latency(profile: &Profile, n: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let spans: Shared<Vec<f64>> = Rc::new(RefCell::new(Vec::new()));
    run_all(profile, n, seed, |p, _rank, mut port, mut g| {
        let spans = spans.clone();
        async move {
            g.set_barrier_protocol(BarrierProtocol::NicCollective);
            super::coll::barrier(&p, &mut port, &mut g, Mode::Offloaded, ALGO).await?;
            let t0 = p.now();
            for _ in 0..iters {
                super::coll::barrier(&p, &mut port, &mut g, Mode::Offloaded, ALGO).await?;
            }
            spans.borrow_mut().push(p.now().since(t0).as_us());
            Ok(())
        }
    })?;
    let s = spans.borrow();
    Ok(s.iter().sum::<f64>() / s.len() as f64 / f64::from(iters))
}

/// The model's parts for `n` nodes: (fixed start + completion, rounds,
/// time of each round), in us.
pub fn model(profile: &Profile, n: u32) -> (f64, u32, Vec<f64>) {
    let c = CostModel::new(profile);
    let fixed = c.host_send + c.doorbell + c.nic_command + c.nic_command_lat + c.nic_event + c.nic_event_lat + c.host_event;
    let wire = Wire::new(n, profile.wire.switch_radix, FaultRates::default());
    let ser = c.link_byte.for_bytes(PACKET_BYTES);
    let send = if c.nic_proto_tx.0 > ser.0 { c.nic_proto_tx } else { ser };
    let mut rounds = Vec::new();
    let mut d = 1;
    while d < n {
        let hops = crate::time::Dur(c.switch_hop.0 * u64::from(wire.hops(0, d)));
        let t = send + c.nic_tx_lat + c.cable + hops + c.cable + c.nic_rx_lat + c.nic_proto_rx;
        rounds.push(t.as_us());
        d *= 2;
    }
    (fixed.as_us(), rounds.len() as u32, rounds)
}

/// The abstract's figure for the protocol barrier's latency on `profile`
/// at `n` nodes: measured at 8, its analytical model's at 1,024.
fn latency_id(profile: &str, n: u32) -> Option<&'static str> {
    match (profile, n) {
        ("elan3", 8) => Some("proto-elan3-barrier-8"),
        ("elan3", 1024) => Some("proto-elan3-model-1024"),
        ("gm2-lanaixp", 8) => Some("proto-lanaixp-barrier-8"),
        ("gm2-lanaixp", 1024) => Some("proto-lanaixp-model-1024"),
        _ => None,
    }
}

fn paper_row(r: Row, id: Option<&str>) -> Row {
    match id {
        Some(id) => r.with_paper(&[id]),
        None => r,
    }
}

/// elan_gsync's mean over `iters` barriers (the first left out), us.
fn gsync(profile: &Profile, n: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let r = qsnet::run(profile, &qsnet::Setup::new(n, Algo::GSync, iters.max(1) + 1, seed));
    if !r.completed || r.times_us.len() < 2 {
        return Err(ExperimentError::Param(format!("elan_gsync on {n} nodes did not complete")));
    }
    let t = &r.times_us[1..];
    Ok(t.iter().sum::<f64>() / t.len() as f64)
}

/// `outboard sim barrier` when a profile prices the collective protocol.
pub(super) fn run(p: &Params, nodes: &[u32], progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let total = p.profiles.len() * nodes.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        for &n in nodes {
            let s = &prof.name;
            let host = latency(prof, n, Mode::HostBased, ALGO, p.iters, p.seed)?;
            let p2p = latency(prof, n, Mode::Offloaded, ALGO, p.iters, p.seed)?;
            let proto = protocol_latency(prof, n, p.iters, p.seed)?;
            let (fixed, levels, per) = model(prof, n);
            let predicted = fixed + per.iter().sum::<f64>();
            rows.push(Row::new(format!("{s} host"), n, 0, "latency", host, "us"));
            rows.push(Row::new(format!("{s} nic p2p"), n, 0, "latency", p2p, "us"));
            rows.push(paper_row(Row::new(format!("{s} nic proto"), n, 0, "latency", proto, "us"), latency_id(s, n)));
            rows.push(Row::new(format!("{s} nic proto"), n, 0, "model", predicted, "us"));
            rows.push(Row::new(format!("{s} nic proto"), n, 0, "sim/model", proto / predicted, "x"));
            rows.push(Row::new(format!("{s} model"), n, 0, "levels", f64::from(levels), "-"));
            rows.push(Row::new(format!("{s} model"), n, 0, "per level", per.iter().sum::<f64>() / f64::from(levels.max(1)), "us"));
            let lanaixp_factor = (s == "gm2-lanaixp" && n == 8).then_some("proto-lanaixp-factor-8");
            rows.push(paper_row(Row::new(format!("{s} factor"), n, 0, "host/proto", host / proto, "x"), lanaixp_factor));
            rows.push(Row::new(format!("{s} factor"), n, 0, "p2p/proto", p2p / proto, "x"));
            if prof.name == "elan3" {
                let g = gsync(prof, n, p.iters, p.seed)?;
                rows.push(Row::new(format!("{s} elan_gsync"), n, 0, "latency", g, "us"));
                let elan3_factor = (n == 8).then_some("proto-elan3-factor-8");
                rows.push(paper_row(Row::new(format!("{s} factor"), n, 0, "gsync/proto", g / proto, "x"), elan3_factor));
            }
            done += 1;
            progress(done, total);
        }
    }
    Ok(Outcome {
        title: "Dissemination barrier: host-based, NIC over point-to-point connections, NIC collective protocol (seed 004 a: the collective-protocol abstract)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "host = host-based; nic p2p = offloaded, notifications sequenced and acknowledged per hop; nic proto = offloaded on the collective protocol (no sequencing, no acks, NACK on timeout)".into(),
            "model = start (host send, doorbell, NIC command and its pipeline) + levels x per level (max(protocol tx, link serialisation) + tx pipeline + 2 cables + switches + rx pipeline + protocol rx) + completion (NIC event, its DMA, host event); levels = ceil(log2 N); no queueing".into(),
            "elan_gsync (elan3 only) is the QsNet model's Elanlib tree barrier with hardware-broadcast release (crate::qsnet, data/qsnet-elan3.toml)".into(),
            "compared (seed 004 a): the protocol barrier and its factor (over elan_gsync on elan3, over the host-based barrier on gm2-lanaixp) at 8 nodes; at 1,024 nodes the simulated protocol barrier against the abstract's analytical model; nothing in either profile was fitted on them".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use outboard_engine::Work;

    #[test]
    fn the_model_tracks_the_simulated_protocol_barrier() {
        for name in ["elan3", "gm2-lanaixp"] {
            let prof = Profile::builtin(name);
            for n in [2, 5, 16] {
                let sim = protocol_latency(&prof, n, 5, 1).unwrap();
                let (fixed, levels, per) = model(&prof, n);
                assert_eq!(levels, 32 - (n - 1).leading_zeros());
                let predicted = fixed + per.iter().sum::<f64>();
                let ratio = sim / predicted;
                assert!((0.97..1.10).contains(&ratio), "{name} {n} nodes: sim {sim} us, model {predicted} us");
            }
        }
    }

    #[test]
    fn protocol_packets_are_charged_their_own_price_once() {
        let prof = Profile::builtin("gm2-lanaixp");
        let c = CostModel::new(&prof);
        let plain = c.nic_work(&Work { packets_out: 3, packets_in: 2, ..Work::default() });
        let proto = c.nic_work(&Work { packets_out: 3, packets_in: 2, nic_coll_out: 2, nic_coll_in: 1, ..Work::default() });
        let expected = c.nic_tx_packet.0 + 2 * c.nic_proto_tx.0 + c.nic_rx_packet.0 + c.nic_proto_rx.0;
        assert_eq!(proto.0, expected);
        assert!(proto.0 < plain.0);
        // A profile without [coll_proto] charges them as plain packets.
        let gm = CostModel::new(&Profile::builtin("gm2-lanai91"));
        let w = Work { packets_out: 1, nic_coll_out: 1, ..Work::default() };
        assert_eq!(gm.nic_work(&w), gm.nic_work(&Work { packets_out: 1, ..Work::default() }));
    }

    #[test]
    fn on_gm2_lanaixp_the_protocol_beats_the_point_to_point_barrier() {
        let prof = Profile::builtin("gm2-lanaixp");
        let p2p = latency(&prof, 8, Mode::Offloaded, ALGO, 5, 1).unwrap();
        let proto = protocol_latency(&prof, 8, 5, 1).unwrap();
        assert!(proto < p2p, "protocol {proto} us, point-to-point {p2p} us");
    }
}
