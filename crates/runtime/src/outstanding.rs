//! The operations a port has under way, so that when its engine is lost
//! (an engine thread that panicked, a node engine process that ended)
//! each of them, and each posted later, still completes exactly once -
//! with `OpError::EngineLost` - and no wait is left without an event.

use outboard_engine::{Event, OpError, OpId, PortId};

/// A port's posted, not yet completed operations.
#[derive(Debug, Default)]
pub(crate) struct Outstanding(Vec<OpId>);

impl Outstanding {
    /// `op` was posted.
    pub fn posted(&mut self, op: OpId) {
        self.0.push(op);
    }

    /// `op`'s event was handed to the host.
    pub fn completed(&mut self, op: OpId) {
        if let Some(i) = self.0.iter().position(|&o| o == op) {
            self.0.swap_remove(i);
        }
    }

    /// Once the engine is lost: the next operation's failure (it leaves the
    /// list when the host takes the event, through [`Outstanding::completed`]).
    pub fn lost_event(&self, port: PortId) -> Option<Event> {
        self.0.first().map(|&op| Event { port, op, result: Err(OpError::EngineLost) })
    }
}
