use core::fmt;

/// A 32-bit sequence number with wrapping arithmetic and modular comparison
/// (RFC 1982 serial-number style), so a long-lived connection never runs out
/// of numbers.
///
/// Two numbers compare correctly as long as they are less than 2^31 apart,
/// which the bounded send window guarantees by a wide margin.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// The number `n` steps after this one. A method, not `std::ops::Add`:
    /// sequence numbers wrap, and `a + b` would read as ordinary addition.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }

    /// The next number.
    #[inline]
    pub fn next(self) -> Seq {
        self.add(1)
    }

    /// Signed distance `self - other` (positive when `self` is after `other`).
    #[inline]
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// True when `self` comes strictly before `other`.
    #[inline]
    pub fn before(self, other: Seq) -> bool {
        self.diff(other) < 0
    }

    /// True when `self` comes strictly after `other`.
    #[inline]
    pub fn after(self, other: Seq) -> bool {
        self.diff(other) > 0
    }

    /// The later of two numbers.
    #[inline]
    pub fn max(self, other: Seq) -> Seq {
        if self.after(other) {
            self
        } else {
            other
        }
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
