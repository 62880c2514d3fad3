//! Several ports on one test network: a `PortIo` over a shared network, a
//! single-thread driver for split-phase requests, and helpers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use outboard_engine::{
    Command, CommandError, Dma, Endpoint, Event, GroupId, HostBuf, Instant, NodeId, PortId,
};
use outboard_testnet::{LinkConfig, Network};

use crate::{Group, MemoryError, Port, PortIo};

/// One port of the shared network. `idle` steps the network (any thread
/// may; time is virtual).
pub struct NetIo {
    pub net: Arc<Mutex<Network>>,
    ep: Endpoint,
    events: VecDeque<Event>,
}

impl PortIo for NetIo {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.net
            .lock()
            .unwrap()
            .command(self.ep.node, self.ep.port, cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        if self.events.is_empty() {
            // One port per node: every event of the node is ours.
            let evs = self.net.lock().unwrap().take_events(self.ep.node);
            self.events.extend(evs);
        }
        self.events.pop_front()
    }
    fn now(&self) -> Instant {
        self.net.lock().unwrap().now()
    }
    fn idle(&mut self) {
        let stepped = self.net.lock().unwrap().step();
        if !stepped {
            std::thread::yield_now();
        }
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        Ok(self.net.lock().unwrap().memory(self.ep.node).alloc(len))
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.net.lock().unwrap().memory(self.ep.node).free(buf);
        Ok(())
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        let mut net = self.net.lock().unwrap();
        net.memory(self.ep.node)
            .read(self.ep.port, addr, out)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: out.len(),
            })
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let mut net = self.net.lock().unwrap();
        net.memory(self.ep.node)
            .write(self.ep.port, addr, data)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: data.len(),
            })
    }
}

/// `n` nodes with one port each.
pub struct Cluster {
    pub net: Arc<Mutex<Network>>,
    pub ports: Vec<Port<NetIo>>,
}

pub const WORLD: GroupId = GroupId(1);

impl Cluster {
    pub fn new(n: u32, link: LinkConfig, seed: u64) -> Cluster {
        let net = Arc::new(Mutex::new(Network::with_defaults(n, link, seed)));
        let ports = (0..n)
            .map(|i| {
                let ep = net.lock().unwrap().open_port(NodeId(i), PortId(0)).unwrap();
                Port::new(NetIo {
                    net: net.clone(),
                    ep,
                    events: VecDeque::new(),
                })
            })
            .collect();
        Cluster { net, ports }
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.ports.iter().map(|p| p.endpoint()).collect()
    }

    /// The world group at every port.
    pub fn world(&mut self) -> Vec<Group> {
        let eps = self.endpoints();
        (0..eps.len())
            .map(|r| {
                self.ports[r]
                    .new_group(WORLD, r as u32, eps.clone())
                    .unwrap()
            })
            .collect()
    }

    /// Live allocations at a node (for leak checks), once the network is
    /// quiet: a finished host-based collective's last sends free their
    /// buffers only when they are confirmed.
    pub fn live(&mut self, node: u32) -> usize {
        loop {
            for p in &mut self.ports {
                p.progress();
            }
            if !self.step() {
                break;
            }
        }
        for p in &mut self.ports {
            p.progress();
        }
        self.net.lock().unwrap().memory(NodeId(node)).live()
    }

    /// Steps the network once; false when nothing is left to happen.
    pub fn step(&self) -> bool {
        self.net.lock().unwrap().step()
    }
}
