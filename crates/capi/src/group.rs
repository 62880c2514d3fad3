//! Groups: every rank (`outboard_world_group`, like `MPI_Comm_dup` of
//! `MPI_COMM_WORLD`), split, free, and the mode their collectives run in.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use outboard_host::coll::{describe_allreduce, describe_barrier, describe_reduce, describe_tree, UNDEFINED};
use outboard_host::postal::Lambda;
use outboard_host::{AllreduceAlgorithm, BarrierAlgorithm, BarrierProtocol, BcastMode, CollDefaults, Group, Mode, ReduceAlgorithm, TreeShape};

use outboard_runtime::node_coll::span::Span;
use outboard_runtime::node_coll::{NodeColl, NodeCollError};

use crate::error::{deref, guard, put, Error, OUTBOARD_ERR_RESOURCE, OUTBOARD_ERR_STATE};
use crate::world::{outboard_world, Shared};

/// A group of ranks (opaque): the members of a collective.
pub struct outboard_group {
    pub(crate) shared: Arc<Shared>,
    pub(crate) group: Mutex<Group>,
    /// Its collectives through shared memory, when every member runs on
    /// this node (`outboard_runtime::node_coll`).
    node: Option<Arc<Mutex<NodeColl>>>,
    /// The group cut node by node, when it spans nodes
    /// (`outboard_runtime::node_coll::span`).
    pub(crate) span: Option<SpanPath>,
    /// This rank's rank and the number of members, which never change:
    /// read without locks.
    pub(crate) rank: u32,
    pub(crate) size: u32,
    /// Whether its collectives run offloaded (the default mode), read
    /// without locks by the node's fast path.
    offloaded: AtomicBool,
    /// Whether a program chose an algorithm, tree, protocol or broadcast
    /// mode: then every collective goes to the engines, which run it as
    /// chosen, instead of the node's shared memory (which has algorithms
    /// of its own).
    chosen: AtomicBool,
    /// Its broadcasts' mode and tree, where chosen.
    pub(crate) bcast: Mutex<BcastChoice>,
    /// Application bypass for its broadcasts and reduces (module
    /// `bypass`): not a choice the engines honour, so it leaves the node's
    /// and the spanning paths to the group's other collectives.
    pub(crate) bypass: Mutex<crate::bypass::GroupBypass>,
}

/// A group's broadcast choices (the host library's group keeps one tree
/// for reduce and broadcast; the C ABI lets them differ).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BcastChoice {
    /// Where broadcasts run; `None`: in the group's mode.
    pub mode: Option<BcastMode>,
    /// Their tree; `None`: the group's (reduce) tree.
    pub tree: Option<TreeShape>,
}

/// Collectives run by the engines (the default).
pub const OUTBOARD_MODE_OFFLOADED: c_int = 0;
/// Collectives run by the hosts over point-to-point messages.
pub const OUTBOARD_MODE_HOST_BASED: c_int = 1;
/// `color` of [`outboard_split`] for a rank that joins no group.
pub const OUTBOARD_UNDEFINED: u32 = 0xFFFF_FFFF;
const _: () = assert!(OUTBOARD_UNDEFINED == UNDEFINED);

impl outboard_group {
    /// Runs `f` on the group and the world.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Group, &mut outboard_runtime::World) -> Result<R, Error>) -> Result<R, Error> {
        let mut g = self.group.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?;
        self.shared.with(|w| f(&mut g, w))
    }

    /// The group's collectives through shared memory, when it has them and
    /// runs its collectives offloaded (the node's part of an offloaded
    /// collective; host-based ones keep their own algorithms); `None` when
    /// a blocking call must go to the engine.
    pub(crate) fn node_path(&self) -> Option<&Arc<Mutex<NodeColl>>> {
        self.node.as_ref().filter(|_| self.fast())
    }

    /// Whether blocking collectives may take the node's or the spanning
    /// path: offloaded, and nothing chosen that only the engines honour.
    fn fast(&self) -> bool {
        self.offloaded.load(Ordering::Acquire) && !self.chosen.load(Ordering::Acquire)
    }

    /// The mode and tree its broadcasts run in, given the group's.
    pub(crate) fn bcast_choice(&self, mode: Mode, tree: TreeShape) -> Result<(BcastMode, TreeShape), Error> {
        let b = *self.bcast.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?;
        Ok((b.mode.unwrap_or(mode.into()), b.tree.unwrap_or(tree)))
    }

    /// The group cut node by node, when it has that and runs its
    /// collectives offloaded; `None` when a blocking call must go to the
    /// engine as a whole.
    pub(crate) fn span_path(&self) -> Option<&SpanPath> {
        self.span.as_ref().filter(|_| self.fast())
    }

    /// Runs `f` on the group's node collectives (from [`Self::node_path`]).
    pub(crate) fn run_on_node<R>(&self, node: &Mutex<NodeColl>, f: impl FnOnce(&mut NodeColl) -> Result<R, NodeCollError>) -> Result<R, Error> {
        self.shared.live()?;
        Ok(f(&mut *lock_node(node)?)?)
    }
}

/// Locks a group's node collectives.
pub(crate) fn lock_node(node: &Mutex<NodeColl>) -> Result<std::sync::MutexGuard<'_, NodeColl>, Error> {
    node.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))
}

/// A group cut node by node ([`Span`]), its parts locked apart.
pub(crate) struct SpanPath {
    /// Per group rank, its node's index (its leader's rank among the
    /// leaders), and its index among its node's members.
    pub node_of: Vec<u32>,
    pub local_rank: Vec<u32>,
    /// This member's node.
    pub my_node: u32,
    /// This node's members in shared memory (two or more).
    pub local: Option<Mutex<NodeColl>>,
    /// The leaders' group, at a leader.
    pub leaders: Option<Mutex<Group>>,
}

impl SpanPath {
    fn new(s: Span) -> SpanPath {
        SpanPath { node_of: s.node_of, local_rank: s.local_rank, my_node: s.my_node, local: s.local.map(Mutex::new), leaders: s.leaders_group.map(Mutex::new) }
    }
}

/// What a group's collectives have beside the engine: its members' shared
/// memory when they all run on this node, or its cut node by node.
type Beside = (Group, Option<NodeColl>, Option<Span>);

/// A group's node collectives, asked for by every member as it makes the
/// group (see `World::node_coll` and `World::span`); on failure the group
/// is freed again.
fn with_node(w: &mut outboard_runtime::World, g: Group) -> Result<Beside, Error> {
    let made = w.node_coll(&g).and_then(|nc| match nc {
        Some(nc) => Ok((Some(nc), None)),
        None => w.span(&g).map(|s| (None, s)),
    });
    match made {
        Ok((nc, span)) => Ok((g, nc, span)),
        Err(e) => {
            let _ = w.port().free_group(g);
            Err(Error::new(
                OUTBOARD_ERR_RESOURCE,
                format!("the group's shared memory in /dev/shm could not be set up: {e} (OUTBOARD_SHM_COLL=off sends its collectives through the node engine instead)"),
            ))
        }
    }
}

fn hand_out(shared: Arc<Shared>, (g, node, span): Beside, out: *mut *mut outboard_group) -> Result<(), Error> {
    let (rank, size, offloaded) = (g.rank(), g.size(), AtomicBool::new(g.defaults().mode == Mode::Offloaded));
    let span = span.map(SpanPath::new);
    let h = Box::into_raw(Box::new(outboard_group { shared, group: Mutex::new(g), node: node.map(|n| Arc::new(Mutex::new(n))), span, rank, size, offloaded, chosen: AtomicBool::new(false), bcast: Mutex::new(BcastChoice::default()), bypass: Default::default() }));
    // SAFETY: checked by `put`.
    unsafe { put(out, h, "out") }.inspect_err(|_| drop(unsafe { Box::from_raw(h) }))
}

/// A new group of every rank in rank order. Collective: every rank makes
/// its world groups in the same order.
#[no_mangle]
pub unsafe extern "C" fn outboard_world_group(world: *const outboard_world, out: *mut *mut outboard_group) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        let g = w.shared.with(|w| {
            let g = w.group()?;
            with_node(w, g)
        })?;
        hand_out(w.shared.clone(), g, out)
    })
}

/// Splits `group` by `color` (`MPI_Comm_split`): ranks of one color form a
/// new group, ordered by `key` then by rank, with `group`'s mode and
/// collective choices. Collective over `group`. A rank passing
/// [`OUTBOARD_UNDEFINED`] gets null in `*out`.
#[no_mangle]
pub unsafe extern "C" fn outboard_split(group: *const outboard_group, color: u32, key: u32, out: *mut *mut outboard_group) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        if out.is_null() {
            return Err(Error::arg("out is null"));
        }
        let made = g.with(|g, w| match w.port().split(g, color, key)? {
            Some(ng) => with_node(w, ng).map(Some),
            None => Ok(None),
        })?;
        match made {
            Some(ng) => {
                hand_out(g.shared.clone(), ng, out)?;
                // The new group takes the parent's choices, as the host
                // library's split takes its defaults.
                // SAFETY: `hand_out` just wrote a live handle to `*out`.
                let child = unsafe { &**out };
                let protocol = g.with(|gr, _| Ok(gr.barrier_protocol()))?;
                child.with(|gr, _| {
                    gr.set_barrier_protocol(protocol);
                    Ok(())
                })?;
                let b = *g.bcast.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?;
                *child.bcast.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))? = b;
                child.chosen.store(g.chosen.load(Ordering::Acquire), Ordering::Release);
                let (bcast, reduce) = (g.bypass_chosen(false), g.bypass_chosen(true));
                if bcast || reduce {
                    child.set_bypass(Some(bcast), Some(reduce))?;
                }
                Ok(())
            }
            None => unsafe { put(out, std::ptr::null_mut(), "out") },
        }
    })
}

/// Frees a group (no collective of it may be under way); the handle is
/// freed even on failure.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_free(group: *mut outboard_group) -> c_int {
    guard(|| {
        if group.is_null() {
            return Err(Error::arg("group is null"));
        }
        // SAFETY: a handle from this module, freed only here.
        let h = unsafe { Box::from_raw(group) };
        let poisoned = || Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use");
        // Its bypass group first: the handle is still whole.
        let bypass = h.shared.with(|w| h.detach_bypass(w));
        let g = h.group.into_inner().map_err(|_| poisoned())?;
        // The leaders' group goes too, if it can: a failure there must not
        // keep the group's own id and engine installation.
        let leaders = h.span.and_then(|s| s.leaders).map(|l| l.into_inner().map_err(|_| poisoned()));
        h.shared.with(|w| {
            let first = match leaders {
                Some(Ok(l)) => w.port().free_group(l).map_err(Error::from),
                Some(Err(e)) => Err(e),
                None => Ok(()),
            };
            w.port().free_group(g)?;
            first.and(bypass)
        })
    })
}

/// This rank's rank in the group.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_rank(group: *const outboard_group, rank: *mut u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        unsafe { put(rank, g.rank, "rank") }
    })
}

/// The number of ranks in the group.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_size(group: *const outboard_group, size: *mut u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        unsafe { put(size, g.size, "size") }
    })
}

/// How many engines (nodes) the group's members use: 1 when they all
/// share a machine's node engine, more when the group spans machines (or
/// each rank runs an engine of its own). The PMPI library picks its size
/// thresholds by it.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_nodes(group: *const outboard_group, nodes: *mut u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let n = g.with(|gr, _| Ok(gr.node_leaders().len() as u32))?;
        unsafe { put(nodes, n, "nodes") }
    })
}

/// Where the group's collectives run: [`OUTBOARD_MODE_OFFLOADED`] or
/// [`OUTBOARD_MODE_HOST_BASED`]. Every member must choose the same.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_mode(group: *const outboard_group, mode: c_int) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let m = match mode {
            OUTBOARD_MODE_OFFLOADED => Mode::Offloaded,
            OUTBOARD_MODE_HOST_BASED => Mode::HostBased,
            _ => return Err(Error::arg(format!("mode {mode} is neither offloaded (0) nor host-based (1)"))),
        };
        // The MPI library sets the mode before every collective: the same
        // mode again costs no lock.
        if g.offloaded.load(Ordering::Acquire) == (m == Mode::Offloaded) {
            return g.shared.live();
        }
        g.with(|gr, _| {
            gr.set_default(m);
            g.offloaded.store(m == Mode::Offloaded, Ordering::Release);
            Ok(())
        })
    })
}

/// Group ids a program may choose for [`outboard_group_create`] are below
/// this (the ids above are taken by [`outboard_world_group`] and split).
pub const OUTBOARD_GROUP_ID_LIMIT: u64 = 1 << 19;
const _: () = assert!(OUTBOARD_GROUP_ID_LIMIT == outboard_runtime::WORLD_GROUP_FIRST);

/// A group of the `n` world ranks at `world_ranks`, in group-rank order,
/// under a program-chosen `id` (below [`OUTBOARD_GROUP_ID_LIMIT`], the
/// same at every member and not used by another group at any member's
/// port: an MPI library allocates it like a context id). Local: no
/// communication; this rank must be among the members.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_create(world: *const outboard_world, id: u64, n: u32, world_ranks: *const u32, out: *mut *mut outboard_group) -> c_int {
    guard(|| {
        let w = unsafe { deref(world, "world") }?;
        if world_ranks.is_null() || n == 0 {
            return Err(Error::arg("a group needs members"));
        }
        if id >= OUTBOARD_GROUP_ID_LIMIT {
            return Err(Error::arg(format!("group id {id} is not below {OUTBOARD_GROUP_ID_LIMIT}")));
        }
        // SAFETY: the program promises `n` readable ranks.
        let ranks = unsafe { std::slice::from_raw_parts(world_ranks, n as usize) };
        let g = w.shared.with(|w| {
            let size = w.size();
            if let Some(r) = ranks.iter().find(|&&r| r >= size) {
                return Err(Error::arg(format!("world rank {r} outside a world of {size}")));
            }
            let me = ranks.iter().position(|&r| r == w.rank()).ok_or_else(|| Error::arg("this rank is not a member"))?;
            let members = ranks.iter().map(|&r| w.endpoint(r)).collect();
            let g = w.port().new_group(outboard_host::GroupId(id), me as u32, members)?;
            with_node(w, g)
        })?;
        hand_out(w.shared.clone(), g, out)
    })
}

/// Barrier algorithm: dissemination, ceil(log2 n) rounds for any n (the
/// default).
pub const OUTBOARD_BARRIER_DISSEMINATION: c_int = 0;
/// Barrier algorithm: MPICH's pairwise exchange (recursive doubling).
pub const OUTBOARD_BARRIER_PAIRWISE_EXCHANGE: c_int = 1;
/// Barrier algorithm: gather to rank 0 and broadcast back on a tree (of
/// the degree given with it; 0 for binomial).
pub const OUTBOARD_BARRIER_GATHER_BCAST: c_int = 2;

/// Offloaded barriers travel over the engines' reliable point-to-point
/// connections (the default).
pub const OUTBOARD_BARRIER_POINT_TO_POINT: c_int = 0;
/// Offloaded barriers travel by the engines' NIC collective protocol:
/// unsequenced notifications, no acknowledgements, losses recovered by
/// the barrier itself.
pub const OUTBOARD_BARRIER_NIC_COLLECTIVE: c_int = 1;

/// Broadcasts run in the group's mode (the default).
pub const OUTBOARD_BCAST_GROUP_MODE: c_int = 0;
/// Broadcasts run offloaded: the engines forward each piece down the tree.
pub const OUTBOARD_BCAST_OFFLOADED: c_int = 1;
/// Broadcasts run host-based: the hosts send to each child.
pub const OUTBOARD_BCAST_HOST_BASED: c_int = 2;
/// Broadcasts run NIC-assisted: each host hands every piece to its engine
/// once, with one multi-send to all its children.
pub const OUTBOARD_BCAST_NIC_ASSISTED: c_int = 3;
/// Blocking broadcasts of at most 16384 bytes run by application bypass:
/// inner members forward in an interrupt handler, so a late member
/// delays nobody below it; longer ones and split-phase ones run in the
/// group's mode.
pub const OUTBOARD_BCAST_BYPASS: c_int = 4;

/// Tree shape: MPICH's binomial tree (the default).
pub const OUTBOARD_TREE_BINOMIAL: c_int = 0;
/// Tree shape: a complete k-ary tree of the degree given with it.
pub const OUTBOARD_TREE_KARY: c_int = 1;
/// Tree shape: a chain (best for pipelining large messages).
pub const OUTBOARD_TREE_CHAIN: c_int = 2;
/// Tree shape: the postal model's optimal tree for the lambda given with
/// it (dissertation 2.3).
pub const OUTBOARD_TREE_POSTAL: c_int = 3;

impl outboard_group {
    /// Applies a choice to the group (and marks the group as having one).
    fn choose(&self, f: impl FnOnce(&mut Group, &outboard_group) -> Result<(), Error>) -> Result<(), Error> {
        self.with(|g, _| {
            f(g, self)?;
            self.chosen.store(true, Ordering::Release);
            Ok(())
        })
    }
}

/// The tree `shape` names with its parameter (`param`: a k-ary tree's
/// degree, a postal tree's lambda); `what` names the setting in errors.
fn tree_of(shape: c_int, param: f64, what: &str) -> Result<TreeShape, Error> {
    match shape {
        OUTBOARD_TREE_BINOMIAL => Ok(TreeShape::Binomial),
        OUTBOARD_TREE_CHAIN => Ok(TreeShape::Chain),
        OUTBOARD_TREE_KARY => {
            if param.fract() != 0.0 || !(1.0..=f64::from(u32::MAX)).contains(&param) {
                return Err(Error::arg(format!("{what}: a k-ary tree's degree must be a whole number of at least 1, not {param}")));
            }
            Ok(TreeShape::Kary(param as u32))
        }
        OUTBOARD_TREE_POSTAL => {
            if !param.is_finite() || param < 1.0 {
                return Err(Error::arg(format!("{what}: a postal tree's lambda must be a finite number of at least 1, not {param}")));
            }
            Ok(TreeShape::Postal(Lambda::Given(param)))
        }
        _ => Err(Error::arg(format!(
            "{what}: tree shape {shape} is none of OUTBOARD_TREE_BINOMIAL (0), OUTBOARD_TREE_KARY (1), OUTBOARD_TREE_CHAIN (2) and OUTBOARD_TREE_POSTAL (3)"
        ))),
    }
}

/// Chooses the group's barrier algorithm: `OUTBOARD_BARRIER_DISSEMINATION`,
/// `OUTBOARD_BARRIER_PAIRWISE_EXCHANGE`, or `OUTBOARD_BARRIER_GATHER_BCAST`
/// on a tree of `degree` (0: binomial; ignored otherwise). Every member
/// must choose alike, before the same barrier. A group with any choice
/// made runs its collectives on the engines (not in the node's shared
/// memory, whose algorithms are its own).
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_barrier(group: *const outboard_group, algorithm: c_int, degree: u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let a = match algorithm {
            OUTBOARD_BARRIER_DISSEMINATION => BarrierAlgorithm::Dissemination,
            OUTBOARD_BARRIER_PAIRWISE_EXCHANGE => BarrierAlgorithm::PairwiseExchange,
            OUTBOARD_BARRIER_GATHER_BCAST => BarrierAlgorithm::GatherBroadcast { degree },
            _ => {
                return Err(Error::arg(format!(
                    "barrier algorithm {algorithm} is none of OUTBOARD_BARRIER_DISSEMINATION (0), OUTBOARD_BARRIER_PAIRWISE_EXCHANGE (1) and OUTBOARD_BARRIER_GATHER_BCAST (2)"
                )))
            }
        };
        apply_barrier(g, a)
    })
}

/// Changes the group's default choices with `f`, as every member must
/// alike before the same collective.
fn change_defaults(g: &outboard_group, f: impl FnOnce(&mut CollDefaults)) -> Result<(), Error> {
    g.choose(|gr, _| {
        let mut d = gr.defaults();
        f(&mut d);
        gr.set_defaults(d);
        Ok(())
    })
}

fn apply_barrier(g: &outboard_group, a: BarrierAlgorithm) -> Result<(), Error> {
    change_defaults(g, |d| d.barrier = a)
}

fn apply_protocol(g: &outboard_group, p: BarrierProtocol) -> Result<(), Error> {
    g.choose(|gr, _| {
        gr.set_barrier_protocol(p);
        Ok(())
    })
}

/// A broadcast mode (`None`: the group's). Going back to the group's mode
/// is no choice of its own: it leaves the node's and the spanning paths
/// to the group if nothing else was chosen.
fn apply_bcast_mode(g: &outboard_group, m: Option<BcastMode>) -> Result<(), Error> {
    g.set_bypass(Some(false), None)?;
    let set = |g: &outboard_group| -> Result<(), Error> {
        g.bcast.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?.mode = m;
        Ok(())
    };
    match m {
        None => set(g),
        Some(_) => g.choose(|_, g| set(g)),
    }
}

fn apply_bcast_tree(g: &outboard_group, t: TreeShape) -> Result<(), Error> {
    g.choose(|_, g| {
        g.bcast.lock().map_err(|_| Error::new(OUTBOARD_ERR_STATE, "an earlier call panicked with the group in use"))?.tree = Some(t);
        Ok(())
    })
}

/// The reduction tree's degree: reduces and the trees of tree and
/// block-tree allreduces take it.
fn apply_reduce_degree(g: &outboard_group, degree: u32) -> Result<(), Error> {
    let t = if degree == 0 { TreeShape::Binomial } else { TreeShape::Kary(degree) };
    change_defaults(g, |d| {
        d.tree = t;
        d.reduce = d.reduce.on(t);
        d.allreduce = d.allreduce.on(t);
    })
}

/// The allreduce algorithm by its setting's name (`auto`, `tree`,
/// `block-trees`, `recursive-doubling`), on the group's reduction tree.
fn apply_allreduce_algorithm(g: &outboard_group, name: &str) -> Result<(), Error> {
    change_defaults(g, |d| {
        d.allreduce = match name {
            "tree" => AllreduceAlgorithm::Tree(d.tree),
            "recursive-doubling" => AllreduceAlgorithm::RecursiveDoubling,
            "block-trees" => AllreduceAlgorithm::BlockTrees(d.tree),
            _ => AllreduceAlgorithm::Auto(d.tree),
        }
    })
}

/// The reduce algorithm by its setting's name (`tree`, `block-trees`), on
/// the group's reduction tree.
fn apply_reduce_algorithm(g: &outboard_group, name: &str) -> Result<(), Error> {
    change_defaults(g, |d| {
        d.reduce = match name {
            "block-trees" => ReduceAlgorithm::BlockTrees(d.tree),
            _ => ReduceAlgorithm::Tree(d.tree),
        }
    })
}

/// Chooses how the group's offloaded barriers travel between the engines:
/// `OUTBOARD_BARRIER_POINT_TO_POINT` (the reliable connections) or
/// `OUTBOARD_BARRIER_NIC_COLLECTIVE` (the NIC collective protocol). Every
/// member must choose alike, before the same barrier. Host-based barriers
/// are unaffected.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_barrier_protocol(group: *const outboard_group, protocol: c_int) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let p = match protocol {
            OUTBOARD_BARRIER_POINT_TO_POINT => BarrierProtocol::PointToPoint,
            OUTBOARD_BARRIER_NIC_COLLECTIVE => BarrierProtocol::NicCollective,
            _ => {
                return Err(Error::arg(format!(
                    "barrier protocol {protocol} is neither OUTBOARD_BARRIER_POINT_TO_POINT (0) nor OUTBOARD_BARRIER_NIC_COLLECTIVE (1)"
                )))
            }
        };
        apply_protocol(g, p)
    })
}

/// Chooses where the group's broadcasts run: `OUTBOARD_BCAST_GROUP_MODE`
/// (its mode, the default), `OUTBOARD_BCAST_OFFLOADED`,
/// `OUTBOARD_BCAST_HOST_BASED`, `OUTBOARD_BCAST_NIC_ASSISTED` in pieces
/// of `chunk` bytes (0: one packet's payload; `UINT32_MAX`: the whole
/// message at once; ignored for the other modes), or
/// `OUTBOARD_BCAST_BYPASS` (application bypass; the first choice of it in
/// a process turns the engine's interrupts on, as
/// `OUTBOARD_BYPASS_DELIVERY` says, and fails with `OUTBOARD_ERR_STATE`
/// where they cannot be delivered). Every member must choose alike.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_bcast_mode(group: *const outboard_group, mode: c_int, chunk: u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let m = match mode {
            OUTBOARD_BCAST_GROUP_MODE => None,
            OUTBOARD_BCAST_OFFLOADED => Some(BcastMode::Offloaded),
            OUTBOARD_BCAST_HOST_BASED => Some(BcastMode::HostBased),
            OUTBOARD_BCAST_NIC_ASSISTED => Some(BcastMode::NicAssisted { chunk }),
            OUTBOARD_BCAST_BYPASS => return g.set_bypass(Some(true), None),
            _ => {
                return Err(Error::arg(format!(
                    "broadcast mode {mode} is none of OUTBOARD_BCAST_GROUP_MODE (0), OUTBOARD_BCAST_OFFLOADED (1), OUTBOARD_BCAST_HOST_BASED (2), OUTBOARD_BCAST_NIC_ASSISTED (3) and OUTBOARD_BCAST_BYPASS (4)"
                )))
            }
        };
        apply_bcast_mode(g, m)
    })
}

/// Chooses where the group's reduces run: `OUTBOARD_REDUCE_GROUP_MODE`
/// (its mode, the default) or `OUTBOARD_REDUCE_BYPASS` (application
/// bypass for blocking reduces of at most 16384 bytes of a built-in
/// operation: a non-root returns once its contribution is copied, and
/// interrupt handlers fold its children's and send up; the rest run in
/// the group's mode). Turning bypass on fails as
/// [`outboard_group_set_bcast_mode`]'s does. Every member must choose
/// alike.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_reduce_mode(group: *const outboard_group, mode: c_int) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        match mode {
            crate::OUTBOARD_REDUCE_GROUP_MODE => g.set_bypass(None, Some(false)),
            crate::OUTBOARD_REDUCE_BYPASS => g.set_bypass(None, Some(true)),
            _ => Err(Error::arg(format!("reduce mode {mode} is neither OUTBOARD_REDUCE_GROUP_MODE (0) nor OUTBOARD_REDUCE_BYPASS (1)"))),
        }
    })
}

/// Chooses the tree the group's broadcasts run on: `OUTBOARD_TREE_BINOMIAL`,
/// `OUTBOARD_TREE_KARY` of degree `param` (a whole number, at least 1),
/// `OUTBOARD_TREE_CHAIN`, or `OUTBOARD_TREE_POSTAL` for lambda `param` (at
/// least 1); `param` is ignored for the others. Every member must choose
/// alike.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_bcast_tree(group: *const outboard_group, shape: c_int, param: f64) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let t = tree_of(shape, param, "the broadcast tree")?;
        apply_bcast_tree(g, t)
    })
}

/// Chooses the degree of the tree the group's reductions (reduce, and
/// allreduce, which reduces up its trees and broadcasts down them) run
/// on: 0 for MPICH's binomial tree (the default), else a complete tree of
/// that degree. Every member must choose alike.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_reduce_degree(group: *const outboard_group, degree: u32) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        apply_reduce_degree(g, degree)
    })
}

/// Makes one choice from text, as the PMPI library's variables and
/// `MPI_Info` keys write it: `option` is `barrier_algorithm`
/// (`dissemination`, `pairwise-exchange`, `gather-broadcast[:DEGREE]`),
/// `barrier_protocol` (`point-to-point`, `nic-collective`), `bcast_mode`
/// (`collective` - the group's mode -, `offloaded`, `host-based`,
/// `nic-assisted[:CHUNK]`), `bcast_tree` (`binomial`, `kary:DEGREE`,
/// `chain`, `postal:LAMBDA`), `reduce_degree` (a whole number, 0 for
/// binomial), `reduce_algorithm` (`tree` - the default -, `block-trees`:
/// the data cut into blocks, each reduced on a tree rooted at a member of
/// its own and sent on to the root, which is one tree for data of one
/// packet or between two nodes) or `allreduce_algorithm` (`auto` - the
/// default: recursive doubling for short data, block trees for long, the
/// crossover measured for the transport -, `block-trees`: the
/// data cut into blocks, each reduced and broadcast back on a tree rooted
/// at a member of its own, which is one tree for data of one packet,
/// `tree`, `recursive-doubling`); the values are parsed as the `OUTBOARD_MPI_*` variable of
/// the same choice is. A bad option or value fails with
/// `OUTBOARD_ERR_ARG` and a sentence naming what is accepted.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_set_option(group: *const outboard_group, option: *const std::ffi::c_char, value: *const std::ffi::c_char) -> c_int {
    use outboard_settings::registry as r;
    use outboard_settings::{Kind, Problem};
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        if option.is_null() || value.is_null() {
            return Err(Error::arg("option or value is null"));
        }
        // SAFETY: non-null NUL-terminated strings, as the caller promises.
        let (option, value) = unsafe { (std::ffi::CStr::from_ptr(option), std::ffi::CStr::from_ptr(value)) };
        let option = option.to_str().map_err(|_| Error::arg("the option is not UTF-8"))?;
        let value = value.to_str().map_err(|_| Error::arg(format!("the value of {option} is not UTF-8")))?;
        fn bad<K: Kind>(option: &str, value: &str, kind: &K, p: Problem) -> Error {
            let why = match p {
                Problem::Malformed => String::new(),
                Problem::OutOfRange(w) => format!(" ({w})"),
            };
            Error::arg(format!("{option} {value:?} is not {}{why}; use {}", kind.noun(), kind.accepted()))
        }
        match option {
            "barrier_algorithm" => {
                let v = r::BARRIER_ALGORITHM.parse(value).map_err(|p| bad(option, value, &r::BARRIER_ALGORITHM, p))?;
                let a = match v.name {
                    "pairwise-exchange" => BarrierAlgorithm::PairwiseExchange,
                    "gather-broadcast" => BarrierAlgorithm::GatherBroadcast { degree: v.param.unwrap_or(0.0) as u32 },
                    _ => BarrierAlgorithm::Dissemination,
                };
                apply_barrier(g, a)
            }
            "barrier_protocol" => {
                let v = r::BARRIER_PROTOCOL.parse(value).map_err(|p| bad(option, value, &r::BARRIER_PROTOCOL, p))?;
                apply_protocol(g, if v == "nic-collective" { BarrierProtocol::NicCollective } else { BarrierProtocol::PointToPoint })
            }
            "bcast_mode" => {
                let v = r::BCAST_MODE.parse(value).map_err(|p| bad(option, value, &r::BCAST_MODE, p))?;
                apply_bcast_mode(
                    g,
                    match v.name {
                        "offloaded" => Some(BcastMode::Offloaded),
                        "host-based" => Some(BcastMode::HostBased),
                        "nic-assisted" => Some(BcastMode::NicAssisted { chunk: v.param.unwrap_or(0.0) as u32 }),
                        "bypass" => return g.set_bypass(Some(true), None),
                        _ => None,
                    },
                )
            }
            "reduce_mode" => {
                let v = r::REDUCE_MODE.parse(value).map_err(|p| bad(option, value, &r::REDUCE_MODE, p))?;
                g.set_bypass(None, Some(v == "bypass"))
            }
            "bcast_tree" => {
                let v = r::BCAST_TREE.parse(value).map_err(|p| bad(option, value, &r::BCAST_TREE, p))?;
                let t = match v.name {
                    "kary" => TreeShape::Kary(v.param.unwrap_or(2.0) as u32),
                    "chain" => TreeShape::Chain,
                    "postal" => TreeShape::Postal(Lambda::Given(v.param.unwrap_or(1.0))),
                    _ => TreeShape::Binomial,
                };
                apply_bcast_tree(g, t)
            }
            "reduce_degree" => {
                let v = r::REDUCE_DEGREE.parse(value).map_err(|p| bad(option, value, &r::REDUCE_DEGREE, p))?;
                apply_reduce_degree(g, v as u32)
            }
            "reduce_algorithm" => {
                let v = r::REDUCE_ALGORITHM.parse(value).map_err(|p| bad(option, value, &r::REDUCE_ALGORITHM, p))?;
                apply_reduce_algorithm(g, v)
            }
            "allreduce_algorithm" => {
                let v = r::ALLREDUCE_ALGORITHM.parse(value).map_err(|p| bad(option, value, &r::ALLREDUCE_ALGORITHM, p))?;
                apply_allreduce_algorithm(g, v)
            }
            _ => Err(Error::arg(format!(
                "unknown group option {option:?}: barrier_algorithm, barrier_protocol, bcast_mode, bcast_tree, reduce_mode, reduce_degree, reduce_algorithm or allreduce_algorithm"
            ))),
        }
    })
}

/// Copies `s` with its terminating NUL into `text` (`cap` bytes), or fails
/// naming the length it needs (then `text` holds the empty string if `cap`
/// > 0).
pub(crate) unsafe fn put_text(s: &str, text: *mut std::ffi::c_char, cap: usize) -> Result<(), Error> {
    if text.is_null() {
        return Err(Error::arg("text is null"));
    }
    if cap > 0 {
        // SAFETY: non-null, and the caller promises `cap` writable bytes.
        unsafe { *text = 0 };
    }
    if s.len() >= cap {
        return Err(Error::arg(format!("the text needs {} bytes with its terminating NUL; cap is {cap}", s.len() + 1)));
    }
    // SAFETY: `s.len() + 1 <= cap` writable bytes at `text`; the source is
    // a distinct Rust string.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), text.cast::<u8>(), s.len());
        *text.add(s.len()) = 0;
    }
    Ok(())
}

/// Writes into `text` (at most `cap` bytes with the terminating NUL) the
/// group's choices in one line: mode, barrier algorithm and protocol,
/// broadcast mode and tree, reduce algorithm and tree, allreduce
/// algorithm.
#[no_mangle]
pub unsafe extern "C" fn outboard_group_describe(group: *const outboard_group, text: *mut std::ffi::c_char, cap: usize) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let (d, protocol) = g.with(|gr, _| Ok((gr.defaults(), gr.barrier_protocol())))?;
        let (bmode, btree) = g.bcast_choice(d.mode, d.tree)?;
        let mode = |m: Mode| if m == Mode::Offloaded { "offloaded" } else { "host-based" };
        let beyond = |what: String| format!("by application bypass up to {} bytes, else {what}", outboard_host::bypass::MAX_LEN);
        let bmode = match bmode {
            BcastMode::Offloaded => "offloaded".to_string(),
            BcastMode::HostBased => "host-based".to_string(),
            BcastMode::NicAssisted { chunk: BcastMode::PACKET } => "nic-assisted".to_string(),
            BcastMode::NicAssisted { chunk: BcastMode::WHOLE } => "nic-assisted (whole)".to_string(),
            BcastMode::NicAssisted { chunk } => format!("nic-assisted ({chunk}-byte pieces)"),
        };
        let bmode = if g.bypass_chosen(false) { beyond(bmode) } else { bmode };
        let reduce = describe_reduce(d.reduce);
        let reduce = if g.bypass_chosen(true) { beyond(format!("{} {reduce}", mode(d.mode))) } else { reduce };
        let protocol = match protocol {
            BarrierProtocol::PointToPoint => "point-to-point",
            BarrierProtocol::NicCollective => "the NIC collective protocol",
        };
        let line = format!(
            "mode {}; barrier {} over {protocol}; broadcast {bmode} on a {}; reduce {}; allreduce {}",
            mode(d.mode),
            describe_barrier(d.barrier),
            describe_tree(btree),
            reduce,
            describe_allreduce(d.allreduce)
        );
        unsafe { put_text(&line, text, cap) }
    })
}

/// Writes into `text` (at most `cap` bytes with the terminating NUL) what
/// this rank's collectives on the group ran as so far, one line per
/// choice: a count, a space, and the choice ("3 broadcast nic-assisted
/// 3-ary tree"). Collectives the node's shared memory ran are not among
/// them (they have no engine choices).
#[no_mangle]
pub unsafe extern "C" fn outboard_group_taken(group: *const outboard_group, text: *mut std::ffi::c_char, cap: usize) -> c_int {
    guard(|| {
        let g = unsafe { deref(group, "group") }?;
        let lines = g.with(|gr, w| Ok(gr.taken().iter().map(|(k, n)| format!("{n} {k}\n")).collect::<String>() + &g.bypass_taken(w)))?;
        unsafe { put_text(&lines, text, cap) }
    })
}
