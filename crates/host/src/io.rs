use outboard_engine::{AtomicOp, AtomicWidth, Command, CommandError, Endpoint, Event, HostBuf, Instant};
use thiserror::Error;

/// A host buffer could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MemoryError {
    /// Not a live buffer of this process, or the access leaves it.
    #[error("buffer {addr:#x}+{len} is not live memory of this process")]
    Invalid {
        /// Start.
        addr: u64,
        /// Length.
        len: usize,
    },
    /// No memory left.
    #[error("out of memory for a {len}-byte buffer")]
    Exhausted {
        /// Requested length.
        len: u32,
    },
}

/// How host code reaches its engine and its own memory. One value per open
/// port.
///
/// Implementations: the runtime (rings to an engine thread, real memory the
/// engine's DMA reaches) and the simulator (a simulated engine, simulated
/// memory, virtual time). Buffers handed to the engine in commands must come
/// from [`PortIo::alloc`] so the engine's DMA can reach them.
pub trait PortIo {
    /// This port's endpoint (node, port, incarnation).
    fn endpoint(&self) -> Endpoint;
    /// Hands a command to the engine (a send or receive token).
    fn post(&mut self, cmd: Command) -> Result<(), CommandError>;
    /// Takes the next completion for this port, if one is there.
    fn poll_event(&mut self) -> Option<Event>;
    /// The current time (real or virtual).
    fn now(&self) -> Instant;
    /// Called by blocking waits between polls. The runtime spins, yields or
    /// drives the engine itself (host-assisted progress); a simulator may
    /// advance virtual time.
    fn idle(&mut self);
    /// Waits in the kernel until this port has an event (or a short while
    /// passed), whatever the node's progress policy: for a thread whose
    /// only job is to serve requests - the host-based atomic server
    /// blocking like GM's `gm_blocking_receive_no_spin` (dissertation
    /// 5.4.1) - which should give its CPU away rather than spin or drive
    /// the engine, while the application's own waits keep the node's
    /// policy. The default is [`PortIo::idle`].
    fn block(&mut self) {
        self.idle();
    }
    /// Tagged messages longer than this go by rendezvous (module
    /// `rendezvous`): a property of the transport, measured where it runs
    /// (the runtime's UDP path; a simulator profile). `None`: all eager.
    fn eager_threshold(&self) -> Option<u32> {
        None
    }
    /// Which rendezvous protocol the port's sends above the threshold use
    /// (module `rendezvous`; a receiver takes both).
    fn rendezvous_protocol(&self) -> crate::RendezvousProtocol {
        crate::RendezvousProtocol::Read
    }
    /// Allocates a buffer the engine can reach by DMA.
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError>;
    /// Allocates a buffer like [`PortIo::alloc`] whose bytes are left as
    /// they are (the previous contents of this process's memory), for data
    /// about to be written or received over it: zeroing a megabyte costs
    /// more than the message. The default zeroes.
    fn alloc_unzeroed(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.alloc(len)
    }
    /// Frees a buffer from [`PortIo::alloc`].
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError>;
    /// Copies `out.len()` bytes at `addr` out of host memory.
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError>;
    /// Copies `data` to `addr` of host memory.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError>;
    /// Performs `op` on the `width` word at `addr` (aligned, native byte
    /// order) of host memory, atomically with respect to the engine's
    /// atomic operations on the same word ([`outboard_engine::Dma::atomic`]),
    /// and returns its old value: the host's own fetch-add, swap and
    /// compare-and-swap on a registered word.
    ///
    /// The default, a read and then a write, is right only where the
    /// engine cannot run between the two; the runtime, whose engine thread
    /// runs beside the host, and the test network, which any thread may
    /// step, override it, and so does the simulator (which runs engine and
    /// host in one thread), to price it.
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        let n = width.bytes() as usize;
        let mut word = [0u8; 8];
        self.read(addr, &mut word[..n])?;
        let old = match width {
            AtomicWidth::W32 => u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]])),
            AtomicWidth::W64 => u64::from_ne_bytes(word),
        };
        let new = op.apply(width, old);
        if new != old {
            match width {
                AtomicWidth::W32 => self.write(addr, &(new as u32).to_ne_bytes())?,
                AtomicWidth::W64 => self.write(addr, &new.to_ne_bytes())?,
            }
        }
        Ok(old)
    }
    /// The longest allreduce contribution, in bytes, that
    /// [`AllreduceAlgorithm::Auto`](crate::AllreduceAlgorithm::Auto) runs
    /// by recursive doubling (block trees above): the crossover measured
    /// for this transport, offloaded. One value for both modes, so that a
    /// call gives the same bits offloaded and host-based (the two
    /// algorithms combine in different orders). The default is the
    /// runtime's ([`runtime_allreduce_doubling_max`]); the simulator gives
    /// each profile's.
    fn allreduce_doubling_max(&self) -> usize {
        runtime_allreduce_doubling_max()
    }
    /// The largest contribution one offloaded collective carries: the
    /// engine's `max_collective_len` (its MTU less the packet and collective
    /// headers). Longer offloaded data is split into consecutive
    /// collectives of at most this size. The default is for the engine's
    /// default MTU ([`outboard_engine::DEFAULT_MTU`]); an implementation whose
    /// engines use another MTU must say so (all members of a group must
    /// agree, since they must split alike).
    fn coll_max_len(&self) -> u32 {
        DEFAULT_COLL_MAX_LEN
    }
    /// The longest message the engine takes in one command
    /// (`EngineConfig::max_message`): a rendezvous message is read in one
    /// RDMA read, so it is bounded the same way as an eager one.
    fn max_message(&self) -> u32 {
        u32::MAX
    }
    /// Shared memory to the other ports of this node, where the transport
    /// has it (module `local`); `None`: every message goes through the
    /// engine.
    fn local_link(&mut self) -> Option<&mut dyn crate::local::LocalLink> {
        None
    }
}

/// [`PortIo::coll_max_len`] for the engine's default configuration.
pub const DEFAULT_COLL_MAX_LEN: u32 =
    outboard_engine::max_collective_len_for(outboard_engine::DEFAULT_MTU);

/// The runtime's allreduce crossover ([`PortIo::allreduce_doubling_max`]),
/// for I/O layers with no measurement of their own: 8 KiB, measured over
/// UDP between engines (`outboard bench allreduce -n 2,4 --sizes
/// 8,1K,4K,8K,16K,32K` on a 2-core machine: with 2 ranks recursive
/// doubling was ahead at every size to 32 KiB, offloaded and host-based;
/// with 4 ranks on the 2 cores, offloaded, even to 1 KiB and 6-10 %
/// behind block trees at 4-8 KiB, while host-based it stayed ahead to
/// 32 KiB).
pub fn runtime_allreduce_doubling_max() -> usize {
    8 << 10
}
