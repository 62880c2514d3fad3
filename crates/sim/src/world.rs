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
use crate::time::{Dur, Time};
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
    /// A NIC's interrupt reaches the process owning `port` of `node`
    /// (selective interrupts, application bypass): its handler runs.
    Interrupt { node: u32, port: outboard_engine::PortId },
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
    /// While an interrupt handler runs: the handler's own clock, which the
    /// library calls it makes charge instead of `clock` (the time is
    /// added to `clock` when it returns: stolen from whatever the process
    /// was doing).
    pub handler: Option<Time>,
    /// Time spent in interrupt handlers (delivery included) so far.
    pub handler_time: Dur,
    /// Interrupts delivered to this process so far.
    pub interrupts: u64,
}

impl ProcState {
    /// The clock library calls charge now: the handler's while one runs.
    pub fn cur(&self) -> Time {
        self.handler.unwrap_or(self.clock)
    }

    /// Sets the clock library calls charge (see [`ProcState::cur`]).
    pub fn set_cur(&mut self, t: Time) {
        match &mut self.handler {
            Some(h) => *h = t,
            None => self.clock = t,
        }
    }
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
    /// Buffers of small packets the NICs have processed, for the next
    /// small packets sent (see [`World::packet_bytes_from_tx`]).
    pub spare_packets: Vec<Vec<u8>>,
    pub stats: SimStats,
}

/// Packets up to this many bytes (acknowledgements, barrier and small
/// collective messages: most packets of a large simulation) reuse buffers.
const SMALL_PACKET: usize = 256;
/// Spare small-packet buffers kept at most (1 MiB of them).
const SPARE_PACKETS_MAX: usize = 4096;

impl World {
    /// The first `len` bytes of `tx_buf` as a packet, in a recycled buffer
    /// if it is small: a fresh allocation per packet, freed at the
    /// receiving NIC, was about 5 % of a 1,024-node host-based barrier's
    /// time (perf: malloc and free). Only buffers of one size class are
    /// kept, so a spare never holds more than `SMALL_PACKET`.
    pub(crate) fn packet_bytes_from_tx(&mut self, len: usize) -> Vec<u8> {
        let bytes = &self.tx_buf[..len];
        if bytes.len() <= SMALL_PACKET {
            if let Some(mut v) = self.spare_packets.pop() {
                v.clear();
                v.extend_from_slice(bytes);
                return v;
            }
            let mut v = Vec::with_capacity(SMALL_PACKET);
            v.extend_from_slice(bytes);
            return v;
        }
        bytes.to_vec()
    }

    /// Takes back a packet's buffer once its NIC is done with it.
    pub(crate) fn recycle_packet(&mut self, bytes: Vec<u8>) {
        if bytes.capacity() == SMALL_PACKET && self.spare_packets.len() < SPARE_PACKETS_MAX {
            self.spare_packets.push(bytes);
        }
    }

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
            Ev::Wake(_) | Ev::Interrupt { .. } => unreachable!("processes are run by the simulation loop"),
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
