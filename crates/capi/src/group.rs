//! Groups: every rank (`outboard_world_group`, like `MPI_Comm_dup` of
//! `MPI_COMM_WORLD`), split, free, and the mode their collectives run in.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use outboard_host::coll::UNDEFINED;
use outboard_host::{Group, Mode};

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
        self.node.as_ref().filter(|_| self.offloaded.load(Ordering::Acquire))
    }

    /// The group cut node by node, when it has that and runs its
    /// collectives offloaded; `None` when a blocking call must go to the
    /// engine as a whole.
    pub(crate) fn span_path(&self) -> Option<&SpanPath> {
        self.span.as_ref().filter(|_| self.offloaded.load(Ordering::Acquire))
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
    let h = Box::into_raw(Box::new(outboard_group { shared, group: Mutex::new(g), node: node.map(|n| Arc::new(Mutex::new(n))), span, rank, size, offloaded }));
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
/// new group, ordered by `key` then by rank. Collective over `group`. A
/// rank passing [`OUTBOARD_UNDEFINED`] gets null in `*out`.
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
            Some(ng) => hand_out(g.shared.clone(), ng, out),
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
            first
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
