//! NICVM modules: user code the engines run per packet (`docs/nicvm.md`).
//!
//! A module handle (`outboard_module`) is made here, without a world, by
//! compiling source ([`outboard_module_compile`]) or by decoding and
//! verifying bytecode ([`outboard_module_from_bytecode`]); it can then be
//! loaded on this rank's engine for a group ([`outboard_module_load`],
//! collective), replaced, purged, sent packets, and bound to a reduction
//! operator ([`outboard_op_from_module`]) that `outboard_reduce` and
//! `outboard_allreduce` take like a built-in one. The handle also runs its
//! module here ([`outboard_module_combine`]), so that a program (the MPI
//! library) that cannot offload a reduction computes the same result
//! without the engine.
//!
//! Why the handle exists apart from a load: a program that falls back to
//! host-side reductions (no world, a communicator Outboard does not map)
//! still needs the module, and a compile error is then reported before
//! any collective starts.
//!
//! Operators are `int` codes like the built-in ones, from
//! [`OUTBOARD_OP_MODULE_FIRST`] up, one per handle; the code names the
//! handle, so after a replace it reduces with the new generation. A code
//! whose handle was freed is refused, naming the module.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use outboard_engine::{Datatype, ModuleReport, NicvmError, NicvmLimits, ReduceOp, Reduction, NICVM_TAG_FAILED, NICVM_TAG_NEW};
use outboard_host::nicvm::{module_id, LoadOptions};
use outboard_host::{HostError, NicModule, OpError};
use outboard_engine::nicvm::combine_step;
use outboard_nicvm::{ModuleInstance, VerifiedModule};

use crate::error::{bytes, bytes_mut, deref, guard, put, Error, OUTBOARD_ERR_ARG, OUTBOARD_ERR_MODULE, OUTBOARD_ERR_STATE, OUTBOARD_ERR_TRUNCATED};
use crate::group::outboard_group;
use crate::request::{hand_out as hand_out_request, outboard_request, outboard_status, Kind};
use crate::{outboard_wait, OUTBOARD_OK};
use crate::world::{outboard_world, Shared};

/// A NICVM module (opaque): compiled and verified here; loaded on this
/// rank's engine or not.
pub struct outboard_module {
    core: Arc<Core>,
}

/// What a module handle and its operator code share.
pub(crate) struct Core {
    name: String,
    state: Mutex<State>,
}

struct State {
    /// The encoded bytecode, what an engine is given.
    code: Vec<u8>,
    /// The module run here by [`outboard_module_combine`]; its
    /// module-level variables are this process's own.
    host: ModuleInstance,
    /// Where it is loaded: the world and the engine's name for it.
    loaded: Option<(Arc<Shared>, NicModule)>,
    /// Its operator code, once asked for.
    op: Option<c_int>,
}

/// Keep the module after the loading port closes, until the job's last
/// port on the engine closes or it is purged.
pub const OUTBOARD_MODULE_PERSIST: c_int = 1;

/// Operator codes of modules ([`outboard_op_from_module`]) are this and
/// above; the built-in operators are below.
pub const OUTBOARD_OP_MODULE_FIRST: c_int = 0x1_0000;

/// Room for a module's name in [`outboard_module_info`] (64 bytes and the
/// terminating NUL).
pub const OUTBOARD_MODULE_NAME_MAX: usize = 65;

/// One loaded module and its counters on this rank's engine
/// ([`outboard_module_list`]).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct outboard_module_info {
    /// Its name, NUL-terminated.
    pub name: [c_char; OUTBOARD_MODULE_NAME_MAX],
    /// The generation loaded (each replace adds one).
    pub generation: u32,
    /// 1 if it outlives its loading port.
    pub persist: c_int,
    /// Packets and contributions it ran for.
    pub invocations: u64,
    /// VM instructions it executed, failed runs included.
    pub instructions: u64,
    /// Runs stopped for want of fuel.
    pub out_of_fuel: u64,
    /// Runs stopped by any other trap, or that reported failure as an
    /// operator.
    pub traps: u64,
    /// Runs stopped by a send to a rank outside the group.
    pub bad_sends: u64,
    /// Module sends given up.
    pub send_failures: u64,
    /// Packets or contributions that named another generation.
    pub stale: u64,
}

/// A module delivery's flag: a module on the way failed on the packet
/// (fuel, trap, bad send, stale generation), which took the default path.
pub const OUTBOARD_DELIVERY_FAILED: c_int = 1;
/// A module delivery's flag: new bytes the module made
/// (`nicvm_deliver_acc`), not the packet.
pub const OUTBOARD_DELIVERY_NEW: c_int = 2;

/// Operator codes in use, and the module names this process knows by the
/// engine's id (an engine's error names a module by id only).
struct Registry {
    /// The module each code was made for, and its handle while it lives.
    ops: HashMap<c_int, (String, Weak<Core>)>,
    next_op: c_int,
    names: HashMap<u32, String>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    // Nothing in the registry is left half-changed by a panic (each update
    // is one insert or remove), so a poisoned lock is still sound.
    let mut r = REGISTRY.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    r.get_or_insert_with(|| Registry { ops: HashMap::new(), next_op: OUTBOARD_OP_MODULE_FIRST, names: HashMap::new() });
    r
}

/// The name of the module the engine knows as `id`, if this process made
/// a handle for it.
pub(crate) fn name_of(id: u32) -> Option<String> {
    registry().as_ref().and_then(|r| r.names.get(&id).cloned())
}

/// What a module operator code names: the reduction to run and the
/// module's name (for errors); `None` for a code below
/// [`OUTBOARD_OP_MODULE_FIRST`].
pub(crate) fn module_op(op: c_int, dtype: Datatype) -> Option<Result<(Reduction, Arc<str>), Error>> {
    if op < OUTBOARD_OP_MODULE_FIRST {
        return None;
    }
    let core = registry().as_ref().and_then(|r| r.ops.get(&op).map(|(name, w)| (name.clone(), w.upgrade())));
    Some(match core {
        None => Err(Error::arg(format!("unknown operation {op}: not a built-in operator and no module was bound to it (outboard_op_from_module)"))),
        Some((name, None)) => Err(Error::arg(format!("operation {op} names module '{name}', whose handle was freed"))),
        Some((_, Some(core))) => core.lock().and_then(|s| match &s.loaded {
            Some((_, m)) => Ok((m.reduction(dtype), Arc::from(core.name.as_str()))),
            None => Err(Error::new(
                OUTBOARD_ERR_MODULE,
                format!("module '{}' is not loaded on this rank's engine: outboard_module_load it before reducing with it", core.name),
            )),
        }),
    })
}

/// Whether a reduction's operator is a module (only engines run those).
pub(crate) fn is_module(r: &Reduction) -> bool {
    matches!(r.op, ReduceOp::Module { .. })
}

impl Core {
    fn lock(&self) -> Result<MutexGuard<'_, State>, Error> {
        self.state.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, format!("an earlier call panicked with module '{}' in use", self.name)))
    }
}

/// A module name: valid UTF-8 of 1 to 64 of `A-Z a-z 0-9 _ . -` (what an
/// engine accepts), or an argument error saying so.
unsafe fn name_arg(name: *const c_char) -> Result<String, Error> {
    if name.is_null() {
        return Err(Error::arg("the module name is null"));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string.
    let raw = unsafe { CStr::from_ptr(name) };
    let s = raw.to_str().map_err(|e| Error::arg(format!("the module name is not valid UTF-8 (byte {})", e.valid_up_to())))?;
    let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if !ok {
        return Err(Error::arg(format!("module name {s:?} is not 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'")));
    }
    Ok(s.to_string())
}

/// A module's source text, or an argument error naming the module.
unsafe fn source_arg<'a>(source: *const c_char, name: &str) -> Result<&'a str, Error> {
    if source.is_null() {
        return Err(Error::arg(format!("the source of module '{name}' is null")));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string
    // that stays valid for the call.
    let raw = unsafe { CStr::from_ptr(source) };
    raw.to_str().map_err(|e| Error::arg(format!("the source of module '{name}' is not valid UTF-8 (byte {})", e.valid_up_to())))
}

/// Compiles and verifies `source`, or says why not, naming the module.
fn compile(name: &str, source: &str) -> Result<(Vec<u8>, Arc<VerifiedModule>), Error> {
    let c = outboard_nicvm::compile(source).map_err(|e| Error::new(OUTBOARD_ERR_MODULE, format!("module '{name}' does not compile: line {}, column {}: {}", e.pos.line, e.pos.col, e.kind)))?;
    Ok((c.module.bytecode().encode(), c.module))
}

/// Hands out a new handle for module `name`.
fn hand_out(name: String, code: Vec<u8>, verified: Arc<VerifiedModule>, out: *mut *mut outboard_module) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::arg("out is null"));
    }
    if let Some(r) = registry().as_mut() {
        r.names.insert(module_id(&name).0, name.clone());
    }
    let state = State { code, host: ModuleInstance::new(verified), loaded: None, op: None };
    let h = Box::into_raw(Box::new(outboard_module { core: Arc::new(Core { name, state: Mutex::new(state) }) }));
    // SAFETY: checked non-null above; the caller promises it is writable.
    unsafe { out.write(h) };
    Ok(())
}

/// Compiles and verifies the module `source` (NUL-terminated UTF-8) as
/// `name` (1 to 64 of `A-Z a-z 0-9 _ . -`, the same at every rank that
/// loads it). Local: no world needed. A source that does not compile
/// fails with `OUTBOARD_ERR_MODULE` and a message naming the module, the
/// line and the column.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_compile(name: *const c_char, source: *const c_char, out: *mut *mut outboard_module) -> c_int {
    guard(|| {
        let name = unsafe { name_arg(name) }?;
        let source = unsafe { source_arg(source, &name) }?;
        let (code, verified) = compile(&name, source)?;
        hand_out(name, code, verified, out)
    })
}

/// Decodes and verifies `len` bytes of encoded bytecode (as
/// [`outboard_module_bytecode`] gives, or `outboard nicvm` tools make) as
/// module `name`. Local. Bytecode that does not decode or fails the
/// verifier fails with `OUTBOARD_ERR_MODULE`, naming the module and why.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_from_bytecode(name: *const c_char, code: *const c_void, len: usize, out: *mut *mut outboard_module) -> c_int {
    guard(|| {
        let name = unsafe { name_arg(name) }?;
        let code = unsafe { bytes(code, len, "code") }?;
        let decoded = outboard_nicvm::bytecode::Module::decode(code)
            .map_err(|e| Error::new(OUTBOARD_ERR_MODULE, format!("the bytecode of module '{name}' does not decode: {e}")))?;
        let verified = outboard_nicvm::verify(&decoded, &outboard_nicvm::Limits::default())
            .map_err(|e| Error::new(OUTBOARD_ERR_MODULE, format!("the bytecode of module '{name}' fails verification: {e}")))?;
        hand_out(name, code.to_vec(), Arc::new(verified), out)
    })
}

/// Copies the module's encoded bytecode into `buf` (`cap` bytes) and its
/// length into `*len`; with `cap` too small (or `buf` null and `cap` 0)
/// only the length is written and `OUTBOARD_ERR_ARG` says how much is
/// needed.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_bytecode(module: *const outboard_module, buf: *mut c_void, cap: usize, len: *mut usize) -> c_int {
    guard(|| {
        let m = unsafe { deref(module, "module") }?;
        let s = m.core.lock()?;
        unsafe { put(len, s.code.len(), "len") }?;
        if cap < s.code.len() {
            return Err(Error::arg(format!("the bytecode of module '{}' needs {} bytes; cap is {cap}", m.core.name, s.code.len())));
        }
        let out = unsafe { bytes_mut(buf, s.code.len(), "buf") }?;
        out.copy_from_slice(&s.code);
        Ok(())
    })
}

/// An engine's failure to load or act on a module, named.
fn engine_error(e: HostError, name: &str, doing: &str) -> Error {
    let nicvm = matches!(e, HostError::Op(OpError::Nicvm(_)));
    let mut err = Error::from(e);
    if nicvm {
        err.code = OUTBOARD_ERR_MODULE;
    }
    err.msg = format!("{doing} module '{name}' on this rank's engine failed: {}", err.msg);
    err
}

/// Loads the module on this rank's engine for `group` (the engine
/// verifies it again). Collective: every member loads the same module
/// under the same name. `flags`: 0 or [`OUTBOARD_MODULE_PERSIST`];
/// `acc_len`: bytes of the accumulator the engine keeps for it (0 for an
/// operator: a reduction brings its own). Unless persistent, the engine
/// purges it when this rank's port closes. A module of that name already
/// loaded by this job fails with `OUTBOARD_ERR_MODULE` (replace it with
/// [`outboard_module_replace`]); ranks sharing a node engine share one
/// copy.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_load(group: *const outboard_group, module: *const outboard_module, flags: c_int, acc_len: u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let m = unsafe { deref(module, "module") }?;
        if flags & !OUTBOARD_MODULE_PERSIST != 0 {
            return Err(Error::arg(format!("module flags {flags:#x}: only OUTBOARD_MODULE_PERSIST ({OUTBOARD_MODULE_PERSIST}) is accepted")));
        }
        let mut s = m.core.lock()?;
        if s.loaded.is_some() {
            return Err(Error::new(OUTBOARD_ERR_MODULE, format!("module '{}' is already loaded through this handle: replace or purge it", m.core.name)));
        }
        let opts = LoadOptions { persist: flags & OUTBOARD_MODULE_PERSIST != 0, replace: false, acc_len };
        let name = m.core.name.clone();
        let loaded = g.with(|gr, w| w.port().nicvm_load_bytecode(gr, &name, &s.code, opts).map_err(|e| engine_error(e, &name, "loading")))?;
        s.loaded = Some((g.shared.clone(), loaded));
        Ok(())
    })
}

/// Replaces the loaded module with `source` compiled (its module-level
/// variables start afresh; its operator code reduces with the new code).
/// Collective over `group`, as the load was. A source that does not
/// compile fails with `OUTBOARD_ERR_MODULE` and changes nothing. Ranks
/// that share a node engine share one copy, which each replace would
/// replace again, leaving the others' handles naming an older generation
/// (their reductions then fail as stale): there, load new code under a
/// new name instead.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_replace(group: *const outboard_group, module: *const outboard_module, source: *const c_char) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let m = unsafe { deref(module, "module") }?;
        let name = m.core.name.clone();
        let source = unsafe { source_arg(source, &name) }?;
        let (code, verified) = compile(&name, source)?;
        let mut s = m.core.lock()?;
        let Some(old) = s.loaded.as_ref().map(|(_, l)| l.id) else {
            return Err(Error::new(OUTBOARD_ERR_MODULE, format!("module '{name}' is not loaded: load it before replacing it")));
        };
        // A replacement keeps the module's lifetime.
        let persist = g.with(|_, w| Ok(w.port().nicvm_list()?.into_iter().find(|r| r.module == old).is_some_and(|r| r.persist)))?;
        let opts = LoadOptions { persist, replace: true, acc_len: 0 };
        let loaded = g.with(|gr, w| w.port().nicvm_load_bytecode(gr, &name, &code, opts).map_err(|e| engine_error(e, &name, "replacing")))?;
        s.code = code;
        s.host = ModuleInstance::new(verified);
        s.loaded = Some((g.shared.clone(), loaded));
        Ok(())
    })
}

/// Removes the module from this rank's engine (at this rank only; each
/// rank purges its own). Ranks sharing a node engine share one copy, which
/// the first purge removes for all of them (so purge after the last
/// collective that uses it, e.g. after a barrier); a module already gone
/// from the engine counts as purged. The handle stays valid: it may be
/// loaded again, and still runs the module here.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_purge(module: *const outboard_module) -> c_int {
    guard(|| {
        let m = unsafe { deref(module, "module") }?;
        let mut s = m.core.lock()?;
        let Some((shared, loaded)) = s.loaded.take() else {
            return Err(Error::new(OUTBOARD_ERR_MODULE, format!("module '{}' is not loaded: nothing to purge", m.core.name)));
        };
        let r = shared.with(|w| match w.port().nicvm_purge(&loaded) {
            Ok(()) | Err(HostError::Op(OpError::Nicvm(NicvmError::NotFound))) => Ok(()),
            Err(e) => Err(engine_error(e, &m.core.name, "purging")),
        });
        if r.is_err() {
            // Still loaded as far as anyone knows: keep it so.
            s.loaded = Some((shared, loaded));
        }
        r
    })
}

/// Frees the handle (the engine keeps a loaded module until this rank's
/// port closes, or, persistent, until it is purged); its operator code is
/// refused afterwards.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_free(module: *mut outboard_module) -> c_int {
    guard(|| {
        if module.is_null() {
            return Err(Error::arg("module is null"));
        }
        // SAFETY: a handle from this module, freed only here. Its operator
        // code stays in the registry, its handle gone, so that a later use
        // is refused naming the module instead of as an unknown code.
        drop(unsafe { Box::from_raw(module) });
        Ok(())
    })
}

/// The reduction operator whose combine step is the module, for
/// `outboard_reduce`, `outboard_allreduce` and their `_start` forms
/// (always run by the engines, whatever the group's mode, since only
/// engines run modules). The engine runs it once per contribution with
/// the contribution as the packet and the running value as the
/// accumulator (`acc = acc op packet`); the datatype only fixes where long
/// vectors are cut. A module that runs out of fuel, traps or returns
/// `NICVM_RESULT_FAILURE` fails the collective with `OUTBOARD_ERR_MODULE`,
/// the message naming the module; every member that waited on it fails
/// too. The same code is returned for the handle each time; it stays
/// valid until the handle is freed.
#[no_mangle]
pub unsafe extern "C" fn outboard_op_from_module(module: *const outboard_module, op: *mut c_int) -> c_int {
    guard(|| {
        let m = unsafe { deref(module, "module") }?;
        if op.is_null() {
            return Err(Error::arg("op is null"));
        }
        let mut s = m.core.lock()?;
        let code = match s.op {
            Some(c) => c,
            None => {
                let mut reg = registry();
                let r = reg.as_mut().expect("made by registry()");
                let c = r.next_op;
                r.next_op = c.checked_add(1).ok_or_else(|| Error::arg("every module operator code is taken"))?;
                r.ops.insert(c, (m.core.name.clone(), Arc::downgrade(&m.core)));
                s.op = Some(c);
                c
            }
        };
        unsafe { put(op, code, "op") }
    })
}

/// Runs the module here as an operator's combine step: `acc = acc op in`
/// over `len` bytes at each, with the engine's fuel budget, as rank 0 of
/// a group of 1 (`mpi_get_source()` 0). For a program that reduces
/// without the engine (the MPI library's fallback): the result is the
/// engine's for a module that does not depend on the ranks. A failure
/// (out of fuel, a trap, `NICVM_RESULT_FAILURE`) is `OUTBOARD_ERR_MODULE`
/// naming the module, with `acc` unchanged.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_combine(module: *const outboard_module, acc: *mut c_void, input: *const c_void, len: usize) -> c_int {
    guard(|| {
        let m = unsafe { deref(module, "module") }?;
        let acc = unsafe { bytes_mut(acc, len, "acc") }?;
        let input = unsafe { bytes(input, len, "in") }?;
        let mut s = m.core.lock()?;
        let mut scratch = acc.to_vec();
        let fuel = NicvmLimits::default().fuel;
        let name = &m.core.name;
        // The engine's own combine step, as rank 0 of a group of 1.
        let step = combine_step(&mut s.host, (0, 1, 0), &mut scratch, input, fuel);
        match (step.result, step.trap) {
            (Ok(()), _) => {
                acc.copy_from_slice(&scratch);
                Ok(())
            }
            (Err(_), Some(e)) => Err(Error::new(OUTBOARD_ERR_MODULE, format!("module '{name}' failed combining {len} bytes: {e}"))),
            (Err(_), None) => {
                Err(Error::new(OUTBOARD_ERR_MODULE, format!("module '{name}' reported failure (NICVM_RESULT_FAILURE) combining {len} bytes")))
            }
        }
    })
}

/// Hands `len` bytes at `data` to the module at group rank `dest` (this
/// rank: the local engine runs it) for an operation rooted at `root`; it
/// runs once the packet arrives. `*failed` (if not null) is 1 when the
/// local module failed on it (the packet then went to this host).
#[no_mangle]
pub unsafe extern "C" fn outboard_module_send(
    group: *const outboard_group,
    module: *const outboard_module,
    root: u32,
    dest: u32,
    data: *const c_void,
    len: usize,
    failed: *mut c_int,
) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let m = unsafe { deref(module, "module") }?;
        let data = unsafe { bytes(data, len, "data") }?;
        if dest >= g.size || root >= g.size {
            return Err(Error::arg(format!("dest {dest} and root {root} must be ranks of the group of {}", g.size)));
        }
        let loaded = loaded(m)?;
        let f = g.with(|gr, w| w.port().nicvm_send(gr, &loaded, root, dest, data).map_err(|e| engine_error(e, &m.core.name, "sending to")))?;
        if !failed.is_null() {
            // SAFETY: non-null, and the caller promises a writable int.
            unsafe { failed.write(c_int::from(f)) };
        }
        Ok(())
    })
}

/// The engine's name for a loaded module, or an error naming it.
fn loaded(m: &outboard_module) -> Result<NicModule, Error> {
    let s = m.core.lock()?;
    s.loaded.as_ref().map(|(_, l)| l.clone()).ok_or_else(|| Error::new(OUTBOARD_ERR_MODULE, format!("module '{}' is not loaded on this rank's engine", m.core.name)))
}

/// Receives the module's next delivery to this rank (blocking, leaving
/// the world to other threads while it waits, as `outboard_recv` does):
/// at most `cap` bytes into `buf`; `*len` its full length, `*source` the
/// world rank it came from (the previous hop; -1 if not a rank of the
/// job), `*flags` [`OUTBOARD_DELIVERY_FAILED`] and
/// [`OUTBOARD_DELIVERY_NEW`] bits. Any of the three may be null. A longer
/// delivery is `OUTBOARD_ERR_TRUNCATED` with the three written and `buf`
/// holding its start.
#[no_mangle]
pub unsafe extern "C" fn outboard_module_recv(
    module: *const outboard_module,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    source: *mut i32,
    flags: *mut c_int,
) -> c_int {
    let mut req: *mut outboard_request = std::ptr::null_mut();
    let started = guard(|| {
        let m = unsafe { deref(module, "module") }?;
        if buf.is_null() && cap > 0 {
            return Err(Error::arg("buf is null"));
        }
        let cap32 = u32::try_from(cap).map_err(|_| Error::arg("cap beyond 4 GiB"))?;
        let (shared, l) = {
            let s = m.core.lock()?;
            let (shared, l) = s.loaded.as_ref().ok_or_else(|| Error::new(OUTBOARD_ERR_MODULE, format!("module '{}' is not loaded on this rank's engine", m.core.name)))?;
            (shared.clone(), l.clone())
        };
        let kind = shared.with(|w| {
            let port = w.port();
            let b = port.buffer_unzeroed(cap32)?;
            match port.start_nicvm_recv(&l, b) {
                Ok(r) => Ok(Kind::Recv { req: r, buf: b, out: buf.cast(), cap }),
                Err(e) => {
                    let _ = port.free(b);
                    Err(engine_error(e, &m.core.name, "receiving from"))
                }
            }
        })?;
        // SAFETY: `req` is a local the request is written to.
        unsafe { hand_out_request(shared, kind, &mut req) }
    });
    if started != OUTBOARD_OK {
        return started;
    }
    let mut st = outboard_status::default();
    // SAFETY: a request just handed out, finished and freed by the wait.
    let rc = unsafe { outboard_wait(&mut req, &mut st) };
    if rc == OUTBOARD_OK || rc == OUTBOARD_ERR_TRUNCATED {
        let bits = if st.tag & NICVM_TAG_FAILED != 0 { OUTBOARD_DELIVERY_FAILED } else { 0 } | if st.tag & NICVM_TAG_NEW != 0 { OUTBOARD_DELIVERY_NEW } else { 0 };
        // SAFETY (all three): each is written only if non-null, and the
        // caller promises it points at a writable value of its type.
        unsafe {
            if !len.is_null() {
                len.write(st.len as usize);
            }
            if !source.is_null() {
                source.write(st.source);
            }
            if !flags.is_null() {
                flags.write(bits);
            }
        }
    }
    rc
}

fn info(r: &ModuleReport) -> outboard_module_info {
    let mut name = [0 as c_char; OUTBOARD_MODULE_NAME_MAX];
    for (d, b) in name.iter_mut().zip(r.name.bytes().take(OUTBOARD_MODULE_NAME_MAX - 1)) {
        *d = b as c_char;
    }
    outboard_module_info {
        name,
        generation: r.generation,
        persist: c_int::from(r.persist),
        invocations: r.invocations,
        instructions: r.instructions,
        out_of_fuel: r.out_of_fuel,
        traps: r.traps,
        bad_sends: r.bad_sends,
        send_failures: r.send_failures,
        stale: r.stale,
    }
}

/// The job's modules on this rank's engine, with their counters: up to
/// `cap` of them into `infos` (null when `cap` is 0), and how many there
/// are into `*count` (more than `cap` when some did not fit).
#[no_mangle]
pub unsafe extern "C" fn outboard_module_list(world: *const outboard_world, infos: *mut outboard_module_info, cap: usize, count: *mut usize) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        if count.is_null() {
            return Err(Error::arg("count is null"));
        }
        if infos.is_null() && cap > 0 {
            return Err(Error::new(OUTBOARD_ERR_ARG, "infos is null"));
        }
        let list = w.shared.with(|w| Ok(w.port().nicvm_list()?))?;
        for (i, r) in list.iter().take(cap).enumerate() {
            // SAFETY: i < cap, and the caller promises `cap` writable
            // entries at `infos` (checked non-null when cap > 0).
            unsafe { infos.add(i).write(info(r)) };
        }
        unsafe { put(count, list.len(), "count") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outboard_last_error;

    fn last() -> String {
        // SAFETY: the library's per-thread message, NUL-terminated.
        unsafe { CStr::from_ptr(outboard_last_error()) }.to_string_lossy().into_owned()
    }

    fn compile_c(name: &CStr, source: &CStr) -> (c_int, *mut outboard_module) {
        let mut m = std::ptr::null_mut();
        // SAFETY: both are NUL-terminated C strings.
        let rc = unsafe { outboard_module_compile(name.as_ptr(), source.as_ptr(), &mut m) };
        (rc, m)
    }

    const NEGATE_SUM: &CStr = c"func main()\n    acc_set_i64(0, acc_get_i64(0) - packet_get_i64(0));\n    return 0;\nend func;\n";

    #[test]
    fn bad_names_sources_and_bytecode_are_refused_naming_the_module() {
        let (rc, m) = compile_c(c"two words", NEGATE_SUM);
        assert_eq!((rc, m.is_null()), (OUTBOARD_ERR_ARG, true));
        assert!(last().contains("module name \"two words\" is not 1 to 64 characters"), "{}", last());
        let (rc, _) = compile_c(c"\xff", NEGATE_SUM);
        assert_eq!(rc, OUTBOARD_ERR_ARG);
        assert!(last().contains("not valid UTF-8"), "{}", last());
        let (rc, _) = compile_c(c"bad", c"func main( end");
        assert_eq!(rc, OUTBOARD_ERR_MODULE);
        assert!(last().starts_with("module 'bad' does not compile: line 1, column "), "{}", last());
        let mut m = std::ptr::null_mut();
        // SAFETY: a NUL-terminated name and 3 readable bytes.
        let rc = unsafe { outboard_module_from_bytecode(c"junk".as_ptr(), b"NVM".as_ptr().cast(), 3, &mut m) };
        assert_eq!((rc, m.is_null()), (OUTBOARD_ERR_MODULE, true));
        assert!(last().contains("the bytecode of module 'junk' does not decode"), "{}", last());
    }

    #[test]
    fn a_module_runs_here_and_its_operator_code_outlives_its_handle_only_as_a_refusal() {
        let (rc, m) = compile_c(c"negsum", NEGATE_SUM);
        assert_eq!(rc, OUTBOARD_OK, "{}", last());
        let mut acc = 10i64.to_le_bytes();
        let other = 3i64.to_le_bytes();
        // SAFETY: 8 bytes at each.
        assert_eq!(unsafe { outboard_module_combine(m, acc.as_mut_ptr().cast(), other.as_ptr().cast(), 8) }, OUTBOARD_OK);
        assert_eq!(i64::from_le_bytes(acc), 7);
        let mut short = [0u8; 4];
        // SAFETY: 4 bytes at each; the module reads 8 and traps.
        assert_eq!(unsafe { outboard_module_combine(m, short.as_mut_ptr().cast(), other.as_ptr().cast(), 4) }, OUTBOARD_ERR_MODULE);
        assert!(last().starts_with("module 'negsum' failed combining 4 bytes: "), "{}", last());
        let mut op = 0;
        // SAFETY: a live handle and a writable int.
        assert_eq!(unsafe { outboard_op_from_module(m, &mut op) }, OUTBOARD_OK);
        assert!(op >= OUTBOARD_OP_MODULE_FIRST);
        let e = module_op(op, Datatype::I64).expect("a module's code").unwrap_err();
        assert_eq!(e.code, OUTBOARD_ERR_MODULE);
        assert!(e.msg.contains("module 'negsum' is not loaded on this rank's engine"), "{}", e.msg);
        // SAFETY: freed once.
        assert_eq!(unsafe { outboard_module_free(m) }, OUTBOARD_OK);
        let e = module_op(op, Datatype::I64).expect("a module's code").unwrap_err();
        assert_eq!(e.code, OUTBOARD_ERR_ARG);
        assert!(e.msg.contains("names module 'negsum', whose handle was freed"), "{}", e.msg);
        assert!(module_op(OUTBOARD_OP_MODULE_FIRST - 1, Datatype::I64).is_none());
        assert_eq!(name_of(module_id("negsum").0).as_deref(), Some("negsum"));
    }
}
