//! Application-bypass broadcast under process skew (dissertation chapter 6,
//! section 6.3, Figures 6.4-6.6): MPICH's host-based broadcast, the same
//! tree with selective interrupts and a signal handler that forwards
//! (the real [`outboard_host::bypass::Bypass`]), and Outboard's offloaded
//! forwarding, side by side.
//!
//! The method is 6.3's: before each broadcast a barrier (MPICH's, host-based
//! pairwise exchange), then every member but the root computes for a random
//! time in 0..=max (the chapter's delay loop, max in steps of 50 us), then
//! calls the broadcast; the root calls at once. Figure 6.4 is the mean time
//! per member inside the call (root included); Figure 6.5 adds the time the
//! member's interrupt handlers took out of its delay loop (the chapter's
//! total minus the undisturbed delay). The chapter plots the *average*
//! skew between two processes: for delays uniform in 0..max that is max/3
//! (its 17 us and 333 us are max 50 and 1,000 us).
//!
//! The application-bypass member runs the host library's own code: its
//! call is [`Bypass::hold`] stepped between waits (the blocking call with
//! the simulator's await in place of the spin), and the simulator runs
//! [`Bypass::on_interrupt`] when the engine raises an interrupt for a
//! marked message, charging `host.interrupt_us` for delivery and the
//! handler's library calls (taking the message, the copy into each send
//! buffer) to its own clock. What is modelled outside the library: the copy
//! of a value out of its temporary slot into the user's buffer when it
//! arrived before the call (the library's read of its own slot is free in
//! the simulator; MPICH copied out of its unexpected queue, 6.3), charged
//! at the profile's copy rate.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{Endpoint, NodeId, PortId};
use outboard_host::bypass::Bypass;
use outboard_host::{BarrierAlgorithm, BcastMode, Group, HostError, Mode, Port};

use super::coll::world;
use super::multicast::MPICH_BINOMIAL;
use super::{ExperimentError, Outcome, Params, Row, Shared, XAxis};
use crate::process::{Proc, SimIo};
use crate::profile::Profile;
use crate::sim::Simulation;
use crate::time::Dur;

/// The root of every broadcast.
const ROOT: u32 = 0;
/// The bypass port's group id (its own tags).
const BYPASS_GROUP: outboard_engine::GroupId = outboard_engine::GroupId(2);
/// Temporary slots per member.
const SLOTS: usize = 4;

/// Which broadcast a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// MPICH's host-based broadcast: a member forwards only inside its call.
    NonBypass,
    /// Application bypass: selective interrupts, the handler forwards.
    Bypass,
    /// Outboard's offloaded broadcast: the engines forward.
    Offloaded,
}

impl Variant {
    /// Every variant, in the printed order.
    pub const ALL: [Variant; 3] = [Variant::NonBypass, Variant::Bypass, Variant::Offloaded];

    /// Short name for rows.
    pub fn name(self) -> &'static str {
        match self {
            Variant::NonBypass => "n",
            Variant::Bypass => "ab",
            Variant::Offloaded => "nic",
        }
    }
}

/// Mean time per member and broadcast, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BypassTimes {
    /// Inside the broadcast call (Figure 6.4).
    pub in_call: f64,
    /// The same plus the member's interrupt handlers (Figure 6.5).
    pub with_handler: f64,
    /// Interrupts taken per broadcast, over all members.
    pub interrupts: f64,
}

/// Runs 6.3's test: `n` members, `size`-byte broadcasts from rank 0, each
/// non-root member first computing a random time in 0..=`max_delay_us`,
/// one untimed broadcast then `iters` timed ones.
pub fn times(profile: &Profile, n: u32, size: u32, v: Variant, max_delay_us: f64, iters: u32, seed: u64) -> Result<BypassTimes, ExperimentError> {
    if n < 2 {
        return Err(ExperimentError::Param("a broadcast needs at least 2 nodes".into()));
    }
    if size > outboard_host::bypass::MAX_LEN {
        return Err(ExperimentError::Param(format!("application bypass is eager-only: {size} B > {}", outboard_host::bypass::MAX_LEN)));
    }
    let iters = iters.max(1);
    let mut sim = Simulation::with_config(profile, n, seed, |c| c.max_ports = 2)?;
    let copy = sim.cost().copy(size);
    // Per rank: time in the timed calls, handler time and interrupts.
    let out: Shared<Vec<(f64, f64, u64)>> = Rc::new(RefCell::new(vec![(0.0, 0.0, 0); n as usize]));
    let err: Shared<Option<String>> = Rc::new(RefCell::new(None));
    for rank in 0..n {
        let (out, err) = (out.clone(), err.clone());
        sim.spawn(rank, move |p: Proc| async move {
            let r = member(&p, n, rank, size, v, max_delay_us, iters, copy).await;
            match r {
                Ok(t) => out.borrow_mut()[rank as usize] = t,
                Err(e) => {
                    err.borrow_mut().get_or_insert(format!("rank {rank}: {e}"));
                }
            }
        });
    }
    sim.run()?;
    if let Some(e) = err.borrow_mut().take() {
        return Err(ExperimentError::Param(e));
    }
    let out = out.borrow();
    let per = f64::from(n) * f64::from(iters);
    Ok(BypassTimes {
        in_call: out.iter().map(|t| t.0).sum::<f64>() / per,
        with_handler: out.iter().map(|t| t.0 + t.1).sum::<f64>() / per,
        interrupts: out.iter().map(|t| t.2 as f64).sum::<f64>() / f64::from(iters),
    })
}

/// One member's run: (us in the timed calls, us in handlers meanwhile,
/// interrupts meanwhile).
#[allow(clippy::too_many_arguments)]
async fn member(p: &Proc, n: u32, rank: u32, size: u32, v: Variant, max_delay_us: f64, iters: u32, copy: Dur) -> Result<(f64, f64, u64), String> {
    let mut port = p.open_port(0).map_err(|e| e.to_string())?;
    let mut g = world(n, rank);
    let want: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let bypass = match v {
        Variant::Bypass => {
            let mut bp = p.open_port(1).map_err(|e| e.to_string())?;
            let (word, r) = Bypass::start_flag(&mut bp).map_err(|e| e.to_string())?;
            p.wait(&mut bp, r).await.map_err(|e| e.to_string())?;
            let members = (0..n).map(|i| Endpoint { node: NodeId(i), port: PortId(1), gen: 1 }).collect();
            let b = Rc::new(Bypass::with_flag(bp, word, members, rank, BYPASS_GROUP, SLOTS).map_err(|e| e.to_string())?);
            let h = b.clone();
            p.on_interrupt(PortId(1), move || h.on_interrupt());
            Some(b)
        }
        _ => None,
    };
    let (mut spent, mut h0, mut i0) = (0.0, Dur::ZERO, 0);
    for it in 0..=iters {
        barrier(p, &mut port, &mut g, bypass.as_deref()).await.map_err(|e| e.to_string())?;
        if it == 1 {
            (h0, i0) = p.handler_time();
        }
        if rank != ROOT {
            let d = p.skew(Dur::from_us(max_delay_us));
            p.compute(d).await;
        }
        let t = p.now();
        let mut data = if rank == ROOT { want.clone() } else { vec![0; size as usize] };
        match &bypass {
            Some(b) => {
                // A value that came before the call waits in a temporary
                // slot: copy it out (MPICH: out of the unexpected queue).
                let early = rank != ROOT && b.stats().received > it as u64;
                let mut held = b.hold();
                let mut call = held.bcast_call(ROOT, data.len()).map_err(|e| e.to_string())?;
                while !held.bcast_step(&mut call, &mut data).map_err(|e| e.to_string())? {
                    // The rest of the library's traffic (the barrier's last
                    // completions) is taken too, as MPICH's progress engine
                    // polls everything.
                    port.progress();
                    p.idle().await;
                }
                drop(held);
                if early {
                    p.charge(copy);
                }
                p.settle().await;
            }
            None => {
                let mode = if v == Variant::Offloaded { BcastMode::Offloaded } else { BcastMode::HostBased };
                let r = port.start_bcast(&mut g, mode, MPICH_BINOMIAL, ROOT, &data).map_err(|e| e.to_string())?;
                data = p.coll_wait(&mut port, r).await.map_err(|e| e.to_string())?;
            }
        }
        if data != want {
            return Err(format!("broadcast {it} delivered other bytes ({v:?})"));
        }
        if it > 0 {
            spent += p.now().since(t).as_us();
        }
    }
    let (h1, i1) = p.handler_time();
    Ok((spent, Dur(h1.0 - h0.0).as_us(), i1 - i0))
}

/// MPICH's MPI_Barrier (host-based pairwise exchange). An application-bypass
/// member waits inside its library with interrupts off and polls bypass
/// traffic meanwhile, as MPICH's progress engine did (6.2.3: signals off
/// "whenever the process is waiting for a receive").
async fn barrier(p: &Proc, port: &mut Port<SimIo>, g: &mut Group, bypass: Option<&Bypass<SimIo>>) -> Result<(), HostError> {
    let mut held = bypass.map(Bypass::hold);
    let mut r = port.start_barrier(g, Mode::HostBased, BarrierAlgorithm::PairwiseExchange)?;
    loop {
        if let Some(h) = held.as_mut() {
            h.progress();
        }
        if let Some(res) = port.coll_test(&mut r) {
            drop(held);
            p.settle().await;
            return res.map(|_| ());
        }
        p.idle().await;
    }
}

/// The chapter's figures at 32 nodes and 333 us average skew (max delay
/// 1,000 us): (size, Figure 6.4 factor id, Figure 6.5 factor id, handler
/// overhead id).
const PAPER: [(u32, &str, &str, &str); 4] = [
    (1, "bypass-bcast-foi-1", "bypass-total-foi-small", "bypass-handler-small"),
    (2048, "bypass-bcast-foi-2k", "bypass-total-foi-2k", "bypass-handler-2k"),
    (4096, "bypass-bcast-foi-4k", "bypass-total-foi-4k", "bypass-handler-4k"),
    (8192, "bypass-bcast-foi-8k", "bypass-total-foi-8k", "bypass-handler-8k"),
];

/// The max delay (us) of the chapter's 333 us average skew.
pub const PAPER_MAX_DELAY: u32 = 1000;

fn paper_ids(n: u32, size: u32, max_delay: u32) -> Option<(&'static str, &'static str, &'static str)> {
    if n != 32 || max_delay != PAPER_MAX_DELAY {
        return None;
    }
    PAPER.iter().find(|p| p.0 == size).map(|p| (p.1, p.2, p.3))
}

/// `outboard sim bcast-bypass`: 6.3's skew test for non-bypass (MPICH),
/// application-bypass and offloaded broadcasts. `--sizes` are message
/// sizes (default the chapter's 1, 2, 4, 8 B and 2, 4, 8 KB); `--nodes`
/// node counts (default 32; Figure 6.6 is the same at other counts).
pub(super) fn run(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let sizes = if p.sizes.is_empty() { vec![1, 2, 4, 8, 2048, 4096, 8192] } else { p.sizes.clone() };
    let nodes = if p.nodes.is_empty() { vec![32] } else { p.nodes.clone() };
    let delays: Vec<u32> = vec![0, 50, 100, 200, 400, PAPER_MAX_DELAY];
    let total = p.profiles.len() * nodes.len() * sizes.len() * delays.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for base in &p.profiles {
        let prof = base.at_mpi_level();
        for &n in &nodes {
            for &size in &sizes {
                // The non-bypass time by skew, for the knee.
                let mut curve: Vec<(u32, f64)> = Vec::new();
                for &d in &delays {
                    let mut t = [BypassTimes { in_call: 0.0, with_handler: 0.0, interrupts: 0.0 }; 3];
                    for (slot, v) in t.iter_mut().zip(Variant::ALL) {
                        *slot = times(&prof, n, size, v, f64::from(d), p.iters, p.seed)?;
                    }
                    let [nb, ab, nic] = t;
                    let series = format!("{} skew {:.0}us", prof.name, f64::from(d) / 3.0);
                    let ids = paper_ids(n, size, d);
                    let row = |metric, value, unit| Row::new(series.clone(), n, size, metric, value, unit);
                    let with = |r: Row, id: Option<&str>| match id {
                        Some(id) => r.with_paper(&[id]),
                        None => r,
                    };
                    rows.push(row("n bcast", nb.in_call, "us"));
                    rows.push(row("ab bcast", ab.in_call, "us"));
                    rows.push(row("nic bcast", nic.in_call, "us"));
                    rows.push(with(row("foi bcast", nb.in_call / ab.in_call, "x"), ids.map(|i| i.0)));
                    rows.push(row("ab total", ab.with_handler, "us"));
                    rows.push(with(row("foi total", nb.with_handler / ab.with_handler, "x"), ids.map(|i| i.1)));
                    rows.push(with(row("ab handler", ab.with_handler - ab.in_call, "us"), ids.map(|i| i.2)));
                    rows.push(row("ab irq/bcast", ab.interrupts, ""));
                    rows.push(row("n/nic", nb.in_call / nic.in_call, "x"));
                    curve.push((d, nb.in_call));
                    done += 1;
                    progress(done, total);
                }
                // Where the non-bypass time stops falling (the overlap of
                // the tree's waits with the delay loop) and starts rising.
                if let Some(&(d, _)) = curve.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
                    let r = Row::new(format!("{} knee", prof.name), n, size, "n min at", f64::from(d) / 3.0, "us");
                    rows.push(if n == 32 && size == 1 { r.with_paper(&["bypass-knee-skew"]) } else { r });
                }
            }
        }
    }
    Ok(Outcome {
        title: "Application-bypass broadcast under process skew: MPICH host-based (n), application bypass with \
                selective interrupts (ab) and offloaded forwarding (nic), root on time (6.3, Figures 6.4-6.6)"
            .into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "skew: the chapter's average skew between two members, max delay / 3 (delays uniform in 0..=max, \
             max 0, 50, 100, 200, 400, 1000 us)"
                .into(),
            "bcast: mean time per member inside the call (Figure 6.4); total: plus the member's interrupt handlers \
             (Figure 6.5); handler: total - bcast; foi: n / ab"
                .into(),
            "n min at: the average skew (of those run) at which the non-bypass time is least; the chapter's rises \
             once the skew exceeds 17 us"
                .into(),
            "32 PIII-700 / LANai 9.1 nodes: the chapter's 16 PIII-1GHz nodes and 4 LANai 9.2 cards are not \
             modelled (one profile per simulation)"
                .into(),
        ],
    })
}
