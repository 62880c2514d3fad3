"""Groups and their collectives: barrier, broadcast, reduce, allreduce,
each blocking and non-blocking (``i*``, returning a ``Request``), in the
group's mode (offloaded to the engines, or host-based)."""

from __future__ import annotations

import ctypes
import pickle
import struct
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _buffers, _lib, errors, reduction
from .handle import Handle, made
from .nicvm import OP_MODULE_FIRST, Module
from .request import Request
from .types import UNDEFINED, BarrierAlgorithm, BarrierProtocol, BcastMode, Mode, Op, ReduceMode, ServerWait, TreeShape, uint

if TYPE_CHECKING:
    from .lock import AtomicServer, Lock


def _operator(op: Any) -> Tuple[int, Optional[str]]:
    """The C operator code of ``op`` (an ``Op``, its name, a ``Module`` or
    its ``op`` code)
    and, for a module, its name (which its failures carry)."""
    if isinstance(op, Module):
        return op.op, op.name
    if isinstance(op, int) and not isinstance(op, bool) and op >= OP_MODULE_FIRST:
        return op, None  # a Module.op: the library checks it
    return int(Op.of(op)), None


#: What a scatter's root broadcasts for the length when it refuses its
#: blocks.
_REFUSED = 2**64 - 1


def _blocks(out: bytearray, n: int, members: int) -> List[bytes]:
    """``members`` blocks of ``n`` bytes, in order."""
    return [bytes(out[i * n:(i + 1) * n]) for i in range(members)]


def _wait_started(start: Callable[[Any], Any], module: Optional[str] = None) -> None:
    """Starts a split-phase call (``start`` given the request's address)
    and waits for it: one code path for the blocking and split-phase forms
    of the C ABI."""
    req = ctypes.c_void_p()
    errors.check(start(ctypes.byref(req)), module=module)
    errors.check(_lib.lib().outboard_wait(ctypes.byref(req), None), module=module)


def _uses(group: "Group", op: Any) -> Tuple[Any, ...]:
    """The handles a reduction with ``op`` uses: a module operator's may
    not be closed until it finishes."""
    return (group, op) if isinstance(op, Module) else (group,)


class Group(Handle):
    """An ordered set of ranks that run collectives together.

    Made by ``World.new_group()`` (every rank), ``Group.split()`` or
    ``World.create_group()``; ``world.group`` is the one the world makes for
    itself. Close it when done (``close()`` or ``with``), with no
    collective of it under way.
    """

    _what = "group"
    _busy = errors.CollectiveError

    def __init__(self, ptr: int, world: Any):
        super().__init__(ptr, _lib.lib().outboard_group_free, world)
        self.world = world
        r, s = ctypes.c_uint32(), ctypes.c_uint32()
        errors.check(_lib.lib().outboard_group_rank(ptr, ctypes.byref(r)))
        errors.check(_lib.lib().outboard_group_size(ptr, ctypes.byref(s)))
        self._rank, self._size = r.value, s.value
        self._mode = Mode.OFFLOADED

    @property
    def rank(self) -> int:
        """This rank's place in the group."""
        self._p()
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks in the group."""
        self._p()
        return self._size

    @property
    def nodes(self) -> int:
        """How many node engines the group's members use: 1 when they all
        share one machine's, more when the group spans machines (or each
        rank runs an engine of its own)."""
        n = ctypes.c_uint32()
        errors.check(_lib.lib().outboard_group_nodes(self._p(), ctypes.byref(n)))
        return n.value

    @property
    def mode(self) -> Mode:
        """Where the group's collectives run (set at every member alike)."""
        self._p()
        return self._mode

    @mode.setter
    def mode(self, mode: Mode) -> None:
        if not isinstance(mode, int) or isinstance(mode, bool):
            raise TypeError(f"mode must be a Mode, not {type(mode).__name__}")
        errors.check(_lib.lib().outboard_group_set_mode(self._p(), int(mode)))
        self._mode = Mode(mode)

    # --- choices -----------------------------------------------------------
    # Every member must choose alike, before the same collective. A group
    # with any choice made runs its collectives on the engines (not in the
    # node's shared memory, whose algorithms are its own).

    def set_barrier(self, algorithm: BarrierAlgorithm, degree: int = 0) -> None:
        """Chooses the barrier algorithm (``degree``: the gather-broadcast
        tree's, 0 for binomial)."""
        errors.check(_lib.lib().outboard_group_set_barrier(self._p(), int(algorithm), uint(degree, 32, "degree")))

    def set_barrier_protocol(self, protocol: BarrierProtocol) -> None:
        """Chooses how offloaded barriers travel between the engines."""
        errors.check(_lib.lib().outboard_group_set_barrier_protocol(self._p(), int(protocol)))

    def set_bcast_mode(self, mode: BcastMode, chunk: int = 0) -> None:
        """Chooses where broadcasts run; ``chunk``: a NIC-assisted
        broadcast's piece in bytes (0: one packet; 2**32-1: whole)."""
        errors.check(_lib.lib().outboard_group_set_bcast_mode(self._p(), int(mode), uint(chunk, 32, "chunk")))

    def set_reduce_mode(self, mode: ReduceMode) -> None:
        """Chooses where reduces run: in the group's mode, or by
        application bypass (``ReduceMode.BYPASS``)."""
        errors.check(_lib.lib().outboard_group_set_reduce_mode(self._p(), int(mode)))

    def set_bcast_tree(self, shape: TreeShape, param: float = 0) -> None:
        """Chooses the broadcast tree; ``param``: a k-ary tree's degree, a
        postal tree's lambda."""
        errors.check(_lib.lib().outboard_group_set_bcast_tree(self._p(), int(shape), float(param)))

    def set_reduce_degree(self, degree: int) -> None:
        """Chooses the degree of the reduce and allreduce tree (0:
        binomial)."""
        errors.check(_lib.lib().outboard_group_set_reduce_degree(self._p(), uint(degree, 32, "degree")))

    def describe(self) -> str:
        """The group's choices in one line."""
        return self._text(_lib.lib().outboard_group_describe)

    @property
    def taken(self) -> Dict[str, int]:
        """How many of this rank's collectives on the group ran as each
        choice ("broadcast nic-assisted 3-ary tree": 2), from the library's
        record of what it ran."""
        out: Dict[str, int] = {}
        for line in self._text(_lib.lib().outboard_group_taken).splitlines():
            n, what = line.split(" ", 1)
            out[what] = int(n)
        return out

    def _text(self, f: Any) -> str:
        buf = ctypes.create_string_buffer(1 << 16)
        errors.check(f(self._p(), buf, len(buf)))
        return buf.value.decode()

    def split(self, color: Optional[int], key: int = 0) -> Optional["Group"]:
        """``MPI_Comm_split``: ranks passing the same ``color`` form a new
        group, ordered by ``key`` then rank; ``None`` (at a rank that passed
        ``color=None``, joining none). Collective over this group."""
        c = UNDEFINED if color is None else uint(color, 32, "color")
        out = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_split(self._p(), c, uint(key, 32, "key"), ctypes.byref(out)))
        return None if out.value is None else Group(out.value, self.world)

    # --- barrier ---------------------------------------------------------

    def barrier(self) -> None:
        """Blocks until every member entered the barrier."""
        errors.check(_lib.lib().outboard_barrier(self._p()))

    def ibarrier(self) -> Request:
        """Starts a barrier."""
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_barrier_start(self._p(), ctypes.byref(req)))
        return Request(req, self, uses=(self,))

    # --- broadcast -------------------------------------------------------

    def bcast(self, buf: Any, root: int = 0) -> Any:
        """Broadcasts the root's ``buf`` into every member's ``buf`` (writable,
        the same length everywhere); returns ``buf``."""
        p, n = _buffers.writable(buf, "buf")
        errors.check(_lib.lib().outboard_bcast(self._p(), p, n, uint(root, 32, "root")))
        return buf

    def ibcast(self, buf: Any, root: int = 0) -> Request:
        """Starts a broadcast; ``buf`` must not be touched until the request
        finishes (its result is ``buf``)."""
        p, n = _buffers.writable(buf, "buf")
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_bcast_start(self._p(), p, n, uint(root, 32, "root"), ctypes.byref(req)))
        return Request(req, self, keep=(p, buf), finish=lambda _st: buf, uses=(self,))

    def bcast_object(self, obj: Any = None, root: int = 0) -> Any:
        """Broadcasts a picklable object from the root (two broadcasts: its
        length, then its bytes); every member returns it."""
        data = pickle.dumps(obj) if self.rank == root else b""
        head = bytearray(struct.pack("<Q", len(data)))
        self.bcast(head, root)
        body = bytearray(data) if self.rank == root else bytearray(struct.unpack("<Q", head)[0])
        self.bcast(body, root)
        return obj if self.rank == root else pickle.loads(bytes(body))

    # --- reductions ------------------------------------------------------

    def allreduce(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """Combines every member's ``values`` with ``op`` (an ``Op``, its
        name, or a loaded ``Module``, run by the engines whatever the
        group's mode); every member gets the result in the shape it passed: a number, a list (for a
        sequence) or an ``array.array`` (for a buffer). ``dtype`` defaults to
        INT64 for integers, DOUBLE for floats, and a typed buffer's own."""
        return self.iallreduce(values, op, dtype).wait()

    def iallreduce(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Request:
        """Starts an allreduce (``values`` are copied at once)."""
        o, m = _operator(op)
        data, count, d, shape = reduction.pack(values, dtype)
        out = reduction.result_buffer(count, d)
        p, _ = _buffers.writable(out, "result")
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_allreduce_start(self._p(), data, p, count, int(d), o, ctypes.byref(req)), module=m)
        return Request(req, self, keep=(p, out), finish=lambda _st: shape(bytes(out)), uses=_uses(self, op), module=m)

    def allreduce_into(self, recvbuf: Any, sendbuf: Any = None, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """Allreduce between buffers: ``sendbuf`` (same size as ``recvbuf``),
        or ``recvbuf``'s own contents in place when ``sendbuf`` is None; the
        result in ``recvbuf``, which is returned."""
        return self.iallreduce_into(recvbuf, sendbuf, op, dtype).wait()

    def iallreduce_into(self, recvbuf: Any, sendbuf: Any = None, op: Any = Op.SUM, dtype: Any = None) -> Request:
        """Starts an allreduce between buffers (see ``allreduce_into``)."""
        o, m = _operator(op)
        mv, d = reduction.buffer_dtype(recvbuf, dtype, "recvbuf")
        p, n = _buffers.writable(mv, "recvbuf")
        src = None
        if sendbuf is not None:
            smv, _ = reduction.buffer_dtype(sendbuf, d, "sendbuf")
            if smv.nbytes != n:
                raise errors.ArgumentError("invalid argument", f"sendbuf has {smv.nbytes} bytes, recvbuf {n}")
            src, _ = _buffers.readable(smv, "sendbuf")
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_allreduce_start(self._p(), src, p, n // d.itemsize, int(d), o, ctypes.byref(req)), module=m)
        return Request(req, self, keep=(p, recvbuf), finish=lambda _st: recvbuf, uses=_uses(self, op), module=m)

    def reduce(self, values: Any, op: Any = Op.SUM, root: int = 0, dtype: Any = None) -> Any:
        """Combines every member's ``values`` with ``op`` at ``root`` (shapes
        as in ``allreduce``); ``None`` at the other members. The blocking
        call itself, so that the group's reduce mode (application bypass)
        applies."""
        o, m = _operator(op)
        r = uint(root, 32, "root")
        data, count, d, shape = reduction.pack(values, dtype)
        out = reduction.result_buffer(count, d)
        p, _ = _buffers.writable(out, "result")
        errors.check(_lib.lib().outboard_reduce(self._p(), data, p, count, int(d), o, r), module=m)
        return shape(bytes(out)) if r == self.rank else None

    def ireduce(self, values: Any, op: Any = Op.SUM, root: int = 0, dtype: Any = None) -> Request:
        """Starts a reduce (``values`` are copied at once)."""
        o, m = _operator(op)
        r = uint(root, 32, "root")
        data, count, d, shape = reduction.pack(values, dtype)
        out = reduction.result_buffer(count, d)
        p, _ = _buffers.writable(out, "result")
        at_root = r == self.rank
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_reduce_start(self._p(), data, p, count, int(d), o, r, ctypes.byref(req)), module=m)
        return Request(req, self, keep=(p, out), finish=lambda _st: shape(bytes(out)) if at_root else None, uses=_uses(self, op), module=m)

    # --- data movement and scans ----------------------------------------

    def allgather(self, data: Any) -> List[bytes]:
        """Every member's ``data`` (bytes-like, the same length at every
        member), in rank order, at every member."""
        blocks: List[bytes] = self.iallgather(data).wait()
        return blocks

    def iallgather(self, data: Any) -> Request:
        """Starts an allgather (``data`` is copied at once)."""
        src, n = _buffers.readable(_buffers.view(data, "data"), "data")
        out = bytearray(n * self.size)
        p, _ = _buffers.writable(out, "result")
        req = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_allgather_start(self._p(), src, n, p, ctypes.byref(req)))
        return Request(req, self, keep=(p, out), finish=lambda _st: _blocks(out, n, self.size), uses=(self,))

    def gather(self, data: Any, root: int = 0) -> Optional[List[bytes]]:
        """Every member's ``data`` (the same length everywhere), in rank
        order, at ``root``; ``None`` at the other members."""
        r = uint(root, 32, "root")
        src, n = _buffers.readable(_buffers.view(data, "data"), "data")
        out = bytearray(n * self.size)
        p, _ = _buffers.writable(out, "result")
        _wait_started(lambda req: _lib.lib().outboard_gather_start(self._p(), src, n, p, r, req))
        return _blocks(out, n, self.size) if r == self.rank else None

    def scatter(self, blocks: Optional[Sequence[Any]] = None, root: int = 0) -> bytes:
        """Block ``i`` of the root's ``blocks`` (one bytes-like per member,
        all of one length) to member ``i``; the other members pass nothing
        and learn the length from the root first."""
        r = uint(root, 32, "root")
        at_root = r == self.rank
        refused = ""
        views: List[bytes] = []
        if at_root:
            if blocks is None or len(blocks) != self.size:
                refused = f"the root passes {self.size} blocks, one per member"
            else:
                views = [bytes(_buffers.view(b, "blocks")) for b in blocks]
                if len({len(v) for v in views}) > 1:
                    refused = "the blocks differ in length"
        # The length goes first; a refusal goes instead, so that every
        # member raises rather than waits for blocks that will not come.
        n = len(views[0]) if views else 0
        head = bytearray(struct.pack("<Q", _REFUSED if refused else n))
        self.bcast(head, r)
        n = struct.unpack("<Q", head)[0]
        if n == _REFUSED:
            raise errors.ArgumentError("invalid argument", refused or f"the root's (rank {r}'s) blocks were refused")
        whole = bytearray(b"".join(views)) if at_root else bytearray(0)
        src = _buffers.readable(whole, "blocks")[0] if at_root and n else None
        out = bytearray(n)
        p, _ = _buffers.writable(out, "result")
        _wait_started(lambda req: _lib.lib().outboard_scatter_start(self._p(), src, n, p, r, req))
        return bytes(out)

    def alltoall(self, blocks: Sequence[Any]) -> List[bytes]:
        """Block ``j`` of ``blocks`` (one bytes-like per member, all of one
        length, the same at every member) to member ``j``; returns the
        blocks the members sent this one, in rank order."""
        if len(blocks) != self.size:
            raise errors.ArgumentError("invalid argument", f"alltoall takes {self.size} blocks, one per member")
        views = [bytes(_buffers.view(b, "blocks")) for b in blocks]
        if len({len(v) for v in views}) > 1:
            raise errors.ArgumentError("invalid argument", "the blocks differ in length")
        n = len(views[0]) if views else 0
        whole = bytearray(b"".join(views))
        src = _buffers.readable(whole, "blocks")[0] if whole else None
        out = bytearray(n * self.size)
        p, _ = _buffers.writable(out, "result")
        _wait_started(lambda req: _lib.lib().outboard_alltoall_start(self._p(), src, n, p, req))
        return _blocks(out, n, self.size)

    def reduce_scatter(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """``values`` holds one block per member (its length a multiple of
        the group's size); each member gets the combination over members of
        its own block, shaped as ``allreduce`` shapes results."""
        o, m = _operator(op)
        data, count, d, shape = reduction.pack(values, dtype)
        if count % self.size:
            raise errors.ArgumentError("invalid argument", f"{count} elements do not split into {self.size} equal blocks")
        per = count // self.size
        out = reduction.result_buffer(per, d)
        p, _ = _buffers.writable(out, "result")
        _wait_started(lambda req: _lib.lib().outboard_reduce_scatter_block_start(self._p(), data, p, per, int(d), o, req), module=m)
        return shape(bytes(out))

    def scan(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """The combination of members 0 to this one's ``values``, left to
        right (shapes as in ``allreduce``)."""
        return self._scan(values, op, dtype, exclusive=False)

    def exscan(self, values: Any, op: Any = Op.SUM, dtype: Any = None) -> Any:
        """The combination of members 0 to the one before this one;
        ``None`` at member 0."""
        return self._scan(values, op, dtype, exclusive=True)

    def _scan(self, values: Any, op: Any, dtype: Any, exclusive: bool) -> Any:
        o, m = _operator(op)
        data, count, d, shape = reduction.pack(values, dtype)
        out = reduction.result_buffer(count, d)
        p, _ = _buffers.writable(out, "result")
        start = _lib.lib().outboard_exscan_start if exclusive else _lib.lib().outboard_scan_start
        _wait_started(lambda req: start(self._p(), data, p, count, int(d), o, req), module=m)
        return None if exclusive and self.rank == 0 else shape(bytes(out))

    # --- lock ------------------------------------------------------------

    def lock(self, home: int = 0, server: Optional["AtomicServer"] = None) -> "Lock":
        """A distributed MCS lock over this group whose lock word lives at
        group rank ``home``. Collective (every member passes the same
        ``home``). With ``server`` (this group's ``atomic_server()``), its
        remote operations go to the members' servers instead of their
        engines: the host-based lock."""
        from .lock import Lock

        out = ctypes.c_void_p()
        if server is None:
            errors.check(_lib.lib().outboard_lock_create(self._p(), uint(home, 32, "home"), ctypes.byref(out)))
        else:
            errors.check(_lib.lib().outboard_lock_create_served(self._p(), uint(home, 32, "home"), server._p(), ctypes.byref(out)))
        return Lock(made(out), self.world)

    def atomic_server(self, wait: "ServerWait" = ServerWait.BLOCK, spins: int = 0) -> "AtomicServer":
        """Starts an atomic server at every member (collective; every member
        passes the same ``wait``): a thread of the library serving
        host-based atomics on a port of its own, waiting for each request
        as ``wait`` says (``spins`` polls before blocking under
        ``ServerWait.SPIN_THEN_BLOCK``). Needs an engine per process
        (``StateError`` on a node engine)."""
        from .lock import AtomicServer

        out = ctypes.c_void_p()
        errors.check(_lib.lib().outboard_atomic_server_create(self._p(), int(wait), uint(spins, 32, "spins"), ctypes.byref(out)))
        return AtomicServer(made(out), self.world, self._size)

    def __repr__(self) -> str:
        if self.closed:
            return "<outboard.Group closed>"
        return f"<outboard.Group rank {self._rank} of {self._size}, {self._mode.name.lower()}>"
