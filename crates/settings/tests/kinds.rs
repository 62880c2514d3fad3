//! One test per kind of setting: a good value reads as what it means, a
//! bad one fails with a sentence naming the variable, the value and what
//! is accepted.

use std::time::Duration;

use outboard_settings::{registry as r, resolve, SettingError, Source};

fn message(e: SettingError) -> String {
    e.to_string()
}

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(
        r::MPI_MAX_BYTES
            .get(&[("OUTBOARD_MPI_MAX_BYTES", "1M")])
            .unwrap(),
        1_048_576
    );
    assert_eq!(
        r::MPI_MAX_BYTES
            .get(&[("OUTBOARD_MPI_MAX_BYTES", "64KiB")])
            .unwrap(),
        65_536
    );
    assert_eq!(r::MPI_MAX_BYTES.get(&[]).unwrap(), 1 << 20, "default 1M");
    let e = message(
        r::MPI_MAX_BYTES
            .get(&[("OUTBOARD_MPI_MAX_BYTES", "1Q")])
            .unwrap_err(),
    );
    assert_eq!(
        e,
        "OUTBOARD_MPI_MAX_BYTES=\"1Q\" is not a size: use a number of bytes with an optional K, M or G suffix (e.g. 65536, 64K, 1M)"
    );
    // What atoll read as 1, 0 and "everything passes through" is refused.
    for bad in ["abc", "-1", "1MB"] {
        let e = message(
            r::MPI_MAX_BYTES
                .get(&[("OUTBOARD_MPI_MAX_BYTES", bad)])
                .unwrap_err(),
        );
        assert!(
            e.starts_with(&format!("OUTBOARD_MPI_MAX_BYTES={bad:?} is not a size")),
            "{e}"
        );
    }
    // `off` only where the variable allows it.
    assert_eq!(
        r::EAGER_MAX.get(&[("OUTBOARD_EAGER_MAX", "off")]).unwrap(),
        None
    );
    assert_eq!(r::EAGER_MAX.get(&[]).unwrap(), Some(65_536));
    let e = message(
        r::EAGER_MAX
            .get(&[("OUTBOARD_EAGER_MAX", "4G")])
            .unwrap_err(),
    );
    assert!(
        e.starts_with("OUTBOARD_EAGER_MAX=\"4G\" is larger than 4294967295 bytes: use"),
        "{e}"
    );
    assert!(e.ends_with(", or off"), "{e}");
}

#[test]
fn per_collective_thresholds_follow_the_general_one() {
    let env = [
        ("OUTBOARD_MPI_MAX_BYTES", "2M"),
        ("OUTBOARD_MPI_REDUCE_MAX_BYTES", "4K"),
    ];
    assert_eq!(r::MPI_BCAST_MAX_BYTES.get(&env).unwrap(), 2 << 20);
    assert_eq!(r::MPI_REDUCE_MAX_BYTES.get(&env).unwrap(), 4096);
    assert_eq!(r::MPI_ALLREDUCE_MAX_BYTES.get(&[]).unwrap(), 1 << 20);
    let got = resolve("OUTBOARD_MPI_BCAST_MAX_BYTES", &env).unwrap();
    assert_eq!(
        (got.value.as_deref(), got.source),
        (Some("2097152"), Source::Default)
    );
    // A bad general value is reported by the variables that follow it.
    let e = message(
        r::MPI_ALLREDUCE_MAX_BYTES
            .get(&[("OUTBOARD_MPI_MAX_BYTES", "x")])
            .unwrap_err(),
    );
    assert!(e.starts_with("OUTBOARD_MPI_MAX_BYTES=\"x\""), "{e}");
}

#[test]
fn booleans_in_every_spelling() {
    assert!(
        !r::UDP_GSO.get(&[("OUTBOARD_UDP_GSO", "0")]).unwrap(),
        "0 means off"
    );
    assert!(!r::UDP_GSO.get(&[("OUTBOARD_UDP_GSO", "OFF")]).unwrap());
    assert!(r::UDP_GSO.get(&[("OUTBOARD_UDP_GSO", "yes")]).unwrap());
    assert!(r::UDP_GSO.get(&[]).unwrap(), "on by default");
    assert!(r::MPI_VERBOSE
        .get(&[("OUTBOARD_MPI_VERBOSE", "true")])
        .unwrap());
    let e = message(
        r::UDP_GSO
            .get(&[("OUTBOARD_UDP_GSO", "maybe")])
            .unwrap_err(),
    );
    assert_eq!(
        e,
        "OUTBOARD_UDP_GSO=\"maybe\" is not a boolean: use 1, on, true or yes to turn it on, 0, off, false or no to turn it off"
    );
}

#[test]
fn enums_by_name() {
    assert_eq!(
        r::STATS.get(&[("OUTBOARD_STATS", "yes")]).unwrap(),
        "stderr",
        "yes is no longer ignored"
    );
    assert_eq!(
        r::STATS.get(&[("OUTBOARD_STATS", "stderr")]).unwrap(),
        "stderr"
    );
    assert_eq!(r::STATS.get(&[]).unwrap(), "off");
    assert_eq!(
        r::MPI.get(&[("OUTBOARD_MPI", "host-based")]).unwrap(),
        "host"
    );
    assert_eq!(
        r::MPI_BCAST.get(&[("OUTBOARD_MPI", "off")]).unwrap(),
        "off",
        "follows OUTBOARD_MPI"
    );
    assert_eq!(
        r::MPI_BCAST
            .get(&[("OUTBOARD_MPI", "off"), ("OUTBOARD_MPI_BCAST", "host")])
            .unwrap(),
        "host"
    );
    assert_eq!(r::RNDV.get(&[("OUTBOARD_RNDV", "put")]).unwrap(), "write");
    let e = message(
        r::PROGRESS
            .get(&[("OUTBOARD_PROGRESS", "fast")])
            .unwrap_err(),
    );
    assert_eq!(e, "OUTBOARD_PROGRESS=\"fast\" is not an accepted name: use dedicated, host-assisted or spin-then-block");
    let e = message(r::MPI.get(&[("OUTBOARD_MPI", "nic")]).unwrap_err());
    assert!(e.contains("use offload, host or off"), "{e}");
}

#[test]
fn durations_with_units() {
    assert_eq!(
        r::PEER_TIMEOUT
            .get(&[("OUTBOARD_PEER_TIMEOUT_MS", "500")])
            .unwrap(),
        Duration::from_millis(500),
        "bare: ms"
    );
    assert_eq!(
        r::PEER_TIMEOUT
            .get(&[("OUTBOARD_PEER_TIMEOUT_MS", "3s")])
            .unwrap(),
        Duration::from_secs(3)
    );
    assert_eq!(r::PEER_TIMEOUT.get(&[]).unwrap(), Duration::from_secs(2));
    let e = message(
        r::PEER_TIMEOUT
            .get(&[("OUTBOARD_PEER_TIMEOUT_MS", "0")])
            .unwrap_err(),
    );
    assert_eq!(
        e,
        "OUTBOARD_PEER_TIMEOUT_MS=\"0\" is shorter than 1ms: use a duration with a unit ns, us, ms or s (e.g. 500ms, 2s), or a bare number of milliseconds, at least 1ms"
    );
    let e = message(
        r::BOOTSTRAP_TIMEOUT
            .get(&[("OUTBOARD_BOOTSTRAP_TIMEOUT_MS", "1 minute")])
            .unwrap_err(),
    );
    assert!(
        e.starts_with("OUTBOARD_BOOTSTRAP_TIMEOUT_MS=\"1 minute\" is not a duration: use"),
        "{e}"
    );
    assert_eq!(
        resolve("OUTBOARD_PEER_TIMEOUT_MS", &[])
            .unwrap()
            .value
            .as_deref(),
        Some("2000000000"),
        "nanoseconds"
    );
}

#[test]
fn integers_in_range() {
    assert_eq!(r::SIZE.get(&[("OUTBOARD_SIZE", "4")]).unwrap(), Some(4));
    assert_eq!(r::SIZE.get(&[]).unwrap(), None);
    let e = message(r::SIZE.get(&[("OUTBOARD_SIZE", "0")]).unwrap_err());
    assert_eq!(
        e,
        "OUTBOARD_SIZE=\"0\" is below 1: use a whole number from 1 to 4294967295"
    );
    let e = message(
        r::BCAST_COUNT
            .get(&[("OUTBOARD_BCAST_COUNT", "lots")])
            .unwrap_err(),
    );
    assert_eq!(e, "OUTBOARD_BCAST_COUNT=\"lots\" is not a whole number: use a whole number from 1 to 4294967295");
}

#[test]
fn shaped_text() {
    assert_eq!(
        r::JOB_KEY.get(&[("OUTBOARD_JOB_KEY", "0x5eed")]).unwrap(),
        Some(0x5eed)
    );
    assert!(r::ADDR
        .get(&[("OUTBOARD_ADDR", "localhost")])
        .unwrap_err()
        .to_string()
        .contains("is not an IP address"));
    let e = message(
        r::RENDEZVOUS
            .get(&[("OUTBOARD_RENDEZVOUS", "node0")])
            .unwrap_err(),
    );
    assert!(
        e.starts_with("OUTBOARD_RENDEZVOUS=\"node0\" is not a host:port address: use"),
        "{e}"
    );
    // A secret is never repeated, even when malformed.
    let e = message(
        r::JOB_SECRET
            .get(&[("OUTBOARD_JOB_SECRET", "hunter2")])
            .unwrap_err(),
    );
    assert!(!e.contains("hunter2"), "{e}");
    assert!(e.starts_with("OUTBOARD_JOB_SECRET (its value not shown: it is a secret) is not a job secret: use exactly 32"), "{e}");
}

#[test]
fn blank_is_unset() {
    assert!(r::UDP_GSO.get(&[("OUTBOARD_UDP_GSO", "  ")]).unwrap());
    assert_eq!(
        r::MPI_MAX_BYTES
            .get(&[("OUTBOARD_MPI_MAX_BYTES", "")])
            .unwrap(),
        1 << 20
    );
}
