"""The life of a C handle: freed once by ``close()`` (or a ``with`` block),
never used after."""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable, Optional, Type, TypeVar

_H = TypeVar("_H", bound="Handle")

from . import errors


def made(out: Any) -> int:
    """The handle a ``outboard_*`` constructor wrote into ``out`` (a
    ``ctypes.c_void_p``) after reporting success: never null then, but
    ctypes types it as optional."""
    p = out.value
    if p is None:
        raise errors.StateError("no handle", "the library reported success but returned a null handle")
    return int(p)


class Handle:
    """Owns one C handle (a group, buffer or lock). ``close()`` frees it
    and is idempotent; any other use after it raises ``StateError``.

    Handles made from a world are released by the world's ``close()`` after
    it leaves the job (the library frees them, reporting the finalized
    world, which is expected then), so none is freed twice or leaks.
    """

    _what = "handle"
    # What close() raises while an operation that uses the handle is under
    # way (the library would free the handle anyway and lose the handle's
    # state, or let the engine reach freed memory).
    _busy: Type[errors.OutboardError] = errors.StateError

    def __init__(self, ptr: int, free: Callable[[int], int], world: Any = None):
        self._ptr: Optional[int] = ptr
        self._free = free
        self._close_lock = threading.Lock()
        self._requests: "weakref.WeakSet[Any]" = weakref.WeakSet()
        if world is not None:
            world._adopt(self)

    @property
    def closed(self) -> bool:
        """Whether the handle was freed."""
        return self._ptr is None

    def _p(self) -> int:
        """The live C pointer, or ``StateError`` after ``close()``."""
        p = self._ptr
        if p is None:
            raise errors.closed(self._what)
        return p

    def _track(self, request: Any) -> None:
        """Notes an operation under way that uses this handle."""
        self._requests.add(request)

    def _take(self) -> Optional[int]:
        with self._close_lock:
            p, self._ptr = self._ptr, None
            return p

    def close(self) -> None:
        """Frees the C handle (the library frees it even when it reports
        an error, which is then raised). Refused, leaving it open, while an
        operation using it has not been waited for."""
        if any(not r.done for r in list(self._requests)):
            raise self._busy("handle in use", f"an operation on this {self._what} is under way: wait for it before close()")
        p = self._take()
        if p is not None:
            errors.check(self._free(p))

    def _release(self) -> None:
        """Frees the handle after its world was finalized: the library
        frees it and reports the finalized world, which is ignored."""
        p = self._take()
        if p is not None:
            self._free(p)

    def __enter__(self: _H) -> _H:
        self._p()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_ptr", None) is None:
            return
        try:
            warnings.warn(f"unclosed outboard {self._what}; freed by the garbage collector", ResourceWarning, source=self)
            self._release()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
