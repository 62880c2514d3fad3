//! Collectives across real processes under `outboard run -n 4`: barrier,
//! reduce and allreduce, offloaded and host-based, every result checked by
//! the `collectives` example's code (included below), plus the
//! `outboard bench` collective commands end to end.
//!
//! As in `multiprocess.rs`, the rank program is this test binary itself:
//! `rank_program` does nothing in an ordinary run and plays the scenario
//! named by `OB_SCENARIO` when the launcher starts it.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

#[path = "../../runtime/examples/collectives.rs"]
#[allow(dead_code)]
mod collectives;

#[path = "../../runtime/examples/nicvm_allreduce.rs"]
#[allow(dead_code)]
mod nicvm_allreduce;

mod common;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// One job at a time: 4-rank jobs side by side on a 2-core machine would
/// test the scheduler, not Outboard.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
#[ignore = "a rank's entry point, not a test: the tests of this file start it in child processes with OB_SCENARIO set"]
fn rank_program() {
    let Ok(scenario) = std::env::var("OB_SCENARIO") else { return };
    let mut world = outboard_runtime::init().expect("init");
    match scenario.as_str() {
        "collectives" => match collectives::check_all(&mut world) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("rank {}: {e}", world.rank());
                std::process::exit(1);
            }
        },
        "nicvm_allreduce" => match nicvm_allreduce::check(&mut world, 20, 16) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("rank {}: {e}", world.rank());
                std::process::exit(1);
            }
        },
        other => panic!("unknown scenario {other}"),
    }
    world.finalize().expect("finalize");
}

fn outboard_run(n: u32, scenario: &str, env: &[(&str, &str)]) -> (Output, Duration) {
    let start = Instant::now();
    let mut c = Command::new(OUTBOARD);
    c.args(["run", "-n", &n.to_string(), "--timeout", "240", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env("OB_SCENARIO", scenario);
    for (k, v) in env {
        c.env(k, v);
    }
    (c.output().unwrap(), start.elapsed())
}

/// `outboard run -n N --ranks-per-node R`: one node engine per R ranks.
fn outboard_run_nodes(n: u32, per_node: u32, scenario: &str) -> Output {
    Command::new(OUTBOARD)
        .args(["run", "-n", &n.to_string(), "--ranks-per-node", &per_node.to_string(), "--timeout", "240", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
        .env("OB_SCENARIO", scenario)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn all_ranks_correct(n: u32, env: &[(&str, &str)]) {
    let _serial = serial();
    let (out, took) = outboard_run(n, "collectives", env);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    for r in 0..n {
        assert!(so.contains(&format!("[{r}] rank {r}: all collectives correct in both modes")), "rank {r}:\n{so}\n{se}");
    }
    println!("{n} ranks {env:?}: {took:?}");
}

/// Item 5 of issue 19 across real processes: allreduces whose combine step
/// is a NICVM module, each result checked against a Rust reference at
/// every rank; the runtime timed the engine calls that ran the module
/// (only ranks that combine have any: the binomial tree's leaves have
/// none).
#[test]
fn four_processes_allreduce_with_a_module_operator() {
    let _serial = serial();
    let (out, _) = outboard_run(4, "nicvm_allreduce", &[]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "stdout:\n{so}\nstderr:\n{se}");
    assert!(so.contains("[0] 4 ranks, 20 allreduces of 16 x i64, all equal to the reference"), "{so}\n{se}");
    // Rank 0 (the root) combines two contributions per allreduce.
    assert!(so.contains("[0] rank 0: 40 combines,") && !so.contains("[0] rank 0: 40 combines, 0 VM"), "{so}");
    // Each engine call ran one combine, or two when both contributions
    // were early and combined as the host's command started it.
    let line = so.lines().find(|l| l.starts_with("[0] rank 0:")).unwrap_or_default();
    let calls: u32 = line.split(" us in ").nth(1).and_then(|r| r.split(' ').next()).and_then(|c| c.parse().ok()).unwrap_or(0);
    assert!((20..=40).contains(&calls), "rank 0's module time: {line}");
}

#[test]
fn four_processes_run_every_collective_in_both_modes_with_correct_results() {
    all_ranks_correct(4, &[]);
}

/// Node engines: groups whose members share engines (two nodes of two
/// ranks, and an uneven job of two nodes for three ranks), every
/// collective in both modes, and a module operator loaded by both ranks
/// of a node into one copy.
#[test]
fn every_collective_is_correct_on_node_engines_shared_by_several_ranks() {
    let _serial = serial();
    for (n, per_node) in [(4, 2), (3, 2)] {
        let out = outboard_run_nodes(n, per_node, "collectives");
        let (so, se) = text(&out);
        assert!(out.status.success(), "{n} ranks, {per_node} per node:\n{so}\n{se}");
        for r in 0..n {
            assert!(so.contains(&format!("[{r}] rank {r}: all collectives correct in both modes")), "rank {r}:\n{so}\n{se}");
        }
    }
    let out = outboard_run_nodes(4, 2, "nicvm_allreduce");
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert!(so.contains("[0] 4 ranks, 20 allreduces of 16 x i64, all equal to the reference"), "{so}\n{se}");
}

/// `outboard run --netns`: each node in a network namespace of its own,
/// on a bridge - a multi-node job over real interfaces. Node engines of
/// two ranks, then a rank per namespace; every collective correct, the
/// node engines' traffic crossed the bridge, and the namespaces are gone
/// when the job ends.
#[test]
fn every_collective_is_correct_with_a_network_namespace_per_node() {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ip = Command::new("ip").args(["netns", "list"]).output().is_ok_and(|o| o.status.success());
    if !(root && ip) {
        common::skip("every_collective_is_correct_with_a_network_namespace_per_node", "needs root and iproute2 (network namespaces)");
        return;
    }
    let _serial = serial();
    for launcher in [&["--ranks-per-node", "2"][..], &[][..]] {
        let child = Command::new(OUTBOARD)
            .args(["run", "-n", "4", "--netns", "--timeout", "240"])
            .args(launcher)
            .arg("--")
            .arg(std::env::current_exe().unwrap())
            .args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
            .env("OB_SCENARIO", "collectives")
            .env("OUTBOARD_STATS", "stderr")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let (so, se) = text(&out);
        assert!(out.status.success(), "{launcher:?}:\n{so}\n{se}");
        for r in 0..4 {
            assert!(so.contains(&format!("[{r}] rank {r}: all collectives correct in both modes")), "{launcher:?}: rank {r}:\n{so}\n{se}");
        }
        if !launcher.is_empty() {
            // Each node engine received datagrams: the other node's.
            for (rank, node) in [(0, 0), (2, 1)] {
                let prefix = format!("[{rank}] outboard node engine {node}: ");
                let line = se.lines().find(|l| l.starts_with(&prefix) && l.contains(" datagrams in")).unwrap_or_else(|| panic!("no counters of node {node}:\n{se}"));
                let datagrams_in: u64 = line[prefix.len()..].split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                assert!(datagrams_in > 0, "node {node} received nothing over the bridge: {line}");
            }
        }
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        let left = String::from_utf8_lossy(&left.stdout);
        assert!(!left.contains(&format!("obc{pid}-")), "the job's namespaces remain:\n{left}");
    }
}

#[test]
fn three_processes_a_non_power_of_two_group_agree_too() {
    all_ranks_correct(3, &[]);
}

#[test]
fn collectives_are_correct_under_every_progress_policy() {
    for p in ["dedicated", "host-assisted", "spin-then-block"] {
        all_ranks_correct(4, &[("OUTBOARD_PROGRESS", p)]);
    }
}

#[test]
fn bench_barrier_prints_offloaded_host_based_and_the_ratio() {
    let _serial = serial();
    let out = Command::new(OUTBOARD)
        .args(["bench", "barrier", "-n", "2", "--warmup", "5", "--iters", "20", "--rounds", "1", "--no-mpi"])
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert!(so.contains("offloaded") && so.contains("host-based") && so.contains("host/offl"), "{so}");
    // The NIC collective protocol's column and its ratio to the offloaded
    // barrier over the point-to-point connections.
    assert!(so.contains("nic-proto") && so.contains("offl/proto"), "{so}");
    for alg in ["pairwise-exchange", "dissemination", "gather-bcast(2)"] {
        let line = so.lines().find(|l| l.starts_with("barrier") && l.contains(alg)).unwrap_or_else(|| panic!("{alg}:\n{so}"));
        let nums: Vec<f64> = line.split('|').nth(1).unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
        assert!(nums.len() == 5 && nums.iter().all(|x| x.is_finite() && *x > 0.0), "{line}");
        // The ratios are of the printed times (to their rounding).
        let (offl, host, host_offl, proto, offl_proto) = (nums[0], nums[1], nums[2], nums[3], nums[4]);
        assert!(close(host_offl, host / offl), "host/offl is not host-based / offloaded: {line}");
        assert!(close(offl_proto, offl / proto), "offl/proto is not offloaded / nic-proto: {line}");
    }
    assert!(so.contains("Open MPI: skipped: --no-mpi"), "{so}");
}

/// `--ranks-per-node`: the benchmark's job on node engines, as `outboard
/// run --ranks-per-node` starts it; every mode still measured.
#[test]
fn bench_runs_on_node_engines() {
    let _serial = serial();
    let out = Command::new(OUTBOARD)
        .args(["bench", "bcast", "-n", "4", "--ranks-per-node", "2", "--sizes", "8", "--warmup", "5", "--iters", "20", "--rounds", "1", "--no-mpi"])
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    assert!(so.contains("node engines of 2 ranks"), "{so}");
    let row = so.lines().find(|l| l.starts_with("bcast ")).unwrap_or_else(|| panic!("no bcast row:\n{so}"));
    let nums: Vec<f64> = row.split('|').nth(1).unwrap().split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert!(nums.len() == 3 && nums.iter().all(|x| x.is_finite() && *x > 0.0), "{row}");
}

/// `--report FILE.md`: the same output, headed by the command that
/// regenerates it, the machine, the date and the commit.
#[test]
fn bench_report_writes_the_output_with_where_it_came_from() {
    let _serial = serial();
    let file = std::env::temp_dir().join(format!("outboard-report-{}.md", std::process::id()));
    let out = Command::new(OUTBOARD)
        .args(["bench", "barrier", "-n", "2", "--warmup", "5", "--iters", "20", "--rounds", "1", "--no-mpi", "--report"])
        .arg(&file)
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    let report = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(report.starts_with("Generated by `outboard bench barrier -n 2 --warmup 5 --iters 20 --rounds 1 --no-mpi`\n"), "{report}");
    for field in ["- machine: ", "- date: ", "- commit: "] {
        assert!(report.contains(field), "no {field:?} in:\n{report}");
    }
    // Every table row printed is in the report.
    let rows: Vec<&str> = so.lines().filter(|l| l.starts_with("barrier ")).collect();
    assert_eq!(rows.len(), 3, "{so}");
    assert!(rows.iter().all(|r| report.contains(r)), "{report}");
}

#[test]
fn bench_allreduce_and_overlap_report_every_size() {
    let _serial = serial();
    let out = Command::new(OUTBOARD)
        .args(["bench", "allreduce", "-n", "2", "--sizes", "8,4096", "--warmup", "5", "--iters", "20", "--rounds", "1", "--no-mpi"])
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    // Three algorithms at two sizes, as latency, again as bus bandwidth
    // (MB/s: offloaded, host-based, Open MPI) beside the job's streaming
    // bandwidth at that size and the better form's share of it, and as
    // copies per byte.
    let rows: Vec<&str> = so.lines().filter(|l| l.starts_with("allreduce")).collect();
    assert_eq!(rows.len(), 18, "{so}");
    assert!(so.contains("# bus bandwidth in MB/s = 2(p-1)/p x size / latency"), "{so}");
    for row in &rows[6..12] {
        let cols: Vec<&str> = row.split('|').collect();
        let figures: Vec<f64> = cols[1].split_whitespace().map(|v| v.parse().unwrap()).collect();
        assert!(figures.len() == 2 && figures.iter().all(|&g| g > 0.0), "{row}");
        let stream: Vec<f64> = cols[3].split_whitespace().map(|v| v.parse().unwrap()).collect();
        assert!(stream.len() == 2 && stream[0] > 0.0, "{row}");
        let best = figures[0].max(figures[1]);
        // Within what printing the three to one decimal can move it.
        let rounding = stream[1] * (0.05 / best + 0.05 / stream[0]) + 0.006;
        assert!((stream[1] - best / stream[0]).abs() <= rounding, "best/stream is the better form over the stream: {row}");
    }
    // Then copies per byte, offloaded and host-based, the engine's + the
    // host library's: each engine reads a contribution and writes a
    // result, and the library copies the contribution in and the result
    // out, so about one copy each way each, and a handful at most.
    assert!(so.contains("# copies per byte of data per collective"), "{so}");
    let copies: Vec<&str> = so.lines().skip_while(|l| !l.starts_with("# copies per byte")).filter(|l| l.starts_with("allreduce")).collect();
    assert_eq!(copies.len(), 6, "{so}");
    for row in copies {
        let figures: Vec<f64> = row.split('|').nth(1).unwrap().split_whitespace().filter(|w| *w != "+").map(|v| v.parse().unwrap()).collect();
        assert!(figures.len() == 4 && figures.iter().all(|&c| (1.0..=8.0).contains(&c)), "{row}");
    }
    let out = Command::new(OUTBOARD)
        .args(["bench", "overlap", "-n", "2", "--sizes", "64", "--warmup", "5", "--iters", "20", "--rounds", "1", "--no-mpi"])
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    for op in ["barrier", "allreduce"] {
        let line = so.lines().find(|l| l.starts_with(op)).unwrap_or_else(|| panic!("{op}:\n{so}"));
        let cols: Vec<&str> = line.split('|').collect();
        for part in &cols[1..3] {
            let v: Vec<f64> = part.split_whitespace().map(|x| x.parse().unwrap()).collect();
            let (pure, overall, overlap) = (v[0], v[1], v[2]);
            // The OSU method: compute as long as the pure call took, so the
            // whole can never take less than the compute.
            assert!(overall >= 0.95 * pure, "overall below the compute time: the busy loop did not run: {line}");
            // overlap % = max(0, 1 - (overall - compute) / pure) * 100,
            // where the measured compute is at least pure: so at least
            // the value with compute = pure (to the printed rounding),
            // and at most 100.
            let least = (1.0 - (overall - pure) / pure).max(0.0) * 100.0;
            let rounding = 0.06 + 100.0 * 0.05 * (1.0 + overall / pure) / pure;
            assert!(overlap >= least - rounding && overlap <= 100.0, "overlap {overlap} is not the OSU formula's (at least {least:.1}): {line}");
        }
    }
}

/// Whether a printed ratio (two decimals) is `want`, given that the
/// times it came from were printed to one decimal.
fn close(printed: f64, want: f64) -> bool {
    (printed - want).abs() <= 0.006 + want * 0.03
}

/// `bench bcast` runs all three modes at every size and prints every
/// column: with Open MPI where `mpicc` is installed, else without it.
#[test]
fn bench_bcast_prints_every_mode_and_size() {
    let _serial = serial();
    let mpi = match common::mpicc_works() {
        Ok(()) => true,
        Err(why) => {
            common::skip("bench_bcast_prints_every_mode_and_size (Open MPI columns)", &why);
            false
        }
    };
    let mut args = vec!["bench", "bcast", "-n", "2", "--sizes", "8,20000", "--warmup", "5", "--iters", "20", "--rounds", "1"];
    if !mpi {
        args.push("--no-mpi");
    }
    let out = Command::new(OUTBOARD).args(&args).output().unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    for col in ["offloaded", "nic-asst", "host-based", "host/offl", "host/nic", "Open MPI", "MPI/offl", "MPI/nic"] {
        assert!(so.contains(col), "{col}:\n{so}");
    }
    // The latency table's rows (copies per byte follow, by the same names).
    let lines: Vec<&str> = so.lines().take_while(|l| !l.starts_with("# copies per byte")).filter(|l| l.starts_with("bcast")).collect();
    assert_eq!(lines.len(), 2, "{so}");
    for (line, size) in lines.iter().zip(["8 B", "20000 B"]) {
        assert!(line.contains(size), "{line}");
        let cols: Vec<&str> = line.split('|').collect();
        let nums = |part: &str| part.split_whitespace().map(|x| x.parse::<f64>().ok()).collect::<Vec<_>>();
        for part in &cols[1..3] {
            assert!(nums(part).iter().all(|x| x.is_some_and(|x| x.is_finite() && x > 0.0)), "{line}");
        }
        let m = nums(cols[3]);
        assert_eq!(m.len(), 3, "{line}");
        assert!(m.iter().all(|x| x.is_some() == mpi), "{line}");
    }
}

#[test]
fn bench_rejects_bad_sizes() {
    let out = Command::new(OUTBOARD).args(["bench", "allreduce", "--sizes", "12"]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out).1.contains("not a multiple of 8"), "{}", text(&out).1);
    let out = Command::new(OUTBOARD).args(["bench", "bcast", "--sizes", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out).1.contains("between 1 byte and 16 MiB"), "{}", text(&out).1);
    let out = Command::new(OUTBOARD).args(["bench", "bcast", "--sizes", "8,1Q"]).output().unwrap();
    assert!(!out.status.success());
    assert!(text(&out).1.contains("\"1Q\" is not a size: use a number of bytes with an optional K or M suffix"), "{}", text(&out).1);
    let out = Command::new(OUTBOARD).args(["bench", "bcast", "--sizes", "17M"]).output().unwrap();
    assert!(text(&out).1.contains("between 1 byte and 16 MiB"), "17M is 17 MiB: {}", text(&out).1);
}

/// Each collective benchmark lists the options it takes, and only those:
/// sizes for the ones with data, broadcast modes for `bcast`, operations
/// for `overlap`.
#[test]
fn bench_help_lists_each_subcommands_own_options() {
    let help = |cmd: &str| text(&Command::new(OUTBOARD).args(["bench", cmd, "--help"]).output().unwrap()).0;
    let has = |h: &str, opt: &str| h.lines().any(|l| l.trim_start().starts_with(opt));
    let barrier = help("barrier");
    assert!(has(&barrier, "-n, --np") && has(&barrier, "--iters"), "{barrier}");
    for opt in ["--sizes", "--ops", "--modes"] {
        assert!(!has(&barrier, opt), "barrier lists {opt}:\n{barrier}");
    }
    let bcast = help("bcast");
    assert!(has(&bcast, "--sizes") && has(&bcast, "--modes") && !has(&bcast, "--ops"), "{bcast}");
    let overlap = help("overlap");
    assert!(has(&overlap, "--ops") && !has(&overlap, "--modes"), "{overlap}");
    for cmd in ["allreduce", "reduce"] {
        let h = help(cmd);
        assert!(has(&h, "--sizes") && !has(&h, "--ops") && !has(&h, "--modes"), "{cmd}:\n{h}");
    }
}

/// `outboard reproduce` end to end on two cheap runs: the files it
/// promises, the summary line last, plots that are SVG; a bad run name is
/// refused with the known ones.
#[test]
fn reproduce_writes_the_tables_csv_and_plots() {
    let dir = std::env::temp_dir().join(format!("outboard-reproduce-test-{}", std::process::id()));
    let out = Command::new(OUTBOARD)
        .args(["reproduce", "--quick", "--only", "closed-form,pingpong", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}\n{se}");
    let md = std::fs::read_to_string(dir.join("figures.md")).unwrap();
    assert!(md.contains("| fm-closed-p2p | fm-lanai43 |"), "{md}");
    assert!(md.contains("| elan3-lat | elan3 |"), "{md}");
    let summary = md.trim_end().lines().last().unwrap();
    assert!(summary.contains("predicted figures (P)") && summary.contains("calibrated (C)"), "{summary}");
    for f in ["figures.csv", "closed-form.csv", "pingpong.csv"] {
        assert!(std::fs::read_to_string(dir.join(f)).unwrap().lines().count() > 1, "{f}");
    }
    for f in ["closed-form.svg", "pingpong.svg"] {
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let bad = Command::new(OUTBOARD).args(["reproduce", "--only", "nope", "--out"]).arg(std::env::temp_dir()).output().unwrap();
    assert!(!bad.status.success());
    assert!(text(&bad).1.contains("no run \"nope\" (known: closed-form"), "{}", text(&bad).1);
}
