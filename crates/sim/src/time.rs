//! Virtual time in picoseconds.
//!
//! The engine counts nanoseconds, but the papers' cost figures have four
//! decimals of a microsecond (2.7863 us, 0.0301 us per byte): a nanosecond
//! clock would round every charge and the dissertation's closed-form example
//! (333.7294 us) could not come out exact. Picoseconds in a `u64` reach 213
//! days of virtual time, far beyond any experiment. Per-byte rates are kept in
//! femtoseconds so that a 400 Gb/s link (20 ps per byte) is not rounded away.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

use outboard_engine::Instant;

/// A point in virtual time: picoseconds since the start of the simulation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

/// A span of virtual time in picoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub u64);

impl Time {
    /// The start of the simulation.
    pub const ZERO: Time = Time(0);

    /// Microseconds since the start (for reports).
    pub fn as_us(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// The engine's view of this instant (nanoseconds, rounded down: the
    /// engine only uses time for timers, where a sub-nanosecond does not
    /// matter).
    pub fn to_engine(self) -> Instant {
        Instant::from_nanos(self.0 / 1000)
    }

    /// A deadline the engine asked for, in virtual time.
    pub fn from_engine(i: Instant) -> Time {
        Time(i.as_nanos().saturating_mul(1000))
    }

    /// Time elapsed since `earlier` (zero if it is later).
    pub fn since(self, earlier: Time) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
}

impl Dur {
    /// No time.
    pub const ZERO: Dur = Dur(0);

    /// `us` microseconds, rounded to the nearest picosecond. Negative or
    /// non-finite values are refused by profile validation before they get
    /// here; they become zero.
    pub fn from_us(us: f64) -> Dur {
        if us.is_finite() && us > 0.0 {
            Dur((us * 1e6).round() as u64)
        } else {
            Dur::ZERO
        }
    }

    /// `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Dur {
        Dur(ns * 1000)
    }

    /// In microseconds (for reports).
    pub fn as_us(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl Add<Dur> for Time {
    type Output = Time;
    fn add(self, d: Dur) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Dur> for Time {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}

impl Add for Dur {
    type Output = Dur;
    fn add(self, d: Dur) -> Dur {
        Dur(self.0.saturating_add(d.0))
    }
}

impl AddAssign for Dur {
    fn add_assign(&mut self, d: Dur) {
        *self = *self + d;
    }
}

impl Sub for Time {
    type Output = Dur;
    fn sub(self, rhs: Time) -> Dur {
        self.since(rhs)
    }
}

/// A per-byte rate in femtoseconds per byte.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PerByte(pub u64);

impl PerByte {
    /// `us` microseconds per byte, rounded to the nearest femtosecond.
    pub fn from_us(us: f64) -> PerByte {
        if us.is_finite() && us > 0.0 {
            PerByte((us * 1e9).round() as u64)
        } else {
            PerByte(0)
        }
    }

    /// Time for `bytes` bytes, rounded to the nearest picosecond.
    pub fn for_bytes(self, bytes: u64) -> Dur {
        Dur((u128::from(self.0) * u128::from(bytes) + 500) as u64 / 1000)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}us", self.as_us())
    }
}

impl fmt::Debug for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}us", self.as_us())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_figures_are_exact_in_picoseconds() {
        let send = Dur::from_us(2.7863) + PerByte::from_us(0.0301).for_bytes(1536);
        assert_eq!(send, Dur(49_019_900));
        let recv = Dur::from_us(4.2820) + PerByte::from_us(0.0230).for_bytes(1536);
        assert_eq!(recv, Dur(39_610_000));
    }

    #[test]
    fn fast_links_keep_sub_picosecond_rates() {
        // 400 Gb/s: 0.02 ns per byte; 4096 bytes take 81.92 ns.
        assert_eq!(PerByte::from_us(0.00002).for_bytes(4096), Dur(81_920));
    }

    #[test]
    fn engine_time_round_trips_whole_nanoseconds() {
        let t = Time(123_456_789);
        assert_eq!(t.to_engine().as_nanos(), 123_456);
        assert_eq!(Time::from_engine(t.to_engine()), Time(123_456_000));
    }
}
