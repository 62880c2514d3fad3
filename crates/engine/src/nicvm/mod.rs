//! NICVM modules hosted by the engine (the NICVM paper, sections 4.3-4.4).
//!
//! A job loads verified bytecode (`Command::NicvmLoad`); packets of kind
//! [`outboard_wire::Kind::Nicvm`] name (module, generation, group) and run
//! the module at the receiving port with a fuel budget. What the module does
//! with the packet - consume it, deliver it (or new bytes) to the host, send
//! it or new bytes to ranks of the group - is queued and carried out only if
//! it finishes; a module that runs out of fuel, traps or sends out of range
//! leaves the packet on its default path (delivered to the host flagged
//! failed) and its error counted, and nothing else is held up.
//!
//! One job per file:
//!
//! - `table.rs`: the per-job registry (load, replace, purge, list,
//!   ownership, lifetime on port close);
//! - `command.rs`: the port commands;
//! - `invoke.rs`: an arriving (or delegated) packet: admission, the
//!   interpreter run, what happens to the packet;
//! - `send.rs`: the modules' own sends, over the reliable connections,
//!   queued and bounded, with their own tokens so they never take the
//!   host's;
//! - `report.rs`: per-module counters as the host reads them;
//! - `combine.rs`: a module as a collective's reduction operator.

mod combine;
pub(crate) mod command;
mod invoke;
mod report;
mod send;
mod table;

use std::collections::{BTreeMap, VecDeque};

pub(crate) use combine::Combiner;
pub use combine::{combine_step, CombineStep};
pub use report::{ModuleReport, MODULE_REPORT_LEN};
pub(crate) use send::NicvmOut;
pub(crate) use table::JobModules;

/// A job's identifier for one of its modules (agreed by its processes, like
/// a group id; the host library derives it from the module's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModuleId(pub u32);

/// Messages a module delivers to its host carry a tag with these bits set
/// ([`nicvm_tag`]), so a receive can tell them from the application's.
pub const NICVM_TAG: u64 = 0x4E56_4D00_0000_0000;
/// Tag bit of a delivery: a module on the way failed on this packet (it
/// took the default path).
pub const NICVM_TAG_FAILED: u64 = 1;
/// Tag bit of a delivery: new bytes a module delivered (`nicvm_deliver_acc`),
/// not the packet itself.
pub const NICVM_TAG_NEW: u64 = 2;

/// The tag of a delivery from module `module` with flags
/// ([`NICVM_TAG_FAILED`], [`NICVM_TAG_NEW`]).
pub fn nicvm_tag(module: ModuleId, flags: u64) -> u64 {
    NICVM_TAG | u64::from(module.0) << 8 | (flags & 0xff)
}

/// A receive that takes module `module`'s deliveries, whatever their flags.
pub fn nicvm_match(module: ModuleId) -> crate::RecvMatch {
    crate::RecvMatch { source: None, tag: nicvm_tag(module, 0), tag_mask: !0xff }
}

/// Why a NICVM command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NicvmError {
    /// The bytecode does not decode.
    #[error("bytecode does not decode")]
    Decode,
    /// The verifier rejected the bytecode.
    #[error("bytecode failed verification")]
    Verify,
    /// A module of that id is loaded (and `replace` was not asked).
    #[error("module id in use")]
    Taken,
    /// No module of that id for this job.
    #[error("no such module")]
    NotFound,
    /// The name is empty, too long or not `[A-Za-z0-9_.-]`.
    #[error("invalid module name")]
    BadName,
    /// Too many modules, too much code, or an accumulator too large.
    #[error("registry full")]
    Full,
    /// The group is not installed at this port.
    #[error("group not installed")]
    NoGroup,
    /// A destination rank outside the group.
    #[error("rank outside the group")]
    BadRank,
    /// The generation named is not the loaded one.
    #[error("stale module generation")]
    Generation,
    /// The packet is longer than one packet's payload.
    #[error("packet too long for one datagram")]
    TooLong,
    /// Host memory could not be read.
    #[error("host memory access failed")]
    DmaFault,
    /// The packet was given up: its destination engine died, its port is
    /// gone, or it refused it (no module, group or room) past the retry
    /// timeout.
    #[error("the module packet was not accepted")]
    NotDelivered,
}

/// Why a module operator could not combine a contribution
/// ([`crate::CollError::ModuleFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CombineFailure {
    /// It ran past the fuel budget of one invocation.
    #[error("out of fuel")]
    OutOfFuel,
    /// It trapped (a read past the packet or accumulator, a division by
    /// zero, unbounded recursion, a send: a combine step sends nothing).
    #[error("trapped")]
    Trap,
    /// It returned `NICVM_RESULT_FAILURE` (e.g. lengths it does not take).
    #[error("the module reported failure")]
    Refused,
    /// No module of that id is loaded for the job on this engine.
    #[error("not loaded here")]
    NotLoaded,
    /// The module loaded here is of another generation.
    #[error("generation {loaded} loaded, {wanted} named")]
    Stale {
        /// The generation loaded.
        loaded: u32,
        /// The generation the collective names.
        wanted: u32,
    },
}

/// Bounds of the engine's NICVM work; see [`crate::Engine::set_nicvm_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicvmLimits {
    /// Instructions one invocation may execute.
    pub fuel: u64,
    /// Module sends on the connections at once (the paper's dedicated send
    /// token, generalised): apart from the ports' send tokens, so module
    /// traffic cannot starve the host's.
    pub send_tokens: u32,
    /// Module sends waiting for a token; a module asking for more traps
    /// (queue full) and its packet takes the default path.
    pub max_queued: usize,
    /// Modules per job.
    pub max_modules: usize,
    /// Bytecode instructions of a job's modules together.
    pub max_code: usize,
    /// Largest accumulator area.
    pub max_acc: u32,
}

impl Default for NicvmLimits {
    fn default() -> Self {
        NicvmLimits { fuel: 100_000, send_tokens: 16, max_queued: 1024, max_modules: 64, max_code: 256 * 1024, max_acc: 64 * 1024 }
    }
}

/// Keys of module sends: apart from the operations' and the collectives'.
pub(crate) const NICVM_KEY_BIT: u32 = 0x4000_0000;

/// The engine's NICVM state.
#[derive(Debug, Default)]
pub(crate) struct NicvmState {
    pub limits: NicvmLimits,
    /// Registries by job key.
    pub jobs: BTreeMap<u64, JobModules>,
    /// Module sends by key, until confirmed.
    pub out: BTreeMap<u32, NicvmOut>,
    /// Keys waiting for a send token, in order.
    pub queue: VecDeque<u32>,
    /// Sends holding a token.
    pub in_flight: u32,
    pub next_key: u32,
}

impl NicvmState {
    /// Whether no module send is under way.
    pub(crate) fn is_quiet(&self) -> bool {
        self.out.is_empty()
    }

    /// The earliest retry of a refused module send.
    pub(crate) fn deadline(&self) -> Option<crate::Instant> {
        self.out.values().filter_map(|o| o.retry_at).min()
    }

    fn alloc_key(&mut self) -> u32 {
        loop {
            let k = NICVM_KEY_BIT | (self.next_key & (NICVM_KEY_BIT - 1));
            self.next_key = self.next_key.wrapping_add(1);
            if !self.out.contains_key(&k) {
                return k;
            }
        }
    }
}
