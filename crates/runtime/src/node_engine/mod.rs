//! One engine per node, in a process of its own (`outboard node`), serving
//! every local process of the job through a port each - the papers' NIC,
//! whose control program serves the node's processes through GM ports.
//!
//! A process attaches over the engine's Unix socket ([`socket`],
//! [`protocol`]) and hands over a shared-memory segment it created
//! (module `shm`) and an eventfd. The segment holds, in this order:
//!
//! | offset | what |
//! | --- | --- |
//! | 0 | control block: the engine's "sleeping" word at 0, the process's "waiting" word at 64 |
//! | [`CONTROL_BYTES`] | the command ring (process to engine), encoded commands |
//! | then | the event ring (engine to process), encoded events |
//! | page aligned, to the end | registered memory: every buffer the port's commands name |
//!
//! The engine reads commands and writes completions through the rings and
//! moves payloads straight between registered memory and the network (or
//! another local port's memory): no copy more than the in-process engine
//! makes. Doorbells: a process that posts while the engine's sleeping word
//! is set writes the engine's eventfd; the engine that completes something
//! for a process whose waiting word is set writes the process's eventfd.
//!
//! Commands and events cross the rings in the checked encoding of
//! `outboard_engine::port_codec`: a process can only hurt itself. One that
//! writes something else is detached with a sentence that says so.
//!
//! - [`server`]: the engine process's loop;
//! - [`client`]: a process's side: starting the engine, attaching, and
//!   [`client::RemotePort`], the host library's port over the rings.

pub mod client;
pub(crate) mod join;
pub mod protocol;
pub mod server;
pub mod socket;

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use outboard_engine::port_codec::{self, COMMAND_BYTES, EVENT_BYTES};
use outboard_engine::{Command, Event};

use crate::shm::{ShmConsumer, ShmProducer, Segment};

/// Bytes of the control block at the start of a segment.
pub const CONTROL_BYTES: u64 = 4096;
/// Offset of the word the engine sets while it blocks (the process must
/// ring the doorbell after posting).
pub const ENGINE_SLEEPING: u64 = 0;
/// Offset of the word the process sets while it blocks (the engine must
/// write its eventfd after completing something).
pub const HOST_WAITING: u64 = 64;

/// How the engine wakes a process that blocks waiting for its port.
#[derive(Debug)]
pub struct RemoteWake {
    seg: Arc<Segment>,
    eventfd: File,
}

impl RemoteWake {
    pub(crate) fn new(seg: Arc<Segment>, eventfd: File) -> RemoteWake {
        RemoteWake { seg, eventfd }
    }

    /// After new events are in the ring: writes the eventfd if the process
    /// said it waits. The SeqCst fence pairs with the one the process
    /// issues between setting its word and its last look at the ring.
    pub(crate) fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.seg.atomic_u32(HOST_WAITING).is_some_and(|w| w.load(Ordering::SeqCst) != 0) {
            let _ = (&self.eventfd).write(&1u64.to_ne_bytes());
        }
    }
}

/// The engine's end of a process's command ring.
pub struct SharedCommands {
    ring: ShmConsumer,
    slot: [u8; COMMAND_BYTES],
}

impl SharedCommands {
    pub(crate) fn new(ring: ShmConsumer) -> SharedCommands {
        SharedCommands { ring, slot: [0; COMMAND_BYTES] }
    }

    /// The next command; `Some(Err)` with a sentence for anything else.
    pub(crate) fn pop(&mut self) -> Option<Result<Command, String>> {
        match self.ring.pop(&mut self.slot) {
            Ok(false) => None,
            Ok(true) => Some(port_codec::decode_command(&self.slot).map_err(|e| format!("its command ring held something that is not a command ({e})"))),
            Err(e) => Some(Err(format!("its command ring is broken ({e})"))),
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.ring.has_pending()
    }
}

/// The engine's end of a process's event ring.
pub struct SharedEvents {
    ring: ShmProducer,
    slot: [u8; EVENT_BYTES],
}

impl SharedEvents {
    pub(crate) fn new(ring: ShmProducer) -> SharedEvents {
        SharedEvents { ring, slot: [0; EVENT_BYTES] }
    }

    /// Publishes `e`; gives it back when the ring is full (or broken: the
    /// process then waits until its socket tells it the engine gave up).
    pub(crate) fn push(&mut self, e: Event) -> Result<(), Event> {
        port_codec::encode_event(&e, &mut self.slot);
        match self.ring.push(&self.slot) {
            Ok(true) => Ok(()),
            _ => Err(e),
        }
    }
}
