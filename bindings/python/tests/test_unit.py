"""Single-process tests of the Python bindings: the pure-Python parts
(argument checks, dtype and op mapping, buffers, error classes, finding
the library) and, when the library loads, a world of one rank. Run by
crates/cli/tests/python.rs: python3 -m unittest discover -s tests."""

import array
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import outboard  # noqa: E402
from outboard import _buffers, _lib, errors, reduction  # noqa: E402
from outboard.types import ANY_SOURCE, DType, Op, operand_bits, source, uint, word  # noqa: E402


def library_loads():
    try:
        _lib.lib()
        return True
    except _lib.LibraryNotFoundError:
        return False


class DTypeMapping(unittest.TestCase):
    def test_names_and_aliases(self):
        for name, d in [("i32", DType.INT32), ("INT64", DType.INT64), ("u64", DType.UINT64), ("float32", DType.FLOAT), ("f64", DType.DOUBLE), ("double", DType.DOUBLE)]:
            self.assertIs(DType.of(name), d)
        self.assertIs(DType.of(2), DType.INT64)
        self.assertIs(DType.of(DType.FLOAT), DType.FLOAT)
        self.assertRaises(outboard.ArgumentError, DType.of, "int8")
        self.assertRaises(outboard.ArgumentError, DType.of, 9)
        self.assertRaises(TypeError, DType.of, 1.5)
        self.assertRaises(TypeError, DType.of, True)

    def test_c_values_match_the_header(self):
        # outboard.h: OUTBOARD_INT32 1 ... OUTBOARD_DOUBLE 5, SUM 1 ... LXOR 10.
        self.assertEqual([int(d) for d in DType], [1, 2, 3, 4, 5])
        self.assertEqual([(o.name, int(o)) for o in Op][:3], [("SUM", 1), ("MIN", 2), ("MAX", 3)])
        self.assertEqual(int(Op.LXOR), 10)
        self.assertEqual((int(outboard.Mode.OFFLOADED), int(outboard.Mode.HOST_BASED)), (0, 1))
        self.assertEqual([int(a) for a in outboard.AtomicOp], [1, 2, 3])

    def test_element_sizes_and_typecodes(self):
        self.assertEqual([d.itemsize for d in DType], [4, 8, 8, 4, 8])
        for d in DType:
            self.assertEqual(array.array(d.typecode).itemsize, d.itemsize)
        self.assertEqual([d.is_float for d in DType], [False, False, False, True, True])

    def test_buffer_formats(self):
        for code, d in [("i", DType.INT32), ("q", DType.INT64), ("Q", DType.UINT64), ("f", DType.FLOAT), ("d", DType.DOUBLE)]:
            mv = memoryview(array.array(code, [0]))
            self.assertIs(DType.from_format(mv.format, mv.itemsize), d)
        self.assertIs(DType.from_format("l", 8), DType.INT64)
        self.assertIs(DType.from_format("<q" if sys.byteorder == "little" else ">q", 8), DType.INT64)
        self.assertIs(DType.from_format("=d", 8), DType.DOUBLE)
        for fmt, size in [("B", 1), ("I", 4), ("h", 2), ("e", 2), (">q" if sys.byteorder == "little" else "<q", 8), ("2i", 8)]:
            self.assertRaises(outboard.ArgumentError, DType.from_format, fmt, size)


class OpMapping(unittest.TestCase):
    def test_names(self):
        self.assertIs(Op.of("sum"), Op.SUM)
        self.assertIs(Op.of("BXor"), Op.BXOR)
        self.assertIs(Op.of(9), Op.LOR)
        self.assertRaises(outboard.ArgumentError, Op.of, "median")
        self.assertRaises(outboard.ArgumentError, Op.of, 0)
        self.assertRaises(TypeError, Op.of, None)


class ArgumentChecks(unittest.TestCase):
    def test_unsigned_refuses_what_ctypes_would_wrap(self):
        self.assertEqual(uint(0, 32, "rank"), 0)
        self.assertEqual(uint((1 << 32) - 1, 32, "rank"), (1 << 32) - 1)
        with self.assertRaises(outboard.ArgumentError) as cm:
            uint(-1, 32, "dest")
        self.assertIn("dest -1", str(cm.exception))
        self.assertRaises(outboard.ArgumentError, uint, 1 << 32, 32, "rank")
        self.assertRaises(outboard.ArgumentError, uint, 1 << 64, 64, "tag")
        self.assertRaises(TypeError, uint, 1.0, 32, "rank")
        self.assertRaises(TypeError, uint, True, 32, "rank")
        self.assertRaises(TypeError, uint, "1", 32, "rank")

    def test_atomic_operands_wrap_negatives_and_refuse_wide_values(self):
        self.assertEqual(word(-1, 64, "add"), (1 << 64) - 1)
        self.assertEqual(word(-1, 32, "add"), (1 << 32) - 1)
        self.assertEqual(word(-(1 << 31), 32, "add"), 1 << 31)
        self.assertRaises(outboard.ArgumentError, word, -(1 << 31) - 1, 32, "add")
        self.assertRaises(outboard.ArgumentError, word, 1 << 32, 32, "value")
        self.assertRaises(outboard.ArgumentError, word, 1 << 64, 64, "value")
        self.assertEqual([operand_bits(b) for b in (32, 64, 16, 0)], [32, 64, 64, 64])

    def test_sources(self):
        self.assertEqual(source(ANY_SOURCE), -1)
        self.assertEqual(source(3), 3)
        self.assertEqual(source(-5), -5)  # the library refuses it, with its message
        self.assertRaises(outboard.ArgumentError, source, 1 << 31)
        self.assertRaises(TypeError, source, "0")


class Buffers(unittest.TestCase):
    def test_readable(self):
        b = b"abc"
        self.assertIs(_buffers.readable(b, "data")[0], b)
        p, n = _buffers.readable(bytearray(b"abcd"), "data")
        self.assertEqual((bytes(p), n), (b"abcd", 4))
        p, n = _buffers.readable(memoryview(b"abcdef")[::2], "data")  # read-only, strided: copied
        self.assertEqual((p, n), (b"ace", 3))
        self.assertEqual(_buffers.readable(array.array("q", [1, 2]), "data")[1], 16)
        self.assertRaises(TypeError, _buffers.readable, "text", "data")
        self.assertRaises(TypeError, _buffers.readable, 5, "data")

    def test_writable(self):
        ba = bytearray(8)
        p, n = _buffers.writable(ba, "buf")
        p[0:2] = b"hi"
        self.assertEqual((ba[:2], n), (bytearray(b"hi"), 8))
        with self.assertRaises(BufferError):  # pinned while C may write it
            ba.extend(b"x")
        del p
        ba.extend(b"x")
        self.assertRaises(TypeError, _buffers.writable, b"read-only", "buf")
        self.assertRaises(TypeError, _buffers.writable, memoryview(bytearray(8))[::2], "buf")
        self.assertEqual(_buffers.writable(bytearray(), "buf")[1], 0)


class Reductions(unittest.TestCase):
    def test_scalars(self):
        data, n, d, shape = reduction.pack(7, None)
        self.assertEqual((n, d, shape(data)), (1, DType.INT64, 7))
        data, n, d, shape = reduction.pack(2.5, None)
        self.assertEqual((n, d, shape(data)), (1, DType.DOUBLE, 2.5))
        data, n, d, shape = reduction.pack(-3, "i32")
        self.assertEqual((len(data), d, shape(data)), (4, DType.INT32, -3))
        self.assertRaises(outboard.ArgumentError, reduction.pack, 1 << 31, DType.INT32)
        self.assertRaises(outboard.ArgumentError, reduction.pack, -1, DType.UINT64)

    def test_sequences(self):
        data, n, d, shape = reduction.pack([1, 2, 3], None)
        self.assertEqual((n, d, shape(data)), (3, DType.INT64, [1, 2, 3]))
        data, n, d, shape = reduction.pack((1, 2.5), None)
        self.assertEqual((n, d, shape(data)), (2, DType.DOUBLE, [1.0, 2.5]))
        data, n, d, shape = reduction.pack(range(4), "u64")
        self.assertEqual((n, d, shape(data)), (4, DType.UINT64, [0, 1, 2, 3]))
        self.assertEqual(reduction.pack([], None)[1], 0)
        self.assertRaises(TypeError, reduction.pack, ["a"], None)
        self.assertRaises(TypeError, reduction.pack, None, None)

    def test_buffers(self):
        data, n, d, shape = reduction.pack(array.array("f", [1.0, 2.0]), None)
        r = shape(bytes(data))
        self.assertEqual((n, d, r.typecode, r.tolist()), (2, DType.FLOAT, "f", [1.0, 2.0]))
        data, n, d, _ = reduction.pack(bytes(16), "i32")
        self.assertEqual((n, d), (4, DType.INT32))
        with self.assertRaises(outboard.ArgumentError) as cm:
            reduction.pack(bytes(16), None)
        self.assertIn("dtype=", str(cm.exception))
        self.assertRaises(outboard.ArgumentError, reduction.pack, bytes(7), DType.INT32)
        self.assertRaises(outboard.ArgumentError, reduction.pack, array.array("d", [1.0]), DType.INT64)
        self.assertRaises(outboard.ArgumentError, reduction.pack, array.array("h", [1]), None)


class Errors(unittest.TestCase):
    def test_one_class_per_code(self):
        classes = [errors.error_class(c) for c in range(1, 21)]
        self.assertEqual(len(set(classes)), 20)
        for code, cls in enumerate(classes, 1):
            self.assertTrue(issubclass(cls, outboard.OutboardError))
            self.assertEqual(cls.code, code)
        self.assertIs(errors.error_class(99), outboard.OutboardError)
        self.assertIs(errors.error_class(4), outboard.TruncatedError)
        self.assertTrue(issubclass(outboard.ArgumentError, ValueError))
        self.assertTrue(issubclass(outboard.StateError, RuntimeError))
        # The new codes' classes, and the handlers that catch them too.
        self.assertIs(errors.error_class(14), outboard.ProcFailedPendingError)
        self.assertTrue(issubclass(outboard.ProcFailedPendingError, outboard.PeerError))
        self.assertIs(errors.error_class(15), outboard.PortGoneError)
        self.assertIs(errors.error_class(16), outboard.NotReadyTimeoutError)
        self.assertIs(errors.error_class(17), outboard.SenderAbortedError)
        self.assertIs(errors.error_class(18), outboard.CollectiveMismatchError)
        self.assertTrue(issubclass(outboard.CollectiveMismatchError, outboard.CollectiveError))
        self.assertIs(errors.error_class(20), outboard.ModuleError)
        e = outboard.PeerError("a peer is unreachable", "rank 3")
        self.assertEqual((str(e), e.code, e.detail), ("a peer is unreachable: rank 3", 3, "rank 3"))

    @unittest.skipUnless(library_loads(), "liboutboard_capi.so not found")
    def test_messages_come_from_the_library(self):
        e = errors.from_code(errors.ERR_PEER)
        self.assertIsInstance(e, outboard.PeerError)
        self.assertEqual(e.description, "a peer is unreachable")
        e = errors.from_code(12345)
        self.assertEqual((type(e), e.description, e.code), (outboard.OutboardError, "unknown error code", 12345))
        errors.check(errors.OK)
        self.assertRaises(outboard.CollectiveError, errors.check, errors.ERR_COLL)
        e = errors.from_code(errors.ERR_SOURCE_CLOSED)
        self.assertIsInstance(e, outboard.SourceClosedError)
        self.assertEqual(e.description, "the port a receive named has closed")
        e = errors.from_code(errors.ERR_COLL_MISMATCH)
        self.assertIsInstance(e, outboard.CollectiveMismatchError)
        self.assertEqual(e.description, "the group's members called different collectives")
        descriptions = {errors.from_code(c).description for c in range(0, 21)}
        self.assertEqual(len(descriptions), 21)
        self.assertNotIn("unknown error code", descriptions)


class FindingTheLibrary(unittest.TestCase):
    def test_a_missing_library_names_the_fix(self):
        with mock.patch.dict(os.environ, {"OUTBOARD_LIB": "/nonexistent/liboutboard_capi.so"}):
            with self.assertRaises(outboard.LibraryNotFoundError) as cm:
                _lib.load()
        msg = str(cm.exception)
        self.assertIn("OUTBOARD_LIB=/nonexistent/liboutboard_capi.so", msg)
        self.assertIn("cargo build --release -p outboard-capi", msg)

    def test_outboard_lib_may_name_a_directory(self):
        with tempfile.TemporaryDirectory() as d:
            with mock.patch.dict(os.environ, {"OUTBOARD_LIB": d}):
                self.assertEqual(_lib.candidates(), [_lib.Path(d) / "liboutboard_capi.so"])
                self.assertRaises(outboard.LibraryNotFoundError, _lib.load)

    def test_without_outboard_lib_the_newest_cargo_build_is_first(self):
        with tempfile.TemporaryDirectory() as t:
            for i, sub in enumerate(["release", "debug/deps"]):
                os.makedirs(os.path.join(t, sub))
                f = os.path.join(t, sub, "liboutboard_capi.so")
                open(f, "w").close()
                os.utime(f, (1000 + i, 1000 + i))
            env = {k: v for k, v in os.environ.items() if k != "OUTBOARD_LIB"}
            env["CARGO_TARGET_DIR"] = t
            env["PATH"] = t  # no installed outboard
            with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(_lib.sys, "prefix", t):
                self.assertEqual(_lib.candidates()[0], _lib.Path(t) / "debug/deps/liboutboard_capi.so")

    def test_an_installed_prefix_comes_before_the_cargo_build(self):
        with tempfile.TemporaryDirectory() as t:
            prefix, target = os.path.join(t, "prefix"), os.path.join(t, "target")
            for d in ("prefix/bin", "prefix/lib", "target/release"):
                os.makedirs(os.path.join(t, d))
            exe = os.path.join(prefix, "bin", "outboard")
            open(exe, "w").close()
            os.chmod(exe, 0o755)
            for f in (os.path.join(prefix, "lib", "liboutboard_capi.so"), os.path.join(target, "release", "liboutboard_capi.so")):
                open(f, "w").close()
            env = {k: v for k, v in os.environ.items() if k != "OUTBOARD_LIB"}
            env["CARGO_TARGET_DIR"] = target
            env["PATH"] = os.path.join(prefix, "bin")
            with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(_lib.sys, "prefix", t):
                found = _lib.candidates()
                self.assertEqual(found[0], _lib.Path(prefix) / "lib" / "liboutboard_capi.so")
                self.assertEqual(found[-1], _lib.Path(target) / "release" / "liboutboard_capi.so")

    def test_not_found_names_every_place_looked(self):
        with tempfile.TemporaryDirectory() as t:
            env = {k: v for k, v in os.environ.items() if k != "OUTBOARD_LIB"}
            env["CARGO_TARGET_DIR"] = t
            env["PATH"] = t
            with mock.patch.dict(os.environ, env, clear=True), mock.patch.object(_lib.sys, "prefix", t), mock.patch.object(_lib.ctypes.util, "find_library", return_value=None):
                with self.assertRaises(outboard.LibraryNotFoundError) as cm:
                    _lib.load()
        msg = str(cm.exception)
        for said in ("OUTBOARD_LIB (unset)", "outboard command on PATH (none)", f"this Python's prefix ({t})", f"cargo target directory {t}", "find_library", "outboard install --prefix DIR"):
            self.assertIn(said, msg)


@unittest.skipUnless(library_loads(), "liboutboard_capi.so not found")
class WorldOfOne(unittest.TestCase):
    """Without a launcher the world is a job of one rank."""

    @classmethod
    def setUpClass(cls):
        for k in [k for k in os.environ if k.startswith("OUTBOARD_") and k != "OUTBOARD_LIB"]:
            del os.environ[k]
        cls.w = outboard.World()

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def test_rank_and_size(self):
        self.assertEqual((self.w.rank, self.w.size), (0, 1))

    def test_messages_to_itself(self):
        r = self.w.irecv(16, 0, 9)
        self.assertFalse(r.done)
        self.w.send(0, b"self", 9)
        self.assertEqual(r.wait(), (b"self", outboard.Status(0, 9, 4)))
        s = self.w.isend(0, b"0123456789", 1)
        with self.assertRaises(outboard.TruncatedError) as cm:
            self.w.recv(4, 0, 1)
        self.assertEqual(cm.exception.status, outboard.Status(0, 1, 10))
        self.assertIsNone(s.wait())
        self.assertRaises(outboard.ArgumentError, self.w.send, 1, b"x")

    def test_collectives_of_one(self):
        self.assertEqual(self.w.allreduce([3, -4], Op.MIN), [3, -4])
        self.assertEqual(self.w.reduce(2.5, Op.PROD), 2.5)
        self.assertEqual(self.w.bcast_object({"a": 1}), {"a": 1})
        self.assertRaises(outboard.ArgumentError, self.w.allreduce, 1.0, Op.BOR)

    def test_handles_are_freed_once_and_not_used_after(self):
        g = self.w.new_group()
        m = self.w.alloc(16)
        with g, m:
            m.write(b"\x01" * 8, 8)
            self.assertEqual(m.fetch_add(8, 1), 0x0101010101010101)
        self.assertTrue(g.closed and m.closed)
        g.close()
        m.close()
        self.assertRaises(outboard.StateError, g.barrier)
        self.assertRaises(outboard.StateError, getattr, g, "rank")
        self.assertRaises(outboard.StateError, m.read, 1)
        self.assertRaises(outboard.StateError, self.w.rdma_write, 0, 0, 0, m)

    def test_a_handle_in_use_is_not_closed(self):
        g = self.w.new_group()
        r = g.ibarrier()
        self.assertRaises(outboard.CollectiveError, g.close)
        self.assertFalse(g.closed)
        self.assertIsNone(r.wait())
        g.close()
        m = self.w.alloc(8)
        r = self.w.irdma_write(0, m.key, 0, m)
        self.assertRaises(outboard.StateError, m.close)
        r.wait()
        m.close()
        self.assertTrue(m.closed)

    def test_remote_atomics_on_itself(self):
        with self.w.alloc(16) as m:
            k = m.key
            self.assertEqual(k, m.key)
            self.assertEqual(self.w.fetch_add(0, k, 0, 5), 0)
            self.assertEqual(self.w.compare_swap(0, k, 0, 5, 9), 5)
            self.assertEqual(self.w.swap(0, k, 8, 1, bits=32), 0)
            self.assertEqual(m.read(12), bytes([9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]))
            self.assertRaises(outboard.RdmaError, self.w.fetch_add, 0, k, 16, 1)
            self.assertRaises(outboard.RdmaError, self.w.fetch_add, 0, k ^ 1, 0, 1)


MAX_ABS = """
func abs(v)
    if v < 0 then return -v; end if;
    return v;
end func;
func main()
    var off = 0;
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

SPIN = "func main()\n    while 1 do end while;\n    return 0;\nend func;\n"


@unittest.skipUnless(library_loads(), "liboutboard_capi.so not found")
class Modules(unittest.TestCase):
    """NICVM modules: compiled here, run here, and on the engine of a job
    of one (a reduction of one member combines nothing: ranks.py reduces
    with several)."""

    def test_bad_names_and_sources_name_what_is_wrong(self):
        with self.assertRaises(outboard.ArgumentError) as cm:
            outboard.Module("bad name", SPIN)
        self.assertIn("module name \"bad name\"", str(cm.exception))
        self.assertRaises(outboard.ArgumentError, outboard.Module, "nul\0", SPIN)
        self.assertRaises(outboard.ArgumentError, outboard.Module, "surrogate", "// \udc80")
        self.assertRaises(TypeError, outboard.Module, "both", SPIN, bytecode=b"")
        self.assertRaises(TypeError, outboard.Module, "neither")
        with self.assertRaises(outboard.ModuleError) as cm:
            outboard.Module("broken", "func main(\n  return 0;\nend func;\n")
        self.assertEqual(cm.exception.module, "broken")
        self.assertIn("module 'broken' does not compile: line 2", str(cm.exception))
        with self.assertRaises(outboard.ModuleError) as cm:
            outboard.Module("junk", bytecode=b"NVM?")
        self.assertEqual(cm.exception.module, "junk")

    def test_combine_here_and_from_bytecode(self):
        with outboard.Module("maxabs", MAX_ABS) as m:
            acc = array.array("q", [3, -9, 0])
            got = array.array("q", m.combine(acc, array.array("q", [-4, 2, -1])))
            self.assertEqual(got.tolist(), [4, 9, 1])
            with outboard.Module("maxabs_copy", bytecode=m.bytecode) as copy:
                self.assertEqual(copy.bytecode, m.bytecode)
                self.assertEqual(copy.combine(acc, array.array("q", [-4, 2, -1])), bytes(got))
            self.assertRaises(outboard.ArgumentError, m.combine, b"12345678", b"1234")
        with outboard.Module("spin", SPIN) as spin:
            with self.assertRaises(outboard.ModuleError) as cm:
                spin.combine(bytes(8), bytes(8))
            self.assertEqual(cm.exception.module, "spin")
            self.assertIn("out of fuel", str(cm.exception))

    def test_load_reduce_list_send_purge_in_a_job_of_one(self):
        with outboard.World() as w, outboard.Module("maxabs1", MAX_ABS) as m, outboard.Module("pass1", "func main() return 0; end func;") as p:
            self.assertRaises(outboard.ModuleError, w.allreduce, [1], m)
            m.load(w.group)
            self.assertEqual(w.allreduce([-5, 6], m), [-5, 6])
            self.assertEqual(w.group.reduce([7], m, root=0), [7])
            self.assertIn("maxabs1", [i.name for i in w.modules()])
            p.load(w.group)
            self.assertFalse(p.send(w.group, b"to myself", dest=0))
            d = p.recv()
            self.assertEqual((d.data, d.source, d.failed, d.new), (b"to myself", 0, False, False))
            m.purge()
            self.assertNotIn("maxabs1", [i.name for i in w.modules()])
            with self.assertRaises(outboard.ModuleError) as cm:
                w.allreduce([1], m)
            self.assertEqual(cm.exception.module, "maxabs1")
            self.assertIn("not loaded", str(cm.exception))


@unittest.skipUnless(library_loads(), "liboutboard_capi.so not found")
class LeavingOnAnException(unittest.TestCase):
    def test_an_exception_abandons_the_world_instead_of_the_collective_leave(self):
        # In a process of its own: the abandoned world is never freed.
        prog = (
            "import outboard\n"
            "try:\n"
            "    with outboard.World() as w:\n"
            "        g = w.new_group()\n"
            "        raise KeyError('boom')\n"
            "except KeyError:\n"
            "    print(w.closed, g.closed, w.group.closed)\n"
            "    try:\n"
            "        g.barrier()\n"
            "    except outboard.StateError as e:\n"
            "        print('StateError', e)\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("OUTBOARD_") or k == "OUTBOARD_LIB"}
        env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        out = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.splitlines(), ["True True True", "StateError handle closed: this group was closed"])


if __name__ == "__main__":
    unittest.main()
