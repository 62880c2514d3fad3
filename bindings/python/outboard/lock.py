"""The distributed MCS queue lock (dissertation ch. 5) over a group."""

from __future__ import annotations

import ctypes
from typing import Any

from . import _lib, errors
from .handle import Handle


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
