"""Registered memory: the buffers the engines reach by DMA, the targets of
RDMA and remote atomics. They belong to the runtime, so the program copies
in and out (``write``/``read``) rather than sharing Python memory."""

from __future__ import annotations

import ctypes
from typing import Any, Optional

from . import _buffers, _lib, errors
from .handle import Handle
from .types import AtomicOp, operand_bits, uint, word


class Memory(Handle):
    """A zeroed buffer of registered memory, made by ``World.alloc(n)``.

    ``key`` registers it for remote access (once) and is what peers name in
    ``World.rdma_*`` and the remote atomics; the local atomics here are
    atomic with respect to those. ``close()`` withdraws the registration and
    frees it.
    """

    _what = "memory buffer"

    def __init__(self, ptr: int, length: int, world: Any):
        super().__init__(ptr, _lib.lib().outboard_mem_free, world)
        self._len = length

    def __len__(self) -> int:
        return self._len

    def write(self, data: Any, offset: int = 0) -> None:
        """Copies ``data`` into the buffer at ``offset``."""
        src, n = _buffers.readable(data, "data")
        errors.check(_lib.lib().outboard_mem_write(self._p(), uint(offset, 64, "offset"), src, n))

    def read(self, length: Optional[int] = None, offset: int = 0) -> bytes:
        """``length`` bytes at ``offset`` (default: to the end)."""
        if length is None:
            length = max(self._len - uint(offset, 64, "offset"), 0)
        out = bytearray(uint(length, 64, "length"))
        self.read_into(out, offset)
        return bytes(out)

    def read_into(self, buf: Any, offset: int = 0) -> Any:
        """Fills ``buf`` from the buffer at ``offset``; returns ``buf``."""
        dst, n = _buffers.writable(buf, "buf")
        errors.check(_lib.lib().outboard_mem_read(self._p(), uint(offset, 64, "offset"), dst, n))
        return buf

    @property
    def key(self) -> int:
        """The remote-access key (registers the buffer on first use)."""
        k = ctypes.c_uint64()
        errors.check(_lib.lib().outboard_mem_register(self._p(), ctypes.byref(k)))
        return k.value

    def atomic(self, offset: int, op: AtomicOp, operand: int, compare: int = 0, bits: int = 64) -> int:
        """``op`` on this rank's own ``bits``-bit word at ``offset``, atomic
        with respect to the engines' remote atomics on it; the old value."""
        old = ctypes.c_uint64()
        b = uint(bits, 32, "bits")
        w = operand_bits(b)
        a, c = word(operand, w, "operand"), word(compare, w, "compare")
        errors.check(_lib.lib().outboard_local_atomic(self._p(), uint(offset, 64, "offset"), b, int(op), a, c, ctypes.byref(old)))
        return old.value

    def fetch_add(self, offset: int, add: int, bits: int = 64) -> int:
        """Adds ``add`` (negative: subtracts, wrapping) to the local word;
        the old value."""
        return self.atomic(offset, AtomicOp.FETCH_ADD, add, 0, bits)

    def swap(self, offset: int, value: int, bits: int = 64) -> int:
        """Writes ``value`` to the local word; the old value."""
        return self.atomic(offset, AtomicOp.SWAP, value, 0, bits)

    def compare_swap(self, offset: int, compare: int, new: int, bits: int = 64) -> int:
        """Writes ``new`` if the local word holds ``compare``; the old value
        (equal to ``compare`` when it swapped)."""
        return self.atomic(offset, AtomicOp.COMPARE_SWAP, new, compare, bits)
