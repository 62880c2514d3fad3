//! The host library: what an application links to use its node's engine
//! (the papers' GM library plus the MPI layer above it).
//!
//! It reaches the engine only through [`PortIo`]: post a command, take an
//! event, read and write the process's own registered memory. The runtime
//! implements `PortIo` over lock-free rings to an engine thread; the
//! simulator implements it over a simulated engine in virtual time. Host
//! code written against [`Port`] runs unchanged in both.
//!
//! Everything is split-phase: `start_*` returns a [`Request`], [`Port::test`]
//! asks whether it finished, [`Port::wait`] blocks. A host-based algorithm
//! advances only while the application is inside this library, which is
//! exactly what makes it sensitive to process skew (the papers' point).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod atomic;
pub mod atomic_server;
pub mod bypass;
pub mod coll;
mod io;
pub mod local;
pub mod lock;
mod multisend;
pub mod nicvm;
mod port;
pub mod rendezvous;
pub mod postal;
#[cfg(any(test, feature = "testnet"))]
pub mod testnet_io;

pub use coll::{
    AllreduceAlgorithm, BarrierAlgorithm, BarrierProtocol, BcastMode, CollDefaults, CollRequest, CollectiveError, ReduceAlgorithm,
    Group, Layout, Mode, TreeShape, PLACE,
};
pub use atomic::{DirectAtomic, RemoteWord};
pub use io::{runtime_allreduce_doubling_max, MemoryError, PortIo, DEFAULT_COLL_MAX_LEN};
pub use outboard_engine::{
    AtomicOp, AtomicReturn, AtomicWidth, CollError, Command, CommandError, Completion, Datatype, Endpoint, Event, GroupId, HostBuf,
    Instant, NodeId, OpError, OpId, PortId, RecvMatch, ReduceOp, Reduction, Schedule,
};
pub use multisend::MultiSend;
pub use nicvm::{Delivery, NicModule};
pub use outboard_engine::{ModuleId, ModuleReport};
pub use port::{HostError, Port, Request};
pub use rendezvous::{RendezvousConfig, RendezvousProtocol, RendezvousStats};
pub use postal::{Lambda, LinkCosts};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod rendezvous_tests;
#[cfg(test)]
mod rendezvous_write_tests;
