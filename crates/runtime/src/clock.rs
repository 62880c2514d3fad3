//! The engine's clock: nanoseconds since the runtime started, from the OS's
//! monotonic clock.

use std::time::Instant as StdInstant;

use outboard_engine::Instant;

/// A monotonic clock whose epoch is its creation.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: StdInstant,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock { epoch: StdInstant::now() }
    }

    /// Time since the epoch.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
