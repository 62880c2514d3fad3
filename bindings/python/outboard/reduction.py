"""Reduction arguments: Python numbers, sequences and typed buffers packed
into the bytes a C reduction takes, and its result unpacked into the same
shape (a number, a list, an ``array.array``). Pure Python."""

from __future__ import annotations

import array
from typing import Any, Callable, Tuple, Union

from . import _buffers
from .errors import ArgumentError
from .types import DType

DTypeLike = Union[DType, str, int, None]

# What `pack` returns: the bytes to send (kept referenced until the call
# started), the element count, the datatype, and how to turn the result's
# bytes into the caller's shape.
Packed = Tuple[Any, int, DType, Callable[[bytes], Any]]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))


def _default_dtype(values: Any) -> DType:
    """INT64 for integers, DOUBLE as soon as one value is a float."""
    return DType.DOUBLE if any(isinstance(v, float) for v in values) else DType.INT64


def _array(dtype: DType, values: Any) -> "array.array[Any]":
    try:
        return array.array(dtype.typecode, values)
    except OverflowError as e:
        raise ArgumentError("invalid argument", f"a value does not fit {dtype.name}: {e}") from None
    except TypeError as e:
        raise TypeError(f"reduction values for {dtype.name}: {e}") from None


def buffer_dtype(buf: Any, dtype: DTypeLike, what: str) -> Tuple[memoryview, DType]:
    """A buffer's view and datatype: ``dtype`` if given (checked against a
    typed buffer's own format; a byte buffer takes any), else inferred from
    its format."""
    mv = _buffers.view(buf, what)
    untyped = mv.format in ("B", "b", "c")
    if dtype is None:
        if untyped:
            raise ArgumentError("invalid argument", f"{what} holds bytes; pass dtype= to say what they are")
        return mv, DType.from_format(mv.format, mv.itemsize)
    d = DType.of(dtype)
    if not untyped and DType.from_format(mv.format, mv.itemsize) != d:
        raise ArgumentError("invalid argument", f"{what} has format {mv.format!r}, not {d.name}")
    if mv.nbytes % d.itemsize:
        raise ArgumentError("invalid argument", f"{what} has {mv.nbytes} bytes, not a whole number of {d.itemsize}-byte {d.name}")
    return mv, d


def pack(values: Any, dtype: DTypeLike) -> Packed:
    """This rank's contribution as bytes, with what the result becomes."""
    if _is_number(values):
        d = DType.of(dtype) if dtype is not None else _default_dtype([values])
        a = _array(d, [values])
        return a.tobytes(), 1, d, lambda b: array.array(d.typecode, b)[0]
    try:
        memoryview(values)
        is_buffer = True
    except TypeError:
        is_buffer = False
    if is_buffer:
        mv, d = buffer_dtype(values, dtype, "values")
        data, n = _buffers.readable(mv, "values")
        return data, n // d.itemsize, d, lambda b: array.array(d.typecode, b)
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"reduction values must be a number, a sequence of numbers or a typed buffer, not {type(values).__name__}") from None
    d = DType.of(dtype) if dtype is not None else _default_dtype(items)
    a = _array(d, items)
    return a.tobytes(), len(a), d, lambda b: array.array(d.typecode, b).tolist()


def result_buffer(count: int, dtype: DType) -> bytearray:
    """Zeroed room for ``count`` elements of ``dtype``."""
    return bytearray(count * dtype.itemsize)
