//! The fault suite: `outboard chaos` runs jobs of real processes, one
//! network namespace per rank (veths on a bridge, Slurm variables and
//! `OUTBOARD_RENDEZVOUS`), under faults, and fails when a job hangs, a
//! result check fails, or a survivor's error does not name the killed
//! rank first, in words (`rank 2 gives up: rank 0 failed first; ...`, no
//! `NodeId(0)`). Small trial counts here; `outboard chaos --trials 100` runs
//! the same at scale.
//!
//! The rank programs are the runtime's examples (`ring`, `collectives`,
//! `rdma_write`, each checking its own results) and `outboard bench bcast`
//! workers in each broadcast mode. Needs root (namespaces) and nftables;
//! skipped, with the reason recorded, where either is missing.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

mod common;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// One chaos run at a time: each builds its own namespaces, but several
/// 4-rank jobs at once on a 2-core machine would test the scheduler.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Why this machine cannot run the suite, if it cannot.
fn unavailable() -> Option<String> {
    let probe = format!("obprobe{}", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !made {
        return Some("cannot create network namespaces here (needs root and `ip netns`, Debian iproute2)".into());
    }
    let _ = Command::new("ip").args(["netns", "del", &probe]).status();
    if !Command::new("nft").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some("nft not found (Debian package nftables)".into());
    }
    None
}

/// The runtime's example binaries, built for the profile `outboard` was
/// built with (a no-op when `cargo test --workspace` built them already).
fn examples() -> Result<PathBuf, String> {
    if let Some(d) = outboard_settings::registry::EXAMPLES_DIR.get(&outboard_settings::ProcessEnv).map_err(|e| e.to_string())? {
        return Ok(PathBuf::from(d));
    }
    let exe = PathBuf::from(OUTBOARD);
    let profile_dir = exe.parent().ok_or("outboard has no directory")?;
    let target = profile_dir.parent().ok_or("no target directory")?;
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "-p", "outboard-runtime", "--examples", "--target-dir"]).arg(target);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let out = c.output().map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo build --examples failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(profile_dir.join("examples"))
}

/// Runs `outboard chaos` with `args`, or says why it cannot run here.
fn chaos(test: &str, args: &[&str]) -> Option<(Output, String)> {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(why) = unavailable() {
        common::skip(test, &why);
        return None;
    }
    let dir = examples().unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(OUTBOARD).arg("chaos").args(args).arg("--examples-dir").arg(&dir).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    Some((out, text))
}

/// The number after `prefix` on the line that has it.
fn number_after(text: &str, prefix: &str) -> u32 {
    let at = text.find(prefix).unwrap_or_else(|| panic!("no {prefix:?} in:\n{text}"));
    text[at + prefix.len()..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
}

#[test]
fn every_workload_passes_its_checks_at_0_10_and_30_percent_loss_with_duplication() {
    let Some((out, text)) = chaos("every_workload_passes_its_checks_at_0_10_and_30_percent_loss_with_duplication", &[
        "--scenario", "loss", "--trials", "1", "--loss", "0,10,30", "--dup", "10", "--seed", "15",
    ]) else {
        return;
    };
    assert!(out.status.success(), "{text}");
    // 6 workloads x 3 loss rates, each ending with every rank's exit 0.
    assert_eq!(number_after(&text, "loss summary: "), 18, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("loss 1/1: ") && l.contains(": ok in ")).count(), 18, "{text}");
    for loss in [0, 10, 30] {
        let (mut dropped, mut duplicated) = (0, 0);
        for w in ["ring", "collectives", "rdma-write", "bcast-offloaded", "bcast-nic", "bcast-host"] {
            let want = format!("{loss}% loss, 10% dup, {w}: ok in ");
            let line = text.lines().find(|l| l.contains(&want)).unwrap_or_else(|| panic!("{w} at {loss}%:\n{text}"));
            dropped += number_after(line, "nftables dropped ");
            duplicated += number_after(line, "duplicated ");
        }
        // The faults were there: nftables counted what it did (summed
        // over the workloads: a short one may see no duplicate by chance).
        assert_eq!(dropped == 0, loss == 0, "{loss}% loss, {dropped} dropped:\n{text}");
        assert!(duplicated > 0, "{loss}% loss: nothing duplicated:\n{text}");
    }
}

/// Kill trials with `victim` (or random ranks): the command fails on a
/// hang or an error naming the wrong rank; here every kill must also
/// have landed on a running rank, so the trials test something.
fn kill_trials(test: &str, trials: u32, victim: Option<u32>, seed: &str) {
    let trials_s = trials.to_string();
    let mut args = vec!["--scenario", "kill", "--trials", &trials_s, "--seed", seed, "--peer-timeout-ms", "1000", "-v"];
    let v;
    if let Some(r) = victim {
        v = r.to_string();
        args.extend(["--victim", &v]);
    }
    let Some((out, text)) = chaos(test, &args) else { return };
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("kill summary: {trials} trials")), "{text}");
    assert!(number_after(&text, &format!("kill summary: {trials} trials (")) >= 1, "no kill landed mid-run:\n{text}");
    assert!(text.contains("; 0 hangs,"), "{text}");
    let lines = text.lines().filter(|l| l.strip_prefix("kill ").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))).count();
    assert_eq!(lines, trials as usize, "{text}");
    // The wording: a survivor that gave up leads with the killed rank, in
    // words (`rank 2 gives up: rank 0 failed first; ...`), never NodeId.
    assert!(!text.contains("named another rank first") && !text.contains("printed debug formatting"), "{text}");
    if let Some(k) = victim {
        let gave_up: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("rank ") && l.contains(" gives up: ")).collect();
        for l in &gave_up {
            assert!(l.contains(&format!(" gives up: rank {k} failed first; ")), "{l}\n{text}");
        }
    }
}

#[test]
fn survivors_of_a_killed_rank_0_exit_naming_it() {
    kill_trials("survivors_of_a_killed_rank_0_exit_naming_it", 2, Some(0), "21");
}

#[test]
fn survivors_of_a_killed_last_rank_exit_naming_it() {
    kill_trials("survivors_of_a_killed_last_rank_exit_naming_it", 2, Some(3), "22");
}

#[test]
fn survivors_of_a_random_rank_killed_at_a_random_moment_exit_naming_it() {
    kill_trials("survivors_of_a_random_rank_killed_at_a_random_moment_exit_naming_it", 2, None, "23");
}

#[test]
fn replayed_forged_truncated_and_flipped_datagrams_change_nothing() {
    let Some((out, text)) = chaos("replayed_forged_truncated_and_flipped_datagrams_change_nothing", &[
        "--scenario", "replay", "--trials", "2", "--workloads", "collectives,bcast-nic", "--forged", "200", "--seed", "31",
    ]) else {
        return;
    };
    assert!(out.status.success(), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("replay ") && l.contains(": ok: every result check passed")).count(), 2, "{text}");
    assert!(text.contains("replay summary: 2 trials, 0 failed"), "{text}");
}

#[test]
fn an_authentic_replay_of_an_older_incarnation_changes_nothing() {
    let Some((out, text)) = chaos("an_authentic_replay_of_an_older_incarnation_changes_nothing", &[
        "--scenario", "replay", "--same-secret", "--trials", "1", "--workloads", "collectives", "--forged", "100", "--seed", "32",
    ]) else {
        return;
    };
    assert!(out.status.success(), "{text}");
    assert!(text.contains("replay summary: 1 trials, 0 failed"), "{text}");
}
