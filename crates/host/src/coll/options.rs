//! The choices a collective call names: where it runs ([`Mode`],
//! [`BcastMode`]) and which algorithm or tree it uses, and a group's
//! defaults for them. Plain values, shared by the calls (`api`) and the
//! group's schedule cache (`group`).

use super::{CollectiveError, Tree};
use crate::postal::{canonical_lambda, Lambda};

/// Where a collective runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// The engines run the schedule (the papers' NIC-based collectives).
    #[default]
    Offloaded,
    /// The hosts run the same schedule over point-to-point messages,
    /// advancing only inside the library.
    HostBased,
}

/// Where a broadcast runs: the two [`Mode`]s every collective has, plus
/// NIC-assisted broadcast, which exists for broadcast only (it is a way
/// for the hosts to *send*, with nothing to combine). A separate type
/// rather than a third [`Mode`] so that asking another collective to run
/// NIC-assisted cannot be written at all, and so code matching on `Mode`
/// is unaffected; every `Mode` converts into it, so `start_bcast` takes
/// either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BcastMode {
    /// The engines forward each chunk down the tree (NIC-based forwarding).
    Offloaded,
    /// The hosts send to each child separately over point-to-point.
    HostBased,
    /// Each host hands every piece to its NIC once, with one multi-send to
    /// all its children (dissertation 2.2, Figure 2.4(b)); intermediate
    /// hosts re-send each piece as it arrives. `chunk` is the piece size in
    /// bytes: [`BcastMode::PACKET`] (0) for one packet's payload (the
    /// dissertation's packet-wise pipelining), [`BcastMode::WHOLE`] (or any
    /// size at least the message's) for no pipelining.
    NicAssisted {
        /// Bytes per pipelined piece; see above.
        chunk: u32,
    },
}

impl BcastMode {
    /// `chunk` value: one point-to-point packet's payload (a little less
    /// than [`crate::PortIo::coll_max_len`]: a data packet's header is
    /// longer than a collective packet's).
    pub const PACKET: u32 = 0;
    /// `chunk` value: the whole message at once (no pipelining).
    pub const WHOLE: u32 = u32::MAX;

    /// NIC-assisted with packet-wise pipelining (the default chunk).
    pub const fn nic_assisted() -> BcastMode {
        BcastMode::NicAssisted {
            chunk: Self::PACKET,
        }
    }

    /// NIC-assisted without pipelining.
    pub const fn nic_assisted_whole() -> BcastMode {
        BcastMode::NicAssisted { chunk: Self::WHOLE }
    }
}

impl From<Mode> for BcastMode {
    fn from(m: Mode) -> BcastMode {
        match m {
            Mode::Offloaded => BcastMode::Offloaded,
            Mode::HostBased => BcastMode::HostBased,
        }
    }
}

/// Barrier algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BarrierAlgorithm {
    /// MPICH's pairwise exchange (recursive doubling), with pre and post
    /// steps for sizes that are not a power of two.
    PairwiseExchange,
    /// Dissemination: ceil(log2 n) rounds for any n.
    #[default]
    Dissemination,
    /// Gather to rank 0 and broadcast back on a tree: a k-ary tree of
    /// `degree`, or the binomial tree for `degree == 0`.
    GatherBroadcast {
        /// Tree degree; 0 for binomial.
        degree: u32,
    },
}

impl BarrierAlgorithm {
    /// The short label tables and plots give it (the dissertation's
    /// abbreviations): `PE`, `dissemination`, `GB binomial`, `GB k=K`.
    pub fn short_name(self) -> String {
        match self {
            BarrierAlgorithm::PairwiseExchange => "PE".into(),
            BarrierAlgorithm::Dissemination => "dissemination".into(),
            BarrierAlgorithm::GatherBroadcast { degree: 0 } => "GB binomial".into(),
            BarrierAlgorithm::GatherBroadcast { degree } => format!("GB k={degree}"),
        }
    }
}

/// How an offloaded barrier travels between the engines: a per-group
/// choice ([`super::Group::set_barrier_protocol`]), the same at every
/// member. Host-based barriers are unaffected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BarrierProtocol {
    /// Over the engines' reliable point-to-point connections, each
    /// notification sequenced and acknowledged (the default).
    #[default]
    PointToPoint,
    /// The engines' NIC collective protocol ([`outboard_engine::Command::NicBarrier`]):
    /// notifications outside the connections, no acknowledgements, the
    /// barrier recovering its own losses. Protocol barriers count their
    /// epochs apart from the group's other offloaded collectives.
    NicCollective,
}

/// Tree shapes for reduce, broadcast and tree allreduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TreeShape {
    /// MPICH's binomial tree.
    #[default]
    Binomial,
    /// A complete k-ary tree of the given degree (at least 1).
    Kary(u32),
    /// A chain (degree 1).
    Chain,
    /// The postal-model optimal tree ([`Tree::postal`]; dissertation 2.3)
    /// for a lambda given, or derived from link costs for each call's
    /// message size - or, where the message travels in pieces (offloaded
    /// collectives, pipelined NIC-assisted broadcast), the piece size, the
    /// unit the tree forwards. Derived values are rounded
    /// ([`crate::postal::canonical_lambda`]), so a group keeps few trees.
    Postal(Lambda),
}

impl TreeShape {
    /// The shape a call uses for messages (or pieces) of `unit` bytes in a
    /// group of `n`: a link-derived postal lambda becomes the rounded value
    /// for that size; other shapes are unchanged.
    pub fn for_len(self, n: u32, unit: u32) -> TreeShape {
        match self {
            TreeShape::Postal(l @ Lambda::Link(_)) => {
                TreeShape::Postal(Lambda::Given(canonical_lambda(l.value(unit), n)))
            }
            s => s,
        }
    }

    /// The tree of this shape over `n` ranks rooted at `root`, for
    /// messages (or pieces) of `unit` bytes.
    pub fn tree(self, n: u32, root: u32, unit: u32) -> Result<Tree, CollectiveError> {
        match self.for_len(n, unit) {
            TreeShape::Binomial => Tree::binomial(n, root),
            TreeShape::Kary(k) => Tree::kary(n, k, root),
            TreeShape::Chain => Tree::chain(n, root),
            TreeShape::Postal(l) => Tree::postal(n, root, l.value(unit)),
        }
    }
}

/// Allreduce algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllreduceAlgorithm {
    /// Reduce to rank 0 on a tree, then broadcast down the same tree.
    Tree(TreeShape),
    /// Recursive doubling, with pre and post steps for sizes that are not a
    /// power of two.
    RecursiveDoubling,
    /// The data cut into blocks, at most one per member and at least one
    /// packet's worth each where the data allows ([`super::blocks::cut`]):
    /// block `b` is reduced on a tree of this shape rooted at rank `b` and
    /// broadcast back down the same tree, all blocks at once. Every member
    /// roots its share of the blocks and is an inner member of others, so
    /// each sends and receives about `2 (n - 1) / n` of the data - the
    /// bandwidth of reduce-scatter plus allgather - where a single tree
    /// makes its root and inner members carry the whole data once per
    /// child. For large data; small data gains nothing from the blocks.
    BlockTrees(TreeShape),
    /// Chosen by the data's length, call by call: recursive doubling up to
    /// the transport's crossover ([`crate::PortIo::allreduce_doubling_max`],
    /// measured for each transport, the same in both modes so that they
    /// give the same bits), block trees of this shape above. Short data takes log2(n) exchanges instead of a tree's way
    /// up and down (about half the time); long data the bandwidth of
    /// block trees. Every member resolves it alike, since an allreduce's
    /// length is the same at every member.
    Auto(TreeShape),
}

impl AllreduceAlgorithm {
    /// The same algorithm on trees of shape `t` (recursive doubling has
    /// none).
    pub fn on(self, t: TreeShape) -> AllreduceAlgorithm {
        match self {
            AllreduceAlgorithm::Tree(_) => AllreduceAlgorithm::Tree(t),
            AllreduceAlgorithm::BlockTrees(_) => AllreduceAlgorithm::BlockTrees(t),
            AllreduceAlgorithm::Auto(_) => AllreduceAlgorithm::Auto(t),
            AllreduceAlgorithm::RecursiveDoubling => AllreduceAlgorithm::RecursiveDoubling,
        }
    }

    /// The algorithm a call on `len` bytes runs: [`AllreduceAlgorithm::Auto`]
    /// resolved against the crossover `doubling_max`; any other unchanged.
    pub fn for_len(self, len: usize, doubling_max: usize) -> AllreduceAlgorithm {
        match self {
            AllreduceAlgorithm::Auto(_) if len <= doubling_max => AllreduceAlgorithm::RecursiveDoubling,
            AllreduceAlgorithm::Auto(t) => AllreduceAlgorithm::BlockTrees(t),
            a => a,
        }
    }
}

/// By length, block trees on binomial trees for long data.
impl Default for AllreduceAlgorithm {
    fn default() -> Self {
        AllreduceAlgorithm::Auto(TreeShape::Binomial)
    }
}

/// Reduce algorithms. A [`TreeShape`] converts to the plain tree, so a
/// reduce may name its tree alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceAlgorithm {
    /// Reduce to the root on one tree of this shape.
    Tree(TreeShape),
    /// The data cut into blocks as an allreduce on block trees cuts it
    /// ([`AllreduceAlgorithm::BlockTrees`]): block `b` is reduced on a tree
    /// of this shape rooted `b` ranks after the root, which then sends it
    /// to the root - reduce-scatter plus gather. Each member combines
    /// about `1/n` of the data and the root receives it about once, where
    /// on one tree the root combines the whole data once per child. Data
    /// of one block, and a group of two members (or nodes), run the plain
    /// tree reduce: between two the blocks would move 1.5 times its bytes.
    BlockTrees(TreeShape),
}

impl ReduceAlgorithm {
    /// The shape of its trees.
    pub fn shape(self) -> TreeShape {
        match self {
            ReduceAlgorithm::Tree(t) | ReduceAlgorithm::BlockTrees(t) => t,
        }
    }

    /// The same algorithm on trees of shape `t`.
    pub fn on(self, t: TreeShape) -> ReduceAlgorithm {
        match self {
            ReduceAlgorithm::Tree(_) => ReduceAlgorithm::Tree(t),
            ReduceAlgorithm::BlockTrees(_) => ReduceAlgorithm::BlockTrees(t),
        }
    }
}

impl From<TreeShape> for ReduceAlgorithm {
    fn from(t: TreeShape) -> Self {
        ReduceAlgorithm::Tree(t)
    }
}

/// One binomial tree: block trees win in the simulator (offloaded, 16
/// nodes, 1 MiB: 2.1-2.8 times faster at the root) but lost on the
/// development VM's oversubscribed runs, host-based above all, so they
/// wait for a measurement on real nodes before they become the default.
impl Default for ReduceAlgorithm {
    fn default() -> Self {
        ReduceAlgorithm::Tree(TreeShape::Binomial)
    }
}

/// A group's default choices (see [`super::Group::set_defaults`]); `split` uses
/// them for its own collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CollDefaults {
    /// Mode.
    pub mode: Mode,
    /// Barrier algorithm.
    pub barrier: BarrierAlgorithm,
    /// Tree for broadcast (and the reduction tree the C ABI's reduction
    /// degree sets and its algorithm choices start from).
    pub tree: TreeShape,
    /// Reduce algorithm.
    pub reduce: ReduceAlgorithm,
    /// Allreduce algorithm.
    pub allreduce: AllreduceAlgorithm,
}
