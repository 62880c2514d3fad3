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
//! `f64::min`/`max`): a NaN operand loses to a number.

use super::CollError;

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
}

impl ReduceOp {
    /// All of them.
    pub const ALL: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Band, ReduceOp::Bor];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Band => "band",
            ReduceOp::Bor => "bor",
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
        }
    };
}

macro_rules! float_op {
    ($t:ty, $op:expr, $acc:expr, $other:expr, $left:expr) => {
        match $op {
            ReduceOp::Sum => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a + b),
            ReduceOp::Min => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.min(b)),
            ReduceOp::Max => fold_as!($t, $acc, $other, $left, |a: $t, b: $t| a.max(b)),
            ReduceOp::Band | ReduceOp::Bor => unreachable!("validated: no bitwise ops on floats"),
        }
    };
}

impl Reduction {
    /// A reduction; bitwise operations on floating-point types are refused.
    pub fn new(op: ReduceOp, dtype: Datatype) -> Result<Reduction, CollError> {
        let r = Reduction { op, dtype };
        r.validate()?;
        Ok(r)
    }

    /// Checks that the operation applies to the type.
    pub fn validate(&self) -> Result<(), CollError> {
        if self.dtype.is_float() && matches!(self.op, ReduceOp::Band | ReduceOp::Bor) {
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

    /// `acc = acc op other` element-wise, or `other op acc` when
    /// `other_left` (the other value comes from a lower rank). Lengths must
    /// be equal and a whole number of elements.
    pub fn fold(&self, acc: &mut [u8], other: &[u8], other_left: bool) -> Result<(), CollError> {
        self.validate()?;
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
    fn refusals() {
        assert_eq!(Reduction::new(ReduceOp::Band, Datatype::F32), Err(CollError::BadReduction));
        let r = Reduction::new(ReduceOp::Bor, Datatype::U64).unwrap();
        assert!(r.fold(&mut [0u8; 8], &[0u8; 16], false).is_err());
        assert!(r.fold(&mut [0u8; 7], &[0u8; 7], false).is_err());
    }
}
