//! What goes into the engine from a port, and what comes out to it.

use thiserror::Error;

use crate::atomic::{AtomicOp, AtomicReturn, AtomicWidth};
use crate::coll::{CollError, GroupId, Reduction, ScheduleId};
use crate::nicvm::{ModuleId, NicvmError};
use crate::{Endpoint, HostBuf, NodeId, OpId, PortId, RecvMatch};

/// Most bytes an announcement ([`Command::Announce`]) carries: it travels
/// to the receiving host inside its completion.
pub const ANNOUNCE_MAX: u32 = 32;

/// Work a port hands its engine (GM's send and receive tokens). Each command
/// that [`crate::Engine::handle_command`] accepts completes later with exactly
/// one [`Event`] carrying the same [`OpId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Send a tagged message read from `buf` to `dest`. Uses a send token.
    Send {
        /// Operation name.
        op: OpId,
        /// Destination port incarnation.
        dest: Endpoint,
        /// Tag the receiver matches on.
        tag: u64,
        /// The message.
        buf: HostBuf,
    },
    /// Send `buf` (at most [`ANNOUNCE_MAX`] bytes) to `dest` as an announcement (a rendezvous ready-to-send):
    /// matched like a tagged message with `tag`, in the same stream order as
    /// the port's sends to `dest`, but completed at the receiver as
    /// [`Completion::Announced`] so the receiving library knows the bytes
    /// describe a larger message instead of being it. Uses a send token.
    Announce {
        /// Operation name.
        op: OpId,
        /// Destination port incarnation.
        dest: Endpoint,
        /// Tag the receiver matches on.
        tag: u64,
        /// The announcement's bytes.
        buf: HostBuf,
    },
    /// [`Command::Send`] whose message is marked as needing the receiving
    /// host's action (dissertation 6.2.3: a packet type that alone
    /// generates a signal): once it is delivered, the receiving engine
    /// raises an [`Interrupt`] to the destination port if that port's
    /// interrupt flag ([`Command::SetInterruptFlag`]) is enabled. Used for
    /// the messages of an application-bypass collective that a non-leaf
    /// member must forward or combine. Uses a send token.
    SendMarked {
        /// Operation name.
        op: OpId,
        /// Destination port incarnation.
        dest: Endpoint,
        /// Tag the receiver matches on.
        tag: u64,
        /// The message.
        buf: HostBuf,
    },
    /// Name the port's interrupt flag: a 4-byte word of host memory (native
    /// byte order) that the engine reads when a marked message was
    /// delivered; nonzero means "interrupt me". The host enables and
    /// disables interrupts by storing to it - a store, not a command, like
    /// the flag GM's NIC mapped into the process (6.2.3). An empty `word`
    /// withdraws it (no interrupts). Completes with
    /// [`Completion::InterruptFlagSet`].
    SetInterruptFlag {
        /// Operation name.
        op: OpId,
        /// The flag word (4 bytes), or empty.
        word: HostBuf,
    },
    /// Post a receive into `buf` for the first message that `matching`
    /// accepts. Uses a receive token.
    Recv {
        /// Operation name.
        op: OpId,
        /// Which messages.
        matching: RecvMatch,
        /// Where the message goes.
        buf: HostBuf,
    },
    /// Register a region of the port's memory for remote access; completes
    /// with [`Completion::Registered`] and the region's key.
    Register {
        /// Operation name.
        op: OpId,
        /// The region.
        buf: HostBuf,
    },
    /// Withdraw a region: remote accesses with its key fail from now on.
    Deregister {
        /// Operation name.
        op: OpId,
        /// The key the registration returned.
        key: u64,
    },
    /// Write `buf` into the remote region `key` at `offset` (a directed
    /// send). Uses a send token.
    RdmaWrite {
        /// Operation name.
        op: OpId,
        /// The port owning the region.
        dest: Endpoint,
        /// Region key.
        key: u64,
        /// Offset inside the region.
        offset: u64,
        /// Local source.
        buf: HostBuf,
    },
    /// Read `buf.len` bytes of the remote region `key` at `offset` into
    /// `buf`. Uses a send token.
    RdmaRead {
        /// Operation name.
        op: OpId,
        /// The port owning the region.
        dest: Endpoint,
        /// Region key.
        key: u64,
        /// Offset inside the region.
        offset: u64,
        /// Local destination.
        buf: HostBuf,
    },
    /// Cancel `target`: a posted receive not yet matched, or a send waiting
    /// to be retried. Completes `target` with [`OpError::Cancelled`], then
    /// this command with [`Completion::Cancelled`]; if `target` cannot be
    /// cancelled any more it completes normally and this command with an
    /// error.
    Cancel {
        /// Operation name of the cancel itself.
        op: OpId,
        /// The operation to cancel.
        target: OpId,
    },
    /// Send one message to many destinations (the dissertation's
    /// multi-send, 2.2): the payload is read from host memory once into
    /// engine memory and a copy goes to each destination, reliably and in
    /// each destination's stream order. `dests` holds the destinations in
    /// the byte form of a [`crate::MemberList`] (the one format of a list of endpoints, as for a group's members). Uses one send token and
    /// completes once, with [`Completion::Sent`] when every destination
    /// accepted it, or with the first destination's error otherwise.
    MultiSend {
        /// Operation name.
        op: OpId,
        /// The encoded destination list in host memory.
        dests: HostBuf,
        /// Tag the receivers match on.
        tag: u64,
        /// The message.
        buf: HostBuf,
    },
    /// Install a group at this port: `members` holds the member list in
    /// rank order, in [`crate::MemberList`]'s byte form (runs of
    /// consecutive nodes, so a world group costs a few bytes whatever its
    /// size); the entry at `rank` must be
    /// this port. Completes with [`Completion::GroupCreated`]. Packets of
    /// the group that arrived earlier are kept and used.
    CreateGroup {
        /// Operation name.
        op: OpId,
        /// The members' agreed identifier.
        group: GroupId,
        /// This port's rank.
        rank: u32,
        /// The encoded member list in host memory.
        members: HostBuf,
    },
    /// Remove a group with no collective under way.
    DestroyGroup {
        /// Operation name.
        op: OpId,
        /// The group.
        group: GroupId,
    },
    /// Install (or replace) schedule `schedule` of a group: `buf` holds
    /// [`crate::Schedule::encode`]'s bytes, checked against the group.
    SetSchedule {
        /// Operation name.
        op: OpId,
        /// The group.
        group: GroupId,
        /// The schedule's number.
        schedule: ScheduleId,
        /// The encoded schedule in host memory.
        buf: HostBuf,
    },
    /// Run the group's next collective with `schedule`: the value starts as
    /// `send`'s bytes (read once), is sent and folded step by step in the
    /// engine, and is written to `recv` at the end (nothing is written when
    /// `recv` is empty). `reduction` says how `Combine` steps fold. Uses a
    /// send token; completes with [`Completion::Collective`], in the order
    /// the group's collectives were started.
    Collective {
        /// Operation name.
        op: OpId,
        /// The group.
        group: GroupId,
        /// Which of its schedules.
        schedule: ScheduleId,
        /// How contributions combine (reductions).
        reduction: Option<Reduction>,
        /// This member's contribution (or broadcast data at the root).
        send: HostBuf,
        /// Where the result goes.
        recv: HostBuf,
    },
    /// Run the group's next barrier of the NIC collective protocol (module
    /// `coll::proto`) with `schedule`, which must be a barrier's (every
    /// fold `Ignore`): its notifications bypass the point-to-point
    /// connections (no sequence numbers, no acknowledgements) and the
    /// barrier recovers its own losses. Protocol barriers count their
    /// epochs apart from the group's `Collective`s, so every member must
    /// start the same sequence of them. Uses a collective token; completes
    /// with [`Completion::Collective`] (length 0), in start order.
    NicBarrier {
        /// Operation name.
        op: OpId,
        /// The group.
        group: GroupId,
        /// Which of its schedules.
        schedule: ScheduleId,
    },
    /// Perform `atomic` on the `width` word at `offset` of the remote region
    /// `key` (dissertation chapter 5; module `atomic`). The word must be
    /// aligned to its width; for 32-bit words the operands' low 32 bits are
    /// used. Uses a send token; completes with [`Completion::Atomic`] and
    /// the word's old value, which [`AtomicReturn::Direct`] also writes to
    /// host memory. The target executes it exactly once.
    Atomic {
        /// Operation name: the caller's tag, returned with the value.
        op: OpId,
        /// The port owning the region.
        dest: Endpoint,
        /// Region key.
        key: u64,
        /// Offset of the word inside the region.
        offset: u64,
        /// 32- or 64-bit word.
        width: AtomicWidth,
        /// The operation and its operands.
        atomic: AtomicOp,
        /// How the old value comes back.
        ret: AtomicReturn,
    },
    /// Load (or with `replace`, replace) NICVM module `module` for this
    /// port's job (module `nicvm`): `code` holds encoded bytecode, which the
    /// engine decodes and verifies again whoever compiled it; `name` its
    /// name (for listings and error reports). Completes with
    /// [`Completion::NicvmLoaded`] and the module's generation.
    NicvmLoad {
        /// Operation name.
        op: OpId,
        /// The job's identifier for the module.
        module: ModuleId,
        /// The module's name in host memory (ASCII, at most 64 bytes).
        name: HostBuf,
        /// Encoded bytecode in host memory.
        code: HostBuf,
        /// Bytes of the accumulator area the engine keeps for it.
        acc_len: u32,
        /// Keep it after the loading port closes, until the job's last
        /// port on this engine closes or it is purged.
        persist: bool,
        /// Replace a loaded module of the same id (state starts afresh).
        replace: bool,
    },
    /// Remove NICVM module `module`. Completes with [`Completion::NicvmPurged`].
    NicvmPurge {
        /// Operation name.
        op: OpId,
        /// The module.
        module: ModuleId,
    },
    /// Write a report of each loaded module of this job
    /// ([`crate::ModuleReport`], [`crate::MODULE_REPORT_LEN`] bytes each)
    /// into `buf`, as many as fit. Completes with [`Completion::NicvmListed`].
    NicvmList {
        /// Operation name.
        op: OpId,
        /// Where the reports go.
        buf: HostBuf,
    },
    /// Hand a packet (`buf`, one packet's worth) to NICVM module `module`
    /// running over `group`: at this engine when `dest` is this port's
    /// rank (the paper's delegation to the local NIC), else at `dest`'s
    /// engine. Uses a send token; completes with [`Completion::NicvmSent`]
    /// once the module ran (locally) or the receiving engine took the
    /// packet (remotely; it is read from `buf` as it is sent, like a
    /// message).
    NicvmSend {
        /// Operation name.
        op: OpId,
        /// The module.
        module: ModuleId,
        /// Its generation (from the load).
        generation: u32,
        /// The group it runs over (installed at this port).
        group: GroupId,
        /// The operation's root rank (`mpi_get_root()`).
        root: u32,
        /// The rank whose engine runs the module.
        dest: u32,
        /// The packet.
        buf: HostBuf,
    },
}

impl Command {
    /// The operation name of this command.
    pub fn op(&self) -> OpId {
        match *self {
            Command::Send { op, .. }
            | Command::Announce { op, .. }
            | Command::SendMarked { op, .. }
            | Command::SetInterruptFlag { op, .. }
            | Command::Recv { op, .. }
            | Command::Register { op, .. }
            | Command::Deregister { op, .. }
            | Command::RdmaWrite { op, .. }
            | Command::RdmaRead { op, .. }
            | Command::Cancel { op, .. }
            | Command::MultiSend { op, .. }
            | Command::CreateGroup { op, .. }
            | Command::DestroyGroup { op, .. }
            | Command::SetSchedule { op, .. }
            | Command::Collective { op, .. }
            | Command::NicBarrier { op, .. }
            | Command::Atomic { op, .. }
            | Command::NicvmLoad { op, .. }
            | Command::NicvmPurge { op, .. }
            | Command::NicvmList { op, .. }
            | Command::NicvmSend { op, .. } => op,
        }
    }
}

/// A completion for one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The port the completed command came from.
    pub port: PortId,
    /// The command's operation name.
    pub op: OpId,
    /// What happened.
    pub result: Result<Completion, OpError>,
}

/// How a command succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The message was accepted by the destination port (delivered or held
    /// as unexpected there); the send token is back.
    Sent,
    /// A message arrived in the posted buffer.
    Received {
        /// Who sent it.
        src: Endpoint,
        /// Its tag.
        tag: u64,
        /// Its length.
        len: u32,
    },
    /// An announcement ([`Command::Announce`]) took the receive: `len`
    /// bytes in `info` describing a message the receiving library fetches
    /// itself. The receive's buffer is left untouched (several receives
    /// may share one buffer; the announcement must not land there).
    Announced {
        /// Who sent it.
        src: Endpoint,
        /// Its tag.
        tag: u64,
        /// The announcement's length.
        len: u32,
        /// Its bytes (zero after `len`).
        info: [u8; ANNOUNCE_MAX as usize],
    },
    /// The region is registered under `key`.
    Registered {
        /// The key a remote port needs to access the region.
        key: u64,
    },
    /// The region is withdrawn.
    Deregistered,
    /// The RDMA write landed in the remote region.
    Written,
    /// The RDMA read data is in the local buffer.
    Read,
    /// The cancel took effect.
    Cancelled,
    /// The group is installed.
    GroupCreated,
    /// The group is removed.
    GroupDestroyed,
    /// The schedule is installed.
    ScheduleSet,
    /// The collective finished at this member; its result is in `recv`.
    Collective {
        /// The epoch it ran as (the group's count of earlier collectives).
        epoch: u32,
        /// Bytes written to `recv`.
        len: u32,
    },
    /// The atomic operation was performed at the target.
    Atomic {
        /// The word's value before the operation.
        value: u64,
    },
    /// The NICVM module is loaded.
    NicvmLoaded {
        /// Its generation: 1 for a first load, one more per replacement.
        generation: u32,
    },
    /// The NICVM module is removed.
    NicvmPurged,
    /// The port's interrupt flag word is set (or withdrawn).
    InterruptFlagSet,
    /// Module reports were written.
    NicvmListed {
        /// Modules loaded (reports written: as many as fit).
        count: u32,
    },
    /// The packet was handed to its module.
    NicvmSent {
        /// A local module failed on it (it went to this host flagged).
        failed: bool,
    },
}

/// Why an accepted operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum OpError {
    /// The peer engine stopped answering within the peer timeout, another
    /// engine of the job announced its death, or it restarted: ULFM's
    /// `MPI_ERR_PROC_FAILED`, naming the node that failed.
    #[error("peer node {0:?} is unreachable")]
    PeerUnreachable(NodeId),
    /// A receive from any source was pending when this node learned that
    /// the named node died: ULFM's `MPI_ERR_PROC_FAILED_PENDING`. The dead
    /// node may have been the sender it waited for, so waiting on could
    /// hang; the receive is withdrawn (its buffer untouched) and the
    /// application decides - post it again to go on with the live ranks.
    /// Receives from any source posted after the death wait as usual.
    #[error("a receive from any source was withdrawn: node {0:?} failed while it waited")]
    ProcFailedPending(NodeId),
    /// A receive named a source port that closed: its engine announced the
    /// closure after every message the port had sent, so none is missing
    /// and none will come from that incarnation. Receives naming the port
    /// fail when the announcement arrives, and later ones at once (until a
    /// message from a newer incarnation of the slot shows it reopened).
    /// Not a process failure (ULFM's `MPI_ERR_PROC_FAILED`): the node lives
    /// and nothing was lost, so receives from any source stay posted (no
    /// `MPI_ERR_PROC_FAILED_PENDING`); it is what MPI leaves undefined - a
    /// receive from a rank that already finalized - turned into an error
    /// instead of a hang. Names the closed incarnation.
    #[error("source port {0:?} closed: no message will come from it")]
    SourceClosed(Endpoint),
    /// The destination port incarnation is gone (closed, or replaced by a
    /// newer one).
    #[error("destination port incarnation no longer exists")]
    PortGone,
    /// The destination port slot does not exist on that engine.
    #[error("no such port on the destination engine")]
    NoSuchPort,
    /// This process's own engine is gone: the node engine process it
    /// attached to ended (it died, was killed, or detached this process
    /// for breaking the port protocol). Nothing more completes on the
    /// port; every operation under way and every later one fails with
    /// this.
    #[error("this process's node engine is gone")]
    EngineLost,
    /// The destination kept refusing (not open yet, no buffer) for longer
    /// than the retry timeout.
    #[error("destination not ready within the retry timeout")]
    NotReadyTimeout,
    /// The remote region key is wrong.
    #[error("remote region key rejected")]
    BadKey,
    /// The remote access falls outside the region.
    #[error("remote access out of the region's bounds")]
    OutOfBounds,
    /// The operation was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The message was longer than the receive buffer; the buffer holds its
    /// first bytes.
    #[error("message of {len} bytes truncated to the receive buffer")]
    Truncated {
        /// Sender.
        src: Endpoint,
        /// Tag.
        tag: u64,
        /// The message's full length.
        len: u32,
    },
    /// The sender gave the message up part-way (its port closed).
    #[error("sender aborted the message")]
    SenderAborted,
    /// The engine refused a command the host library issued on the
    /// application's behalf (a rendezvous read or finish) for a reason no
    /// retry cures.
    #[error("the engine refused the library's command: {0}")]
    Refused(CommandError),
    /// A message arrived as a rendezvous announcement but does not describe
    /// one (wrong length or format): its sender is not a host library that
    /// speaks this protocol.
    #[error("malformed rendezvous announcement")]
    BadAnnouncement,
    /// Host memory could not be read or written.
    #[error("host memory access failed")]
    DmaFault,
    /// Cancel: the target operation is unknown or already under way.
    #[error("operation cannot be cancelled")]
    NotCancellable,
    /// Deregister: no region with that key on this port.
    #[error("no region with that key")]
    NoSuchRegion,
    /// An atomic operation named a word not aligned to its width.
    #[error("atomic operation on a misaligned word")]
    Misaligned,
    /// A group, schedule or collective failed.
    #[error("collective: {0}")]
    Collective(#[from] CollError),
    /// A NICVM command failed.
    #[error("nicvm: {0}")]
    Nicvm(#[from] NicvmError),
}

/// Why a command was refused on the spot (nothing was consumed; no event
/// will follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CommandError {
    /// The port is not open.
    #[error("port {0:?} is not open")]
    PortNotOpen(PortId),
    /// All send tokens of the port are in use.
    #[error("no send token free")]
    NoSendToken,
    /// All receive tokens of the port are in use.
    #[error("no receive token free")]
    NoRecvToken,
    /// All collective tokens of the port are in use.
    #[error("no collective token free")]
    NoCollToken,
    /// Larger than the engine's `max_message`.
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLong {
        /// Requested length.
        len: u64,
        /// The limit.
        max: u32,
    },
    /// The destination port number is beyond any engine's port range.
    #[error("invalid destination")]
    BadDestination,
    /// The destination node was declared dead.
    #[error("peer node {0:?} is unreachable")]
    PeerUnreachable(NodeId),
}

/// Why a port could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum OpenError {
    /// The slot number is beyond `max_ports`.
    #[error("port {0:?} does not exist")]
    NoSuchPort(PortId),
    /// The slot is already open.
    #[error("port {0:?} is already open")]
    InUse(PortId),
}

/// A configuration the engine cannot work with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// MTU out of range.
    #[error("mtu {mtu} outside {min}..={max}")]
    Mtu {
        /// Value given.
        mtu: usize,
        /// Minimum.
        min: usize,
        /// Maximum.
        max: usize,
    },
    /// A value that must not be zero.
    #[error("{0} must not be zero")]
    Zero(&'static str),
    /// Window out of range.
    #[error("window {0} outside 1..=2^20")]
    Window(u32),
    /// Inconsistent timeouts.
    #[error("{0}")]
    Timeouts(&'static str),
}

/// An interrupt to a port's process ([`crate::Engine::poll_interrupt`]):
/// a marked message ([`Command::SendMarked`]) was delivered to the port
/// while its interrupt flag was enabled. Sans-IO: the engine only says so;
/// its driver delivers it (a signal to the process's thread, a wake-up of
/// a progress thread). Several marked deliveries before the driver polls
/// coalesce into one, as a NIC's interrupt line does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupt {
    /// The port to interrupt.
    pub port: PortId,
}

/// A datagram [`crate::Engine::poll_transmit`] wrote into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination node.
    pub dst: NodeId,
    /// Bytes written at the start of the buffer.
    pub len: usize,
}
