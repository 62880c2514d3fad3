"""Finding and loading ``liboutboard_capi.so`` and declaring its functions.

The library is loaded on first use, not at import, so that the pure-Python
parts (dtype mapping, argument checks) work and can be tested without it.
Every C function gets its argument and result types here, once: ctypes
would otherwise pass Python ints as C ``int`` and silently cut 64-bit
values.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import List, Optional, Tuple

LIB_NAME = "liboutboard_capi.so"
_REPO = Path(__file__).resolve().parents[3]


class LibraryNotFoundError(OSError):
    """The C library could not be found or loaded; the message names the fix."""


class CStatus(ctypes.Structure):
    """``outboard_status``: what a finished request reports."""

    _fields_ = [
        ("source", ctypes.c_int32),
        ("tag", ctypes.c_uint64),
        ("len", ctypes.c_uint64),
        ("error", ctypes.c_int),
    ]


class CModuleInfo(ctypes.Structure):
    """``outboard_module_info``: a loaded module and its counters."""

    _fields_ = [
        ("name", ctypes.c_char * 65),
        ("generation", ctypes.c_uint32),
        ("persist", ctypes.c_int),
        ("invocations", ctypes.c_uint64),
        ("instructions", ctypes.c_uint64),
        ("out_of_fuel", ctypes.c_uint64),
        ("traps", ctypes.c_uint64),
        ("bad_sends", ctypes.c_uint64),
        ("send_failures", ctypes.c_uint64),
        ("stale", ctypes.c_uint64),
    ]


def _places() -> List[Tuple[str, List[Path]]]:
    """Every place the library is looked for, in order, as (what it is,
    the files there that could be it)."""
    places: List[Tuple[str, List[Path]]] = []
    env = os.environ.get("OUTBOARD_LIB")
    if env:
        p = Path(env)
        return [(f"OUTBOARD_LIB={env}", [p / LIB_NAME if p.is_dir() else p])]
    places.append(("OUTBOARD_LIB (unset)", []))
    # An installed prefix: `outboard install --prefix DIR` puts the command
    # in DIR/bin and the library in DIR/lib. A cargo build's outboard has
    # the library beside it.
    exe = shutil.which("outboard")
    if exe is None:
        places.append(("an outboard command on PATH (none)", []))
    else:
        dirs: List[Path] = []
        for e in (Path(exe), Path(exe).resolve()):
            for d in (e.parent.parent / "lib", e.parent):
                if d not in dirs:
                    dirs.append(d)
        places.append((f"beside the outboard command on PATH ({exe})", [d / LIB_NAME for d in dirs]))
    # A prefix shared with this Python (`outboard install --prefix` a venv).
    places.append((f"this Python's prefix ({sys.prefix})", [Path(sys.prefix) / "lib" / LIB_NAME]))
    # The cargo target directory, when asked for or when this package is
    # the source tree's.
    target = os.environ.get("CARGO_TARGET_DIR")
    if target or (_REPO / "bindings" / "python" / "outboard").is_dir():
        t = Path(target or _REPO / "target")
        files = [t / profile / sub / LIB_NAME for profile in ("release", "debug") for sub in ("", "deps")]
        # A stale release build must not win over a fresh debug one.
        found = sorted((f for f in files if f.is_file()), key=lambda f: f.stat().st_mtime, reverse=True)
        places.append((f"the cargo target directory {t} (release and debug)", found or files))
    return places


def candidates() -> List[Path]:
    """The library files found, in the order they are tried: the file
    ``OUTBOARD_LIB`` names (a file, or a directory holding it) and nothing
    else when it is set; else beside an installed ``outboard`` on ``PATH``
    (``bin/../lib``, or beside a cargo-built one), this Python's prefix's
    ``lib``, then the cargo target directory (``CARGO_TARGET_DIR``, else the
    repository's ``target`` when this package is the source tree's): its
    release and debug builds, newest first."""
    if os.environ.get("OUTBOARD_LIB"):
        return _places()[0][1]
    return [f for _, files in _places() for f in files if f.is_file()]


def _fix(looked: str) -> str:
    return (
        f"{LIB_NAME} not found ({looked}). Install Outboard with "
        "`outboard install --prefix DIR` and put DIR/bin on PATH, or build it "
        "with `cargo build --release -p outboard-capi`, or set OUTBOARD_LIB to "
        f"the path of {LIB_NAME}"
    )


def _looked() -> str:
    parts = []
    for what, files in _places():
        parts.append(f"{what}: {', '.join(str(f) for f in files)}" if files else what)
    parts.append("the system's library path (ctypes.util.find_library)")
    return "looked in: " + "; ".join(parts)


def load() -> ctypes.CDLL:
    """Loads the library from the first candidate (or the system's search
    path as a last resort) and declares its functions."""
    env = os.environ.get("OUTBOARD_LIB")
    found = candidates()
    if env:
        if not found[0].is_file():
            raise LibraryNotFoundError(_fix(f"OUTBOARD_LIB={env} names no such file"))
        path: Optional[str] = str(found[0])
    elif found:
        path = str(found[0])
    else:
        path = ctypes.util.find_library("outboard_capi")
        if path is None:
            raise LibraryNotFoundError(_fix(_looked()))
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise LibraryNotFoundError(f"{path} could not be loaded ({e}); rebuild it with `cargo build --release -p outboard-capi` or set OUTBOARD_LIB") from e
    _declare(lib)
    return lib


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded once, on the first call)."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = load()
        return _lib


P = ctypes.c_void_p
PP = ctypes.POINTER(ctypes.c_void_p)
CINT = ctypes.c_int
U32 = ctypes.c_uint32
I32 = ctypes.c_int32
U64 = ctypes.c_uint64
SZ = ctypes.c_size_t
PU32 = ctypes.POINTER(ctypes.c_uint32)
PU64 = ctypes.POINTER(ctypes.c_uint64)
PI = ctypes.POINTER(ctypes.c_int)
PST = ctypes.POINTER(CStatus)
STR = ctypes.c_char_p
PSZ = ctypes.POINTER(ctypes.c_size_t)
PI32 = ctypes.POINTER(ctypes.c_int32)
PMI = ctypes.POINTER(CModuleInfo)

# name: argument types (every function returns an int status code except
# the two string functions).
SIGNATURES = {
    "outboard_init": [PP],
    "outboard_finalize": [P],
    "outboard_abandon": [P],
    "outboard_abort": [P, CINT],
    "outboard_rank": [P, PU32],
    "outboard_size": [P, PU32],
    "outboard_world_group": [P, PP],
    "outboard_split": [P, U32, U32, PP],
    "outboard_group_free": [P],
    "outboard_group_rank": [P, PU32],
    "outboard_group_size": [P, PU32],
    "outboard_group_nodes": [P, PU32],
    "outboard_group_set_mode": [P, CINT],
    "outboard_group_set_barrier": [P, CINT, U32],
    "outboard_group_set_barrier_protocol": [P, CINT],
    "outboard_group_set_bcast_mode": [P, CINT, U32],
    "outboard_group_set_reduce_mode": [P, CINT],
    "outboard_group_set_bcast_tree": [P, CINT, ctypes.c_double],
    "outboard_group_set_reduce_degree": [P, U32],
    "outboard_group_describe": [P, ctypes.c_char_p, SZ],
    "outboard_group_taken": [P, ctypes.c_char_p, SZ],
    "outboard_group_create": [P, U64, U32, PU32, PP],
    "outboard_send_start": [P, U32, U64, P, SZ, PP],
    "outboard_recv_start": [P, I32, U64, U64, P, SZ, PP],
    "outboard_send": [P, U32, U64, P, SZ],
    "outboard_recv": [P, I32, U64, U64, P, SZ, PST],
    "outboard_test": [PP, PI, PST],
    "outboard_wait": [PP, PST],
    "outboard_barrier_start": [P, PP],
    "outboard_bcast_start": [P, P, SZ, U32, PP],
    "outboard_reduce_start": [P, P, P, SZ, CINT, CINT, U32, PP],
    "outboard_allreduce_start": [P, P, P, SZ, CINT, CINT, PP],
    "outboard_barrier": [P],
    "outboard_bcast": [P, P, SZ, U32],
    "outboard_reduce": [P, P, P, SZ, CINT, CINT, U32],
    "outboard_allreduce": [P, P, P, SZ, CINT, CINT],
    "outboard_allgather_start": [P, P, SZ, P, PP],
    "outboard_gather_start": [P, P, SZ, P, U32, PP],
    "outboard_scatter_start": [P, P, SZ, P, U32, PP],
    "outboard_alltoall_start": [P, P, SZ, P, PP],
    "outboard_reduce_scatter_block_start": [P, P, P, SZ, CINT, CINT, PP],
    "outboard_scan_start": [P, P, P, SZ, CINT, CINT, PP],
    "outboard_exscan_start": [P, P, P, SZ, CINT, CINT, PP],
    "outboard_mem_alloc": [P, SZ, PP],
    "outboard_mem_write": [P, U64, P, SZ],
    "outboard_mem_read": [P, U64, P, SZ],
    "outboard_mem_register": [P, PU64],
    "outboard_mem_free": [P],
    "outboard_rdma_write_start": [P, U32, U64, U64, P, U64, SZ, PP],
    "outboard_rdma_read_start": [P, U32, U64, U64, P, U64, SZ, PP],
    "outboard_rdma_write": [P, U32, U64, U64, P, U64, SZ],
    "outboard_rdma_read": [P, U32, U64, U64, P, U64, SZ],
    "outboard_atomic_start": [P, U32, U64, U64, U32, CINT, U64, U64, PU64, PP],
    "outboard_atomic": [P, U32, U64, U64, U32, CINT, U64, U64, PU64],
    "outboard_local_atomic": [P, U64, U32, CINT, U64, U64, PU64],
    "outboard_atomic_direct_start": [P, U32, U64, U64, U32, CINT, U64, U64, PU64, PP],
    "outboard_atomic_direct": [P, U32, U64, U64, U32, CINT, U64, U64, PU64],
    "outboard_atomic_server_create": [P, CINT, U32, PP],
    "outboard_atomic_server_expose": [P, P],
    "outboard_server_atomic": [P, U32, U64, U64, U32, CINT, U64, U64, PU64],
    "outboard_atomic_server_served": [P, PU64],
    "outboard_atomic_server_free": [P],
    "outboard_lock_create_served": [P, U32, P, PP],
    "outboard_lock_create": [P, U32, PP],
    "outboard_lock_acquire": [P],
    "outboard_lock_try": [P, PI],
    "outboard_lock_release": [P],
    "outboard_lock_free": [P],
    "outboard_module_compile": [STR, STR, PP],
    "outboard_module_from_bytecode": [STR, P, SZ, PP],
    "outboard_module_bytecode": [P, P, SZ, PSZ],
    "outboard_module_load": [P, P, CINT, U32],
    "outboard_module_replace": [P, P, STR],
    "outboard_module_purge": [P],
    "outboard_module_free": [P],
    "outboard_op_from_module": [P, PI],
    "outboard_module_combine": [P, P, P, SZ],
    "outboard_module_send": [P, P, U32, U32, P, SZ, PI],
    "outboard_module_recv": [P, P, SZ, PSZ, PI32, PI],
    "outboard_module_list": [P, PMI, SZ, PSZ],
}


def _declare(lib: ctypes.CDLL) -> None:
    for name, args in SIGNATURES.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = ctypes.c_int
    for name in ("outboard_strerror", "outboard_last_error"):
        getattr(lib, name).restype = ctypes.c_char_p
    lib.outboard_strerror.argtypes = [ctypes.c_int]
    lib.outboard_last_error.argtypes = []
