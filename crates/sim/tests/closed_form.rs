//! The dissertation's closed-form example, through the real engine.

use outboard_sim::experiments::closed_form;
use outboard_sim::{paper, Profile};

#[test]
fn closed_form_point_to_point_is_exact_to_four_decimals() {
    let fm = Profile::builtin("fm-lanai43");
    let (us, report) = closed_form::point_to_point(&fm, 6, 1536, 1).unwrap();
    let expected = paper::value("fm-closed-p2p").unwrap();
    assert_eq!(expected, 333.7294);
    assert_eq!(format!("{us:.4}"), "333.7294", "simulated {us} us");
    // Six data packets went out, and the receivers acknowledged them.
    assert!(report.wire.sent >= 12, "{report:?}");
}

#[test]
fn closed_form_scales_as_k_sends_plus_one_receive() {
    // k x t_send + t_recv holds for every k: t_send = 49.0199 us, t_recv =
    // 39.61 us for 1,536 bytes (dissertation 2.1).
    let fm = Profile::builtin("fm-lanai43");
    for k in [1u32, 2, 3, 10] {
        let (us, _) = closed_form::point_to_point(&fm, k, 1536, 7).unwrap();
        let want = f64::from(k) * 49.0199 + 39.61;
        assert!((us - want).abs() < 5e-7, "k={k}: {us} vs {want}");
    }
}

/// The multi-send half (dissertation 2.1): t_send + (k-1) x t_xmit +
/// t_recv = 49.0199 + 5 x 12.9158 + 39.61 = 153.2089 us, a factor of 2.18.
/// Each multi-send copy pays the NIC's per-byte transmit like a unicast
/// packet: the cost model charges `tx_us_per_byte` on the payload bytes of
/// every datagram sent (`Work::payload_out`), not on the bytes read from
/// host memory.
#[test]
fn closed_form_multi_send_is_exact_to_four_decimals() {
    let fm = Profile::builtin("fm-lanai43");
    let (us, _) = closed_form::multi_send(&fm, 6, 1536, 1).unwrap();
    assert_eq!(format!("{us:.4}"), format!("{:.4}", paper::value("fm-closed-multisend").unwrap()), "simulated {us} us");
    let wc = Profile::builtin("fm-lanai43-wc");
    let (us, _) = closed_form::multi_send(&wc, 6, 1536, 1).unwrap();
    assert_eq!(
        format!("{us:.4}"),
        format!("{:.4}", paper::value("fm-closed-multisend-wc").unwrap()),
        "simulated {us} us"
    );
}

#[test]
fn write_combining_point_to_point_is_exact_to_four_decimals() {
    // t_send = 2.7863 + 0.0106 x 1536 = 19.0679 us: 6 x 19.0679 + 39.61.
    let wc = Profile::builtin("fm-lanai43-wc");
    let (us, _) = closed_form::point_to_point(&wc, 6, 1536, 1).unwrap();
    assert_eq!(paper::value("fm-closed-p2p-wc"), Some(154.0174));
    assert_eq!(format!("{us:.4}"), "154.0174", "simulated {us} us");
}

#[test]
fn multi_send_delivers_to_every_destination_and_beats_host_sends() {
    let fm = Profile::builtin("fm-lanai43");
    let (multi, report) = closed_form::multi_send(&fm, 6, 1536, 1).unwrap();
    let (p2p, _) = closed_form::point_to_point(&fm, 6, 1536, 1).unwrap();
    // One data packet per destination, each acknowledged.
    assert_eq!(report.wire.sent, 12, "{report:?}");
    assert!(multi < p2p / 2.0, "multi-send {multi} us vs host sends {p2p} us");
    // The host writes once, so the NIC's copies, not the host, set the pace:
    // each further destination adds at least the transmit's fixed part.
    let (two, _) = closed_form::multi_send(&fm, 2, 1536, 1).unwrap();
    let (one, _) = closed_form::multi_send(&fm, 1, 1536, 1).unwrap();
    assert!(two - one >= 1.3958 - 1e-6, "{one} -> {two}");
}
