//! Shared memory between a client process and its node's engine process
//! (`outboard node`): each client creates a [`Segment`] (a sealed memfd),
//! passes its fd to the engine, and both map it. The segment holds the
//! client's command and completion rings ([`ShmProducer`] /
//! [`ShmConsumer`], fixed-size byte slots) and its registered memory,
//! which the client carves up with a [`ShmHeap`] and the engine reads and
//! writes in place through the segment's bounds-checked accessors, the
//! way a NIC's DMA reaches registered host memory.
//!
//! The peer process is untrusted: nothing it writes into the segment can
//! make this side access memory outside the mapping, panic, or hit
//! undefined behaviour; the worst it gets is garbage bytes or a
//! [`RingError::Corrupt`]. The `unsafe` code is in `segment` (the mapping
//! and the raw copies and atomics over it); `ring` and `heap` are safe
//! code over it.

pub mod heap;
pub mod ring;
pub mod segment;

pub use heap::ShmHeap;
pub use ring::{ring_bytes, RingError, ShmConsumer, ShmProducer, ShmRing};
pub use segment::{page_size, AtomicFault, OutOfRange, Segment};
