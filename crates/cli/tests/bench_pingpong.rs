//! `outboard bench pingpong` with the second rank in another process,
//! across two network namespaces, and as a job of node engines: the runs
//! complete, print a row for every size, and count the engine's copies
//! (exactly one per received byte) or, for node engines, the datagrams.

mod common;

use std::process::Command;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// Runs the bench with `extra` arguments; returns its standard output.
fn pingpong(extra: &[&str]) -> String {
    let out = Command::new(OUTBOARD)
        .args(["bench", "pingpong", "--compare", "raw-udp", "--max-size", "8192", "--rounds", "1", "--scale", "0.05"])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Checks the two tables: every size, engine and raw figures, and the
/// copies column (the receiver writes each payload byte once; the sender
/// reads each at least once, more when it retransmits).
fn check_tables(out: &str) {
    let rows: Vec<Vec<&str>> =
        out.lines().filter(|l| !l.starts_with('#')).map(|l| l.split_whitespace().collect()).collect();
    let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(sizes, ["1", "8", "64", "512", "4K", "8K", "64", "512", "4K", "8K"], "{out}");
    for r in &rows {
        assert_eq!(r.len(), 5, "size, engine, raw, ratio, copies: {r:?}");
        for v in &r[1..3] {
            let x: f64 = v.parse().unwrap();
            assert!(x.is_finite() && x > 0.0, "{r:?}");
        }
        let ratio: f64 = r[3].parse().unwrap();
        assert!(ratio.is_finite() && ratio >= 0.0, "{r:?}");
        let (s, rc) = r[4].split_once('+').unwrap();
        let (s, rc): (f64, f64) = (s.parse().unwrap(), rc.parse().unwrap());
        assert_eq!(rc, 1.0, "one copy into the receive buffer per byte: {r:?}");
        assert!(s >= 1.0, "at least one copy out of the send buffer per byte: {r:?}");
    }
}

#[test]
fn pingpong_runs_with_the_second_rank_in_another_process() {
    let out = pingpong(&["--procs", "2"]);
    assert!(out.contains("2 ranks in 2 processes"), "{out}");
    check_tables(&out);
}

#[test]
fn pingpong_runs_across_two_network_namespaces_over_a_veth_pair() {
    let test = "pingpong_runs_across_two_network_namespaces_over_a_veth_pair";
    if !is_root() {
        common::skip(test, "needs root to create network namespaces");
        return;
    }
    // Can this machine make a namespace at all (a container may forbid it)?
    let probe = format!("outboard-probe-{}", std::process::id());
    match Command::new("ip").args(["netns", "add", &probe]).output() {
        Err(e) => {
            common::skip(test, &format!("`ip` (iproute2) not found: {e}; apt-get install -y iproute2"));
            return;
        }
        Ok(o) if !o.status.success() => {
            common::skip(test, &format!("cannot create a network namespace: {}", String::from_utf8_lossy(&o.stderr).trim()));
            return;
        }
        Ok(_) => {
            // And a veth pair inside it (the module may be missing).
            let veth = Command::new("ip").args(["-n", &probe, "link", "add", "obprobe0", "type", "veth", "peer", "name", "obprobe1"]).output();
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            match veth {
                Ok(o) if o.status.success() => {}
                Ok(o) => {
                    common::skip(test, &format!("cannot create a veth pair: {}", String::from_utf8_lossy(&o.stderr).trim()));
                    return;
                }
                Err(e) => {
                    common::skip(test, &format!("cannot run `ip`: {e}"));
                    return;
                }
            }
        }
    }
    let out = pingpong(&["--netns"]);
    assert!(out.contains("network namespaces") && out.contains("veth"), "{out}");
    check_tables(&out);
    // The namespaces (and with them the veth pair) are gone afterwards.
    let header = out.lines().next().unwrap();
    let names: Vec<&str> = header.split_whitespace().filter(|w| w.starts_with("outboard-")).collect();
    assert_eq!(names.len(), 2, "{header}");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for n in names {
        assert!(!list.contains(n), "namespace {n} left behind: {list}");
    }
}

#[test]
fn pingpong_runs_as_a_job_of_node_engines_and_one_node_sends_no_datagram() {
    let job = |ranks_per_node: &str| {
        let out = Command::new(OUTBOARD)
            .args(["bench", "pingpong", "--ranks-per-node", ranks_per_node, "--max-size", "8192", "--rounds", "1", "--scale", "0.05"])
            .env("OUTBOARD_STATS", "stderr")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<Vec<&str>> = stdout.lines().filter(|l| !l.starts_with('#')).map(|l| l.split_whitespace().collect()).collect();
        let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
        assert_eq!(sizes, ["1", "8", "64", "512", "4K", "8K", "64", "512", "4K", "8K"], "{stdout}");
        for r in &rows {
            // Size and figure only: a node engine's copies are not the ranks' to count.
            assert_eq!(r.len(), 2, "{r:?}");
            let x: f64 = r[1].parse().unwrap();
            assert!(x.is_finite() && x > 0.0, "{r:?}");
        }
        stdout
    };
    let one = job("2");
    assert!(one.contains("2 processes of one node"), "{one}");
    let engines: Vec<&str> = one.lines().filter(|l| l.contains("datagrams in")).collect();
    assert_eq!(engines.len(), 1, "one node engine: {one}");
    assert!(engines[0].contains(" 0 datagrams in, 0 out"), "ranks of one node exchange no datagram: {one}");
    let two = job("1");
    assert!(two.contains("on 2 nodes"), "{two}");
    let engines: Vec<&str> = two.lines().filter(|l| l.contains("datagrams in")).collect();
    assert_eq!(engines.len(), 2, "two node engines: {two}");
    assert!(engines.iter().all(|l| !l.contains(" 0 datagrams in")), "two nodes talk over the network: {two}");
}

fn is_root() -> bool {
    // The effective uid, the third field of /proc's Uid line.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}
