//! `outboard sim` as a user meets it: its help lists every experiment and
//! profile without issue numbers, each experiment runs on its paper's
//! profiles by default, and a profile from a file is its own series.

use std::process::Command;

use outboard_sim::experiments::NAMES;
use outboard_sim::profile::builtin_names;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

fn sim(args: &[&str]) -> String {
    let out = Command::new(OUTBOARD).arg("sim").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "outboard sim {args:?}:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// The series of a result table: the first word of each row.
fn series(table: &str) -> Vec<String> {
    let mut s: Vec<String> = table
        .lines()
        .skip_while(|l| !l.starts_with("series "))
        .skip(1)
        .take_while(|l| !l.starts_with("note:") && !l.starts_with("seed "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    s.dedup();
    s
}

#[test]
fn the_help_lists_every_experiment_and_profile_and_no_issue_numbers() {
    let help = sim(&["--help"]);
    for name in NAMES {
        assert!(help.lines().any(|l| l.trim_start().starts_with(&format!("{name} "))), "{name} missing:\n{help}");
    }
    for p in builtin_names() {
        assert!(help.contains(p), "{p} missing:\n{help}");
    }
    assert!(!help.to_lowercase().contains("issue"), "{help}");
}

#[test]
fn a_paper_experiment_runs_on_its_papers_profile_by_default() {
    let out = sim(&["qsnet-barrier", "--nodes", "2", "--iters", "1"]);
    assert!(!series(&out).is_empty() && series(&out).iter().all(|s| s == "elan3"), "{out}");
    let out = sim(&["bcast-bypass", "--nodes", "4", "--sizes", "1", "--iters", "1"]);
    assert!(!series(&out).is_empty() && series(&out).iter().all(|s| s.starts_with("gm-lanai91-ab")), "{out}");
}

#[test]
fn a_profile_from_a_file_is_a_series_of_its_own() {
    let dir = std::env::temp_dir().join(format!("outboard-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("my-nic.toml");
    std::fs::write(&copy, include_str!("../../../profiles/dpu400.toml")).unwrap();
    let out = sim(&["pingpong", "--profile", &format!("dpu400,{}", copy.display()), "--sizes", "8", "--iters", "1"]);
    let mut s = series(&out);
    s.sort();
    s.dedup();
    assert_eq!(s, ["dpu400", "my-nic"], "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The benchmarks share one vocabulary: `-n/--np` for ranks, sizes
/// comma-separated.
#[test]
fn bench_nicvm_spells_its_options_as_the_other_benchmarks() {
    let out = Command::new(OUTBOARD).args(["bench", "nicvm", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("-n, --np <RANKS>"), "{help}");
    assert!(help.contains("[default: 32,1024,4096]"), "{help}");
}
