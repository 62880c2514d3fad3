//! Sizes: a number of bytes with an optional binary suffix.

use super::{Kind, Problem};

/// The suffixes a size may carry, each with its multiplier: K, M and G are
/// binary (KiB, MiB, GiB), as every size Outboard takes is a buffer or
/// message length. KB/MB/GB are refused rather than guessed at, since
/// people mean 1000 by them as often as 1024.
const SUFFIXES: [(&str, u64); 7] = [
    ("", 1),
    ("k", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gib", 1 << 30),
];

/// Parses a size: decimal digits, optional blanks, an optional suffix K,
/// KiB, M, MiB, G or GiB (any case). `None` for anything else, including a
/// size beyond `u64`. Never panics on any input.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, suffix) = t.split_at(digits);
    let suffix = suffix.trim_start().to_ascii_lowercase();
    let (_, mult) = SUFFIXES.iter().find(|(s, _)| *s == suffix)?;
    number.parse::<u64>().ok()?.checked_mul(*mult)
}

/// A size as people write it: the largest binary suffix that divides it.
pub fn human_size(n: u64) -> String {
    match n {
        0 => "0".into(),
        n if n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

const ACCEPTED: &str = "a number of bytes with an optional K, M or G suffix (e.g. 65536, 64K, 1M)";

fn bounded(text: &str, max: u64) -> Result<u64, Problem> {
    match parse_size(text) {
        Some(n) if n <= max => Ok(n),
        Some(_) => Err(Problem::OutOfRange(format!("larger than {max} bytes"))),
        // All digits but too many for 64 bits: too large, not malformed.
        None if text.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Err(Problem::OutOfRange(format!("larger than {max} bytes")))
        }
        None => Err(Problem::Malformed),
    }
}

/// A size in bytes, at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// The largest accepted (what the reader's type holds).
    pub max: u64,
}

impl Kind for Size {
    type Value = u64;
    fn name(&self) -> String {
        "size".into()
    }
    fn noun(&self) -> &'static str {
        "a size"
    }
    fn accepted(&self) -> String {
        ACCEPTED.into()
    }
    fn parse(&self, text: &str) -> Result<u64, Problem> {
        bounded(text, self.max)
    }
    fn canonical(&self, v: &u64) -> String {
        v.to_string()
    }
    fn human(&self, v: &u64) -> String {
        human_size(*v)
    }
}

/// A size in bytes, at most `max`, or `off` (`None`): a limit that can be
/// switched off altogether.
#[derive(Debug, Clone, Copy)]
pub struct SizeOrOff {
    /// The largest accepted.
    pub max: u64,
}

impl Kind for SizeOrOff {
    type Value = Option<u64>;
    fn name(&self) -> String {
        "size or off".into()
    }
    fn noun(&self) -> &'static str {
        "a size"
    }
    fn accepted(&self) -> String {
        format!("{ACCEPTED}, or off")
    }
    fn parse(&self, text: &str) -> Result<Option<u64>, Problem> {
        if text.trim().eq_ignore_ascii_case("off") {
            return Ok(None);
        }
        bounded(text, self.max).map(Some)
    }
    fn canonical(&self, v: &Option<u64>) -> String {
        v.map_or_else(|| "off".into(), |n| n.to_string())
    }
    fn human(&self, v: &Option<u64>) -> String {
        v.map_or_else(|| "off".into(), human_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_binary_and_strict() {
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("64 kib"), Some(65536));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("0"), Some(0));
        for bad in [
            "", "1Q", "1MB", "-1", "abc", "1.5M", "M", "1 M B", "0x10", "+5", "1e6",
        ] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        assert_eq!(parse_size("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_size("18446744073709551616"), None);
        assert_eq!(parse_size("17179869184G"), None, "overflows");
    }

    #[test]
    fn bounds_and_off() {
        let k = SizeOrOff {
            max: u32::MAX as u64,
        };
        assert_eq!(k.parse("off"), Ok(None));
        assert_eq!(k.parse("OFF"), Ok(None));
        assert_eq!(
            k.parse("4G"),
            Err(Problem::OutOfRange("larger than 4294967295 bytes".into()))
        );
        assert_eq!(
            k.parse("99999999999999999999999"),
            Err(Problem::OutOfRange("larger than 4294967295 bytes".into()))
        );
        assert_eq!(Size { max: 10 }.parse("off"), Err(Problem::Malformed));
        assert_eq!(human_size(1 << 20), "1M");
        assert_eq!(human_size(65536), "64K");
        assert_eq!(human_size(1000), "1000");
    }
}
