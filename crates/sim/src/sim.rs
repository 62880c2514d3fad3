//! The simulation: builds the world and runs the event loop, polling
//! processes as their wake-ups come due.
//!
//! The executor is a few lines: each process is a boxed future; it is
//! polled only when an event of the queue says it is due (a sleep ended, a
//! completion became visible). Wakers are not used: the futures schedule
//! their own wake-ups in the queue, which is what keeps everything in
//! virtual time and deterministic.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use outboard_engine::{Engine, EngineConfig, NodeId, PacketIntegrity};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::cost::CostModel;
use crate::nic::{NicMemory, Node};
use crate::process::Proc;
use crate::profile::Profile;
use crate::queue::EventQueue;
use crate::time::{Dur, Time};
use crate::wire::{Wire, WireStats};
use crate::world::{Ev, ProcState, SimStats, World};

/// A simulation could not be set up.
#[derive(Debug, Error)]
pub enum SimError {
    /// The engine refused the configuration the profile implies.
    #[error("engine configuration: {0}")]
    Engine(#[from] outboard_engine::ConfigError),
    /// Zero nodes.
    #[error("a simulation needs at least one node")]
    NoNodes,
    /// Some processes never finished: they wait for something that will
    /// not come (a lost peer, a bug), or the time limit was reached.
    #[error("{unfinished} of {total} processes did not finish by {at:?} (seed {seed})")]
    Stalled {
        /// Processes still running.
        unfinished: usize,
        /// All processes.
        total: usize,
        /// Virtual time reached.
        at: Time,
        /// The seed that reproduces it.
        seed: u64,
    },
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunReport {
    /// Virtual time when the last event ran.
    pub end: Time,
    /// Simulator counters.
    pub stats: SimStats,
    /// Network counters.
    pub wire: WireStats,
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A simulated cluster: N nodes with real engines, a wire, a cost profile,
/// and the processes spawned on it. See the crate doc.
pub struct Simulation {
    world: Rc<RefCell<World>>,
    tasks: Vec<Option<Task>>,
    seed: u64,
}

impl Simulation {
    /// `nodes` nodes costed by `profile`, every random choice from `seed`.
    pub fn new(profile: &Profile, nodes: u32, seed: u64) -> Result<Simulation, SimError> {
        Simulation::with_config(profile, nodes, seed, |_| {})
    }

    /// The same, adjusting each engine's configuration (port count,
    /// timeouts) after the profile has set its MTU.
    pub fn with_config(
        profile: &Profile,
        nodes: u32,
        seed: u64,
        mut adjust: impl FnMut(&mut EngineConfig),
    ) -> Result<Simulation, SimError> {
        if nodes == 0 {
            return Err(SimError::NoNodes);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let job_key: u64 = rng.gen();
        let mtu = profile.nic.max_payload as usize + outboard_wire::HEADER_LEN + outboard_wire::DATA_FIXED_LEN;
        let mut v = Vec::with_capacity(nodes as usize);
        for i in 0..nodes {
            // Drawn as 32 bits, as before incarnations were 64: the seeded stream
            // of random numbers, and so every figure, stays the same.
            let mut cfg = EngineConfig::new(NodeId(i), job_key, u64::from(rng.gen::<u32>()));
            cfg.mtu = mtu;
            // Every datagram here is written by one of these engines and
            // crosses no network: a fast integrity check still catches the
            // wire model's corruption, and no MAC is computed per packet.
            cfg.integrity = PacketIntegrity::ClosedWorld;
            cfg.ack_delay = std::time::Duration::from_nanos((profile.nic.ack_delay_us * 1000.0).round() as u64);
            adjust(&mut cfg);
            v.push(Node::new(Engine::new(cfg, NicMemory::new(), Time::ZERO.to_engine())?));
        }
        let world = World {
            now: Time::ZERO,
            queue: EventQueue::new(),
            rng,
            cost: CostModel::new(profile),
            wire: Wire::new(nodes, profile.wire.switch_radix, profile.faults.clone()),
            nodes: v,
            procs: Vec::new(),
            tx_buf: vec![0; 65_536],
            spare_packets: Vec::new(),
            stats: SimStats::default(),
        };
        Ok(Simulation { world: Rc::new(RefCell::new(world)), tasks: Vec::new(), seed })
    }

    /// Keeps every node's large host buffers (4 KiB and up) allocated from
    /// now on as runs of equal bytes instead of bytes: exact, but a
    /// buffer of one repeated value (a benchmark's payload) costs a few
    /// bytes, not its length. Opt-in for runs at scale (the scale
    /// benchmark); the engine and host library are the same code, and
    /// addresses and events do not change.
    pub fn compact_payloads(&mut self) {
        for n in &mut self.world.borrow_mut().nodes {
            n.engine.dma_mut().host().set_compact(true);
        }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time now.
    pub fn now(&self) -> Time {
        self.world.borrow().now
    }

    /// Starts a process on `node`: `body` gets its [`Proc`] and returns the
    /// process's future. It first runs at the current time.
    pub fn spawn<F, Fut>(&mut self, node: u32, body: F)
    where
        F: FnOnce(Proc) -> Fut,
        Fut: Future<Output = ()> + 'static,
    {
        let pid = self.tasks.len() as u32;
        let now = {
            let mut w = self.world.borrow_mut();
            assert!((node as usize) < w.nodes.len(), "spawn on node {node} of {}", w.nodes.len());
            let now = w.now;
            w.procs.push(ProcState {
                node,
                clock: now,
                waiting: false,
                wake_at: None,
                idle_from: None,
                alive: true,
                handler: None,
                handler_time: Dur::ZERO,
                interrupts: 0,
            });
            now
        };
        let proc = Proc { world: self.world.clone(), pid, node };
        self.tasks.push(Some(Box::pin(body(proc))));
        self.world.borrow_mut().wake(pid, now);
    }

    /// Kills `node` at time `at`: its NIC stops and its processes never run
    /// again; packets to it are lost.
    pub fn kill_at(&mut self, node: u32, at: Time) {
        self.world.borrow_mut().queue.push(at, Ev::Kill(node));
    }

    /// Runs until no event is left; an error if a live process has not
    /// finished.
    pub fn run(&mut self) -> Result<RunReport, SimError> {
        self.run_until(Time(u64::MAX))
    }

    /// Runs events up to `limit`; an error if a live process has not
    /// finished by then.
    pub fn run_until(&mut self, limit: Time) -> Result<RunReport, SimError> {
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let pid = {
                let mut w = self.world.borrow_mut();
                match w.queue.peek_time() {
                    Some(t) if t <= limit => {}
                    _ => break,
                }
                let (t, ev) = w.queue.pop().expect("peeked");
                w.now = t;
                w.stats.events += 1;
                match ev {
                    Ev::Wake(pid) => {
                        let p = &mut w.procs[pid as usize];
                        if p.wake_at != Some(t) || !p.alive {
                            continue; // superseded, or its node died
                        }
                        p.wake_at = None;
                        p.waiting = false;
                        p.clock = p.clock.max(t);
                        w.stats.process_polls += 1;
                        pid
                    }
                    Ev::Interrupt { node, port } => {
                        let Some((pid, handler)) = w.interrupt_target(node, port) else { continue };
                        drop(w);
                        self.run_handler(pid, &*handler);
                        continue;
                    }
                    other => {
                        w.handle(other);
                        continue;
                    }
                }
            };
            let slot = &mut self.tasks[pid as usize];
            if let Some(task) = slot.as_mut() {
                if let Poll::Ready(()) = task.as_mut().poll(&mut cx) {
                    *slot = None;
                }
            }
        }
        let w = self.world.borrow();
        let total = self.tasks.len();
        let unfinished = self.tasks.iter().zip(&w.procs).filter(|(t, p)| t.is_some() && p.alive).count();
        if unfinished > 0 {
            return Err(SimError::Stalled { unfinished, total, at: w.now, seed: self.seed });
        }
        Ok(RunReport { end: w.now, stats: w.stats, wire: w.wire.stats() })
    }

    /// Runs an interrupt handler in process `pid` now: it starts after the
    /// delivery cost (`host.interrupt_us`), its library calls charge its
    /// own clock, and its whole time is then added to the process's clock:
    /// taken from the computation it interrupted, or delaying the wait it
    /// interrupted.
    fn run_handler(&mut self, pid: u32, handler: &dyn Fn()) {
        let now = {
            let mut w = self.world.borrow_mut();
            let (now, deliver) = (w.now, w.cost.host_interrupt);
            w.procs[pid as usize].handler = Some(now + deliver);
            now
        };
        handler();
        let mut w = self.world.borrow_mut();
        let p = &mut w.procs[pid as usize];
        let end = p.handler.take().expect("set above");
        let spent = end.since(now);
        p.clock = p.clock.max(now) + spent;
        p.handler_time += spent;
        p.interrupts += 1;
        p.idle_from = None;
        if p.waiting {
            // Whatever it waits for is looked at again once the handler's
            // time is over.
            let at = p.clock;
            w.wake(pid, at);
        }
    }

    /// Time process `pid` has spent in interrupt handlers, and how many
    /// interrupts it took.
    pub fn handler_time(&self, pid: u32) -> (Dur, u64) {
        let w = self.world.borrow();
        let p = &w.procs[pid as usize];
        (p.handler_time, p.interrupts)
    }

    /// Engine counters of `node` (for tests and reports).
    pub fn engine_stats(&self, node: u32) -> outboard_engine::Stats {
        self.world.borrow().nodes[node as usize].engine.stats().clone()
    }

    /// Time the NIC of `node` has spent on its inputs so far (see
    /// [`crate::experiments`]' utilisation figures): divided by the elapsed
    /// time, the fraction the firmware was not in its idle loop.
    pub fn nic_busy(&self, node: u32) -> Dur {
        self.world.borrow().nodes[node as usize].busy
    }

    /// Whether every live engine is quiet (nothing unacknowledged).
    pub fn engines_quiet(&self) -> bool {
        self.world.borrow().nodes.iter().filter(|n| n.alive).all(|n| n.engine.is_quiet())
    }

    /// The compiled cost model.
    pub fn cost(&self) -> CostModel {
        self.world.borrow().cost.clone()
    }

    /// A duration in the profile's terms (helper for experiments).
    pub fn us(us: f64) -> Dur {
        Dur::from_us(us)
    }
}
