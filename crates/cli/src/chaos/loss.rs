//! The loss scenario: every workload at each loss rate with duplication;
//! every job must pass its own result checks. nftables' counters show the
//! faults were there.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::netns::Net;
use super::nft::{self, Faults};
use super::workload::{Length, Programs};
use super::{counters, fmt_counters, run_job, set_faults, spec, verdict, ChaosArgs, Tally};

/// Every workload at every loss rate, `--trials` times over.
pub(super) fn scenario(a: &ChaosArgs, net: &Net, p: &Programs, rng: &mut ChaCha8Rng, t: &mut Tally) -> anyhow::Result<()> {
    let limit = Duration::from_secs_f64(a.job_limit);
    let (mut runs, mut bad) = (0, 0);
    for round in 0..a.trials {
        for &loss in &a.loss {
            let f = Faults { loss, dup: a.dup };
            for &w in &a.workloads {
                set_faults(net, f)?;
                let (secs, ends) = run_job(net, &spec(a, p, w, Length::Short, rng.gen(), None), limit)?;
                let (mut dropped, mut duplicated) = (0, 0);
                for ns in &net.ranks {
                    let (d, u) = nft::counted(ns)?;
                    dropped += d;
                    duplicated += u;
                }
                runs += 1;
                let (c, lines) = counters(&ends);
                let what = match verdict(&ends) {
                    None => format!("ok in {secs:.2} s"),
                    Some((hang, why)) => {
                        bad += 1;
                        t.job_failed(hang);
                        why
                    }
                };
                println!(
                    "loss {}/{}: {loss}% loss, {}% dup, {}: {what} (nftables dropped {dropped}, duplicated {duplicated} datagrams; {})",
                    round + 1,
                    a.trials,
                    a.dup,
                    w.name(),
                    fmt_counters(&c, lines)
                );
            }
        }
    }
    set_faults(net, Faults { loss: 0, dup: 0 })?;
    println!("loss summary: {runs} runs ({} workloads x loss {:?} % with {} % duplication x {} rounds), {bad} failed or hung", a.workloads.len(), a.loss, a.dup, a.trials);
    Ok(())
}
