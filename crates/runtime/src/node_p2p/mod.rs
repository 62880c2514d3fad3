//! The shared-memory link between the processes of one node
//! ([`outboard_host::local`]): one file in `/dev/shm` per job and node,
//! with a queue of fragments per ordered pair of the node's ranks, so that
//! a message from one process to another is copied into the queue by its
//! sender and out of it by its receiver, as the MPIs' shared-memory
//! transports do, without crossing the node engine.
//!
//! ```text
//! 0                          header: magic, processes attached
//! LINE * (1 + i)             rank i's line: closed, asleep
//! rings + RING * (s*n + r)   the queue from local rank s to local rank r:
//!                            head (its sender's count of fragments put),
//!                            tail (its receiver's count taken), then
//!                            SLOTS slots of SLOT bytes, each a fragment's
//!                            header and up to FRAGMENT bytes
//! ```
//!
//! Each word has one writer (a queue's head its sender, its tail its
//! receiver, a rank's line that rank), so the queues need no locks. A
//! receiver with nothing to do sleeps in the kernel; before it does it
//! sets its asleep word and looks at its queues once more, and a sender
//! that finds the word set after putting a fragment sends a byte to the
//! receiver's wake-up socket (an abstract Unix datagram socket named
//! after the job, the node and the rank), which the sleeper polls beside
//! its engine's eventfd.
//!
//! The file is named like a node collective's region and removed by the
//! last of the node's ranks to attach (or, if one never does, by the node
//! engine when the job ends: [`crate::node_coll::region::remove_job_regions`]).

use std::fs::OpenOptions;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use outboard_engine::{Endpoint, HostBuf, NodeId, PortId};
use outboard_host::local::{Fragment, LinkError, LocalLink, PeerState, Sink};
use outboard_host::MemoryError;

use crate::node_coll::region::RegionName;
use crate::node_coll::wait::alive;
use crate::shm::{page_size, Segment};

const LINE: u64 = 128;
const MAGIC: u64 = u64::from_le_bytes(*b"obnodep2");
/// Bytes of a slot: a fragment's header line and its bytes.
const SLOT: u64 = 16 * 1024;
const SLOT_HEADER: u64 = 64;
/// The longest fragment.
pub const FRAGMENT: u32 = (SLOT - SLOT_HEADER) as u32;

/// Slots per queue: fewer on nodes of many ranks, whose file holds a
/// queue for every pair (its pages are taken only once written).
fn slots_for(n: u64) -> u64 {
    match n {
        0..=16 => 16,
        17..=64 => 8,
        _ => 4,
    }
}

/// The node's ranks, by local rank: their endpoints and process ids.
#[derive(Debug, Clone)]
pub struct NodePeers {
    /// Endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Process ids (0: unknown).
    pub pids: Vec<u32>,
}

/// One process's view of its node's link.
pub struct NodeP2p {
    region: Segment,
    /// This process's own segment, where its buffers lie.
    memory: Arc<Segment>,
    /// The part of `memory` buffers may lie in.
    buffers: std::ops::Range<u64>,
    n: u64,
    me: u64,
    slots: u64,
    /// The node's ranks' endpoints and process ids, by local rank.
    peers: Vec<Endpoint>,
    pids: Vec<u32>,
    /// Fragments this process put into each queue of its own, and took
    /// from each queue to it (the words' only writer keeps them here too).
    heads: Vec<u64>,
    tails: Vec<u64>,
    /// The queue to look at first.
    next: u64,
    peeked: Option<(u64, u64, Fragment)>,
    wake: UnixDatagram,
    wake_names: Vec<SocketAddr>,
    /// Fragments put and taken: a waiting process that sees it move is
    /// busy, not idle.
    moved: u64,
    /// The queues that were full at the last push.
    refused: Vec<bool>,
    /// When each peer's process was last seen alive, and which are dead.
    seen_alive: Vec<Option<std::time::Instant>>,
    dead: Vec<bool>,
}

/// How long a peer's process seen alive is taken to live: a message
/// started within this of its death is put in its queue and lost with it,
/// as one its port took just before its death is.
const ALIVE_FOR: std::time::Duration = std::time::Duration::from_millis(1);

fn wake_name(job_key: u64, boot: u64, node: u32, local: u64) -> io::Result<SocketAddr> {
    let prefix = RegionName::job_prefix(job_key, boot, node);
    SocketAddr::from_abstract_name(format!("{prefix}p2p-wake-{local}").as_bytes())
}

impl NodeP2p {
    /// Attaches local rank `me` of `n` to its node's link: opens (or
    /// creates) the file and binds the wake-up socket. The peers' endpoints
    /// come later ([`NodeP2p::set_peers`]), once the job exchanged them.
    pub fn attach(job_key: u64, boot: u64, node: u32, n: u64, me: u64, memory: Arc<Segment>, buffers: std::ops::Range<u64>) -> io::Result<NodeP2p> {
        let slots = slots_for(n);
        let rings = LINE * (1 + n);
        let len = (rings + n * n * ring_bytes(slots)).next_multiple_of(page_size() as u64);
        let prefix = RegionName::job_prefix(job_key, boot, node);
        let path = PathBuf::from(format!("/dev/shm/{prefix}p2p"));
        // Never truncated: another rank may be using it already.
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)?;
        file.set_len(len)?;
        let region = Segment::open_file(file.into(), len as usize)?;
        let magic = region.atomic_u64(0).expect("aligned");
        if let Err(found) = magic.compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire) {
            if found != MAGIC {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a node's message queues", path.display())));
            }
        }
        if region.atomic_u64(8).expect("aligned").fetch_add(1, Ordering::AcqRel) + 1 == n {
            std::fs::remove_file(&path)?;
        }
        let wake = UnixDatagram::bind_addr(&wake_name(job_key, boot, node, me)?)?;
        wake.set_nonblocking(true)?;
        let wake_names = (0..n).map(|i| wake_name(job_key, boot, node, i)).collect::<io::Result<_>>()?;
        let p = NodeP2p {
            region,
            memory,
            buffers,
            n,
            me,
            slots,
            peers: Vec::new(),
            pids: Vec::new(),
            heads: vec![0; n as usize],
            tails: vec![0; n as usize],
            next: 0,
            peeked: None,
            wake,
            wake_names,
            moved: 0,
            refused: vec![false; n as usize],
            seen_alive: vec![None; n as usize],
            dead: vec![false; n as usize],
        };
        // Counts survive from nothing: a fresh file starts at zero, and a
        // rank attaches before any fragment is put for it.
        Ok(p)
    }

    /// The node's ranks' endpoints and process ids, by local rank.
    pub fn set_peers(&mut self, peers: Vec<Endpoint>, pids: Vec<u32>) {
        self.peers = peers;
        self.pids = pids;
    }

    /// Fragments this process put and took so far.
    pub fn moved(&self) -> u64 {
        self.moved
    }

    fn wake_if_asleep(&self, i: u64) {
        if self.word(self.rank_line(i) + 8).load(Ordering::SeqCst) != 0 {
            let _ = self.wake.send_to_addr(&[1], &self.wake_names[i as usize]);
        }
    }

    /// Whether local rank `i`'s process is gone: looked up at most every
    /// [`ALIVE_FOR`].
    fn is_dead(&mut self, i: u64) -> bool {
        let i = i as usize;
        if self.dead[i] {
            return true;
        }
        let now = std::time::Instant::now();
        if self.seen_alive[i].is_some_and(|t| now.duration_since(t) < ALIVE_FOR) {
            return false;
        }
        match self.pids.get(i) {
            Some(&pid) if pid != 0 && !alive(pid) => self.dead[i] = true,
            _ => self.seen_alive[i] = Some(now),
        }
        self.dead[i]
    }

    /// Whether the peers are known (the link carries messages).
    pub fn enabled(&self) -> bool {
        !self.peers.is_empty()
    }

    /// The wake-up socket a sleeping receiver polls.
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.wake.as_fd()
    }

    fn word(&self, off: u64) -> &AtomicU64 {
        self.region.atomic_u64(off).expect("offsets of the layout are aligned and inside")
    }

    fn rank_line(&self, i: u64) -> u64 {
        LINE * (1 + i)
    }

    fn ring(&self, from: u64, to: u64) -> u64 {
        LINE * (1 + self.n) + (from * self.n + to) * ring_bytes(self.slots)
    }

    fn slot(&self, ring: u64, count: u64) -> u64 {
        ring + 2 * LINE + (count % self.slots) * SLOT
    }

    fn local_of(&self, port: PortId) -> Option<u64> {
        self.peers.iter().position(|e| e.port == port).map(|i| i as u64).filter(|&i| i != self.me)
    }

    fn has_fragment_from(&self, i: u64) -> bool {
        self.word(self.ring(i, self.me)).load(Ordering::Acquire) != self.tails[i as usize]
    }

    fn has_room(&self, to: u64) -> bool {
        self.heads[to as usize].wrapping_sub(self.word(self.ring(self.me, to) + LINE).load(Ordering::Acquire)) < self.slots
    }

    /// Whether there is something to do: a fragment waits in a queue to
    /// this process, or a queue that refused a fragment has room again.
    /// A sleeper looks after saying it is asleep; a receiver that takes
    /// from a sleeper's queue wakes it.
    pub fn has_work(&self) -> bool {
        self.has_incoming() || self.refused.iter().enumerate().any(|(i, &r)| r && self.has_room(i as u64))
    }

    /// Whether a fragment waits in any queue to this process.
    pub fn has_incoming(&self) -> bool {
        (0..self.n).any(|i| i != self.me && self.has_fragment_from(i))
    }

    /// Says this process is about to sleep (true) or awake (false); a
    /// sleeper must look at [`NodeP2p::has_incoming`] after saying so.
    pub fn set_asleep(&self, asleep: bool) {
        self.word(self.rank_line(self.me) + 8).store(u64::from(asleep), Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Empties the wake-up socket.
    pub fn drain_wakes(&self) {
        let mut b = [0u8; 16];
        while self.wake.recv(&mut b).is_ok() {}
    }

    fn check_buffer(&self, addr: u64, len: u32) -> Result<(), MemoryError> {
        let end = addr.checked_add(u64::from(len));
        if addr < self.buffers.start || end.is_none_or(|e| e > self.buffers.end) {
            return Err(MemoryError::Invalid { addr, len: len as usize });
        }
        Ok(())
    }
}

fn ring_bytes(slots: u64) -> u64 {
    2 * LINE + slots * SLOT
}

impl LocalLink for NodeP2p {
    fn peer(&self, node: NodeId, port: PortId) -> Option<Endpoint> {
        let i = self.local_of(port)?;
        let e = self.peers[i as usize];
        (e.node == node).then_some(e)
    }

    fn fragment_max(&self) -> u32 {
        FRAGMENT
    }

    fn push(&mut self, dest: Endpoint, tag: u64, total: u32, offset: u32, from: HostBuf) -> Result<bool, LinkError> {
        let to = self.local_of(dest.port).ok_or(LinkError::PeerGone)?;
        if from.len > FRAGMENT {
            return Err(LinkError::Corrupt);
        }
        self.check_buffer(from.addr, from.len)?;
        if self.word(self.rank_line(to)).load(Ordering::Acquire) != 0 || (offset == 0 && self.is_dead(to)) {
            return Err(LinkError::PeerGone);
        }
        let ring = self.ring(self.me, to);
        let head = self.heads[to as usize];
        if !self.has_room(to) {
            self.refused[to as usize] = true;
            return Ok(false);
        }
        self.refused[to as usize] = false;
        let slot = self.slot(ring, head);
        let mut h = [0u8; 20];
        h[..8].copy_from_slice(&tag.to_le_bytes());
        h[8..12].copy_from_slice(&total.to_le_bytes());
        h[12..16].copy_from_slice(&offset.to_le_bytes());
        h[16..20].copy_from_slice(&from.len.to_le_bytes());
        self.region.write(slot, &h).map_err(|_| LinkError::Corrupt)?;
        self.memory.copy_to(from.addr, &self.region, slot + SLOT_HEADER, from.len as usize).map_err(|_| LinkError::Corrupt)?;
        self.heads[to as usize] = head.wrapping_add(1);
        self.word(ring).store(head.wrapping_add(1), Ordering::Release);
        self.moved += 1;
        fence(Ordering::SeqCst);
        self.wake_if_asleep(to);
        Ok(true)
    }

    fn peek(&mut self) -> Option<Fragment> {
        if let Some((_, _, f)) = self.peeked {
            return Some(f);
        }
        for k in 0..self.n {
            let i = (self.next + k) % self.n;
            if i == self.me || !self.has_fragment_from(i) {
                continue;
            }
            let ring = self.ring(i, self.me);
            let slot = self.slot(ring, self.tails[i as usize]);
            let mut h = [0u8; 20];
            self.region.read(slot, &mut h).ok()?;
            let word = |a: usize| u32::from_le_bytes([h[a], h[a + 1], h[a + 2], h[a + 3]]);
            let tag = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
            let f = Fragment { src: self.peers[i as usize], tag, total: word(8), offset: word(12), len: word(16) };
            if f.len > FRAGMENT || f.offset.checked_add(f.len).is_none_or(|end| end > f.total) {
                // Not a fragment this library wrote: skipped.
                self.tails[i as usize] += 1;
                self.word(ring + LINE).store(self.tails[i as usize], Ordering::Release);
                continue;
            }
            self.peeked = Some((i, slot, f));
            return Some(f);
        }
        None
    }

    fn take(&mut self, sink: Sink<'_>) -> Result<(), LinkError> {
        let Some((i, slot, f)) = self.peeked.take() else { return Ok(()) };
        let data = slot + SLOT_HEADER;
        let r = match sink {
            Sink::Memory { addr, len } => {
                let n = len.min(f.len);
                self.check_buffer(addr, n).map_err(LinkError::from).and_then(|()| self.region.copy_to(data, &self.memory, addr, n as usize).map_err(|_| LinkError::Corrupt))
            }
            Sink::Append(v) => {
                let at = v.len();
                v.resize(at + f.len as usize, 0);
                self.region.read(data, &mut v[at..]).map_err(|_| LinkError::Corrupt)
            }
        };
        let ring = self.ring(i, self.me);
        self.tails[i as usize] = self.tails[i as usize].wrapping_add(1);
        self.word(ring + LINE).store(self.tails[i as usize], Ordering::Release);
        self.next = (i + 1) % self.n;
        self.moved += 1;
        // A sender waiting for room may sleep.
        fence(Ordering::SeqCst);
        self.wake_if_asleep(i);
        r
    }

    fn peer_state(&mut self, peer: Endpoint) -> PeerState {
        let Some(i) = self.local_of(peer.port) else { return PeerState::Closed };
        if self.has_fragment_from(i) {
            return PeerState::Open;
        }
        if self.word(self.rank_line(i)).load(Ordering::Acquire) != 0 {
            return PeerState::Closed;
        }
        if self.is_dead(i) {
            PeerState::Dead
        } else {
            PeerState::Open
        }
    }
}

impl Drop for NodeP2p {
    /// Says this rank is done: its peers' receives from it fail once they
    /// took what it sent, and their sends to it fail.
    fn drop(&mut self) {
        self.word(self.rank_line(self.me)).store(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
