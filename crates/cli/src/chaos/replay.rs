//! The replay scenario: a job runs with every datagram captured; a second
//! job with the same job key runs, and once each of its engines has sent
//! something (so its port is known) every captured datagram is sent at it
//! once from the right source address, with forged, truncated and
//! bit-flipped ones (see [`capture`]). The second job must pass its checks,
//! and must still be running when the last datagram goes out (else the
//! trial proves nothing and counts as failed).

use std::time::{Duration, Instant};

use anyhow::bail;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::capture;
use super::job::Job;
use crate::netns::Net;
use super::nft::Faults;
use super::workload::{Length, Programs};
use super::{counters, fmt_counters, run_job, set_faults, spec, verdict, ChaosArgs, Tally};

fn random_secret(rng: &mut ChaCha8Rng) -> String {
    format!("{:016x}{:016x}", rng.gen::<u64>(), rng.gen::<u64>())
}

/// `--trials` replay trials, round-robin over the workloads.
pub(super) fn scenario(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    let limit = Duration::from_secs_f64(a.job_limit);
    let header = outboard_wire::HEADER_LEN;
    let mut bad = 0;
    for i in 0..a.trials {
        let w = a.workloads[i as usize % a.workloads.len()];
        let job_key: u64 = rng.gen();
        let shared = random_secret(rng);
        let secret = |rng: &mut ChaCha8Rng| Some(if a.same_secret { shared.clone() } else { random_secret(rng) });
        // The first job, every datagram captured.
        let cap = capture::Capture::start(net)?;
        let (_, ends) = run_job(net, &spec(a, p, w, Length::Long, job_key, secret(rng)), limit)?;
        let old = cap.stop();
        if let Some((_, why)) = verdict(&ends) {
            bail!("replay: the first {} job failed without faults: {why}", w.name());
        }
        let old_ports = capture::ports(&old, a.ranks);
        // The second job, same key; once every rank's engine has sent
        // something its port is known, and the injection starts.
        let cap = capture::Capture::start(net)?;
        let injector = capture::Injector::open(net)?;
        let mut job = Job::start(net, &spec(a, p, w, Length::Long, job_key, secret(rng)))?;
        let deadline = job.started + limit;
        let new_ports = loop {
            let seen = cap.engine_ports(a.ranks);
            if seen.iter().all(Option::is_some) {
                break Some(seen.into_iter().flatten().collect::<Vec<u16>>());
            }
            if job.poll() || Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let Some(new_ports) = new_ports else {
            bail!("replay: the second {} job ended before every rank had sent a datagram", w.name());
        };
        let (plan, n) = capture::plan(&old, &old_ports, &new_ports, header, a.forged, rng);
        let mut while_running = 0;
        let sending = Instant::now();
        // Polling the ranks costs a system call each: once per batch.
        for batch in plan.chunks(32) {
            for d in batch {
                injector.send(d)?;
            }
            job.poll();
            if (0..a.ranks).all(|r| job.running(r)) {
                while_running += batch.len();
            }
        }
        let sent_in = sending.elapsed().as_secs_f64();
        job.wait_until(deadline);
        let ends = job.finish();
        drop(cap);
        let (c, lines) = counters(&ends);
        let total = plan.len();
        let what = match verdict(&ends) {
            // A job that ended before the datagrams reached it proves
            // nothing.
            None if while_running < total => {
                bad += 1;
                t.failures += 1;
                format!("INCONCLUSIVE: the job ended before {} of the datagrams were sent", total - while_running)
            }
            None => "ok: every result check passed".to_string(),
            Some((hang, why)) => {
                bad += 1;
                t.job_failed(hang);
                why
            }
        };
        println!(
            "replay {}/{}: {}, {} secret: {} captured datagrams replayed + {} forged + {} truncated + {} bit-flipped (sent in {sent_in:.2} s, {while_running} while every rank ran): {what} ({})",
            i + 1,
            a.trials,
            w.name(),
            if a.same_secret { "same" } else { "fresh" },
            n.replayed,
            n.forged,
            n.truncated,
            n.flipped,
            fmt_counters(&c, lines)
        );
    }
    println!("replay summary: {} trials, {bad} failed or hung", a.trials);
    Ok(())
}
