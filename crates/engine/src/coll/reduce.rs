//! Reduction operations on vectors of numbers, as the engine combines them.
//!
//! Values are vectors of one [`Datatype`] in the host's native byte order
//! (every platform Outboard runs on is little-endian; the engine and its
//! host share a byte order by construction). Integer operations wrap, so
//! they are associative and commutative and the result does not depend on
//! the order of combination. Floating-point addition is not associative:
//! the engine combines in the order the schedule fixes (see
//! [`super::Fold::Combine`]) and a given schedule therefore always gives
//! the same bits. MIN and MAX on floats follow IEEE 754 minNum/maxNum (Rust's
//! `f64::min`/`max`): a NaN operand loses to a number. Floating-point
//! multiplication (PROD) rounds like addition, so it too depends on the
//! order. The logical operations (LAND, LOR, LXOR) take zero as false and
//! anything else as true and give 0 or 1, as C and MPI do; like the
//! bitwise ones they apply to integer types only.
//!
//! An operation travels as its one-byte code ([`ReduceOp::code`]); codes
//! 1-5 are the original five and keep their values, new ones take new
//! codes, and [`ReduceOp::from_code`] refuses a code it does not know.
//!
//! [`ReduceOp::Module`] is a user-defined operator: a NICVM module loaded on
//! every member's engine combines the values (acc = acc op packet, see
//! `crate::nicvm::combine`). Only the engine runs it; [`Reduction::fold`]
//! refuses it ([`CollError::EngineOnly`]), and it has no one-byte code of
//! its own to be rebuilt from (it names a module).

use super::CollError;
use crate::nicvm::ModuleId;

/// Element type of a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Datatype {
    /// 32-bit signed integer.
    I32 = 1,
    /// 64-bit signed integer.
    I64 = 2,
    /// 64-bit unsigned integer.
    U64 = 3,
    /// IEEE 754 single.
    F32 = 4,
    /// IEEE 754 double.
    F64 = 5,
}

impl Datatype {
    /// All of them, for tests and command lines.
    pub const ALL: [Datatype; 5] = [Datatype::I32, Datatype::I64, Datatype::U64, Datatype::F32, Datatype::F64];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Datatype::I32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
        }
    }

    /// Whether it is a floating-point type (the NICs of the papers had no
    /// FPU, so the simulator charges these differently).
    pub fn is_float(self) -> bool {
        matches!(self, Datatype::F32 | Datatype::F64)
    }

    /// Lower-case name (`i32`, `f64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Datatype::I32 => "i32",
            Datatype::I64 => "i64",
            Datatype::U64 => "u64",
            Datatype::F32 => "f32",
            Datatype::F64 => "f64",
        }
    }
}

/// The combining operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReduceOp {
    /// Sum (integers wrap).
    Sum = 1,
    /// Minimum.
    Min = 2,
    /// Maximum.
    Max = 3,
    /// Bitwise and (integer types only).
    Band = 4,
    /// Bitwise or (integer types only).
    Bor = 5,
    /// Product (integers wrap).
    Prod = 6,
    /// Bitwise exclusive or (integer types only).
    Bxor = 7,
    /// Logical and: 1 if both are non-zero, else 0 (integer types only).
    Land = 8,
    /// Logical or: 1 if either is non-zero, else 0 (integer types only).
    Lor = 9,
    /// Logical exclusive or: 1 if exactly one is non-zero, else 0 (integer
    /// types only).
    Lxor = 10,
    /// A user-defined operator: the NICVM module `module`, as loaded in
    /// generation `generation` on every member's engine, combines each
    /// contribution into the running value, with the engine's fuel budget.
    /// The element type only fixes the element size (how a long
    /// contribution is cut into pieces); the module reads the bytes.
    Module {
        /// The job's id of the module.
        module: ModuleId,
        /// The generation loaded (a replaced module is not run).
        generation: u32,
    } = 11,
}

impl ReduceOp {
    /// All of them.
    pub const ALL: [ReduceOp; 10] = [
        ReduceOp::Sum,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Band,
        ReduceOp::Bor,
        ReduceOp::Prod,
        ReduceOp::Bxor,
        ReduceOp::Land,
        ReduceOp::Lor,
        ReduceOp::Lxor,
    ];

    /// The one-byte code it is encoded as.
    pub fn code(self) -> u8 {
        match self {
            ReduceOp::Sum => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
            ReduceOp::Band => 4,
            ReduceOp::Bor => 5,
            ReduceOp::Prod => 6,
            ReduceOp::Bxor => 7,
            ReduceOp::Land => 8,
            ReduceOp::Lor => 9,
            ReduceOp::Lxor => 10,
            ReduceOp::Module { .. } => 11,
        }
    }

    /// The operation a code stands for; `None` for a code this version
    /// does not know (an encoding from a newer peer is refused, not
    /// guessed at).
    pub fn from_code(code: u8) -> Option<ReduceOp> {
        ReduceOp::ALL.iter().copied().find(|op| op.code() == code)
    }

    /// Whether it applies to integer types only (bitwise and logical).
    pub fn integers_only(self) -> bool {
        matches!(self, ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor | ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor)
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Band => "band",
            ReduceOp::Bor => "bor",
            ReduceOp::Prod => "prod",
            ReduceOp::Bxor => "bxor",
            ReduceOp::Land => "land",
            ReduceOp::Lor => "lor",
            ReduceOp::Lxor => "lxor",
            ReduceOp::Module { .. } => "module",
        }
    }
}

/// An operation on a type: what a reducing collective combines with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// The operation.
    pub op: ReduceOp,
    /// The element type.
    pub dtype: Datatype,
}

macro_rules! fold_as {
    ($t:ty, $acc:expr, $other:expr, $other_left:expr, $f:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, o) in $acc.chunks_exact_mut(N).zip($other.chunks_exact(N)) {
            let x = <$t>::from_ne_bytes(a.try_into().expect("chunk size"));
            let y = <$t>::from_ne_bytes(o.try_into().expect("chunk size"));
            let r: $t = if $other_left { $f(y, x) } else { $f(x, y) };
            a.copy_from_slice(&r.to_ne_bytes());
        }
    }};
}

macro_rules! int_op {
    ($t:ty, $op:expr, $acc:expr, $other:expr, $left:expr) => {
        match $op {
            ReduceOp::Sum => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.wrapping_add(b)),
            ReduceOp::Min => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.min(b)),
            ReduceOp::Max => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.max(b)),
            ReduceOp::Band => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a & b),
            ReduceOp::Bor => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a | b),
            ReduceOp::Prod => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.wrapping_mul(b)),
            ReduceOp::Bxor => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a ^ b),
            ReduceOp::Land => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| <$t>::from(a != 0 && b != 0)),
            ReduceOp::Lor => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| <$t>::from(a != 0 || b != 0)),
            ReduceOp::Lxor => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| <$t>::from((a != 0) != (b != 0))),
            ReduceOp::Module { .. } => unreachable!("checked: a module operator runs on the engine"),
        }
    };
}

macro_rules! float_op {
    ($t:ty, $op:expr, $acc:expr, $other:expr, $left:expr) => {
        match $op {
            ReduceOp::Sum => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a + b),
            ReduceOp::Min => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.min(b)),
            ReduceOp::Max => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.max(b)),
            ReduceOp::Prod => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a * b),
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor | ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor => {
                unreachable!("validated: no bitwise or logical ops on floats")
            }
            ReduceOp::Module { .. } => unreachable!("checked: a module operator runs on the engine"),
        }
    };
}

impl Reduction {
    /// A reduction; bitwise and logical operations on floating-point types
    /// are refused.
    pub fn new(op: ReduceOp, dtype: Datatype) -> Result<Reduction, CollError> {
        let r = Reduction { op, dtype };
        r.validate()?;
        Ok(r)
    }

    /// Checks that the operation applies to the type.
    pub fn validate(&self) -> Result<(), CollError> {
        if self.dtype.is_float() && self.op.integers_only() {
            return Err(CollError::BadReduction);
        }
        Ok(())
    }

    /// Checks that `len` bytes are a whole number of elements.
    pub fn check_len(&self, len: usize) -> Result<(), CollError> {
        if len % self.dtype.size() != 0 {
            return Err(CollError::LengthMismatch { expected: (len - len % self.dtype.size()) as u32, got: len as u32 });
        }
        Ok(())
    }

    /// A user-defined reduction: module `module` (generation `generation`)
    /// combines vectors of `dtype`.
    pub fn module(module: ModuleId, generation: u32, dtype: Datatype) -> Reduction {
        Reduction { op: ReduceOp::Module { module, generation }, dtype }
    }

    /// `acc = acc op other` element-wise, or `other op acc` when
    /// `other_left` (the other value comes from a lower rank). Lengths must
    /// be equal and a whole number of elements. A module operator is
    /// refused ([`CollError::EngineOnly`]).
    pub fn fold(&self, acc: &mut [u8], other: &[u8], other_left: bool) -> Result<(), CollError> {
        self.validate()?;
        if matches!(self.op, ReduceOp::Module { .. }) {
            return Err(CollError::EngineOnly);
        }
        if acc.len() != other.len() {
            return Err(CollError::LengthMismatch { expected: acc.len() as u32, got: other.len() as u32 });
        }
        self.check_len(acc.len())?;
        match self.dtype {
            Datatype::I32 => int_op!(i32, self.op, acc, other, other_left),
            Datatype::I64 => int_op!(i64, self.op, acc, other, other_left),
            Datatype::U64 => int_op!(u64, self.op, acc, other, other_left),
            Datatype::F32 => float_op!(f32, self.op, acc, other, other_left),
            Datatype::F64 => float_op!(f64, self.op, acc, other, other_left),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn integer_ops() {
        let r = Reduction::new(ReduceOp::Sum, Datatype::I32).unwrap();
        let mut a = bytes_i32(&[1, i32::MAX, -5]);
        r.fold(&mut a, &bytes_i32(&[2, 1, 5]), false).unwrap();
        assert_eq!(a, bytes_i32(&[3, i32::MIN, 0]));
        let r = Reduction::new(ReduceOp::Min, Datatype::I32).unwrap();
        r.fold(&mut a, &bytes_i32(&[0, 0, 0]), true).unwrap();
        assert_eq!(a, bytes_i32(&[0, i32::MIN, 0]));
    }

    #[test]
    fn float_order_is_the_operands_order() {
        // (1e20 + -1e20) + 1 = 1 but 1e20 + (-1e20 + 1) = 0: the order shows.
        let r = Reduction::new(ReduceOp::Sum, Datatype::F64).unwrap();
        let enc = |x: f64| x.to_ne_bytes().to_vec();
        let mut acc = enc(1e20);
        r.fold(&mut acc, &enc(-1e20), false).unwrap();
        r.fold(&mut acc, &enc(1.0), false).unwrap();
        assert_eq!(f64::from_ne_bytes(acc.try_into().unwrap()), 1.0);
        let mut acc = enc(1.0);
        r.fold(&mut acc, &enc(-1e20), true).unwrap();
        r.fold(&mut acc, &enc(1e20), true).unwrap();
        assert_eq!(f64::from_ne_bytes(acc.try_into().unwrap()), 0.0);
    }

    #[test]
    fn codes_are_stable_and_unknown_ones_refused() {
        // The original five keep their codes; the new ones follow.
        let codes: Vec<u8> = ReduceOp::ALL.iter().map(|op| op.code()).collect();
        assert_eq!(codes, (1..=10).collect::<Vec<u8>>());
        assert_eq!(ReduceOp::Sum.code(), 1);
        assert_eq!(ReduceOp::Bor.code(), 5);
        for op in ReduceOp::ALL {
            assert_eq!(ReduceOp::from_code(op.code()), Some(op));
        }
        for code in [0u8, 11, 12, 100, 255] {
            assert_eq!(ReduceOp::from_code(code), None, "code {code}");
        }
    }

    #[test]
    fn logical_ops_give_zero_or_one() {
        let enc = |v: &[i64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let a = enc(&[0, 0, 7, -3]);
        let b = enc(&[0, 5, 0, 9]);
        for (op, want) in [(ReduceOp::Land, [0, 0, 0, 1]), (ReduceOp::Lor, [0, 1, 1, 1]), (ReduceOp::Lxor, [0, 1, 1, 0])] {
            let mut acc = a.clone();
            Reduction::new(op, Datatype::I64).unwrap().fold(&mut acc, &b, false).unwrap();
            assert_eq!(acc, enc(&want), "{}", op.name());
        }
    }

    #[test]
    fn refusals() {
        for op in [ReduceOp::Band, ReduceOp::Bor, ReduceOp::Bxor, ReduceOp::Land, ReduceOp::Lor, ReduceOp::Lxor] {
            for dtype in [Datatype::F32, Datatype::F64] {
                assert_eq!(Reduction::new(op, dtype), Err(CollError::BadReduction), "{} on {}", op.name(), dtype.name());
            }
        }
        assert!(Reduction::new(ReduceOp::Prod, Datatype::F32).is_ok());
        let r = Reduction::new(ReduceOp::Bor, Datatype::U64).unwrap();
        assert!(r.fold(&mut [0u8; 8], &[0u8; 16], false).is_err());
        assert!(r.fold(&mut [0u8; 7], &[0u8; 7], false).is_err());
        let m = Reduction::module(ModuleId(7), 1, Datatype::F64);
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.fold(&mut [0u8; 8], &[0u8; 8], false), Err(CollError::EngineOnly));
        assert_eq!(m.op.code(), 11);
        assert_eq!(ReduceOp::from_code(11), None, "a module operator is not rebuilt from its code");
    }

    /// A reference written independently of the engine's fold: integers as
    /// i128 (the operation done exactly, then wrapped to the type's width),
    /// floats through f64 (a single f32 sum or product computed in f64 and
    /// rounded once is the correctly rounded f32 result, as 53 >= 2*24+2).
    mod reference {
        use super::super::*;

        fn int_op(op: ReduceOp, a: i128, b: i128) -> i128 {
            match op {
                ReduceOp::Sum => a + b,
                ReduceOp::Prod => a.wrapping_mul(b),
                ReduceOp::Min => a.min(b),
                ReduceOp::Max => a.max(b),
                ReduceOp::Band => a & b,
                ReduceOp::Bor => a | b,
                ReduceOp::Bxor => a ^ b,
                ReduceOp::Land => i128::from(a != 0 && b != 0),
                ReduceOp::Lor => i128::from(a != 0 || b != 0),
                ReduceOp::Lxor => i128::from((a != 0) != (b != 0)),
                ReduceOp::Module { .. } => unreachable!("not in ReduceOp::ALL"),
            }
        }

        fn float_op(op: ReduceOp, a: f64, b: f64) -> f64 {
            match op {
                ReduceOp::Sum => a + b,
                ReduceOp::Prod => a * b,
                ReduceOp::Min => a.min(b),
                ReduceOp::Max => a.max(b),
                _ => unreachable!("integer-only op on a float"),
            }
        }

        /// Element `i` of `v` as an exact integer (signed or unsigned by
        /// type).
        fn int_at(dtype: Datatype, v: &[u8], i: usize) -> i128 {
            let n = dtype.size();
            let b = &v[i * n..(i + 1) * n];
            match dtype {
                Datatype::I32 => i128::from(i32::from_ne_bytes(b.try_into().unwrap())),
                Datatype::I64 => i128::from(i64::from_ne_bytes(b.try_into().unwrap())),
                Datatype::U64 => i128::from(u64::from_ne_bytes(b.try_into().unwrap())),
                _ => unreachable!(),
            }
        }

        fn put_int(dtype: Datatype, x: i128) -> Vec<u8> {
            // Truncation to the width is the wrap-around.
            match dtype {
                Datatype::I32 => (x as i32).to_ne_bytes().to_vec(),
                Datatype::I64 => (x as i64).to_ne_bytes().to_vec(),
                Datatype::U64 => (x as u64).to_ne_bytes().to_vec(),
                _ => unreachable!(),
            }
        }

        /// `vals[0] op vals[1] op ...`, folded left to right.
        pub fn fold_all(r: Reduction, vals: &[Vec<u8>]) -> Vec<u8> {
            let n = r.dtype.size();
            let count = vals[0].len() / n;
            let mut out = Vec::with_capacity(vals[0].len());
            for i in 0..count {
                match r.dtype {
                    Datatype::F64 => {
                        let at = |v: &Vec<u8>| f64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
                        let x = vals[1..].iter().fold(at(&vals[0]), |a, v| float_op(r.op, a, at(v)));
                        out.extend_from_slice(&x.to_ne_bytes());
                    }
                    Datatype::F32 => {
                        let at = |v: &Vec<u8>| f32::from_ne_bytes(v[i * 4..i * 4 + 4].try_into().unwrap());
                        let x = vals[1..].iter().fold(at(&vals[0]), |a, v| float_op(r.op, f64::from(a), f64::from(at(v))) as f32);
                        out.extend_from_slice(&x.to_ne_bytes());
                    }
                    _ => {
                        let x = vals[1..].iter().fold(int_at(r.dtype, &vals[0], i), |a, v| {
                            // Wrap after each step, as the type does.
                            let y = int_op(r.op, a, int_at(r.dtype, v, i));
                            int_at(r.dtype, &put_int(r.dtype, y), 0)
                        });
                        out.extend_from_slice(&put_int(r.dtype, x));
                    }
                }
            }
            out
        }
    }

    mod props {
        use super::super::*;
        use super::reference::fold_all;
        use proptest::prelude::*;

        fn reduction() -> impl Strategy<Value = Reduction> {
            (0..ReduceOp::ALL.len(), 0..Datatype::ALL.len())
                .prop_map(|(o, t)| Reduction { op: ReduceOp::ALL[o], dtype: Datatype::ALL[t] })
                .prop_filter("bitwise and logical ops need integers", |r| r.validate().is_ok())
        }

        /// Elements: integers of any bits with zeros and ones common (so
        /// the logical ops see both truth values), floats of mixed
        /// magnitudes including exact small integers.
        fn element(dtype: Datatype) -> BoxedStrategy<Vec<u8>> {
            match dtype {
                Datatype::F64 => prop_oneof![(-8i32..8).prop_map(f64::from), -1e300f64..1e300, -1e-3f64..1e-3]
                    .prop_map(|x| x.to_ne_bytes().to_vec())
                    .boxed(),
                Datatype::F32 => prop_oneof![(-8i32..8).prop_map(|x| x as f32), -1e30f32..1e30, -1e-3f32..1e-3]
                    .prop_map(|x| x.to_ne_bytes().to_vec())
                    .boxed(),
                _ => prop_oneof![Just(0u64), Just(1), any::<u64>(), (0u64..4).prop_map(|x| x.wrapping_sub(2))]
                    .prop_map(move |x| x.to_ne_bytes()[..dtype.size()].to_vec())
                    .boxed(),
            }
        }

        /// A reduction and 1-6 vectors of 0-8 elements each.
        fn case() -> impl Strategy<Value = (Reduction, Vec<Vec<u8>>)> {
            (reduction(), 1usize..7, 0usize..9).prop_flat_map(|(r, ranks, count)| {
                let vec = proptest::collection::vec(element(r.dtype), count).prop_map(|es| es.concat());
                (Just(r), proptest::collection::vec(vec, ranks))
            })
        }

        fn engine_fold(r: Reduction, vals: &[Vec<u8>]) -> Vec<u8> {
            let mut acc = vals[0].clone();
            for v in &vals[1..] {
                r.fold(&mut acc, v, false).unwrap();
            }
            acc
        }

        proptest! {
            /// The engine's fold equals the reference, bit for bit, in the
            /// same order (floats included: one order, one result).
            #[test]
            fn fold_matches_the_reference((r, vals) in case()) {
                prop_assert_eq!(engine_fold(r, &vals), fold_all(r, &vals), "{} on {}", r.op.name(), r.dtype.name());
            }

            /// Integer operations do not depend on the order of
            /// combination (what lets any schedule combine them): every
            /// rotation, folded from either side, gives the same bits.
            #[test]
            fn integer_results_ignore_the_order((r, vals) in case(), rot in 0usize..6) {
                prop_assume!(!r.dtype.is_float());
                let want = engine_fold(r, &vals);
                let mut turned = vals.clone();
                turned.rotate_left(rot % vals.len());
                prop_assert_eq!(engine_fold(r, &turned), want.clone());
                // Right to left, the other operand on the left.
                let mut acc = vals[vals.len() - 1].clone();
                for v in vals[..vals.len() - 1].iter().rev() {
                    r.fold(&mut acc, v, true).unwrap();
                }
                prop_assert_eq!(acc, want);
            }
        }
    }
}
