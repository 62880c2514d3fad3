//! The runnable form of a module, which only the verifier builds.
//!
//! Bytecode is decoded once into a flat vector of [`Op`]s for all functions,
//! with a [`Op::Charge`] at the head of every basic block carrying the
//! block's instruction count: the interpreter pays fuel once per block with
//! one `checked_sub` instead of once per instruction. Jump and call targets
//! are resolved to indices into that vector.

use crate::builtins::Builtin;
use crate::bytecode::Module;
use crate::limits::Limits;

/// One pre-decoded operation. Operands have been validated by the verifier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    /// Pay this many instructions of fuel (head of a basic block).
    Charge(u32),
    Nop,
    /// Push a word (an int, or the bits of a float).
    Push(u64),
    Pop,
    Dup,
    LoadL(u32),
    StoreL(u32),
    LoadG(u32),
    StoreG(u32),
    LoadLA(u32, u32),
    StoreLA(u32, u32),
    LoadGA(u32, u32),
    StoreGA(u32, u32),
    AddI,
    SubI,
    MulI,
    DivI,
    RemI,
    NegI,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Not,
    AddF,
    SubF,
    MulF,
    DivF,
    NegF,
    I2F,
    F2I,
    EqI,
    NeI,
    LtI,
    LeI,
    GtI,
    GeI,
    EqF,
    NeF,
    LtF,
    LeF,
    GtF,
    GeF,
    /// Absolute index into the op vector.
    Jmp(u32),
    Jz(u32),
    Jnz(u32),
    /// Index into the function table.
    Call(u32),
    Ret,
    Builtin(Builtin),
}

/// Per-function facts the interpreter needs at a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FuncMeta {
    /// Index of the function's first op (its entry block's `Charge`).
    pub entry_pc: u32,
    /// Parameters (the first locals).
    pub params: u32,
    /// Local slots, parameters included.
    pub locals: u32,
    /// Maximum operand stack depth the verifier proved.
    pub max_stack: u32,
}

/// A module the verifier accepted: the only thing the interpreter runs.
///
/// Build one with [`crate::verify`] (from bytecode) or [`crate::compile`]
/// (from source). It is immutable and can be shared (`Arc`) by several
/// [`crate::ModuleInstance`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedModule {
    pub(crate) code: Vec<Op>,
    pub(crate) funcs: Vec<FuncMeta>,
    pub(crate) entry: u32,
    /// Original (function, instruction index) of each op, for error reports.
    pub(crate) origin: Vec<(u16, u32)>,
    pub(crate) limits: Limits,
    pub(crate) bytecode: Module,
    /// Largest frame (locals + operand stack) of any function.
    pub(crate) max_frame: usize,
}

impl VerifiedModule {
    /// The bytecode this was built from (to encode it, or disassemble it).
    pub fn bytecode(&self) -> &Module {
        &self.bytecode
    }

    /// The limits it was verified under and will run under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Number of bytecode instructions, all functions together (a size
    /// measure for registries with a memory budget).
    pub fn code_len(&self) -> usize {
        self.bytecode.functions.iter().map(|f| f.code.len()).sum()
    }

    /// Value-stack slots an instance of this module preallocates.
    pub fn stack_slots(&self) -> usize {
        self.max_frame
            .saturating_mul(self.limits.max_call_depth.saturating_add(1))
            .min(self.limits.max_stack_slots)
            .max(self.max_frame)
    }
}
