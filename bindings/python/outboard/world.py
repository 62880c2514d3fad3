"""This process's place in the job: joining and leaving, point-to-point
messages, registered memory, RDMA and remote atomics."""

from __future__ import annotations

import atexit
import ctypes
import threading
import warnings
import weakref
from typing import Any, List, Optional, Sequence, Tuple, cast

from . import _buffers, _lib, errors
from .group import Group
from .handle import Handle, made
from .memory import Memory
from .nicvm import ModuleInfo
from .nicvm import modules as _modules
from .request import Request, Status
from .types import ALL_TAG_BITS, ANY_SOURCE, AtomicOp, Mode, Op, operand_bits, uint, word
from .types import source as _source


# Worlds joined and not yet left, for the exit hook below.
_open_worlds: "weakref.WeakSet[World]" = weakref.WeakSet()


@atexit.register
def _abandon_open_worlds() -> None:
    """The interpreter is ending with a world still joined - an exception
    no one caught (its traceback is already printed), ``sys.exit`` after
    an error, or a program that forgot ``close()``: the other ranks will
    never see this one in the collective leave, so tell them at once
    (``World.abandon``); they then fail in milliseconds naming this rank
    instead of after the peer timeout."""
    for w in list(_open_worlds):
        w.abandon()


class World(Handle):
    """Joins the job the environment describes (``outboard run``; ``mpirun``
    and Hydra's ``mpiexec`` through their PMIx or PMI-1; ``srun`` with
    ``--mpi=pmix`` or ``OUTBOARD_RENDEZVOUS``; alone, a job of one), as
    ``outboard_init`` does.

    Use it as a context manager: leaving the block leaves the job
    (collective: every rank must get there) and then frees every group,
    buffer and lock still open from it; an exception leaving the block
    abandons the world instead (see ``__exit__``). ``world.group`` is a group of every
    rank, made at once; the collective methods here run on it.
    """

    _what = "world"

    def __init__(self) -> None:
        lib = _lib.lib()
        out = ctypes.c_void_p()
        errors.check(lib.outboard_init(ctypes.byref(out)))
        self._children: "weakref.WeakSet[Handle]" = weakref.WeakSet()
        self._children_lock = threading.Lock()
        ptr = made(out)
        super().__init__(ptr, lib.outboard_finalize)
        r, s = ctypes.c_uint32(), ctypes.c_uint32()
        errors.check(lib.outboard_rank(ptr, ctypes.byref(r)))
        errors.check(lib.outboard_size(ptr, ctypes.byref(s)))
        self._rank, self._size = r.value, s.value
        self.group = self.new_group()
        _open_worlds.add(self)

    def _adopt(self, h: Handle) -> None:
        with self._children_lock:
            self._children.add(h)

    def close(self) -> None:
        """Leaves the job (collective), then frees what is still open.
        Requests still pending stay unfinished (the C ABI cannot free
        them)."""
        p = self._take()
        if p is None:
            return
        _open_worlds.discard(self)
        rc = self._free(p)  # the library frees the world even on failure
        with self._children_lock:
            children = list(self._children)
        for c in children:
            c._release()
        errors.check(rc)

    def __exit__(self, *exc: Any) -> None:
        """Leaves the job, except when an exception ends the block: then the
        other ranks may never reach their side of the collective leave, so
        the world and what is open from it are abandoned (unusable, not
        freed) and the exception goes on, letting the process exit and the
        launcher end the job. Call ``close()`` to leave regardless."""
        if not exc or exc[0] is None:
            self.close()
        else:
            self.abandon()

    def abandon(self) -> None:
        """Gives the job up after a failure, for a process about to exit:
        tells every other rank at once (``outboard_abandon``, about 50 ms),
        so their operations waiting on this rank fail naming it instead of
        after the peer timeout; then makes the world and everything open
        from it unusable, without the collective leave and without freeing
        them. An exception that escapes a ``with`` block does this, and so
        does the interpreter's exit with the world still joined."""
        _open_worlds.discard(self)
        p = self._take()
        if p is not None:
            _lib.lib().outboard_abandon(p)
        with self._children_lock:
            children = list(self._children)
        for c in children:
            c._take()

    def __del__(self) -> None:
        if getattr(self, "_ptr", None) is not None:
            try:
                warnings.warn("outboard World not closed: leaving the job is collective, so the garbage collector cannot do it", ResourceWarning, source=self)
            except Exception:
                pass

    @property
    def rank(self) -> int:
        """This process's rank."""
        self._p()
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks."""
        self._p()
        return self._size

    # --- groups ----------------------------------------------------------

    def new_group(self, mode: Mode = Mode.OFFLOADED) -> Group:
        """A new group of every rank in rank order. Collective: every rank
        makes its groups in the same order."""
        out = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_world_group(self._p(), ctypes.byref(out)))
        g = Group(made(out), self)
        if mode != Mode.OFFLOADED:
            g.mode = mode
        return g

    def create_group(self, group_id: int, ranks: Sequence[int]) -> Group:
        """A group of the world ``ranks`` in that order, under ``group_id``
        (below ``GROUP_ID_LIMIT``, the same at every member, used by no
        other group). Local: no communication; this rank must be a member."""
        rs = [uint(r, 32, "rank") for r in ranks]
        arr = (ctypes.c_uint32 * len(rs))(*rs)
        out = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_group_create(self._p(), uint(group_id, 64, "group_id"), len(rs), arr, ctypes.byref(out)))
        return Group(made(out), self)

    # Collectives on every rank (``self.group``).

    def barrier(self) -> None:
        """``world.group.barrier()``."""
        self._p()
        self.group.barrier()

    def bcast(self, buf: Any, root: int = 0) -> Any:
        """``world.group.bcast()``."""
        self._p()
        return self.group.bcast(buf, root)

    def bcast_object(self, obj: Any = None, root: int = 0) -> Any:
        """``world.group.bcast_object()``."""
        self._p()
        return self.group.bcast_object(obj, root)

    def allreduce(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """``world.group.allreduce()``."""
        self._p()
        return self.group.allreduce(values, op, dtype)

    def reduce(self, values: Any, op: Any = Op.SUM, root: int = 0, dtype: Any = None) -> Any:
        """``world.group.reduce()``."""
        self._p()
        return self.group.reduce(values, op, root, dtype)

    def modules(self) -> List[ModuleInfo]:
        """The job's NICVM modules on this rank's engine, with their
        counters (see ``outboard.Module``)."""
        return _modules(self)

    # --- point-to-point --------------------------------------------------

    def send(self, dest: int, data: Any, tag: int = 0) -> None:
        """Sends ``data`` (bytes-like) to world rank ``dest``; returns when
        the message was delivered."""
        src, n = _buffers.readable(data, "data")
        errors.check(_lib.lib().outboard_send(self._p(), uint(dest, 32, "dest"), uint(tag, 64, "tag"), src, n))

    def isend(self, dest: int, data: Any, tag: int = 0) -> Request:
        """Starts a send; ``data`` is copied at once (reusable on return)."""
        src, n = _buffers.readable(data, "data")
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_send_start(self._p(), uint(dest, 32, "dest"), uint(tag, 64, "tag"), src, n, ctypes.byref(req)))
        return Request(req, self)

    def irecv_into(self, buf: Any, source: int = ANY_SOURCE, tag: int = 0, tag_mask: int = ALL_TAG_BITS) -> Request:
        """Starts a receive into ``buf`` (writable, untouched until the
        request finishes) of a message from ``source`` whose tag equals
        ``tag`` in the bits of ``tag_mask``; the result is its ``Status``.
        A longer message raises ``TruncatedError`` (``.status`` says its
        length; ``buf`` holds its start)."""
        dst, n = _buffers.writable(buf, "buf")
        req = ctypes.c_void_p()
        errors.check(
            _lib.lib().outboard_recv_start(self._p(), _source(source), uint(tag, 64, "tag"), uint(tag_mask, 64, "tag_mask"), dst, n, ctypes.byref(req))
        )
        return Request(req, self, keep=(dst, buf), finish=lambda st: st)

    def recv_into(self, buf: Any, source: int = ANY_SOURCE, tag: int = 0, tag_mask: int = ALL_TAG_BITS) -> Status:
        """Receives into ``buf`` (see ``irecv_into``); the ``Status``."""
        return cast(Status, self.irecv_into(buf, source, tag, tag_mask).wait())

    def irecv(self, max_len: int, source: int = ANY_SOURCE, tag: int = 0, tag_mask: int = ALL_TAG_BITS) -> Request:
        """Starts a receive of at most ``max_len`` bytes; the result is
        ``(data, status)``."""
        buf = bytearray(uint(max_len, 64, "max_len"))
        r = self.irecv_into(buf, source, tag, tag_mask)
        r._finish = lambda st: (bytes(buf[: st.length]), st)
        return r

    def recv(self, max_len: int, source: int = ANY_SOURCE, tag: int = 0, tag_mask: int = ALL_TAG_BITS) -> Tuple[bytes, Status]:
        """Receives a message of at most ``max_len`` bytes: ``(data, status)``."""
        return cast(Tuple[bytes, Status], self.irecv(max_len, source, tag, tag_mask).wait())

    # --- registered memory and RDMA --------------------------------------

    def alloc(self, length: int) -> Memory:
        """``length`` zeroed bytes of registered memory."""
        out = ctypes.c_void_p()
        n = uint(length, 64, "length")
        errors.check(_lib.lib().outboard_mem_alloc(self._p(), n, ctypes.byref(out)))
        return Memory(made(out), n, self)

    def _rdma(self, write: bool, rank: int, key: int, remote_offset: int, mem: Memory, local_offset: int, length: Optional[int]) -> Request:
        if not isinstance(mem, Memory):
            raise TypeError(f"mem must be an outboard Memory, not {type(mem).__name__}")
        lo = uint(local_offset, 64, "local_offset")
        n = max(len(mem) - lo, 0) if length is None else uint(length, 64, "length")
        f = _lib.lib().outboard_rdma_write_start if write else _lib.lib().outboard_rdma_read_start
        req = ctypes.c_void_p()
        errors.check(f(self._p(), uint(rank, 32, "rank"), uint(key, 64, "key"), uint(remote_offset, 64, "remote_offset"), mem._p(), lo, n, ctypes.byref(req)))
        return Request(req, self, keep=mem, uses=(mem,))

    def irdma_write(self, rank: int, key: int, remote_offset: int, mem: Memory, local_offset: int = 0, length: Optional[int] = None) -> Request:
        """Starts writing ``length`` bytes (default: to ``mem``'s end) at
        ``local_offset`` of ``mem`` into region ``key`` of world rank
        ``rank`` at ``remote_offset``."""
        return self._rdma(True, rank, key, remote_offset, mem, local_offset, length)

    def irdma_read(self, rank: int, key: int, remote_offset: int, mem: Memory, local_offset: int = 0, length: Optional[int] = None) -> Request:
        """Starts reading ``length`` bytes of region ``key`` of world rank
        ``rank`` at ``remote_offset`` into ``mem`` at ``local_offset``."""
        return self._rdma(False, rank, key, remote_offset, mem, local_offset, length)

    def rdma_write(self, rank: int, key: int, remote_offset: int, mem: Memory, local_offset: int = 0, length: Optional[int] = None) -> None:
        """Blocking ``irdma_write``."""
        self.irdma_write(rank, key, remote_offset, mem, local_offset, length).wait()

    def rdma_read(self, rank: int, key: int, remote_offset: int, mem: Memory, local_offset: int = 0, length: Optional[int] = None) -> None:
        """Blocking ``irdma_read``."""
        self.irdma_read(rank, key, remote_offset, mem, local_offset, length).wait()

    # --- remote atomics --------------------------------------------------

    def iatomic(self, rank: int, key: int, offset: int, op: AtomicOp, operand: int, compare: int = 0, bits: int = 64, direct: bool = False) -> Request:
        """Starts ``op`` on the ``bits``-bit word (32 or 64) at ``offset`` of
        region ``key`` of world rank ``rank``, performed by the engine; the
        result is the word's old value. ``operand`` is the addend (negative:
        a wrapping subtraction) or the new value; ``compare`` is
        compare-and-swap's expected value. ``direct``: the engine writes
        the old value and a flag into this process's memory, which the
        request's test reads before the event queue (the direct form)."""
        b = uint(bits, 32, "bits")
        w = operand_bits(b)
        a, c = word(operand, w, "operand"), word(compare, w, "compare")
        old = ctypes.c_uint64()
        req = ctypes.c_void_p()
        start = _lib.lib().outboard_atomic_direct_start if direct else _lib.lib().outboard_atomic_start
        errors.check(start(self._p(), uint(rank, 32, "rank"), uint(key, 64, "key"), uint(offset, 64, "offset"), b, int(op), a, c, ctypes.byref(old), ctypes.byref(req)))
        return Request(req, self, keep=old, finish=lambda _st: old.value)

    def atomic(self, rank: int, key: int, offset: int, op: AtomicOp, operand: int, compare: int = 0, bits: int = 64, direct: bool = False) -> int:
        """Blocking ``iatomic``: the word's old value."""
        return cast(int, self.iatomic(rank, key, offset, op, operand, compare, bits, direct).wait())

    def fetch_add(self, rank: int, key: int, offset: int, add: int, bits: int = 64) -> int:
        """Adds ``add`` to a remote word; its old value."""
        return self.atomic(rank, key, offset, AtomicOp.FETCH_ADD, add, 0, bits)

    def swap(self, rank: int, key: int, offset: int, value: int, bits: int = 64) -> int:
        """Writes ``value`` to a remote word; its old value."""
        return self.atomic(rank, key, offset, AtomicOp.SWAP, value, 0, bits)

    def compare_swap(self, rank: int, key: int, offset: int, compare: int, new: int, bits: int = 64) -> int:
        """Writes ``new`` to a remote word if it holds ``compare``; its old
        value (equal to ``compare`` when it swapped)."""
        return self.atomic(rank, key, offset, AtomicOp.COMPARE_SWAP, new, compare, bits)

    def __repr__(self) -> str:
        if self.closed:
            return "<outboard.World closed>"
        return f"<outboard.World rank {self._rank} of {self._size}>"

