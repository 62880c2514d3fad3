"""The distributed MCS queue lock (dissertation ch. 5) over a group, and
the atomic servers that perform atomics on the hosts instead of the
engines (the comparison point, and a lock without the engines' atomics)."""

from __future__ import annotations

import ctypes
from typing import Any

from . import _lib, errors
from .handle import Handle
from .types import AtomicOp, operand_bits, uint, word


class Lock(Handle):
    """One rank's handle on a distributed lock, made by ``Group.lock()``.

    Used like ``threading.Lock``: ``acquire()`` / ``release()``, or a
    ``with lock:`` block around the critical section. ``close()`` frees this
    rank's queue words; every rank must be done with the lock first (for
    instance after a barrier).
    """

    _what = "lock"

    def __init__(self, ptr: int, world: Any):
        super().__init__(ptr, _lib.lib().outboard_lock_free, world)

    def acquire(self, blocking: bool = True) -> bool:
        """Takes the lock, waiting in FIFO order if ``blocking``; otherwise
        takes it only if nobody holds or awaits it. Whether it was taken."""
        if blocking:
            errors.check(_lib.lib().outboard_lock_acquire(self._p()))
            return True
        got = ctypes.c_int(0)
        errors.check(_lib.lib().outboard_lock_try(self._p(), ctypes.byref(got)))
        return bool(got.value)

    def release(self) -> None:
        """Releases the lock, handing it to the next waiter if any."""
        errors.check(_lib.lib().outboard_lock_release(self._p()))

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class AtomicServer(Handle):
    """This rank's atomic server, made by ``Group.atomic_server()`` at every
    member: a thread of the library that performs host-based atomics on
    the memory exposed to it, requested as messages by any member
    (``atomic`` and its short forms). ``close()`` stops it; every member
    must be done sending to it first (for instance after a barrier), and
    a lock made over it must be closed before it."""

    _what = "atomic server"

    def __init__(self, ptr: int, world: Any, size: int):
        super().__init__(ptr, _lib.lib().outboard_atomic_server_free, world)
        self._size = size

    def expose(self, mem: Any) -> None:
        """Lets this rank's server perform atomics on ``mem`` (an
        ``outboard.Memory``, registered), named by its key."""
        errors.check(_lib.lib().outboard_atomic_server_expose(self._p(), mem._p()))

    def atomic(self, rank: int, key: int, offset: int, op: AtomicOp, operand: int, compare: int = 0, bits: int = 64) -> int:
        """``op`` on the ``bits``-bit word at ``offset`` of region ``key``,
        performed by group rank ``rank``'s server; the word's old value.
        Operands as in ``World.iatomic``."""
        b = uint(bits, 32, "bits")
        w = operand_bits(b)
        a, c = word(operand, w, "operand"), word(compare, w, "compare")
        old = ctypes.c_uint64()
        errors.check(_lib.lib().outboard_server_atomic(self._p(), uint(rank, 32, "rank"), uint(key, 64, "key"), uint(offset, 64, "offset"), b, int(op), a, c, ctypes.byref(old)))
        return old.value

    def fetch_add(self, rank: int, key: int, offset: int, add: int, bits: int = 64) -> int:
        """Adds ``add`` to a word through ``rank``'s server; its old value."""
        return self.atomic(rank, key, offset, AtomicOp.FETCH_ADD, add, 0, bits)

    def swap(self, rank: int, key: int, offset: int, value: int, bits: int = 64) -> int:
        """Writes ``value`` to a word through ``rank``'s server; its old value."""
        return self.atomic(rank, key, offset, AtomicOp.SWAP, value, 0, bits)

    def compare_swap(self, rank: int, key: int, offset: int, compare: int, new: int, bits: int = 64) -> int:
        """Writes ``new`` if the word holds ``compare``, through ``rank``'s
        server; the old value."""
        return self.atomic(rank, key, offset, AtomicOp.COMPARE_SWAP, new, compare, bits)

    @property
    def served(self) -> int:
        """How many requests this rank's server performed so far."""
        n = ctypes.c_uint64()
        errors.check(_lib.lib().outboard_atomic_server_served(self._p(), ctypes.byref(n)))
        return n.value
