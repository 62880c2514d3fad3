//! The registry as a whole: names, defaults, the check of an environment,
//! unknown names, and the configuration page's table (docs/configuration.md).

use std::collections::BTreeSet;

use outboard_settings::{
    check, check_all, markdown_table, resolve, SettingError, Source, ALL, PREFIX,
};

#[test]
fn names_are_unique_and_prefixed_and_every_default_resolves() {
    let mut seen = BTreeSet::new();
    for s in ALL {
        assert!(s.name().starts_with(PREFIX), "{}", s.name());
        assert!(seen.insert(s.name()), "{} twice", s.name());
        assert!(
            !s.doc().is_empty() && s.doc().ends_with('.'),
            "{}: one sentence of documentation",
            s.name()
        );
        let r = s
            .resolve(&[])
            .unwrap_or_else(|e| panic!("{}: {e}", s.name()));
        assert_eq!(r.source, Source::Default);
    }
}

#[test]
fn the_check_reports_bad_values_then_unknown_names() {
    assert_eq!(
        check(&[
            ("OUTBOARD_MPI_MAX_BYTES", "1M"),
            ("OUTBOARD_UDP_GSO", "off"),
            ("PATH", "/bin")
        ]),
        Ok(())
    );
    let env = [
        ("OUTBOARD_PEER_TIMEOUT", "500"),
        ("OUTBOARD_STATS", "loud"),
        ("OUTBOARD_MPI_MAXBYTES", "1M"),
    ];
    let all = check_all(&env);
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(
        all[0].name(),
        "OUTBOARD_STATS",
        "registered variables first"
    );
    assert_eq!(
        all[1].to_string(),
        "OUTBOARD_MPI_MAXBYTES is not a setting Outboard knows (did you mean OUTBOARD_MPI_MAX_BYTES?): `outboard config` lists them all"
    );
    assert_eq!(
        all[2],
        SettingError::Unknown {
            name: "OUTBOARD_PEER_TIMEOUT".into(),
            suggestion: Some("OUTBOARD_PEER_TIMEOUT_MS")
        }
    );
    assert_eq!(check(&env).unwrap_err().name(), "OUTBOARD_STATS");
    // A blank unknown variable is as good as unset.
    assert_eq!(check(&[("OUTBOARD_NOTHING", "")]), Ok(()));
}

#[test]
fn resolve_gives_canonical_values_and_their_source() {
    let env = [("OUTBOARD_UDP_GSO", "no"), ("OUTBOARD_MPI", "host-based")];
    let r = resolve("OUTBOARD_UDP_GSO", &env).unwrap();
    assert_eq!(
        (r.value.as_deref(), r.human.as_deref(), r.source),
        (Some("0"), Some("off"), Source::Environment)
    );
    assert_eq!(
        resolve("OUTBOARD_MPI_REDUCE", &env)
            .unwrap()
            .value
            .as_deref(),
        Some("host")
    );
    assert_eq!(
        resolve("OUTBOARD_MPI_MAX_BYTES", &env)
            .unwrap()
            .value
            .as_deref(),
        Some("1048576")
    );
    assert_eq!(
        resolve("OUTBOARD_PROGRESS", &env).unwrap().value,
        None,
        "decided at run time"
    );
    assert_eq!(
        resolve("OUTBOARD_EAGER_MAX", &[("OUTBOARD_EAGER_MAX", "off")])
            .unwrap()
            .value
            .as_deref(),
        Some("off")
    );
    assert!(matches!(
        resolve("OUTBOARD_NOPE", &env),
        Err(SettingError::Unknown { .. })
    ));
}

/// The configuration page's table of variables is the registry's:
/// regenerate it with `outboard config --markdown` when this fails.
#[test]
fn the_configuration_page_lists_every_variable_as_registered() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md"))
        .expect("docs/configuration.md");
    let table = markdown_table();
    assert!(
        page.contains(&table),
        "docs/configuration.md's settings tables differ from the registry (regenerate them with `outboard config --markdown`); they should read:\n\n{table}"
    );
}
