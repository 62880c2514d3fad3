//! NIC pipeline latency (`[nic.pipeline]`): time a message spends in the NIC
//! without holding up its processor, so that back-to-back messages overlap
//! in it.

use outboard_host::{BarrierAlgorithm, Mode};
use outboard_sim::experiments::{barrier, dissemination};
use outboard_sim::Profile;

/// gm-lanai43 with all of its pipeline cycles charged as processor time
/// instead (the same per-message totals, nothing overlaps).
fn all_busy(p: &Profile) -> Profile {
    let mut q = p.clone();
    let pl = q.nic.pipeline;
    q.nic.command_cycles += pl.command;
    q.nic.tx_packet_cycles += pl.tx;
    q.nic.rx_packet_cycles += pl.rx;
    q.nic.event_cycles += pl.event;
    q.nic.pipeline = Default::default();
    q
}

#[test]
fn pipeline_latency_overlaps_a_fan_out_but_not_a_lone_message() {
    let p = Profile::builtin("gm-lanai43");
    assert!(p.nic.pipeline.tx > 0.0 && p.nic.pipeline.rx > 0.0, "the GM profiles set a pipeline");
    let q = all_busy(&p);
    // One message at a time per NIC: about the same time either way (the
    // acknowledgements overlap a little).
    let (a, _) = dissemination::exchange(&p, 2, 0, 5, 1).unwrap();
    let (b, _) = dissemination::exchange(&q, 2, 0, 5, 1).unwrap();
    assert!((a - b).abs() / b < 0.01, "lone exchange {a} us with a pipeline, {b} us without");
    // A host-based gather-and-broadcast fans out and in on the root's NIC:
    // with part of each message's time in the pipeline, the NIC no longer
    // paces it.
    let gb = BarrierAlgorithm::GatherBroadcast { degree: 15 };
    let a = barrier::latency(&p, 16, Mode::HostBased, gb, 5, 1).unwrap();
    let b = barrier::latency(&q, 16, Mode::HostBased, gb, 5, 1).unwrap();
    assert!(a < b - 20.0, "host GB degree 15: {a} us with a pipeline, {b} us all busy");
}

#[test]
fn the_pipeline_is_optional_and_checked() {
    // Absent: zero, so profiles without it keep their figures.
    assert_eq!(Profile::builtin("gm-lanai91").nic.pipeline, Default::default());
    let text = |rx: f64| {
        include_str!("../../../profiles/gm-lanai91.toml").replace("[wire]", &format!("[nic.pipeline]\nrx = {rx}\n\n[wire]"))
    };
    assert_eq!(Profile::from_toml("x", &text(30.0)).unwrap().nic.pipeline.rx, 30.0);
    let err = Profile::from_toml("x", &text(-1.0)).unwrap_err().to_string();
    assert!(err.contains("nic.pipeline.rx"), "{err}");
}
