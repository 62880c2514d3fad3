//! `outboard bench skew` end to end: four processes under `outboard run`,
//! skewed broadcasts and reduces in every column - application bypass
//! with signal and with progress-thread delivery among them - every
//! result checked by the benchmark itself (it fails on a wrong value),
//! and the engines' interrupt counters as the ranks report them.

use std::process::Command;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// (marked messages delivered, interrupts raised, suppressed) from a
/// rank's `# rank R: ...` line.
fn counters(text: &str, rank: u32) -> (u64, u64, u64) {
    let line = text.lines().find(|l| l.starts_with(&format!("# rank {rank}:"))).unwrap_or_else(|| panic!("no line for rank {rank}:\n{text}"));
    let nums: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    // nums[0] is the rank.
    (nums[1], nums[2], nums[3])
}

#[test]
fn bench_skew_checks_every_result_and_interrupts_only_inner_members() {
    let out = Command::new(OUTBOARD)
        .args(["bench", "skew", "-n", "4", "--iters", "150", "--skews", "0,300", "--no-mpi", "--timeout", "240"])
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{so}{}", String::from_utf8_lossy(&out.stderr));
    for op in ["bcast", "reduce"] {
        for skew in ["0 us", "300 us"] {
            let row = so.lines().find(|l| l.starts_with(op) && l.contains(skew)).unwrap_or_else(|| panic!("no {op} row at {skew}:\n{so}"));
            // The skew and the four Outboard columns (Open MPI left out).
            assert!(row.split_whitespace().filter(|w| w.parse::<f64>().is_ok()).count() >= 5, "{row}");
        }
    }
    assert!(so.contains("# one interrupt"), "{so}");
    // Root 0, binomial tree over 4: rank 2 is the only inner member other
    // than the root, so only it receives marked messages.
    let (marked, raised, suppressed) = counters(&so, 2);
    assert!(marked > 0 && raised + suppressed <= marked, "{so}");
    assert!(raised > 0, "with 300 us of skew rank 2 was sometimes away when its value came:\n{so}");
    for leaf in [0, 1, 3] {
        assert_eq!(counters(&so, leaf), (0, 0, 0), "rank {leaf} is never sent a marked message");
    }
}

#[test]
fn bench_skew_refuses_sizes_bypass_cannot_carry() {
    let out = Command::new(OUTBOARD).args(["bench", "skew", "--size", "20000"]).output().unwrap();
    assert!(!out.status.success());
    let out = Command::new(OUTBOARD).args(["bench", "skew", "--size", "12", "--no-mpi"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of 8"));
}
