//! The interface between a module and the NIC that hosts it.
//!
//! The built-ins that reach outside the VM (group facts, sends, deliveries)
//! call a [`NicServices`] implementation: the engine implements it over its
//! transport, and tests and the `outboard nicvm run` harness implement it by
//! recording what happens ([`crate::harness::Recorder`]). The VM itself checks
//! what it can before calling (a destination rank inside `0..size`, a known
//! packet type), so an implementation sees only well-formed requests.

/// What a module sends: the packet it was invoked for, or a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// The current packet, unchanged. The engine may send it without copying
    /// (the paper reuses the same NIC buffer for several sends).
    Current,
    /// New bytes, taken from the module's accumulator area.
    New(&'a [u8]),
}

/// The packet type of a send, the language's `GM_ST_*` constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// `GM_ST_RELIABLE_NICVM_NIC_DATA`: for the same module on the peer's NIC.
    NicData,
    /// `GM_ST_RELIABLE_NICVM_HOST_DATA`: for the peer's host, bypassing modules.
    HostData,
}

impl PacketType {
    /// The type a module names with this value, if any.
    pub fn from_value(v: i64) -> Option<PacketType> {
        match v {
            crate::builtins::GM_ST_RELIABLE_NICVM_NIC_DATA => Some(PacketType::NicData),
            crate::builtins::GM_ST_RELIABLE_NICVM_HOST_DATA => Some(PacketType::HostData),
            _ => None,
        }
    }
}

/// Why a service refused a request. The module stops with a trap carrying it,
/// and the packet takes its default path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// No room to queue another send or delivery now.
    #[error("no room to queue the request")]
    QueueFull,
    /// The engine cannot reach that rank.
    #[error("rank {0} is unreachable")]
    Unreachable(u32),
    /// Any other refusal, with a reason.
    #[error("refused: {0}")]
    Refused(String),
}

/// NIC services the built-ins call. Implemented by the engine, by tests and
/// by the command-line harness.
///
/// Effects are requested as the module runs. An engine that wants
/// all-or-nothing behaviour (no sends from a module that later traps) queues
/// them and drops the queue when the invocation returns an error.
pub trait NicServices {
    /// `mpi_get_rank()`: this node's rank in the group.
    fn rank(&self) -> u32;
    /// `mpi_get_size()`: ranks in the group.
    fn size(&self) -> u32;
    /// `mpi_get_root()`: root of the operation the packet belongs to.
    fn root(&self) -> u32;
    /// `mpi_get_source()`: rank the current packet came from (this node's
    /// rank for a packet its own host handed to the NIC).
    fn source(&self) -> u32;
    /// Sends `payload` with `ptype` to `dest`, which the VM has checked is
    /// in `0..size()`.
    fn send(
        &mut self,
        ptype: PacketType,
        dest: u32,
        payload: Payload<'_>,
    ) -> Result<(), ServiceError>;
    /// Delivers new bytes to the host (`nicvm_deliver_acc()`), in addition
    /// to whatever happens to the current packet.
    fn deliver(&mut self, bytes: &[u8]) -> Result<(), ServiceError>;
}
