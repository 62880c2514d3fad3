//! The verifier: decides whether bytecode may run, and builds its runnable form.
//!
//! It runs on every module before it is loaded, whether it came from our
//! compiler or from elsewhere, and checks that:
//!
//! - the module has 1..=`max_functions` functions, a valid entry that takes
//!   no parameters, and at most `max_globals` global slots;
//! - every slot, array and function reference is in range, and every call of
//!   a function or built-in passes exactly as many arguments as it takes;
//! - every jump target is an instruction of the same function and no path
//!   runs off the end of a function;
//! - the operand stack depth is the same on every path into an instruction,
//!   never negative and never above `max_stack` (a dataflow pass);
//!
//! Each rejection names the function, the instruction index and why. After
//! acceptance the interpreter still bounds-checks every access (defence in
//! depth), but a correct verifier means those checks never fire.

use crate::builtins::Builtin;
use crate::bytecode::{Insn, Module, OperandKind};
use crate::limits::Limits;
use crate::program::{FuncMeta, Op, VerifiedModule};

/// A rejected module: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{kind}", location(*.func, *.index))]
pub struct VerifyError {
    /// The function, for problems inside one.
    pub func: Option<u16>,
    /// The instruction index within that function, for problems at one.
    pub index: Option<u32>,
    /// What is wrong.
    pub kind: VerifyErrorKind,
}

fn location(func: Option<u16>, index: Option<u32>) -> String {
    match (func, index) {
        (Some(f), Some(i)) => format!("function {f}, instruction {i}: "),
        (Some(f), None) => format!("function {f}: "),
        _ => String::new(),
    }
}

/// Why the verifier rejected a module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    /// No functions, or more than the limit.
    #[error("function count {0} outside 1..={1}")]
    FunctionCount(usize, usize),
    /// The entry index names no function.
    #[error("entry function {0} does not exist")]
    BadEntry(u16),
    /// The entry function takes parameters.
    #[error("entry function must take no parameters")]
    EntryParams,
    /// Too many global slots.
    #[error("{0} global slots, limit {1}")]
    TooManyGlobals(usize, usize),
    /// A function with no instructions.
    #[error("function has no code")]
    EmptyFunction,
    /// Too many instructions in one function or in the module.
    #[error("{0} instructions, limit {1}")]
    CodeTooLong(usize, usize),
    /// Parameters exceed locals, or locals exceed the limit.
    #[error("{params} parameters and {locals} locals (limit {limit})")]
    BadFrame {
        /// Declared parameters.
        params: u8,
        /// Declared locals.
        locals: u16,
        /// Local slot limit.
        limit: usize,
    },
    /// A local slot outside the frame.
    #[error("local slot {slot} outside 0..{locals}")]
    LocalOutOfRange {
        /// Slot used.
        slot: u32,
        /// Locals the function has.
        locals: u16,
    },
    /// A global slot outside the module's globals.
    #[error("global slot {slot} outside 0..{globals}")]
    GlobalOutOfRange {
        /// Slot used.
        slot: u32,
        /// Globals the module has.
        globals: usize,
    },
    /// An array of length zero.
    #[error("array of length 0")]
    EmptyArray,
    /// A jump to an index that is not an instruction of this function.
    #[error("jump target {target} outside 0..{len}")]
    BadTarget {
        /// Target index.
        target: u32,
        /// Instructions in the function.
        len: usize,
    },
    /// A call of a function that does not exist.
    #[error("call of function {0}, which does not exist")]
    BadCallee(u16),
    /// A built-in id that does not exist (such as a request to load a module).
    #[error("built-in {0} does not exist")]
    BadBuiltin(u8),
    /// A call with the wrong argument count.
    #[error("call passes {given} argument(s), callee takes {takes}")]
    Arity {
        /// Arguments the instruction passes.
        given: u8,
        /// Parameters the callee has.
        takes: usize,
    },
    /// An instruction that pops more than the stack holds.
    #[error("stack underflow: needs {needs}, depth is {depth}")]
    StackUnderflow {
        /// Values the instruction pops.
        needs: usize,
        /// Depth on entry.
        depth: usize,
    },
    /// The operand stack grows past the limit.
    #[error("stack depth {0} exceeds limit {1}")]
    StackTooDeep(usize, usize),
    /// Two paths reach an instruction with different stack depths.
    #[error("inconsistent stack depth: {0} on one path, {1} on another")]
    InconsistentDepth(usize, usize),
    /// The last instruction can fall through past the end of the function.
    #[error("execution can run off the end of the function")]
    FallsOffEnd,
    /// A function's frame does not fit in the instance's value stack.
    #[error("frame of {0} slots exceeds the value stack of {1}")]
    FrameTooLarge(usize, usize),
}

fn at(func: usize, index: usize, kind: VerifyErrorKind) -> VerifyError {
    VerifyError {
        func: Some(func as u16),
        index: Some(index as u32),
        kind,
    }
}

fn module_err(kind: VerifyErrorKind) -> VerifyError {
    VerifyError {
        func: None,
        index: None,
        kind,
    }
}

/// Verifies `m` under `limits` and builds its runnable form.
pub fn verify(m: &Module, limits: &Limits) -> Result<VerifiedModule, VerifyError> {
    let nf = m.functions.len();
    if nf == 0 || nf > limits.max_functions {
        return Err(module_err(VerifyErrorKind::FunctionCount(
            nf,
            limits.max_functions,
        )));
    }
    let entry = m
        .functions
        .get(usize::from(m.entry))
        .ok_or_else(|| module_err(VerifyErrorKind::BadEntry(m.entry)))?;
    if entry.params != 0 {
        return Err(module_err(VerifyErrorKind::EntryParams));
    }
    if m.globals.len() > limits.max_globals {
        return Err(module_err(VerifyErrorKind::TooManyGlobals(
            m.globals.len(),
            limits.max_globals,
        )));
    }
    let total: usize = m.functions.iter().map(|f| f.code.len()).sum();
    if total > limits.max_total_code {
        return Err(module_err(VerifyErrorKind::CodeTooLong(
            total,
            limits.max_total_code,
        )));
    }

    let mut max_stacks = Vec::with_capacity(nf);
    for (fi, _) in m.functions.iter().enumerate() {
        max_stacks.push(check_function(m, fi, limits)?);
    }
    Ok(prepare(m, &max_stacks, limits))
}

/// Static and dataflow checks of one function; returns its max stack depth.
fn check_function(m: &Module, fi: usize, limits: &Limits) -> Result<usize, VerifyError> {
    let f = &m.functions[fi];
    let fn_err = |kind| VerifyError {
        func: Some(fi as u16),
        index: None,
        kind,
    };
    let len = f.code.len();
    if len == 0 {
        return Err(fn_err(VerifyErrorKind::EmptyFunction));
    }
    if len > limits.max_code_len {
        return Err(fn_err(VerifyErrorKind::CodeTooLong(
            len,
            limits.max_code_len,
        )));
    }
    if u16::from(f.params) > f.locals || usize::from(f.locals) > limits.max_locals {
        return Err(fn_err(VerifyErrorKind::BadFrame {
            params: f.params,
            locals: f.locals,
            limit: limits.max_locals,
        }));
    }

    // Static operand checks, on every instruction (reachable or not), and the
    // stack effect of each.
    let mut effects = Vec::with_capacity(len);
    for (i, insn) in f.code.iter().enumerate() {
        effects.push(check_operands(m, fi, i, insn)?);
    }

    // Dataflow over stack depths.
    let mut depth: Vec<Option<usize>> = vec![None; len];
    let mut work = vec![(0usize, 0usize)];
    let mut max = 0usize;
    while let Some((i, d)) = work.pop() {
        let Some(slot) = depth.get_mut(i) else {
            return Err(at(fi, i, VerifyErrorKind::FallsOffEnd));
        };
        match *slot {
            Some(prev) if prev == d => continue,
            Some(prev) => return Err(at(fi, i, VerifyErrorKind::InconsistentDepth(prev, d))),
            None => *slot = Some(d),
        }
        let (insn, (pops, pushes)) = match (f.code.get(i), effects.get(i)) {
            (Some(x), Some(e)) => (x, *e),
            _ => return Err(at(fi, i, VerifyErrorKind::FallsOffEnd)),
        };
        if d < pops {
            return Err(at(
                fi,
                i,
                VerifyErrorKind::StackUnderflow {
                    needs: pops,
                    depth: d,
                },
            ));
        }
        let nd = d - pops + pushes;
        if nd > limits.max_stack {
            return Err(at(
                fi,
                i,
                VerifyErrorKind::StackTooDeep(nd, limits.max_stack),
            ));
        }
        max = max.max(nd).max(d);
        if let Some(t) = insn.target() {
            work.push((t as usize, nd));
        }
        if !insn.is_terminator() {
            if i + 1 >= len {
                return Err(at(fi, i, VerifyErrorKind::FallsOffEnd));
            }
            work.push((i + 1, nd));
        }
    }
    let frame = usize::from(f.locals) + max;
    if frame > limits.max_stack_slots {
        return Err(fn_err(VerifyErrorKind::FrameTooLarge(
            frame,
            limits.max_stack_slots,
        )));
    }
    Ok(max)
}

/// Checks one instruction's operands; returns (pops, pushes).
fn check_operands(
    m: &Module,
    fi: usize,
    i: usize,
    insn: &Insn,
) -> Result<(usize, usize), VerifyError> {
    let f = &m.functions[fi];
    let err = |kind| Err(at(fi, i, kind));
    let local = |slot: u32| -> Result<(), VerifyError> {
        if slot < u32::from(f.locals) {
            Ok(())
        } else {
            Err(at(
                fi,
                i,
                VerifyErrorKind::LocalOutOfRange {
                    slot,
                    locals: f.locals,
                },
            ))
        }
    };
    let global = |slot: u32| -> Result<(), VerifyError> {
        if (slot as usize) < m.globals.len() {
            Ok(())
        } else {
            Err(at(
                fi,
                i,
                VerifyErrorKind::GlobalOutOfRange {
                    slot,
                    globals: m.globals.len(),
                },
            ))
        }
    };
    let info = insn.info();
    let mut effect = (usize::from(info.pops), usize::from(info.pushes));
    match *insn {
        Insn::LoadL(s) | Insn::StoreL(s) => local(u32::from(s.0))?,
        Insn::LoadG(s) | Insn::StoreG(s) => global(u32::from(s.0))?,
        Insn::LoadLA(a) | Insn::StoreLA(a) | Insn::LoadGA(a) | Insn::StoreGA(a) => {
            if a.len == 0 {
                return err(VerifyErrorKind::EmptyArray);
            }
            let last = u32::from(a.base) + u32::from(a.len) - 1;
            if matches!(insn, Insn::LoadLA(_) | Insn::StoreLA(_)) {
                local(last)?;
            } else {
                global(last)?;
            }
        }
        Insn::Jmp(t) | Insn::Jz(t) | Insn::Jnz(t) => {
            if t.0 as usize >= f.code.len() {
                return err(VerifyErrorKind::BadTarget {
                    target: t.0,
                    len: f.code.len(),
                });
            }
        }
        Insn::Call(c) => {
            let callee = m
                .functions
                .get(usize::from(c.func))
                .ok_or_else(|| at(fi, i, VerifyErrorKind::BadCallee(c.func)))?;
            if c.argc != callee.params {
                return err(VerifyErrorKind::Arity {
                    given: c.argc,
                    takes: usize::from(callee.params),
                });
            }
            effect.0 = usize::from(c.argc);
        }
        Insn::Builtin(b) => {
            let bi = Builtin::from_id(b.id)
                .ok_or_else(|| at(fi, i, VerifyErrorKind::BadBuiltin(b.id)))?;
            if usize::from(b.argc) != bi.arity() {
                return err(VerifyErrorKind::Arity {
                    given: b.argc,
                    takes: bi.arity(),
                });
            }
            effect.0 = usize::from(b.argc);
        }
        _ => debug_assert!(matches!(
            info.operand,
            OperandKind::None | OperandKind::I64 | OperandKind::F64
        )),
    }
    Ok(effect)
}

/// Builds the runnable form: flat ops, a `Charge` per basic block, resolved
/// targets. Only called on a module that passed every check.
fn prepare(m: &Module, max_stacks: &[usize], limits: &Limits) -> VerifiedModule {
    // Pass 1: mark block leaders and compute each op's new index.
    let mut leaders: Vec<Vec<bool>> = Vec::with_capacity(m.functions.len());
    let mut new_index: Vec<Vec<u32>> = Vec::with_capacity(m.functions.len());
    let mut next: u32 = 0;
    for f in &m.functions {
        let len = f.code.len();
        let mut lead = vec![false; len];
        if let Some(l) = lead.first_mut() {
            *l = true;
        }
        for (i, insn) in f.code.iter().enumerate() {
            if let Some(t) = insn.target() {
                if let Some(l) = lead.get_mut(t as usize) {
                    *l = true;
                }
            }
            let ends_block = matches!(insn, Insn::Jmp(_) | Insn::Jz(_) | Insn::Jnz(_) | Insn::Ret);
            if ends_block {
                if let Some(l) = lead.get_mut(i + 1) {
                    *l = true;
                }
            }
        }
        let mut idx = Vec::with_capacity(len);
        for &is_leader in &lead {
            if is_leader {
                next += 1; // room for the Charge
            }
            idx.push(next);
            next += 1;
        }
        leaders.push(lead);
        new_index.push(idx);
    }

    // Pass 2: emit.
    let mut code = Vec::with_capacity(next as usize);
    let mut origin = Vec::with_capacity(next as usize);
    let mut funcs = Vec::with_capacity(m.functions.len());
    let mut max_frame = 0usize;
    for (fi, f) in m.functions.iter().enumerate() {
        let lead = &leaders[fi];
        let idx = &new_index[fi];
        // A jump lands on the Charge just before its target.
        let resolve = |t: u32| idx.get(t as usize).map_or(0, |n| n - 1);
        funcs.push(FuncMeta {
            entry_pc: code.len() as u32,
            params: u32::from(f.params),
            locals: u32::from(f.locals),
            max_stack: max_stacks.get(fi).copied().unwrap_or(0) as u32,
        });
        max_frame = max_frame.max(usize::from(f.locals) + max_stacks.get(fi).copied().unwrap_or(0));
        for (i, insn) in f.code.iter().enumerate() {
            if lead[i] {
                let end = lead
                    .iter()
                    .skip(i + 1)
                    .position(|&l| l)
                    .map_or(f.code.len(), |p| i + 1 + p);
                code.push(Op::Charge((end - i) as u32));
                origin.push((fi as u16, i as u32));
            }
            let op = match *insn {
                Insn::Nop => Op::Nop,
                Insn::PushI(v) => Op::Push(v as u64),
                Insn::PushF(v) => Op::Push(v.to_bits()),
                Insn::Pop => Op::Pop,
                Insn::Dup => Op::Dup,
                Insn::LoadL(s) => Op::LoadL(u32::from(s.0)),
                Insn::StoreL(s) => Op::StoreL(u32::from(s.0)),
                Insn::LoadG(s) => Op::LoadG(u32::from(s.0)),
                Insn::StoreG(s) => Op::StoreG(u32::from(s.0)),
                Insn::LoadLA(a) => Op::LoadLA(u32::from(a.base), u32::from(a.len)),
                Insn::StoreLA(a) => Op::StoreLA(u32::from(a.base), u32::from(a.len)),
                Insn::LoadGA(a) => Op::LoadGA(u32::from(a.base), u32::from(a.len)),
                Insn::StoreGA(a) => Op::StoreGA(u32::from(a.base), u32::from(a.len)),
                Insn::AddI => Op::AddI,
                Insn::SubI => Op::SubI,
                Insn::MulI => Op::MulI,
                Insn::DivI => Op::DivI,
                Insn::RemI => Op::RemI,
                Insn::NegI => Op::NegI,
                Insn::And => Op::And,
                Insn::Or => Op::Or,
                Insn::Xor => Op::Xor,
                Insn::Shl => Op::Shl,
                Insn::Shr => Op::Shr,
                Insn::Not => Op::Not,
                Insn::AddF => Op::AddF,
                Insn::SubF => Op::SubF,
                Insn::MulF => Op::MulF,
                Insn::DivF => Op::DivF,
                Insn::NegF => Op::NegF,
                Insn::I2F => Op::I2F,
                Insn::F2I => Op::F2I,
                Insn::EqI => Op::EqI,
                Insn::NeI => Op::NeI,
                Insn::LtI => Op::LtI,
                Insn::LeI => Op::LeI,
                Insn::GtI => Op::GtI,
                Insn::GeI => Op::GeI,
                Insn::EqF => Op::EqF,
                Insn::NeF => Op::NeF,
                Insn::LtF => Op::LtF,
                Insn::LeF => Op::LeF,
                Insn::GtF => Op::GtF,
                Insn::GeF => Op::GeF,
                Insn::Jmp(t) => Op::Jmp(resolve(t.0)),
                Insn::Jz(t) => Op::Jz(resolve(t.0)),
                Insn::Jnz(t) => Op::Jnz(resolve(t.0)),
                Insn::Call(c) => Op::Call(u32::from(c.func)),
                Insn::Ret => Op::Ret,
                // Checked in check_operands; Nop is unreachable in practice.
                Insn::Builtin(b) => Builtin::from_id(b.id).map_or(Op::Nop, Op::Builtin),
            };
            code.push(op);
            origin.push((fi as u16, i as u32));
        }
    }
    VerifiedModule {
        code,
        funcs,
        entry: u32::from(m.entry),
        origin,
        limits: limits.clone(),
        bytecode: m.clone(),
        max_frame,
    }
}
