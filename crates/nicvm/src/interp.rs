//! The interpreter: runs a verified module for one packet.
//!
//! Design for a NIC's per-packet path:
//!
//! - it runs only [`VerifiedModule`]s, whose pre-decoded op vector carries a
//!   fuel charge at the head of every basic block; fuel is paid with one
//!   `checked_sub` per block, so an endless loop ends with
//!   [`TrapKind::OutOfFuel`], never a hang;
//! - a [`ModuleInstance`] owns its value stack, call frames and module-level
//!   variables, allocated once when it is created; an invocation allocates
//!   nothing;
//! - every stack, local, global, array, packet and accumulator access is
//!   bounds-checked and every arithmetic trap (division by zero) is a value,
//!   so no input makes it panic: it returns an [`Outcome`] or a [`VmError`].
//!
//! Integer arithmetic wraps (two's complement); `i64::MIN / -1` is
//! `i64::MIN` and `i64::MIN % -1` is 0; shift counts are taken modulo 64.
//! Floats follow IEEE-754; `f2i` truncates toward zero and saturates (NaN to 0).

use std::sync::Arc;

use crate::builtins::{Builtin, NICVM_RESULT_PACKET_CONSUMED};
use crate::program::{Op, VerifiedModule};
use crate::services::{NicServices, PacketType, Payload, ServiceError};

/// What the engine should do with the packet after the module ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketFate {
    /// Default path: deliver the packet to the host (after the sends).
    Deliver,
    /// The module consumed it (it returned `NICVM_RESULT_PACKET_CONSUMED` or
    /// called `nicvm_consume()`): drop it once the sends are done.
    Consume,
}

/// The result of a successful invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The value `main` returned (a `NICVM_RESULT_*` code by convention).
    pub result: i64,
    /// Instructions executed, for the simulator's cost model.
    pub instructions: u64,
    /// What to do with the packet.
    pub fate: PacketFate,
}

/// Which byte area an out-of-bounds access was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Area {
    /// The current packet's payload (read-only).
    Packet,
    /// The accumulator area.
    Acc,
}

impl std::fmt::Display for Area {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Area::Packet => "packet",
            Area::Acc => "accumulator",
        })
    }
}

/// Why a module stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrapKind {
    /// The invocation's fuel ran out.
    #[error("out of fuel")]
    OutOfFuel,
    /// Calls nested deeper than the limit.
    #[error("call depth limit {0} exceeded")]
    CallDepth(usize),
    /// A call's frame does not fit in the value stack.
    #[error("value stack overflow")]
    StackOverflow,
    /// Integer division or remainder by zero.
    #[error("integer division by zero")]
    DivisionByZero,
    /// An array index outside the array.
    #[error("array index {index} outside 0..{len}")]
    ArrayIndex {
        /// Index used.
        index: i64,
        /// Array length.
        len: u32,
    },
    /// A payload or accumulator access outside the area.
    #[error("{area} access of {width} byte(s) at offset {offset} outside 0..{len}")]
    OutOfBounds {
        /// Which area.
        area: Area,
        /// Offset used.
        offset: i64,
        /// Bytes accessed.
        width: usize,
        /// Length of the area.
        len: usize,
    },
    /// A send to a rank outside `0..size`.
    #[error("send to rank {rank} outside 0..{size}")]
    BadRank {
        /// Rank given.
        rank: i64,
        /// Group size.
        size: u32,
    },
    /// A send with an unknown packet type.
    #[error("unknown packet type {0}")]
    BadPacketType(i64),
    /// The NIC refused a send or delivery.
    #[error("service error: {0}")]
    Service(#[from] ServiceError),
    /// An internal consistency check failed (a verifier bug); still no panic.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// A trap: why and where the module stopped, and the work it had done. The
/// packet takes its default path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("function {func}, instruction {index}: {kind}")]
pub struct VmError {
    /// Why.
    pub kind: TrapKind,
    /// Function index of the trapping instruction.
    pub func: u16,
    /// Bytecode index of the trapping instruction in that function (the
    /// first instruction of its block, for [`TrapKind::OutOfFuel`]).
    pub index: u32,
    /// Instructions charged before the trap (work for the cost model).
    pub instructions: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    ret_pc: usize,
    bp: usize,
}

/// A loaded module: its code (shared), its module-level variables (which
/// keep their values between invocations) and its preallocated scratch.
#[derive(Debug, Clone)]
pub struct ModuleInstance {
    module: Arc<VerifiedModule>,
    globals: Vec<u64>,
    stack: Vec<u64>,
    frames: Vec<Frame>,
}

impl ModuleInstance {
    /// Creates an instance with fresh module-level variables. This is the
    /// only allocation; invocations reuse it.
    pub fn new(module: Arc<VerifiedModule>) -> Self {
        let globals = module.bytecode.globals.clone();
        let stack = vec![0; module.stack_slots()];
        let frames = Vec::with_capacity(module.limits.max_call_depth);
        ModuleInstance {
            module,
            globals,
            stack,
            frames,
        }
    }

    /// The module this is an instance of.
    pub fn module(&self) -> &Arc<VerifiedModule> {
        &self.module
    }

    /// Current values of the module-level slots (ints, or float bits).
    pub fn globals(&self) -> &[u64] {
        &self.globals
    }

    /// Puts the module-level variables back to their initial values.
    pub fn reset_globals(&mut self) {
        self.globals.clear();
        self.globals
            .extend_from_slice(&self.module.bytecode.globals);
    }

    /// Runs `main` for one packet.
    ///
    /// `packet` is the current packet's payload (read-only); `acc` is the
    /// writable accumulator area the engine keeps for this module (may be
    /// empty); `fuel` is the most instructions this invocation may execute.
    pub fn invoke<S: NicServices + ?Sized>(
        &mut self,
        services: &mut S,
        packet: &[u8],
        acc: &mut [u8],
        fuel: u64,
    ) -> Result<Outcome, VmError> {
        let m: &VerifiedModule = &self.module;
        let mut consumed = false;
        let r = exec(
            m,
            &mut self.globals,
            &mut self.stack,
            &mut self.frames,
            services,
            packet,
            acc,
            fuel,
            &mut consumed,
        );
        match r {
            Ok((v, left)) => {
                let result = v as i64;
                let fate = if consumed || result == NICVM_RESULT_PACKET_CONSUMED {
                    PacketFate::Consume
                } else {
                    PacketFate::Deliver
                };
                Ok(Outcome {
                    result,
                    instructions: fuel - left.min(fuel),
                    fate,
                })
            }
            Err(h) => {
                let (func, index) = m
                    .origin
                    .get(h.pc.wrapping_sub(1))
                    .copied()
                    .unwrap_or((0, 0));
                Err(VmError {
                    kind: h.kind,
                    func,
                    index,
                    instructions: fuel - h.fuel_left.min(fuel),
                })
            }
        }
    }
}

struct Halt {
    kind: TrapKind,
    pc: usize,
    fuel_left: u64,
}

#[allow(clippy::too_many_arguments)]
fn exec<S: NicServices + ?Sized>(
    m: &VerifiedModule,
    globals: &mut [u64],
    stack: &mut [u64],
    frames: &mut Vec<Frame>,
    svc: &mut S,
    packet: &[u8],
    acc: &mut [u8],
    fuel: u64,
    consumed: &mut bool,
) -> Result<(u64, u64), Halt> {
    let code: &[Op] = &m.code;
    let funcs = &m.funcs[..];
    let max_depth = m.limits.max_call_depth;
    frames.clear();

    let mut fuel_left = fuel;
    let mut pc: usize = 0;
    let mut bp: usize = 0;
    let mut sp: usize;

    macro_rules! trap {
        ($k:expr) => {
            return Err(Halt {
                kind: $k,
                pc,
                fuel_left,
            })
        };
    }
    macro_rules! internal {
        ($what:literal) => {
            trap!(TrapKind::Internal($what))
        };
    }
    macro_rules! pop {
        () => {{
            sp = sp.wrapping_sub(1);
            match stack.get(sp) {
                Some(&v) => v,
                None => internal!("stack underflow"),
            }
        }};
    }
    macro_rules! top {
        () => {
            match stack.get_mut(sp.wrapping_sub(1)) {
                Some(v) => v,
                None => internal!("stack underflow"),
            }
        };
    }
    macro_rules! push {
        ($v:expr) => {{
            let v = $v;
            match stack.get_mut(sp) {
                Some(s) => *s = v,
                None => internal!("stack overflow"),
            }
            sp += 1;
        }};
    }
    macro_rules! int_bin {
        (|$a:ident, $b:ident| $e:expr) => {{
            let $b = pop!() as i64;
            let t = top!();
            let $a = *t as i64;
            *t = ($e) as u64;
        }};
    }
    macro_rules! flt_bin {
        (|$a:ident, $b:ident| $e:expr) => {{
            let $b = f64::from_bits(pop!());
            let t = top!();
            let $a = f64::from_bits(*t);
            *t = ($e).to_bits();
        }};
    }
    macro_rules! flt_cmp {
        (|$a:ident, $b:ident| $e:expr) => {{
            let $b = f64::from_bits(pop!());
            let t = top!();
            let $a = f64::from_bits(*t);
            *t = u64::from($e);
        }};
    }
    macro_rules! slot {
        ($idx:expr) => {
            match stack.get_mut($idx) {
                Some(s) => s,
                None => internal!("local out of range"),
            }
        };
    }
    macro_rules! global {
        ($idx:expr) => {
            match globals.get_mut($idx) {
                Some(s) => s,
                None => internal!("global out of range"),
            }
        };
    }
    macro_rules! index {
        ($len:expr) => {{
            let i = pop!() as i64;
            if i < 0 || i >= i64::from($len) {
                trap!(TrapKind::ArrayIndex {
                    index: i,
                    len: $len
                });
            }
            i as usize
        }};
    }

    // Enter main.
    let Some(main) = funcs.get(m.entry as usize) else {
        internal!("bad entry")
    };
    let locals = main.locals as usize;
    match stack.get_mut(..locals + main.max_stack as usize) {
        Some(s) => s.fill(0),
        None => internal!("main frame does not fit"),
    }
    sp = locals;
    pc = main.entry_pc as usize;

    loop {
        let Some(&op) = code.get(pc) else {
            internal!("pc out of range")
        };
        pc += 1;
        match op {
            Op::Charge(n) => match fuel_left.checked_sub(u64::from(n)) {
                Some(f) => fuel_left = f,
                None => trap!(TrapKind::OutOfFuel),
            },
            Op::Nop => {}
            Op::Push(v) => push!(v),
            Op::Pop => {
                pop!();
            }
            Op::Dup => {
                let v = *top!();
                push!(v);
            }
            Op::LoadL(i) => {
                let v = *slot!(bp + i as usize);
                push!(v);
            }
            Op::StoreL(i) => {
                let v = pop!();
                *slot!(bp + i as usize) = v;
            }
            Op::LoadG(i) => {
                let v = *global!(i as usize);
                push!(v);
            }
            Op::StoreG(i) => {
                let v = pop!();
                *global!(i as usize) = v;
            }
            Op::LoadLA(base, len) => {
                let i = index!(len);
                let v = *slot!(bp + base as usize + i);
                push!(v);
            }
            Op::StoreLA(base, len) => {
                let v = pop!();
                let i = index!(len);
                *slot!(bp + base as usize + i) = v;
            }
            Op::LoadGA(base, len) => {
                let i = index!(len);
                let v = *global!(base as usize + i);
                push!(v);
            }
            Op::StoreGA(base, len) => {
                let v = pop!();
                let i = index!(len);
                *global!(base as usize + i) = v;
            }
            Op::AddI => int_bin!(|a, b| a.wrapping_add(b)),
            Op::SubI => int_bin!(|a, b| a.wrapping_sub(b)),
            Op::MulI => int_bin!(|a, b| a.wrapping_mul(b)),
            Op::DivI => {
                let b = pop!() as i64;
                if b == 0 {
                    trap!(TrapKind::DivisionByZero);
                }
                let t = top!();
                *t = (*t as i64).wrapping_div(b) as u64;
            }
            Op::RemI => {
                let b = pop!() as i64;
                if b == 0 {
                    trap!(TrapKind::DivisionByZero);
                }
                let t = top!();
                *t = (*t as i64).wrapping_rem(b) as u64;
            }
            Op::NegI => {
                let t = top!();
                *t = (*t as i64).wrapping_neg() as u64;
            }
            Op::And => int_bin!(|a, b| a & b),
            Op::Or => int_bin!(|a, b| a | b),
            Op::Xor => int_bin!(|a, b| a ^ b),
            Op::Shl => int_bin!(|a, b| a.wrapping_shl(b as u32)),
            Op::Shr => int_bin!(|a, b| a.wrapping_shr(b as u32)),
            Op::Not => {
                let t = top!();
                *t = u64::from(*t == 0);
            }
            Op::AddF => flt_bin!(|a, b| a + b),
            Op::SubF => flt_bin!(|a, b| a - b),
            Op::MulF => flt_bin!(|a, b| a * b),
            Op::DivF => flt_bin!(|a, b| a / b),
            Op::NegF => {
                let t = top!();
                *t = (-f64::from_bits(*t)).to_bits();
            }
            Op::I2F => {
                let t = top!();
                *t = (*t as i64 as f64).to_bits();
            }
            Op::F2I => {
                let t = top!();
                *t = f64::from_bits(*t) as i64 as u64;
            }
            Op::EqI => int_bin!(|a, b| a == b),
            Op::NeI => int_bin!(|a, b| a != b),
            Op::LtI => int_bin!(|a, b| a < b),
            Op::LeI => int_bin!(|a, b| a <= b),
            Op::GtI => int_bin!(|a, b| a > b),
            Op::GeI => int_bin!(|a, b| a >= b),
            Op::EqF => flt_cmp!(|a, b| a == b),
            Op::NeF => flt_cmp!(|a, b| a != b),
            Op::LtF => flt_cmp!(|a, b| a < b),
            Op::LeF => flt_cmp!(|a, b| a <= b),
            Op::GtF => flt_cmp!(|a, b| a > b),
            Op::GeF => flt_cmp!(|a, b| a >= b),
            Op::Jmp(t) => pc = t as usize,
            Op::Jz(t) => {
                if pop!() == 0 {
                    pc = t as usize;
                }
            }
            Op::Jnz(t) => {
                if pop!() != 0 {
                    pc = t as usize;
                }
            }
            Op::Call(f) => {
                let Some(meta) = funcs.get(f as usize) else {
                    internal!("bad callee")
                };
                if frames.len() >= max_depth {
                    trap!(TrapKind::CallDepth(max_depth));
                }
                let Some(new_bp) = sp.checked_sub(meta.params as usize) else {
                    internal!("missing arguments")
                };
                let new_sp = new_bp + meta.locals as usize;
                if new_sp + meta.max_stack as usize > stack.len() {
                    trap!(TrapKind::StackOverflow);
                }
                match stack.get_mut(sp..new_sp) {
                    Some(s) => s.fill(0),
                    None => internal!("frame out of range"),
                }
                frames.push(Frame { ret_pc: pc, bp });
                bp = new_bp;
                sp = new_sp;
                pc = meta.entry_pc as usize;
            }
            Op::Ret => {
                let v = pop!();
                match frames.pop() {
                    None => return Ok((v, fuel_left)),
                    Some(fr) => {
                        sp = bp;
                        push!(v);
                        bp = fr.bp;
                        pc = fr.ret_pc;
                    }
                }
            }
            Op::Builtin(b) => {
                let n = b.arity();
                let a1 = if n >= 2 { pop!() } else { 0 };
                let a0 = if n >= 1 { pop!() } else { 0 };
                match call_builtin(b, a0, a1, svc, packet, acc, consumed) {
                    Ok(v) => push!(v),
                    Err(k) => trap!(k),
                }
            }
        }
    }
}

/// The byte range `[off, off + width)` of an area of `len` bytes, or a trap.
fn range(
    area: Area,
    off: u64,
    width: usize,
    len: usize,
) -> Result<std::ops::Range<usize>, TrapKind> {
    let oob = TrapKind::OutOfBounds {
        area,
        offset: off as i64,
        width,
        len,
    };
    let start = usize::try_from(off).map_err(|_| oob.clone())?;
    let end = start.checked_add(width).ok_or_else(|| oob.clone())?;
    if end > len {
        return Err(oob);
    }
    Ok(start..end)
}

fn read8(area: Area, buf: &[u8], off: u64) -> Result<u64, TrapKind> {
    let r = range(area, off, 8, buf.len())?;
    let mut b = [0u8; 8];
    match buf.get(r) {
        Some(s) => b.copy_from_slice(s),
        None => return Err(TrapKind::Internal("range")),
    }
    Ok(u64::from_le_bytes(b))
}

fn read1(area: Area, buf: &[u8], off: u64) -> Result<u64, TrapKind> {
    let r = range(area, off, 1, buf.len())?;
    buf.get(r.start)
        .map(|&b| u64::from(b))
        .ok_or(TrapKind::Internal("range"))
}

fn write(buf: &mut [u8], off: u64, bytes: &[u8]) -> Result<u64, TrapKind> {
    let r = range(Area::Acc, off, bytes.len(), buf.len())?;
    match buf.get_mut(r) {
        Some(s) => s.copy_from_slice(bytes),
        None => return Err(TrapKind::Internal("range")),
    }
    Ok(0)
}

#[inline(never)]
fn call_builtin<S: NicServices + ?Sized>(
    b: Builtin,
    a0: u64,
    a1: u64,
    svc: &mut S,
    packet: &[u8],
    acc: &mut [u8],
    consumed: &mut bool,
) -> Result<u64, TrapKind> {
    match b {
        Builtin::GetSize => Ok(u64::from(svc.size())),
        Builtin::GetRank => Ok(u64::from(svc.rank())),
        Builtin::GetRoot => Ok(u64::from(svc.root())),
        Builtin::GetSource => Ok(u64::from(svc.source())),
        Builtin::SendMessage | Builtin::SendAcc => {
            let ptype =
                PacketType::from_value(a0 as i64).ok_or(TrapKind::BadPacketType(a0 as i64))?;
            let rank = a1 as i64;
            let size = svc.size();
            if rank < 0 || rank >= i64::from(size) {
                return Err(TrapKind::BadRank { rank, size });
            }
            let payload = if b == Builtin::SendMessage {
                Payload::Current
            } else {
                Payload::New(acc)
            };
            svc.send(ptype, rank as u32, payload)?;
            Ok(0)
        }
        Builtin::DeliverAcc => {
            svc.deliver(acc)?;
            Ok(0)
        }
        Builtin::Consume => {
            *consumed = true;
            Ok(0)
        }
        Builtin::PacketLength => Ok(packet.len() as u64),
        Builtin::PacketGetByte => read1(Area::Packet, packet, a0),
        Builtin::PacketGetI64 | Builtin::PacketGetF64 => read8(Area::Packet, packet, a0),
        Builtin::AccLength => Ok(acc.len() as u64),
        Builtin::AccGetByte => read1(Area::Acc, acc, a0),
        Builtin::AccGetI64 | Builtin::AccGetF64 => read8(Area::Acc, acc, a0),
        Builtin::AccSetByte => write(acc, a0, &[a1 as u8]),
        Builtin::AccSetI64 | Builtin::AccSetF64 => write(acc, a0, &a1.to_le_bytes()),
    }
}
