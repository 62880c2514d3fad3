"""The Python bindings under `outboard run -n 2` and `-n 4`, run by
crates/cli/tests/python.rs: every result is checked against what it must
be; the first failure exits non-zero naming the line."""

import array
import inspect
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import outboard  # noqa: E402
from outboard import AtomicOp, DType, Mode, Op, ServerWait  # noqa: E402

checks = 0
rank = -1


def fail(what):
    line = inspect.stack()[2].lineno
    print(f"rank {rank}: check failed at ranks.py:{line}: {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def check(cond, what=""):
    global checks
    checks += 1
    if not cond:
        fail(what)


def raises(exc, fn, *args, contains=None, **kwargs):
    """``fn(*args)`` raises exactly ``exc`` (not a sibling class), whose
    message holds ``contains``; the exception."""
    global checks
    checks += 1
    try:
        fn(*args, **kwargs)
    except outboard.OutboardError as e:
        if type(e) is not exc:
            fail(f"{fn.__name__} raised {type(e).__name__} ({e}), not {exc.__name__}")
        if contains is not None and contains not in str(e):
            fail(f"{fn.__name__}: {contains!r} not in {str(e)!r}")
        return e
    except Exception as e:
        if not isinstance(e, exc):
            fail(f"{fn.__name__} raised {type(e).__name__} ({e}), not {exc.__name__}")
        return e
    fail(f"{fn.__name__} did not raise {exc.__name__}")


def collectives(g, label):
    gr, gs = g.rank, g.size
    g.barrier()
    # Broadcast from every root, at lengths across the piece size.
    for root in range(gs):
        for n in (0, 1, 1000, 5000, 100000):
            b = bytearray((i * 7 + root) & 0xFF for i in range(n)) if gr == root else bytearray(b"\xee" * n)
            check(g.bcast(b, root) is b)
            check(b == bytearray((i * 7 + root) & 0xFF for i in range(n)), f"bcast {n} from {root}")
        got = g.bcast_object({"root": root, "list": [1, 2.5, "x"]} if gr == root else None, root)
        check(got == {"root": root, "list": [1, 2.5, "x"]}, f"bcast_object from {root}: {got}")
    ranksum = gs * (gs + 1) // 2
    # Every datatype with the ops it takes, in every shape.
    for n in (1, 3, 300, 5000):
        a = [(gr + 1) * (i + 1) * (-1 if i % 2 else 1) for i in range(n)]
        check(g.allreduce(a, Op.SUM, DType.INT32) == [ranksum * (i + 1) * (-1 if i % 2 else 1) for i in range(n)], "i32 sum")
        b = array.array("q", [1 << ((gr + i) % 60) for i in range(n)])
        want = [0] * n
        for r in range(gs):
            for i in range(n):
                want[i] |= 1 << ((r + i) % 60)
        rb = g.allreduce(b, "bor")
        check(isinstance(rb, array.array) and rb.typecode == "q" and rb.tolist() == want, "i64 bor")
        c = [(gr << 40) + i for i in range(n)]
        check(g.allreduce(c, Op.MAX, "u64") == [((gs - 1) << 40) + i for i in range(n)], "u64 max")
        d = array.array("d", [gr * 0.5 + i for i in range(n)])
        check(g.allreduce(d, Op.MIN).tolist() == [float(i) for i in range(n)], "f64 min")
        # In place, a float buffer.
        f = array.array("f", [(gr + 1) * 2.0] * n)
        check(g.allreduce_into(f) is f and f.tolist() == [2.0 * ranksum] * n, "f32 sum in place")
        # Into a separate buffer of raw bytes, with a dtype.
        out = bytearray(8 * n)
        g.allreduce_into(out, array.array("Q", c), Op.MIN, DType.UINT64)
        check(list(struct.unpack(f"<{n}Q", out)) == list(range(n)), "u64 min into bytes")
        for root in range(gs):
            res = g.reduce(b, Op.BAND, root)
            if gr == root:
                want = [-1] * n
                for r in range(gs):
                    for i in range(n):
                        want[i] &= 1 << ((r + i) % 60)
                check(res.tolist() == want, f"i64 band at {root}")
            else:
                check(res is None, "reduce result away from the root")
    # Scalars: int defaults to INT64, float to DOUBLE; wrapping, products.
    check(g.allreduce(gr + 1) == ranksum and isinstance(g.allreduce(1), int))
    check(g.allreduce(0.5) == 0.5 * gs and isinstance(g.allreduce(0.5), float))
    check(g.allreduce(1 << 62, dtype="i64") == ((gs << 62) + (1 << 63)) % (1 << 64) - (1 << 63), "i64 sum wraps")
    pwant, xwant, dwant = 1, 0, 1.0
    for r in range(gs):
        pwant *= r % 3 + 1
        xwant ^= (0x9E3779B97F4A7C15 * (r + 1)) & ((1 << 64) - 1)
        dwant *= -2.0 if r % 2 else 0.5
    check(g.allreduce(gr % 3 + 1, Op.PROD) == pwant)
    check(g.allreduce((0x9E3779B97F4A7C15 * (gr + 1)) & ((1 << 64) - 1), Op.BXOR, DType.UINT64) == xwant)
    check(g.allreduce(-2.0 if gr % 2 else 0.5, Op.PROD) == dwant)
    lv = [0 if gr == 1 else 5, gr, -3 if gr % 2 else 0, 0]
    for op, fold in ((Op.LAND, lambda x, y: x and y), (Op.LOR, lambda x, y: x or y), (Op.LXOR, lambda x, y: x != y)):
        want = []
        for e in range(4):
            # A lone member's value comes back as it is, unnormalised (as in MPI).
            vals = [[0 if r == 1 else 5, r, -3 if r % 2 else 0, 0][e] for r in range(gs)]
            acc = vals[0]
            for v in vals[1:]:
                acc = int(fold(acc != 0, v != 0))
            want.append(acc)
        for root in range(gs):
            res = g.reduce(lv, op, root, DType.INT32)
            check(res == (want if gr == root else None), f"{op.name} at {root}: {res} != {want}")
    # Refused by the library: a bitwise op on floats, a logical one too.
    raises(outboard.ArgumentError, g.allreduce, 1.0, Op.BAND)
    raises(outboard.ArgumentError, g.allreduce, 1.0, Op.LAND)
    # Refused here: unknown op, unknown dtype, a value that does not fit.
    raises(outboard.ArgumentError, g.allreduce, 1, "median")
    raises(outboard.ArgumentError, g.allreduce, 1, Op.SUM, "int8")
    raises(outboard.ArgumentError, g.allreduce, 1 << 40, Op.SUM, DType.INT32)
    # Non-blocking: an allreduce and a barrier under way at once, finished
    # by test then wait.
    r1 = g.iallreduce(gr + 1)
    r2 = g.ibarrier()
    while not r1.test():
        pass
    check(r1.done and r1.wait() == ranksum and r1.wait() == ranksum)
    check(r2.wait() is None and r2.done)
    r3 = g.ireduce([gr, 1], Op.SUM, gs - 1)
    buf = bytearray(16) if gr != 0 else bytearray(struct.pack("<qq", 4, 2))
    r4 = g.ibcast(buf, 0)
    check(r3.wait() == ([ranksum - gs, gs] if gr == gs - 1 else None))
    check(r4.wait() is buf and struct.unpack("<qq", buf) == (4, 2))
    print(f"{label}: collectives of {gs} ranks ok", flush=True)


def messages(w):
    size = w.size
    nxt, prev = (rank + 1) % size, (rank + size - 1) % size
    # A ring: the receive is posted before the send.
    rq = w.irecv(64, prev, 42)
    w.send(nxt, f"from {rank}".encode(), 42)
    data, st = rq.wait()
    check(data == f"from {prev}".encode(), f"ring got {data}")
    check(st == outboard.Status(prev, 42, len(data)) and rq.status == st)
    # Order between a pair: rank 0 sends 30 messages of one tag to every
    # other rank, blocking and not mixed; they arrive in sending order,
    # received blocking and by receives posted in advance.
    n = 30
    if rank == 0:
        for dest in range(1, size):
            reqs = []
            for i in range(n):
                payload = struct.pack("<II", dest, i) + bytes(i)
                if i % 2:
                    reqs.append(w.isend(dest, payload, 5))
                else:
                    w.send(dest, memoryview(payload), 5)
            check(outboard.wait_all(reqs) == [None] * (n // 2))
    else:
        posted = [w.irecv(64, 0, 5) for _ in range(n // 2)]
        got = [p.wait()[0] for p in posted] + [w.recv(64, 0, 5)[0] for _ in range(n - n // 2)]
        check(got == [struct.pack("<II", rank, i) + bytes(i) for i in range(n)], "messages out of order")
    # Any source, a masked tag: rank 0 hears from everyone else.
    if rank == 0:
        seen = set()
        for _ in range(1, size):
            v = array.array("I", [0])
            st = w.recv_into(v, outboard.ANY_SOURCE, 0x700, 0xF00)
            check(1 <= st.source < size and v[0] == st.source * 10 and st.tag == 0x700 + st.source and st.length == 4)
            seen.add(st.source)
        check(seen == set(range(1, size)))
    else:
        w.send(0, array.array("I", [rank * 10]), 0x700 + rank)
    # A message longer than the buffer: TruncatedError, its start kept.
    if rank == 1:
        w.send(0, b"x" * 100, 7)
        w.send(0, b"y" * 50, 8)
    elif rank == 0:
        small = bytearray(10)
        e = raises(outboard.TruncatedError, w.recv_into, small, 1, 7)
        check(e.status == outboard.Status(1, 7, 100) and small == bytearray(b"x" * 10), f"{e.status} {small}")
        check(e.code == 4 and "message truncated" in str(e))
        r = w.irecv(20, 1, 8)
        e = raises(outboard.TruncatedError, r.wait)
        check(e.status.length == 50 and r.done)
        raises(outboard.TruncatedError, r.wait)  # raised again
    # Bad arguments, refused by the library: a rank outside the world.
    raises(outboard.ArgumentError, w.send, size, b"x", 1, contains="outside")
    raises(outboard.ArgumentError, w.recv, 1, -5, 1)
    raises(outboard.ArgumentError, w.isend, size + 3, b"")
    # ... and here, before ctypes would wrap them: negative, too wide.
    raises(outboard.ArgumentError, w.send, -1, b"x")
    raises(outboard.ArgumentError, w.send, 0, b"x", 1 << 64)
    raises(TypeError, w.send, 0, "a str is not bytes")
    raises(TypeError, w.recv_into, b"read-only", 0)
    w.barrier()
    print("messages ok", flush=True)


def rdma_and_atomics(w):
    size = w.size
    nxt, prev = (rank + 1) % size, (rank + size - 1) % size
    mine, scratch = w.alloc(4096), w.alloc(4096)
    keys = w.allreduce([mine.key if r == rank else 0 for r in range(size)], Op.BOR, DType.UINT64)
    check(keys[rank] == mine.key == mine.key and len(mine) == 4096)
    pat = bytes((rank * 31 + i) & 0xFF for i in range(1000))
    scratch.write(pat)
    w.rdma_write(nxt, keys[nxt], 100, scratch, 0, len(pat))
    w.barrier()
    check(mine.read(1000, 100) == bytes((prev * 31 + i) & 0xFF for i in range(1000)), "rdma write landed")
    r = w.irdma_read(nxt, keys[nxt], 100, scratch, 2000, 1000)
    check(r.wait() is None and scratch.read(1000, 2000) == pat, "rdma read back")
    raises(outboard.RdmaError, w.rdma_write, nxt, keys[nxt] ^ 0x5555, 0, scratch, 0, 8)
    raises(outboard.RdmaError, w.rdma_read, nxt, keys[nxt], 4090, scratch, 0, 100)
    raises(outboard.ArgumentError, scratch.write, b"x" * 100, 4090)
    w.barrier()
    # Fetch-add on rank 0's counter (word 0): remote from the others, local
    # at rank 0, every third non-blocking. Old values distinct, count exact.
    adds = 50
    olds = []
    for i in range(adds):
        if rank == 0:
            olds.append(mine.fetch_add(0, 1))
        elif i % 3 == 0:
            olds.append(w.iatomic(0, keys[0], 0, AtomicOp.FETCH_ADD, 1).wait())
        else:
            olds.append(w.fetch_add(0, keys[0], 0, 1))
    check(olds == sorted(olds) and len(set(olds)) == adds)
    total = size * adds
    seen = [0] * ((total + 63) // 64)
    for o in olds:
        seen[o // 64] |= 1 << (o % 64)
    seen = w.allreduce(seen, Op.BOR, DType.UINT64)
    check(all(seen[b // 64] >> (b % 64) & 1 for b in range(total)), "every old value seen once")
    w.barrier()
    check(w.fetch_add(0, keys[0], 0, 0) == total)
    # A decrement wraps: -1 is 2^64-1 added.
    w.barrier()
    if rank == 0:
        check(mine.fetch_add(0, -total) == total and mine.read(8, 0) == bytes(8))
    w.barrier()
    # Compare-and-swap from 0 at rank 1's word 16: exactly one winner.
    t = 1
    was = mine.compare_swap(16, 0, rank + 1) if rank == t else w.compare_swap(t, keys[t], 16, 0, rank + 1)
    check(w.allreduce(int(was == 0)) == 1 and (was == 0 or 1 <= was <= size))
    winner = w.allreduce(rank + 1 if was == 0 else 0)
    w.barrier()
    check(w.compare_swap(t, keys[t], 16, 12345, 99) == winner, "a missed compare-and-swap reads")
    # Swap at rank 0's word 24 (32-bit): the old values and the last one
    # are 0 and every rank's mark.
    old = w.swap(0, keys[0], 24, rank + 1, bits=32)
    w.barrier()
    last = w.swap(0, keys[0], 24, 0, bits=32) if rank == 0 else 0
    marks = w.allreduce([1 << old, 1 << last if rank == 0 else 0], Op.BOR)
    check(marks[0] | marks[1] == sum(1 << v for v in range(size + 1)), f"swap marks {marks}")
    # Refused: misaligned word, width 16, a 32-bit operand too wide.
    raises(outboard.RdmaError, w.fetch_add, nxt, keys[nxt], 3, 1)
    raises(outboard.ArgumentError, w.fetch_add, nxt, keys[nxt], 0, 1, 16)
    raises(outboard.ArgumentError, w.swap, nxt, keys[nxt], 0, 1 << 32, 32)
    w.barrier()
    # The lock: increments of rank 0's word 32 by plain RDMA read-modify-
    # write inside it lose nothing.
    incs = 20
    lock = w.group.lock(0)
    local = w.alloc(8)
    for _ in range(incs):
        with lock:
            w.rdma_read(0, keys[0], 32, local)
            v = struct.unpack("<Q", local.read())[0]
            local.write(struct.pack("<Q", v + 1))
            w.rdma_write(0, keys[0], 32, local)
    w.barrier()
    if rank == 0:
        check(struct.unpack("<Q", mine.read(8, 32))[0] == size * incs, "locked increments lost")
    # Without waiting: taken when free, refused while another rank holds it.
    w.barrier()
    if rank == 0:
        check(lock.acquire(blocking=False), "a free lock was not taken")
    w.barrier()
    if rank == 1:
        check(not lock.acquire(blocking=False), "a held lock was taken")
    w.barrier()
    if rank == 0:
        lock.release()
    w.barrier()
    lock.close()
    lock.close()  # a second close does nothing
    raises(outboard.StateError, lock.acquire)
    for m in (local, scratch, mine):
        m.close()
    raises(outboard.StateError, mine.read, 1)
    print("rdma and atomics ok", flush=True)


def atomic_modes(w):
    """Direct-form atomics exact; host-based atomics through every rank's
    atomic server in each wait (sum exact, the server's count); the lock
    over the servers; and a lock wait in one thread while another thread
    of the process joins the barrier that frees the lock."""
    size = w.size
    mine = w.alloc(64)
    keys = w.allreduce([mine.key if r == rank else 0 for r in range(size)], Op.BOR, DType.UINT64)
    adds = 20
    olds = [w.iatomic(0, keys[0], 0, AtomicOp.FETCH_ADD, 1, direct=True).wait() if i % 2 else w.atomic(0, keys[0], 0, AtomicOp.FETCH_ADD, 1, direct=True) for i in range(adds)]
    check(len(set(olds)) == adds and max(olds) < size * adds)
    raises(outboard.RdmaError, w.atomic, 0, keys[0], 3, AtomicOp.SWAP, 1, direct=True)
    w.barrier()
    check(w.fetch_add(0, keys[0], 0, 0) == size * adds, "direct adds lost")
    w.barrier()  # every rank has read rank 0's word
    if w.group.nodes < size:
        # Ranks share an engine: no engine of their own to serve on.
        raises(outboard.StateError, w.group.atomic_server, contains="engine of this process's own")
        mine.close()
        print("atomic modes ok (no servers on node engines)", flush=True)
        return
    raises(outboard.ArgumentError, w.group.atomic_server, 9, contains="OUTBOARD_SERVER_BLOCK")
    for wait in ServerWait:
        with w.group.atomic_server(wait, 100) as srv:
            srv.expose(mine)
            mine.write(bytes(8), 8)
            w.barrier()
            for _ in range(adds):
                srv.fetch_add(0, keys[0], 8, 2)
            raises(outboard.RdmaError, srv.swap, 0, keys[0] ^ 1, 8, 1)
            w.barrier()
            if rank == 0:
                check(struct.unpack("<Q", mine.read(8, 8))[0] == 2 * size * adds, f"{wait.name}: served adds lost")
                check(srv.served == size * (adds + 1), f"{wait.name}: served {srv.served}")
            else:
                check(srv.served == 0)
            w.barrier()
    # A lock wait in one thread leaves the process's other threads their
    # calls: rank 1 holds the lock until a barrier that needs rank 0's
    # second thread, while rank 0's first thread waits for the lock.
    srv = w.group.atomic_server(ServerWait.BLOCK)
    for lock in (w.group.lock(size - 1), w.group.lock(0, server=srv)):
        if rank == 1:
            lock.acquire()
        w.barrier()
        if rank == 0:
            t = threading.Thread(target=lambda: (time.sleep(0.05), w.barrier()))
            t.start()
            with lock:
                pass
            t.join()
        else:
            w.barrier()
            if rank == 1:
                lock.release()
        w.barrier()
        lock.close()
    if rank == 0:
        check(srv.served > 0, "the served lock went through the servers")
    w.barrier()
    srv.close()
    mine.close()
    print("atomic modes ok", flush=True)


def choices(w):
    """Each choice a group offers gives right results and shows in the
    group's record of what its collectives ran as."""
    from outboard import BarrierAlgorithm as BA, BarrierProtocol as BP, BcastMode as BM, TreeShape as TS

    with w.new_group() as g:
        check(g.describe() == "mode offloaded; barrier dissemination over point-to-point; broadcast offloaded on a binomial tree; reduce on a binomial tree; allreduce by length (recursive doubling, block trees (binomial tree) for long data)", g.describe())
        data = bytes((i * 5 + 1) & 0xFF for i in range(5000))

        def bcast_as(what):
            got = g.bcast(bytearray(data) if rank == 0 else bytearray(len(data)), 0)
            check(bytes(got) == data, what)
            check(g.taken.get(what, 0) > 0, f"{what!r} not in {g.taken}")

        def barrier_as(what):
            g.barrier()
            check(g.taken.get(what, 0) > 0, f"{what!r} not in {g.taken}")

        g.set_barrier(BA.PAIRWISE_EXCHANGE)
        barrier_as("barrier offloaded pairwise exchange")
        g.set_barrier(BA.GATHER_BCAST, 2)
        barrier_as("barrier offloaded gather-broadcast on a 2-ary tree")
        g.set_barrier(BA.DISSEMINATION)
        g.set_barrier_protocol(BP.NIC_COLLECTIVE)
        barrier_as("barrier offloaded dissemination over the NIC collective protocol")
        g.set_barrier_protocol(BP.POINT_TO_POINT)
        raises(outboard.ArgumentError, g.set_barrier, 5, contains="OUTBOARD_BARRIER_GATHER_BCAST")
        g.set_bcast_mode(BM.HOST_BASED)
        bcast_as("broadcast host-based binomial tree")
        g.set_bcast_mode(BM.NIC_ASSISTED)
        bcast_as("broadcast nic-assisted binomial tree")
        g.set_bcast_tree(TS.KARY, 3)
        bcast_as("broadcast nic-assisted 3-ary tree")
        g.set_bcast_mode(BM.OFFLOADED)
        g.set_bcast_tree(TS.POSTAL, 1.5)
        bcast_as("broadcast offloaded postal tree (lambda 1.5)")
        g.set_bcast_tree(TS.CHAIN)
        bcast_as("broadcast offloaded chain")
        raises(outboard.ArgumentError, g.set_bcast_tree, TS.POSTAL, 0.5, contains="lambda")
        raises(outboard.ArgumentError, g.set_bcast_mode, 9, contains="OUTBOARD_BCAST_NIC_ASSISTED")
        g.set_reduce_degree(3)
        check(g.allreduce(rank + 1) == w.size * (w.size + 1) // 2)
        # Short data by recursive doubling (the default chooses by
        # length); the degree reaches the block trees of long data.
        check(g.taken.get("allreduce offloaded recursive doubling", 0) > 0, f"{g.taken}")
        check("reduce on a 3-ary tree" in g.describe() and "block trees (3-ary tree) for long data" in g.describe(), g.describe())
    print("choices ok", flush=True)


def bypass(w):
    """Application bypass for a group's broadcasts and reduces: right
    values at every root, past the eager limit too (which runs in the
    group's mode), and the group's record counts the bypass calls."""
    from outboard import BcastMode as BM, ReduceMode as RM

    with w.new_group() as g:
        raises(outboard.ArgumentError, g.set_reduce_mode, 5, contains="OUTBOARD_REDUCE_BYPASS")
        g.set_bcast_mode(BM.BYPASS)
        g.set_reduce_mode(RM.BYPASS)
        check("broadcast by application bypass up to 16384 bytes" in g.describe(), g.describe())
        short = 0
        for i, n in enumerate([0, 1, 8, 4000, 16384, 20000]):
            root = i % w.size
            data = bytes((k * 3 + i) & 0xFF for k in range(n))
            got = g.bcast(bytearray(data) if rank == root else bytearray(n), root)
            check(bytes(got) == data, f"bypass broadcast of {n} bytes from {root}")
            total = g.reduce([rank * 10 + k for k in range(max(n // 8, 1))], root=root)
            if rank == root:
                check(list(total) == [sum(r * 10 + k for r in range(w.size)) for k in range(max(n // 8, 1))], f"bypass reduce {i}")
            short += n <= 16384
        check(g.taken.get("broadcast application bypass", 0) == short, f"{g.taken}")
        check(g.taken.get("reduce application bypass", 0) == short, f"{g.taken}")
        g.barrier()
    print("bypass ok", flush=True)


# Element-wise maximum of absolute values of i64s: not a built-in operator.
ABSMAX = """
func abs(v)
    if v < 0 then return -v; end if;
    return v;
end func;
func main()
    var off = 0;
    if packet_length() != acc_length() or packet_length() % 8 != 0 then
        return NICVM_RESULT_FAILURE;
    end if;
    while off < packet_length() do
        if abs(packet_get_i64(off)) > abs(acc_get_i64(off)) then
            acc_set_i64(off, abs(packet_get_i64(off)));
        else
            acc_set_i64(off, abs(acc_get_i64(off)));
        end if;
        off = off + 8;
    end while;
    return NICVM_RESULT_PACKET_CONSUMED;
end func;
"""

# Never finishes a combine step: out of fuel every time.
SPIN = "func main()\n    while 1 do end while;\n    return 0;\nend func;\n"


def modules(w):
    """A module as a reduction operator: results equal to the reference
    computed here, in both modes and split-phase, from source and from
    bytecode; a failing module raises ModuleError naming it at every rank,
    and the next collective runs."""
    g = w.group
    mine = [((i * 7919 + rank * 104729) % 1000003 - 500000) * (-1 if (i + rank) % 3 == 0 else 1) for i in range(29)]
    every = [[((i * 7919 + r * 104729) % 1000003 - 500000) * (-1 if (i + r) % 3 == 0 else 1) for i in range(29)] for r in range(w.size)]
    want = [max(abs(v[i]) for v in every) for i in range(29)]
    with outboard.Module("absmax", ABSMAX) as m:
        m.load(g)
        check(g.allreduce(mine, m) == want, "allreduce with the module")
        check(g.allreduce(mine, m.op) == want, "allreduce with its operator code")
        check(g.iallreduce(mine, m).wait() == want, "iallreduce with the module")
        got = g.reduce(mine, m, root=w.size - 1)
        check(got == (want if rank == w.size - 1 else None), "reduce with the module")
        buf = array.array("q", mine)
        check(g.allreduce_into(buf, op=m).tolist() == want, "allreduce_into with the module")
        with w.new_group(Mode.HOST_BASED) as hb:
            check(hb.allreduce(mine, m) == want, "a module operator in a host-based group")
        acc = array.array("q", mine)
        for v in every:
            acc = array.array("q", m.combine(acc, array.array("q", v)))
        check(acc.tolist() == want, "the module run here")
        info = [i for i in w.modules() if i.name == "absmax"]
        check(len(info) == 1 and info[0].invocations > 0 and info[0].out_of_fuel == 0)
        with outboard.Module("absmax_copy", bytecode=m.bytecode) as copy:
            copy.load(g)
            check(g.allreduce(mine, copy) == want, "the module from its bytecode")
            g.barrier()
            copy.purge()
    with outboard.Module("spin", SPIN) as spin:
        spin.load(g)
        e = raises(outboard.ModuleError, g.allreduce, mine, spin, contains="module 'spin'")
        check(e.module == "spin", f"the exception names the module: {e.module!r}")
        print(f"allreduce with spin failed: {e}", flush=True)
        g.barrier()
    check(g.allreduce(rank, Op.SUM) == w.size * (w.size - 1) // 2, "a collective after the failure")
    print("modules ok", flush=True)


def movement(w):
    """Allgather, gather, scatter, alltoall, reduce-scatter and the scans,
    offloaded and host-based: every member's blocks where they belong, and
    prefixes folded left to right."""
    n = w.size
    for mode in (Mode.OFFLOADED, Mode.HOST_BASED):
        with w.new_group(mode) as g:
            for length in (0, 1, 13, 9000):
                mine = bytes((rank * 31 + k) & 0xFF for k in range(length))
                every = [bytes((r * 31 + k) & 0xFF for k in range(length)) for r in range(n)]
                check(g.allgather(mine) == every, f"allgather of {length} bytes ({mode})")
                check(g.iallgather(mine).wait() == every, f"iallgather of {length} bytes ({mode})")
                for root in range(n):
                    got = g.gather(mine, root)
                    check(got == (every if rank == root else None), f"gather of {length} bytes to {root} ({mode})")
                    got = g.scatter(every if rank == root else None, root)
                    check(got == every[rank], f"scatter of {length} bytes from {root} ({mode})")
                pairs = [bytes([rank, j]) * length for j in range(n)]
                check(g.alltoall(pairs) == [bytes([r, rank]) * length for r in range(n)], f"alltoall of {length} ({mode})")
            values = [rank * 100 + k for k in range(3 * n)]
            check(g.reduce_scatter(values) == [sum(r * 100 + k for r in range(n)) for k in range(3 * rank, 3 * rank + 3)], f"reduce_scatter ({mode})")
            check(g.scan([rank + 1, 2.5]) == [sum(range(1, rank + 2)), 2.5 * (rank + 1)], f"scan ({mode})")
            ex = g.exscan([rank + 1], Op.MAX)
            check(ex == (None if rank == 0 else [rank]), f"exscan ({mode}): {ex}")
            raises(outboard.ArgumentError, g.reduce_scatter, [1] * (n + 1), contains="equal blocks")
            raises(outboard.ArgumentError, g.alltoall, [b"x"] * (n + 1), contains="one per member")
            # A root that refuses its blocks: every member raises.
            bad = [b"a", b"bb"] + [b"c"] * (n - 2) if rank == 0 else None
            raises(outboard.ArgumentError, g.scatter, bad, 0, contains="blocks")
            g.barrier()
    print("movement ok", flush=True)


def main():
    global rank
    with outboard.World() as w:
        rank = w.rank
        check(rank == int(os.environ["OUTBOARD_RANK"]) and w.size == int(os.environ["OUTBOARD_SIZE"]) and w.size >= 2)
        # One node engine per machine, or one per rank: the world spans 1..size.
        check(1 <= w.group.nodes <= w.size)
        collectives(w.group, "world offloaded")
        with w.new_group(Mode.HOST_BASED) as hb:
            check(hb.mode == Mode.HOST_BASED)
            collectives(hb, "world host-based")
            raises(outboard.ArgumentError, setattr, hb, "mode", 7)
        raises(outboard.StateError, hb.barrier)
        # Split by parity, reversed order; rank 1 joins none.
        half = w.group.split(None if rank == 1 else rank % 2, w.size - rank)
        if rank == 1:
            check(half is None)
        else:
            members = [r for r in range(w.size) if r != 1 and r % 2 == rank % 2]
            check(half.size == len(members) and half.rank == members[::-1].index(rank))
            check(half.allreduce(rank, Op.MAX) == max(members))
            collectives(half, "split")
            half.close()
        # A group made from a member list: every rank, reversed.
        with w.create_group(5, list(range(w.size))[::-1]) as rev:
            check(rev.rank == w.size - 1 - rank)
            collectives(rev, "created")
        raises(outboard.ArgumentError, w.create_group, outboard.GROUP_ID_LIMIT, [rank])
        raises(outboard.ArgumentError, w.create_group, 6, [(rank + 1) % w.size], contains="not a member")
        messages(w)
        rdma_and_atomics(w)
        atomic_modes(w)
        choices(w)
        bypass(w)
        movement(w)
        modules(w)
        left_open = w.new_group()  # freed by the world's close
    check(left_open.closed and w.closed and w.group.closed)
    raises(outboard.StateError, getattr, w, "rank")
    raises(outboard.StateError, w.send, 0, b"x")
    w.close()  # a second close does nothing
    print(f"rank {rank}: python: all {checks} checks passed", flush=True)


if __name__ == "__main__":
    main()
