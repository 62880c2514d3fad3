"""The C ABI's enumerations (datatypes, reduction operations, collective
modes, atomic operations) and the mapping between Python values, buffers
and those datatypes. Pure Python: nothing here needs the library."""

from __future__ import annotations

import array
import enum
import struct
import sys
from typing import Any, Union

from .errors import ArgumentError

ANY_SOURCE = -1
"""``source`` of a receive that accepts any sender."""

ALL_TAG_BITS = (1 << 64) - 1
"""``tag_mask`` that matches the tag exactly."""

UNDEFINED = 0xFFFF_FFFF
"""``color`` of a split for a rank that joins no group."""

GROUP_ID_LIMIT = 1 << 19
"""Group ids a program may choose for ``World.create_group`` are below this."""


class DType(enum.IntEnum):
    """Element types of reductions (``OUTBOARD_INT32`` ...)."""

    INT32 = 1
    INT64 = 2
    UINT64 = 3
    FLOAT = 4
    DOUBLE = 5

    @property
    def typecode(self) -> str:
        """The ``struct``/``array`` format character of one element."""
        return _TYPECODE[self]

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return struct.calcsize(_TYPECODE[self])

    @property
    def is_float(self) -> bool:
        return self in (DType.FLOAT, DType.DOUBLE)

    @classmethod
    def of(cls, value: Union["DType", str, int]) -> "DType":
        """A datatype from the enum, its name or a short alias
        (``"i32"``, ``"int64"``, ``"u64"``, ``"f32"``, ``"double"`` ...)."""
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            d = _ALIASES.get(value.lower())
            if d is None:
                raise ArgumentError("unknown datatype", f"{value!r}: one of {sorted(_ALIASES)}")
            return d
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise ArgumentError("unknown datatype", f"{value}") from None
        raise TypeError(f"a datatype is a DType or its name, not {type(value).__name__}")

    @classmethod
    def from_format(cls, fmt: str, itemsize: int) -> "DType":
        """The datatype of a buffer's elements from its ``memoryview``
        format, or an ``ArgumentError`` if Outboard has none for it."""
        native = ("@", "=", "<" if sys.byteorder == "little" else ">")
        code = fmt[1:] if fmt[:1] in native or (fmt[:1] == "!" and sys.byteorder == "big") else fmt
        if len(code) == 1:
            if code in "bhilq" and itemsize in (4, 8):
                return DType.INT32 if itemsize == 4 else DType.INT64
            if code in "ILQ" and itemsize == 8:
                return DType.UINT64
            if code == "f" and itemsize == 4:
                return DType.FLOAT
            if code == "d" and itemsize == 8:
                return DType.DOUBLE
        raise ArgumentError("no Outboard datatype", f"for buffer format {fmt!r} ({itemsize}-byte elements); pass dtype=")


_TYPECODE = {DType.INT32: "i", DType.INT64: "q", DType.UINT64: "Q", DType.FLOAT: "f", DType.DOUBLE: "d"}
_ALIASES = {
    **{d.name.lower(): d for d in DType},
    "i32": DType.INT32,
    "i64": DType.INT64,
    "u64": DType.UINT64,
    "uint64": DType.UINT64,
    "f32": DType.FLOAT,
    "float32": DType.FLOAT,
    "f64": DType.DOUBLE,
    "float64": DType.DOUBLE,
}
assert struct.calcsize("i") == 4 and array.array("i").itemsize == 4


class Op(enum.IntEnum):
    """Reduction operations (``OUTBOARD_SUM`` ...). The bitwise and
    logical ones take integer types only (the library refuses others)."""

    SUM = 1
    MIN = 2
    MAX = 3
    BAND = 4
    BOR = 5
    PROD = 6
    BXOR = 7
    LAND = 8
    LOR = 9
    LXOR = 10

    @classmethod
    def of(cls, value: Union["Op", str, int]) -> "Op":
        """An operation from the enum or its name (``"sum"``, ``"bor"``)."""
        if isinstance(value, Op):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                raise ArgumentError("unknown operation", f"{value!r}: one of {[o.name.lower() for o in Op]}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise ArgumentError("unknown operation", f"{value}") from None
        raise TypeError(f"an operation is an Op or its name, not {type(value).__name__}")


class Mode(enum.IntEnum):
    """Where a group's collectives run."""

    OFFLOADED = 0
    """By the engines (the default)."""
    HOST_BASED = 1
    """By the hosts, over point-to-point messages."""


class BarrierAlgorithm(enum.IntEnum):
    """A group's barrier algorithm (``Group.set_barrier``)."""

    DISSEMINATION = 0
    """ceil(log2 n) rounds for any n (the default)."""
    PAIRWISE_EXCHANGE = 1
    """MPICH's pairwise exchange (recursive doubling)."""
    GATHER_BCAST = 2
    """Gather to rank 0 and broadcast back on a tree of the given degree
    (0: binomial)."""


class BarrierProtocol(enum.IntEnum):
    """How a group's offloaded barriers travel between the engines."""

    POINT_TO_POINT = 0
    """Over the reliable connections (the default)."""
    NIC_COLLECTIVE = 1
    """By the NIC collective protocol: no acknowledgements, losses
    recovered by the barrier itself."""


class BcastMode(enum.IntEnum):
    """Where a group's broadcasts run (``Group.set_bcast_mode``)."""

    GROUP_MODE = 0
    """In the group's mode (the default)."""
    OFFLOADED = 1
    """The engines forward each piece down the tree."""
    HOST_BASED = 2
    """The hosts send to each child."""
    NIC_ASSISTED = 3
    """Each host hands every piece to its engine once, with one
    multi-send to all its children."""
    BYPASS = 4
    """Application bypass for blocking broadcasts of at most 16384 bytes:
    inner members forward in an interrupt handler, so a late member
    delays nobody below it (longer and non-blocking ones run in the
    group's mode). Interrupts come as ``OUTBOARD_BYPASS_DELIVERY`` says."""


class ReduceMode(enum.IntEnum):
    """Where a group's reduces run (``Group.set_reduce_mode``)."""

    GROUP_MODE = 0
    """In the group's mode (the default)."""
    BYPASS = 1
    """Application bypass for blocking reduces of at most 16384 bytes of
    a built-in operation: a non-root returns once its contribution is
    copied, and interrupt handlers fold its children's and send up."""


class TreeShape(enum.IntEnum):
    """A broadcast tree's shape (``Group.set_bcast_tree``)."""

    BINOMIAL = 0
    """MPICH's binomial tree (the default)."""
    KARY = 1
    """A complete tree of the given degree."""
    CHAIN = 2
    """A chain."""
    POSTAL = 3
    """The postal model's optimal tree for the given lambda."""


class AtomicOp(enum.IntEnum):
    """Remote atomic operations on a 32- or 64-bit word."""

    FETCH_ADD = 1
    SWAP = 2
    COMPARE_SWAP = 3


class ServerWait(enum.IntEnum):
    """How an atomic server waits for its next request
    (``Group.atomic_server``)."""

    POLL = 0
    """Polls without pause: the quickest answer, a whole core."""
    SPIN_THEN_BLOCK = 1
    """Polls ``spins`` times, then blocks until a request comes."""
    BLOCK = 2
    """Blocks at once: no core while idle, a wake-up per request."""


def uint(value: Any, bits: int, what: str) -> int:
    """``value`` as an unsigned ``bits``-bit integer, refusing what ctypes
    would silently wrap (a negative rank, a tag beyond 64 bits)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < 1 << bits:
        raise ArgumentError("invalid argument", f"{what} {value} is outside 0..2^{bits}-1")
    return value


def word(value: Any, bits: int, what: str) -> int:
    """An atomic operand as the word's unsigned bits: negative values (a
    decrement) are taken modulo 2^bits, larger ones refused."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        raise ArgumentError("invalid argument", f"{what} {value} does not fit {bits} bits")
    return value & ((1 << bits) - 1)


def source(value: Any) -> int:
    """A receive's source: a world rank or ``ANY_SOURCE``."""
    if value == ANY_SOURCE and isinstance(value, int):
        return ANY_SOURCE
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"source must be an int, not {type(value).__name__}")
    if not -(1 << 31) <= value < 1 << 31:
        raise ArgumentError("invalid argument", f"source {value} does not fit 32 bits")
    return value


def operand_bits(bits: int) -> int:
    """The width atomic operands are checked against: ``bits`` when it is
    one the library takes (32, 64), else 64 (the library then refuses the
    width itself)."""
    return bits if bits in (32, 64) else 64
