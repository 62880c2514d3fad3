//! The cost model: a profile compiled into integer picosecond charges.
//!
//! Everything the engine did in one call ([`Work`]) becomes NIC busy time;
//! host-library calls become host CPU time. The charges are linear in the
//! counts (a + b x bytes), as the papers' own models are, and are computed
//! in integers so that a sum of charges is exact and independent of the
//! order in which it was added up.

use outboard_engine::{Command, Work};

use crate::profile::Profile;
use crate::time::{Dur, PerByte};

/// A profile's charges in simulator units.
#[derive(Debug, Clone)]
pub struct CostModel {
    /// Host: fixed cost of a send.
    pub host_send: Dur,
    /// Host: per byte of a send the host copies.
    pub host_send_byte: PerByte,
    /// Host: fixed cost of taking a received message.
    pub host_recv: Dur,
    /// Host: per byte of a received message.
    pub host_recv_byte: PerByte,
    /// Host: per byte of the message layer's copy (eager protocol).
    pub host_copy_byte: PerByte,
    /// Host: messages this long or longer are not copied.
    pub host_copy_below: u32,
    /// Messages from this size on go by rendezvous (`HostCosts::rendezvous_from_bytes`).
    pub rendezvous_from: Option<u32>,
    /// The profile's measured crossovers for choices by size.
    pub tuning: crate::profile::Tuning,
    /// The rendezvous writes instead of reading (`HostCosts::rendezvous_write`).
    pub rendezvous_write: bool,
    /// Host: posting a receive.
    pub host_post_recv: Dur,
    /// Host: taking another completion.
    pub host_event: Dur,
    /// Host: an empty poll.
    pub host_poll: Dur,
    /// Host: interrupt or signal delivery.
    pub host_interrupt: Dur,
    /// Bus: doorbell latency.
    pub doorbell: Dur,
    /// Bus: one DMA set up.
    pub dma_setup: Dur,
    /// Bus: per DMA byte.
    pub dma_byte: PerByte,
    /// Whether send data crosses by host PIO (no DMA read charged).
    pub pio_send: bool,
    /// Payload bytes of one packet: the unit in which a PIO host hands a
    /// send to its NIC (see [`CostModel::send_visible`]).
    pub packet_payload: u32,
    /// NIC: per command.
    pub nic_command: Dur,
    /// NIC: per packet out.
    pub nic_tx_packet: Dur,
    /// NIC: per packet in.
    pub nic_rx_packet: Dur,
    /// NIC: per posted receive (instead of `nic_command`).
    pub nic_recv_post: Dur,
    /// NIC: extra per received collective packet that carries data.
    pub nic_coll_data_rx: Dur,
    /// NIC: per acknowledgement-only packet out (instead of `nic_tx_packet`).
    pub nic_ack_tx: Dur,
    /// NIC: per collective packet that repeats its step's value to another rank.
    pub nic_copy_tx: Dur,
    /// NIC: per acknowledgement-only packet in (instead of `nic_rx_packet`).
    pub nic_ack_rx: Dur,
    /// NIC: per collective-protocol packet out (instead of `nic_tx_packet`).
    pub nic_proto_tx: Dur,
    /// NIC: per collective-protocol packet in (instead of `nic_rx_packet`).
    pub nic_proto_rx: Dur,
    /// NIC: per completion event.
    pub nic_event: Dur,
    /// NIC: per timer expiry.
    pub nic_timer: Dur,
    /// NIC: per payload byte out.
    pub nic_tx_byte: PerByte,
    /// NIC: per byte in.
    pub nic_rx_byte: PerByte,
    /// NIC: per integer element combined.
    pub nic_combine_int: Dur,
    /// NIC: per floating-point element combined.
    pub nic_combine_float: Dur,
    /// NIC: per NICVM instruction executed.
    pub nic_vm_instruction: Dur,
    /// NIC: per NICVM module invocation.
    pub nic_vm_invoke: Dur,
    /// NIC pipeline latency, not busy time: a host command's packets leave
    /// this much later (the send data's DMA from host memory).
    pub nic_command_lat: Dur,
    /// NIC pipeline latency: every packet leaves this much after its
    /// processor charge (the packet interface's send DMA).
    pub nic_tx_lat: Dur,
    /// NIC pipeline latency: every packet reaches the processor this much
    /// after it arrives (the packet interface's receive DMA).
    pub nic_rx_lat: Dur,
    /// NIC pipeline latency: every completion reaches the host this much
    /// after the processor wrote it (the DMA into host memory).
    pub nic_event_lat: Dur,
    /// NIC: per atomic read-modify-write (`Work::atomics`): the operation,
    /// and with the host/NIC mutex its two waited-for DMAs and checks.
    pub nic_atomic: Dur,
    /// NIC pipeline latency of an atomic: its reply leaves this much later
    /// (the DMAs of the read-modify-write across the bus), the processor
    /// meanwhile free.
    pub nic_atomic_lat: Dur,
    /// Host: waking a blocked atomic server (interrupt, context switch).
    pub host_wakeup: Dur,
    /// Host: how long a spin-then-block atomic server polls first.
    pub host_spin_block: Dur,
    /// Host: one uncached access across the bus to NIC memory.
    pub pci_access: Dur,
    /// Host: one pass of Peterson's wait loop without a bus read.
    pub host_spin: Dur,
    /// Whether host and NIC serialise atomics with Peterson's mutex.
    pub atomic_mutex: bool,
    /// Wire: per byte on a link.
    pub link_byte: PerByte,
    /// Wire: one cable.
    pub cable: Dur,
    /// Wire: one switch.
    pub switch_hop: Dur,
}

fn cycles(c: f64, mhz: f64) -> Dur {
    Dur::from_us(c / mhz)
}

impl CostModel {
    /// Compiles a (validated) profile.
    pub fn new(p: &Profile) -> CostModel {
        let mhz = p.nic.clock_mhz;
        CostModel {
            host_send: Dur::from_us(p.host.send_us),
            host_send_byte: PerByte::from_us(p.host.send_us_per_byte),
            host_recv: Dur::from_us(p.host.recv_us),
            host_recv_byte: PerByte::from_us(p.host.recv_us_per_byte),
            host_copy_byte: PerByte::from_us(p.host.copy_us_per_byte),
            host_copy_below: p.host.copy_below_bytes,
            rendezvous_from: p.host.rendezvous_from_bytes,
            tuning: p.tuning,
            rendezvous_write: p.host.rendezvous_write,
            host_post_recv: Dur::from_us(p.host.post_recv_us),
            host_event: Dur::from_us(p.host.event_us),
            host_poll: Dur::from_us(p.host.poll_us),
            host_interrupt: Dur::from_us(p.host.interrupt_us),
            doorbell: Dur::from_us(p.host_nic.doorbell_us),
            dma_setup: Dur::from_us(p.host_nic.dma_setup_us),
            dma_byte: PerByte::from_us(p.host_nic.dma_us_per_byte),
            pio_send: p.host_nic.pio_send,
            packet_payload: p.nic.max_payload,
            nic_command: cycles(p.nic.command_cycles, mhz),
            nic_tx_packet: cycles(p.nic.tx_packet_cycles, mhz),
            nic_rx_packet: cycles(p.nic.rx_packet_cycles, mhz),
            nic_recv_post: cycles(p.nic.recv_post_cycles.unwrap_or(p.nic.command_cycles), mhz),
            nic_coll_data_rx: cycles(p.nic.coll_data_rx_cycles.unwrap_or(0.0), mhz),
            nic_ack_tx: cycles(p.nic.ack_tx_cycles.unwrap_or(p.nic.tx_packet_cycles), mhz),
            nic_copy_tx: cycles(p.nic.copy_tx_cycles.unwrap_or(p.nic.tx_packet_cycles), mhz),
            nic_ack_rx: cycles(p.nic.ack_rx_cycles.unwrap_or(p.nic.rx_packet_cycles), mhz),
            nic_proto_tx: cycles(p.coll_proto.map_or(p.nic.tx_packet_cycles, |c| c.tx_cycles), mhz),
            nic_proto_rx: cycles(p.coll_proto.map_or(p.nic.rx_packet_cycles, |c| c.rx_cycles), mhz),
            nic_event: cycles(p.nic.event_cycles, mhz),
            nic_timer: cycles(p.nic.timer_cycles, mhz),
            nic_tx_byte: PerByte::from_us(p.nic.tx_us_per_byte),
            nic_rx_byte: PerByte::from_us(p.nic.rx_us_per_byte),
            nic_combine_int: cycles(p.nic.combine_int_cycles, mhz),
            nic_combine_float: cycles(p.nic.combine_float_cycles, mhz),
            nic_vm_instruction: cycles(p.nic.vm_instruction_cycles.unwrap_or(0.0), mhz),
            nic_vm_invoke: cycles(p.nic.vm_invoke_cycles.unwrap_or(0.0), mhz),
            nic_command_lat: cycles(p.nic.pipeline.command, mhz),
            nic_tx_lat: cycles(p.nic.pipeline.tx, mhz),
            nic_rx_lat: cycles(p.nic.pipeline.rx, mhz),
            nic_event_lat: cycles(p.nic.pipeline.event, mhz),
            nic_atomic: {
                let a = &p.atomic;
                let mutex = if a.mutex {
                    2.0 * a.mutex_dma_us.unwrap_or(p.host_nic.dma_setup_us) + a.mutex_cycles / mhz
                } else {
                    0.0
                };
                Dur::from_us(a.op_cycles / mhz + mutex)
            },
            nic_atomic_lat: Dur::from_us(p.atomic.latency_us),
            host_wakeup: Dur::from_us(p.atomic.wakeup_us.unwrap_or(p.host.interrupt_us)),
            host_spin_block: Dur::from_us(p.atomic.spin_us),
            pci_access: Dur::from_us(p.atomic.pci_access_us),
            host_spin: Dur::from_us(p.atomic.host_spin_us),
            atomic_mutex: p.atomic.mutex,
            link_byte: PerByte::from_us(p.wire.link_us_per_byte),
            cable: Dur::from_us(p.wire.cable_latency_us),
            switch_hop: Dur::from_us(p.wire.switch_latency_us),
        }
    }

    /// NIC busy time for the work of one engine call.
    ///
    /// Processor time: per command, packet and timer, per element a
    /// reduction combines (integer and floating point apart), and per
    /// received collective packet that carries data (`coll_data_in`).
    /// Acknowledgement-only packets, and collective packets repeating their
    /// step's value to a further rank, are charged their own (smaller)
    /// prices instead of the full packet's: the engine reports them as
    /// subsets of its packets, so each datagram is charged exactly once. Data movement: the
    /// send DMA's pace per payload byte read for transmission, the receive
    /// side per byte taken off the wire, and a bus DMA (set-up plus bytes)
    /// for payload read from or written to host memory - except send data
    /// the host already wrote by PIO.
    pub fn nic_work(&self, w: &Work) -> Dur {
        let (acks_out, acks_in) = (w.acks_out.min(w.packets_out), w.acks_in.min(w.packets_in));
        let copies = w.coll_copies_out.min(w.packets_out - acks_out);
        let proto_out = w.nic_coll_out.min(w.packets_out - acks_out - copies);
        let proto_in = w.nic_coll_in.min(w.packets_in - acks_in);
        let mut d = Dur(self.nic_command.0 * w.commands
            + self.nic_tx_packet.0 * (w.packets_out - acks_out - copies - proto_out)
            + self.nic_ack_tx.0 * acks_out
            + self.nic_copy_tx.0 * copies
            + self.nic_proto_tx.0 * proto_out
            + self.nic_rx_packet.0 * (w.packets_in - acks_in - proto_in)
            + self.nic_ack_rx.0 * acks_in
            + self.nic_proto_rx.0 * proto_in
            + self.nic_timer.0 * w.timers
            + self.nic_combine_int.0 * w.combine_int
            + self.nic_combine_float.0 * w.combine_float
            + self.nic_coll_data_rx.0 * w.coll_data_in
            + self.nic_atomic.0 * w.atomics
            + self.nic_vm_instruction.0 * w.vm_instructions
            + self.nic_vm_invoke.0 * w.nicvm_invocations);
        d += self.nic_tx_byte.for_bytes(w.payload_out);
        d += self.nic_rx_byte.for_bytes(w.bytes_in);
        let bus_read = if self.pio_send { 0 } else { w.dma_read };
        for bytes in [bus_read, w.dma_written] {
            if bytes > 0 {
                d += self.dma_setup + self.dma_byte.for_bytes(bytes);
            }
        }
        // A direct-form atomic reply makes no receive token (5.2.2): its
        // completion event, which the NIC charges `nic_event` as it hands
        // it over, is given back here; its value and flag are the DMA above.
        Dur(d.0.saturating_sub(self.nic_event.0 * w.atomic_direct))
    }

    /// The host's side of Peterson's mutex with its NIC (5.2.3) when the
    /// NIC holds the critical section for `nic_holds` more: set its
    /// `interested` flag and `turn` (two stores into NIC memory), read
    /// the NIC's flag (in host memory: cheap), and while waiting read
    /// `turn` across the bus with exponential backoff - on passes 0, 2, 5,
    /// 10, 19, ... (skip 1, then 2, then 4, ...) - then clear the flag
    /// after the operation. Returns the host time the mutex costs (the
    /// operation itself excluded).
    pub fn host_mutex(&self, nic_holds: Dur) -> Dur {
        let mut t = Dur(2 * self.pci_access.0);
        // The first check of `turn`, then backoff until the NIC is out.
        t += self.pci_access;
        let (mut pass, mut next_read, mut skip) = (0u64, 2u64, 2u64);
        while t.0 < 2 * self.pci_access.0 + nic_holds.0 {
            pass += 1;
            if pass == next_read {
                t += self.pci_access;
                next_read = pass + skip + 1;
                skip *= 2;
            } else {
                t += self.host_spin;
            }
            if self.host_spin.0 == 0 && self.pci_access.0 == 0 {
                break;
            }
        }
        // Leaving: clear `interested` (one store across the bus).
        t + self.pci_access
    }

    /// NIC busy time for the engine call that took command `cmd`: as
    /// [`CostModel::nic_work`], except that a posted receive is charged the
    /// receive-token price instead of a command's.
    pub fn nic_command_work(&self, w: &Work, cmd: &Command) -> Dur {
        if !matches!(cmd, Command::Recv { .. }) || w.commands == 0 {
            return self.nic_work(w);
        }
        let rest = Work { commands: w.commands - 1, ..*w };
        self.nic_work(&rest) + self.nic_recv_post
    }

    /// Host time to start a send of `len` bytes.
    pub fn send(&self, len: u32) -> Dur {
        self.host_send + self.host_send_byte.for_bytes(u64::from(len)) + self.copy(len)
    }

    /// Host time the message layer spends copying a `len`-byte message
    /// between the user's buffer and a pinned one (at the sender, and again
    /// at each receiver): MPICH-GM's eager protocol below its limit, nothing
    /// above it or at the communication-library level.
    pub fn copy(&self, len: u32) -> Dur {
        if len < self.host_copy_below {
            self.host_copy_byte.for_bytes(u64::from(len))
        } else {
            Dur::ZERO
        }
    }

    /// Time from the start of a host send of `len` bytes until the NIC can
    /// take it (before the doorbell). A host that DMA-describes its send
    /// hands it over whole, after [`CostModel::send`]. A PIO host (FM)
    /// writes the data into the NIC a packet at a time and the NIC may start
    /// once the first packet is written; its later packets wait for the
    /// host's writes (`nic::NicMemory`), which go on at
    /// `host_send_byte` while the NIC transmits.
    pub fn send_visible(&self, len: u32) -> Dur {
        if self.pio_send {
            // The message layer's copy (if any) is of the whole message,
            // before the first packet is written.
            self.host_send + self.copy(len) + self.host_send_byte.for_bytes(u64::from(len.min(self.packet_payload)))
        } else {
            self.send(len)
        }
    }

    /// The part of [`CostModel::recv`] for a `len`-byte message that a PIO
    /// host (FM, whose handler copies each packet out as it lands) did
    /// while it waited `window` for the message to arrive: the per-byte
    /// copy of the packets before the last, as far as the window covered
    /// it. Zero for hosts that take whole messages.
    pub fn recv_overlap(&self, len: u32, window: Dur) -> Dur {
        if !self.pio_send || len <= self.packet_payload || self.packet_payload == 0 {
            return Dur::ZERO;
        }
        let before_last = (len - 1) / self.packet_payload * self.packet_payload;
        self.host_recv_byte.for_bytes(u64::from(before_last)).min(window)
    }

    /// Host time to take a received message of `len` bytes.
    pub fn recv(&self, len: u32) -> Dur {
        self.host_recv + self.host_recv_byte.for_bytes(u64::from(len)) + self.copy(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_collective_packets_pay_the_copy_price() {
        let c = CostModel::new(&Profile::builtin("gm-lanai43"));
        assert!(c.nic_copy_tx < c.nic_tx_packet);
        let w = Work { packets_out: 3, coll_copies_out: 2, ..Work::default() };
        assert_eq!(c.nic_work(&w), Dur(c.nic_tx_packet.0 + 2 * c.nic_copy_tx.0));
        // Absent from a profile: the full price, as before.
        let fm = CostModel::new(&Profile::builtin("fm-lanai43"));
        assert_eq!(fm.nic_copy_tx, fm.nic_tx_packet);
    }

    #[test]
    fn fm_transmit_of_one_packet_is_the_papers_xmit() {
        let c = CostModel::new(&Profile::builtin("fm-lanai43"));
        let w = Work { packets_out: 1, bytes_out: 1536 + 88, dma_read: 1536, payload_out: 1536, ..Work::default() };
        // 1.3958 + 0.0075 x 1536 = 12.9158 us (dissertation 2.1).
        assert_eq!(c.nic_work(&w), Dur(12_915_800));
        assert_eq!(c.send(1536), Dur(49_019_900));
    }

    #[test]
    fn acknowledgements_are_charged_their_own_price_once() {
        let p = Profile::builtin("gm-lanai43");
        let c = CostModel::new(&p);
        assert!(c.nic_ack_tx < c.nic_tx_packet && c.nic_ack_rx < c.nic_rx_packet);
        // Three datagrams out (one an ack), two in (one an ack).
        let w = Work { packets_out: 3, acks_out: 1, packets_in: 2, acks_in: 1, ..Work::default() };
        let want = Dur(2 * c.nic_tx_packet.0 + c.nic_ack_tx.0 + c.nic_rx_packet.0 + c.nic_ack_rx.0);
        assert_eq!(c.nic_work(&w), want);
        // Only acks: no full-price packet at all.
        let w = Work { packets_out: 2, acks_out: 2, packets_in: 1, acks_in: 1, ..Work::default() };
        assert_eq!(c.nic_work(&w), Dur(2 * c.nic_ack_tx.0 + c.nic_ack_rx.0));
        // A profile that does not price acks charges them as full packets.
        let mut old = p.clone();
        (old.nic.ack_tx_cycles, old.nic.ack_rx_cycles) = (None, None);
        let c = CostModel::new(&old);
        assert_eq!(c.nic_work(&w), Dur(2 * c.nic_tx_packet.0 + c.nic_rx_packet.0));
        // An inconsistent tally (more acks than packets) never underflows.
        let w = Work { packets_out: 1, acks_out: 2, ..Work::default() };
        assert_eq!(c.nic_work(&w), c.nic_tx_packet);
    }

    #[test]
    fn a_posted_receive_is_charged_the_receive_token_price() {
        use outboard_engine::{HostBuf, OpId, RecvMatch};
        let c = CostModel::new(&Profile::builtin("gm-lanai43"));
        assert!(c.nic_recv_post < c.nic_command);
        let buf = HostBuf { addr: 0, len: 8 };
        let recv = Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf };
        let w = Work { commands: 1, ..Work::default() };
        assert_eq!(c.nic_command_work(&w, &recv), c.nic_recv_post);
        // The receive matched a waiting message: the delivery is charged
        // as usual on top.
        let w = Work { commands: 1, dma_written: 8, ..Work::default() };
        assert_eq!(
            c.nic_command_work(&w, &recv),
            c.nic_recv_post + c.nic_work(&Work { dma_written: 8, ..Work::default() })
        );
        // Any other command keeps the command price.
        let cancel = Command::Cancel { op: OpId(2), target: OpId(1) };
        let w = Work { commands: 1, ..Work::default() };
        assert_eq!(c.nic_command_work(&w, &cancel), c.nic_command);
    }

    #[test]
    fn collective_data_packets_the_engine_reports_pay_the_collective_price() {
        let mut p = Profile::builtin("gm-lanai91");
        let c = CostModel::new(&p);
        assert!(c.nic_coll_data_rx > Dur::ZERO);
        let plain = Work { packets_in: 2, ..Work::default() };
        let data = Work { coll_data_in: 2, ..plain };
        assert_eq!(c.nic_work(&data), c.nic_work(&plain) + Dur(2 * c.nic_coll_data_rx.0));
        p.nic.coll_data_rx_cycles = None;
        assert_eq!(CostModel::new(&p).nic_coll_data_rx, Dur::ZERO);
    }

    #[test]
    fn atomics_pay_their_work_the_mutex_its_dmas_and_a_direct_reply_no_event() {
        let mut p = Profile::builtin("gm15-lanai91");
        p.atomic.mutex = false;
        let c = CostModel::new(&p);
        let rmw = Work { packets_in: 1, dma_read: 4, dma_written: 4, ..Work::default() };
        let with = Work { atomics: 1, ..rmw };
        assert!(c.nic_atomic > Dur::ZERO);
        assert_eq!(c.nic_work(&with), c.nic_work(&rmw) + c.nic_atomic);
        // The mutex: two waited-for DMAs (dma_setup, as mutex_dma_us is
        // absent) and its cycles, per operation.
        p.atomic.mutex = true;
        let m = CostModel::new(&p);
        let mutex = Dur::from_us(2.0 * p.host_nic.dma_setup_us + p.atomic.mutex_cycles / p.nic.clock_mhz);
        assert_eq!(m.nic_atomic, c.nic_atomic + mutex);
        // A direct reply's completion is its DMA, not an event.
        let reply = Work { packets_in: 1, dma_written: 16, ..Work::default() };
        let direct = Work { atomic_direct: 1, ..reply };
        assert_eq!(c.nic_work(&direct), Dur(c.nic_work(&reply).0 - c.nic_event.0));
        // Without the section an atomic costs its packets and DMAs only.
        let plain = CostModel::new(&Profile::builtin("gm-lanai91"));
        assert_eq!(plain.nic_work(&with), plain.nic_work(&rmw));
        assert_eq!(plain.nic_atomic_lat, Dur::ZERO);
    }

    #[test]
    fn the_hosts_side_of_the_mutex_reads_turn_with_exponential_backoff() {
        let mut p = Profile::builtin("gm15-lanai91");
        (p.atomic.pci_access_us, p.atomic.host_spin_us) = (1.0, 0.01);
        let c = CostModel::new(&p);
        // Uncontended: two stores, one read of `turn`, one store to leave.
        assert_eq!(c.host_mutex(Dur::ZERO), Dur::from_us(4.0));
        // Waiting 10 us after its stores: the host leaves within one bus
        // read of the NIC leaving (reads on passes 0, 2, 5, 10, 19, ...,
        // the passes between 0.01 us each), then clears its flag.
        let t = c.host_mutex(Dur::from_us(10.0));
        assert!(t >= Dur::from_us(13.0) && t < Dur::from_us(14.0), "{t:?}");
    }

    #[test]
    fn combining_is_charged_per_element_by_type() {
        let c = CostModel::new(&Profile::builtin("gm-lanai91"));
        let base = c.nic_work(&Work::default());
        let int = c.nic_work(&Work { combine_int: 4, ..Work::default() });
        let float = c.nic_work(&Work { combine_float: 4, ..Work::default() });
        assert_eq!(int, base + Dur(c.nic_combine_int.0 * 4));
        assert_eq!(float, base + Dur(c.nic_combine_float.0 * 4));
        assert!(float > int, "the LANai emulates floating point in software");
    }
}
