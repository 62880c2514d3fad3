"""Python bindings for Outboard, over its C ABI (``liboutboard_capi.so``)
with ``ctypes``; standard library only.

    import outboard

    with outboard.World() as world:          # the job `outboard run` started
        total = world.allreduce(world.rank)  # offloaded to the engines
        if world.rank == 0:
            world.send(1, b"hello", tag=7)
        elif world.rank == 1:
            data, status = world.recv(64, source=0, tag=7)

The library is found through ``OUTBOARD_LIB`` (its path, or a directory
holding it), else beside the ``outboard`` command on ``PATH`` (an
``outboard install --prefix DIR`` puts it in ``DIR/lib``), else in the
cargo target directory (``CARGO_TARGET_DIR``, or the repository's
``target``); see ``_lib.candidates``. Every failed C call raises a subclass of
``OutboardError`` named for its status code.

NICVM modules (``Module``) are compiled here, loaded on the engines and
used as reduction operators: ``group.allreduce(values, op=module)``.
"""

__version__ = "0.1.0"

from .errors import (
    ArgumentError,
    CancelledError,
    CollectiveError,
    CollectiveMismatchError,
    EngineLostError,
    InitError,
    InternalError,
    ModuleError,
    NotReadyTimeoutError,
    SourceClosedError,
    OperationError,
    OutboardError,
    PeerError,
    PortGoneError,
    ProcFailedPendingError,
    RdmaError,
    RegisteredMemoryError,
    ResourceError,
    SenderAbortedError,
    StateError,
    TruncatedError,
)
from ._lib import LibraryNotFoundError
from .group import Group
from .lock import AtomicServer, Lock
from .memory import Memory
from .nicvm import Delivery, Module, ModuleInfo
from .request import Request, Status, wait_all
from .types import ALL_TAG_BITS, ANY_SOURCE, GROUP_ID_LIMIT, UNDEFINED, AtomicOp, BarrierAlgorithm, BarrierProtocol, BcastMode, DType, Mode, Op, ReduceMode, ServerWait, TreeShape
from .world import World

__all__ = [
    "__version__",
    "ALL_TAG_BITS",
    "ANY_SOURCE",
    "GROUP_ID_LIMIT",
    "UNDEFINED",
    "ArgumentError",
    "AtomicOp",
    "AtomicServer",
    "BarrierAlgorithm",
    "BarrierProtocol",
    "BcastMode",
    "CancelledError",
    "CollectiveError",
    "CollectiveMismatchError",
    "Delivery",
    "DType",
    "EngineLostError",
    "Group",
    "InitError",
    "InternalError",
    "SourceClosedError",
    "LibraryNotFoundError",
    "Lock",
    "Memory",
    "Mode",
    "Module",
    "ModuleError",
    "ModuleInfo",
    "NotReadyTimeoutError",
    "Op",
    "ReduceMode",
    "OperationError",
    "OutboardError",
    "PeerError",
    "PortGoneError",
    "ProcFailedPendingError",
    "RdmaError",
    "RegisteredMemoryError",
    "Request",
    "ResourceError",
    "SenderAbortedError",
    "ServerWait",
    "StateError",
    "Status",
    "TreeShape",
    "TruncatedError",
    "World",
    "wait_all",
]
