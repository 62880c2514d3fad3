//! The language: semantics of each feature, compile errors with positions,
//! and differential testing of random programs against a reference
//! evaluator of the syntax tree.

use std::collections::BTreeMap;

use outboard_nicvm::ast::{
    self, BinOp, Expr, ExprKind, FuncDecl, Item, Param, Pos, Stmt, Type, UnOp, VarDecl,
};
use outboard_nicvm::harness::Recorder;
use outboard_nicvm::{compile, CompileErrorKind, ModuleInstance, TrapKind};
use proptest::prelude::*;

fn run(src: &str) -> Result<i64, TrapKind> {
    let m = compile(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let mut inst = ModuleInstance::new(m.module);
    inst.invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 1_000_000)
        .map(|o| o.result)
        .map_err(|e| e.kind)
}

fn main_returns(body: &str) -> i64 {
    run(&format!("func main()\n{body}\nend func;")).unwrap()
}

#[test]
fn integer_arithmetic_wraps_and_follows_precedence() {
    assert_eq!(main_returns("return 1 + 2 * 3 - 4 / 2;"), 5);
    assert_eq!(main_returns("return -7 / 2;"), -3);
    assert_eq!(main_returns("return -7 % 2;"), -1);
    assert_eq!(
        main_returns("var x = 9223372036854775807; return x + 1;"),
        i64::MIN
    );
    assert_eq!(
        main_returns("var x = -9223372036854775808; return x / -1;"),
        i64::MIN
    );
    assert_eq!(
        main_returns("var x = -9223372036854775808; return x % -1;"),
        0
    );
    assert_eq!(
        main_returns("return (1 << 65) + (0xff & 0x0f) + (6 ^ 3) + (8 | 1);"),
        2 + 15 + 5 + 9
    );
    assert_eq!(main_returns("return -16 >> 2;"), -4);
    assert_eq!(
        main_returns("return 3 < 4 and 4 <= 4 and 5 > 4 and 5 >= 5 and 1 == 1 and 1 != 2;"),
        1
    );
    assert_eq!(main_returns("return not 0 + not 5;"), 1);
}

#[test]
fn floats_and_conversions() {
    assert_eq!(main_returns("var f: float = 2.5; return int(f * 4.0);"), 10);
    assert_eq!(main_returns("return int(-2.9);"), -2);
    assert_eq!(main_returns("var z: float; return int(1.0 / z);"), i64::MAX);
    assert_eq!(main_returns("var z: float; return int(z / z);"), 0);
    assert_eq!(main_returns("var z: float; return z / z == z / z;"), 0);
    assert_eq!(main_returns("return int(float(7) / 2.0 * 10.0);"), 35);
    assert_eq!(main_returns("return 1.5e3 > 1499.0;"), 1);
}

#[test]
fn control_flow_loops_and_short_circuit() {
    assert_eq!(
        main_returns(
            "var i = 0; var s = 0; while i < 10 do s = s + i; i = i + 1; end while; return s;"
        ),
        45
    );
    assert_eq!(
        main_returns(
            "var x = 5; if x < 3 then return 1; elsif x < 6 then return 2; else return 3; end if;"
        ),
        2
    );
    // The right side is not evaluated, so no division by zero.
    assert_eq!(main_returns("var z = 0; return z != 0 and 10 / z > 1;"), 0);
    assert_eq!(main_returns("var z = 0; return z == 0 or 10 / z > 1;"), 1);
    assert_eq!(
        run("func main() var z = 0; return 1 / z; end func;"),
        Err(TrapKind::DivisionByZero)
    );
    // Falling off the end returns 0.
    assert_eq!(main_returns("var x = 1;"), 0);
}

#[test]
fn functions_recursion_and_arrays() {
    let src = "
        func fib(n)
            if n < 2 then return n; end if;
            return fib(n - 1) + fib(n - 2);
        end func;
        func scale(x: float, k): float
            return x * float(k);
        end func;
        func main()
            var a[5];
            var i = 0;
            while i < 5 do a[i] = fib(i + 10); i = i + 1; end while;
            return a[0] + a[4] + int(scale(1.5, 4));
        end func;";
    assert_eq!(run(src), Ok(55 + 377 + 6));
    assert_eq!(
        run("func main() var a[3]; var i = 3; a[i] = 1; return 0; end func;"),
        Err(TrapKind::ArrayIndex { index: 3, len: 3 })
    );
    assert_eq!(
        run("func main() var a[3]; return a[-1]; end func;"),
        Err(TrapKind::ArrayIndex { index: -1, len: 3 })
    );
}

#[test]
fn module_variables_keep_their_values_between_invocations() {
    let m = compile(
        "const STEP = 2 * 3;\nvar count = 10;\nvar hist[4];\nvar mean: float = 0.5;\n\
         func main()\n  count = count + STEP;\n  hist[count % 4] = hist[count % 4] + 1;\n  \
         mean = mean * 2.0;\n  return count * 1000 + hist[0] * 100 + int(mean);\nend func;",
    )
    .unwrap();
    let mut inst = ModuleInstance::new(m.module);
    let mut nic = Recorder::new(0, 1, 0);
    let r: Vec<i64> = (0..3)
        .map(|_| inst.invoke(&mut nic, &[], &mut [], 1000).unwrap().result)
        .collect();
    // count: 16, 22, 28; 16%4=0, 22%4=2, 28%4=0; mean: 1, 2, 4
    assert_eq!(r, vec![16_101, 22_102, 28_204]);
    // Locals, by contrast, start at zero each time.
    inst.reset_globals();
    assert_eq!(
        inst.invoke(&mut nic, &[], &mut [], 1000).unwrap().result,
        16_101
    );
}

#[test]
fn packet_and_accumulator_access() {
    let m = compile(
        "func main()\n  acc_set_byte(0, packet_get_byte(1) + 1);\n  acc_set_i64(1, packet_get_i64(2) * 2);\n  \
         acc_set_f64(9, packet_get_f64(10) + 0.5);\n  return packet_length() * 100 + acc_length() + acc_get_byte(0);\nend func;",
    )
    .unwrap();
    let mut inst = ModuleInstance::new(m.module);
    let mut packet = vec![0u8, 41];
    packet.extend_from_slice(&21i64.to_le_bytes());
    packet.extend_from_slice(&1.25f64.to_le_bytes());
    let mut acc = vec![0u8; 17];
    let out = inst
        .invoke(&mut Recorder::new(0, 1, 0), &packet, &mut acc, 1000)
        .unwrap();
    assert_eq!(out.result, 18 * 100 + 17 + 42);
    assert_eq!(acc[0], 42);
    assert_eq!(i64::from_le_bytes(acc[1..9].try_into().unwrap()), 42);
    assert_eq!(f64::from_le_bytes(acc[9..17].try_into().unwrap()), 1.75);
}

fn compile_err(src: &str) -> (u32, u32, CompileErrorKind) {
    let e = compile(src).expect_err(src);
    (e.pos.line, e.pos.col, e.kind)
}

#[test]
fn compile_errors_name_line_and_column() {
    let (l, c, k) = compile_err("func main()\n  return x;\nend func;");
    assert_eq!(
        (l, c, k),
        (2, 10, CompileErrorKind::UnknownName("x".into()))
    );
    let (l, c, k) = compile_err("func main()\n  var f: float;\n  return f + 1;\nend func;");
    assert_eq!((l, c), (3, 14));
    assert!(matches!(
        k,
        CompileErrorKind::TypeMismatch {
            expected: Type::Float,
            found: Type::Int,
            ..
        }
    ));
    let (l, _, k) = compile_err("func main()\n\n  mpi_send_message(1);\nend func;");
    assert_eq!(l, 3);
    assert!(matches!(
        k,
        CompileErrorKind::Arity {
            expected: 2,
            found: 1,
            ..
        }
    ));
    let (_, _, k) = compile_err("func main()\n  nicvm_load_module(\"x\");\nend func;");
    assert_eq!(k, CompileErrorKind::UnexpectedChar('"'));
    let (l, _, k) = compile_err("func main()\n  nicvm_load_module(1, 2);\nend func;");
    assert_eq!(
        (l, k),
        (
            2,
            CompileErrorKind::UnknownFunction("nicvm_load_module".into())
        )
    );
    assert_eq!(
        compile_err("func f() end func;").2,
        CompileErrorKind::NoMain
    );
    assert_eq!(
        compile_err("func main(a) end func;").2,
        CompileErrorKind::BadMain
    );
    assert_eq!(
        compile_err("func main() var a; var a; end func;").2,
        CompileErrorKind::Duplicate("a".into())
    );
    assert_eq!(
        compile_err("func main() NICVM_RESULT_SUCCESS = 1; end func;").2,
        CompileErrorKind::AssignToConst("NICVM_RESULT_SUCCESS".into())
    );
    assert_eq!(
        compile_err("const N = 1 / 0; func main() end func;").2,
        CompileErrorKind::ConstDivByZero
    );
    assert_eq!(
        compile_err("var g = mpi_get_rank(); func main() end func;").2,
        CompileErrorKind::NotConstant
    );
    assert!(matches!(
        compile_err("func main() var a[0]; end func;").2,
        CompileErrorKind::BadArrayLen(0, _)
    ));
    assert!(matches!(
        compile_err("func main() return 1.5 % 2.0; end func;").2,
        CompileErrorKind::BadOperand { op: "%", .. }
    ));
    assert!(matches!(
        compile_err("func main() var a[2]; return a; end func;").2,
        CompileErrorKind::Shape(..)
    ));
    assert_eq!(
        compile_err("func mpi_get_rank() end func; func main() end func;").2,
        CompileErrorKind::Reserved("mpi_get_rank".into())
    );
    // Syntax errors come before semantic ones.
    let (l, c, k) = compile_err("func main()\n  if 1 then\n    x = 2;\n  end while;\nend func;");
    assert_eq!((l, c), (4, 7));
    assert!(matches!(k, CompileErrorKind::Expected { .. }));
}

#[test]
fn constant_folding_folds_what_cannot_trap() {
    let m = compile(
        "const K = 6 * 7;\nfunc main()\n  return K + (2 << 3) - int(1.5 * 2.0);\nend func;",
    )
    .unwrap();
    let code = &m.bytecode().functions[0].code;
    assert_eq!(code[0], outboard_nicvm::bytecode::Insn::PushI(42 + 16 - 3));
    // A division by zero is left to run time, where it traps.
    let m = compile("func main()\n  return 1 / 0;\nend func;").unwrap();
    assert!(m.bytecode().functions[0]
        .code
        .contains(&outboard_nicvm::bytecode::Insn::DivI));
}

// ---------------------------------------------------------------------------
// Differential testing: random programs, compiled and run, against a
// reference evaluator of the syntax tree.

/// A small deterministic generator (splitmix64), driven by a proptest seed.
struct Gen(u64);

const P: Pos = Pos { line: 0, col: 0 };
const INT_VARS: &[&str] = &["x0", "x1", "x2", "g0"];
const FLOAT_VARS: &[&str] = &["f0", "g1"];

fn e(kind: ExprKind) -> Expr {
    Expr::new(kind, P)
}
fn bx(x: Expr) -> Box<Expr> {
    Box::new(x)
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn int_lit(&mut self) -> i64 {
        match self.below(6) {
            0 => [0, 1, -1, 2, 63, 64, i64::MIN, i64::MAX][self.below(8) as usize],
            1 => self.next() as i64,
            _ => self.below(21) as i64 - 10,
        }
    }
    fn float_lit(&mut self) -> f64 {
        match self.below(4) {
            0 => [0.0, -0.0, 0.5, -1.5, 1e300, 1e-300][self.below(6) as usize],
            1 => f64::from_bits(self.next()).clamp(-1e300, 1e300),
            _ => (self.below(2001) as f64 - 1000.0) / 8.0,
        }
    }

    fn int_expr(&mut self, depth: u32, in_helper: bool) -> Expr {
        if depth == 0 {
            return match self.below(3) {
                0 => e(ExprKind::Int(self.int_lit())),
                _ if in_helper => e(ExprKind::Name(self.pick(&["a", "b", "g0"]).into())),
                _ => e(ExprKind::Name(self.pick(INT_VARS).into())),
            };
        }
        let d = depth - 1;
        match self.below(16) {
            0..=5 => {
                let ops = [
                    BinOp::Add,
                    BinOp::Sub,
                    BinOp::Mul,
                    BinOp::Div,
                    BinOp::Rem,
                    BinOp::BitAnd,
                    BinOp::BitOr,
                    BinOp::BitXor,
                    BinOp::Shl,
                    BinOp::Shr,
                    BinOp::Eq,
                    BinOp::Ne,
                    BinOp::Lt,
                    BinOp::Le,
                    BinOp::Gt,
                    BinOp::Ge,
                    BinOp::And,
                    BinOp::Or,
                ];
                let op = ops[self.below(ops.len() as u64) as usize];
                e(ExprKind::Binary(
                    op,
                    bx(self.int_expr(d, in_helper)),
                    bx(self.int_expr(d, in_helper)),
                ))
            }
            6 => {
                let ops = [
                    BinOp::Eq,
                    BinOp::Ne,
                    BinOp::Lt,
                    BinOp::Le,
                    BinOp::Gt,
                    BinOp::Ge,
                ];
                let op = ops[self.below(6) as usize];
                e(ExprKind::Binary(
                    op,
                    bx(self.float_expr(d, in_helper)),
                    bx(self.float_expr(d, in_helper)),
                ))
            }
            7 => e(ExprKind::Unary(UnOp::Neg, bx(self.int_expr(d, in_helper)))),
            8 => e(ExprKind::Unary(UnOp::Not, bx(self.int_expr(d, in_helper)))),
            9 => e(ExprKind::Call(
                "int".into(),
                vec![self.float_expr(d, in_helper)],
            )),
            10 if !in_helper => e(ExprKind::Call(
                "h".into(),
                vec![self.int_expr(d, false), self.int_expr(d, false)],
            )),
            11 if !in_helper => e(ExprKind::Index("arr".into(), bx(self.index_expr(d, false)))),
            12 => e(ExprKind::Index(
                "ga".into(),
                bx(self.index_expr(d, in_helper)),
            )),
            _ => self.int_expr(0, in_helper),
        }
    }

    /// Mostly in range, sometimes not (which must trap identically).
    fn index_expr(&mut self, depth: u32, in_helper: bool) -> Expr {
        if self.below(4) == 0 {
            self.int_expr(depth, in_helper)
        } else {
            e(ExprKind::Int(self.below(3) as i64))
        }
    }

    fn float_expr(&mut self, depth: u32, in_helper: bool) -> Expr {
        if depth == 0 {
            return match self.below(3) {
                0 => e(ExprKind::Float(self.float_lit())),
                _ if in_helper => e(ExprKind::Name("g1".into())),
                _ => e(ExprKind::Name(self.pick(FLOAT_VARS).into())),
            };
        }
        let d = depth - 1;
        match self.below(8) {
            0..=3 => {
                let ops = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div];
                let op = ops[self.below(4) as usize];
                e(ExprKind::Binary(
                    op,
                    bx(self.float_expr(d, in_helper)),
                    bx(self.float_expr(d, in_helper)),
                ))
            }
            4 => e(ExprKind::Unary(
                UnOp::Neg,
                bx(self.float_expr(d, in_helper)),
            )),
            5 => e(ExprKind::Call(
                "float".into(),
                vec![self.int_expr(d, in_helper)],
            )),
            _ => self.float_expr(0, in_helper),
        }
    }

    fn stmts(&mut self, n: u64, depth: u32, loops: u32, in_helper: bool) -> Vec<Stmt> {
        (0..self.below(n) + 1)
            .map(|_| self.stmt(depth, loops, in_helper))
            .collect()
    }

    fn stmt(&mut self, depth: u32, loops: u32, in_helper: bool) -> Stmt {
        let ed = self.below(4) as u32;
        let assign = |name: &str, index: Option<Expr>, value: Expr| Stmt::Assign {
            name: name.into(),
            index,
            value,
            pos: P,
        };
        match self.below(if depth == 0 { 4 } else { 7 }) {
            0 | 1 => {
                let vars: &[&str] = if in_helper {
                    &["a", "b", "g0"]
                } else {
                    INT_VARS
                };
                let v = self.pick(vars);
                assign(v, None, self.int_expr(ed, in_helper))
            }
            2 => {
                let v = if in_helper {
                    "g1"
                } else {
                    self.pick(FLOAT_VARS)
                };
                assign(v, None, self.float_expr(ed, in_helper))
            }
            3 => {
                let arr = if in_helper || self.below(2) == 0 {
                    "ga"
                } else {
                    "arr"
                };
                let i = self.index_expr(1, in_helper);
                assign(arr, Some(i), self.int_expr(ed, in_helper))
            }
            4 | 5 => {
                let arms = (0..self.below(3) + 1)
                    .map(|_| {
                        (
                            self.int_expr(2, in_helper),
                            self.stmts(3, depth - 1, loops, in_helper),
                        )
                    })
                    .collect();
                let otherwise = if self.below(2) == 0 {
                    Some(self.stmts(3, depth - 1, loops, in_helper))
                } else {
                    None
                };
                Stmt::If {
                    arms,
                    otherwise,
                    pos: P,
                }
            }
            _ if loops < 2 && !in_helper => {
                // l = 0; while l < K do ...; l = l + 1; end while;  (body never assigns l)
                let l = if loops == 0 { "l0" } else { "l1" };
                let k = self.below(4) as i64;
                let mut body = self.stmts(3, depth - 1, loops + 1, in_helper);
                body.push(assign(
                    l,
                    None,
                    e(ExprKind::Binary(
                        BinOp::Add,
                        bx(e(ExprKind::Name(l.into()))),
                        bx(e(ExprKind::Int(1))),
                    )),
                ));
                Stmt::If {
                    arms: vec![(
                        e(ExprKind::Int(1)),
                        vec![
                            assign(l, None, e(ExprKind::Int(0))),
                            Stmt::While {
                                cond: e(ExprKind::Binary(
                                    BinOp::Lt,
                                    bx(e(ExprKind::Name(l.into()))),
                                    bx(e(ExprKind::Int(k))),
                                )),
                                body,
                                pos: P,
                            },
                        ],
                    )],
                    otherwise: None,
                    pos: P,
                }
            }
            _ => Stmt::Return {
                value: Some(self.int_expr(ed, in_helper)),
                pos: P,
            },
        }
    }

    fn program(&mut self) -> ast::Module {
        let var = |name: &str, ty: Type, len: Option<i64>| VarDecl {
            name: name.into(),
            len: len.map(|n| e(ExprKind::Int(n))),
            ty,
            init: None,
            pos: P,
        };
        let mut g0 = var("g0", Type::Int, None);
        g0.init = Some(e(ExprKind::Int(self.int_lit())));
        let mut helper_body = self.stmts(3, 1, 0, true);
        helper_body.push(Stmt::Return {
            value: Some(self.int_expr(2, true)),
            pos: P,
        });
        let mut main_body: Vec<Stmt> = ["x0", "x1", "x2", "l0", "l1"]
            .iter()
            .map(|n| Stmt::Var(var(n, Type::Int, None)))
            .collect();
        main_body.push(Stmt::Var(var("f0", Type::Float, None)));
        main_body.push(Stmt::Var(var("arr", Type::Int, Some(3))));
        main_body.extend(self.stmts(6, 2, 0, false));
        main_body.push(Stmt::Return {
            value: Some(self.int_expr(3, false)),
            pos: P,
        });
        ast::Module {
            items: vec![
                Item::Var(g0),
                Item::Var(var("g1", Type::Float, None)),
                Item::Var(var("ga", Type::Int, Some(3))),
                Item::Func(FuncDecl {
                    name: "h".into(),
                    params: vec![
                        Param {
                            name: "a".into(),
                            ty: Type::Int,
                            pos: P,
                        },
                        Param {
                            name: "b".into(),
                            ty: Type::Int,
                            pos: P,
                        },
                    ],
                    ret: Type::Int,
                    body: helper_body,
                    pos: P,
                }),
                Item::Func(FuncDecl {
                    name: "main".into(),
                    params: vec![],
                    ret: Type::Int,
                    body: main_body,
                    pos: P,
                }),
            ],
        }
    }
}

/// The reference evaluator: a direct walk of the syntax tree.
mod reference {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum V {
        I(i64),
        F(f64),
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Trap {
        DivZero,
        Index(i64, u32),
    }

    type Env = BTreeMap<String, Vec<V>>;

    pub struct Machine<'a> {
        funcs: BTreeMap<&'a str, &'a FuncDecl>,
        pub globals: Env,
    }

    enum Flow {
        Next,
        Return(V),
    }

    fn zero(ty: Type) -> V {
        match ty {
            Type::Int => V::I(0),
            Type::Float => V::F(0.0),
        }
    }

    fn int(v: V) -> i64 {
        match v {
            V::I(i) => i,
            V::F(_) => panic!("generator produced an ill-typed program"),
        }
    }

    fn flt(v: V) -> f64 {
        match v {
            V::F(f) => f,
            V::I(_) => panic!("generator produced an ill-typed program"),
        }
    }

    fn lit_len(e: &Option<Expr>) -> usize {
        match e.as_ref().map(|e| &e.kind) {
            Some(ExprKind::Int(n)) => *n as usize,
            None => 1,
            other => panic!("array length {other:?}"),
        }
    }

    impl<'a> Machine<'a> {
        pub fn new(m: &'a ast::Module) -> Self {
            let mut funcs = BTreeMap::new();
            let mut globals = Env::new();
            for item in &m.items {
                match item {
                    Item::Func(f) => {
                        funcs.insert(f.name.as_str(), f);
                    }
                    Item::Var(v) => {
                        let init = match v.init.as_ref().map(|e| &e.kind) {
                            Some(ExprKind::Int(i)) => V::I(*i),
                            Some(ExprKind::Float(f)) => V::F(*f),
                            None => zero(v.ty),
                            other => panic!("initializer {other:?}"),
                        };
                        let mut slots = vec![zero(v.ty); lit_len(&v.len)];
                        slots[0] = init;
                        globals.insert(v.name.clone(), slots);
                    }
                    Item::Const(_) => panic!("generator makes no constants"),
                }
            }
            Machine { funcs, globals }
        }

        pub fn call(&mut self, name: &str, args: Vec<V>) -> Result<V, Trap> {
            let f = self.funcs[name];
            let mut env = Env::new();
            for (p, a) in f.params.iter().zip(args) {
                env.insert(p.name.clone(), vec![a]);
            }
            match self.block(&f.body, &mut env)? {
                Flow::Return(v) => Ok(v),
                Flow::Next => Ok(zero(f.ret)),
            }
        }

        fn block(&mut self, body: &[Stmt], env: &mut Env) -> Result<Flow, Trap> {
            for s in body {
                if let Flow::Return(v) = self.stmt(s, env)? {
                    return Ok(Flow::Return(v));
                }
            }
            Ok(Flow::Next)
        }

        fn slots<'e>(&'e mut self, env: &'e mut Env, name: &str) -> &'e mut Vec<V> {
            if env.contains_key(name) {
                env.get_mut(name).unwrap()
            } else {
                self.globals.get_mut(name).expect("declared variable")
            }
        }

        fn stmt(&mut self, s: &Stmt, env: &mut Env) -> Result<Flow, Trap> {
            match s {
                Stmt::Var(v) => {
                    env.entry(v.name.clone())
                        .or_insert_with(|| vec![zero(v.ty); lit_len(&v.len)]);
                    if let Some(init) = &v.init {
                        let x = self.expr(init, env)?;
                        env.insert(v.name.clone(), vec![x]);
                    }
                }
                Stmt::Assign {
                    name, index, value, ..
                } => match index {
                    None => {
                        let x = self.expr(value, env)?;
                        self.slots(env, name)[0] = x;
                    }
                    Some(i) => {
                        let i = int(self.expr(i, env)?);
                        let x = self.expr(value, env)?;
                        let slots = self.slots(env, name);
                        let len = slots.len() as u32;
                        if i < 0 || i >= i64::from(len) {
                            return Err(Trap::Index(i, len));
                        }
                        slots[i as usize] = x;
                    }
                },
                Stmt::Call(c) => {
                    self.expr(c, env)?;
                }
                Stmt::If {
                    arms, otherwise, ..
                } => {
                    for (c, body) in arms {
                        if int(self.expr(c, env)?) != 0 {
                            return self.block(body, env);
                        }
                    }
                    if let Some(body) = otherwise {
                        return self.block(body, env);
                    }
                }
                Stmt::While { cond, body, .. } => {
                    while int(self.expr(cond, env)?) != 0 {
                        if let Flow::Return(v) = self.block(body, env)? {
                            return Ok(Flow::Return(v));
                        }
                    }
                }
                Stmt::Return { value, .. } => {
                    let v = match value {
                        Some(v) => self.expr(v, env)?,
                        None => V::I(0),
                    };
                    return Ok(Flow::Return(v));
                }
            }
            Ok(Flow::Next)
        }

        fn expr(&mut self, x: &Expr, env: &mut Env) -> Result<V, Trap> {
            Ok(match &x.kind {
                ExprKind::Int(i) => V::I(*i),
                ExprKind::Float(f) => V::F(*f),
                ExprKind::Name(n) => self.slots(env, n)[0],
                ExprKind::Index(n, i) => {
                    let i = int(self.expr(i, env)?);
                    let slots = self.slots(env, n);
                    let len = slots.len() as u32;
                    if i < 0 || i >= i64::from(len) {
                        return Err(Trap::Index(i, len));
                    }
                    slots[i as usize]
                }
                ExprKind::Call(name, args) => {
                    let mut vals = Vec::new();
                    for a in args {
                        vals.push(self.expr(a, env)?);
                    }
                    match name.as_str() {
                        "int" => V::I(flt(vals[0]) as i64),
                        "float" => V::F(int(vals[0]) as f64),
                        _ => self.call(name, vals)?,
                    }
                }
                ExprKind::Unary(UnOp::Neg, a) => match self.expr(a, env)? {
                    V::I(i) => V::I(i.wrapping_neg()),
                    V::F(f) => V::F(-f),
                },
                ExprKind::Unary(UnOp::Not, a) => V::I((int(self.expr(a, env)?) == 0) as i64),
                ExprKind::Binary(BinOp::And, a, b) => {
                    V::I((int(self.expr(a, env)?) != 0 && int(self.expr(b, env)?) != 0) as i64)
                }
                ExprKind::Binary(BinOp::Or, a, b) => {
                    V::I((int(self.expr(a, env)?) != 0 || int(self.expr(b, env)?) != 0) as i64)
                }
                ExprKind::Binary(op, a, b) => {
                    let (a, b) = (self.expr(a, env)?, self.expr(b, env)?);
                    match (a, b) {
                        (V::I(a), V::I(b)) => V::I(match op {
                            BinOp::Add => a.wrapping_add(b),
                            BinOp::Sub => a.wrapping_sub(b),
                            BinOp::Mul => a.wrapping_mul(b),
                            BinOp::Div | BinOp::Rem if b == 0 => return Err(Trap::DivZero),
                            BinOp::Div => a.checked_div(b).unwrap_or(i64::MIN),
                            BinOp::Rem => a.checked_rem(b).unwrap_or(0),
                            BinOp::BitAnd => a & b,
                            BinOp::BitOr => a | b,
                            BinOp::BitXor => a ^ b,
                            BinOp::Shl => a << (b & 63),
                            BinOp::Shr => a >> (b & 63),
                            BinOp::Eq => (a == b) as i64,
                            BinOp::Ne => (a != b) as i64,
                            BinOp::Lt => (a < b) as i64,
                            BinOp::Le => (a <= b) as i64,
                            BinOp::Gt => (a > b) as i64,
                            BinOp::Ge => (a >= b) as i64,
                            BinOp::And | BinOp::Or => unreachable!("handled above"),
                        }),
                        (V::F(a), V::F(b)) => match op {
                            BinOp::Add => V::F(a + b),
                            BinOp::Sub => V::F(a - b),
                            BinOp::Mul => V::F(a * b),
                            BinOp::Div => V::F(a / b),
                            BinOp::Eq => V::I((a == b) as i64),
                            BinOp::Ne => V::I((a != b) as i64),
                            BinOp::Lt => V::I((a < b) as i64),
                            BinOp::Le => V::I((a <= b) as i64),
                            BinOp::Gt => V::I((a > b) as i64),
                            BinOp::Ge => V::I((a >= b) as i64),
                            _ => panic!("ill-typed float op {op:?}"),
                        },
                        _ => panic!("generator produced mixed types"),
                    }
                }
            })
        }
    }
}

fn vm_result(r: Result<i64, TrapKind>) -> Result<i64, reference::Trap> {
    r.map_err(|k| match k {
        TrapKind::DivisionByZero => reference::Trap::DivZero,
        TrapKind::ArrayIndex { index, len } => reference::Trap::Index(index, len),
        other => panic!("unexpected trap {other}"),
    })
}

#[test]
fn generated_programs_mostly_run_to_a_result() {
    // Guards the differential test against a generator that only makes
    // programs that trap at once (which would compare little).
    let (mut ok, mut div, mut idx, mut insns) = (0, 0, 0, 0u64);
    for seed in 0..300 {
        let tree = Gen(seed).program();
        let compiled = compile(&tree.to_string()).unwrap();
        let mut inst = ModuleInstance::new(compiled.module);
        match inst.invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 10_000_000) {
            Ok(o) => {
                ok += 1;
                insns += o.instructions;
            }
            Err(e) if e.kind == TrapKind::DivisionByZero => div += 1,
            Err(e) if matches!(e.kind, TrapKind::ArrayIndex { .. }) => idx += 1,
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    assert!(ok >= 150, "ok {ok}, div {div}, index {idx}");
    assert!(div > 0 && idx > 0, "ok {ok}, div {div}, index {idx}");
    assert!(
        insns / ok > 20,
        "programs are trivially short: {}",
        insns / ok
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_programs_agree_with_the_reference_evaluator(seed in any::<u64>()) {
        let tree = Gen(seed).program();
        let src = tree.to_string();
        let compiled = compile(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let mut inst = ModuleInstance::new(compiled.module);
        let mut refm = reference::Machine::new(&tree);
        // Twice: module variables carry over to the second invocation.
        for round in 0..2 {
            let expected = refm.call("main", vec![]).map(|v| match v {
                reference::V::I(i) => i,
                reference::V::F(_) => panic!("main returned a float"),
            });
            let got = inst
                .invoke(&mut Recorder::new(0, 1, 0), &[], &mut [], 10_000_000)
                .map(|o| o.result)
                .map_err(|e| e.kind);
            prop_assert_eq!(vm_result(got), expected, "round {}\n{}", round, src);
            if expected.is_err() {
                break; // after a trap, module variables may differ mid-update; stop here
            }
        }
    }

    #[test]
    fn printing_and_reparsing_a_program_is_stable(seed in any::<u64>()) {
        let src = Gen(seed).program().to_string();
        let again = outboard_nicvm::parse(&src).unwrap().to_string();
        prop_assert_eq!(src, again);
    }
}
