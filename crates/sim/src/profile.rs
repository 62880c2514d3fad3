//! Hardware profiles: the data files under `profiles/` that say what each
//! step costs on a given machine.
//!
//! A profile is TOML a user can copy and edit; every parameter is documented
//! in the built-in files with its source. The built-in profiles are embedded
//! with `include_str!` so the `outboard` binary works anywhere. Loading
//! checks every value (finite, not negative, sizes in range) and names the
//! offending field, so a typo in an edited profile is an error message, not
//! a silently wrong figure.

use outboard_host::{BcastMode, LinkCosts};
use serde::Deserialize;
use thiserror::Error;

/// A profile could not be used.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// The file is not valid TOML for a profile (unknown or missing key,
    /// wrong type).
    #[error("profile {name}: {source}")]
    Parse {
        /// Profile name or path.
        name: String,
        /// What the TOML parser said.
        #[source]
        source: toml::de::Error,
    },
    /// A value is out of range.
    #[error("profile {name}: {field} = {value} is invalid: {why}")]
    Invalid {
        /// Profile name.
        name: String,
        /// Dotted field name.
        field: &'static str,
        /// The value given.
        value: f64,
        /// What is allowed.
        why: &'static str,
    },
    /// No built-in profile has that name and no such file exists.
    #[error("no built-in profile named {name:?} and no such file (built-in: {known})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// Built-in names.
        known: String,
    },
    /// Reading a profile file failed.
    #[error("reading profile {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Costs of the host library, on the host CPU.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostCosts {
    /// Fixed cost of starting a send (library call, descriptor, doorbell
    /// write), microseconds.
    pub send_us: f64,
    /// Per byte of a send that the host itself copies (programmed I/O into
    /// NIC memory, as in FM); zero where the NIC fetches data by DMA.
    pub send_us_per_byte: f64,
    /// Fixed cost of taking a received message (handler, bookkeeping).
    pub recv_us: f64,
    /// Per byte of a received message the host touches (copy out of a
    /// receive region).
    pub recv_us_per_byte: f64,
    /// Cost of posting a receive buffer.
    pub post_recv_us: f64,
    /// Cost of taking any other completion (send done, registration).
    pub event_us: f64,
    /// Cost of a poll that finds nothing (one library call).
    pub poll_us: f64,
    /// Cost of delivering an interrupt or signal into the process (for
    /// selective interrupts, application bypass).
    pub interrupt_us: f64,
    /// Per byte the host's message layer copies between the user's buffer
    /// and pinned communication buffers, once at the sender and once at
    /// each receiver, for messages shorter than `copy_below_bytes`: the
    /// eager protocol of MPICH over GM (dissertation 6.2). Unlike the
    /// per-byte costs above it also applies to offloaded collectives (the
    /// root copies its data in, every receiver copies the result out).
    /// Zero at the communication-library level; set by
    /// [`Profile::at_mpi_level`] from `[mpi]`.
    #[serde(default)]
    pub copy_us_per_byte: f64,
    /// Messages of this many bytes or more are not copied (MPICH-GM's
    /// rendezvous protocol pins the user's buffers instead).
    #[serde(default)]
    pub copy_below_bytes: u32,
    /// Tagged messages of this many bytes or more go by the host library's
    /// rendezvous (an announcement, an RDMA read straight into the receive
    /// buffer, a finish: module `outboard_host::rendezvous`), handshake
    /// and all. Absent: every message eager. Set by
    /// [`Profile::at_mpi_level`] where `[mpi] rendezvous` is true.
    #[serde(default)]
    pub rendezvous_from_bytes: Option<u32>,
    /// The rendezvous uses the write protocol (clear-to-send, RDMA write,
    /// finish: `outboard_host::rendezvous::write`) instead of the read.
    /// Set by [`Profile::at_mpi_level`] from `[mpi] rendezvous_write`.
    #[serde(default)]
    pub rendezvous_write: bool,
}

/// Crossing between host and NIC: the I/O bus.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostNicCosts {
    /// Latency of a programmed-I/O write (doorbell) until the NIC sees a
    /// command.
    pub doorbell_us: f64,
    /// Setting up one DMA transfer between host and NIC memory.
    pub dma_setup_us: f64,
    /// Bus time per byte moved by DMA (1 / bandwidth).
    pub dma_us_per_byte: f64,
    /// The host writes send data into NIC memory itself (FM): no DMA read of
    /// the payload is charged on the bus (the host paid it in
    /// `host.send_us_per_byte`).
    pub pio_send: bool,
}

/// The NIC processor and its local data movement. Processor costs are in
/// cycles and scaled by the clock, so one control program can be costed on
/// NICs of different speeds (LANai 4.3 / 7.2 / 9.1).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NicCosts {
    /// Processor clock in MHz.
    pub clock_mhz: f64,
    /// Cycles to take one command from a port.
    pub command_cycles: f64,
    /// Cycles to build and start one outgoing packet.
    pub tx_packet_cycles: f64,
    /// Cycles to handle one incoming packet.
    pub rx_packet_cycles: f64,
    /// Cycles to write one completion event for the host.
    pub event_cycles: f64,
    /// Cycles to handle one timer expiry.
    pub timer_cycles: f64,
    /// Time per payload byte sent, NIC memory to wire (the send DMA's
    /// pace); the NIC is busy meanwhile.
    pub tx_us_per_byte: f64,
    /// Time per received byte (header included), wire to NIC memory, where
    /// it is not overlapped with the wire.
    pub rx_us_per_byte: f64,
    /// Largest payload per packet in bytes (the engine's MTU is this plus
    /// Outboard's headers).
    pub max_payload: u32,
    /// Cycles per integer element a reduction combines (load both
    /// operands, operate, store).
    pub combine_int_cycles: f64,
    /// Cycles per floating-point element a reduction combines. The LANai
    /// had no FPU: the dissertation's NIC (4.2.4) ran SoftFloat's 64-bit
    /// routines, so this is far above the integer figure there; a DPU core
    /// has an FPU and the two are close.
    pub combine_float_cycles: f64,
    /// How long the engine lets a lone packet's acknowledgement wait for
    /// traffic to ride on (`EngineConfig::ack_delay`), in microseconds;
    /// zero acknowledges at once. The GM barrier and reduction of the
    /// dissertation sent no acknowledgements at all on the critical path
    /// (3.4.2); a delay takes ours off it the same way.
    #[serde(default)]
    pub ack_delay_us: f64,
    /// Cycles to build and start one acknowledgement-only packet. A
    /// GM-style control program builds it from the connection's state alone
    /// (a fixed header with the cumulative sequence number: no send token,
    /// no DMA, no payload), so it costs a small part of
    /// `tx_packet_cycles`. Absent: charged as a full packet (the cost model
    /// before acknowledgements were counted apart).
    #[serde(default)]
    pub ack_tx_cycles: Option<f64>,
    /// Cycles to send a collective packet that repeats the value its step
    /// already sent to another rank (a tree node releasing its second and
    /// further children): the control program keeps the prepared packet
    /// and rewrites its destination and sequence number, no new DMA from
    /// host memory. Absent: charged as a full packet.
    #[serde(default)]
    pub copy_tx_cycles: Option<f64>,
    /// Cycles to handle one incoming acknowledgement-only packet: check the
    /// header, advance the connection's unacknowledged window and free the
    /// send records it covers (the completion event, if any, is charged
    /// apart as `event_cycles`). Absent: charged as a full packet.
    #[serde(default)]
    pub ack_rx_cycles: Option<f64>,
    /// Cycles to take a posted receive (a receive token: the control
    /// program links the buffer's descriptor into the port's receive list;
    /// no DMA, no packet) instead of `command_cycles`, which prices a send
    /// token's work (DMA set-up, header, queuing on a connection). Absent:
    /// charged as any other command.
    #[serde(default)]
    pub recv_post_cycles: Option<f64>,
    /// Cycles a received collective packet that carries data (a reduction
    /// contribution, a broadcast piece) costs on top of `rx_packet_cycles`:
    /// finding the operation it belongs to, checking its sender, folding or
    /// placing the value. The dissertation's NIC reduction paid this per
    /// hop (4.3.2: "the overhead of the more complicated operation at the
    /// slower NIC processor"). Barrier signals carry no data and do not pay
    /// it. Absent: zero.
    #[serde(default)]
    pub coll_data_rx_cycles: Option<f64>,
    /// Cycles per NICVM instruction a module executes (`Work::vm_instructions`):
    /// the interpreter's dispatch and the instruction's work. Absent: zero.
    #[serde(default)]
    pub vm_instruction_cycles: Option<f64>,
    /// Cycles per NICVM module invocation besides its instructions
    /// (`Work::nicvm_invocations`): finding the module, setting up the
    /// frame, acting on its outcome. Absent: zero.
    #[serde(default)]
    pub vm_invoke_cycles: Option<f64>,
    /// Pipeline latencies, in cycles at `clock_mhz`: time a message spends
    /// in the NIC that does not hold up its processor, because a DMA engine
    /// or the packet interface does the work while the processor goes on
    /// with the next input. A LANai's MCP starts a DMA and returns to its
    /// state-machine loop; the message moves on when the DMA is done
    /// (dissertation 3.4.1: SDMA, SEND, RECV and RDMA state machines). The
    /// per-message cycle counts above are then the processor's share only.
    /// Absent: zero (all of a message's NIC time is busy time, as before).
    #[serde(default)]
    pub pipeline: PipelineCycles,
}

/// Per-message NIC latency that does not occupy the NIC processor (see
/// [`NicCosts::pipeline`]). Each is added once on the path of the message
/// it names and never to the NIC's busy time, so back-to-back messages
/// overlap in it.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PipelineCycles {
    /// A host command's packets leave this much later (GM's SDMA state
    /// machine: the DMA of the send from host memory into a NIC buffer).
    #[serde(default)]
    pub command: f64,
    /// Every packet leaves this much after its processor charge (the
    /// packet interface's send DMA, NIC memory to the wire).
    #[serde(default)]
    pub tx: f64,
    /// Every packet off the wire reaches the processor this much after it
    /// arrives (the packet interface's receive DMA into a NIC buffer and
    /// the RECV state machine's hand-off).
    #[serde(default)]
    pub rx: f64,
    /// Every completion becomes visible to the host this much after the
    /// processor wrote it (GM's RDMA state machine: the DMA of the data and
    /// of the receive token into host memory).
    #[serde(default)]
    pub event: f64,
}

/// The MPI layer over the communication library (MPICH-GM in the
/// dissertation): extra host time per call. Experiments that the paper ran
/// at the MPI level use [`Profile::at_mpi_level`]; GM-level ones do not.
/// Optional (zero when absent).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MpiCosts {
    /// Added to every send and to starting an offloaded collective (the
    /// MPI call, request bookkeeping, the channel interface's token check).
    #[serde(default)]
    pub send_us: f64,
    /// Added to taking every received message (matching in the MPI layer,
    /// `MPID_DeviceCheck`).
    #[serde(default)]
    pub recv_us: f64,
    /// Per byte of the eager protocol's copies (see
    /// `HostCosts::copy_us_per_byte`): "the data for the message is copied
    /// into a send buffer ... [and] must then be copied out of this buffer
    /// to its final location" (dissertation 6.2).
    #[serde(default)]
    pub copy_us_per_byte: f64,
    /// The eager limit: messages of this many bytes or more go by
    /// rendezvous, without copies ("less than 16KB" for MPICH over GM,
    /// 6.2). The rendezvous handshake itself is not modelled.
    #[serde(default)]
    pub eager_below_bytes: u32,
    /// Whether the MPI layer's rendezvous is simulated for real (the
    /// host library's protocol, from `eager_below_bytes` up) instead of
    /// only dropping the copies.
    #[serde(default)]
    pub rendezvous: bool,
    /// With `rendezvous`: the write protocol instead of the read one.
    #[serde(default)]
    pub rendezvous_write: bool,
}

/// Links and switches.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WireCosts {
    /// Serialisation time per byte on a link (1 / link bandwidth).
    pub link_us_per_byte: f64,
    /// Propagation latency of one cable (NIC to switch or switch to NIC).
    pub cable_latency_us: f64,
    /// Latency through one switch (cut-through).
    pub switch_latency_us: f64,
    /// Ports per switch; a larger cluster is a folded Clos (fat tree) with
    /// half the ports of each switch going down.
    pub switch_radix: u32,
}

/// Faults drawn from the seed.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultRates {
    /// Probability a packet is lost.
    #[serde(default)]
    pub loss: f64,
    /// Probability a packet is delivered twice.
    #[serde(default)]
    pub duplicate: f64,
    /// Probability one byte of a packet is flipped (the checksum must catch
    /// it).
    #[serde(default)]
    pub corrupt: f64,
    /// Extra delay drawn uniformly from 0..=jitter per packet: larger than
    /// the gap between packets, it reorders them.
    #[serde(default)]
    pub jitter_us: f64,
}

/// Atomic remote memory operations (dissertation chapter 5): the NIC's work
/// beyond the two DMAs of a read-modify-write, the host/NIC mutex of 5.2.3,
/// and how a host-based atomic server wakes. All zero by default, so a
/// profile without the section charges an atomic its DMAs and packets only.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AtomicCosts {
    /// NIC cycles per read-modify-write (computing the new value, the
    /// reply-table entry), besides its DMAs.
    #[serde(default)]
    pub op_cycles: f64,
    /// Latency of a read-modify-write that is not processor time: the
    /// reply leaves this much after the NIC's work on the request (its DMA
    /// read must come back across the bus before the NIC can compute and
    /// write), while the processor takes other inputs.
    #[serde(default)]
    pub latency_us: f64,
    /// Whether the NIC serialises with its host by Peterson's mutex (the
    /// paper's *mutex* and *direct* variants; 5.2.3). A NIC with atomic bus
    /// transactions (PCIe AtomicOps) needs none: the *no-mutex* variant.
    #[serde(default)]
    pub mutex: bool,
    /// One small DMA the NIC waits for: with the mutex it writes its
    /// `interested` flag, which lives in host memory, before and after
    /// each operation (two per operation). Absent: `host_nic.dma_setup_us`.
    #[serde(default)]
    pub mutex_dma_us: Option<f64>,
    /// NIC cycles of the mutex besides its two DMAs (storing `turn`,
    /// checking the host's flag and `turn`, both in NIC memory).
    #[serde(default)]
    pub mutex_cycles: f64,
    /// Host: one uncached load or store across the bus into NIC memory
    /// (the host's `interested` flag and `turn` live there).
    #[serde(default)]
    pub pci_access_us: f64,
    /// Host: one pass of Peterson's wait loop that does not read `turn`
    /// (the exponential backoff skips those reads).
    #[serde(default)]
    pub host_spin_us: f64,
    /// Host: waking a server blocked in the kernel - interrupt, wake-up,
    /// context switch (GM's blocking receives). Absent: `host.interrupt_us`.
    #[serde(default)]
    pub wakeup_us: Option<f64>,
    /// Host: how long a spin-then-block server polls before it blocks
    /// (`gm_blocking_receive`).
    #[serde(default)]
    pub spin_us: f64,
}

/// One hardware profile.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name (`fm-lanai43`).
    pub name: String,
    /// One line saying what machine this is.
    pub description: String,
    /// Host library costs.
    pub host: HostCosts,
    /// Host-NIC crossing.
    pub host_nic: HostNicCosts,
    /// NIC processor.
    pub nic: NicCosts,
    /// Network.
    pub wire: WireCosts,
    /// Faults (none by default).
    #[serde(default)]
    pub faults: FaultRates,
    /// The MPI layer's overheads (zero by default).
    #[serde(default)]
    pub mpi: MpiCosts,
    /// Atomic operations (zero by default).
    #[serde(default)]
    pub atomic: AtomicCosts,
    /// The NIC collective protocol's packet prices (`crates/engine`
    /// module `coll::proto`). Present: `sim barrier` compares the
    /// protocol's barrier with the point-to-point and host-based ones
    /// (experiment `nic_barrier`). Absent: protocol packets are charged as
    /// full packets, and `sim barrier` runs its dissertation figures.
    #[serde(default)]
    pub coll_proto: Option<CollProtoCosts>,
    /// The host library's choices by size measured on this profile
    /// (absent: the runtime's).
    #[serde(default)]
    pub tuning: Tuning,
}

/// Crossovers measured on a profile with `outboard sim coll-size`, which
/// the host library's choices by size take on it
/// ([`outboard_host::PortIo::allreduce_doubling_max`]). Absent values are
/// the runtime's.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// The longest allreduce run by recursive doubling (block trees
    /// above) when the algorithm is chosen by length: the offloaded
    /// crossover, one value for both modes so that they give the same
    /// bits.
    #[serde(default)]
    pub allreduce_doubling_max: Option<u32>,
}

/// What a collective-protocol packet costs the NIC processor.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CollProtoCosts {
    /// Cycles to send one: the packet was prepared when the barrier began,
    /// only its epoch is written (no sequence number, window or
    /// retransmission record).
    pub tx_cycles: f64,
    /// Cycles to take one: find the group's barrier, check the epoch
    /// window, record (rank, round) and test the step (no sequencing, no
    /// acknowledgement to build).
    pub rx_cycles: f64,
}

/// The built-in profiles: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("fm-lanai43", include_str!("../../../profiles/fm-lanai43.toml")),
    ("fm-lanai43-wc", include_str!("../../../profiles/fm-lanai43-wc.toml")),
    ("gm-lanai43", include_str!("../../../profiles/gm-lanai43.toml")),
    ("gm-lanai72", include_str!("../../../profiles/gm-lanai72.toml")),
    ("gm-lanai91", include_str!("../../../profiles/gm-lanai91.toml")),
    ("gm-lanai91-ab", include_str!("../../../profiles/gm-lanai91-ab.toml")),
    ("gm15-lanai91", include_str!("../../../profiles/gm15-lanai91.toml")),
    ("gm2-lanai91", include_str!("../../../profiles/gm2-lanai91.toml")),
    ("elan3", include_str!("../../../profiles/elan3.toml")),
    ("gm2-lanaixp", include_str!("../../../profiles/gm2-lanaixp.toml")),
    ("dpu400", include_str!("../../../profiles/dpu400.toml")),
    ("ib-sdr", include_str!("../../../profiles/ib-sdr.toml")),
];

impl Profile {
    /// Parses and checks a profile.
    pub fn from_toml(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let p: Profile =
            toml::from_str(text).map_err(|source| ProfileError::Parse { name: name.to_string(), source })?;
        p.validate()?;
        Ok(p)
    }

    /// A built-in profile by name, or else a TOML file at that path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::from_toml(n, text);
        }
        let path = std::path::Path::new(name_or_path);
        if path.exists() {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ProfileError::Io { path: name_or_path.to_string(), source })?;
            let mut p = Profile::from_toml(name_or_path, &text)?;
            // Its series is named after the file: a copy of a built-in
            // profile, edited, keeps the `name` it was copied with, and
            // would read as the built-in (and be compared with its paper).
            if let Some(stem) = path.file_stem() {
                p.name = stem.to_string_lossy().into_owned();
            }
            return Ok(p);
        }
        Err(ProfileError::Unknown { name: name_or_path.to_string(), known: builtin_names().join(", ") })
    }

    /// The postal model's costs of one broadcast copy under this profile
    /// (dissertation 2.3), for the host library's [`LinkCosts`]: lambda for
    /// a message is then `link_costs(mode).lambda(len)`, the one-way time
    /// until the receiver can send it on over the sender's busy time per
    /// copy. One model of both, so an experiment's lambda is the one a
    /// postal tree built from the profile (`Lambda::Link`) would use.
    ///
    /// Host-based, the sender's busy time per copy is the slower of its
    /// host (the send call) and its NIC (command, DMA, transmit): on GM the
    /// NIC is the bottleneck, on FM the host's programmed-I/O write. As
    /// `LinkCosts` is linear in the length, "the slower" is taken part by
    /// part (fixed and per byte): exact where one stage is slower in both,
    /// an upper bound where they cross. NIC-assisted (any other mode), it
    /// is the NIC's transmit of one copy (its processor's share or the
    /// link, whichever is slower), and the receiver can send on once its
    /// host took the packet and handed it back with a multi-send.
    ///
    /// The one-way time includes the NIC pipeline (`[nic.pipeline]`): a
    /// host command's DMA, the packet interface's send and receive DMA and
    /// the completion's DMA to the host hold the message up without
    /// keeping the NIC processor busy, so they lengthen the latency and not
    /// the sender's time per copy.
    pub fn link_costs(&self, mode: BcastMode) -> LinkCosts {
        let cyc = |c: f64| c / self.nic.clock_mhz;
        let (h, hn, n, w) = (&self.host, &self.host_nic, &self.nic, &self.wire);
        // (fixed us, us per byte) of each stage.
        let host_send = (h.send_us, h.send_us_per_byte);
        let bus_read = if hn.pio_send { (0.0, 0.0) } else { (hn.dma_setup_us, hn.dma_us_per_byte) };
        let xmit = (cyc(n.tx_packet_cycles), n.tx_us_per_byte.max(w.link_us_per_byte));
        let rx = (
            2.0 * w.cable_latency_us
                + w.switch_latency_us
                + cyc(n.rx_packet_cycles)
                + hn.dma_setup_us
                + cyc(n.event_cycles)
                + h.recv_us,
            n.rx_us_per_byte + hn.dma_us_per_byte + h.recv_us_per_byte,
        );
        let hand_over = (host_send.0 + hn.doorbell_us + cyc(n.command_cycles) + bus_read.0, host_send.1 + bus_read.1);
        let pl = &n.pipeline;
        let pipeline = cyc(pl.command) + cyc(pl.tx) + cyc(pl.rx) + cyc(pl.event);
        let one_way = (hand_over.0 + xmit.0 + rx.0 + pipeline, hand_over.1 + xmit.1 + rx.1);
        let send = match mode {
            BcastMode::HostBased => {
                let nic = (cyc(n.command_cycles) + bus_read.0 + xmit.0, bus_read.1 + xmit.1);
                (host_send.0.max(nic.0), host_send.1.max(nic.1))
            }
            _ => xmit,
        };
        LinkCosts {
            send_overhead_us: send.0,
            send_per_byte_us: send.1,
            latency_us: one_way.0 - send.0,
            latency_per_byte_us: one_way.1 - send.1,
        }
    }

    /// The same machine seen through its MPI layer: the `[mpi]` costs are
    /// added to the host's send (which also starts offloaded collectives)
    /// and receive costs, and its eager copies become the host's. The name
    /// gets an `+mpi` suffix.
    pub fn at_mpi_level(&self) -> Profile {
        let mut p = self.clone();
        p.host.send_us += p.mpi.send_us;
        p.host.recv_us += p.mpi.recv_us;
        p.host.copy_us_per_byte += p.mpi.copy_us_per_byte;
        p.host.copy_below_bytes = p.host.copy_below_bytes.max(p.mpi.eager_below_bytes);
        if p.mpi.rendezvous {
            p.host.rendezvous_from_bytes = Some(p.mpi.eager_below_bytes);
            p.host.rendezvous_write = p.mpi.rendezvous_write;
        }
        p.mpi = MpiCosts::default();
        p.name = format!("{}+mpi", self.name);
        p
    }

    /// A built-in profile; panics if the name is not built in (for tests and
    /// experiments that name one in code).
    pub fn builtin(name: &str) -> Profile {
        Profile::load(name).unwrap_or_else(|e| panic!("built-in profile: {e}"))
    }

    fn validate(&self) -> Result<(), ProfileError> {
        let name = &self.name;
        let nonneg: [(&'static str, f64); 32] = [
            ("host.send_us", self.host.send_us),
            ("host.send_us_per_byte", self.host.send_us_per_byte),
            ("host.recv_us", self.host.recv_us),
            ("host.recv_us_per_byte", self.host.recv_us_per_byte),
            ("host.post_recv_us", self.host.post_recv_us),
            ("host.event_us", self.host.event_us),
            ("host.poll_us", self.host.poll_us),
            ("host.interrupt_us", self.host.interrupt_us),
            ("host_nic.doorbell_us", self.host_nic.doorbell_us),
            ("host_nic.dma_setup_us", self.host_nic.dma_setup_us),
            ("host_nic.dma_us_per_byte", self.host_nic.dma_us_per_byte),
            ("nic.command_cycles", self.nic.command_cycles),
            ("nic.tx_packet_cycles", self.nic.tx_packet_cycles),
            ("nic.rx_packet_cycles", self.nic.rx_packet_cycles),
            ("nic.event_cycles", self.nic.event_cycles),
            ("nic.timer_cycles", self.nic.timer_cycles),
            ("nic.tx_us_per_byte", self.nic.tx_us_per_byte),
            ("nic.rx_us_per_byte", self.nic.rx_us_per_byte),
            ("nic.combine_int_cycles", self.nic.combine_int_cycles),
            ("nic.combine_float_cycles", self.nic.combine_float_cycles),
            ("nic.ack_delay_us", self.nic.ack_delay_us),
            ("mpi.send_us", self.mpi.send_us),
            ("mpi.recv_us", self.mpi.recv_us),
            ("mpi.copy_us_per_byte", self.mpi.copy_us_per_byte),
            ("host.copy_us_per_byte", self.host.copy_us_per_byte),
            ("wire.link_us_per_byte", self.wire.link_us_per_byte),
            ("wire.cable_latency_us", self.wire.cable_latency_us),
            ("wire.switch_latency_us", self.wire.switch_latency_us),
            ("faults.loss", self.faults.loss),
            ("faults.duplicate", self.faults.duplicate),
            ("faults.corrupt", self.faults.corrupt),
            ("faults.jitter_us", self.faults.jitter_us),
        ];
        let optional = [
            ("nic.ack_tx_cycles", self.nic.ack_tx_cycles),
            ("nic.copy_tx_cycles", self.nic.copy_tx_cycles),
            ("nic.ack_rx_cycles", self.nic.ack_rx_cycles),
            ("nic.recv_post_cycles", self.nic.recv_post_cycles),
            ("nic.coll_data_rx_cycles", self.nic.coll_data_rx_cycles),
            ("nic.vm_instruction_cycles", self.nic.vm_instruction_cycles),
            ("nic.vm_invoke_cycles", self.nic.vm_invoke_cycles),
            ("nic.pipeline.command", Some(self.nic.pipeline.command)),
            ("nic.pipeline.tx", Some(self.nic.pipeline.tx)),
            ("nic.pipeline.rx", Some(self.nic.pipeline.rx)),
            ("nic.pipeline.event", Some(self.nic.pipeline.event)),
            ("atomic.op_cycles", Some(self.atomic.op_cycles)),
            ("atomic.latency_us", Some(self.atomic.latency_us)),
            ("atomic.mutex_dma_us", self.atomic.mutex_dma_us),
            ("atomic.mutex_cycles", Some(self.atomic.mutex_cycles)),
            ("atomic.pci_access_us", Some(self.atomic.pci_access_us)),
            ("atomic.host_spin_us", Some(self.atomic.host_spin_us)),
            ("atomic.wakeup_us", self.atomic.wakeup_us),
            ("atomic.spin_us", Some(self.atomic.spin_us)),
            ("coll_proto.tx_cycles", self.coll_proto.map(|c| c.tx_cycles)),
            ("coll_proto.rx_cycles", self.coll_proto.map(|c| c.rx_cycles)),
        ];
        let present = optional.into_iter().filter_map(|(f, v)| v.map(|v| (f, v)));
        for (field, value) in nonneg.into_iter().chain(present) {
            if !value.is_finite() || value < 0.0 {
                return Err(ProfileError::Invalid { name: name.clone(), field, value, why: "must be finite and >= 0" });
            }
        }
        for (field, value) in [
            ("faults.loss", self.faults.loss),
            ("faults.duplicate", self.faults.duplicate),
            ("faults.corrupt", self.faults.corrupt),
        ] {
            if value >= 1.0 {
                return Err(ProfileError::Invalid { name: name.clone(), field, value, why: "a probability below 1" });
            }
        }
        if !(self.nic.clock_mhz.is_finite() && self.nic.clock_mhz > 0.0) {
            return Err(ProfileError::Invalid {
                name: name.clone(),
                field: "nic.clock_mhz",
                value: self.nic.clock_mhz,
                why: "must be > 0",
            });
        }
        let max_payload = f64::from(self.nic.max_payload);
        if !(64.0..=60_000.0).contains(&max_payload) {
            return Err(ProfileError::Invalid {
                name: name.clone(),
                field: "nic.max_payload",
                value: max_payload,
                why: "must be in 64..=60000 bytes",
            });
        }
        if self.wire.switch_radix < 2 {
            return Err(ProfileError::Invalid {
                name: name.clone(),
                field: "wire.switch_radix",
                value: f64::from(self.wire.switch_radix),
                why: "a switch has at least 2 ports",
            });
        }
        Ok(())
    }
}

/// Names of the built-in profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_from_a_file_is_named_after_the_file() {
        let dir = std::env::temp_dir().join(format!("outboard-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("my-nic.toml");
        std::fs::write(&copy, include_str!("../../../profiles/dpu400.toml")).unwrap();
        let p = Profile::load(copy.to_str().unwrap()).unwrap();
        assert_eq!((p.name.as_str(), Profile::load("dpu400").unwrap().name.as_str()), ("my-nic", "dpu400"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn link_costs_give_the_postal_lambda_and_count_the_nic_pipeline() {
        // Profiles without a pipeline: the lambda-sweep's figures.
        let fm = Profile::builtin("fm-lanai43");
        assert!((fm.link_costs(BcastMode::HostBased).lambda(8) - 2.4753).abs() < 5e-5);
        let gm2 = Profile::builtin("gm2-lanai91");
        assert!((gm2.link_costs(BcastMode::nic_assisted()).lambda(1024) - 4.8496).abs() < 5e-5);
        // The pipeline is latency, not the sender's time per copy.
        let gm = Profile::builtin("gm-lanai43");
        let mut flat = gm.clone();
        flat.nic.pipeline = PipelineCycles::default();
        for mode in [BcastMode::HostBased, BcastMode::nic_assisted()] {
            let (with, without) = (gm.link_costs(mode), flat.link_costs(mode));
            assert_eq!(with.send_overhead_us, without.send_overhead_us);
            assert_eq!(with.send_per_byte_us, without.send_per_byte_us);
            let pl = &gm.nic.pipeline;
            let extra = (pl.command + pl.tx + pl.rx + pl.event) / gm.nic.clock_mhz;
            assert!(extra > 0.0);
            assert!((with.latency_us - without.latency_us - extra).abs() < 1e-9);
            assert!(with.lambda(8) > without.lambda(8));
        }
    }

    #[test]
    fn every_builtin_profile_loads_and_is_named_like_its_file() {
        for (n, _) in BUILTIN {
            let p = Profile::builtin(n);
            assert_eq!(&p.name, n);
        }
    }

    #[test]
    fn bad_values_name_the_field() {
        let text = BUILTIN[0].1.replace("clock_mhz = 33.0", "clock_mhz = -1.0");
        let err = Profile::from_toml("x", &text).unwrap_err().to_string();
        assert!(err.contains("nic.clock_mhz"), "{err}");
        let text = format!("{}\nbogus = 1\n", BUILTIN[0].1);
        assert!(Profile::from_toml("x", &text).is_err());
        assert!(matches!(Profile::load("no-such-profile"), Err(ProfileError::Unknown { .. })));
    }
}
