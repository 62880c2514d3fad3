"""Python buffers as C pointers: bytes, bytearray, memoryview, array.array,
mmap and anything else with the buffer protocol."""

from __future__ import annotations

import ctypes
from typing import Any, Tuple


def view(obj: Any, what: str) -> memoryview:
    """A memoryview of ``obj``, or a ``TypeError`` naming ``what``."""
    if isinstance(obj, memoryview):
        return obj
    try:
        return memoryview(obj)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like (bytes, bytearray, memoryview, array ...), not {type(obj).__name__}") from None


def readable(obj: Any, what: str) -> Tuple[Any, int]:
    """A pointer argument for C to read ``obj``'s bytes, and their number.

    ``bytes`` go as they are; a writable contiguous buffer is shared; any
    other buffer (read-only views, non-contiguous ones) is copied first.
    The first value must stay referenced while C reads it.
    """
    if isinstance(obj, bytes):
        return obj, len(obj)
    mv = view(obj, what)
    n = mv.nbytes
    if not mv.readonly and mv.c_contiguous:
        return (ctypes.c_char * n).from_buffer(mv), n
    return mv.tobytes(), n


def writable(obj: Any, what: str) -> Tuple[Any, int]:
    """A pointer argument for C to write into ``obj``, and its size.

    The returned ctypes array holds an export of ``obj``'s buffer, so a
    bytearray cannot be resized while an operation may still write it.
    """
    mv = view(obj, what)
    if mv.readonly:
        raise TypeError(f"{what} must be writable (bytearray, memoryview of one, array ...), not read-only {type(obj).__name__}")
    if not mv.c_contiguous:
        raise TypeError(f"{what} must be C-contiguous")
    return (ctypes.c_char * mv.nbytes).from_buffer(mv), mv.nbytes
