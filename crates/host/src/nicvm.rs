//! NICVM modules from the application's side (the NICVM paper's GM and MPI
//! additions, 4.4): compile and verify a module here, load it on every
//! member's engine of a group (each member calls [`Port::nicvm_load`]),
//! hand it packets, receive what it delivers, read its counters, purge it.
//!
//! A loaded module can also be a collective's reduction operator
//! ([`Port::nicvm_reduce`], [`Port::nicvm_allreduce`]): the engines run it
//! to combine each contribution (acc = acc op packet), offloaded, with
//! their fuel budget; a module that fails fails the collective at every
//! member that waits for its result, with a typed error.
//!
//! The engine verifies the bytecode again before accepting it, so a host
//! that skips the compiler gains nothing. A member may send to the module
//! before every other member has loaded it: an engine without it refuses
//! the packet and its sender retries (within the retry timeout), as for a
//! message to a port not yet open.

use outboard_engine::{nicvm_match, Command, Completion, ModuleId, ModuleReport, MODULE_REPORT_LEN, NICVM_TAG_FAILED, NICVM_TAG_NEW};
use outboard_nicvm::CompileError;

use outboard_engine::{Datatype, Reduction};

use crate::{AllreduceAlgorithm, CollRequest, Endpoint, Group, HostBuf, HostError, Mode, Port, PortIo, Request, TreeShape};

/// A module loaded on this port's engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicModule {
    /// The job's id for it (from its name).
    pub id: ModuleId,
    /// The generation loaded: packets name it.
    pub generation: u32,
    /// Its name.
    pub name: String,
}

impl NicModule {
    /// This module as a reduction operator over vectors of `dtype` (the
    /// type fixes the element size only; the module reads the bytes).
    pub fn reduction(&self, dtype: Datatype) -> Reduction {
        Reduction::module(self.id, self.generation, dtype)
    }
}

/// A load under way (see [`Port::start_nicvm_load_bytecode`]).
#[derive(Debug)]
#[must_use = "a load must be finished"]
pub struct PendingLoad {
    req: Request,
    bufs: [HostBuf; 2],
    module: ModuleId,
    name: String,
}

impl PendingLoad {
    /// The engine-level request to wait for.
    pub fn request(&self) -> Request {
        self.req
    }
}

/// Options of a load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Keep it after this port closes, until the job's last port on the
    /// engine closes or it is purged.
    pub persist: bool,
    /// Replace a loaded module of the same name (its state starts afresh).
    pub replace: bool,
    /// Bytes of the accumulator area the engine keeps for it.
    pub acc_len: u32,
}

/// Why a load failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The source does not compile (or fails the verifier here).
    #[error("{0}")]
    Compile(#[from] CompileError),
    /// The engine refused it, or the port failed.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// Something a module delivered to this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The port the packet came from (the previous hop; this port for a
    /// packet handed to the local engine).
    pub src: Endpoint,
    /// The bytes.
    pub data: Vec<u8>,
    /// A module on the way failed on it (fuel, trap, bad send, stale
    /// generation): it took the default path.
    pub failed: bool,
    /// New bytes the module made (`nicvm_deliver_acc`), not the packet.
    pub new: bool,
}

/// The job-wide id of a module name (FNV-1a): every process derives the
/// same one.
pub fn module_id(name: &str) -> ModuleId {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    ModuleId(h)
}

impl<P: PortIo> Port<P> {
    /// Compiles and verifies `source` here, then loads it on this engine
    /// for group `g` (installing the group there if needed). Every member
    /// of `g` calls it with the same name and source.
    pub fn nicvm_load(&mut self, g: &mut Group, name: &str, source: &str, opts: LoadOptions) -> Result<NicModule, LoadError> {
        let compiled = outboard_nicvm::compile(source)?;
        let code = compiled.module.bytecode().encode();
        Ok(self.nicvm_load_bytecode(g, name, &code, opts)?)
    }

    /// Loads encoded bytecode (the engine decodes and verifies it).
    pub fn nicvm_load_bytecode(&mut self, g: &mut Group, name: &str, code: &[u8], opts: LoadOptions) -> Result<NicModule, HostError> {
        let pending = self.start_nicvm_load_bytecode(g, name, code, opts)?;
        let r = self.wait(pending.req);
        self.finish_nicvm_load(pending, r)
    }

    /// Starts a load of encoded bytecode without waiting (a driver that
    /// waits its own way, like the simulator's processes, waits for
    /// [`PendingLoad::request`] and then calls [`Self::finish_nicvm_load`]).
    pub fn start_nicvm_load_bytecode(&mut self, g: &mut Group, name: &str, code: &[u8], opts: LoadOptions) -> Result<PendingLoad, HostError> {
        self.install_group(g)?;
        let module = module_id(name);
        let name_buf = self.buffer_from(name.as_bytes())?;
        let code_buf = self.buffer_from(code)?;
        let req = self.start(|op| Command::NicvmLoad {
            op,
            module,
            name: name_buf,
            code: code_buf,
            acc_len: opts.acc_len,
            persist: opts.persist,
            replace: opts.replace,
        });
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                self.free(name_buf)?;
                self.free(code_buf)?;
                return Err(e);
            }
        };
        Ok(PendingLoad { req, bufs: [name_buf, code_buf], module, name: name.to_string() })
    }

    /// Ends a load started by [`Self::start_nicvm_load_bytecode`], given its
    /// request's result: frees its buffers, names the loaded module.
    pub fn finish_nicvm_load(&mut self, p: PendingLoad, r: Result<Completion, HostError>) -> Result<NicModule, HostError> {
        for b in p.bufs {
            self.free(b)?;
        }
        match r? {
            Completion::NicvmLoaded { generation } => Ok(NicModule { id: p.module, generation, name: p.name }),
            other => unreachable!("a load completed as {other:?}"),
        }
    }

    /// Starts handing the packet in `buf` to module `m` at rank `dest` of
    /// `g` (this rank: the local engine runs it, the paper's delegation),
    /// for an operation rooted at `root`.
    pub fn start_nicvm_send(&mut self, g: &mut Group, m: &NicModule, root: u32, dest: u32, buf: HostBuf) -> Result<Request, HostError> {
        self.install_group(g)?;
        let (module, generation, group) = (m.id, m.generation, g.id());
        self.start(|op| Command::NicvmSend { op, module, generation, group, root, dest, buf })
    }

    /// Hands `data` to module `m` at rank `dest`; whether a local module
    /// failed on it.
    pub fn nicvm_send(&mut self, g: &mut Group, m: &NicModule, root: u32, dest: u32, data: &[u8]) -> Result<bool, HostError> {
        let buf = self.buffer_from(data)?;
        let r = self.start_nicvm_send(g, m, root, dest, buf).and_then(|r| self.wait(r));
        self.free(buf)?;
        match r? {
            Completion::NicvmSent { failed } => Ok(failed),
            other => unreachable!("a module send completed as {other:?}"),
        }
    }

    /// Starts a receive of module `m`'s next delivery into `buf`.
    pub fn start_nicvm_recv(&mut self, m: &NicModule, buf: HostBuf) -> Result<Request, HostError> {
        self.start_recv(nicvm_match(m.id), buf)
    }

    /// Receives module `m`'s next delivery (at most `max` bytes).
    pub fn nicvm_recv(&mut self, m: &NicModule, max: u32) -> Result<Delivery, HostError> {
        let (src, tag, data) = self.recv(nicvm_match(m.id), max)?;
        Ok(Delivery { src, data, failed: tag & NICVM_TAG_FAILED != 0, new: tag & NICVM_TAG_NEW != 0 })
    }

    /// Removes module `m` from this engine.
    pub fn nicvm_purge(&mut self, m: &NicModule) -> Result<(), HostError> {
        let module = m.id;
        let r = self.start(|op| Command::NicvmPurge { op, module })?;
        self.wait(r).map(|_| ())
    }

    /// The job's modules on this engine and their counters (invocations,
    /// instructions, errors by kind), by name.
    pub fn nicvm_list(&mut self) -> Result<Vec<ModuleReport>, HostError> {
        let buf = self.buffer(64 * MODULE_REPORT_LEN as u32)?;
        let r = self.start(|op| Command::NicvmList { op, buf }).and_then(|r| self.wait(r));
        let bytes = self.read_buffer(buf);
        self.free(buf)?;
        let Completion::NicvmListed { count } = r? else { unreachable!("a listing completed otherwise") };
        let bytes = bytes?;
        Ok((0..count.min(64) as usize).filter_map(|i| ModuleReport::decode(&bytes[i * MODULE_REPORT_LEN..])).collect())
    }

    /// Starts a reduction of every member's `data` to `root` on the
    /// engines, module `m` combining (a tree of `tree`'s shape rooted at
    /// `root`). Every member loaded `m` and calls this with the same
    /// arguments.
    pub fn start_nicvm_reduce(&mut self, g: &mut Group, m: &NicModule, dtype: Datatype, tree: TreeShape, root: u32, data: &[u8]) -> Result<CollRequest, HostError> {
        self.start_reduce(g, Mode::Offloaded, tree, root, m.reduction(dtype), data)
    }

    /// Starts an allreduce on the engines with module `m` combining.
    pub fn start_nicvm_allreduce(&mut self, g: &mut Group, m: &NicModule, dtype: Datatype, algo: AllreduceAlgorithm, data: &[u8]) -> Result<CollRequest, HostError> {
        self.start_allreduce(g, Mode::Offloaded, algo, m.reduction(dtype), data)
    }

    /// Blocking [`Self::start_nicvm_reduce`]: the result at `root`, empty
    /// elsewhere.
    pub fn nicvm_reduce(&mut self, g: &mut Group, m: &NicModule, dtype: Datatype, tree: TreeShape, root: u32, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_nicvm_reduce(g, m, dtype, tree, root, data)?;
        self.coll_wait(r)
    }

    /// Blocking [`Self::start_nicvm_allreduce`].
    pub fn nicvm_allreduce(&mut self, g: &mut Group, m: &NicModule, dtype: Datatype, algo: AllreduceAlgorithm, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let r = self.start_nicvm_allreduce(g, m, dtype, algo, data)?;
        self.coll_wait(r)
    }
}
