"""Operations under way: ``Request.test()`` and ``Request.wait()``."""

from __future__ import annotations

import ctypes
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, List, Optional

from . import _lib, errors


@dataclass(frozen=True)
class Status:
    """What a receive reports: the sender (world rank), the tag and the
    message's full length (longer than the buffer when truncated)."""

    source: int
    tag: int
    length: int

    @classmethod
    def of(cls, c: _lib.CStatus) -> "Status":
        return cls(c.source, c.tag, c.len)


_PENDING = object()


class Request:
    """A non-blocking operation under way.

    ``wait()`` blocks until it finishes and returns its result (what the
    blocking call returns: ``None`` for a send or barrier, the data and
    ``Status`` of a receive, a reduction's values, an atomic's old value);
    ``test()`` says whether it finished without blocking. A failure is
    raised by the call that finds it and again by later ``wait()``s.

    The buffers the operation writes are kept referenced until it
    finishes. The C ABI has no call to cancel or free a pending request:
    dropping one unfinished leaks its C handle (with a ``ResourceWarning``)
    but never lets the library write freed memory, which it does only
    inside ``test``/``wait``.
    """

    def __init__(self, ptr: ctypes.c_void_p, owner: Any, keep: Any = None, finish: Optional[Callable[[Status], Any]] = None, uses: Iterable[Any] = (), module: Optional[str] = None):
        for h in uses:  # handles that must not be closed before it finishes
            h._track(self)
        self._req = ptr
        self._owner = owner  # the world or group; keeps its handle alive
        self._keep = keep
        self._finish = finish
        self._module = module  # the module that is its operator, if any
        self._lock = threading.Lock()
        self._result: Any = _PENDING
        self._error: Optional[BaseException] = None
        self.status: Optional[Status] = None
        """The finished operation's ``Status`` (``None`` before)."""

    @property
    def done(self) -> bool:
        """Whether it finished (as far as the last test or wait saw)."""
        return self._result is not _PENDING or self._error is not None

    def _complete(self, rc: int, st: _lib.CStatus) -> None:
        self.status = Status.of(st)
        if rc != errors.OK:
            e = errors.from_code(rc)
            if isinstance(e, errors.TruncatedError):
                e.status = self.status
            if isinstance(e, errors.ModuleError):
                e.module = self._module
            self._error = e
        else:
            try:
                self._result = self._finish(self.status) if self._finish else None
            except BaseException as e:  # a result conversion failed
                self._error = e
        self._keep = None

    def _outcome(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def test(self) -> bool:
        """True if the operation finished (raising its error if it failed),
        False if it is still under way."""
        with self._lock:
            if not self.done:
                done = ctypes.c_int(0)
                st = _lib.CStatus()
                rc = _lib.lib().outboard_test(ctypes.byref(self._req), ctypes.byref(done), ctypes.byref(st))
                if not done.value:
                    errors.check(rc)
                    return False
                self._complete(rc, st)
            self._outcome()
            return True

    def wait(self) -> Any:
        """Blocks until the operation finishes; its result, or its error
        raised."""
        with self._lock:
            if not self.done:
                st = _lib.CStatus()
                rc = _lib.lib().outboard_wait(ctypes.byref(self._req), ctypes.byref(st))
                if self._req.value is not None:
                    # Not finished: the wait itself failed (the world was
                    # finalized ...); the request stays pending.
                    errors.check(rc)
                self._complete(rc, st)
            return self._outcome()

    def __del__(self) -> None:
        if getattr(self, "_req", None) is not None and self._req.value is not None:
            try:
                warnings.warn("outboard request dropped before it finished; its C handle leaks", ResourceWarning, source=self)
            except Exception:
                pass


def wait_all(requests: Iterable[Request]) -> List[Any]:
    """Waits for every request, in order; their results."""
    return [r.wait() for r in requests]
