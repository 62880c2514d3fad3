//! A port's state on its engine: incarnation, tokens, posted receives,
//! unexpected messages, registered regions, and per-stream order.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;

use crate::{Endpoint, Generation, HostBuf, NodeId, OpId, RecvMatch};

/// A receive the host posted and that no message has matched yet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostedRecv {
    pub op: OpId,
    pub matching: RecvMatch,
    pub buf: HostBuf,
}

/// A message that arrived before a matching receive was posted, held in
/// engine memory (bounded by `EngineConfig::unexpected_bytes`).
#[derive(Debug)]
pub(crate) struct Unexpected {
    /// (sending node, sender's message id): finds it from its fragments.
    pub key: (NodeId, u32),
    pub src: Endpoint,
    pub tag: u64,
    /// A rendezvous announcement (see `Target::Announce`).
    pub announce: bool,
    pub data: Vec<u8>,
    pub received: u32,
    /// A receive posted while the message was still arriving.
    pub bound: Option<PostedRecv>,
    /// Marked for an interrupt on delivery (`Command::SendMarked`).
    pub interrupt: bool,
}

impl Unexpected {
    pub fn complete(&self) -> bool {
        self.received as usize == self.data.len()
    }
}

/// The key of a message stream: the far port's node, port and incarnation.
pub(crate) type StreamKey = (NodeId, u8, Generation);

#[derive(Debug, Default)]
pub(crate) struct Port {
    /// Current incarnation if open, last one if closed (0: never opened).
    pub gen: Generation,
    pub open: bool,
    pub send_tokens: u32,
    pub recv_tokens: u32,
    pub coll_tokens: u32,
    pub posted: VecDeque<PostedRecv>,
    pub unexpected: VecDeque<Unexpected>,
    pub regions: BTreeMap<u64, HostBuf>,
    /// Next stream position per destination port incarnation.
    pub tx_streams: FxHashMap<StreamKey, u32>,
    /// Next expected stream position per source port incarnation.
    pub rx_streams: FxHashMap<StreamKey, u32>,
    /// The interrupt flag word in host memory (`Command::SetInterruptFlag`).
    pub interrupt_word: Option<u64>,
    /// A marked message was delivered since the driver last polled
    /// interrupts (module `interrupt`).
    pub interrupt_pending: bool,
}

impl Port {
    /// Index of the first posted receive that accepts the message.
    pub fn match_posted(&self, src: Endpoint, tag: u64) -> Option<usize> {
        self.posted.iter().position(|r| r.matching.accepts(src, tag))
    }

    /// Index of the first unexpected message (in arrival order) that a new
    /// receive accepts and that no other receive has claimed.
    pub fn match_unexpected(&self, m: &RecvMatch) -> Option<usize> {
        self.unexpected.iter().position(|u| u.bound.is_none() && m.accepts(u.src, u.tag))
    }

    pub fn find_unexpected(&self, key: (NodeId, u32)) -> Option<usize> {
        self.unexpected.iter().position(|u| u.key == key)
    }

    /// How an arriving message addressed to incarnation `gen` stands.
    pub fn admit(&self, gen: Generation) -> Admission {
        if self.open && gen == self.gen {
            Admission::Open
        } else if gen > self.gen {
            // A later incarnation than any so far: it may yet open.
            Admission::NotYet
        } else {
            Admission::Stale
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Open,
    NotYet,
    Stale,
}
