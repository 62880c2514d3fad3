//! The state every simulated component shares: virtual time, the event
//! queue, the one RNG, the nodes and the processes.
//!
//! Host processes reach it through an `Rc<RefCell<World>>` (they run on one
//! thread, polled by [`crate::Simulation`]); the simulator never holds the
//! borrow while it polls a process, so a process's library calls borrow it
//! only for their own duration.

use outboard_engine::NodeId;
use rand_chacha::ChaCha8Rng;

use crate::cost::CostModel;
use crate::nic::{NicInput, Node, PioPace};
use crate::queue::EventQueue;
use crate::time::Time;
use crate::wire::Wire;

/// What the event queue holds.
#[derive(Debug)]
pub(crate) enum Ev {
    /// A packet reaches a NIC.
    Arrive { node: u32, from: NodeId, bytes: Vec<u8> },
    /// A command posted by a port reaches its NIC (after the doorbell);
    /// `pio`: how the host is still writing its send data, for `pio_send`
    /// profiles.
    Command { node: u32, port: outboard_engine::PortId, cmd: outboard_engine::Command, pio: Option<PioPace> },
    /// A NIC's previous work is done; it takes its next input.
    NicFree(u32),
    /// A NIC's engine timer is due.
    Timer(u32),
    /// A process is due to run.
    Wake(u32),
    /// A node dies.
    Kill(u32),
}

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Events taken off the queue.
    pub events: u64,
    /// Inputs the NICs processed (engine calls).
    pub nic_inputs: u64,
    /// Packets the NICs transmitted (loopback included).
    pub packets: u64,
    /// Packets for a node that does not exist (dropped).
    pub misrouted: u64,
    /// Times a process was run.
    pub process_polls: u64,
}

/// A simulated process's scheduling state.
pub(crate) struct ProcState {
    pub node: u32,
    /// The process's own clock: ahead of `World::now` while it has charged
    /// host time it has not yet waited out.
    pub clock: Time,
    /// Waiting for a completion on one of its ports.
    pub waiting: bool,
    /// When its pending wake-up is due, if one is scheduled.
    pub wake_at: Option<Time>,
    /// Since when it has been waiting inside the library without doing
    /// anything else (cleared by any host charge): the time an FM host's
    /// per-packet handler could copy a message out as it arrived.
    pub idle_from: Option<Time>,
    pub alive: bool,
}

pub(crate) struct World {
    pub now: Time,
    pub queue: EventQueue<Ev>,
    pub rng: ChaCha8Rng,
    pub cost: CostModel,
    pub wire: Wire,
    pub nodes: Vec<Node>,
    pub procs: Vec<ProcState>,
    pub tx_buf: Vec<u8>,
    pub stats: SimStats,
}

impl World {
    /// Schedules process `pid` to run at `at`, unless it is already due
    /// earlier (it re-arms itself when it finds it is too early).
    pub(crate) fn wake(&mut self, pid: u32, at: Time) {
        let p = &mut self.procs[pid as usize];
        if p.wake_at.is_some_and(|w| w <= at) {
            return;
        }
        p.wake_at = Some(at);
        self.queue.push(at, Ev::Wake(pid));
    }

    /// Handles every event except running a process.
    pub(crate) fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, from, bytes } => self.nic_arrive(node, NicInput::Packet { from, bytes }),
            Ev::Command { node, port, cmd, pio } => self.nic_arrive(node, NicInput::Command { port, cmd, pio }),
            Ev::NicFree(node) => self.nic_free(node),
            Ev::Timer(node) => self.nic_timer(node),
            Ev::Kill(node) => self.kill(node),
            Ev::Wake(_) => unreachable!("processes are run by the simulation loop"),
        }
    }

    /// A node dies: its NIC stops, packets to it vanish, its processes
    /// never run again.
    fn kill(&mut self, node: u32) {
        let n = &mut self.nodes[node as usize];
        n.alive = false;
        n.inputs.clear();
        n.timer_at = None;
        n.timer_queued = None;
        for p in self.procs.iter_mut().filter(|p| p.node == node) {
            p.alive = false;
        }
    }
}
