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

#[test]
fn multi_send_hook_says_it_is_not_there_yet() {
    let fm = Profile::builtin("fm-lanai43");
    let err = closed_form::multi_send(&fm, 6, 1536, 1).unwrap_err().to_string();
    assert!(err.contains("multi-send"), "{err}");
}
