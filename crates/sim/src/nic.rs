//! A node's NIC: the real engine as a serialised resource.
//!
//! Inputs (a packet off the wire, a command from a port, a timer) queue up
//! in arrival order. The NIC takes one at a time: it calls the engine, turns
//! the [`Work`](outboard_engine::Work) the engine reports into busy time
//! with the cost model, hands each completion to the host when the work
//! before it is done, then transmits each packet the engine has, charging
//! each one before the next starts. Inputs that arrive meanwhile wait: that
//! queueing is what makes a slow NIC processor a bottleneck, as on a 33 MHz
//! LANai.
//!
//! Part of a message's NIC time may be pipeline latency instead of busy
//! time (`CostModel::nic_command_lat`, `nic_tx_lat`, `nic_rx_lat`,
//! `nic_event_lat`): a DMA engine or the packet interface works on it while
//! the processor takes the next input, so a packet leaves, reaches the
//! processor, or its completion reaches the host that much later, and
//! back-to-back messages overlap in it. Packets still leave in the order
//! the NIC handed them over (the uplink is a FIFO in hand-over order).
//!
//! The engine reaches host memory through [`NicMemory`]: bytes a host is
//! still writing by PIO are not there yet, and the NIC starts the work
//! that read them (a packet's transmission, a multi-send's copy) only once
//! they are.

mod host_memory;
mod memory;

use std::collections::VecDeque;

use outboard_engine::{Command, CommandError, Engine, Event, NodeId, OpError, PortId, Work};

pub(crate) use memory::{NicMemory, PioPace};

use crate::time::{Dur, Time};
use crate::world::{Ev, World};

/// Something for the NIC to do.
#[derive(Debug)]
pub(crate) enum NicInput {
    /// A datagram arrived from `from`.
    Packet { from: NodeId, bytes: Vec<u8> },
    /// A port posted a command (with the pace of the host's PIO writes of
    /// its data, if it is still writing them).
    Command { port: PortId, cmd: Command, pio: Option<PioPace> },
    /// The engine's timer is due.
    Timer,
}

/// Completions waiting for a port's process.
#[derive(Default)]
pub(crate) struct PortSlot {
    /// (time the host can see it, event), in time order.
    pub events: VecDeque<(Time, Event)>,
    /// The process that opened the port.
    pub owner: Option<u32>,
    /// Receives completed from messages the engine held because they came
    /// before the receive was posted: an MPI layer copies such a message
    /// twice (into its unexpected queue, then to the user's buffer).
    pub unexpected: Vec<outboard_engine::OpId>,
    /// What the owner runs when the engine interrupts it
    /// ([`crate::Proc::on_interrupt`]).
    pub handler: Option<std::rc::Rc<dyn Fn()>>,
}

/// One node: its NIC (engine plus queue) and its ports' completion queues.
pub(crate) struct Node {
    pub engine: Engine<NicMemory>,
    pub inputs: VecDeque<NicInput>,
    pub busy_until: Time,
    pub free_scheduled: bool,
    /// The engine's current deadline.
    pub timer_at: Option<Time>,
    /// The earliest timer event in the queue for this node. Deadlines
    /// mostly move later (every acknowledgement restarts the retransmission
    /// timer), so a new event is queued only when the deadline moves
    /// earlier; a due event re-queues itself for a later deadline. Queuing
    /// one per engine call left millions of stale events in the heap at
    /// 65,536 nodes.
    pub timer_queued: Option<Time>,
    pub alive: bool,
    pub ports: Vec<PortSlot>,
    /// Time the NIC spent on inputs so far (from taking each to the end of
    /// its last charge): the complement of the firmware's idle loop, which
    /// the dissertation instrumented (5.4.3).
    pub busy: Dur,
}

impl Node {
    pub fn new(engine: Engine<NicMemory>) -> Node {
        let ports = (0..engine.config().max_ports).map(|_| PortSlot::default()).collect();
        Node {
            engine,
            inputs: VecDeque::new(),
            busy_until: Time::ZERO,
            free_scheduled: false,
            timer_at: None,
            timer_queued: None,
            alive: true,
            ports,
            busy: Dur::ZERO,
        }
    }
}

/// A command the engine refused on arrival becomes a failed completion: the
/// host already went on (the post returned), as with GM, whose host
/// library learns of such failures only through its event queue.
fn refused(err: CommandError) -> OpError {
    match err {
        CommandError::PeerUnreachable(n) => OpError::PeerUnreachable(n),
        CommandError::BadDestination => OpError::NoSuchPort,
        // The host checks tokens, length and the port before posting (see
        // `SimIo::post`); these can only mean the port was closed meanwhile.
        CommandError::PortNotOpen(_)
        | CommandError::NoSendToken
        | CommandError::NoRecvToken
        | CommandError::NoCollToken
        | CommandError::TooLong { .. } => OpError::PortGone,
    }
}

impl World {
    /// An input reaches `node`'s NIC now.
    pub(crate) fn nic_arrive(&mut self, node: u32, input: NicInput) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        if !n.alive {
            return;
        }
        n.inputs.push_back(input);
        if n.free_scheduled {
            return;
        }
        if n.busy_until <= now {
            self.nic_run(node);
        } else {
            n.free_scheduled = true;
            let at = n.busy_until;
            self.queue.push(at, Ev::NicFree(node));
        }
    }

    /// The NIC of `node` finished its previous work.
    pub(crate) fn nic_free(&mut self, node: u32) {
        let n = &mut self.nodes[node as usize];
        n.free_scheduled = false;
        if n.alive && !n.inputs.is_empty() {
            self.nic_run(node);
        }
    }

    /// The engine's timer fired.
    pub(crate) fn nic_timer(&mut self, node: u32) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        if n.timer_queued != Some(now) {
            return; // an earlier event took over
        }
        n.timer_queued = None;
        match n.timer_at {
            Some(d) if d <= now => {
                n.timer_at = None;
                self.nic_arrive(node, NicInput::Timer);
            }
            Some(d) => {
                n.timer_queued = Some(d);
                self.queue.push(d, Ev::Timer(node));
            }
            None => {}
        }
    }

    /// Processes the next input of an idle NIC, starting now.
    ///
    /// The call's work is charged before the packets it sends leave, with
    /// one exception: a received packet whose value the engine passes on
    /// (`Work::coll_relays_out`: an inner member forwarding a broadcast
    /// piece) is forwarded first and written into host memory after, its
    /// completions following that write. GM-2's NIC forwarded a multicast
    /// packet "before, and independently of, handing it to its host" (003).
    /// The engine reports relays itself: from the packet alone the
    /// simulator could not tell a forward from an acknowledgement.
    fn nic_run(&mut self, node: u32) {
        let Some(input) = self.nodes[node as usize].inputs.pop_front() else { return };
        self.stats.nic_inputs += 1;
        let start = self.now;
        let mut clock = start;
        let ni = node as usize;
        let n = &mut self.nodes[ni];
        n.engine.dma_mut().set_now(start);
        let mut posted = None;
        let mut posted_port = PortId(0);
        let refusal = match input {
            NicInput::Packet { from, bytes } => {
                n.engine.handle_packet(start.to_engine(), from, &bytes);
                self.recycle_packet(bytes);
                None
            }
            NicInput::Timer => {
                n.engine.handle_timeout(start.to_engine());
                None
            }
            NicInput::Command { port, cmd, pio } => {
                posted = Some(cmd);
                posted_port = port;
                if let (Some(pace), Command::Send { buf, .. } | Command::RdmaWrite { buf, .. } | Command::MultiSend { buf, .. }) =
                    (pio, cmd)
                {
                    n.engine.dma_mut().pio_write(start, buf, pace);
                }
                let refusal = n.engine.handle_command(start.to_engine(), port, cmd).err().map(|e| Event {
                    port,
                    op: cmd.op(),
                    result: Err(refused(e)),
                });
                // The engine reads a multi-send's payload whole here; FM's
                // NIC sent it packet by packet as the host wrote it.
                if let (Some(pace), Command::MultiSend { buf, .. }) = (pio, cmd) {
                    n.engine.dma_mut().pio_shared(start, port, buf, pace);
                }
                refusal
            }
        };
        let n = &mut self.nodes[ni];
        let mut work = n.engine.take_work();
        // A posted receive that wrote data at once took a held message.
        if let Some(Command::Recv { op, .. }) = posted {
            if work.dma_written > 0 {
                if let Some(slot) = n.ports.get_mut(usize::from(posted_port.0)) {
                    slot.unexpected.push(op);
                }
            }
        }
        // Work on send data the host is still writing waits for it.
        if let Some(ready) = n.engine.dma_mut().take_ready() {
            clock = clock.max(ready);
        }
        // A relayed packet goes out before its value is written to the host.
        let deferred_write = if posted.is_none() && work.coll_relays_out > 0 {
            std::mem::take(&mut work.dma_written)
        } else {
            0
        };
        clock += match &posted {
            Some(cmd) => self.cost.nic_command_work(&work, cmd),
            None => self.cost.nic_work(&work),
        };
        if let Some(ev) = refusal {
            clock += self.cost.nic_event;
            self.deliver(node, ev, clock + self.cost.nic_event_lat);
        }
        // A command's packets wait for the DMA of its data from the host
        // (besides the send pipeline every packet passes).
        let pipeline = self.cost.nic_tx_lat + if posted.is_some() { self.cost.nic_command_lat } else { Dur::ZERO };
        // An atomic's reply waits for its read-modify-write's DMAs, which
        // the processor does not wait out.
        let pipeline = pipeline + if work.atomics > 0 { self.cost.nic_atomic_lat } else { Dur::ZERO };
        let defer_events = deferred_write > 0;
        if !defer_events {
            clock = self.drain_events(node, clock);
        }
        loop {
            let n = &mut self.nodes[ni];
            n.engine.dma_mut().set_now(clock);
            let Some(tx) = n.engine.poll_transmit(clock.to_engine(), &mut self.tx_buf) else { break };
            // A packet of a send the host is still writing by PIO leaves
            // once the host has written it (FM's streams).
            let work = n.engine.take_work();
            let mem = n.engine.dma_mut();
            let ready = mem.take_ready().or_else(|| mem.packet_ready(work.multi_copy));
            let begin = ready.map_or(clock, |r| clock.max(r));
            clock = begin + self.cost.nic_work(&work);
            let bytes = self.packet_bytes_from_tx(tx.len);
            self.transmit(node, tx.dst, bytes, begin + pipeline, clock + pipeline);
            if !defer_events {
                clock = self.drain_events(node, clock);
            }
        }
        if defer_events {
            clock += self.cost.nic_work(&Work { dma_written: deferred_write, ..Work::default() });
            clock = self.drain_events(node, clock);
        }
        let n = &mut self.nodes[ni];
        match n.engine.poll_timeout() {
            Some(d) => {
                let d = Time::from_engine(d).max(clock);
                n.timer_at = Some(d);
                if n.timer_queued.is_none_or(|q| d < q) {
                    n.timer_queued = Some(d);
                    self.queue.push(d, Ev::Timer(node));
                }
            }
            None => n.timer_at = None,
        }
        let n = &mut self.nodes[ni];
        n.busy_until = clock;
        n.busy += clock.since(start);
        if !n.inputs.is_empty() {
            n.free_scheduled = true;
            self.queue.push(clock, Ev::NicFree(node));
        }
    }

    fn drain_events(&mut self, node: u32, mut clock: Time) -> Time {
        while let Some(e) = self.nodes[node as usize].engine.poll_event() {
            clock += self.cost.nic_event;
            self.deliver(node, e, clock + self.cost.nic_event_lat);
        }
        // Selective interrupts: read the ports' flags only once their
        // completions are handed over (the engine's order). Raising one
        // costs the NIC an event's work; it reaches the host as an event
        // does.
        while let Some(irq) = self.nodes[node as usize].engine.poll_interrupt() {
            clock += self.cost.nic_event;
            self.queue.push(clock + self.cost.nic_event_lat, Ev::Interrupt { node, port: irq.port });
        }
        clock
    }

    /// The process and handler an interrupt for `port` of `node` goes to,
    /// if the node and its owner are alive and the owner has a handler.
    pub(crate) fn interrupt_target(&self, node: u32, port: PortId) -> Option<(u32, std::rc::Rc<dyn Fn()>)> {
        let n = &self.nodes[node as usize];
        let slot = n.ports.get(usize::from(port.0))?;
        let pid = slot.owner?;
        (n.alive && self.procs[pid as usize].alive).then(|| slot.handler.clone()).flatten().map(|h| (pid, h))
    }

    /// Hands completion `e` to its port's process, visible from `at`.
    pub(crate) fn deliver(&mut self, node: u32, e: Event, at: Time) {
        let Some(slot) = self.nodes[node as usize].ports.get_mut(usize::from(e.port.0)) else { return };
        slot.events.push_back((at, e));
        if let Some(pid) = slot.owner {
            if self.procs[pid as usize].waiting {
                self.procs[pid as usize].waiting = false;
                self.wake(pid, at);
            }
        }
    }

    /// Puts a packet on the wire (or loops it back to this NIC); it reaches
    /// the receiving NIC's processor after the receive pipeline.
    fn transmit(&mut self, src: u32, dst: NodeId, bytes: Vec<u8>, begin: Time, end: Time) {
        self.stats.packets += 1;
        if dst.0 == src {
            self.queue.push(end + self.cost.nic_rx_lat, Ev::Arrive { node: src, from: NodeId(src), bytes });
            return;
        }
        if dst.0 >= self.wire.nodes() {
            self.stats.misrouted += 1;
            return;
        }
        let Some(d) = self.wire.send(&self.cost, &mut self.rng, src, dst.0, bytes.len(), begin, end) else { return };
        let mut bytes = bytes;
        if let Some(i) = d.corrupt_at {
            bytes[i] ^= 0x5a;
        }
        if let Some(t) = d.duplicate_at {
            self.queue.push(t + self.cost.nic_rx_lat, Ev::Arrive { node: dst.0, from: NodeId(src), bytes: bytes.clone() });
        }
        self.queue.push(d.at + self.cost.nic_rx_lat, Ev::Arrive { node: dst.0, from: NodeId(src), bytes });
    }
}
