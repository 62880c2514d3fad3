//! NICVM (seed 002, section 5): user modules run by the engine, against the
//! same work done by hosts.
//!
//! - `noop`: ping-pong whose ping goes through a no-op module at the pong
//!   node (002 Figure 6: "the base overhead of the NICVM mechanism"),
//!   against a plain ping-pong; one-way figures (half the round trip).
//! - `echo`: the initiator's packet is turned around by the echo module on
//!   the responder's engine and never reaches the responder's host (002
//!   Figure 7), against a host echo (a ping-pong); round trips.
//! - `bcast`: the Figure 2 module broadcast (binary tree, engines forward)
//!   against a host-based binomial broadcast (MPICH's tree), latency from
//!   the root's start until the last member has the data (002 Figures 8-9).
//!
//! The hosts here are the library's (no MPI layer), and each packet is one
//! module invocation; 002's runs are MPICH-GM's on a PIII-1 GHz.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{RecvMatch, NICVM_TAG_FAILED};
use outboard_host::nicvm::{LoadOptions, NicModule};
use outboard_host::{BcastMode, Group, HostError, Port};

use super::coll::run_all;
use super::multicast::{latency as host_bcast, MPICH_BINOMIAL};
use super::pingpong::one_way;
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::process::{Proc, SimIo};
use crate::profile::Profile;
use crate::time::{Dur, Time};

const NOOP: &str = include_str!("../../../nicvm/modules/noop.nvm");
const ECHO: &str = include_str!("../../../nicvm/modules/echo.nvm");
const BCAST: &str = include_str!("../../../nicvm/modules/bcast.nvm");

/// Loads `source` as `name` at this rank's engine, waiting the simulator's way.
async fn load(p: &Proc, port: &mut Port<SimIo>, g: &mut Group, name: &str, source: &str) -> Result<NicModule, HostError> {
    let code = outboard_nicvm::compile(source).expect("the bundled modules compile").module.bytecode().encode();
    let pending = port.start_nicvm_load_bytecode(g, name, &code, LoadOptions::default())?;
    let r = p.wait(port, pending.request()).await;
    port.finish_nicvm_load(pending, r)
}

fn check(failed: bool, what: &str) -> Result<(), ExperimentError> {
    if failed {
        return Err(ExperimentError::Param(format!("the {what} module failed")));
    }
    Ok(())
}

/// Round trip (us), averaged over `iters`, of a `size`-byte packet from
/// rank 0 to rank 1: through `module` at rank 1 (`echo`: the module sends
/// it back; otherwise rank 1's host receives it from the module and sends
/// it back).
fn module_round_trip(profile: &Profile, size: u32, iters: u32, seed: u64, module: &'static str, echo: bool) -> Result<f64, ExperimentError> {
    let iters = iters.max(1);
    let end: Shared<Time> = Rc::new(RefCell::new(Time::ZERO));
    let over: Shared<bool> = Rc::new(RefCell::new(false));
    let failed: Shared<bool> = Rc::new(RefCell::new(false));
    run_all(profile, 2, seed, |p, rank, mut port, mut g| {
        let (end, over, failed) = (end.clone(), over.clone(), failed.clone());
        async move {
            let m = load(&p, &mut port, &mut g, "m", module).await?;
            let data = port.buffer_from(&vec![7; size as usize])?;
            let rbuf = port.buffer(size.max(1))?;
            // Both loads are in before the first ping (an engine without
            // the module would refuse it and cost a retry).
            p.sleep_until(Time::ZERO + Dur::from_us(1000.0)).await;
            let start = p.now();
            for i in 0..u64::from(iters) {
                if rank == 0 {
                    let back = if echo { port.start_nicvm_recv(&m, rbuf)? } else { port.start_recv(RecvMatch::tag(i), rbuf)? };
                    let s = port.start_nicvm_send(&mut g, &m, 0, 1, data)?;
                    p.wait(&mut port, s).await?;
                    if let outboard_engine::Completion::Received { tag, .. } = p.wait(&mut port, back).await? {
                        *failed.borrow_mut() |= echo && tag & NICVM_TAG_FAILED != 0;
                    }
                } else if !echo {
                    let r = port.start_nicvm_recv(&m, rbuf)?;
                    if let outboard_engine::Completion::Received { tag, .. } = p.wait(&mut port, r).await? {
                        *failed.borrow_mut() |= tag & NICVM_TAG_FAILED != 0;
                    }
                    let s = port.start_send(super::common::first_port(0), i, data)?;
                    p.wait(&mut port, s).await?;
                }
            }
            if rank == 0 {
                *end.borrow_mut() = Time::ZERO + p.now().since(start);
                *over.borrow_mut() = true;
            } else {
                // Keep the port (and so the module) until the initiator is done.
                while !*over.borrow() {
                    let t = p.now() + Dur::from_us(10.0);
                    p.sleep_until(t).await;
                }
            }
            Ok(())
        }
    })?;
    check(*failed.borrow(), module)?;
    let t = *end.borrow();
    Ok(t.since(Time::ZERO).as_us() / f64::from(iters))
}

/// Mean latency (us) of a `size`-byte Figure 2 module broadcast from rank
/// 0 to `n` ranks, measured as [`host_bcast`] measures the host's.
pub fn module_bcast(profile: &Profile, n: u32, size: u32, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let rounds = iters.max(1) as usize + 1;
    let starts: Shared<Vec<Time>> = Rc::new(RefCell::new(vec![Time::ZERO; rounds]));
    let done: Shared<Vec<Vec<Time>>> = Rc::new(RefCell::new(vec![Vec::new(); rounds]));
    let wrong: Shared<bool> = Rc::new(RefCell::new(false));
    run_all(profile, n, seed, |p, rank, mut port, mut g| {
        let (starts, done, wrong) = (starts.clone(), done.clone(), wrong.clone());
        async move {
            let m = load(&p, &mut port, &mut g, "bcast", BCAST).await?;
            let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let sbuf = port.buffer_from(&data)?;
            let rbuf = port.buffer(size.max(1))?;
            p.sleep_until(Time::ZERO + Dur::from_us(1000.0)).await;
            for it in 0..rounds {
                if rank == 0 {
                    if it > 0 {
                        while done.borrow()[it - 1].len() < n as usize {
                            let t = p.now() + Dur::from_us(1.0);
                            p.sleep_until(t).await;
                        }
                    }
                    starts.borrow_mut()[it] = p.now();
                    let s = port.start_nicvm_send(&mut g, &m, 0, 0, sbuf)?;
                    if let outboard_engine::Completion::NicvmSent { failed } = p.wait(&mut port, s).await? {
                        *wrong.borrow_mut() |= failed;
                    }
                } else {
                    let r = port.start_nicvm_recv(&m, rbuf)?;
                    p.wait(&mut port, r).await?;
                    *wrong.borrow_mut() |= port.read_buffer(outboard_host::HostBuf { addr: rbuf.addr, len: size })? != data;
                }
                done.borrow_mut()[it].push(p.now());
            }
            // The root leaves last: its engine's module sends must be confirmed.
            if rank == 0 {
                let t = p.now() + Dur::from_us(1000.0);
                p.sleep_until(t).await;
            }
            Ok(())
        }
    })?;
    check(*wrong.borrow(), "bcast")?;
    let (starts, done) = (starts.borrow(), done.borrow());
    let sum: f64 = (1..rounds).map(|i| done[i].iter().copied().max().unwrap_or(Time::ZERO).since(starts[i]).as_us()).sum();
    Ok(sum / (rounds - 1) as f64)
}

/// The most bytes one module packet carries on `profile` (a module runs
/// once per packet, so a module message is one packet).
pub fn module_payload(profile: &Profile) -> u32 {
    let mtu = profile.nic.max_payload as usize + outboard_wire::HEADER_LEN + outboard_wire::DATA_FIXED_LEN;
    (mtu - outboard_wire::HEADER_LEN - outboard_wire::NICVM_FIXED_LEN) as u32
}

/// Refuses a profile whose module packet cannot carry the largest size.
fn check_sizes(profiles: &[Profile], sizes: &[u32]) -> Result<(), ExperimentError> {
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let Some(prof) = profiles.iter().find(|p| module_payload(p) < largest) else {
        return Ok(());
    };
    let fit: Vec<&str> = crate::profile::BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| module_payload(&Profile::builtin(n)) >= largest)
        .collect();
    Err(ExperimentError::Param(format!(
        "nicvm runs a module once per packet, so a message must fit one module packet: {}'s carries {} B, \
         not the {largest} B asked for (give --sizes up to {1}), and the profiles whose packets carry {largest} B are {}",
        prof.name,
        module_payload(prof),
        fit.join(", ")
    )))
}

/// `outboard sim nicvm`.
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![32, 128, 256, 1024, 4096] } else { p.sizes.clone() };
    let bsizes = if p.sizes.is_empty() { vec![32, 1024, 4096] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![2, 4, 8, 16] } else { p.nodes.clone() };
    check_sizes(&p.profiles, &sizes)?;
    check_sizes(&p.profiles, &bsizes)?;
    let total = p.profiles.len() * (sizes.len() + nodes.len() * bsizes.len());
    let mut done = 0;
    let mut rows = Vec::new();
    for prof in &p.profiles {
        let name = &prof.name;
        let mut crossover = None;
        for &size in &sizes {
            let plain = one_way(prof, size, p.iters, p.seed)?;
            let noop = module_round_trip(prof, size, p.iters, p.seed, NOOP, false)? / 2.0;
            let echo = module_round_trip(prof, size, p.iters, p.seed, ECHO, true)?;
            // Compared with nicvm-noop-overhead once (the smallest size):
            // gm2-lanai91's nic.vm_invoke_cycles is fitted on it (basis C).
            let mut ovh = Row::new(name.clone(), 2, size, "noop-ovh", noop - plain, "us");
            if name == "gm2-lanai91" && p.sizes.is_empty() && size == sizes[0] {
                ovh = ovh.with_paper(&["nicvm-noop-overhead"]);
            }
            rows.push(Row::new(format!("{name} no-op"), 2, size, "one-way", noop, "us"));
            rows.push(Row::new(format!("{name} plain"), 2, size, "one-way", plain, "us"));
            rows.push(ovh);
            rows.push(Row::new(format!("{name} host echo"), 2, size, "round-trip", 2.0 * plain, "us"));
            rows.push(Row::new(format!("{name} nic echo"), 2, size, "round-trip", echo, "us"));
            rows.push(Row::new(name.clone(), 2, size, "echo-factor", 2.0 * plain / echo, "x"));
            if echo < 2.0 * plain {
                crossover.get_or_insert(size);
            } else {
                crossover = None;
            }
            done += 1;
            progress(done, total);
        }
        // The smallest size from which on the NIC echo wins (the largest
        // size if it never does).
        let from = crossover.unwrap_or(sizes.iter().copied().max().unwrap_or(0));
        let mut c = Row::new(name.clone(), 2, from, "echo-wins-from", f64::from(from), "B");
        // Compared only over the default sizes (the paper's crossover
        // lies between them).
        if name == "gm2-lanai91" && p.sizes.is_empty() {
            c = c.with_paper(&["nicvm-echo-crossover"]);
        }
        rows.push(c);
        for &n in &nodes {
            for &size in &bsizes {
                let host = host_bcast(prof, n, size, BcastMode::HostBased, MPICH_BINOMIAL, p.iters, p.seed)?;
                let nic = module_bcast(prof, n, size, p.iters, p.seed)?;
                rows.push(Row::new(format!("{name} host bcast"), n, size, "latency", host, "us"));
                rows.push(Row::new(format!("{name} nicvm bcast"), n, size, "latency", nic, "us"));
                let mut f = Row::new(name.clone(), n, size, "bcast-factor", host / nic, "x");
                if name == "gm2-lanai91" && n == 16 && size == 4096 {
                    f = f.with_paper(&["nicvm-bcast-foi"]);
                }
                rows.push(f);
                done += 1;
                progress(done, total);
            }
        }
    }
    Ok(Outcome {
        title: "NICVM (002): no-op module overhead, NIC echo vs host echo, Figure 2 module broadcast vs host binomial".into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "noop-ovh = one-way through a no-op module at the pong engine - plain one-way (002 Fig. 6: 'within several microseconds', nicvm-noop-overhead read as 3 us; gm2-lanai91's nic.vm_invoke_cycles is CALIBRATED on it, so it is 3.0 there by construction)".into(),
            "echo-factor = host echo round trip / NIC echo round trip (002 Fig. 7: the NIC echo wins above 128 B)".into(),
            "bcast-factor = host-based binomial / Figure 2 module broadcast (002 Figs. 8-9: up to about 1.3x at 4,096 B, 16 nodes)".into(),
            "library level, no MPI layer; VM prices: the profile's nic.vm_* (gm2-lanai91: invoke fitted on 002's no-op overhead, instruction an estimate; dpu400: both estimates, see profiles/dpu400.toml)".into(),
            "rows without a paper figure (other sizes, nodes beyond 16, dpu400) are predictions of the model at those prices: basis P if they had one".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priced(instr: f64, invoke: f64) -> Profile {
        let mut p = Profile::builtin("gm2-lanai91");
        p.nic.vm_instruction_cycles = Some(instr);
        p.nic.vm_invoke_cycles = Some(invoke);
        p
    }

    #[test]
    fn a_no_op_module_costs_exactly_its_vm_price_once_per_round_trip() {
        let plain = one_way(&priced(0.0, 0.0), 256, 3, 1).unwrap();
        let free = module_round_trip(&priced(0.0, 0.0), 256, 3, 1, NOOP, false).unwrap() / 2.0;
        assert!((free - plain).abs() < 0.01, "without VM prices the module path costs a message's: {free} vs {plain}");
        // The no-op runs 2 instructions: (100 + 2 x 50) cycles at 133 MHz per round trip.
        let priced_ = module_round_trip(&priced(50.0, 100.0), 256, 3, 1, NOOP, false).unwrap() / 2.0;
        let want = 200.0 / 133.0 / 2.0;
        assert!((priced_ - free - want).abs() < 0.01, "{} vs {want}", priced_ - free);
    }

    #[test]
    fn a_profile_whose_packets_are_too_small_is_refused_with_the_ones_that_fit() {
        let params = |name: &str, sizes: Vec<u32>| Params { profiles: vec![Profile::builtin(name)], nodes: vec![2], sizes, seed: 1, iters: 1 };
        for name in ["fm-lanai43", "fm-lanai43-wc", "elan3", "ib-sdr"] {
            let e = run(&params(name, vec![]), &mut |_, _| {}).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("gm2-lanai91") && !e.contains("elan3,"), "{e}");
        }
        // Sizes that fit one of its packets run.
        assert!(run(&params("elan3", vec![32, 256]), &mut |_, _| {}).is_ok());
    }

    #[test]
    fn module_broadcast_and_echo_run_in_the_simulator() {
        let p = Profile::builtin("gm2-lanai91");
        // Every rank checks its bytes and the module's flags (an error otherwise).
        let t5 = module_bcast(&p, 5, 1000, 2, 1).unwrap();
        let t2 = module_bcast(&p, 2, 1000, 2, 1).unwrap();
        assert!(t5 > t2 && t2 > 0.0, "{t2} {t5}");
        let echo = module_round_trip(&p, 64, 3, 1, ECHO, true).unwrap();
        assert!(echo > 0.0);
    }
}
