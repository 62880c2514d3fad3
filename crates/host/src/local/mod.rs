//! Messages between the ports of one node without the engine: the host
//! library's shared-memory path.
//!
//! A message between two processes of one node that crossed the node
//! engine would be copied by it and cost two wake-ups; the MPIs copy it
//! once through shared memory, process to process. Where the transport
//! offers a [`LocalLink`] (the runtime, for the processes attached to one
//! node engine), tagged messages to ports of the same node go through it,
//! fragment by fragment, and the receiving host library matches them
//! itself, beside the engine's matching of everything else:
//!
//! - A send to a port the link reaches goes through the link; it completes
//!   once its last fragment is in the link (its buffer may be reused), as
//!   an eager send completes once the destination took it.
//! - A receive that can only be satisfied through the link (from a port
//!   the link reaches) waits here and never reaches the engine. One that
//!   may be satisfied either way (from any source) is posted to the engine
//!   *and* kept here; a message from the link that it is the first to
//!   match takes it only after the engine gave it up (a cancel), so no
//!   receive is satisfied twice and receives still match in the order they
//!   were posted.
//! - Messages from the link that no receive waits for are kept here
//!   (unexpected) until one does, as the engine keeps its own.
//!
//! Tags with the top bit set belong to the library's own protocols
//! (host-based collectives, rendezvous, NIC-assisted and NICVM
//! deliveries): they always go through the engine, so host-based
//! collectives are still measured through the engine they are compared
//! with, and what the engine itself delivers is never waited for here.

mod port;
#[cfg(test)]
mod tests;

use outboard_engine::{Endpoint, HostBuf, NodeId, PortId};
use thiserror::Error;

use crate::MemoryError;

pub(crate) use port::LocalState;

/// Tags with this bit go through the engine whatever the destination.
pub const ENGINE_TAGS: u64 = 1 << 63;

/// One fragment waiting in a link, as [`LocalLink::peek`] shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment {
    /// The sending port.
    pub src: Endpoint,
    /// The message's tag.
    pub tag: u64,
    /// The whole message's length.
    pub total: u32,
    /// Where this fragment's bytes lie in the message.
    pub offset: u32,
    /// This fragment's length.
    pub len: u32,
}

/// Where [`LocalLink::take`] puts a fragment's bytes.
pub enum Sink<'a> {
    /// The first `len` bytes (at most the fragment's) into this port's
    /// memory at `addr`; the rest are dropped (a truncated message).
    Memory {
        /// Where.
        addr: u64,
        /// How many bytes at most.
        len: u32,
    },
    /// Appended to a message kept until a receive takes it.
    Append(&'a mut Vec<u8>),
}

/// What a link knows of a peer port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Open, or with fragments still to take.
    Open,
    /// Closed its port (finished): nothing more will come from it.
    Closed,
    /// Its process is gone without closing.
    Dead,
}

/// Why a link refused a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LinkError {
    /// The destination's port is closed or its process gone.
    #[error("the destination port is closed")]
    PeerGone,
    /// This port's memory could not be read or written.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A peer wrote a fragment that breaks the link's format.
    #[error("a peer broke the shared-memory link's format")]
    Corrupt,
}

/// Shared memory between the ports of one node: per ordered pair of
/// ports, a queue of fragments that only its sender writes and only its
/// receiver reads. Fragments of one sender arrive in the order sent.
pub trait LocalLink {
    /// The endpoint of port `port` of node `node` when the link reaches
    /// it (another port of this node that it connects).
    fn peer(&self, node: NodeId, port: PortId) -> Option<Endpoint>;
    /// The longest fragment.
    fn fragment_max(&self) -> u32;
    /// Puts one fragment of a message of `total` bytes with `tag`, at
    /// `offset` in it, whose bytes are this port's memory `from`, into
    /// `dest`'s queue. `Ok(false)`: the queue is full (try again after the
    /// receiver took some).
    fn push(&mut self, dest: Endpoint, tag: u64, total: u32, offset: u32, from: HostBuf) -> Result<bool, LinkError>;
    /// The next fragment for this port, without taking it: peers in turn,
    /// each peer's fragments in order.
    fn peek(&mut self) -> Option<Fragment>;
    /// Takes the fragment [`LocalLink::peek`] last showed.
    fn take(&mut self, sink: Sink<'_>) -> Result<(), LinkError>;
    /// Whether `peer` may still send (checked now: a process's death is
    /// found by looking).
    fn peer_state(&mut self, peer: Endpoint) -> PeerState;
}
