//! A module as a collective's reduction operator ([`ReduceOp::Module`]):
//! when a contribution arrives for a `Combine` step, the engine runs the
//! module once with the contribution as its packet and the collective's
//! running value as its accumulator (`acc = acc op packet`), with the
//! usual fuel budget. `mpi_get_rank()` is this member's rank,
//! `mpi_get_source()` the contributor's (its value is the left operand when
//! it is the lower rank, as for the built-in operators), `mpi_get_size()`
//! the group's size. A combine step sends and delivers nothing: a module
//! that tries traps. Whatever goes wrong is a typed [`CombineFailure`],
//! counted on the module like its other errors.
//!
//! [`ReduceOp::Module`]: crate::ReduceOp::Module

use outboard_nicvm::{builtins, ModuleInstance, NicServices, PacketType, Payload, ServiceError, TrapKind, VmError};

use super::{CombineFailure, ModuleId, NicvmState};
use crate::{Stats, Work};

/// What the collective machinery needs to run module operators: the
/// engine's registry (of this engine's job) and counters, borrowed apart
/// from the collectives' own state.
pub(crate) struct Combiner<'a> {
    pub nicvm: &'a mut NicvmState,
    pub job_key: u64,
    pub stats: &'a mut Stats,
    /// The group's size (`mpi_get_size()`).
    pub size: u32,
}

/// The services of a combine step: ranks only.
struct CombineServices {
    rank: u32,
    size: u32,
    source: u32,
}

impl NicServices for CombineServices {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn root(&self) -> u32 {
        0
    }
    fn source(&self) -> u32 {
        self.source
    }
    fn send(&mut self, _: PacketType, _: u32, _: Payload<'_>) -> Result<(), ServiceError> {
        Err(ServiceError::Refused("a combine step sends nothing".into()))
    }
    fn deliver(&mut self, _: &[u8]) -> Result<(), ServiceError> {
        Err(ServiceError::Refused("a combine step delivers nothing".into()))
    }
}

/// What one combine step came to ([`combine_step`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CombineStep {
    /// Instructions charged, a failed run's included.
    pub instructions: u64,
    /// Whether the accumulator holds the step's result.
    pub result: Result<(), CombineFailure>,
    /// Where and why it trapped, when it did (out of fuel included).
    pub trap: Option<VmError>,
}

/// Runs one combine step of a module operator: `acc = acc op other` by
/// `instance` with `fuel`, as member `rank` of `size` taking `source`'s
/// contribution. The engine's module operators run through it, and so
/// does a host that combines without an engine (the C ABI's
/// `outboard_module_combine`), so both read a module's result alike. On
/// failure `acc` may hold part of the run's writes.
pub fn combine_step(instance: &mut ModuleInstance, (rank, size, source): (u32, u32, u32), acc: &mut [u8], other: &[u8], fuel: u64) -> CombineStep {
    let mut svc = CombineServices { rank, size, source };
    match instance.invoke(&mut svc, other, acc, fuel) {
        Ok(o) if o.result == builtins::NICVM_RESULT_FAILURE => CombineStep { instructions: o.instructions, result: Err(CombineFailure::Refused), trap: None },
        Ok(o) => CombineStep { instructions: o.instructions, result: Ok(()), trap: None },
        Err(e) => {
            let failure = if e.kind == TrapKind::OutOfFuel { CombineFailure::OutOfFuel } else { CombineFailure::Trap };
            CombineStep { instructions: e.instructions, result: Err(failure), trap: Some(e) }
        }
    }
}

impl Combiner<'_> {
    /// Combines `other` (from rank `source`) into `acc` at rank `rank` with
    /// generation `generation` of `module`.
    pub fn combine(
        &mut self,
        module: ModuleId,
        generation: u32,
        (rank, source): (u32, u32),
        acc: &mut [u8],
        other: &[u8],
        work: &mut Work,
    ) -> Result<(), CombineFailure> {
        let r = self.run(module, generation, (rank, source), acc, other, work);
        if r.is_err() {
            self.stats.nicvm_errors += 1;
        }
        r
    }

    fn run(
        &mut self,
        module: ModuleId,
        generation: u32,
        (rank, source): (u32, u32),
        acc: &mut [u8],
        other: &[u8],
        work: &mut Work,
    ) -> Result<(), CombineFailure> {
        let fuel = self.nicvm.limits.fuel;
        let slot = self.nicvm.jobs.get_mut(&self.job_key).and_then(|j| j.modules.get_mut(&module));
        let Some(s) = slot else { return Err(CombineFailure::NotLoaded) };
        if s.generation != generation {
            s.counters.stale += 1;
            return Err(CombineFailure::Stale { loaded: s.generation, wanted: generation });
        }
        s.counters.invocations += 1;
        let step = combine_step(&mut s.instance, (rank, self.size, source), acc, other, fuel);
        let charged = step.instructions;
        s.counters.instructions += charged;
        work.vm_instructions += charged;
        work.nicvm_invocations += 1;
        self.stats.nicvm_invocations += 1;
        self.stats.vm_instructions += charged;
        match step.result {
            Err(CombineFailure::OutOfFuel) => s.counters.out_of_fuel += 1,
            Err(_) => s.counters.traps += 1,
            Ok(()) => {}
        }
        step.result
    }
}
