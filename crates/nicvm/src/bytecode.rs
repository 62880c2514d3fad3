//! The bytecode: the instruction set as one table, its binary encoding, and
//! the module container.
//!
//! The instruction set is declared once (the `isa!` table below); the
//! [`Insn`] enum, the [`opcode`] constants, the [`INSTRUCTIONS`] table used
//! by the assembler and disassembler, and the encoder and decoder are all
//! generated from it, so they cannot disagree. Every instruction is one
//! opcode byte followed by a fixed-size little-endian operand.
//!
//! It is a stack machine: values are untyped 64-bit words (an `int` or the
//! bits of a `float`), so no sequence of instructions can break memory safety
//! by confusing types; the verifier checks only shapes (stack depth, indices,
//! targets, arities).
//!
//! # Module format (version 1)
//!
//! ```text
//! magic   "NVM" 0x01
//! u16     entry function index
//! u16     global slot count, then that many u64 initial values
//! u16     function count, then per function:
//!         u8 name length, name (ASCII), u8 params, u16 locals (params included),
//!         u32 code length in bytes, code
//! ```
//! All integers little-endian; nothing may follow the last function.

use std::fmt;

/// First four bytes of an encoded module ("NVM", format version 1).
pub const MAGIC: [u8; 4] = *b"NVM\x01";

/// A local or global slot index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot(pub u16);

/// A fixed-size array of slots: `len` slots from `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArrayRef {
    /// First slot.
    pub base: u16,
    /// Element count; an index outside `0..len` traps.
    pub len: u16,
}

/// A jump target: an instruction index within the same function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target(pub u32);

/// A call of function `func` with `argc` arguments (checked against the
/// callee's parameter count by the verifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallRef {
    /// Callee index in the module's function table.
    pub func: u16,
    /// Arguments the caller passes.
    pub argc: u8,
}

/// A call of built-in `id` with `argc` arguments (checked against the
/// built-in's arity by the verifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuiltinRef {
    /// Built-in id (see [`crate::builtins::BUILTINS`]).
    pub id: u8,
    /// Arguments the caller passes.
    pub argc: u8,
}

/// The operand shape of an instruction, for the assembler and disassembler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandKind {
    /// No operand.
    None,
    /// An `i64` immediate.
    I64,
    /// An `f64` immediate.
    F64,
    /// A [`Slot`].
    Slot,
    /// An [`ArrayRef`].
    Array,
    /// A [`Target`].
    Target,
    /// A [`CallRef`].
    Call,
    /// A [`BuiltinRef`].
    Builtin,
}

/// Static facts about one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsnInfo {
    /// Its opcode byte.
    pub opcode: u8,
    /// Its assembler mnemonic.
    pub mnemonic: &'static str,
    /// Its operand.
    pub operand: OperandKind,
    /// Values popped (for calls: beyond the arguments, which the operand says).
    pub pops: u8,
    /// Values pushed.
    pub pushes: u8,
}

/// Why bytes are not a well-formed module or instruction stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bytecode offset {offset}: {kind}")]
pub struct DecodeError {
    /// Byte offset of the problem.
    pub offset: usize,
    /// What it is.
    pub kind: DecodeErrorKind,
}

/// The kinds of [`DecodeError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The input ends inside a field.
    #[error("truncated")]
    Truncated,
    /// The input does not start with [`MAGIC`].
    #[error("bad magic (not a NICVM module, or another format version)")]
    BadMagic,
    /// A byte that is no opcode.
    #[error("unknown opcode {0:#04x}")]
    BadOpcode(u8),
    /// A function name that is not ASCII.
    #[error("function name is not ASCII")]
    BadName,
    /// Bytes after the last function.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// A cursor over bytes that never reads past the end.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    base: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes`; offsets in errors are relative to `base`.
    pub fn new(bytes: &'a [u8], base: usize) -> Self {
        Reader { bytes, at: 0, base }
    }

    /// Current absolute offset.
    pub fn offset(&self) -> usize {
        self.base + self.at
    }

    /// True once every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn err(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            offset: self.offset(),
            kind,
        }
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or_else(|| self.err(DecodeErrorKind::Truncated))?;
        let s = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| self.err(DecodeErrorKind::Truncated))?;
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    /// Reads a little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// An operand type: how it is encoded.
trait Operand: Sized {
    const KIND: OperandKind;
    fn put(&self, out: &mut Vec<u8>);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

impl Operand for i64 {
    const KIND: OperandKind = OperandKind::I64;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(r.u64()? as i64)
    }
}

impl Operand for f64 {
    const KIND: OperandKind = OperandKind::F64;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(f64::from_bits(r.u64()?))
    }
}

impl Operand for Slot {
    const KIND: OperandKind = OperandKind::Slot;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Slot(r.u16()?))
    }
}

impl Operand for ArrayRef {
    const KIND: OperandKind = OperandKind::Array;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.base.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ArrayRef {
            base: r.u16()?,
            len: r.u16()?,
        })
    }
}

impl Operand for Target {
    const KIND: OperandKind = OperandKind::Target;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Target(r.u32()?))
    }
}

impl Operand for CallRef {
    const KIND: OperandKind = OperandKind::Call;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.func.to_le_bytes());
        out.push(self.argc);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(CallRef {
            func: r.u16()?,
            argc: r.u8()?,
        })
    }
}

impl Operand for BuiltinRef {
    const KIND: OperandKind = OperandKind::Builtin;
    fn put(&self, out: &mut Vec<u8>) {
        out.push(self.id);
        out.push(self.argc);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(BuiltinRef {
            id: r.u8()?,
            argc: r.u8()?,
        })
    }
}

macro_rules! isa {
    ($( $(#[doc = $doc:literal])* $code:literal $name:ident $mn:literal [$pops:literal -> $pushes:literal] $(($ty:ty))? ;)*) => {
        /// One decoded instruction. See the crate's language reference for
        /// what each does; the opcode byte of each is in [`opcode`].
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub enum Insn {
            $( $(#[doc = $doc])* $name $(($ty))?, )*
        }

        /// Opcode bytes, one constant per instruction.
        #[allow(non_upper_case_globals)]
        pub mod opcode {
            $( #[doc = concat!("Opcode of `", $mn, "`.")] pub const $name: u8 = $code; )*
        }

        /// Every instruction, in opcode order.
        pub const INSTRUCTIONS: &[InsnInfo] = &[
            $( InsnInfo {
                opcode: $code,
                mnemonic: $mn,
                operand: isa!(@kind $($ty)?),
                pops: $pops,
                pushes: $pushes,
            }, )*
        ];

        impl Insn {
            /// This instruction's opcode byte.
            pub fn opcode(&self) -> u8 {
                match self {
                    $( isa!(@pat $name $($ty)?) => $code, )*
                }
            }

            /// Appends the encoding of this instruction.
            pub fn encode(&self, out: &mut Vec<u8>) {
                match self {
                    $( isa!(@bind $name operand $($ty)?) => {
                        out.push($code);
                        isa!(@put out operand $($ty)?);
                    } )*
                }
            }

            /// Decodes one instruction.
            pub fn decode(r: &mut Reader<'_>) -> Result<Insn, DecodeError> {
                let at = r.offset();
                let code = r.u8()?;
                match code {
                    $( $code => Ok(isa!(@build $name r $($ty)?)), )*
                    other => Err(DecodeError { offset: at, kind: DecodeErrorKind::BadOpcode(other) }),
                }
            }
        }
    };
    (@kind) => { OperandKind::None };
    (@kind $ty:ty) => { <$ty as Operand>::KIND };
    (@pat $name:ident) => { Insn::$name };
    (@pat $name:ident $ty:ty) => { Insn::$name(_) };
    (@bind $name:ident $v:ident) => { Insn::$name };
    (@bind $name:ident $v:ident $ty:ty) => { Insn::$name($v) };
    (@put $out:ident $v:ident) => { () };
    (@put $out:ident $v:ident $ty:ty) => { Operand::put($v, $out) };
    (@build $name:ident $r:ident) => { Insn::$name };
    (@build $name:ident $r:ident $ty:ty) => { Insn::$name(<$ty as Operand>::get($r)?) };
}

isa! {
    /// Does nothing.
    0x00 Nop "nop" [0 -> 0];
    /// Pushes an integer constant.
    0x01 PushI "push.i" [0 -> 1] (i64);
    /// Pushes a float constant.
    0x02 PushF "push.f" [0 -> 1] (f64);
    /// Discards the top value.
    0x03 Pop "pop" [1 -> 0];
    /// Duplicates the top value.
    0x04 Dup "dup" [1 -> 2];
    /// Pushes a local slot of the current frame.
    0x08 LoadL "load.l" [0 -> 1] (Slot);
    /// Pops into a local slot.
    0x09 StoreL "store.l" [1 -> 0] (Slot);
    /// Pushes a module-level (global) slot.
    0x0a LoadG "load.g" [0 -> 1] (Slot);
    /// Pops into a global slot.
    0x0b StoreG "store.g" [1 -> 0] (Slot);
    /// Pops an index, pushes that element of a local array (traps if outside).
    0x0c LoadLA "load.la" [1 -> 1] (ArrayRef);
    /// Pops a value, then an index, and stores into a local array.
    0x0d StoreLA "store.la" [2 -> 0] (ArrayRef);
    /// Pops an index, pushes that element of a global array.
    0x0e LoadGA "load.ga" [1 -> 1] (ArrayRef);
    /// Pops a value, then an index, and stores into a global array.
    0x0f StoreGA "store.ga" [2 -> 0] (ArrayRef);
    /// Integer add (wrapping).
    0x10 AddI "add.i" [2 -> 1];
    /// Integer subtract (wrapping).
    0x11 SubI "sub.i" [2 -> 1];
    /// Integer multiply (wrapping).
    0x12 MulI "mul.i" [2 -> 1];
    /// Integer divide, truncating; traps on zero; MIN / -1 wraps to MIN.
    0x13 DivI "div.i" [2 -> 1];
    /// Integer remainder (sign of the dividend); traps on zero; MIN % -1 is 0.
    0x14 RemI "rem.i" [2 -> 1];
    /// Integer negate (wrapping).
    0x15 NegI "neg.i" [1 -> 1];
    /// Bitwise and.
    0x16 And "and" [2 -> 1];
    /// Bitwise or.
    0x17 Or "or" [2 -> 1];
    /// Bitwise exclusive or.
    0x18 Xor "xor" [2 -> 1];
    /// Shift left by the count modulo 64.
    0x19 Shl "shl" [2 -> 1];
    /// Arithmetic shift right by the count modulo 64.
    0x1a Shr "shr" [2 -> 1];
    /// Logical not: 1 if zero, else 0.
    0x1b Not "not" [1 -> 1];
    /// Float add.
    0x20 AddF "add.f" [2 -> 1];
    /// Float subtract.
    0x21 SubF "sub.f" [2 -> 1];
    /// Float multiply.
    0x22 MulF "mul.f" [2 -> 1];
    /// Float divide (IEEE: x/0 is infinite or NaN, no trap).
    0x23 DivF "div.f" [2 -> 1];
    /// Float negate.
    0x24 NegF "neg.f" [1 -> 1];
    /// Integer to float (nearest).
    0x25 I2F "i2f" [1 -> 1];
    /// Float to integer (toward zero, saturating, NaN is 0).
    0x26 F2I "f2i" [1 -> 1];
    /// Integer `==`, pushing 1 or 0.
    0x30 EqI "eq.i" [2 -> 1];
    /// Integer `!=`.
    0x31 NeI "ne.i" [2 -> 1];
    /// Integer `<`.
    0x32 LtI "lt.i" [2 -> 1];
    /// Integer `<=`.
    0x33 LeI "le.i" [2 -> 1];
    /// Integer `>`.
    0x34 GtI "gt.i" [2 -> 1];
    /// Integer `>=`.
    0x35 GeI "ge.i" [2 -> 1];
    /// Float `==` (IEEE: NaN is unequal to everything).
    0x38 EqF "eq.f" [2 -> 1];
    /// Float `!=`.
    0x39 NeF "ne.f" [2 -> 1];
    /// Float `<`.
    0x3a LtF "lt.f" [2 -> 1];
    /// Float `<=`.
    0x3b LeF "le.f" [2 -> 1];
    /// Float `>`.
    0x3c GtF "gt.f" [2 -> 1];
    /// Float `>=`.
    0x3d GeF "ge.f" [2 -> 1];
    /// Jumps to an instruction of the same function.
    0x40 Jmp "jmp" [0 -> 0] (Target);
    /// Pops; jumps if it is zero.
    0x41 Jz "jz" [1 -> 0] (Target);
    /// Pops; jumps if it is not zero.
    0x42 Jnz "jnz" [1 -> 0] (Target);
    /// Calls a function: pops `argc` arguments, pushes its result.
    0x48 Call "call" [0 -> 1] (CallRef);
    /// Pops the result and returns it to the caller.
    0x49 Ret "ret" [1 -> 0];
    /// Calls a built-in: pops `argc` arguments, pushes its result.
    0x4a Builtin "builtin" [0 -> 1] (BuiltinRef);
}

impl Insn {
    /// This instruction's table entry.
    pub fn info(&self) -> &'static InsnInfo {
        let op = self.opcode();
        INSTRUCTIONS
            .iter()
            .find(|i| i.opcode == op)
            .unwrap_or(&INSTRUCTIONS[0])
    }

    /// Its mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        self.info().mnemonic
    }

    /// True if execution never falls through to the next instruction.
    pub fn is_terminator(&self) -> bool {
        matches!(self, Insn::Jmp(_) | Insn::Ret)
    }

    /// The jump target, if this is a jump.
    pub fn target(&self) -> Option<u32> {
        match self {
            Insn::Jmp(t) | Insn::Jz(t) | Insn::Jnz(t) => Some(t.0),
            _ => None,
        }
    }
}

/// Looks an instruction up by mnemonic.
pub fn info_by_mnemonic(m: &str) -> Option<&'static InsnInfo> {
    INSTRUCTIONS.iter().find(|i| i.mnemonic == m)
}

/// Encodes a sequence of instructions.
pub fn encode_code(code: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(code.len() * 3);
    for i in code {
        i.encode(&mut out);
    }
    out
}

/// Decodes an instruction stream that must end exactly at an instruction
/// boundary. `base` is added to offsets in errors.
pub fn decode_code(bytes: &[u8], base: usize) -> Result<Vec<Insn>, DecodeError> {
    let mut r = Reader::new(bytes, base);
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(Insn::decode(&mut r)?);
    }
    Ok(out)
}

/// A function of a bytecode module.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Its name (for disassembly and errors); ASCII, at most 255 bytes.
    pub name: String,
    /// Parameter count: the first `params` locals are the arguments.
    pub params: u8,
    /// Local slot count, parameters included.
    pub locals: u16,
    /// The instructions.
    pub code: Vec<Insn>,
}

/// A bytecode module: what the compiler produces and what travels to a NIC.
/// It is untrusted until [`crate::verify`] accepts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// Index of the entry function (`main`).
    pub entry: u16,
    /// Initial values of the module-level slots.
    pub globals: Vec<u64>,
    /// The functions.
    pub functions: Vec<Function>,
}

impl Module {
    /// Encodes the module in the format described at the top of this file.
    /// Counts beyond a field's width are clamped by truncation, which the
    /// decoder or the verifier then rejects; the compiler never produces them.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.entry.to_le_bytes());
        out.extend_from_slice(&(self.globals.len() as u16).to_le_bytes());
        for g in &self.globals {
            out.extend_from_slice(&g.to_le_bytes());
        }
        out.extend_from_slice(&(self.functions.len() as u16).to_le_bytes());
        for f in &self.functions {
            let name = f.name.as_bytes();
            let name = name.get(..255).unwrap_or(name);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
            out.push(f.params);
            out.extend_from_slice(&f.locals.to_le_bytes());
            let code = encode_code(&f.code);
            out.extend_from_slice(&(code.len() as u32).to_le_bytes());
            out.extend_from_slice(&code);
        }
        out
    }

    /// Decodes a module. Never panics; allocation is bounded by the input
    /// length.
    pub fn decode(bytes: &[u8]) -> Result<Module, DecodeError> {
        let mut r = Reader::new(bytes, 0);
        if r.take(4).ok() != Some(&MAGIC[..]) {
            return Err(DecodeError {
                offset: 0,
                kind: DecodeErrorKind::BadMagic,
            });
        }
        let entry = r.u16()?;
        let nglobals = r.u16()?;
        let mut globals = Vec::new();
        for _ in 0..nglobals {
            globals.push(r.u64()?);
        }
        let nfuncs = r.u16()?;
        let mut functions = Vec::new();
        for _ in 0..nfuncs {
            let name_len = r.u8()?;
            let at = r.offset();
            let name = r.take(usize::from(name_len))?;
            if !name.is_ascii() {
                return Err(DecodeError {
                    offset: at,
                    kind: DecodeErrorKind::BadName,
                });
            }
            let name = String::from_utf8_lossy(name).into_owned();
            let params = r.u8()?;
            let locals = r.u16()?;
            let len = r.u32()?;
            let base = r.offset();
            let code = r.take(len as usize)?;
            functions.push(Function {
                name,
                params,
                locals,
                code: decode_code(code, base)?,
            });
        }
        if !r.is_empty() {
            return Err(DecodeError {
                offset: r.offset(),
                kind: DecodeErrorKind::Trailing(bytes.len().saturating_sub(r.offset())),
            });
        }
        Ok(Module {
            entry,
            globals,
            functions,
        })
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::asm::disassemble(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_are_unique_and_sorted() {
        for w in INSTRUCTIONS.windows(2) {
            assert!(
                w[0].opcode < w[1].opcode,
                "{} / {}",
                w[0].mnemonic,
                w[1].mnemonic
            );
        }
        for (i, a) in INSTRUCTIONS.iter().enumerate() {
            for b in &INSTRUCTIONS[i + 1..] {
                assert_ne!(a.mnemonic, b.mnemonic);
            }
        }
        assert_eq!(opcode::Ret, 0x49);
    }

    #[test]
    fn every_opcode_byte_either_decodes_or_is_rejected() {
        for b in 0..=255u8 {
            let mut bytes = vec![b];
            bytes.extend_from_slice(&[0; 8]);
            let mut r = Reader::new(&bytes, 0);
            match Insn::decode(&mut r) {
                Ok(i) => {
                    assert_eq!(i.opcode(), b);
                    let mut enc = Vec::new();
                    i.encode(&mut enc);
                    assert_eq!(&bytes[..enc.len()], &enc[..]);
                }
                Err(e) => assert_eq!(e.kind, DecodeErrorKind::BadOpcode(b)),
            }
        }
    }

    #[test]
    fn module_round_trip_and_truncation() {
        let m = Module {
            entry: 0,
            globals: vec![7, 9],
            functions: vec![Function {
                name: "main".into(),
                params: 0,
                locals: 1,
                code: vec![
                    Insn::PushF(1.5),
                    Insn::F2I,
                    Insn::Builtin(BuiltinRef { id: 3, argc: 2 }),
                    Insn::Ret,
                ],
            }],
        };
        let bytes = m.encode();
        assert_eq!(Module::decode(&bytes).unwrap(), m);
        for cut in 0..bytes.len() {
            assert!(Module::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(
            Module::decode(&extra).unwrap_err().kind,
            DecodeErrorKind::Trailing(1)
        );
    }
}
