//! [`NetIo`]: a [`PortIo`] over the deterministic test network
//! (`outboard-testnet`), so the host library's own tests drive real engines
//! in virtual time. Built for the library's unit tests and, with the
//! `testnet` feature, for its integration tests (which enable the feature
//! through a dev-dependency of the crate on itself).
//!
//! It lives here rather than in `outboard-testnet` or a crate of its own:
//! a crate that depends on this one implements the `PortIo` of a second
//! copy of the library when the library's unit tests are built, which those
//! tests could not use.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use outboard_engine::{
    AtomicOp, AtomicWidth, Command, CommandError, Dma, Endpoint, Event, HostBuf, Instant, NodeId, OpenError, PortId,
};
use outboard_testnet::Network;

use crate::{MemoryError, PortIo};

/// Port 0 of one node of a shared test network (one port per node, so every
/// event of the node is this port's). `idle` steps the network; any thread
/// may, since time is virtual. Counts completions handed up twice, which a
/// [`crate::Port`] would drop silently.
pub struct NetIo {
    net: Arc<Mutex<Network>>,
    ep: Endpoint,
    events: VecDeque<Event>,
    seen: HashSet<u64>,
    /// Completions that reached this host a second time (must stay 0).
    pub repeated_events: u64,
    max_coll: u32,
}

impl NetIo {
    /// Opens port 0 of `node`; the port's collective length is its
    /// engine's.
    pub fn open(net: &Arc<Mutex<Network>>, node: NodeId) -> Result<NetIo, OpenError> {
        let mut nb = net.lock().expect("network lock");
        let ep = nb.open_port(node, PortId(0))?;
        let max_coll = nb.engine(node).max_collective_len();
        drop(nb);
        Ok(NetIo {
            net: net.clone(),
            ep,
            events: VecDeque::new(),
            seen: HashSet::new(),
            repeated_events: 0,
            max_coll,
        })
    }

    fn net(&self) -> MutexGuard<'_, Network> {
        self.net.lock().expect("network lock")
    }

    /// Moves the node's completions from the network into this port's
    /// queue; whether there were any (a driver polls a port's library only
    /// when there were).
    pub fn pull(&mut self) -> bool {
        let evs = self.net().take_events(self.ep.node);
        let any = !evs.is_empty();
        self.events.extend(evs);
        any
    }
}

impl PortIo for NetIo {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.net().command(self.ep.node, self.ep.port, cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        if self.events.is_empty() {
            self.pull();
        }
        let e = self.events.pop_front()?;
        if !self.seen.insert(e.op.0) {
            self.repeated_events += 1;
        }
        Some(e)
    }
    fn now(&self) -> Instant {
        self.net().now()
    }
    fn idle(&mut self) {
        let stepped = self.net().step();
        if !stepped {
            std::thread::yield_now();
        }
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        Ok(self.net().memory(self.ep.node).alloc(len))
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.net().memory(self.ep.node).free(buf);
        Ok(())
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.net()
            .memory(self.ep.node)
            .read(self.ep.port, addr, out)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: out.len(),
            })
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.net()
            .memory(self.ep.node)
            .write(self.ep.port, addr, data)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: data.len(),
            })
    }
    /// One read-modify-write under the network's lock: other threads
    /// step the engines (and so their atomics) between any two calls.
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.net()
            .memory(self.ep.node)
            .atomic(self.ep.port, addr, width, op)
            .map_err(|_| MemoryError::Invalid { addr, len: width.bytes() as usize })
    }
    fn coll_max_len(&self) -> u32 {
        self.max_coll
    }

    fn max_message(&self) -> u32 {
        self.net().engine(self.ep.node).config().max_message
    }
}
