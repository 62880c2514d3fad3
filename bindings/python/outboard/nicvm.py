"""NICVM modules: user code the engines run for every packet addressed to
it, and as the combine step of a reduction.

    absmax = outboard.Module("absmax", SOURCE)    # compiled and verified here
    absmax.load(world.group)                      # collective: on every engine
    result = world.group.allreduce(values, op=absmax)

A ``Module`` is compiled without a world, so a source error is raised
before any collective starts, and ``combine()`` runs the module here,
for a program that reduces without the engines. Every failure of a
module (it does not compile or verify, an engine refuses it, it runs out
of fuel, traps or reports failure as an operator) raises ``ModuleError``,
whose ``module`` attribute is the module's name.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

from . import _buffers, _lib, errors
from .handle import Handle, made
from .types import uint

if TYPE_CHECKING:
    from .group import Group
    from .world import World

PERSIST = 1
OP_MODULE_FIRST = 0x10000
"""Module operator codes (``Module.op``) are this and above."""


def _text_bytes(value: Any, what: str) -> bytes:
    """`value` (a str without NUL, `what` naming it in errors) as UTF-8 for C."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__name__}")
    if "\0" in value:
        raise errors.ArgumentError("invalid argument", f"{what} holds a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise errors.ArgumentError("invalid argument", f"{what} cannot be encoded as UTF-8: {e.reason}") from None


def _name_bytes(name: Any) -> bytes:
    if not isinstance(name, str):
        raise TypeError(f"a module name is a str, not {type(name).__name__}")
    return _text_bytes(name, f"module name {name!r}")


def _source_bytes(source: Any, name: str) -> bytes:
    return _text_bytes(source, f"the source of module {name!r}")


@dataclass(frozen=True)
class Delivery:
    """What a module delivered to this rank: the bytes, the world rank it
    came from (the previous hop; -1 if none), whether a module on the way
    failed on it (it then took the default path), and whether the module
    made new bytes (``nicvm_deliver_acc``) rather than passing the packet
    on."""

    data: bytes
    source: int
    failed: bool
    new: bool


@dataclass(frozen=True)
class ModuleInfo:
    """A module loaded on this rank's engine, with its counters."""

    name: str
    generation: int
    persist: bool
    invocations: int
    instructions: int
    out_of_fuel: int
    traps: int
    bad_sends: int
    send_failures: int
    stale: int


class Module(Handle):
    """A NICVM module: from ``source``, or from encoded ``bytecode``
    (``Module.bytecode`` of another), under ``name`` (1 to 64 of
    ``A-Z a-z 0-9 _ . -``, the same at every rank). Close it when done;
    an engine keeps a loaded module until this rank's port closes (or,
    persistent, until purged)."""

    _what = "module"

    def __init__(self, name: str, source: Optional[str] = None, *, bytecode: Any = None):
        raw = _name_bytes(name)
        if (source is None) == (bytecode is None):
            raise TypeError("a Module is made from source or from bytecode=, exactly one of them")
        out = ctypes.c_void_p()
        lib = _lib.lib()
        if source is not None:
            rc = lib.outboard_module_compile(raw, _source_bytes(source, name), ctypes.byref(out))
        else:
            p, n = _buffers.readable(bytecode, "bytecode")
            rc = lib.outboard_module_from_bytecode(raw, p, n, ctypes.byref(out))
        errors.check(rc, module=name)
        super().__init__(made(out), lib.outboard_module_free)
        self._name = name
        self._op: Optional[int] = None

    @property
    def name(self) -> str:
        """The module's name."""
        return self._name

    def _check(self, rc: int) -> None:
        errors.check(rc, module=self._name)

    @property
    def bytecode(self) -> bytes:
        """The module's encoded bytecode (what ``Module(name, bytecode=)``
        takes)."""
        n = ctypes.c_size_t()
        lib = _lib.lib()
        rc = lib.outboard_module_bytecode(self._p(), None, 0, ctypes.byref(n))
        if rc != errors.OK and n.value == 0:
            self._check(rc)
        buf = ctypes.create_string_buffer(n.value)
        self._check(lib.outboard_module_bytecode(self._p(), buf, n.value, ctypes.byref(n)))
        return buf.raw[: n.value]

    def load(self, group: "Group", persist: bool = False, acc_len: int = 0) -> None:
        """Loads the module on this rank's engine for ``group``. Collective:
        every member loads the same module. ``persist``: keep it after
        this rank's port closes, until purged. ``acc_len``: bytes of the
        accumulator the engine keeps for it (0 for an operator)."""
        flags = PERSIST if persist else 0
        self._check(_lib.lib().outboard_module_load(group._p(), self._p(), flags, uint(acc_len, 32, "acc_len")))

    def replace(self, group: "Group", source: str) -> None:
        """Replaces the loaded module with ``source`` (its variables start
        afresh; ``op`` then reduces with the new code). Collective, as the
        load was. A source that does not compile changes nothing. Not for
        ranks sharing a node engine (each would replace the shared copy
        again): load new code under a new name there."""
        self._check(_lib.lib().outboard_module_replace(group._p(), self._p(), _source_bytes(source, self._name)))

    def purge(self) -> None:
        """Removes the module from this rank's engine (ranks sharing a
        node engine share one copy: purge after the last collective that
        uses it). The module may be loaded again."""
        self._check(_lib.lib().outboard_module_purge(self._p()))

    @property
    def op(self) -> int:
        """The reduction operator whose combine step is this module, for
        ``Group.allreduce(..., op=)`` and the other reductions (passing the
        ``Module`` itself does the same, and names it in errors)."""
        if self._op is None:
            o = ctypes.c_int()
            self._check(_lib.lib().outboard_op_from_module(self._p(), ctypes.byref(o)))
            self._op = o.value
        return self._op

    def combine(self, acc: Any, values: Any) -> bytes:
        """Runs the module here as a combine step, ``acc op values`` (two
        buffers of the same length); the result's bytes. As the engines
        run it, with their fuel budget, as rank 0 of a group of one."""
        out = bytearray(_buffers.view(acc, "acc").tobytes())
        v, nv = _buffers.readable(values, "values")
        if len(out) != nv:
            raise errors.ArgumentError("invalid argument", f"acc has {len(out)} bytes, values {nv}: module {self._name!r} combines equal lengths")
        p, n = _buffers.writable(out, "acc")
        self._check(_lib.lib().outboard_module_combine(self._p(), p, v, n))
        del p  # the export of `out`
        return bytes(out)

    def send(self, group: "Group", data: Any, dest: int, root: int = 0) -> bool:
        """Hands ``data`` to the module at group rank ``dest`` (this rank:
        the local engine runs it) for an operation rooted at ``root``;
        whether the local module failed on it."""
        p, n = _buffers.readable(data, "data")
        failed = ctypes.c_int()
        self._check(_lib.lib().outboard_module_send(group._p(), self._p(), uint(root, 32, "root"), uint(dest, 32, "dest"), p, n, ctypes.byref(failed)))
        return bool(failed.value)

    def recv(self, max_len: int = 65536) -> Delivery:
        """Waits for the module's next delivery to this rank; one longer
        than ``max_len`` bytes raises ``TruncatedError``."""
        cap = uint(max_len, 32, "max_len")
        buf = ctypes.create_string_buffer(max(cap, 1))
        n, src, flags = ctypes.c_size_t(), ctypes.c_int32(), ctypes.c_int()
        self._check(_lib.lib().outboard_module_recv(self._p(), buf, cap, ctypes.byref(n), ctypes.byref(src), ctypes.byref(flags)))
        return Delivery(buf.raw[: min(n.value, cap)], src.value, bool(flags.value & 1), bool(flags.value & 2))

    def __repr__(self) -> str:
        if self.closed:
            return f"<outboard.Module {self._name!r} closed>"
        return f"<outboard.Module {self._name!r}>"


def modules(world: "World") -> List[ModuleInfo]:
    """The job's modules on this rank's engine, with their counters."""
    lib = _lib.lib()
    count = ctypes.c_size_t()
    cap = 64
    while True:
        infos = (_lib.CModuleInfo * cap)()
        errors.check(lib.outboard_module_list(world._p(), infos, cap, ctypes.byref(count)))
        if count.value <= cap:
            break
        cap = count.value
    return [
        ModuleInfo(
            i.name.decode("utf-8", "replace"),
            i.generation,
            bool(i.persist),
            i.invocations,
            i.instructions,
            i.out_of_fuel,
            i.traps,
            i.bad_sends,
            i.send_failures,
            i.stale,
        )
        for i in infos[: count.value]
    ]
