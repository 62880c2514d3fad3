//! The compiler: syntax tree to bytecode, then through the verifier.
//!
//! It type-checks (two types, no implicit conversions), resolves names
//! (locals, then module-level variables, then constants), folds constant
//! subexpressions that cannot trap, and emits stack code with a source
//! position for every instruction ([`DebugInfo`]) so traps can be reported
//! at a line and column. Its output always goes through [`crate::verify`], so
//! a compiler bug shows up as an error, never as an unsafe module.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ast::{self, BinOp, Expr, ExprKind, Item, Pos, Stmt, Type, UnOp};
use crate::builtins::{self, Builtin};
use crate::bytecode::{ArrayRef, BuiltinRef, CallRef, Function, Insn, Module, Slot, Target};
use crate::error::{CompileError, CompileErrorKind as K};
use crate::limits::Limits;
use crate::parser::parse;
use crate::program::VerifiedModule;
use crate::verifier::{verify, VerifyErrorKind};

/// Source positions of a compiled module's instructions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DebugInfo {
    /// Per function (in bytecode order): its name and each instruction's position.
    pub functions: Vec<(String, Vec<Pos>)>,
}

impl DebugInfo {
    /// The source position of instruction `index` of function `func`.
    pub fn pos(&self, func: u16, index: u32) -> Option<Pos> {
        self.functions
            .get(usize::from(func))
            .and_then(|(_, p)| p.get(index as usize))
            .copied()
    }

    /// The name of function `func`.
    pub fn name(&self, func: u16) -> Option<&str> {
        self.functions
            .get(usize::from(func))
            .map(|(n, _)| n.as_str())
    }
}

/// A compiled and verified module with its debug information.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The verified module, ready for [`crate::ModuleInstance::new`].
    pub module: Arc<VerifiedModule>,
    /// Instruction positions, for reporting traps in source terms.
    pub debug: DebugInfo,
}

impl Compiled {
    /// The bytecode (to encode or disassemble).
    pub fn bytecode(&self) -> &Module {
        self.module.bytecode()
    }
}

/// Compiles and verifies module source under the default [`Limits`].
pub fn compile(src: &str) -> Result<Compiled, CompileError> {
    compile_with(src, &Limits::default())
}

/// Compiles and verifies module source under `limits`.
pub fn compile_with(src: &str, limits: &Limits) -> Result<Compiled, CompileError> {
    let tree = parse(src)?;
    compile_ast(&tree, limits)
}

/// Compiles and verifies a syntax tree.
pub fn compile_ast(tree: &ast::Module, limits: &Limits) -> Result<Compiled, CompileError> {
    let mut c = Compiler::new(limits);
    c.declare(tree)?;
    let mut functions = Vec::new();
    let mut debug = DebugInfo::default();
    for item in &tree.items {
        if let Item::Func(f) = item {
            let (func, lines) = c.function(f)?;
            debug.functions.push((f.name.clone(), lines));
            functions.push(func);
        }
    }
    let (entry, main_pos) = match c.funcs.get("main") {
        Some(sig) => (sig.index, sig.pos),
        None => return Err(CompileError::new(Pos { line: 1, col: 1 }, K::NoMain)),
    };
    if let Some(sig) = c.funcs.get("main") {
        if !sig.params.is_empty() || sig.ret != Type::Int {
            return Err(CompileError::new(main_pos, K::BadMain));
        }
    }
    let module = Module {
        entry,
        globals: c.global_init,
        functions,
    };
    let verified = verify(&module, limits).map_err(|e| {
        let pos = match (e.func, e.index) {
            (Some(f), Some(i)) => debug.pos(f, i),
            _ => None,
        }
        .unwrap_or(main_pos);
        let kind = match e.kind {
            VerifyErrorKind::StackTooDeep(_, limit) => K::Limit {
                what: "operand stack depth",
                limit,
            },
            VerifyErrorKind::CodeTooLong(_, limit) => K::Limit {
                what: "instructions",
                limit,
            },
            VerifyErrorKind::FrameTooLarge(_, limit) => K::Limit {
                what: "frame slots",
                limit,
            },
            _ => K::Internal(e.to_string()),
        };
        CompileError::new(pos, kind)
    })?;
    Ok(Compiled {
        module: Arc::new(verified),
        debug,
    })
}

/// A compile-time constant.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    I(i64),
    F(f64),
}

impl Val {
    fn ty(self) -> Type {
        match self {
            Val::I(_) => Type::Int,
            Val::F(_) => Type::Float,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Var {
    slot: u16,
    ty: Type,
    len: Option<u16>,
}

#[derive(Debug, Clone)]
struct Sig {
    index: u16,
    params: Vec<Type>,
    ret: Type,
    pos: Pos,
}

struct Compiler<'a> {
    limits: &'a Limits,
    consts: BTreeMap<String, Val>,
    globals: BTreeMap<String, Var>,
    global_init: Vec<u64>,
    funcs: BTreeMap<String, Sig>,
}

/// State while compiling one function.
struct Fx {
    locals: BTreeMap<String, Var>,
    nlocals: usize,
    code: Vec<Insn>,
    lines: Vec<Pos>,
    ret: Type,
}

type CResult<T> = Result<T, CompileError>;

fn err<T>(pos: Pos, kind: K) -> CResult<T> {
    Err(CompileError::new(pos, kind))
}

const CONVERT_HINT: &str = " (convert with int(...) or float(...))";

impl<'a> Compiler<'a> {
    fn new(limits: &'a Limits) -> Self {
        Compiler {
            limits,
            consts: BTreeMap::new(),
            globals: BTreeMap::new(),
            global_init: Vec::new(),
            funcs: BTreeMap::new(),
        }
    }

    /// First pass: constants, module-level variables, function signatures
    /// (so functions may call each other in any order).
    fn declare(&mut self, tree: &ast::Module) -> CResult<()> {
        for item in &tree.items {
            match item {
                Item::Const(c) => {
                    self.check_new_value_name(&c.name, c.pos)?;
                    let v = self
                        .const_eval(&c.value, None)
                        .ok_or_else(|| self.const_error(&c.value))?;
                    self.consts.insert(c.name.clone(), v);
                }
                Item::Var(v) => {
                    self.check_new_value_name(&v.name, v.pos)?;
                    let len = self.array_len(v)?;
                    let n = usize::from(len.unwrap_or(1));
                    let slot = self.global_init.len();
                    if slot + n > self.limits.max_globals {
                        return err(
                            v.pos,
                            K::Limit {
                                what: "module-level slots",
                                limit: self.limits.max_globals,
                            },
                        );
                    }
                    let init = match &v.init {
                        None => 0,
                        Some(_) if len.is_some() => return err(v.pos, K::ArrayInit),
                        Some(e) => {
                            let val = self
                                .const_eval(e, None)
                                .ok_or_else(|| self.const_error(e))?;
                            if val.ty() != v.ty {
                                return err(
                                    e.pos,
                                    K::TypeMismatch {
                                        expected: v.ty,
                                        found: val.ty(),
                                        hint: CONVERT_HINT,
                                    },
                                );
                            }
                            bits(val)
                        }
                    };
                    self.global_init.push(init);
                    self.global_init.resize(slot + n, 0);
                    self.globals.insert(
                        v.name.clone(),
                        Var {
                            slot: slot as u16,
                            ty: v.ty,
                            len,
                        },
                    );
                }
                Item::Func(f) => {
                    if Builtin::by_name(&f.name).is_some() {
                        return err(f.pos, K::Reserved(f.name.clone()));
                    }
                    if self.funcs.contains_key(&f.name) {
                        return err(f.pos, K::Duplicate(f.name.clone()));
                    }
                    let index = self.funcs.len();
                    if index >= self.limits.max_functions || index > usize::from(u16::MAX) {
                        return err(
                            f.pos,
                            K::Limit {
                                what: "functions",
                                limit: self.limits.max_functions,
                            },
                        );
                    }
                    if f.params.len() > usize::from(u8::MAX) {
                        return err(
                            f.pos,
                            K::Limit {
                                what: "parameters",
                                limit: usize::from(u8::MAX),
                            },
                        );
                    }
                    self.funcs.insert(
                        f.name.clone(),
                        Sig {
                            index: index as u16,
                            params: f.params.iter().map(|p| p.ty).collect(),
                            ret: f.ret,
                            pos: f.pos,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn check_new_value_name(&self, name: &str, pos: Pos) -> CResult<()> {
        if builtins::constant(name).is_some() {
            return err(pos, K::Reserved(name.to_string()));
        }
        if self.consts.contains_key(name) || self.globals.contains_key(name) {
            return err(pos, K::Duplicate(name.to_string()));
        }
        Ok(())
    }

    fn const_error(&self, e: &Expr) -> CompileError {
        // Name the most helpful reason: a division by zero, else "not constant".
        if contains_const_div_zero(self, e) {
            CompileError::new(e.pos, K::ConstDivByZero)
        } else {
            CompileError::new(e.pos, K::NotConstant)
        }
    }

    fn array_len(&self, v: &ast::VarDecl) -> CResult<Option<u16>> {
        let Some(len) = &v.len else { return Ok(None) };
        let limit = self
            .limits
            .max_locals
            .max(self.limits.max_globals)
            .min(usize::from(u16::MAX));
        match self.const_eval(len, None) {
            Some(Val::I(n)) if n >= 1 && (n as u64) <= limit as u64 => Ok(Some(n as u16)),
            Some(Val::I(n)) => err(len.pos, K::BadArrayLen(n, limit)),
            Some(Val::F(_)) => err(
                len.pos,
                K::TypeMismatch {
                    expected: Type::Int,
                    found: Type::Float,
                    hint: "",
                },
            ),
            None => Err(self.const_error(len)),
        }
    }

    // ---- constant folding ------------------------------------------------

    /// The value of `e` if it is a constant that evaluates without a trap.
    /// Local and module variables are never constant.
    fn const_eval(&self, e: &Expr, fx: Option<&Fx>) -> Option<Val> {
        match &e.kind {
            ExprKind::Int(v) => Some(Val::I(*v)),
            ExprKind::Float(v) => Some(Val::F(*v)),
            ExprKind::Name(n) => {
                if fx.is_some_and(|f| f.locals.contains_key(n)) || self.globals.contains_key(n) {
                    return None;
                }
                self.consts
                    .get(n)
                    .copied()
                    .or_else(|| builtins::constant(n).map(Val::I))
            }
            ExprKind::Unary(op, x) => fold_unary(*op, self.const_eval(x, fx)?),
            ExprKind::Binary(op, a, b) => {
                fold_binary(*op, self.const_eval(a, fx)?, self.const_eval(b, fx)?)
            }
            ExprKind::Call(name, args) if args.len() == 1 && (name == "int" || name == "float") => {
                let v = self.const_eval(args.first()?, fx)?;
                Some(match (name.as_str(), v) {
                    ("int", Val::F(f)) => Val::I(f as i64),
                    ("float", Val::I(i)) => Val::F(i as f64),
                    _ => v,
                })
            }
            ExprKind::Index(..) | ExprKind::Call(..) => None,
        }
    }

    // ---- functions -------------------------------------------------------

    fn function(&mut self, f: &ast::FuncDecl) -> CResult<(Function, Vec<Pos>)> {
        let mut fx = Fx {
            locals: BTreeMap::new(),
            nlocals: 0,
            code: Vec::new(),
            lines: Vec::new(),
            ret: f.ret,
        };
        for p in &f.params {
            self.declare_local(&mut fx, &p.name, p.ty, None, p.pos)?;
        }
        self.block(&mut fx, &f.body)?;
        // Falling off the end returns zero of the result type.
        let end = f.pos;
        let zero = match f.ret {
            Type::Int => Insn::PushI(0),
            Type::Float => Insn::PushF(0.0),
        };
        emit(&mut fx, zero, end);
        emit(&mut fx, Insn::Ret, end);
        Ok((
            Function {
                name: f.name.clone(),
                params: f.params.len() as u8,
                locals: fx.nlocals as u16,
                code: fx.code,
            },
            fx.lines,
        ))
    }

    fn declare_local(
        &self,
        fx: &mut Fx,
        name: &str,
        ty: Type,
        len: Option<u16>,
        pos: Pos,
    ) -> CResult<Var> {
        if builtins::constant(name).is_some() || self.consts.contains_key(name) {
            return err(pos, K::Reserved(name.to_string()));
        }
        if fx.locals.contains_key(name) {
            return err(pos, K::Duplicate(name.to_string()));
        }
        let n = usize::from(len.unwrap_or(1));
        if fx.nlocals + n > self.limits.max_locals || fx.nlocals + n > usize::from(u16::MAX) {
            return err(
                pos,
                K::Limit {
                    what: "local slots",
                    limit: self.limits.max_locals,
                },
            );
        }
        let var = Var {
            slot: fx.nlocals as u16,
            ty,
            len,
        };
        fx.nlocals += n;
        fx.locals.insert(name.to_string(), var);
        Ok(var)
    }

    fn block(&mut self, fx: &mut Fx, body: &[Stmt]) -> CResult<()> {
        for s in body {
            self.stmt(fx, s)?;
        }
        Ok(())
    }

    fn stmt(&mut self, fx: &mut Fx, s: &Stmt) -> CResult<()> {
        match s {
            Stmt::Var(v) => {
                let len = self.array_len(v)?;
                if len.is_some() && v.init.is_some() {
                    return err(v.pos, K::ArrayInit);
                }
                let var = self.declare_local(fx, &v.name, v.ty, len, v.pos)?;
                if let Some(init) = &v.init {
                    self.expect(fx, init, v.ty)?;
                    emit(fx, Insn::StoreL(Slot(var.slot)), v.pos);
                }
                Ok(())
            }
            Stmt::Assign {
                name,
                index,
                value,
                pos,
            } => {
                let (var, global) = self.lookup_var(fx, name, *pos)?;
                match (index, var.len) {
                    (None, None) => {
                        self.expect(fx, value, var.ty)?;
                        let slot = Slot(var.slot);
                        emit(
                            fx,
                            if global {
                                Insn::StoreG(slot)
                            } else {
                                Insn::StoreL(slot)
                            },
                            *pos,
                        );
                    }
                    (Some(i), Some(len)) => {
                        self.expect(fx, i, Type::Int)?;
                        self.expect(fx, value, var.ty)?;
                        let a = ArrayRef {
                            base: var.slot,
                            len,
                        };
                        emit(
                            fx,
                            if global {
                                Insn::StoreGA(a)
                            } else {
                                Insn::StoreLA(a)
                            },
                            *pos,
                        );
                    }
                    (None, Some(_)) => {
                        return err(
                            *pos,
                            K::Shape(name.clone(), "an array; assign to an element"),
                        )
                    }
                    (Some(_), None) => return err(*pos, K::Shape(name.clone(), "not an array")),
                }
                Ok(())
            }
            Stmt::Call(e) => {
                self.expr(fx, e)?;
                emit(fx, Insn::Pop, e.pos);
                Ok(())
            }
            Stmt::If {
                arms, otherwise, ..
            } => {
                let mut to_end = Vec::new();
                for (k, (cond, body)) in arms.iter().enumerate() {
                    self.expect(fx, cond, Type::Int)?;
                    let skip = emit(fx, Insn::Jz(Target(0)), cond.pos);
                    self.block(fx, body)?;
                    // The last arm without an `else` just falls through.
                    if k + 1 < arms.len() || otherwise.is_some() {
                        to_end.push(emit(fx, Insn::Jmp(Target(0)), cond.pos));
                    }
                    patch(fx, skip);
                }
                if let Some(body) = otherwise {
                    self.block(fx, body)?;
                }
                for j in to_end {
                    patch(fx, j);
                }
                Ok(())
            }
            Stmt::While { cond, body, pos } => {
                let top = fx.code.len() as u32;
                self.expect(fx, cond, Type::Int)?;
                let exit = emit(fx, Insn::Jz(Target(0)), cond.pos);
                self.block(fx, body)?;
                emit(fx, Insn::Jmp(Target(top)), *pos);
                patch(fx, exit);
                Ok(())
            }
            Stmt::Return { value, pos } => {
                match value {
                    Some(v) => self.expect(fx, v, fx.ret)?,
                    None => {
                        let zero = match fx.ret {
                            Type::Int => Insn::PushI(0),
                            Type::Float => Insn::PushF(0.0),
                        };
                        emit(fx, zero, *pos);
                    }
                }
                emit(fx, Insn::Ret, *pos);
                Ok(())
            }
        }
    }

    fn lookup_var(&self, fx: &Fx, name: &str, pos: Pos) -> CResult<(Var, bool)> {
        if let Some(v) = fx.locals.get(name) {
            return Ok((*v, false));
        }
        if let Some(v) = self.globals.get(name) {
            return Ok((*v, true));
        }
        if self.consts.contains_key(name) || builtins::constant(name).is_some() {
            return err(pos, K::AssignToConst(name.to_string()));
        }
        err(pos, K::UnknownName(name.to_string()))
    }

    // ---- expressions -----------------------------------------------------

    /// Compiles `e` and checks it has type `want`.
    fn expect(&mut self, fx: &mut Fx, e: &Expr, want: Type) -> CResult<()> {
        let got = self.expr(fx, e)?;
        if got != want {
            return err(
                e.pos,
                K::TypeMismatch {
                    expected: want,
                    found: got,
                    hint: CONVERT_HINT,
                },
            );
        }
        Ok(())
    }

    fn expr(&mut self, fx: &mut Fx, e: &Expr) -> CResult<Type> {
        if let Some(v) = self.const_eval(e, Some(fx)) {
            let insn = match v {
                Val::I(i) => Insn::PushI(i),
                Val::F(f) => Insn::PushF(f),
            };
            emit(fx, insn, e.pos);
            return Ok(v.ty());
        }
        let pos = e.pos;
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) => {
                err(pos, K::Internal("unfolded literal".into()))
            }
            ExprKind::Name(n) => {
                if let Some(v) = fx.locals.get(n).copied() {
                    if v.len.is_some() {
                        return err(pos, K::Shape(n.clone(), "an array; index it"));
                    }
                    emit(fx, Insn::LoadL(Slot(v.slot)), pos);
                    Ok(v.ty)
                } else if let Some(v) = self.globals.get(n).copied() {
                    if v.len.is_some() {
                        return err(pos, K::Shape(n.clone(), "an array; index it"));
                    }
                    emit(fx, Insn::LoadG(Slot(v.slot)), pos);
                    Ok(v.ty)
                } else {
                    err(pos, K::UnknownName(n.clone()))
                }
            }
            ExprKind::Index(n, i) => {
                let (var, global) = match fx.locals.get(n) {
                    Some(v) => (*v, false),
                    None => match self.globals.get(n) {
                        Some(v) => (*v, true),
                        None => return err(pos, K::UnknownName(n.clone())),
                    },
                };
                let Some(len) = var.len else {
                    return err(pos, K::Shape(n.clone(), "not an array"));
                };
                self.expect(fx, i, Type::Int)?;
                let a = ArrayRef {
                    base: var.slot,
                    len,
                };
                emit(
                    fx,
                    if global {
                        Insn::LoadGA(a)
                    } else {
                        Insn::LoadLA(a)
                    },
                    pos,
                );
                Ok(var.ty)
            }
            ExprKind::Call(name, args) => self.call(fx, name, args, pos),
            ExprKind::Unary(UnOp::Neg, x) => match self.expr(fx, x)? {
                Type::Int => {
                    emit(fx, Insn::NegI, pos);
                    Ok(Type::Int)
                }
                Type::Float => {
                    emit(fx, Insn::NegF, pos);
                    Ok(Type::Float)
                }
            },
            ExprKind::Unary(UnOp::Not, x) => {
                self.expect_operand(fx, x, "not")?;
                emit(fx, Insn::Not, pos);
                Ok(Type::Int)
            }
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                // Short circuit; the result is 0 or 1.
                let (jump, early): (fn(Target) -> Insn, i64) = if *op == BinOp::And {
                    (Insn::Jz, 0)
                } else {
                    (Insn::Jnz, 1)
                };
                self.expect_operand(fx, a, op.symbol())?;
                let j1 = emit(fx, jump(Target(0)), pos);
                self.expect_operand(fx, b, op.symbol())?;
                let j2 = emit(fx, jump(Target(0)), pos);
                emit(fx, Insn::PushI(1 - early), pos);
                let done = emit(fx, Insn::Jmp(Target(0)), pos);
                patch(fx, j1);
                patch(fx, j2);
                emit(fx, Insn::PushI(early), pos);
                patch(fx, done);
                Ok(Type::Int)
            }
            ExprKind::Binary(op, a, b) => {
                let ta = self.expr(fx, a)?;
                let tb = self.expr(fx, b)?;
                if ta != tb {
                    return err(
                        b.pos,
                        K::TypeMismatch {
                            expected: ta,
                            found: tb,
                            hint: CONVERT_HINT,
                        },
                    );
                }
                let insn = match (ta, op) {
                    (Type::Int, BinOp::Add) => Insn::AddI,
                    (Type::Int, BinOp::Sub) => Insn::SubI,
                    (Type::Int, BinOp::Mul) => Insn::MulI,
                    (Type::Int, BinOp::Div) => Insn::DivI,
                    (Type::Int, BinOp::Rem) => Insn::RemI,
                    (Type::Int, BinOp::BitAnd) => Insn::And,
                    (Type::Int, BinOp::BitOr) => Insn::Or,
                    (Type::Int, BinOp::BitXor) => Insn::Xor,
                    (Type::Int, BinOp::Shl) => Insn::Shl,
                    (Type::Int, BinOp::Shr) => Insn::Shr,
                    (Type::Int, BinOp::Eq) => Insn::EqI,
                    (Type::Int, BinOp::Ne) => Insn::NeI,
                    (Type::Int, BinOp::Lt) => Insn::LtI,
                    (Type::Int, BinOp::Le) => Insn::LeI,
                    (Type::Int, BinOp::Gt) => Insn::GtI,
                    (Type::Int, BinOp::Ge) => Insn::GeI,
                    (Type::Float, BinOp::Add) => Insn::AddF,
                    (Type::Float, BinOp::Sub) => Insn::SubF,
                    (Type::Float, BinOp::Mul) => Insn::MulF,
                    (Type::Float, BinOp::Div) => Insn::DivF,
                    (Type::Float, BinOp::Eq) => Insn::EqF,
                    (Type::Float, BinOp::Ne) => Insn::NeF,
                    (Type::Float, BinOp::Lt) => Insn::LtF,
                    (Type::Float, BinOp::Le) => Insn::LeF,
                    (Type::Float, BinOp::Gt) => Insn::GtF,
                    (Type::Float, BinOp::Ge) => Insn::GeF,
                    (ty, op) => {
                        return err(
                            pos,
                            K::BadOperand {
                                op: op.symbol(),
                                ty,
                            },
                        )
                    }
                };
                emit(fx, insn, pos);
                Ok(if op.is_comparison() { Type::Int } else { ta })
            }
        }
    }

    fn expect_operand(&mut self, fx: &mut Fx, e: &Expr, op: &'static str) -> CResult<()> {
        match self.expr(fx, e)? {
            Type::Int => Ok(()),
            ty => err(e.pos, K::BadOperand { op, ty }),
        }
    }

    fn call(&mut self, fx: &mut Fx, name: &str, args: &[Expr], pos: Pos) -> CResult<Type> {
        let arity = |expected: usize| -> CResult<()> {
            if args.len() != expected {
                return err(
                    pos,
                    K::Arity {
                        name: name.to_string(),
                        expected,
                        found: args.len(),
                    },
                );
            }
            Ok(())
        };
        if name == "int" || name == "float" {
            arity(1)?;
            let Some(a) = args.first() else {
                return err(pos, K::Internal("conversion without argument".into()));
            };
            let from = self.expr(fx, a)?;
            return Ok(match (name, from) {
                ("int", Type::Float) => {
                    emit(fx, Insn::F2I, pos);
                    Type::Int
                }
                ("float", Type::Int) => {
                    emit(fx, Insn::I2F, pos);
                    Type::Float
                }
                (_, t) => t,
            });
        }
        if let Some(b) = Builtin::by_name(name) {
            let info = b.info();
            arity(info.params.len())?;
            for (a, ty) in args.iter().zip(info.params) {
                self.expect(fx, a, *ty)?;
            }
            emit(
                fx,
                Insn::Builtin(BuiltinRef {
                    id: b as u8,
                    argc: info.params.len() as u8,
                }),
                pos,
            );
            return Ok(info.ret);
        }
        let Some(sig) = self.funcs.get(name).cloned() else {
            return err(pos, K::UnknownFunction(name.to_string()));
        };
        arity(sig.params.len())?;
        for (a, ty) in args.iter().zip(&sig.params) {
            self.expect(fx, a, *ty)?;
        }
        emit(
            fx,
            Insn::Call(CallRef {
                func: sig.index,
                argc: sig.params.len() as u8,
            }),
            pos,
        );
        Ok(sig.ret)
    }
}

fn emit(fx: &mut Fx, insn: Insn, pos: Pos) -> usize {
    fx.code.push(insn);
    fx.lines.push(pos);
    fx.code.len() - 1
}

/// Points the jump at `at` to the next instruction to be emitted.
fn patch(fx: &mut Fx, at: usize) {
    let here = Target(fx.code.len() as u32);
    if let Some(insn) = fx.code.get_mut(at) {
        *insn = match *insn {
            Insn::Jmp(_) => Insn::Jmp(here),
            Insn::Jz(_) => Insn::Jz(here),
            Insn::Jnz(_) => Insn::Jnz(here),
            other => other,
        };
    }
}

fn bits(v: Val) -> u64 {
    match v {
        Val::I(i) => i as u64,
        Val::F(f) => f.to_bits(),
    }
}

fn fold_unary(op: UnOp, v: Val) -> Option<Val> {
    Some(match (op, v) {
        (UnOp::Neg, Val::I(i)) => Val::I(i.wrapping_neg()),
        (UnOp::Neg, Val::F(f)) => Val::F(-f),
        (UnOp::Not, Val::I(i)) => Val::I(i64::from(i == 0)),
        (UnOp::Not, Val::F(_)) => return None,
    })
}

/// Folds a binary operation with the interpreter's semantics; `None` for a
/// type error (reported later) or a trap (left for run time).
fn fold_binary(op: BinOp, a: Val, b: Val) -> Option<Val> {
    Some(match (a, b) {
        (Val::I(a), Val::I(b)) => Val::I(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div if b != 0 => a.wrapping_div(b),
            BinOp::Rem if b != 0 => a.wrapping_rem(b),
            BinOp::Div | BinOp::Rem => return None,
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Shl => a.wrapping_shl(b as u32),
            BinOp::Shr => a.wrapping_shr(b as u32),
            BinOp::Eq => i64::from(a == b),
            BinOp::Ne => i64::from(a != b),
            BinOp::Lt => i64::from(a < b),
            BinOp::Le => i64::from(a <= b),
            BinOp::Gt => i64::from(a > b),
            BinOp::Ge => i64::from(a >= b),
            BinOp::And => i64::from(a != 0 && b != 0),
            BinOp::Or => i64::from(a != 0 || b != 0),
        }),
        (Val::F(a), Val::F(b)) => match op {
            BinOp::Add => Val::F(a + b),
            BinOp::Sub => Val::F(a - b),
            BinOp::Mul => Val::F(a * b),
            BinOp::Div => Val::F(a / b),
            BinOp::Eq => Val::I(i64::from(a == b)),
            BinOp::Ne => Val::I(i64::from(a != b)),
            BinOp::Lt => Val::I(i64::from(a < b)),
            BinOp::Le => Val::I(i64::from(a <= b)),
            BinOp::Gt => Val::I(i64::from(a > b)),
            BinOp::Ge => Val::I(i64::from(a >= b)),
            _ => return None,
        },
        _ => return None,
    })
}

/// True if `e` is made of constants and has an integer division by zero.
fn contains_const_div_zero(c: &Compiler<'_>, e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Binary(BinOp::Div | BinOp::Rem, a, b) => {
            matches!(c.const_eval(b, None), Some(Val::I(0)))
                && matches!(c.const_eval(a, None), Some(Val::I(_)))
                || contains_const_div_zero(c, a)
                || contains_const_div_zero(c, b)
        }
        ExprKind::Binary(_, a, b) => contains_const_div_zero(c, a) || contains_const_div_zero(c, b),
        ExprKind::Unary(_, x) => contains_const_div_zero(c, x),
        _ => false,
    }
}
