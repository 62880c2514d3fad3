//! The operations a port has under way, so that when its engine is lost
//! (an engine thread that panicked, a node engine process that ended)
//! each of them, and each posted later, still completes exactly once -
//! with `OpError::EngineLost` - and no wait is left without an event.

use outboard_engine::{EngineConfig, Event, OpError, OpId, PortId};

/// A port's posted, not yet completed operations.
#[derive(Debug, Default)]
pub(crate) struct Outstanding(Vec<OpId>);

/// Room beyond the port's tokens, for commands that hold none (a cancel,
/// a registration, the interrupt flag).
const UNTOKENED: usize = 256;

impl Outstanding {
    /// Room for every operation the port can have under way at once, so
    /// that a post never allocates: an application-bypass handler posts
    /// from a signal handler, which must not.
    pub fn for_port(cfg: &EngineConfig) -> Outstanding {
        Outstanding(Vec::with_capacity((cfg.send_tokens + cfg.recv_tokens + cfg.coll_tokens) as usize + UNTOKENED))
    }

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
