//! `include/outboard.h` is what cbindgen makes of this crate today: the
//! checked-in header cannot drift from the Rust declarations.

use std::path::Path;

#[test]
fn the_checked_in_header_matches_the_crate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut fresh = Vec::new();
    cbindgen::Builder::new().with_crate(dir).with_config(config).generate().expect("cbindgen").write(&mut fresh);
    let path = dir.join("include/outboard.h");
    if outboard_settings::registry::BLESS.get(&outboard_settings::ProcessEnv).unwrap_or_else(|e| panic!("{e}")) {
        std::fs::write(&path, &fresh).expect("write the header");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "{} is stale: run OUTBOARD_BLESS=1 cargo test -p outboard-capi --test header and commit it",
        path.display()
    );
    let text = String::from_utf8(fresh).unwrap();
    for f in ["outboard_init", "outboard_init_exchange", "outboard_allreduce_start", "outboard_rdma_read", "outboard_strerror", "outboard_setting", "outboard_settings_check"] {
        assert!(text.contains(&format!("{f}(")), "{f} missing from the header");
    }
}
