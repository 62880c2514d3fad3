//! `outboard sim bcast-bypass` (dissertation 6.3): the shape of the
//! experiment on a small machine - under high skew the application-bypass
//! member spends far less time in the call than MPICH's, its handlers run
//! only for it, and a seed gives the same figures.

use outboard_sim::experiments::bypass::{times, Variant};
use outboard_sim::experiments::{self, Params};
use outboard_sim::Profile;

const N: u32 = 8;
const ITERS: u32 = 20;

fn profile() -> Profile {
    Profile::builtin("gm-lanai91-ab").at_mpi_level()
}

#[test]
fn under_high_skew_bypass_beats_mpich_and_only_bypass_takes_interrupts() {
    let p = profile();
    for size in [1, 4096] {
        let n = times(&p, N, size, Variant::NonBypass, 1000.0, ITERS, 7).unwrap();
        let ab = times(&p, N, size, Variant::Bypass, 1000.0, ITERS, 7).unwrap();
        let nic = times(&p, N, size, Variant::Offloaded, 1000.0, ITERS, 7).unwrap();
        // A late inner member holds up its subtree in MPICH's broadcast; the
        // handler forwards while it computes.
        assert!(n.in_call > 3.0 * ab.in_call, "{size} B: n {:.1} us, ab {:.1} us", n.in_call, ab.in_call);
        assert!(n.in_call > 3.0 * nic.in_call, "{size} B: n {:.1} us, nic {:.1} us", n.in_call, nic.in_call);
        // Interrupts: only the bypass broadcast's marked messages raise
        // them, at most one per inner non-root member per broadcast.
        assert_eq!((n.interrupts, nic.interrupts), (0.0, 0.0));
        assert!(ab.interrupts > 0.0 && ab.interrupts <= f64::from(N / 2 - 1), "{size} B: {} per bcast", ab.interrupts);
        assert_eq!(n.with_handler, n.in_call);
        // The handler's time is charged: at least the delivery per interrupt,
        // spread over the members.
        let delivery = 3.0 * ab.interrupts / f64::from(N);
        assert!(ab.with_handler - ab.in_call >= delivery, "{size} B: handler {:.2} us", ab.with_handler - ab.in_call);
    }
}

#[test]
fn without_skew_no_member_is_interrupted_much() {
    // Every member is inside its call (interrupts off) or about to be when
    // its value comes: the handler runs rarely.
    let ab = times(&profile(), N, 1, Variant::Bypass, 0.0, ITERS, 7).unwrap();
    assert!(ab.interrupts < 1.0, "{} interrupts per broadcast", ab.interrupts);
}

#[test]
fn the_experiment_prints_every_variant_and_is_deterministic_for_a_seed() {
    let params = Params { profiles: vec![Profile::builtin("gm-lanai91-ab")], nodes: vec![N], sizes: vec![1], seed: 3, iters: 5 };
    let a = experiments::run("bcast-bypass", &params, &mut |_, _| {}).unwrap();
    for metric in ["n bcast", "ab bcast", "nic bcast", "ab total", "ab handler", "foi bcast", "foi total", "n min at"] {
        assert!(a.rows.iter().any(|r| r.metric == metric), "no {metric} row");
    }
    let b = experiments::run("bcast-bypass", &params, &mut |_, _| {}).unwrap();
    assert_eq!(a.rows, b.rows);
    let other = experiments::run("bcast-bypass", &Params { seed: 4, ..params }, &mut |_, _| {}).unwrap();
    assert_ne!(a.rows, other.rows, "the seed draws the delays");
}
