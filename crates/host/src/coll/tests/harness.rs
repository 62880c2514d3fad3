//! Several ports on one test network ([`NetIo`] each), a single-thread
//! driver for split-phase requests, and helpers.

use std::sync::{Arc, Mutex};

use outboard_engine::{Endpoint, GroupId, NodeId};
use outboard_testnet::{LinkConfig, Network};

pub use crate::testnet_io::NetIo;
use crate::{Group, Port};

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
            .map(|i| Port::new(NetIo::open(&net, NodeId(i)).unwrap()))
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
