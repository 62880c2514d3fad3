//! Whole `World`s in real processes on loopback: leaving a job, cleanly or
//! not, never hangs on a rendezvous that is gone, and a clean job's
//! `finalize` still fences every rank.
//!
//! The ranks are this test binary itself: `rank_program` does nothing in
//! an ordinary test run, and plays the scenario named by `OB_SCENARIO` when
//! a test starts the binary as `<this test> rank_program --exact
//! --nocapture` with a Hydra-style environment (`PMI_RANK`, `PMI_SIZE`,
//! `OUTBOARD_RENDEZVOUS`): rank 0 serves the rendezvous, as under `mpirun`.
//!
//! No test bounds a wall-clock time: each waits for its ranks with a
//! generous limit that only a hang exceeds, and checks what they report.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use outboard_engine::RecvMatch;
use outboard_runtime::bootstrap::BootstrapError;

/// The jobs run one at a time: several at once on a small machine would
/// test the scheduler.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Longer than any healthy run of these scenarios by far: reaching it
/// means a rank hung.
const HANG: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- ranks --

#[test]
#[ignore = "a rank's entry point, not a test: the tests of this file start it in child processes with OB_SCENARIO set"]
fn rank_program() {
    let Ok(scenario) = std::env::var("OB_SCENARIO") else { return };
    if scenario == "init_only" {
        match outboard_runtime::init() {
            Ok(_) => println!("init succeeded"),
            Err(e) => println!("init failed: {e}"),
        }
        return;
    }
    let world = outboard_runtime::init().expect("init");
    match scenario.as_str() {
        "stopped_server" => stopped_server(world),
        "server_leaves" => server_leaves(world),
        "healthy" => healthy(world),
        other => panic!("unknown scenario {other}"),
    }
}

/// Stops this process (SIGSTOP): its threads, the rendezvous server's
/// included, freeze with every socket still open, as on a host that hangs
/// or is cut off.
fn stop_myself() {
    let pid = std::process::id();
    let _ = Command::new("sh").args(["-c", &format!("kill -STOP {pid}")]).status();
}

/// Rank 0 (which serves the rendezvous) freezes after the first barrier;
/// rank 1's `finalize` must fail, naming the rendezvous, not hang.
fn stopped_server(mut world: outboard_runtime::World) {
    world.barrier().unwrap();
    if world.rank() == 0 {
        stop_myself();
        std::thread::sleep(Duration::from_secs(600));
        unreachable!("the test kills the stopped rank 0");
    }
    match world.finalize() {
        Err(e @ BootstrapError::RendezvousLost { .. }) => println!("rank 1: finalize failed: RendezvousLost: {e}"),
        other => println!("rank 1: finalize returned {other:?}"),
    }
}

/// Rank 0 leaves without `finalize` while rank 1 is busy; rank 1 reaches
/// its `finalize` only after rank 0's process has ended, and must be told
/// that rank 0 left.
fn server_leaves(mut world: outboard_runtime::World) {
    world.barrier().unwrap();
    if world.rank() == 0 {
        drop(world);
        println!("rank 0: left");
        return;
    }
    let go = PathBuf::from(std::env::var("OB_GO").expect("OB_GO"));
    let start = Instant::now();
    while !go.exists() && start.elapsed() < HANG {
        std::thread::sleep(Duration::from_millis(10));
    }
    match world.finalize() {
        Err(BootstrapError::RankLost { rank, reason }) => println!("rank 1: finalize failed: RankLost {rank} ({reason})"),
        other => println!("rank 1: finalize returned {other:?}"),
    }
}

/// Each rank sends to the next and receives from the previous; the last
/// rank then computes for longer than the rendezvous silence limit before
/// its `finalize`, so the others wait in the fence on pings alone.
fn healthy(mut world: outboard_runtime::World) {
    let (me, n) = (world.rank(), world.size());
    let next = world.endpoint((me + 1) % n);
    let prev = world.endpoint((me + n - 1) % n);
    let r = {
        let buf = world.port().buffer(8).unwrap();
        world.port().start_recv(RecvMatch::from(prev.node, prev.port, 7), buf).unwrap()
    };
    world.port().send(next, 7, &u64::from(me).to_le_bytes()).unwrap();
    world.port().wait(r).unwrap();
    if me == n - 1 {
        std::thread::sleep(outboard_runtime::bootstrap::MIN_SILENCE * 2);
    }
    world.finalize().unwrap();
    println!("rank {me}: finalized");
}

// ---------------------------------------------------------------- tests --

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts `size` ranks of `scenario` (rank 0 serving the rendezvous).
fn spawn_job(scenario: &str, size: u32, extra: &[(&str, &str)]) -> Vec<Child> {
    let rendezvous = format!("127.0.0.1:{}", free_port());
    (0..size)
        .map(|rank| {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
                .env("OB_SCENARIO", scenario)
                .env("PMI_RANK", rank.to_string())
                .env("PMI_SIZE", size.to_string())
                .env("OUTBOARD_RENDEZVOUS", &rendezvous)
                .env("OUTBOARD_PEER_TIMEOUT_MS", "500")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in extra {
                c.env(k, v);
            }
            c.spawn().unwrap()
        })
        .collect()
}

/// Waits for `child` to exit, up to [`HANG`]; returns its output, or
/// `None` if it hung (then it is killed).
fn wait_for(child: &mut Child) -> Option<(String, String)> {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HANG {
            kill(child);
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let read = |s: Option<&mut dyn std::io::Read>| {
        let mut out = String::new();
        if let Some(s) = s {
            let _ = s.read_to_string(&mut out);
        }
        out
    };
    let so = read(child.stdout.as_mut().map(|s| s as &mut dyn std::io::Read));
    let se = read(child.stderr.as_mut().map(|s| s as &mut dyn std::io::Read));
    Some((so, se))
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Kills every rank however the test ends.
struct Job(Vec<Child>);

impl Drop for Job {
    fn drop(&mut self) {
        for c in &mut self.0 {
            kill(c);
        }
    }
}

#[test]
fn finalize_fails_with_rendezvous_lost_when_the_rank_serving_it_is_stopped() {
    let _serial = serial();
    let mut job = Job(spawn_job("stopped_server", 2, &[]));
    let got = wait_for(&mut job.0[1]);
    kill(&mut job.0[0]);
    let (so, se) = got.expect("rank 1 hung in finalize on a rendezvous that no longer answers");
    assert!(so.contains("rank 1: finalize failed: RendezvousLost"), "stdout:\n{so}\nstderr:\n{se}");
}

#[test]
fn the_rank_serving_the_rendezvous_leaves_and_the_others_learn_it_left() {
    let _serial = serial();
    let go = std::env::temp_dir().join(format!("outboard-world-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let mut job = Job(spawn_job("server_leaves", 2, &[("OB_GO", go.to_str().unwrap())]));
    let (so0, se0) = wait_for(&mut job.0[0]).expect("rank 0 hung leaving the job");
    assert!(so0.contains("rank 0: left"), "stdout:\n{so0}\nstderr:\n{se0}");
    // Rank 0's process has ended: rank 1 fences only now.
    touch(&go);
    let got = wait_for(&mut job.0[1]);
    let _ = std::fs::remove_file(&go);
    let (so, se) = got.expect("rank 1 hung in finalize after rank 0 left");
    assert!(so.contains("rank 1: finalize failed: RankLost 0"), "stdout:\n{so}\nstderr:\n{se}");
}

fn touch(p: &Path) {
    std::fs::write(p, b"go").unwrap();
}

#[test]
fn a_healthy_jobs_finalize_fences_every_rank_even_after_a_long_computation() {
    let _serial = serial();
    let mut job = Job(spawn_job("healthy", 3, &[]));
    for r in 0..3 {
        let (so, se) = wait_for(&mut job.0[r]).unwrap_or_else(|| panic!("rank {r} hung"));
        assert!(so.contains(&format!("rank {r}: finalized")), "rank {r} stdout:\n{so}\nstderr:\n{se}");
    }
}

/// A bad setting stops `init` with the settings' sentence, before
/// anything starts; so does an `OUTBOARD_*` name that is not a setting.
#[test]
fn a_bad_setting_stops_init_with_a_sentence() {
    let run = |k: &str, v: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["rank_program", "--exact", "--ignored", "--nocapture", "--test-threads=1", "-q"])
            .env("OB_SCENARIO", "init_only")
            .env(k, v)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run("OUTBOARD_UDP_GSO", "maybe");
    assert!(out.contains("init failed: OUTBOARD_UDP_GSO=\"maybe\" is not a boolean: use 1, on, true or yes"), "{out}");
    let out = run("OUTBOARD_PEER_TIMEOUT", "500");
    assert!(out.contains("init failed: OUTBOARD_PEER_TIMEOUT is not a setting Outboard knows (did you mean OUTBOARD_PEER_TIMEOUT_MS?)"), "{out}");
    assert!(run("OUTBOARD_UDP_GSO", "off").contains("init succeeded"));
}
