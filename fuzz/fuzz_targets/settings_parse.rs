//! Arbitrary text through every setting's parser and the check of a whole
//! environment: never a panic, and every value accepted reaches C code
//! exactly (its canonical text reads back as itself).
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_settings::{check_all, parse_size, resolve, ALL};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(n) = parse_size(&text) {
        assert_eq!(parse_size(&n.to_string()), Some(n));
    }
    for s in ALL {
        if let Ok(r) = s.resolve(&[(s.name(), text.as_ref())]) {
            if let Some(v) = r.value {
                assert_eq!(s.reread(&v).as_deref(), Some(v.as_str()), "{}", s.name());
            }
        }
    }
    // The text as a variable's name: unknown names, suggestions.
    let _ = check_all(&[(text.as_ref(), "1")]);
    let _ = resolve(&text, &[]);
});
