//! [`Group`]: an ordered set of ports (an MPI communicator) as one member
//! sees it, with the schedules it has computed and installed, and the
//! allocation of group ids for groups made by `split`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use outboard_engine::coll::Rounds;
use outboard_engine::{Endpoint, GroupId, MemberList, Schedule, ScheduleId};

use super::options::{AllreduceAlgorithm, BarrierAlgorithm, BarrierProtocol, BcastMode, CollDefaults, Mode, ReduceAlgorithm, TreeShape};
use super::schedules as s;
use super::{CollectiveError, Tree};

/// Group ids an application chooses (`Group::new`) are below this; `split`
/// allocates from `APP_GROUP_ID_LIMIT..APP_GROUP_ID_LIMIT + SPLIT_GROUP_IDS`,
/// so the two never collide. The id also goes into host-based message tags
/// (23 bits there), which bounds both ranges.
pub const APP_GROUP_ID_LIMIT: u64 = 1 << 20;
/// The group of a group's node leaders ([`Group::node_leaders`],
/// [`crate::Port::leaders_group`]) has this plus the group's id: above
/// every application and split id, within the 23 bits a host-based tag
/// carries.
pub const LEADERS_GROUP_FIRST: u64 = 1 << 21;
const _: () = assert!(APP_GROUP_ID_LIMIT + SPLIT_GROUP_IDS as u64 <= LEADERS_GROUP_FIRST);
const _: () = assert!(2 * LEADERS_GROUP_FIRST <= 1 << 23);

/// How many ids `split` can hand out at one port at a time (MPICH keeps a
/// bit mask of free context ids the same way).
pub const SPLIT_GROUP_IDS: u32 = 4096;
/// The `color` of a port that takes part in a `split` but joins no new group
/// (MPI_UNDEFINED).
pub const UNDEFINED: u32 = u32::MAX;

/// Which schedule, as the cache of a group names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScheduleKey {
    Barrier(BarrierAlgorithm),
    Reduce(TreeShape, u32),
    /// A reduce to the given rank on block trees
    /// ([`super::ReduceAlgorithm::BlockTrees`]): it runs its blocks'
    /// schedules (`ReduceAt`), none of its own.
    ReduceBlocks(TreeShape, u32),
    /// Block `b` (the second number) of a reduce to `root` (the first) on
    /// block trees: a tree reduce rooted `b` ranks after the root (modulo
    /// the ranks the schedule runs among), whose root then sends the
    /// block to `root`.
    ReduceAt(TreeShape, u32, u32),
    Allreduce(AllreduceAlgorithm),
    /// One block of an allreduce on block trees: a tree allreduce rooted
    /// at the given rank (modulo the ranks the schedule runs among).
    AllreduceAt(TreeShape, u32),
    Bcast(TreeShape, u32),
    /// The node-then-network form of a barrier ([`s::node_then_network`]):
    /// what a barrier runs in a group whose members share engines.
    NodeBarrier(BarrierAlgorithm),
    /// The node-then-network form of an allreduce.
    NodeAllreduce(AllreduceAlgorithm),
    /// The node-then-network form of one block of an allreduce on block
    /// trees: the block's tree runs among the node leaders.
    NodeAllreduceAt(TreeShape, u32),
    /// The node-then-network form of a reduction to a root on a tree.
    NodeReduce(TreeShape, u32),
    /// The node-then-network form of one block of a reduce on block
    /// trees: the block's tree runs among the node leaders.
    NodeReduceAt(TreeShape, u32, u32),
    /// The network-then-node form of a broadcast from a root on a tree.
    NodeBcast(TreeShape, u32),
    /// An inclusive scan on a chain in rank order ([`s::scan_chain`]).
    Scan,
    /// An exclusive scan on a chain in rank order ([`s::exscan_chain`]).
    Exscan,
    /// A step of a pairwise exchange ([`s::shift_exchange`]).
    Shift(u32),
    /// One value from a rank to another ([`s::transfer`]).
    Transfer(u32, u32),
}

/// Schedule numbers from this bit up are handed out in order of first use
/// to the keys [`ScheduleKey::fixed_id`] has no number for.
const FIRST_USE_IDS: u16 = 0x8000;

impl ScheduleKey {
    /// The flat collective a node form stands for; a flat key itself.
    fn flat(self) -> ScheduleKey {
        match self {
            ScheduleKey::NodeBarrier(a) => ScheduleKey::Barrier(a),
            ScheduleKey::NodeAllreduce(a) => ScheduleKey::Allreduce(a),
            ScheduleKey::NodeAllreduceAt(t, root) => ScheduleKey::AllreduceAt(t, root),
            ScheduleKey::NodeReduce(t, root) => ScheduleKey::Reduce(t, root),
            ScheduleKey::NodeReduceAt(t, root, b) => ScheduleKey::ReduceAt(t, root, b),
            ScheduleKey::NodeBcast(t, root) => ScheduleKey::Bcast(t, root),
            k => k,
        }
    }

    /// The key's schedule number when the key fits the fixed encoding: kind
    /// in bits 13-14, its parameter (algorithm, or a binomial tree's root)
    /// in bits 0-12. The number travels in every packet of the collective
    /// and the engines compare it across members, so it must name the same
    /// collective at every member whatever order each used its schedules
    /// in: numbered by first use, a barrier at one member and an allreduce
    /// at another (members that called collectives in different orders)
    /// would both be schedule 0 and run into each other instead of failing
    /// as a mismatch.
    fn fixed_id(self) -> Option<u16> {
        const PARAM: u32 = 1 << 13;
        // A node form has its flat form's number: every member of a group
        // takes the same form, since all see the same members.
        let (kind, param) = match self.flat() {
            ScheduleKey::Barrier(BarrierAlgorithm::PairwiseExchange) => (0, 0),
            ScheduleKey::Barrier(BarrierAlgorithm::Dissemination) => (0, 1),
            ScheduleKey::Barrier(BarrierAlgorithm::GatherBroadcast { degree }) => (0, degree.checked_add(2)?),
            ScheduleKey::Reduce(TreeShape::Binomial, root) => (1, root),
            ScheduleKey::Allreduce(AllreduceAlgorithm::RecursiveDoubling) => (2, 0),
            ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(TreeShape::Binomial)) => (2, 1),
            ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(TreeShape::Chain)) => (2, 2),
            ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(TreeShape::Kary(k))) => (2, k.checked_add(3)?),
            ScheduleKey::Bcast(TreeShape::Binomial, root) => (3, root),
            _ => return None,
        };
        (param < PARAM).then_some((kind << 13 | param) as u16)
    }
}

/// A schedule number in words, for errors that name the collectives
/// members disagreed on ("a barrier", "a reduce to rank 3").
pub fn describe_schedule(id: u16) -> String {
    if id & FIRST_USE_IDS != 0 {
        return format!("collective schedule {id}");
    }
    let param = u32::from(id & 0x1FFF);
    match id >> 13 {
        0 => "a barrier".into(),
        1 => format!("a reduce to rank {param}"),
        2 => "an allreduce".into(),
        _ => format!("a broadcast from rank {param}"),
    }
}

/// A tree shape in words: "binomial tree", "3-ary tree", "chain", "postal
/// tree (lambda 2.5)".
pub fn describe_tree(t: TreeShape) -> String {
    match t {
        TreeShape::Binomial => "binomial tree".into(),
        TreeShape::Kary(k) => format!("{k}-ary tree"),
        TreeShape::Chain => "chain".into(),
        TreeShape::Postal(crate::postal::Lambda::Given(l)) => format!("postal tree (lambda {l})"),
        TreeShape::Postal(crate::postal::Lambda::Link(_)) => "postal tree (lambda from link costs)".into(),
    }
}

/// A reduce algorithm in words: "on a binomial tree", "on block trees
/// (binomial tree)".
pub fn describe_reduce(a: ReduceAlgorithm) -> String {
    match a {
        ReduceAlgorithm::Tree(t) => format!("on a {}", describe_tree(t)),
        ReduceAlgorithm::BlockTrees(t) => format!("on block trees ({})", describe_tree(t)),
    }
}

/// An allreduce algorithm in words: "binomial tree", "recursive
/// doubling", "block trees (binomial tree)".
pub fn describe_allreduce(a: AllreduceAlgorithm) -> String {
    match a {
        AllreduceAlgorithm::Tree(t) => describe_tree(t),
        AllreduceAlgorithm::RecursiveDoubling => "recursive doubling".into(),
        AllreduceAlgorithm::BlockTrees(t) => format!("block trees ({})", describe_tree(t)),
        AllreduceAlgorithm::Auto(t) => format!("by length (recursive doubling, block trees ({}) for long data)", describe_tree(t)),
    }
}

/// A barrier algorithm in words.
pub fn describe_barrier(a: BarrierAlgorithm) -> String {
    match a {
        BarrierAlgorithm::Dissemination => "dissemination".into(),
        BarrierAlgorithm::PairwiseExchange => "pairwise exchange".into(),
        BarrierAlgorithm::GatherBroadcast { degree: 0 } => "gather-broadcast on a binomial tree".into(),
        BarrierAlgorithm::GatherBroadcast { degree } => format!("gather-broadcast on a {degree}-ary tree"),
    }
}

/// A collective's choices in words, as [`Group::taken`] counts them:
/// collective, where it ran, algorithm or tree, and for an offloaded
/// barrier how its notifications travelled.
/// A data-movement call's mode in words (it runs offloaded or
/// host-based).
fn mode_words(mode: BcastMode) -> &'static str {
    match mode {
        BcastMode::HostBased => "host-based",
        _ => "offloaded",
    }
}

pub(crate) fn describe_choice(mode: BcastMode, key: ScheduleKey, nic_protocol: bool) -> String {
    let mode = match mode {
        BcastMode::Offloaded => "offloaded".to_string(),
        BcastMode::HostBased => "host-based".to_string(),
        BcastMode::NicAssisted { chunk: BcastMode::PACKET } => "nic-assisted".to_string(),
        BcastMode::NicAssisted { chunk: BcastMode::WHOLE } => "nic-assisted (whole)".to_string(),
        BcastMode::NicAssisted { chunk } => format!("nic-assisted ({chunk}-byte pieces)"),
    };
    match key.flat() {
        ScheduleKey::Barrier(a) => {
            let over = if nic_protocol && mode == "offloaded" { " over the NIC collective protocol" } else { "" };
            format!("barrier {mode} {}{over}", describe_barrier(a))
        }
        ScheduleKey::Reduce(t, _) => format!("reduce {mode} {}", describe_tree(t)),
        ScheduleKey::ReduceBlocks(t, _) => format!("reduce {mode} block trees ({})", describe_tree(t)),
        ScheduleKey::ReduceAt(t, root, b) => format!("reduce {mode} {} block {b} to rank {root}", describe_tree(t)),
        ScheduleKey::Bcast(t, _) => format!("broadcast {mode} {}", describe_tree(t)),
        ScheduleKey::Allreduce(a) => format!("allreduce {mode} {}", describe_allreduce(a)),
        ScheduleKey::AllreduceAt(t, root) => format!("allreduce {mode} {} rooted at rank {root}", describe_tree(t)),
        ScheduleKey::Scan => format!("scan {mode} chain"),
        ScheduleKey::Exscan => format!("exclusive scan {mode} chain"),
        ScheduleKey::Shift(k) => format!("pairwise exchange {mode} shift {k}"),
        ScheduleKey::Transfer(from, to) => format!("transfer {mode} from rank {from} to rank {to}"),
        k => unreachable!("flat() left a node form: {k:?}"),
    }
}

/// A computed schedule, its number, and whether the engine has it.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub id: ScheduleId,
    pub schedule: Arc<Schedule>,
    pub installed: bool,
    /// The schedule's per-peer rounds (`rounds`), computed on the first
    /// host-based run and shared by the later ones: a schedule never
    /// changes, and recounting a 1,024-member dissemination barrier's
    /// rounds was 3 % of a simulated host-based barrier.
    pub rounds: Option<Arc<(Rounds, Rounds)>>,
}

/// One member's view of a group: its id (agreed by all members), its rank,
/// the members in rank order, and per-member state - the schedules computed
/// so far (each installed at the engine the first time an offloaded
/// collective needs it) and the host-based epoch counter.
///
/// Offloaded and host-based collectives are numbered separately (the engine
/// counts the former, the group the latter), so the two modes may be mixed
/// on one group; within one mode every member must start the group's
/// collectives in the same order.
/// Not `Clone`: it records what it installed at the engine.
#[derive(Debug)]
pub struct Group {
    id: GroupId,
    rank: u32,
    members: MemberList,
    defaults: CollDefaults,
    pub(crate) installed: bool,
    pub(crate) schedules: HashMap<ScheduleKey, Slot>,
    next_schedule: u32,
    pub(crate) host_epoch: u32,
    pub(crate) nic_epoch: u32,
    barrier_protocol: BarrierProtocol,
    /// How many nodes (engines) the members use, computed once: fewer
    /// than the members when some share a node (see `shares_nodes`).
    nodes: u32,
    /// How many collectives ran as each choice ([`Group::taken`]): by
    /// mode, schedule and barrier protocol, named only when asked (a
    /// collective's start counts without formatting anything).
    taken: HashMap<(BcastMode, ScheduleKey, bool), u64>,
    /// How many data-movement calls ran in each form (their collectives
    /// are counted in `taken` as well; a scan is its one collective): by
    /// mode and form.
    calls: HashMap<(BcastMode, MovementForm), u64>,
}

/// The form a data-movement call ran in, for [`Group::taken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MovementForm {
    /// An allgather, gather, scatter or alltoall carrying the whole
    /// result in every message (placed blocks combined by bitwise or).
    Whole(&'static str),
    /// One collective per block.
    PerBlock(&'static str),
    /// A reduce-scatter as an allreduce, each member keeping its block.
    ReduceScatterWhole,
}

impl MovementForm {
    fn describe(self, mode: &str) -> String {
        match self {
            MovementForm::Whole(call) => format!("{call} {mode} whole result per message"),
            MovementForm::PerBlock(call) => format!("{call} {mode} a collective per block"),
            MovementForm::ReduceScatterWhole => format!("reduce-scatter {mode} as an allreduce"),
        }
    }
}

/// How many distinct nodes `members` use.
fn node_count(members: &MemberList) -> u32 {
    if members.runs() <= 1 {
        // One run: consecutive nodes, each once.
        return members.len();
    }
    let mut seen = std::collections::HashSet::new();
    members.iter().filter(|ep| seen.insert(ep.node)).count() as u32
}

impl Group {
    /// A group with an application-chosen id (below
    /// [`APP_GROUP_ID_LIMIT`], the same at every member and unique among
    /// the groups of each member's port). `members[rank]` must be the port
    /// that uses the group: checked by [`crate::Port::new_group`] at once,
    /// or by the first collective otherwise.
    pub fn new(id: GroupId, rank: u32, members: Vec<Endpoint>) -> Result<Group, CollectiveError> {
        Group::with_members(id, rank, MemberList::from_endpoints(members))
    }

    /// The same from a [`MemberList`], which a job's world group fills in a
    /// few bytes whatever its size ([`MemberList::contiguous`]): what a
    /// member of a 65,536-rank job, or a simulation of one, should use.
    pub fn with_members(id: GroupId, rank: u32, members: MemberList) -> Result<Group, CollectiveError> {
        if id.0 >= APP_GROUP_ID_LIMIT {
            return Err(CollectiveError::GroupIdOutOfRange(id));
        }
        Group::build(id, rank, members)
    }

    pub(crate) fn build(
        id: GroupId,
        rank: u32,
        members: MemberList,
    ) -> Result<Group, CollectiveError> {
        let size = members.len();
        if size == 0 {
            return Err(CollectiveError::EmptyGroup);
        }
        if rank >= size {
            return Err(CollectiveError::RankOutOfRange { rank, size });
        }
        if members.has_duplicate_port() {
            return Err(CollectiveError::DuplicateMember);
        }
        Ok(Group {
            id,
            rank,
            nodes: node_count(&members),
            members,
            defaults: CollDefaults::default(),
            installed: false,
            schedules: HashMap::new(),
            next_schedule: 0,
            host_epoch: 0,
            nic_epoch: 0,
            barrier_protocol: BarrierProtocol::default(),
            taken: HashMap::new(),
            calls: HashMap::new(),
        })
    }

    /// The agreed identifier.
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// This member's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of members.
    pub fn size(&self) -> u32 {
        self.members.len()
    }

    /// The members in rank order (shared: cloning it copies no member).
    pub fn members(&self) -> &MemberList {
        &self.members
    }

    /// The member at `rank`.
    pub fn member(&self, rank: u32) -> Option<Endpoint> {
        self.members.get(rank)
    }

    /// Each node's leader, the lowest group rank among the members its
    /// engine serves, in group-rank order: the members of the group's
    /// network part when collectives go node by node.
    pub fn node_leaders(&self) -> Vec<u32> {
        let mut seen = std::collections::HashSet::new();
        (0..self.size()).filter(|&r| seen.insert(self.members.get(r).expect("rank below size").node)).collect()
    }

    /// The default mode and algorithms (used by `split`, and for callers that
    /// want a per-group choice).
    pub fn defaults(&self) -> CollDefaults {
        self.defaults
    }

    /// Sets the default mode and algorithms.
    pub fn set_defaults(&mut self, d: CollDefaults) {
        self.defaults = d;
    }

    /// How this group's offloaded barriers travel (point-to-point unless
    /// set).
    pub fn barrier_protocol(&self) -> BarrierProtocol {
        self.barrier_protocol
    }

    /// Selects how this group's offloaded barriers travel; every member
    /// must choose alike (and before its first barrier, or at the same
    /// point of the group's barrier sequence).
    pub fn set_barrier_protocol(&mut self, p: BarrierProtocol) {
        self.barrier_protocol = p;
    }

    /// Sets only the default mode.
    pub fn set_default(&mut self, mode: Mode) {
        self.defaults.mode = mode;
    }

    /// How many of this member's collectives ran as each choice, named as
    /// [`describe_choice`] names them ("broadcast nic-assisted 3-ary
    /// tree"): a record of what was run, not of what was asked for, so
    /// that a program (or a test) can see a choice was taken.
    pub fn taken(&self) -> BTreeMap<String, u64> {
        let mut named = BTreeMap::new();
        for (&(mode, key, nic), &n) in &self.taken {
            *named.entry(describe_choice(mode, key, nic)).or_insert(0) += n;
        }
        for (&(mode, form), &n) in &self.calls {
            *named.entry(form.describe(mode_words(mode))).or_insert(0) += n;
        }
        named
    }

    /// Counts one data-movement call started in `form`.
    pub(crate) fn note_call(&mut self, mode: BcastMode, form: MovementForm) {
        *self.calls.entry((mode, form)).or_insert(0) += 1;
    }

    /// Counts one collective started as `key` in `mode`.
    pub(crate) fn note_taken(&mut self, mode: BcastMode, key: ScheduleKey) {
        let nic = self.barrier_protocol == BarrierProtocol::NicCollective;
        *self.taken.entry((mode, key, nic)).or_insert(0) += 1;
    }

    /// Whether some members share a node (an engine): then barriers and
    /// allreduces run node-then-network.
    pub(crate) fn shares_nodes(&self) -> bool {
        self.nodes < self.size()
    }

    /// How many ranks a node form's network part runs among: the nodes
    /// where members share them, the members otherwise.
    pub(crate) fn network_ranks(&self) -> u32 {
        self.nodes
    }

    /// The schedule a collective of `key` runs: its node-then-network form
    /// when members share engines (a node engine serving several ranks),
    /// where one message per node crosses the network - in both modes, so
    /// that offloaded and host-based runs still combine in the same order
    /// and give the same bits.
    fn node_key(&self, key: ScheduleKey) -> ScheduleKey {
        match key {
            ScheduleKey::Barrier(a) if self.shares_nodes() => ScheduleKey::NodeBarrier(a),
            ScheduleKey::Allreduce(a) if self.shares_nodes() => ScheduleKey::NodeAllreduce(a),
            ScheduleKey::AllreduceAt(t, root) if self.shares_nodes() => ScheduleKey::NodeAllreduceAt(t, root),
            ScheduleKey::Reduce(t, root) if self.shares_nodes() => ScheduleKey::NodeReduce(t, root),
            ScheduleKey::ReduceAt(t, root, b) if self.shares_nodes() => ScheduleKey::NodeReduceAt(t, root, b),
            ScheduleKey::Bcast(t, root) if self.shares_nodes() => ScheduleKey::NodeBcast(t, root),
            k => k,
        }
    }

    /// The schedule `key` names, at this member: a node form is built from
    /// the members' nodes around the flat form's schedule among the node
    /// leaders; a flat one is [`schedule_for`]'s.
    fn schedule_of(&self, key: ScheduleKey) -> Result<Schedule, CollectiveError> {
        use outboard_engine::Fold;
        let nodes: Vec<u32> = self.members.iter().map(|ep| ep.node.0).collect();
        let rank = self.rank;
        match key {
            ScheduleKey::NodeBarrier(_) => s::node_then_network(&nodes, rank, Fold::Ignore, |r, n| schedule_for(key.flat(), r, n)),
            ScheduleKey::NodeAllreduce(_) | ScheduleKey::NodeAllreduceAt(..) => {
                s::node_then_network(&nodes, rank, Fold::Combine, |r, n| schedule_for(key.flat(), r, n))
            }
            ScheduleKey::NodeReduce(shape, root) => {
                s::node_then_network_reduce(&nodes, rank, root, |r, n, at| Ok(s::reduce(&tree_for(shape, n, at)?, r)))
            }
            ScheduleKey::NodeReduceAt(shape, root, b) => s::node_then_network_reduce(&nodes, rank, root, |r, n, at| {
                Ok(s::reduce_then_send(&tree_for(shape, n, (at + b) % n.max(1))?, r, at))
            }),
            ScheduleKey::NodeBcast(shape, root) => {
                s::network_then_node_bcast(&nodes, rank, root, |r, n, at| Ok(s::bcast(&tree_for(shape, n, at)?, r)))
            }
            flat => schedule_for(flat, rank, self.size()),
        }
    }

    /// The schedule for `key` at this member, computed on first use.
    pub(crate) fn slot(&mut self, key: ScheduleKey) -> Result<&mut Slot, CollectiveError> {
        let key = self.node_key(key);
        if !self.schedules.contains_key(&key) {
            let id = match key.fixed_id() {
                Some(id) => id,
                None => {
                    let n = u16::try_from(self.next_schedule)
                        .ok()
                        .filter(|n| *n < FIRST_USE_IDS)
                        .ok_or(CollectiveError::TooManySchedules)?;
                    self.next_schedule += 1;
                    FIRST_USE_IDS | n
                }
            };
            let schedule = Arc::new(self.schedule_of(key)?);
            self.schedules.insert(
                key,
                Slot {
                    id: ScheduleId(id),
                    schedule,
                    installed: false,
                    rounds: None,
                },
            );
        }
        Ok(self.schedules.get_mut(&key).expect("inserted above"))
    }
}

/// The tree of `shape` over `n` ranks rooted at `root`.
/// (A link-derived postal lambda is resolved by the caller for the message
/// size; one left here is taken for 0-byte messages.)
pub(crate) fn tree_for(shape: TreeShape, n: u32, root: u32) -> Result<Tree, CollectiveError> {
    shape.tree(n, root, 0)
}

/// The schedule `key` names, for `rank` of `size`.
pub(crate) fn schedule_for(
    key: ScheduleKey,
    rank: u32,
    size: u32,
) -> Result<Schedule, CollectiveError> {
    Ok(match key {
        ScheduleKey::Barrier(BarrierAlgorithm::PairwiseExchange) => s::barrier_pairwise(rank, size),
        ScheduleKey::Barrier(BarrierAlgorithm::Dissemination) => {
            s::barrier_dissemination(rank, size)
        }
        ScheduleKey::Barrier(BarrierAlgorithm::GatherBroadcast { degree: 0 }) => {
            s::barrier_gb(&Tree::binomial(size, 0)?, rank)
        }
        ScheduleKey::Barrier(BarrierAlgorithm::GatherBroadcast { degree }) => {
            s::barrier_gb(&Tree::kary(size, degree, 0)?, rank)
        }
        ScheduleKey::Reduce(shape, root) => s::reduce(&tree_for(shape, size, root)?, rank),
        ScheduleKey::ReduceAt(shape, root, b) => s::reduce_then_send(&tree_for(shape, size, (root + b) % size.max(1))?, rank, root),
        ScheduleKey::ReduceBlocks(..) => unreachable!("a reduce on block trees runs its blocks' schedules (ReduceAt), none of its own"),
        ScheduleKey::Bcast(shape, root) => s::bcast(&tree_for(shape, size, root)?, rank),
        ScheduleKey::Allreduce(AllreduceAlgorithm::Tree(shape)) => {
            s::allreduce_tree(&tree_for(shape, size, 0)?, rank)
        }
        ScheduleKey::Allreduce(AllreduceAlgorithm::RecursiveDoubling) => {
            s::allreduce_recursive_doubling(rank, size)
        }
        // Among the node leaders a block's root is taken modulo their
        // number.
        ScheduleKey::AllreduceAt(shape, root) => s::allreduce_tree(&tree_for(shape, size, root % size.max(1))?, rank),
        ScheduleKey::Allreduce(AllreduceAlgorithm::BlockTrees(_)) => {
            unreachable!("an allreduce on block trees runs its blocks' schedules (AllreduceAt), none of its own")
        }
        ScheduleKey::Allreduce(AllreduceAlgorithm::Auto(_)) => {
            unreachable!("a call resolves an allreduce by length (Port::key_for_len) before it takes a schedule")
        }
        ScheduleKey::Scan => s::scan_chain(rank, size),
        ScheduleKey::Exscan => s::exscan_chain(rank, size),
        ScheduleKey::Shift(k) => s::shift_exchange(rank, size, k),
        ScheduleKey::Transfer(from, to) => s::transfer(rank, from, to),
        // Node forms need the members' nodes: `Group::schedule_of`
        // builds them; a flat schedule in their place would run a
        // different collective than the node-mates' forms.
        ScheduleKey::NodeBarrier(_)
        | ScheduleKey::NodeAllreduce(_)
        | ScheduleKey::NodeAllreduceAt(..)
        | ScheduleKey::NodeReduce(..)
        | ScheduleKey::NodeReduceAt(..)
        | ScheduleKey::NodeBcast(..) => {
            unreachable!("a node form ({key:?}) is built by Group::schedule_of")
        }
    })
}

/// The ids `split` may hand out at one port: a bit per id, set when free.
/// `split` ANDs the masks of all members of the parent group (an allreduce),
/// so the lowest set bit of the result is free at every one of them.
#[derive(Debug, Clone)]
pub(crate) struct IdPool {
    free: Vec<u64>,
}

impl Default for IdPool {
    fn default() -> Self {
        IdPool {
            free: vec![u64::MAX; SPLIT_GROUP_IDS as usize / 64],
        }
    }
}

impl IdPool {
    /// The mask as bytes, for the allreduce.
    pub fn mask_bytes(&self) -> Vec<u8> {
        self.free.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// The lowest id free in an ANDed mask.
    pub fn lowest(mask: &[u8]) -> Option<GroupId> {
        mask.chunks_exact(8).enumerate().find_map(|(i, c)| {
            let w = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
            (w != 0).then(|| {
                GroupId(APP_GROUP_ID_LIMIT + i as u64 * 64 + u64::from(w.trailing_zeros()))
            })
        })
    }

    fn bit(id: GroupId) -> Option<(usize, u64)> {
        let i =
            id.0.checked_sub(APP_GROUP_ID_LIMIT)
                .filter(|&i| i < u64::from(SPLIT_GROUP_IDS))?;
        Some(((i / 64) as usize, 1 << (i % 64)))
    }

    /// Marks a split id used.
    pub fn take(&mut self, id: GroupId) {
        if let Some((w, b)) = Self::bit(id) {
            self.free[w] &= !b;
        }
    }

    /// Gives a split id back (application ids are ignored).
    pub fn give(&mut self, id: GroupId) {
        if let Some((w, b)) = Self::bit(id) {
            self.free[w] |= b;
        }
    }
}
