//! `outboard config`: every setting with its value and source, and a
//! non-zero exit with the setting's sentence when a value is bad.

use std::process::{Command, Output};

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// `outboard config ARGS` with only `env`'s `OUTBOARD_*` variables set.
fn config(args: &[&str], env: &[(&str, &str)]) -> (Output, String, String) {
    let mut c = Command::new(OUTBOARD);
    c.arg("config").args(args);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("OUTBOARD_")) {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    let o = c.output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    (o, so, se)
}

/// The words of `name`'s row.
fn row(out: &str, name: &str) -> Vec<String> {
    let line = out.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("no row for {name}:\n{out}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn lists_every_variable_with_its_value_and_source() {
    let (o, out, err) = config(&[], &[("OUTBOARD_MPI_MAX_BYTES", "1M"), ("OUTBOARD_UDP_GSO", "0")]);
    assert!(o.status.success(), "{err}");
    for s in outboard_settings::ALL {
        row(&out, s.name());
    }
    assert_eq!(row(&out, "OUTBOARD_MPI_MAX_BYTES")[1..4], ["1M", "environment", "size"]);
    assert_eq!(row(&out, "OUTBOARD_MPI_REDUCE_MAX_BYTES")[1..3], ["1M", "default"], "follows OUTBOARD_MPI_MAX_BYTES");
    assert_eq!(row(&out, "OUTBOARD_UDP_GSO")[1..4], ["off", "environment", "boolean"], "0 is off");
    assert_eq!(row(&out, "OUTBOARD_EAGER_MAX")[1..5], ["64K", "default", "size", "or"]);
    assert!(out.contains("PMPI library (liboutboard_mpi):"), "{out}");
}

#[test]
fn a_bad_value_is_explained_and_fails() {
    let (o, out, err) = config(&[], &[("OUTBOARD_PEER_TIMEOUT_MS", "0"), ("OUTBOARD_MPI_VERBOSE", "loud")]);
    assert!(!o.status.success());
    assert_eq!(row(&out, "OUTBOARD_PEER_TIMEOUT_MS")[1..4], ["\"0\"", "environment:", "invalid"]);
    assert!(err.contains("OUTBOARD_PEER_TIMEOUT_MS=\"0\" is shorter than 1ms: use a duration"), "{err}");
    assert!(err.contains("OUTBOARD_MPI_VERBOSE=\"loud\" is not a boolean"), "{err}");
    assert!(err.contains("2 of the OUTBOARD_* variables set are not valid"), "{err}");

    let (o, _, err) = config(&[], &[("OUTBOARD_PEER_TIMEOUT", "500")]);
    assert!(!o.status.success());
    assert!(err.contains("OUTBOARD_PEER_TIMEOUT is not a setting Outboard knows (did you mean OUTBOARD_PEER_TIMEOUT_MS?)"), "{err}");
}

#[test]
fn markdown_is_the_readmes_table() {
    let (o, out, _) = config(&["--markdown"], &[]);
    assert!(o.status.success());
    assert_eq!(out, outboard_settings::markdown_table());
    let (o, out, _) = config(&["OUTBOARD_RNDV"], &[("OUTBOARD_RNDV", "put")]);
    assert!(o.status.success());
    assert_eq!(row(&out, "OUTBOARD_RNDV")[1..3], ["write", "environment"]);
    assert_eq!(out.lines().filter(|l| l.starts_with("  OUTBOARD_")).count(), 1);
}
