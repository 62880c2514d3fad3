//! The module registry of one NIC: which modules are loaded, who owns them,
//! and how long they live.
//!
//! Rules (the paper's, plus the security it left open):
//!
//! - Several modules at once, by name; a name belongs to the job that loaded
//!   it. Loading over an existing name needs `replace` and the same job.
//! - A load, replace or purge must come from a port of the owning job on
//!   this NIC, or from a remote requester presenting that job's key
//!   ([`Requester::Remote`]); a remote load is accepted only for a job that
//!   has a port open here. Invocations must name the owning job's key too.
//! - A module loaded with `persist` outlives the port, and the job, that
//!   loaded it (the paper's "persist after the application exits") until it
//!   is purged. Otherwise it is purged when its job ends here: when
//!   [`Registry::end_job`] is called, or when the job's last port closes.
//! - Every module is compiled (if source) and verified before it is
//!   accepted; a module cannot load another module (there is no built-in
//!   for it, and the verifier rejects unknown built-ins).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::bytecode::{DecodeError, Module};
use crate::compiler::compile_with;
use crate::error::CompileError;
use crate::interp::{ModuleInstance, Outcome, VmError};
use crate::limits::Limits;
use crate::program::VerifiedModule;
use crate::services::NicServices;
use crate::verifier::{verify, VerifyError};

/// A job's 64-bit key (shared by its processes; see the design guide).
pub type JobKey = u64;
/// A port number on this NIC.
pub type PortId = u32;

/// Who asks for a registry change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester {
    /// A local port; its job is the one it was opened for.
    Port(PortId),
    /// A remote node, presenting a job key.
    Remote(JobKey),
}

/// The code of a module to load.
#[derive(Debug, Clone)]
pub enum ModuleCode<'a> {
    /// Source text, compiled here.
    Source(&'a str),
    /// Encoded bytecode, decoded and verified here.
    Bytecode(&'a [u8]),
    /// A module already verified (under this registry's limits or others).
    Verified(Arc<VerifiedModule>),
}

/// Options of a load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Keep the module after its job ends here.
    pub persist: bool,
    /// Replace a module of the same name and job (its variables start afresh).
    pub replace: bool,
}

/// Limits of a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Modules loaded at once.
    pub max_modules: usize,
    /// Bytecode instructions of all modules together.
    pub max_total_code: usize,
    /// Longest module name, in bytes.
    pub max_name_len: usize,
    /// VM limits each module is verified and run under.
    pub vm: Limits,
}

impl Default for RegistryLimits {
    fn default() -> Self {
        RegistryLimits {
            max_modules: 64,
            max_total_code: 256 * 1024,
            max_name_len: 64,
            vm: Limits::default(),
        }
    }
}

/// Why a registry request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// The source does not compile.
    #[error("compile error at {0}")]
    Compile(#[from] CompileError),
    /// The bytecode does not decode.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The verifier rejected the module.
    #[error("verifier: {0}")]
    Verify(#[from] VerifyError),
    /// The requester may not do this (wrong job, unknown port or key).
    #[error("not authorized")]
    NotAuthorized,
    /// The name is in use (by this job without `replace`, or by another job).
    #[error("module `{0}` already exists")]
    NameTaken(String),
    /// No module of that name.
    #[error("no module `{0}`")]
    NotFound(String),
    /// A name that is empty, too long or not `[A-Za-z0-9_.-]`.
    #[error("invalid module name")]
    BadName,
    /// Too many modules or too much code.
    #[error("registry full: {0}")]
    Full(&'static str),
    /// The module ran and trapped.
    #[error("module trapped: {0}")]
    Trap(#[from] VmError),
}

/// A listing entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// Module name.
    pub name: String,
    /// Owning job.
    pub job: JobKey,
    /// Whether it outlives its job.
    pub persist: bool,
    /// Bytecode instructions.
    pub code_len: usize,
}

#[derive(Debug)]
struct Entry {
    instance: ModuleInstance,
    job: JobKey,
    persist: bool,
}

/// The modules loaded on one NIC.
#[derive(Debug, Default)]
pub struct Registry {
    limits: RegistryLimits,
    modules: BTreeMap<String, Entry>,
    ports: BTreeMap<PortId, JobKey>,
}

impl Registry {
    /// An empty registry.
    pub fn new(limits: RegistryLimits) -> Self {
        Registry {
            limits,
            modules: BTreeMap::new(),
            ports: BTreeMap::new(),
        }
    }

    /// Records that `port` is open for `job` (the engine calls this).
    pub fn port_opened(&mut self, port: PortId, job: JobKey) {
        self.ports.insert(port, job);
    }

    /// Records that `port` closed. If it was its job's last port here, the
    /// job has ended on this NIC: its non-persistent modules are purged and
    /// their names returned.
    pub fn port_closed(&mut self, port: PortId) -> Vec<String> {
        match self.ports.remove(&port) {
            Some(job) if !self.ports.values().any(|&j| j == job) => self.end_job(job),
            _ => Vec::new(),
        }
    }

    /// The job has ended: purges its non-persistent modules, returning their names.
    pub fn end_job(&mut self, job: JobKey) -> Vec<String> {
        let doomed: Vec<String> = self
            .modules
            .iter()
            .filter(|(_, e)| e.job == job && !e.persist)
            .map(|(n, _)| n.clone())
            .collect();
        for n in &doomed {
            self.modules.remove(n);
        }
        doomed
    }

    /// The job a requester acts for, if it is known here.
    fn job_of(&self, who: Requester) -> Option<JobKey> {
        match who {
            Requester::Port(p) => self.ports.get(&p).copied(),
            Requester::Remote(key) => Some(key),
        }
    }

    fn job_has_port(&self, job: JobKey) -> bool {
        self.ports.values().any(|&j| j == job)
    }

    /// Loads (or with `replace`, replaces) module `name`.
    pub fn load(
        &mut self,
        who: Requester,
        name: &str,
        code: ModuleCode<'_>,
        opts: LoadOptions,
    ) -> Result<(), RegistryError> {
        let job = self.job_of(who).ok_or(RegistryError::NotAuthorized)?;
        // A load creates state on this NIC, so it needs a live job here,
        // whether asked locally or remotely.
        if !self.job_has_port(job) {
            return Err(RegistryError::NotAuthorized);
        }
        if name.is_empty()
            || name.len() > self.limits.max_name_len
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            return Err(RegistryError::BadName);
        }
        let replacing = match self.modules.get(name) {
            Some(e) if e.job != job => return Err(RegistryError::NameTaken(name.to_string())),
            Some(_) if !opts.replace => return Err(RegistryError::NameTaken(name.to_string())),
            Some(e) => e.instance.module().code_len(),
            None => 0,
        };
        if replacing == 0 && self.modules.len() >= self.limits.max_modules {
            return Err(RegistryError::Full("module count"));
        }
        let module = match code {
            ModuleCode::Source(src) => compile_with(src, &self.limits.vm)?.module,
            ModuleCode::Bytecode(bytes) => {
                Arc::new(verify(&Module::decode(bytes)?, &self.limits.vm)?)
            }
            // Re-verify under this registry's limits: the caller's may differ.
            ModuleCode::Verified(m) if m.limits() == &self.limits.vm => m,
            ModuleCode::Verified(m) => Arc::new(verify(m.bytecode(), &self.limits.vm)?),
        };
        let total: usize = self
            .modules
            .values()
            .map(|e| e.instance.module().code_len())
            .sum::<usize>()
            .saturating_sub(replacing);
        if total + module.code_len() > self.limits.max_total_code {
            return Err(RegistryError::Full("code size"));
        }
        self.modules.insert(
            name.to_string(),
            Entry {
                instance: ModuleInstance::new(module),
                job,
                persist: opts.persist,
            },
        );
        Ok(())
    }

    /// Removes module `name`; only its owning job may.
    pub fn purge(&mut self, who: Requester, name: &str) -> Result<(), RegistryError> {
        let job = self.job_of(who).ok_or(RegistryError::NotAuthorized)?;
        match self.modules.get(name) {
            None => Err(RegistryError::NotFound(name.to_string())),
            Some(e) if e.job != job => Err(RegistryError::NotAuthorized),
            Some(_) => {
                self.modules.remove(name);
                Ok(())
            }
        }
    }

    /// The loaded modules, by name.
    pub fn list(&self) -> Vec<ModuleInfo> {
        self.modules
            .iter()
            .map(|(n, e)| ModuleInfo {
                name: n.clone(),
                job: e.job,
                persist: e.persist,
                code_len: e.instance.module().code_len(),
            })
            .collect()
    }

    /// Runs module `name` for a packet of job `job`. See
    /// [`ModuleInstance::invoke`] for the arguments.
    pub fn invoke<S: NicServices + ?Sized>(
        &mut self,
        name: &str,
        job: JobKey,
        services: &mut S,
        packet: &[u8],
        acc: &mut [u8],
        fuel: u64,
    ) -> Result<Outcome, RegistryError> {
        let e = self
            .modules
            .get_mut(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_string()))?;
        if e.job != job {
            return Err(RegistryError::NotAuthorized);
        }
        Ok(e.instance.invoke(services, packet, acc, fuel)?)
    }

    /// Direct access to a module's instance (for an engine that keeps its
    /// own lookup), checked against the job.
    pub fn instance_mut(&mut self, name: &str, job: JobKey) -> Option<&mut ModuleInstance> {
        self.modules
            .get_mut(name)
            .filter(|e| e.job == job)
            .map(|e| &mut e.instance)
    }
}
