//! Names of the things the engine talks about.

/// A node: one host with one engine. The driver maps node ids to network
/// addresses; the engine only sees ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// A port (GM's port, libfabric's endpoint) on one engine. A process opens
/// one or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub u8);

/// A port incarnation, counted from 1 per port slot. Every open of the same
/// slot gets a higher generation, and a message addressed to one generation
/// is never delivered to another (dissertation 3.2.2).
pub type Generation = u32;

/// A fully qualified remote port: where a message goes, or came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// The node.
    pub node: NodeId,
    /// The port on that node.
    pub port: PortId,
    /// The incarnation of that port.
    pub gen: Generation,
}

/// The host's name for one operation; every command completes with exactly
/// one event carrying its `OpId`. The engine does not interpret it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// A span of host memory in the address space of the port's process, read or
/// written only through [`crate::Dma`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostBuf {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
}

/// Which incoming messages a posted receive accepts: an optional source and
/// a tag under a mask (bits where the mask is 0 are ignored; a zero mask
/// accepts every tag, like `MPI_ANY_TAG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecvMatch {
    /// Accept only messages from this node and port (any generation).
    pub source: Option<(NodeId, PortId)>,
    /// The tag.
    pub tag: u64,
    /// The mask.
    pub tag_mask: u64,
}

/// Tags whose top byte is `0xFF` belong to the host library's own protocols
/// (a rendezvous finish, for one): a receive accepts such a tag only if it
/// names that byte exactly, so an application's wildcard receive never takes
/// a message meant for the library underneath it (MPI keeps its internal
/// traffic in contexts of its own for the same reason).
pub const LIBRARY_TAG_PREFIX: u64 = 0xFF00_0000_0000_0000;

impl RecvMatch {
    /// Exactly this tag from anyone.
    pub fn tag(tag: u64) -> Self {
        RecvMatch { source: None, tag, tag_mask: u64::MAX }
    }

    /// Exactly this tag from one port.
    pub fn from(node: NodeId, port: PortId, tag: u64) -> Self {
        RecvMatch { source: Some((node, port)), tag, tag_mask: u64::MAX }
    }

    /// Any message at all.
    pub fn any() -> Self {
        RecvMatch { source: None, tag: 0, tag_mask: 0 }
    }

    /// Whether a message from `src` with `tag` matches.
    pub fn accepts(&self, src: Endpoint, tag: u64) -> bool {
        if let Some((node, port)) = self.source {
            if node != src.node || port != src.port {
                return false;
            }
        }
        if tag & LIBRARY_TAG_PREFIX == LIBRARY_TAG_PREFIX
            && (self.tag_mask & LIBRARY_TAG_PREFIX != LIBRARY_TAG_PREFIX || self.tag & LIBRARY_TAG_PREFIX != LIBRARY_TAG_PREFIX)
        {
            return false;
        }
        (tag ^ self.tag) & self.tag_mask == 0
    }
}
