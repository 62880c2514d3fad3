//! Hostile modules and hostile bytecode: every one is stopped by the
//! compiler, the verifier or a trap, and nothing panics or hangs.

use std::sync::Arc;

use outboard_nicvm::asm::{assemble, disassemble};
use outboard_nicvm::bytecode::{
    self, ArrayRef, BuiltinRef, CallRef, Function, Insn, Module, Slot, Target,
};
use outboard_nicvm::harness::{NullServices, Recorder};
use outboard_nicvm::{
    compile, verify, Area, Limits, ModuleInstance, PacketFate, ServiceError, TrapKind,
    VerifyErrorKind,
};
use proptest::prelude::*;

fn instance(src: &str) -> ModuleInstance {
    ModuleInstance::new(compile(src).unwrap_or_else(|e| panic!("{e}")).module)
}

fn trap_of(src: &str, packet: &[u8], size: u32, fuel: u64) -> outboard_nicvm::VmError {
    instance(src)
        .invoke(&mut Recorder::new(0, size, 0), packet, &mut [0u8; 16], fuel)
        .expect_err("module must trap")
}

#[test]
fn endless_loop_is_stopped_by_fuel() {
    let src = "func main()\n  var i;\n  while 1 do\n    i = i + 1;\n  end while;\nend func;";
    for fuel in [0, 1, 10, 1_000, 1_000_000] {
        let e = trap_of(src, &[], 1, fuel);
        assert_eq!(e.kind, TrapKind::OutOfFuel);
        assert!(e.instructions <= fuel, "{} > {fuel}", e.instructions);
        assert!(
            fuel < 20 || e.instructions + 20 > fuel,
            "stopped early: {}",
            e.instructions
        );
    }
    // An empty `while 1 do end while;` too: its jump is a block of its own.
    let e = trap_of("func main() while 1 do end while; end func;", &[], 1, 500);
    assert_eq!(e.kind, TrapKind::OutOfFuel);
}

#[test]
fn fuel_is_exact_for_a_straight_line_module() {
    let mut m = instance("func main() return 1 + mpi_get_rank(); end func;");
    // push, builtin, add, ret = 4 instructions in one block.
    let mut nic = Recorder::new(0, 1, 0);
    assert_eq!(m.invoke(&mut nic, &[], &mut [], 4).unwrap().instructions, 4);
    assert_eq!(
        m.invoke(&mut nic, &[], &mut [], 3).unwrap_err().kind,
        TrapKind::OutOfFuel
    );
}

#[test]
fn unbounded_recursion_is_stopped_by_call_depth() {
    let src = "func f(n) return f(n + 1); end func;\nfunc main() return f(0); end func;";
    let e = trap_of(src, &[], 1, 10_000_000);
    assert_eq!(
        e.kind,
        TrapKind::CallDepth(Limits::default().max_call_depth)
    );
    // The same instance still works afterwards (scratch is reset per invocation).
    let mut m = instance("func f(n) if n == 0 then return 7; end if; return f(n - 1); end func;\nfunc main() return f(60); end func;");
    let mut nic = Recorder::new(0, 1, 0);
    for _ in 0..3 {
        assert_eq!(m.invoke(&mut nic, &[], &mut [], 100_000).unwrap().result, 7);
    }
}

#[test]
fn deep_frames_overflow_the_value_stack_cleanly() {
    let limits = Limits {
        max_stack_slots: 2_000,
        ..Limits::default()
    };
    let src = "func f(n) var pad[100]; pad[0] = n; return f(n + 1); end func;\nfunc main() return f(0); end func;";
    let m = outboard_nicvm::compile_with(src, &limits).unwrap();
    let e = ModuleInstance::new(m.module)
        .invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 1_000_000)
        .unwrap_err();
    assert_eq!(e.kind, TrapKind::StackOverflow);
}

#[test]
fn reads_past_the_payload_trap() {
    for (call, area, off, width) in [
        ("packet_get_byte(4)", Area::Packet, 4, 1),
        ("packet_get_i64(-1)", Area::Packet, -1, 8),
        ("packet_get_f64(1)", Area::Packet, 1, 8),
        (
            "packet_get_i64(9223372036854775807)",
            Area::Packet,
            i64::MAX,
            8,
        ),
        ("acc_get_i64(9)", Area::Acc, 9, 8),
        ("acc_set_byte(16, 0)", Area::Acc, 16, 1),
        ("acc_set_f64(-8, 1.0)", Area::Acc, -8, 8),
    ] {
        let src = format!("func main()\n  {call};\nend func;");
        let e = trap_of(&src, &[1, 2, 3, 4], 1, 1000);
        let len = if area == Area::Packet { 4 } else { 16 };
        assert_eq!(
            e.kind,
            TrapKind::OutOfBounds {
                area,
                offset: off,
                width,
                len
            },
            "{call}"
        );
    }
}

#[test]
fn sends_outside_the_group_are_errors() {
    for rank in ["-1", "4", "mpi_get_size()", "-9223372036854775808"] {
        let src = format!(
            "func main()\n  mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, {rank});\nend func;"
        );
        let mut nic = Recorder::new(0, 4, 0);
        let e = instance(&src)
            .invoke(&mut nic, b"x", &mut [], 100)
            .unwrap_err();
        assert!(
            matches!(e.kind, TrapKind::BadRank { size: 4, .. }),
            "{rank}: {e}"
        );
        assert!(nic.events.is_empty(), "nothing was sent for {rank}");
    }
    let e = trap_of(
        "func main() mpi_send_message(99, 0); end func;",
        &[],
        4,
        100,
    );
    assert_eq!(e.kind, TrapKind::BadPacketType(99));
}

#[test]
fn a_refused_send_stops_the_module() {
    let mut nic = Recorder::new(0, 4, 0);
    nic.refuse_after = Some(1);
    let e = instance(include_str!("../modules/bcast.nvm"))
        .invoke(&mut nic, b"x", &mut [], 1000)
        .unwrap_err();
    assert_eq!(e.kind, TrapKind::Service(ServiceError::QueueFull));
    assert_eq!(nic.sent_to(), vec![1]);
}

#[test]
fn a_module_cannot_load_another_module() {
    // There is no such built-in in the language ...
    let e = compile("func main()\n  nicvm_load(1, 2);\nend func;").unwrap_err();
    assert_eq!(
        e.kind,
        outboard_nicvm::CompileErrorKind::UnknownFunction("nicvm_load".into())
    );
    // ... and bytecode naming a built-in beyond the table is rejected.
    let m = assemble(".func main 0 0\n  push.i 1\n  builtin #200/1\n  ret\n.end").unwrap();
    let e = verify(&m, &Limits::default()).unwrap_err();
    assert_eq!(
        (e.func, e.index, e.kind),
        (Some(0), Some(1), VerifyErrorKind::BadBuiltin(200))
    );
}

#[test]
fn traps_report_the_instruction_and_its_source_position() {
    let src = "func main()\n  var z = 0;\n  return 10 / z;\nend func;";
    let c = compile(src).unwrap();
    let e = ModuleInstance::new(c.module.clone())
        .invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 100)
        .unwrap_err();
    assert_eq!(e.kind, TrapKind::DivisionByZero);
    let pos = c.debug.pos(e.func, e.index).unwrap();
    // The position of the `/` operator.
    assert_eq!((pos.line, pos.col), (3, 13));
    assert_eq!(
        c.bytecode().functions[usize::from(e.func)].code[e.index as usize],
        Insn::DivI
    );
}

#[test]
fn consume_builtin_and_default_path() {
    let mut m = instance("func main() nicvm_consume(); return NICVM_RESULT_SUCCESS; end func;");
    let out = m
        .invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 100)
        .unwrap();
    assert_eq!((out.result, out.fate), (0, PacketFate::Consume));
}

// ---- the verifier on bytecode that did not come from our compiler --------

fn rejects(text: &str) -> (Option<u16>, Option<u32>, VerifyErrorKind) {
    let m = assemble(text).unwrap_or_else(|e| panic!("{e}"));
    let e = verify(&m, &Limits::default()).expect_err(text);
    // The message names where and why.
    let msg = e.to_string();
    if let (Some(f), Some(i)) = (e.func, e.index) {
        assert!(
            msg.contains(&format!("function {f}, instruction {i}")),
            "{msg}"
        );
    }
    (e.func, e.index, e.kind)
}

#[test]
fn verifier_rejections_name_the_instruction() {
    use VerifyErrorKind as K;
    assert_eq!(
        rejects(".func main 0 0\n  jmp @7\n.end"),
        (Some(0), Some(0), K::BadTarget { target: 7, len: 1 })
    );
    assert_eq!(
        rejects(".func main 0 0\n  push.i 1\n  add.i\n  ret\n.end"),
        (Some(0), Some(1), K::StackUnderflow { needs: 2, depth: 1 })
    );
    // One path pushes, the other does not: depths disagree at the join.
    assert_eq!(
        rejects(".func main 0 0\n  push.i 1\n  jz L\n  push.i 2\nL:\n  push.i 3\n  ret\n.end"),
        (Some(0), Some(3), K::InconsistentDepth(1, 0))
    );
    assert_eq!(
        rejects(".func main 0 0\n  push.i 1\n.end"),
        (Some(0), Some(0), K::FallsOffEnd)
    );
    assert_eq!(
        rejects(".func main 0 2\n  load.l 2\n  ret\n.end"),
        (Some(0), Some(0), K::LocalOutOfRange { slot: 2, locals: 2 })
    );
    assert_eq!(
        rejects(".global 0\n.func main 0 0\n  load.ga 0 2\n  ret\n.end"),
        (
            Some(0),
            Some(0),
            K::GlobalOutOfRange {
                slot: 1,
                globals: 1
            }
        )
    );
    assert_eq!(
        rejects(".func main 0 0\n  builtin mpi_send_message/1\n  ret\n.end"),
        (Some(0), Some(0), K::Arity { given: 1, takes: 2 })
    );
    assert_eq!(
        rejects(".func main 0 0\n  call f/0\n  ret\n.end\n.func f 1 1\n  load.l 0\n  ret\n.end"),
        (Some(0), Some(0), K::Arity { given: 0, takes: 1 })
    );
    assert_eq!(
        rejects(".func main 0 0\n  call #9/0\n  ret\n.end"),
        (Some(0), Some(0), K::BadCallee(9))
    );
    assert_eq!(
        rejects(".func main 0 0\n  push.i 0\n  load.la 0 0\n  ret\n.end").2,
        K::EmptyArray
    );
    // A loop that pushes every iteration grows the stack without bound.
    assert_eq!(
        rejects(".func main 0 0\nL:\n  push.i 1\n  jmp L\n.end"),
        (Some(0), Some(0), K::InconsistentDepth(0, 1))
    );
    assert_eq!(
        rejects(".entry f\n.func f 1 1\n  push.i 0\n  ret\n.end").2,
        K::EntryParams
    );
    assert_eq!(
        rejects(".func main 0 0\n  push.i 0\n  ret\n.end\n.func g 2 1\n  push.i 0\n  ret\n.end"),
        (
            Some(1),
            None,
            K::BadFrame {
                params: 2,
                locals: 1,
                limit: 1024
            }
        )
    );
    assert_eq!(rejects(".func main 0 0\n.end").2, K::EmptyFunction);
    let deep = format!(".func main 0 0\n{}  ret\n.end", "  push.i 1\n".repeat(300));
    assert_eq!(rejects(&deep).2, K::StackTooDeep(257, 256));
    let none = Module {
        entry: 0,
        globals: vec![],
        functions: vec![],
    };
    assert_eq!(
        verify(&none, &Limits::default()).unwrap_err().kind,
        K::FunctionCount(0, 256)
    );
}

#[test]
fn unreachable_code_is_checked_but_not_run() {
    // Dead code after `ret` is still checked for bad operands ...
    assert_eq!(
        rejects(".func main 0 0\n  push.i 0\n  ret\n  load.l 5\n.end").2,
        VerifyErrorKind::LocalOutOfRange { slot: 5, locals: 0 }
    );
    // ... and accepted (and ignored) when well-formed.
    let m = assemble(".func main 0 0\n  push.i 4\n  ret\n  pop\n.end").unwrap();
    let v = Arc::new(verify(&m, &Limits::default()).unwrap());
    let out = ModuleInstance::new(v)
        .invoke(&mut NullServices::default(), &[], &mut [], 10)
        .unwrap();
    assert_eq!(out.result, 4);
}

// ---- encode / decode / assemble / disassemble ---------------------------

fn arb_insn() -> impl Strategy<Value = Insn> {
    prop_oneof![
        Just(Insn::Nop),
        any::<i64>().prop_map(Insn::PushI),
        any::<u64>().prop_map(|b| Insn::PushF(f64::from_bits(b))),
        Just(Insn::Pop),
        Just(Insn::AddI),
        Just(Insn::DivF),
        Just(Insn::GeF),
        Just(Insn::Ret),
        any::<u16>().prop_map(|s| Insn::LoadL(Slot(s))),
        any::<u16>().prop_map(|s| Insn::StoreG(Slot(s))),
        (any::<u16>(), any::<u16>()).prop_map(|(base, len)| Insn::LoadGA(ArrayRef { base, len })),
        (any::<u16>(), any::<u16>()).prop_map(|(base, len)| Insn::StoreLA(ArrayRef { base, len })),
        (0u32..40).prop_map(|t| Insn::Jz(Target(t))),
        any::<u32>().prop_map(|t| Insn::Jmp(Target(t))),
        (0u16..3, any::<u8>()).prop_map(|(func, argc)| Insn::Call(CallRef { func, argc })),
        (any::<u8>(), any::<u8>()).prop_map(|(id, argc)| Insn::Builtin(BuiltinRef { id, argc })),
    ]
}

fn arb_module() -> impl Strategy<Value = Module> {
    let func = (
        any::<u8>(),
        any::<u16>(),
        prop::collection::vec(arb_insn(), 0..40),
    );
    (
        0u16..3,
        prop::collection::vec(any::<u64>(), 0..4),
        prop::collection::vec(func, 1..4),
    )
        .prop_map(|(entry, globals, fs)| Module {
            entry,
            globals,
            functions: fs
                .into_iter()
                .enumerate()
                .map(|(i, (params, locals, code))| Function {
                    name: format!("f{i}"),
                    params,
                    locals,
                    code,
                })
                .collect(),
        })
}

/// Compares modules treating floats by their bits (NaN != NaN otherwise).
fn same(a: &Module, b: &Module) -> bool {
    a.encode() == b.encode()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn encode_decode_round_trip(m in arb_module()) {
        let bytes = m.encode();
        let back = Module::decode(&bytes).unwrap();
        prop_assert!(same(&back, &m));
    }

    #[test]
    fn assemble_disassemble_round_trip(m in arb_module()) {
        let text = disassemble(&m);
        let back = assemble(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(same(&back, &m), "{}", text);
    }

    /// Random modules (mostly invalid) are rejected, or run to a result or a
    /// clean trap within their fuel; never a panic.
    #[test]
    fn random_modules_verify_or_run_cleanly(m in arb_module(), packet in prop::collection::vec(any::<u8>(), 0..24)) {
        if let Ok(v) = verify(&m, &Limits::default()) {
            let mut inst = ModuleInstance::new(Arc::new(v));
            let mut acc = [0u8; 8];
            let mut nic = NullServices { rank: 1, size: 4, root: 0, source: 2, sends: 0 };
            match inst.invoke(&mut nic, &packet, &mut acc, 10_000) {
                Ok(o) => prop_assert!(o.instructions <= 10_000),
                Err(e) => prop_assert!(e.instructions <= 10_000 && !matches!(e.kind, TrapKind::Internal(_)), "{}", e),
            }
        }
    }

    /// Arbitrary bytes never make the decoder panic.
    #[test]
    fn random_bytes_decode_or_fail(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = bytecode::decode_code(&bytes, 0);
        let mut with_magic = bytecode::MAGIC.to_vec();
        with_magic.extend_from_slice(&bytes);
        if let Ok(m) = Module::decode(&with_magic) {
            prop_assert_eq!(m.encode(), with_magic);
        }
    }

    /// Arbitrary text never makes the front end panic.
    #[test]
    fn random_text_compiles_or_fails(src in "[a-z_(){};=+*/<>0-9\\[\\]: \n.,-]{0,200}") {
        let _ = compile(&src);
    }
}

#[test]
fn compiled_modules_survive_encode_decode_and_reverify() {
    for src in [
        include_str!("../modules/bcast.nvm"),
        include_str!("../modules/reduce_max_i64.nvm"),
        include_str!("../modules/reduce_prod_f64.nvm"),
        include_str!("../modules/combine_max_i64.nvm"),
        include_str!("../modules/echo.nvm"),
    ] {
        let c = compile(src).unwrap();
        let bytes = c.bytecode().encode();
        let m = Module::decode(&bytes).unwrap();
        let v = verify(&m, &Limits::default()).unwrap();
        assert_eq!(v.bytecode(), c.bytecode());
        assert!(same(&assemble(&disassemble(&m)).unwrap(), &m));
    }
}
