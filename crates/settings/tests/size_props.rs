//! The size parser on arbitrary input: it never panics, and every size it
//! writes reads back as itself.

use outboard_settings::kinds::{human_size, Size};
use outboard_settings::{parse_size, Kind};
use proptest::prelude::*;

proptest! {
    #[test]
    fn never_panics(s in any::<String>()) {
        let _ = parse_size(&s);
        let _ = Size { max: u64::MAX }.parse(&s);
    }

    #[test]
    fn never_panics_on_near_misses(s in "[0-9 ]{0,25}[kKmMgGiIbB ]{0,4}") {
        if let Some(n) = parse_size(&s) {
            prop_assert_eq!(parse_size(&n.to_string()), Some(n));
        }
    }

    #[test]
    fn canonical_and_human_forms_round_trip(n in any::<u64>()) {
        let k = Size { max: u64::MAX };
        prop_assert_eq!(k.parse(&k.canonical(&n)), Ok(n));
        prop_assert_eq!(parse_size(&human_size(n)), Some(n));
    }

    #[test]
    fn suffixes_multiply(n in 0u64..(1 << 33), suffix in prop::sample::select(vec![("K", 10), ("kib", 10), ("M", 20), ("MiB", 20), ("g", 30), ("GiB", 30)])) {
        let (s, shift) = suffix;
        prop_assert_eq!(parse_size(&format!("{n}{s}")), n.checked_mul(1 << shift));
        prop_assert_eq!(parse_size(&format!("{n} {s}")), n.checked_mul(1 << shift));
    }
}

proptest! {
    /// Every setting, given any text: no panic, and a value it accepts
    /// reads back as itself from its canonical text (what C code gets from
    /// `outboard_setting`).
    #[test]
    fn every_setting_reads_its_canonical_text_back(text in any::<String>()) {
        for s in outboard_settings::ALL {
            if let Ok(r) = s.resolve(&[(s.name(), text.as_str())]) {
                if let Some(v) = r.value {
                    prop_assert_eq!(s.reread(&v), Some(v.clone()), "{}", s.name());
                }
            }
        }
        let _ = outboard_settings::check_all(&[(text.as_str(), "1")]);
    }
}
