//! Durations, with units.

use std::time::Duration;

use super::{Kind, Problem};

/// A unit of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds (`ns`).
    Ns,
    /// Microseconds (`us`).
    Us,
    /// Milliseconds (`ms`).
    Ms,
    /// Seconds (`s`).
    S,
}

impl Unit {
    fn nanos(self) -> u64 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
            Unit::S => 1_000_000_000,
        }
    }

    fn words(self) -> &'static str {
        match self {
            Unit::Ns => "nanoseconds",
            Unit::Us => "microseconds",
            Unit::Ms => "milliseconds",
            Unit::S => "seconds",
        }
    }

    fn from_suffix(s: &str) -> Option<Unit> {
        match s.to_ascii_lowercase().as_str() {
            "ns" => Some(Unit::Ns),
            "us" | "\u{b5}s" | "\u{3bc}s" => Some(Unit::Us),
            "ms" => Some(Unit::Ms),
            "s" => Some(Unit::S),
            _ => None,
        }
    }
}

/// A duration as people write it, in the largest unit that divides it
/// ("2s", "500ms"); [`Time`] reads it back.
pub fn human_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, name) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns > 0 && ns % unit == 0 {
            return format!("{}{name}", ns / unit);
        }
    }
    format!("{ns}ns")
}

/// A duration from `min` to `max`: a whole number and a unit (ns, us, ms,
/// s). `bare` is the unit of a number without one: variables whose names
/// end in `_MS` took plain milliseconds before units were accepted, so
/// they still do; elsewhere a unit is required.
#[derive(Debug, Clone, Copy)]
pub struct Time {
    /// The unit of a bare number (`None`: a unit is required).
    pub bare: Option<Unit>,
    /// The shortest accepted.
    pub min: Duration,
    /// The longest accepted.
    pub max: Duration,
}

impl Kind for Time {
    type Value = Duration;
    fn name(&self) -> String {
        "duration".into()
    }
    fn noun(&self) -> &'static str {
        "a duration"
    }
    fn accepted(&self) -> String {
        let mut s = "a duration with a unit ns, us, ms or s (e.g. 500ms, 2s)".to_string();
        if let Some(u) = self.bare {
            s += &format!(", or a bare number of {}", u.words());
        }
        if !self.min.is_zero() {
            s += &format!(", at least {}", human_duration(self.min));
        }
        s
    }
    fn parse(&self, text: &str) -> Result<Duration, Problem> {
        let t = text.trim();
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(Problem::Malformed);
        }
        let (number, suffix) = t.split_at(digits);
        let suffix = suffix.trim_start();
        let unit = if suffix.is_empty() {
            self.bare
        } else {
            Unit::from_suffix(suffix)
        }
        .ok_or(Problem::Malformed)?;
        let longer = || Problem::OutOfRange(format!("longer than {}", human_duration(self.max)));
        let n: u64 = number.parse().map_err(|_| longer())?;
        let d = Duration::from_nanos(n.checked_mul(unit.nanos()).ok_or_else(longer)?);
        if d < self.min {
            return Err(Problem::OutOfRange(format!(
                "shorter than {}",
                human_duration(self.min)
            )));
        }
        if d > self.max {
            return Err(longer());
        }
        Ok(d)
    }
    fn canonical(&self, v: &Duration) -> String {
        // Every accepted value fits: parse builds it from u64 nanoseconds.
        v.as_nanos().to_string()
    }
    fn read_canonical(&self, text: &str) -> Option<Duration> {
        Time {
            bare: Some(Unit::Ns),
            ..*self
        }
        .parse(text)
        .ok()
    }
    fn human(&self, v: &Duration) -> String {
        human_duration(*v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Time = Time {
        bare: Some(Unit::Ms),
        min: Duration::from_millis(1),
        max: Duration::from_nanos(u64::MAX),
    };

    #[test]
    fn units_and_bare_numbers() {
        assert_eq!(MS.parse("500"), Ok(Duration::from_millis(500)));
        assert_eq!(MS.parse("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(MS.parse("2 S"), Ok(Duration::from_secs(2)));
        assert_eq!(MS.parse("1500us"), Ok(Duration::from_micros(1500)));
        assert_eq!(MS.parse("1000000ns"), Ok(Duration::from_millis(1)));
        assert_eq!(
            MS.parse("0"),
            Err(Problem::OutOfRange("shorter than 1ms".into()))
        );
        assert_eq!(
            MS.parse("999us"),
            Err(Problem::OutOfRange("shorter than 1ms".into()))
        );
        for bad in ["ms", "1.5s", "2 min", "-1", "1h", "s2"] {
            assert_eq!(MS.parse(bad), Err(Problem::Malformed), "{bad}");
        }
        assert!(matches!(
            MS.parse("99999999999999s"),
            Err(Problem::OutOfRange(_))
        ));
        let strict = Time { bare: None, ..MS };
        assert_eq!(strict.parse("5"), Err(Problem::Malformed));
        assert_eq!(MS.canonical(&Duration::from_secs(2)), "2000000000");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(human_duration(Duration::from_secs(60)), "60s");
    }
}
