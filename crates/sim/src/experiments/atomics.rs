//! Atomic remote memory operations and the distributed MCS lock
//! (dissertation chapter 5, Figures 5.6-5.9).
//!
//! **Operations** (`atomics`, Figure 5.6): node 0 performs one operation
//! at a time on a 32-bit word at node 1, averaged over `iters`. Offloaded,
//! in the paper's three NIC variants: *mutex* (the NIC serialises with its
//! host by Peterson's mutex, 5.2.3, the value returned in an event),
//! *no-mutex* (the same without the mutex: what a NIC with atomic bus
//! transactions does) and *direct* (the mutex, the value DMAed into host
//! memory). The variants differ in the profile's `[atomic]` costs only:
//! the engine runs the same code. Host-based: a server process at node 1
//! receives the request as a tagged message, performs it with a local
//! atomic and sends the old value back, waiting in one of the paper's three
//! ways - *poll*, *spin-block* (poll `atomic.spin_us`, then block) and
//! *block-no-spin*; a blocked server pays `atomic.wakeup_us` before it runs.
//!
//! **Lock** (`lock`, Figure 5.7): 5.3's MCS lock, its home at node 0 (which
//! does not contend), contended by nodes 1..k; the figure is node 1's mean
//! lock+unlock time. Offloaded (no-mutex, as the paper ran it), and
//! host-based with a server thread per node: polling on an SMP kernel (a
//! CPU each), blocking without spinning on a uniprocessor kernel. The
//! simulator gives each process its own CPU, so the uniprocessor kernel is
//! modelled by its wake-ups only: a blocked server pays the wake-up before
//! each request; the main thread's share of the CPU is not taken away.
//!
//! **Utilisation** (`lock-cpu`, Figures 5.8 and 5.9): node 1 locks and
//! unlocks a lock homed at node 0 with a delay after each, for a range of
//! delays; over a window of `iters` x 1,000 us, the share of the home CPU
//! a counter process keeps (everything the blocking host-based server did
//! there is taken from it: uniprocessor kernel) and the share of time the
//! home NIC is not idle.
//!
//! The lock is the host library's `McsLock` and the server its
//! `AtomicServer`, driven through their split-phase calls: a simulated
//! process cannot block, so it waits between tests in virtual time (for a
//! completion, or polling its memory while the lock spins on its own
//! words). How a server waits, and what a wake-up costs, is the driver's
//! part: the experiment's model of the paper's three receive calls.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{AtomicOp, AtomicWidth, Completion, Endpoint, HostBuf, NodeId, PortId};
use outboard_host::atomic_server::AtomicServer;
use outboard_host::lock::{LockError, LockSlot, McsLock};
use outboard_host::{HostError, Port, RemoteWord};

use super::{ExperimentError, FirstError, Outcome, Params, Row, Shared, XAxis};
use crate::process::{Proc, SimIo};
use crate::profile::Profile;
use crate::sim::Simulation;
use crate::time::{Dur, Time};

/// How the old value of an offloaded operation comes back, and whether
/// host and NIC share a mutex: the paper's three NIC variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicVariant {
    /// Peterson's mutex, value in an event.
    Mutex,
    /// No mutex, value in an event.
    NoMutex,
    /// Peterson's mutex, value DMAed to the host (5.2.2's direct form).
    Direct,
}

/// How a host-based server waits for its next request (5.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostWait {
    /// `gm_receive`: polls without pause.
    Poll,
    /// `gm_blocking_receive`: polls `atomic.spin_us`, then blocks.
    SpinBlock,
    /// `gm_blocking_receive_no_spin`: blocks at once.
    BlockNoSpin,
}

/// Who performs the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The target's NIC.
    Nic(NicVariant),
    /// A server process at the target.
    Host(HostWait),
}

impl Via {
    fn label(self) -> &'static str {
        match self {
            Via::Nic(NicVariant::Mutex) => "nic-mutex",
            Via::Nic(NicVariant::NoMutex) => "nic-no-mutex",
            Via::Nic(NicVariant::Direct) => "nic-direct",
            Via::Host(HostWait::Poll) => "host-poll",
            Via::Host(HostWait::SpinBlock) => "host-spin-block",
            Via::Host(HostWait::BlockNoSpin) => "host-block-no-spin",
        }
    }

    /// The profile as this variant runs it (the mutex on or off).
    fn profile(self, p: &Profile) -> Profile {
        let mut p = p.clone();
        p.atomic.mutex = matches!(self, Via::Nic(NicVariant::Mutex | NicVariant::Direct));
        p
    }
}

/// The operations of Figure 5.6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// fetch&add.
    FetchAdd,
    /// fetch&write.
    Swap,
    /// compare&swap whose compare succeeds.
    CasHit,
    /// compare&swap whose compare fails.
    CasMiss,
}

impl OpKind {
    fn label(self) -> &'static str {
        match self {
            OpKind::FetchAdd => "fetch-add",
            OpKind::Swap => "swap",
            OpKind::CasHit => "cas-hit",
            OpKind::CasMiss => "cas-miss",
        }
    }

    /// The `i`th operation, given the word's value (which the single
    /// client always knows).
    fn op(self, i: u64, current: u64) -> AtomicOp {
        match self {
            OpKind::FetchAdd => AtomicOp::FetchAdd(1),
            OpKind::Swap => AtomicOp::Swap(i),
            OpKind::CasHit => AtomicOp::CompareSwap { compare: current, new: current + 1 },
            OpKind::CasMiss => AtomicOp::CompareSwap { compare: u64::from(u32::MAX), new: 7 },
        }
    }
}

/// Time a host-based server spent on the CPU for one request: from its
/// arrival (or the server's wake-up) to the reply posted.
#[derive(Debug, Clone, Copy)]
struct Served {
    at: Time,
    busy: Dur,
}

/// The host library's atomic server on `words` (registered under `key`),
/// waiting for each request as `wait` says and recording its CPU time per
/// request; it ends with the first request it serves after `stop` is set
/// ([`stop_server`] sends that one).
async fn serve(
    p: Proc,
    mut port: Port<SimIo>,
    (words, key): (HostBuf, u64),
    wait: HostWait,
    log: Shared<Vec<Served>>,
    stop: Shared<bool>,
) -> Result<(), HostError> {
    let cost = p.world.borrow().cost.clone();
    let mut server = AtomicServer::new();
    server.expose(key, words);
    loop {
        let waiting_from = p.now();
        while !server.arrived(&mut port)? {
            p.idle().await;
        }
        // Arrival: the process was inside the library from `waiting_from`.
        let arrived = p.now();
        let blocked = match wait {
            HostWait::Poll => false,
            HostWait::SpinBlock => arrived.since(waiting_from) > cost.host_spin_block,
            HostWait::BlockNoSpin => true,
        };
        if blocked {
            p.charge(cost.host_wakeup);
        }
        server.serve_arrived(&mut port)?;
        log.borrow_mut().push(Served { at: arrived, busy: p.now().since(arrived) });
        if *stop.borrow() {
            break;
        }
    }
    while !server.replies_sent(&mut port)? {
        p.idle().await;
    }
    Ok(())
}

/// Where a remote word is and who performs operations on it.
#[derive(Debug, Clone, Copy)]
struct Target {
    word: RemoteWord,
    /// The host-based server's port (host-based only).
    server: Option<Endpoint>,
}

/// One operation on `t`, waited for; returns the old value.
async fn remote(p: &Proc, port: &mut Port<SimIo>, t: Target, op: AtomicOp, direct: bool) -> Result<u64, HostError> {
    if let Some(server) = t.server {
        let w = t.word;
        let mut a = port.start_hb_atomic(server, w.key, w.offset, w.width, op)?;
        loop {
            if let Some(r) = port.test_hb_atomic(&mut a) {
                p.settle().await;
                return r;
            }
            p.idle().await;
        }
    }
    if direct {
        let d = port.start_atomic_direct(t.word, op)?;
        // The flag lands with the event (the engine writes both at once);
        // the host reads its memory once the event is there.
        p.idle().await;
        return port.wait_direct(d);
    }
    let r = port.start_atomic(t.word, op)?;
    match p.wait(port, r).await? {
        Completion::Atomic { value } => Ok(value),
        other => unreachable!("an atomic completed as {other:?}"),
    }
}

/// Ends a host-based server whose `stop` is set: one last request (a
/// fetch-and-add of 0 on word 0 of `key`) wakes it, and it ends after
/// serving that.
async fn stop_server(p: &Proc, port: &mut Port<SimIo>, server: Endpoint, key: u64) -> Result<(), HostError> {
    let word = RemoteWord { ep: server, key, offset: 0, width: AtomicWidth::W64 };
    remote(p, port, Target { word, server: Some(server) }, AtomicOp::FetchAdd(0), false).await.map(drop)
}

fn ep(node: u32, port: u8) -> Endpoint {
    Endpoint { node: NodeId(node), port: PortId(port), gen: 1 }
}

/// Waits (in virtual time) until `slot` is filled by another process.
async fn await_slot<T: Copy>(p: &Proc, slot: &Shared<Option<T>>) -> T {
    loop {
        if let Some(v) = *slot.borrow() {
            return v;
        }
        let t = p.now() + Dur::from_us(1.0);
        p.sleep_until(t).await;
    }
}

/// Mean latency in microseconds of `kind` performed `iters` times via `via`.
pub fn op_latency(profile: &Profile, via: Via, kind: OpKind, iters: u32, seed: u64) -> Result<f64, ExperimentError> {
    let iters = u64::from(iters.max(1));
    let profile = via.profile(profile);
    let mut sim = Simulation::with_config(&profile, 2, seed, |c| c.max_ports = 2)?;
    let err = FirstError::default();
    let key: Shared<Option<u64>> = Rc::new(RefCell::new(None));
    let span: Shared<Option<(Time, Time)>> = Rc::new(RefCell::new(None));
    let log = Rc::new(RefCell::new(Vec::new()));
    let stop: Shared<bool> = Rc::new(RefCell::new(false));
    // The target: its word, registered; a server on port 1 if host-based.
    {
        let (err, key, stop) = (err.clone(), key.clone(), stop.clone());
        sim.spawn(1, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let words = port.buffer(8)?;
                let k = p.register(&mut port, words).await?;
                *key.borrow_mut() = Some(k);
                if let Via::Host(wait) = via {
                    let server = p.open_port(1).expect("fresh port");
                    serve(p.clone(), server, (words, k), wait, log, stop).await?;
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    {
        let (err, key, span, stop) = (err.clone(), key.clone(), span.clone(), stop.clone());
        sim.spawn(0, move |p| async move {
            let r: Result<(), HostError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let key = await_slot(&p, &key).await;
                let server = matches!(via, Via::Host(_)).then(|| ep(1, 1));
                let t = Target {
                    word: RemoteWord { ep: ep(1, 0), key, offset: 0, width: AtomicWidth::W32 },
                    server,
                };
                let direct = via == Via::Nic(NicVariant::Direct);
                let mut current = 0u64;
                // Two warm-up operations, then the timed ones.
                let mut start = p.now();
                for i in 0..iters + 2 {
                    if i == 2 {
                        start = p.now();
                    }
                    let old = remote(&p, &mut port, t, kind.op(i, current), direct).await?;
                    current = kind.op(i, old).apply(AtomicWidth::W32, old);
                }
                *span.borrow_mut() = Some((start, p.now()));
                if let Some(s) = server {
                    *stop.borrow_mut() = true;
                    stop_server(&p, &mut port, s, key).await?;
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    sim.run()?;
    err.check()?;
    let (a, b) = span.borrow().expect("the client finished");
    Ok(b.since(a).as_us() / iters as f64)
}

/// The variants of Figure 5.6, in the figure's order.
pub const VARIANTS: [Via; 6] = [
    Via::Nic(NicVariant::Mutex),
    Via::Nic(NicVariant::NoMutex),
    Via::Nic(NicVariant::Direct),
    Via::Host(HostWait::Poll),
    Via::Host(HostWait::SpinBlock),
    Via::Host(HostWait::BlockNoSpin),
];

const OPS: [OpKind; 4] = [OpKind::FetchAdd, OpKind::Swap, OpKind::CasHit, OpKind::CasMiss];

/// Whether `p` is chapter 5's platform, whose figures the rows compare with.
fn paper_platform(p: &Profile) -> bool {
    p.name == "gm15-lanai91"
}

/// The paper's id for a Figure 5.6 bar the text quotes.
fn op_paper_id(via: Via, kind: OpKind) -> Option<&'static str> {
    if kind != OpKind::CasHit {
        return None;
    }
    match via {
        Via::Nic(NicVariant::NoMutex) => Some("atomic-cas-hit-nic"),
        Via::Host(HostWait::Poll) => Some("atomic-cas-hit-host-poll"),
        Via::Host(HostWait::SpinBlock) => Some("atomic-cas-hit-host-spin-block"),
        Via::Host(HostWait::BlockNoSpin) => Some("atomic-cas-hit-host-block"),
        _ => None,
    }
}

/// Figure 5.6.
pub(super) fn run_ops(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let total = p.profiles.len() * VARIANTS.len() * OPS.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        let mut cas = std::collections::HashMap::new();
        for via in VARIANTS {
            for kind in OPS {
                let us = op_latency(prof, via, kind, p.iters, p.seed)?;
                let mut row = Row::new(format!("{} {}", prof.name, via.label()), 2, 4, kind.label(), us, "us");
                if let Some(id) = op_paper_id(via, kind).filter(|_| paper_platform(prof)) {
                    row = row.with_paper(&[id]);
                }
                rows.push(row);
                if kind == OpKind::CasHit {
                    cas.insert(via.label(), us);
                }
                done += 1;
                progress(done, total);
            }
        }
        let nic = cas["nic-no-mutex"];
        for (host, id) in [("host-poll", "atomic-cas-hit-foi-poll"), ("host-block-no-spin", "atomic-cas-hit-foi-block")] {
            let row = Row::new(format!("{} {host}/nic-no-mutex", prof.name), 2, 4, "cas-hit foi", cas[host] / nic, "x");
            rows.push(if paper_platform(prof) { row.with_paper(&[id]) } else { row });
        }
    }
    Ok(Outcome {
        title: "Atomic operations (Figure 5.6): latency of one remote 32-bit operation".into(),
        x: XAxis::Column("op"),
        rows,
        notes: vec![
            "nic-mutex / nic-direct: Peterson's mutex with the host (5.2.3), two waited-for DMAs per operation ([atomic] mutex_dma_us); nic-direct: value and flag DMAed to the host, no receive token".into(),
            "host-*: a server process at the target; spin-block polls [atomic] spin_us, a blocked server pays [atomic] wakeup_us".into(),
        ],
    })
}

/// Tests `lock`'s operation until it is done, waiting between tests as a
/// host would: for a completion while an atomic is under way, polling its
/// memory every `host.poll_us` while the lock spins on its own words
/// (written by the peers' engines, which raise no event).
async fn drive(p: &Proc, port: &mut Port<SimIo>, lock: &mut McsLock) -> Result<(), LockError> {
    let step = p.world.borrow().cost.host_poll.max(Dur::from_us(0.05));
    loop {
        let from = p.now();
        if lock.test(port)? {
            p.settle().await;
            return Ok(());
        }
        if lock.spinning() {
            // A test charges its look at memory; the poll interval is the
            // floor.
            p.sleep_until(from + step).await;
        } else {
            p.idle().await;
        }
    }
}

/// What a lock run measured.
#[derive(Debug, Clone, Copy)]
pub struct LockRun {
    /// Node 1's mean lock+unlock time, us.
    pub latency_us: f64,
    /// Node 1's lock+unlock pairs per millisecond.
    pub rate_per_ms: f64,
    /// Lock+unlock pairs of all contenders per millisecond (the lock's
    /// throughput: meaningful at any scale, where node 1 alone may get
    /// too few turns in the window).
    pub total_per_ms: f64,
    /// Share of the window the home's host-based server was on the CPU.
    pub home_cpu_taken: f64,
    /// Share of the window the home NIC was not idle.
    pub home_nic_busy: f64,
}

/// Contenders on nodes 1..=`contenders` lock and unlock a lock homed at
/// node 0 (which only serves) for `window`, each with `delay` after its lock
/// and after its unlock; `via` says who performs the atomics.
pub fn lock_run(profile: &Profile, via: Via, contenders: u32, delay: Dur, window: Dur, seed: u64) -> Result<LockRun, ExperimentError> {
    let profile = via.profile(profile);
    let nodes = contenders + 1;
    let mut sim = Simulation::with_config(&profile, nodes, seed, |c| c.max_ports = 2)?;
    let err = FirstError::default();
    let keys: Shared<Vec<Option<(HostBuf, u64)>>> = Rc::new(RefCell::new(vec![None; nodes as usize]));
    let ready: Shared<Option<()>> = Rc::new(RefCell::new(None));
    let finished = Rc::new(RefCell::new(0u32));
    let cycles: Shared<Vec<Time>> = Rc::new(RefCell::new(Vec::new()));
    let all = Rc::new(RefCell::new(0u64));
    let home_log: Shared<Vec<Served>> = Rc::new(RefCell::new(Vec::new()));
    let host = matches!(via, Via::Host(_));
    let stop: Shared<bool> = Rc::new(RefCell::new(false));
    // Start after set-up; measure from one window's warm-up on.
    let start = Time::ZERO + Dur::from_us(500.0);
    let (from, to) = (start + Dur::from_us(200.0), start + Dur::from_us(200.0) + window);
    for node in 0..nodes {
        let (err, keys, ready, finished, cycles, all, stop) =
            (err.clone(), keys.clone(), ready.clone(), finished.clone(), cycles.clone(), all.clone(), stop.clone());
        let log = if node == 0 { home_log.clone() } else { Rc::new(RefCell::new(Vec::new())) };
        // The words and their key, and a server thread if host-based.
        let words: Shared<Option<(HostBuf, u64)>> = Rc::new(RefCell::new(None));
        if let Via::Host(wait) = via {
            let (err, words, stop) = (err.clone(), words.clone(), stop.clone());
            sim.spawn(node, move |p| async move {
                let r: Result<(), HostError> = async {
                    let port = p.open_port(1).expect("fresh port");
                    let w = await_slot(&p, &words).await;
                    serve(p.clone(), port, w, wait, log, stop).await
                }
                .await;
                err.record(r);
            });
        }
        sim.spawn(node, move |p| async move {
            let r: Result<(), ExperimentError> = async {
                let mut port = p.open_port(0).expect("fresh port");
                let own = port.buffer(outboard_host::lock::LOCK_WORDS_LEN)?;
                let key = p.register(&mut port, own).await?;
                *words.borrow_mut() = Some((own, key));
                keys.borrow_mut()[node as usize] = Some((own, key));
                if keys.borrow().iter().all(Option::is_some) {
                    *ready.borrow_mut() = Some(());
                }
                await_slot(&p, &ready).await;
                let table: Vec<LockSlot> = keys
                    .borrow()
                    .iter()
                    .enumerate()
                    .map(|(n, k)| LockSlot { ep: ep(n as u32, 0), key: k.expect("all registered").1, offset: 0 })
                    .collect();
                let mut lock = McsLock::from_table(table.clone(), node, 0, own, key)?;
                if host {
                    lock = lock.over_servers((0..nodes).map(|n| ep(n, 1)).collect())?;
                }
                if node != 0 {
                    p.sleep_until(start).await;
                    while p.now() < to {
                        lock.start_acquire(&mut port)?;
                        drive(&p, &mut port, &mut lock).await?;
                        if delay > Dur::ZERO {
                            p.compute(delay).await;
                        }
                        lock.start_release(&mut port)?;
                        drive(&p, &mut port, &mut lock).await?;
                        if node == 1 {
                            cycles.borrow_mut().push(p.now());
                        }
                        let now = p.now();
                        if now >= from && now <= to {
                            *all.borrow_mut() += 1;
                        }
                        if delay > Dur::ZERO {
                            p.compute(delay).await;
                        }
                    }
                }
                // The last contender to finish stops every server.
                *finished.borrow_mut() += 1;
                if host && *finished.borrow() == nodes {
                    *stop.borrow_mut() = true;
                    for (n, slot) in table.iter().enumerate() {
                        stop_server(&p, &mut port, ep(n as u32, 1), slot.key).await?;
                    }
                }
                Ok(())
            }
            .await;
            err.record(r);
        });
    }
    // The home NIC's busy time over the window (the processes are still
    // running at its ends, which `run_until` reports as a stall).
    let run_to = |sim: &mut Simulation, t: Time| match sim.run_until(t) {
        Ok(_) | Err(crate::sim::SimError::Stalled { .. }) => Ok(()),
        Err(e) => Err(ExperimentError::from(e)),
    };
    run_to(&mut sim, from)?;
    let busy_from = sim.nic_busy(0);
    run_to(&mut sim, to)?;
    let busy_to = sim.nic_busy(0);
    sim.run()?;
    err.check()?;
    let c: Vec<Time> = cycles.borrow().iter().copied().filter(|t| *t >= from && *t <= to).collect();
    let (latency_us, rate) = if c.len() >= 2 {
        let span = c[c.len() - 1].since(c[0]).as_us();
        let n = (c.len() - 1) as f64;
        (span / n - 2.0 * delay.as_us(), n / span * 1000.0)
    } else {
        (f64::NAN, 0.0)
    };
    let total = *all.borrow();
    let taken: f64 = home_log.borrow().iter().filter(|s| s.at >= from && s.at < to).map(|s| s.busy.as_us()).sum();
    Ok(LockRun {
        latency_us,
        rate_per_ms: rate,
        total_per_ms: total as f64 / window.as_us() * 1000.0,
        home_cpu_taken: taken / window.as_us(),
        home_nic_busy: Dur(busy_to.0 - busy_from.0).as_us() / window.as_us(),
    })
}

/// Figure 5.7: lock+unlock latency with 2..=7 contenders (or `nodes`).
pub(super) fn run_lock(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let counts: Vec<u32> = if p.nodes.is_empty() { (2..=7).collect() } else { p.nodes.clone() };
    let variants = [
        ("nic", Via::Nic(NicVariant::NoMutex)),
        ("host-smp-poll", Via::Host(HostWait::Poll)),
        ("host-up-block", Via::Host(HostWait::BlockNoSpin)),
    ];
    let total = p.profiles.len() * counts.len() * variants.len();
    let window = Dur::from_us(1000.0 * f64::from(p.iters.max(1)));
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        let mut best = [0.0f64; 2];
        for &k in &counts {
            let mut lat = [0.0; 3];
            for (i, (label, via)) in variants.iter().enumerate() {
                let r = lock_run(prof, *via, k, Dur::ZERO, window, p.seed)?;
                lat[i] = r.latency_us;
                rows.push(Row::new(format!("{} {label}", prof.name), k, 0, "lock+unlock", r.latency_us, "us"));
                rows.push(Row::new(format!("{} {label}", prof.name), k, 0, "lock rate", r.total_per_ms, "1/ms"));
                rows.push(Row::new(format!("{} {label}", prof.name), k, 0, "home nic busy", 100.0 * r.home_nic_busy, "%"));
                done += 1;
                progress(done, total);
            }
            for (j, label) in ["smp", "up"].iter().enumerate() {
                let f = lat[j + 1] / lat[0];
                best[j] = best[j].max(f);
                rows.push(Row::new(format!("{} host-{label}/nic", prof.name), k, 0, "foi", f, "x"));
            }
        }
        let n = counts.iter().copied().max().unwrap_or(0);
        let up = Row::new(format!("{} host-up/nic", prof.name), n, 0, "max foi", best[1], "x");
        let smp = Row::new(format!("{} host-smp/nic", prof.name), n, 0, "max foi", best[0], "x");
        if paper_platform(prof) {
            rows.push(up.with_paper(&["lock-foi-up"]));
            rows.push(smp.with_paper(&["lock-foi-smp"]));
        } else {
            rows.extend([up, smp]);
        }
    }
    Ok(Outcome {
        title: "Distributed MCS lock (Figure 5.7): node 1's lock+unlock time with nodes 1..N contending, home at node 0".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "nic: offloaded, no mutex; host-smp-poll: server thread polling on its own CPU; host-up-block: server blocking without spin, paying [atomic] wakeup_us per request (the CPU shared with the main thread is not modelled otherwise)".into(),
            format!("window {} us per point after 200 us of warm-up; 'nodes' = contenders; lock rate: lock+unlock pairs of all contenders per ms; lock+unlock NaN: node 1 had fewer than two turns in the window", window.as_us()),
        ],
    })
}

/// Figures 5.8 and 5.9: the home's CPU and NIC against the lock rate.
pub(super) fn run_lock_cpu(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let delays: Vec<u32> = if p.sizes.is_empty() { vec![0, 10, 20, 50, 100, 200, 500] } else { p.sizes.clone() };
    let variants = [("nic", Via::Nic(NicVariant::NoMutex)), ("host-up-block", Via::Host(HostWait::BlockNoSpin))];
    let total = p.profiles.len() * delays.len() * variants.len();
    let window = Dur::from_us(1000.0 * f64::from(p.iters.max(1)));
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        // Slopes of NIC busy share against rate, for the growth ratio.
        let mut pts: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
        for &d in &delays {
            for (i, (label, via)) in variants.iter().enumerate() {
                let r = lock_run(prof, *via, 1, Dur::from_us(f64::from(d)), window, p.seed)?;
                let s = format!("{} {label}", prof.name);
                rows.push(Row::new(s.clone(), 2, d, "rate", r.rate_per_ms, "1/ms"));
                rows.push(Row::new(s.clone(), 2, d, "home cpu left", 100.0 * (1.0 - r.home_cpu_taken), "%"));
                rows.push(Row::new(s, 2, d, "home nic busy", 100.0 * r.home_nic_busy, "%"));
                pts[i].push((r.rate_per_ms, r.home_nic_busy));
                done += 1;
                progress(done, total);
            }
        }
        let slope = |v: &[(f64, f64)]| {
            let n = v.len() as f64;
            let (mx, my) = (v.iter().map(|p| p.0).sum::<f64>() / n, v.iter().map(|p| p.1).sum::<f64>() / n);
            let num: f64 = v.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            let den: f64 = v.iter().map(|p| (p.0 - mx).powi(2)).sum();
            num / den
        };
        let ratio = slope(&pts[1]) / slope(&pts[0]);
        let growth = Row::new(format!("{} host/nic", prof.name), 2, 0, "nic growth", ratio, "x");
        rows.push(if paper_platform(prof) { growth.with_paper(&["lock-nic-growth"]) } else { growth });
    }
    Ok(Outcome {
        title: "Home-node utilisation (Figures 5.8, 5.9): node 1 locks and unlocks with a delay after each; home CPU left to a counter and home NIC not idle".into(),
        x: XAxis::Column("delay us"),
        rows,
        notes: vec![
            "home cpu left: 100 % less the blocking host-based server's CPU time (wake-up, receive, operation, reply) over the window: a uniprocessor counter's iterations relative to idle".into(),
            "nic growth: slope of home NIC busy share against lock rate, host-based over offloaded (least squares over the delays)".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloaded_operations_beat_the_host_based_server_and_blocking_costs_the_wake_up() {
        let p = Profile::builtin("gm15-lanai91");
        let nic = op_latency(&p, Via::Nic(NicVariant::NoMutex), OpKind::CasHit, 5, 1).unwrap();
        let mutex = op_latency(&p, Via::Nic(NicVariant::Mutex), OpKind::CasHit, 5, 1).unwrap();
        let poll = op_latency(&p, Via::Host(HostWait::Poll), OpKind::CasHit, 5, 1).unwrap();
        let block = op_latency(&p, Via::Host(HostWait::BlockNoSpin), OpKind::CasHit, 5, 1).unwrap();
        assert!(nic < poll && poll < block, "{nic} {poll} {block}");
        assert!(mutex > nic);
        let c = crate::cost::CostModel::new(&p);
        assert!((block - poll - c.host_wakeup.as_us()).abs() < 0.5, "{block} - {poll}");
    }

    #[test]
    fn the_lock_admits_every_contender_and_the_host_based_one_takes_home_cpu() {
        let p = Profile::builtin("gm15-lanai91");
        let w = Dur::from_us(1000.0);
        let nic = lock_run(&p, Via::Nic(NicVariant::NoMutex), 3, Dur::ZERO, w, 1).unwrap();
        let host = lock_run(&p, Via::Host(HostWait::BlockNoSpin), 3, Dur::ZERO, w, 1).unwrap();
        assert!(nic.latency_us.is_finite() && host.latency_us > nic.latency_us, "{nic:?} {host:?}");
        assert_eq!(nic.home_cpu_taken, 0.0);
        assert!(host.home_cpu_taken > 0.0);
        // Per lock+unlock, the home NIC works more for the host-based lock.
        let per_cycle = |r: &LockRun| r.home_nic_busy / r.rate_per_ms;
        assert!(per_cycle(&host) > per_cycle(&nic), "{host:?} {nic:?}");
    }
}
