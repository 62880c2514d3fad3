//! Whole numbers in a range.

use super::{Kind, Problem};

/// A whole number from `min` to `max` (decimal digits only).
#[derive(Debug, Clone, Copy)]
pub struct Count {
    /// The least accepted.
    pub min: u64,
    /// The largest accepted.
    pub max: u64,
}

impl Kind for Count {
    type Value = u64;
    fn name(&self) -> String {
        "integer".into()
    }
    fn noun(&self) -> &'static str {
        "a whole number"
    }
    fn accepted(&self) -> String {
        format!("a whole number from {} to {}", self.min, self.max)
    }
    fn parse(&self, text: &str) -> Result<u64, Problem> {
        let t = text.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Problem::Malformed);
        }
        match t.parse::<u64>() {
            Ok(n) if n < self.min => Err(Problem::OutOfRange(format!("below {}", self.min))),
            Ok(n) if n > self.max => Err(Problem::OutOfRange(format!("above {}", self.max))),
            Ok(n) => Ok(n),
            Err(_) => Err(Problem::OutOfRange(format!("above {}", self.max))),
        }
    }
    fn canonical(&self, v: &u64) -> String {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range() {
        let c = Count { min: 1, max: 10 };
        assert_eq!(c.parse("10"), Ok(10));
        assert_eq!(c.parse("0"), Err(Problem::OutOfRange("below 1".into())));
        assert_eq!(c.parse("11"), Err(Problem::OutOfRange("above 10".into())));
        assert_eq!(
            c.parse("99999999999999999999999"),
            Err(Problem::OutOfRange("above 10".into()))
        );
        assert_eq!(c.parse("-1"), Err(Problem::Malformed));
        assert_eq!(c.parse("1K"), Err(Problem::Malformed));
    }
}
