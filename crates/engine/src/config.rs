use core::time::Duration;

use outboard_wire::JobSecret;

use crate::NodeId;

/// Bits of an incarnation below the start time, filled with randomness so
/// that two engines started in the same millisecond still differ.
pub const INCARNATION_RANDOM_BITS: u32 = 22;

/// An engine incarnation that grows with the start time: `unix_ms` (the
/// start, in milliseconds since 1970) above [`INCARNATION_RANDOM_BITS`] bits
/// of `random`. A restart a millisecond or more later always has a larger
/// one; the time part lasts until the year 2109.
pub fn incarnation(unix_ms: u64, random: u32) -> u64 {
    (unix_ms << INCARNATION_RANDOM_BITS) | u64::from(random & ((1 << INCARNATION_RANDOM_BITS) - 1))
}

/// The stand-in secret [`EngineConfig::new`] derives from a job key: the
/// job key's bytes twice. Not secret; for in-process drivers.
fn stand_in_secret(job_key: u64) -> JobSecret {
    let k = job_key.to_be_bytes();
    let mut b = [0u8; outboard_wire::SECRET_LEN];
    b[..8].copy_from_slice(&k);
    b[8..].copy_from_slice(&k);
    JobSecret::from_bytes(b)
}

/// Everything that fixes an engine's behaviour. Time and randomness come in
/// from outside: `boot` is the only random value the engine uses, chosen by
/// the driver (from the clock and a random number in the runtime, from a
/// seed in the simulator).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This engine's node.
    pub node: NodeId,
    /// The job's key, a public name of the job: part of the packet MAC's
    /// key derivation (with `secret`), so packets of another job never
    /// authenticate here. Not on the wire.
    pub job_key: u64,
    /// The secret the job's engines share; every datagram carries a MAC
    /// keyed from it and `job_key` (`outboard_wire::MacKey`), and one that
    /// does not verify is dropped and counted (`Stats::unauthenticated`)
    /// before it can change any state. Drivers whose datagrams cross a real
    /// network set the job's secret (the runtime: from the launcher or the
    /// bootstrap); [`EngineConfig::new`] derives a stand-in from the job key,
    /// which suits in-process drivers (simulator, tests) only.
    pub secret: JobSecret,
    /// What the tag every datagram carries proves: authenticity under
    /// `secret` (the default, and the only choice for datagrams that cross
    /// a real network), or only integrity, for a closed world.
    pub integrity: PacketIntegrity,
    /// This engine's incarnation, larger each time an engine of this node
    /// starts: [`incarnation`] puts the start time above randomness. A peer
    /// takes a packet with a larger incarnation for a restart and drops one
    /// with a smaller incarnation (a replay, or a late packet of a dead
    /// predecessor).
    pub boot: u64,
    /// The smallest incarnation any engine of this job can have (the job's
    /// start, as [`incarnation`] of the job's start time and 0): a packet
    /// from a smaller one is a replay from an earlier run and is dropped
    /// even from a peer not heard from yet. 0 accepts any.
    pub min_peer_boot: u64,
    /// Largest datagram the engine emits, header included. Messages are cut
    /// into packets of at most this size.
    pub mtu: usize,
    /// Number of port slots (GM had 8).
    pub max_ports: u8,
    /// Send tokens per port: how many send, RDMA write and RDMA read
    /// operations a port may have outstanding at once.
    pub send_tokens: u32,
    /// Receive tokens per port: how many receives it may have posted.
    pub recv_tokens: u32,
    /// Collective tokens per port: how many collectives it may have under
    /// way. A class of its own, because a collective waits for its peers:
    /// with shared send tokens, offloaded collectives waiting for data
    /// could hold every token and starve the point-to-point sends (of a
    /// host-based collective, say) that their peers wait for first.
    pub coll_tokens: u32,
    /// Packets in flight per connection before the sender waits for
    /// acknowledgements.
    pub window: u32,
    /// First retransmission timeout; doubles on every timeout up to
    /// `rto_max`, resets when an acknowledgement makes progress.
    pub rto_initial: Duration,
    /// Ceiling of the retransmission timeout.
    pub rto_max: Duration,
    /// A peer that acknowledges nothing for this long while we have
    /// unacknowledged packets for it is declared dead: every operation that
    /// needs it completes with an error. An operation that only waits on a
    /// peer has it probed every quarter of this (module `keepalive`), so
    /// it fails at most this plus a quarter after the peer fell silent.
    pub peer_timeout: Duration,
    /// How long a sender waits before retrying a message the receiver
    /// refused as not ready (port not open yet, no buffer).
    pub retry_interval: Duration,
    /// How long a sender keeps retrying a refused message before the
    /// operation fails.
    pub retry_timeout: Duration,
    /// Bytes of engine memory for unexpected messages (arrived before a
    /// matching receive); beyond it, senders are told to retry.
    pub unexpected_bytes: usize,
    /// Largest message or RDMA transfer accepted, in bytes.
    pub max_message: u32,
    /// How long a lone in-order packet's acknowledgement may wait for
    /// traffic to ride on (TCP's delayed acknowledgement). Zero (the
    /// default) acknowledges every packet at once. A delay takes the
    /// standalone acknowledgements of request/response and collective
    /// traffic off the critical path (they ride on the next packet to that
    /// peer); it delays the completion of a lone send by up to the delay.
    /// Must stay below `rto_initial / 2`.
    pub ack_delay: Duration,
    /// With an `ack_delay`, how many in-order packets may go unacknowledged
    /// before an acknowledgement goes out at once (TCP: 2, the default).
    /// More takes acknowledgements off a stream's receiver; it must stay
    /// well below `window`, which the acknowledgements open.
    pub ack_every: u32,
    /// On a retransmission timeout, resend only the oldest unacknowledged
    /// packet (TCP's loss window of one) instead of half the window, and if
    /// the acknowledgement that follows covers more than that packet - the
    /// peer had the originals, it was only slow to answer (its engine not
    /// driven for a time slice) - restore the congestion window and take
    /// the delay as a round-trip sample (Eifel, RFC 4015), so the timeout
    /// adapts to such a peer. Off by default (the simulator's profiles
    /// keep Go-Back-N's halving); the runtime turns it on
    /// (`outboard_runtime::udp_engine_defaults`): on a shared machine,
    /// a time slice without the peer's engine is far likelier than a loss.
    pub timeout_probe: bool,
    /// Bytes of engine memory for collective packets that arrived before
    /// their collective started (each counts its payload plus 32 bytes of
    /// bookkeeping, so barrier signals are bounded too); beyond it, senders
    /// are told to retry.
    pub coll_unexpected_bytes: usize,
    /// Bytes of engine memory a port's unconfirmed outgoing collective
    /// packets may hold (payload plus 96 bytes of bookkeeping each). A
    /// collective completes when its own steps are done, not when its last
    /// packets are confirmed, so without this bound a member running ahead
    /// of a slow receiver (a reduction leaf, a broadcast root) would pile up
    /// refused packets without limit. At the bound, the sends of the port's
    /// collectives wait (the collectives still take their epochs and every
    /// packet sent to them, so no member ever waits on a refusal for a
    /// collective its host already started) and go out as confirmations
    /// free room, which slows the fast member down to the pace of its
    /// receivers. A step's sends always go when the port has room left,
    /// whatever their size.
    pub coll_send_bytes: usize,
}

/// What a datagram's tag is checked for (`EngineConfig::integrity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketIntegrity {
    /// A MAC under the job's secret (`outboard_wire::MacKey::new`): a
    /// forged, replayed-from-another-job or corrupted datagram is dropped.
    Authenticated,
    /// A fast hash only (`outboard_wire::MacKey::closed_world`): corrupted
    /// datagrams are still dropped, but nothing is authenticated. For a
    /// driver whose datagrams are all written by its own engines and cross
    /// no network - the simulator, where the MAC was a fifth of the
    /// instructions of a 1,024-node host-based barrier; the engine's logic
    /// is the same either way.
    ClosedWorld,
}

/// The default datagram size: fits a jumbo-frame Ethernet payload and
/// keeps a GM-style 8 KiB page per packet.
pub const DEFAULT_MTU: usize = 8192;

impl EngineConfig {
    /// Defaults for a node, suited to a LAN or loopback: microsecond RTTs.
    pub fn new(node: NodeId, job_key: u64, boot: u64) -> Self {
        EngineConfig {
            node,
            job_key,
            secret: stand_in_secret(job_key),
            integrity: PacketIntegrity::Authenticated,
            boot,
            min_peer_boot: 0,
            mtu: DEFAULT_MTU,
            max_ports: 8,
            send_tokens: 64,
            recv_tokens: 256,
            coll_tokens: 64,
            window: 64,
            rto_initial: Duration::from_micros(500),
            rto_max: Duration::from_millis(50),
            peer_timeout: Duration::from_secs(2),
            retry_interval: Duration::from_micros(200),
            retry_timeout: Duration::from_secs(30),
            unexpected_bytes: 16 << 20,
            max_message: 64 << 20,
            coll_unexpected_bytes: 1 << 20,
            coll_send_bytes: 1 << 20,
            ack_delay: Duration::ZERO,
            timeout_probe: false,
            ack_every: 2,
        }
    }

    /// The key this configuration's packets are authenticated with (what
    /// the engine derives from `secret` and `job_key`); for tools and tests
    /// that build packets of the job themselves.
    pub fn mac_key(&self) -> wire::MacKey {
        match self.integrity {
            PacketIntegrity::Authenticated => wire::MacKey::new(&self.secret, self.job_key),
            PacketIntegrity::ClosedWorld => wire::MacKey::closed_world(self.job_key),
        }
    }

    /// Checks the values that would make the engine unable to work.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        use crate::ConfigError as E;
        let min_mtu = wire::HEADER_LEN + 64 + 1;
        if self.mtu < min_mtu || self.mtu > 65_000 {
            return Err(E::Mtu { mtu: self.mtu, min: min_mtu, max: 65_000 });
        }
        if self.max_ports == 0 {
            return Err(E::Zero("max_ports"));
        }
        if self.send_tokens == 0 || self.recv_tokens == 0 || self.coll_tokens == 0 {
            return Err(E::Zero("tokens"));
        }
        if self.window == 0 || self.window > 1 << 20 {
            return Err(E::Window(self.window));
        }
        if self.rto_initial.is_zero() || self.rto_max < self.rto_initial {
            return Err(E::Timeouts("rto_initial must be > 0 and <= rto_max"));
        }
        if self.peer_timeout < self.rto_initial {
            return Err(E::Timeouts("peer_timeout must be >= rto_initial"));
        }
        if self.coll_send_bytes == 0 {
            return Err(E::Zero("coll_send_bytes"));
        }
        if self.retry_interval.is_zero() {
            return Err(E::Zero("retry_interval"));
        }
        if self.ack_every == 0 {
            return Err(E::Zero("ack_every"));
        }
        if self.ack_every > self.window {
            return Err(E::Timeouts("ack_every must not exceed window"));
        }
        if self.ack_delay * 2 >= self.rto_initial {
            return Err(E::Timeouts("ack_delay must be below rto_initial / 2"));
        }
        Ok(())
    }
}

use outboard_wire as wire;
