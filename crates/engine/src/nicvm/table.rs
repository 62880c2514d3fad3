//! One job's modules on this engine: which are loaded, as which generation,
//! who loaded them, how long they live, and their counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use outboard_nicvm::{verify, ModuleInstance, VerifiedModule};

use super::{ModuleId, NicvmError, NicvmLimits};
use crate::{Generation, PortId};

/// Counters of one module (see [`super::ModuleReport`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub invocations: u64,
    pub instructions: u64,
    pub out_of_fuel: u64,
    pub traps: u64,
    pub bad_sends: u64,
    pub send_failures: u64,
    pub stale: u64,
}

/// A loaded module.
#[derive(Debug)]
pub(crate) struct Slot {
    pub name: String,
    pub generation: u32,
    pub instance: ModuleInstance,
    pub acc: Vec<u8>,
    /// The port incarnations that loaded it: the first, and any other port
    /// of the job on this engine that loaded the very same module (on a
    /// node engine, each local process of the job loads it; one copy
    /// serves them all).
    pub owners: Vec<(PortId, Generation)>,
    /// The bytecode as loaded, to tell the same module from another.
    pub code: Vec<u8>,
    pub persist: bool,
    pub counters: Counters,
}

/// One job's registry.
#[derive(Debug, Default)]
pub(crate) struct JobModules {
    pub modules: BTreeMap<ModuleId, Slot>,
    /// Generations of modules purged, so that a reload continues the
    /// numbering and packets for the purged one are recognised as stale.
    pub last_gen: BTreeMap<ModuleId, u32>,
}

/// Whether `name` is a valid module name.
fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

impl JobModules {
    /// Decodes, verifies and installs a module; returns its generation.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        &mut self,
        limits: &NicvmLimits,
        module: ModuleId,
        name: &[u8],
        code: &[u8],
        acc_len: u32,
        owner: (PortId, Generation),
        persist: bool,
        replace: bool,
    ) -> Result<u32, NicvmError> {
        let name = std::str::from_utf8(name).ok().filter(|n| name_ok(n)).ok_or(NicvmError::BadName)?;
        if let Some(s) = self.modules.get_mut(&module) {
            let same = s.name == name && s.code == code && s.acc.len() == acc_len as usize && s.persist == persist;
            if !replace && same && !s.owners.contains(&owner) {
                // Another port of the job loads the module it shares:
                // one copy, now also that port's.
                s.owners.push(owner);
                return Ok(s.generation);
            }
        }
        let replacing = match self.modules.get(&module) {
            Some(_) if !replace => return Err(NicvmError::Taken),
            Some(s) => s.instance.module().code_len(),
            None => 0,
        };
        if replacing == 0 && self.modules.len() >= limits.max_modules {
            return Err(NicvmError::Full);
        }
        if acc_len > limits.max_acc {
            return Err(NicvmError::Full);
        }
        // Verified here whoever compiled it: the engine trusts no host.
        let decoded = outboard_nicvm::bytecode::Module::decode(code).map_err(|_| NicvmError::Decode)?;
        let verified: Arc<VerifiedModule> =
            Arc::new(verify(&decoded, &outboard_nicvm::Limits::default()).map_err(|_| NicvmError::Verify)?);
        let total: usize = self.modules.values().map(|s| s.instance.module().code_len()).sum::<usize>() - replacing;
        if total + verified.code_len() > limits.max_code {
            return Err(NicvmError::Full);
        }
        let generation = self.last_gen.get(&module).copied().unwrap_or(0).wrapping_add(1).max(1);
        self.last_gen.insert(module, generation);
        self.modules.insert(
            module,
            Slot {
                name: name.to_string(),
                generation,
                instance: ModuleInstance::new(verified),
                acc: vec![0; acc_len as usize],
                owners: vec![owner],
                code: code.to_vec(),
                persist,
                counters: Counters::default(),
            },
        );
        Ok(generation)
    }

    /// Removes a module.
    pub fn purge(&mut self, module: ModuleId) -> Result<(), NicvmError> {
        self.modules.remove(&module).map(|_| ()).ok_or(NicvmError::NotFound)
    }

    /// A port incarnation closed: the modules it loaded go unless
    /// persistent or still loaded by another port; when `last` (no port
    /// of the job is open any more), the persistent ones go too. Returns
    /// how many were purged.
    pub fn port_closed(&mut self, port: (PortId, Generation), last: bool) -> usize {
        let before = self.modules.len();
        self.modules.retain(|_, s| {
            let owned = s.owners.contains(&port);
            s.owners.retain(|o| *o != port);
            !(last || (owned && s.owners.is_empty() && !s.persist))
        });
        before - self.modules.len()
    }
}
