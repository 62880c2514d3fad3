"""Typed exceptions for the C ABI's status codes.

Every nonzero code a C function returns becomes an instance of the class
registered for it, carrying the code, the short description
(``outboard_strerror``) and the failed call's own message
(``outboard_last_error``). Argument errors are also ``ValueError`` and
state errors also ``RuntimeError``, so generic handlers catch them.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

OK = 0
ERR_ARG = 1
ERR_INIT = 2
ERR_PEER = 3
ERR_TRUNCATED = 4
ERR_RDMA = 5
ERR_RESOURCE = 6
ERR_MEMORY = 7
ERR_COLL = 8
ERR_CANCELLED = 9
ERR_STATE = 10
ERR_OTHER = 11
ERR_PANIC = 12
ERR_SOURCE_CLOSED = 13
ERR_PROC_FAILED_PENDING = 14
ERR_PORT_GONE = 15
ERR_NOT_READY_TIMEOUT = 16
ERR_SENDER_ABORTED = 17
ERR_COLL_MISMATCH = 18
ERR_ENGINE_LOST = 19
ERR_MODULE = 20


class OutboardError(Exception):
    """A failed Outboard call.

    ``code`` is the C status code, ``description`` its
    ``outboard_strerror`` text and ``detail`` the call's own message.
    """

    code: Optional[int] = None

    def __init__(self, description: str, detail: str = "", code: Optional[int] = None):
        if code is not None:
            self.code = code
        self.description = description
        self.detail = detail
        super().__init__(f"{description}: {detail}" if detail else description)


class ArgumentError(OutboardError, ValueError):
    """A bad pointer, datatype, operation, rank or length (``OUTBOARD_ERR_ARG``)."""

    code = ERR_ARG


class InitError(OutboardError):
    """Joining the job failed (``OUTBOARD_ERR_INIT``)."""

    code = ERR_INIT


class PeerError(OutboardError):
    """A peer died or stopped answering (``OUTBOARD_ERR_PEER``)."""

    code = ERR_PEER


class TruncatedError(OutboardError):
    """A message longer than the receive buffer (``OUTBOARD_ERR_TRUNCATED``).

    The buffer holds the message's start; ``status`` (set by the receive)
    names the sender, the tag and the full length.
    """

    code = ERR_TRUNCATED
    status: Any = None


class RdmaError(OutboardError):
    """An RDMA or atomic access with a wrong key, out of bounds or
    misaligned (``OUTBOARD_ERR_RDMA``)."""

    code = ERR_RDMA


class ResourceError(OutboardError):
    """The engine is out of tokens or the message is too long for it
    (``OUTBOARD_ERR_RESOURCE``)."""

    code = ERR_RESOURCE


class RegisteredMemoryError(OutboardError):
    """Registered memory exhausted, or an access outside a buffer
    (``OUTBOARD_ERR_MEMORY``; not Python's ``MemoryError``)."""

    code = ERR_MEMORY


class CollectiveError(OutboardError):
    """A collective refused: group busy, id clash, length mismatch ...
    (``OUTBOARD_ERR_COLL``)."""

    code = ERR_COLL


class CancelledError(OutboardError):
    """The operation was cancelled (``OUTBOARD_ERR_CANCELLED``)."""

    code = ERR_CANCELLED


class StateError(OutboardError, RuntimeError):
    """The world was finalized or left unusable, or this handle was closed
    (``OUTBOARD_ERR_STATE``; the bindings raise it for use after close)."""

    code = ERR_STATE


class OperationError(OutboardError):
    """Any other failure of an operation (``OUTBOARD_ERR_OTHER``)."""

    code = ERR_OTHER


class InternalError(OutboardError):
    """A bug: the library panicked (``OUTBOARD_ERR_PANIC``)."""

    code = ERR_PANIC


class SourceClosedError(OutboardError):
    """The port a receive named has closed, after everything it sent was
    delivered (``OUTBOARD_ERR_SOURCE_CLOSED``); not a failed process."""

    code = ERR_SOURCE_CLOSED


class ProcFailedPendingError(PeerError):
    """A receive from any source was withdrawn, its buffer untouched,
    because a process failed while it waited
    (``OUTBOARD_ERR_PROC_FAILED_PENDING``, ULFM's
    ``MPI_ERR_PROC_FAILED_PENDING``). Post it again to wait for the live
    ranks. A ``PeerError``, so handlers of failed peers catch it too."""

    code = ERR_PROC_FAILED_PENDING


class PortGoneError(OutboardError):
    """The destination port is gone: closed, replaced, or never opened
    (``OUTBOARD_ERR_PORT_GONE``)."""

    code = ERR_PORT_GONE


class NotReadyTimeoutError(OutboardError):
    """The destination kept refusing the message for longer than the retry
    timeout (``OUTBOARD_ERR_NOT_READY_TIMEOUT``)."""

    code = ERR_NOT_READY_TIMEOUT


class SenderAbortedError(OutboardError):
    """The sender gave the message up part-way
    (``OUTBOARD_ERR_SENDER_ABORTED``)."""

    code = ERR_SENDER_ABORTED


class CollectiveMismatchError(CollectiveError):
    """The group's members called different collectives (or different
    roots) at the same place in the group's order
    (``OUTBOARD_ERR_COLL_MISMATCH``). A ``CollectiveError``, so handlers of
    refused collectives catch it too."""

    code = ERR_COLL_MISMATCH


class EngineLostError(OutboardError):
    """This process's node engine is gone (``OUTBOARD_ERR_ENGINE_LOST``):
    the engine process died or detached this process; nothing more
    completes."""

    code = ERR_ENGINE_LOST


class ModuleError(OutboardError):
    """A NICVM module failed (``OUTBOARD_ERR_MODULE``): its source does not
    compile, its bytecode does not verify, an engine refused it, or, as a
    reduction's operator, it ran out of fuel, trapped or reported failure
    (here or at another member). ``module`` is the module's name."""

    code = ERR_MODULE
    module: Optional[str] = None


ERRORS: Dict[int, Type[OutboardError]] = {
    c.code: c  # type: ignore[misc]
    for c in (
        ArgumentError,
        InitError,
        PeerError,
        TruncatedError,
        RdmaError,
        ResourceError,
        RegisteredMemoryError,
        CollectiveError,
        CancelledError,
        StateError,
        OperationError,
        InternalError,
        SourceClosedError,
        ProcFailedPendingError,
        PortGoneError,
        NotReadyTimeoutError,
        SenderAbortedError,
        EngineLostError,
        CollectiveMismatchError,
        ModuleError,
    )
}


def error_class(code: int) -> Type[OutboardError]:
    """The exception class for a C status code (the base for unknown ones)."""
    return ERRORS.get(code, OutboardError)


def from_code(code: int) -> OutboardError:
    """The exception for a failed call's ``code``, with the library's texts.

    Must run on the thread that made the call, before its next failing
    call: ``outboard_last_error`` is per thread.
    """
    from . import _lib

    lib = _lib.lib()
    description = lib.outboard_strerror(code).decode("utf-8", "replace")
    detail = lib.outboard_last_error().decode("utf-8", "replace")
    return error_class(code)(description, detail, code)


def check(code: int, module: Optional[str] = None) -> None:
    """Raises the typed exception for a nonzero status code; a
    ``ModuleError`` of a call on ``module`` carries its name."""
    if code != OK:
        e = from_code(code)
        if isinstance(e, ModuleError):
            e.module = module
        raise e


def closed(what: str) -> StateError:
    """The error for use of a handle after ``close()``."""
    return StateError("handle closed", f"this {what} was closed")
