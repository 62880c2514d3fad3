//! The launcher's PMIx server as the bootstrap: what Open MPI's `mpirun`
//! (4.x and later), PRRTE and `srun --mpi=pmix` serve every process they
//! start (`PMIX_RANK`, `PMIX_NAMESPACE` and the server's address in its
//! environment).
//!
//! `libpmix.so.2` is loaded when a job first needs it (`dlopen`), not
//! linked: the build, and every process not started by a PMIx launcher,
//! works on a machine without it. The dozen entry points and the three
//! structures they take are declared here by hand from PMIx's
//! `pmix_common.h`; the parts used (`pmix_proc_t`, the head of
//! `pmix_value_t` and of `pmix_info_t`, a single info at a time) have had
//! the same layout from PMIx 2 to 5, all of which ship as `libpmix.so.2`.
//!
//! A `put` is `PMIx_Put(PMIX_GLOBAL, "outboard.<key>", bytes)`; a fence is
//! `PMIx_Commit` then `PMIx_Fence` over the whole namespace with
//! `PMIX_COLLECT_DATA`, after which every rank's values are in this
//! process's PMIx store and `PMIx_Get` reads them without asking the
//! server again (`PMIX_OPTIONAL`). The store is the launcher's: what a
//! rank puts (the job secret rank 0 draws, among others) is readable by
//! every process of the job and by the launcher's daemons, and by nobody
//! else (PMIx clients authenticate to their server).
// Calls into a C library loaded at run time; see ARCHITECTURE.md's unsafe
// table.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use super::{Bootstrap, BootstrapError};

/// The library's name: its soname since PMIx 2.
pub const LIBRARY: &str = "libpmix.so.2";

type Status = c_int;
const PMIX_SUCCESS: Status = 0;
const PMIX_ERR_NOT_FOUND: Status = -46;
const NSLEN: usize = 256; // PMIX_MAX_NSLEN + 1
const KEYLEN: usize = 512; // PMIX_MAX_KEYLEN + 1
const RANK_WILDCARD: u32 = u32::MAX - 1;
const SCOPE_GLOBAL: u8 = 3;

// pmix_data_type_t values.
const T_BOOL: u16 = 1;
const T_SIZE: u16 = 4;
const T_INT: u16 = 6;
const T_INT32: u16 = 9;
const T_UINT: u16 = 11;
const T_UINT16: u16 = 13;
const T_UINT32: u16 = 14;
const T_UINT64: u16 = 15;
const T_BYTE_OBJECT: u16 = 27;
const T_PROC_RANK: u16 = 40;

/// `pmix_proc_t`.
#[repr(C)]
struct Proc {
    nspace: [c_char; NSLEN],
    rank: u32,
}

/// `pmix_byte_object_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct ByteObject {
    bytes: *mut c_char,
    size: usize,
}

/// The members of `pmix_value_t`'s union that Outboard reads or writes;
/// `_whole` gives it the size of PMIx 4's union (its largest member,
/// `pmix_envar_t`, is three words).
#[repr(C)]
#[derive(Clone, Copy)]
union Data {
    flag: bool,
    uint16: u16,
    uint32: u32,
    uint64: u64,
    int: c_int,
    size: usize,
    bo: ByteObject,
    _whole: [u64; 3],
}

/// `pmix_value_t`.
#[repr(C)]
struct Value {
    kind: u16,
    data: Data,
}

/// `pmix_info_t`.
#[repr(C)]
struct Info {
    key: [c_char; KEYLEN],
    flags: u32,
    value: Value,
}

// The sizes `sizeof` gives in C against PMIx 4.2's headers on x86-64.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<Proc>() == 260);
    assert!(std::mem::size_of::<Value>() == 32);
    assert!(std::mem::size_of::<Info>() == 552);
    assert!(std::mem::offset_of!(Info, value) == 520);
};

impl Info {
    /// A boolean directive that is true.
    fn flag(key: &str) -> Info {
        let mut i = Info { key: [0; KEYLEN], flags: 0, value: Value { kind: T_BOOL, data: Data { _whole: [0; 3] } } };
        for (d, s) in i.key.iter_mut().zip(key.bytes()) {
            *d = s as c_char;
        }
        i.value.data.flag = true;
        i
    }
}

/// The entry points, resolved once per process. The library stays loaded
/// for the process's life (never `dlclose`d: PMIx keeps threads running).
struct Lib {
    init: unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> Status,
    finalize: unsafe extern "C" fn(*const Info, usize) -> Status,
    put: unsafe extern "C" fn(u8, *const c_char, *mut Value) -> Status,
    commit: unsafe extern "C" fn() -> Status,
    fence: unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> Status,
    get: unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    /// Frees what a value points to (absent from older releases: then a value
    /// `PMIx_Get` returned is left allocated, a few bytes per get).
    value_destruct: Option<unsafe extern "C" fn(*mut Value)>,
}

fn dlerror() -> String {
    // SAFETY: `dlerror` returns null or a NUL-terminated string that stays
    // valid until the next dl call on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "no reason given".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

fn load() -> Result<Lib, String> {
    let name = CString::new(LIBRARY).expect("no NUL");
    // SAFETY: a NUL-terminated name; loading runs the library's
    // initialisers, which PMIx keeps free of side effects until PMIx_Init.
    // RTLD_GLOBAL: PMIx's own plugins (pmix_mca_*.so) resolve its symbols.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(format!("{LIBRARY} could not be loaded ({})", dlerror()));
    }
    let sym = |s: &str| -> Result<*mut c_void, String> {
        let c = CString::new(s).expect("no NUL");
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            Err(format!("{LIBRARY} has no {s} ({})", dlerror()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the PMIx function of that name, whose C
    // signature (pmix.h, unchanged since PMIx 2) the pointer type repeats;
    // the library is never unloaded, so the pointers stay valid.
    unsafe {
        Ok(Lib {
            init: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> Status>(sym("PMIx_Init")?),
            finalize: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const Info, usize) -> Status>(sym("PMIx_Finalize")?),
            put: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u8, *const c_char, *mut Value) -> Status>(sym("PMIx_Put")?),
            commit: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> Status>(sym("PMIx_Commit")?),
            fence: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> Status>(sym("PMIx_Fence")?),
            get: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> Status>(
                sym("PMIx_Get")?,
            ),
            error_string: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(Status) -> *const c_char>(sym("PMIx_Error_string")?),
            value_destruct: sym("PMIx_Value_destruct").ok().map(|p| std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut Value)>(p)),
        })
    }
}

fn library() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether `libpmix.so.2` loads and has what Outboard calls; the error is
/// a clause naming what is missing.
pub fn available() -> Result<(), String> {
    library().map(drop)
}

/// A [`Bootstrap`] over the launcher's PMIx server.
pub struct PmixBootstrap {
    lib: &'static Lib,
    me: Proc,
    size: u32,
    local_size: Option<u32>,
    finalized: bool,
}

// SAFETY: PMIx's client calls are thread-safe (its own progress thread
// serialises them); `me` is plain data and `lib` immutable function
// pointers.
unsafe impl Send for PmixBootstrap {}

impl PmixBootstrap {
    /// Connects to the launcher's PMIx server (`PMIx_Init`) and reads this
    /// process's rank, the job's size and the ranks on this node.
    pub fn init() -> Result<PmixBootstrap, BootstrapError> {
        let lib = library().map_err(BootstrapError::Environment)?;
        let mut me = Proc { nspace: [0; NSLEN], rank: 0 };
        // SAFETY: `me` is a live pmix_proc_t PMIx fills; no info.
        let rc = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
        if rc != PMIX_SUCCESS {
            return Err(BootstrapError::Environment(format!(
                "PMIX_RANK and PMIX_NAMESPACE are set but PMIx_Init failed ({}): the launcher's PMIx server is not reachable",
                error_string(lib, rc)
            )));
        }
        let mut b = PmixBootstrap { lib, me, size: 0, local_size: None, finalized: false };
        b.size = b.job_number("pmix.job.size")?.ok_or_else(|| BootstrapError::Protocol("the PMIx server gave no job size (pmix.job.size)".into()))?;
        if b.size == 0 || b.me.rank >= b.size {
            return Err(BootstrapError::Protocol(format!("PMIx says rank {} of {}", b.me.rank, b.size)));
        }
        b.local_size = b.job_number("pmix.local.size")?.filter(|&n| n > 0);
        Ok(b)
    }

    /// How many of the job's processes run on this node, as PMIx says.
    pub fn local_size(&self) -> Option<u32> {
        self.local_size
    }

    /// The namespace (the job's name in PMIx).
    pub fn namespace(&self) -> String {
        // SAFETY: PMIx writes a NUL-terminated name into the array (and
        // it was zeroed before).
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }.to_string_lossy().into_owned()
    }

    fn proc_of(&self, rank: u32) -> Proc {
        Proc { nspace: self.me.nspace, rank }
    }

    /// A job-level number (`rank` wildcard); `None` if the server has none.
    fn job_number(&self, key: &str) -> Result<Option<u32>, BootstrapError> {
        let v = self.fetch(&self.proc_of(RANK_WILDCARD), key, None)?;
        Ok(v.and_then(|v| {
            // SAFETY: the member read is the one the value's type names.
            let n: Option<u64> = unsafe {
                match v.kind {
                    T_UINT32 | T_PROC_RANK => Some(u64::from(v.data.uint32)),
                    T_UINT16 => Some(u64::from(v.data.uint16)),
                    T_UINT64 => Some(v.data.uint64),
                    T_SIZE => Some(v.data.size as u64),
                    T_INT | T_INT32 | T_UINT => u64::try_from(v.data.int).ok(),
                    _ => None,
                }
            };
            n.and_then(|n| u32::try_from(n).ok())
        }))
    }

    /// `PMIx_Get`: a copy of the value (freed here), `None` if not found.
    fn fetch(&self, who: &Proc, key: &str, info: Option<&Info>) -> Result<Option<OwnedValue<'_>>, BootstrapError> {
        let k = CString::new(key).map_err(|_| BootstrapError::Protocol(format!("key {key:?} holds a NUL")))?;
        let mut out: *mut Value = std::ptr::null_mut();
        let (ip, n) = info.map_or((std::ptr::null(), 0), |i| (i as *const Info, 1));
        // SAFETY: `who`, `k` and `info` are live for the call; PMIx stores a
        // pointer to a value it allocated into `out`.
        let rc = unsafe { (self.lib.get)(who, k.as_ptr(), ip, n, &mut out) };
        match rc {
            PMIX_SUCCESS if !out.is_null() => Ok(Some(OwnedValue { lib: self.lib, v: out })),
            PMIX_SUCCESS | PMIX_ERR_NOT_FOUND => Ok(None),
            _ => Err(BootstrapError::Protocol(format!("PMIx_Get of {key:?} for rank {} failed: {}", who.rank, error_string(self.lib, rc)))),
        }
    }

    fn check(&self, what: &str, rc: Status) -> Result<(), BootstrapError> {
        if rc == PMIX_SUCCESS {
            Ok(())
        } else {
            Err(BootstrapError::Protocol(format!("{what} failed: {}", error_string(self.lib, rc))))
        }
    }
}

/// A value `PMIx_Get` allocated, released on drop as `PMIX_VALUE_RELEASE`
/// does (its contents, then the value).
struct OwnedValue<'a> {
    lib: &'a Lib,
    v: *mut Value,
}

impl std::ops::Deref for OwnedValue<'_> {
    type Target = Value;
    fn deref(&self) -> &Value {
        // SAFETY: non-null (checked when made) and PMIx's until drop.
        unsafe { &*self.v }
    }
}

impl Drop for OwnedValue<'_> {
    fn drop(&mut self) {
        if let Some(destruct) = self.lib.value_destruct {
            // SAFETY: a value PMIx allocated with malloc and filled; after
            // its contents are released the value itself is freed, once.
            unsafe {
                destruct(self.v);
                libc::free(self.v.cast());
            }
        }
    }
}

fn error_string(lib: &Lib, rc: Status) -> String {
    // SAFETY: PMIx returns a pointer to a static NUL-terminated string.
    let s = unsafe { (lib.error_string)(rc) };
    if s.is_null() {
        format!("PMIx status {rc}")
    } else {
        // SAFETY: see above.
        format!("{} ({rc})", unsafe { CStr::from_ptr(s) }.to_string_lossy())
    }
}

fn store_key(key: &str) -> Result<CString, BootstrapError> {
    CString::new(format!("outboard.{key}")).map_err(|_| BootstrapError::Protocol(format!("key {key:?} holds a NUL")))
}

impl Bootstrap for PmixBootstrap {
    fn rank(&self) -> u32 {
        self.me.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        let k = store_key(key)?;
        let mut v = Value { kind: T_BYTE_OBJECT, data: Data { bo: ByteObject { bytes: value.as_ptr() as *mut c_char, size: value.len() } } };
        // SAFETY: key and value are live for the call; PMIx copies the
        // bytes (it never writes through the pointer).
        let rc = unsafe { (self.lib.put)(SCOPE_GLOBAL, k.as_ptr(), &mut v) };
        self.check(&format!("PMIx_Put of {key:?}"), rc)
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments.
        self.check("PMIx_Commit", unsafe { (self.lib.commit)() })?;
        let collect = Info::flag("pmix.collect");
        // SAFETY: null procs with count 0 means the caller's whole
        // namespace; one live info.
        let rc = unsafe { (self.lib.fence)(std::ptr::null(), 0, &collect, 1) };
        self.check("PMIx_Fence", rc)
    }

    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        if rank >= self.size {
            return Err(BootstrapError::Missing { rank, key: key.to_string() });
        }
        let k = format!("outboard.{key}");
        // The fence collected every rank's values here: look no further
        // (without it a missing key waits on the server).
        let optional = Info::flag("pmix.optional");
        let missing = || BootstrapError::Missing { rank, key: key.to_string() };
        let v = self.fetch(&self.proc_of(rank), &k, Some(&optional))?.ok_or_else(missing)?;
        if v.kind != T_BYTE_OBJECT {
            return Err(BootstrapError::Protocol(format!("rank {rank}'s {key:?} in the PMIx store is not bytes (type {})", v.kind)));
        }
        // SAFETY: the value is a byte object (checked): `size` bytes at
        // `bytes` (null only when empty), PMIx's until the value drops.
        let bo = unsafe { v.data.bo };
        if bo.size == 0 || bo.bytes.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: see above.
        Ok(unsafe { std::slice::from_raw_parts(bo.bytes as *const u8, bo.size) }.to_vec())
    }
}

impl Drop for PmixBootstrap {
    fn drop(&mut self) {
        if !std::mem::replace(&mut self.finalized, true) {
            // SAFETY: PMIx_Init succeeded in `init`; no info.
            unsafe { (self.lib.finalize)(std::ptr::null(), 0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_loads_or_says_what_is_missing() {
        match available() {
            Ok(()) => {}
            Err(why) => assert!(why.starts_with(LIBRARY), "{why}"),
        }
    }

    #[test]
    fn a_directive_carries_its_key_and_true() {
        let i = Info::flag("pmix.collect");
        // SAFETY: a NUL-terminated key; the member written.
        assert_eq!(unsafe { CStr::from_ptr(i.key.as_ptr()) }.to_str().unwrap(), "pmix.collect");
        assert!(unsafe { i.value.data.flag });
        assert_eq!(i.value.kind, T_BOOL);
    }
}
