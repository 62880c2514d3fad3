//! Every `OUTBOARD_*` variable: the one list that the runtime, the C ABI,
//! the PMPI library, `outboard config` and the configuration page's table (docs/configuration.md) follow. A
//! variable read anywhere in Outboard is declared here, or
//! [`crate::check`] refuses it as unknown.

use std::time::Duration;

use crate::kinds::{
    Choice, ChoiceWith, Count, Flag, Param, Hex64, HostPort, Ip, Secret, Size, SizeOrOff, Text, Time, Unit,
};
use crate::var::{Fallback, Group, OptVar, Setting, Var};

/// Longest duration a setting holds: what nanoseconds in 64 bits count.
const FOREVER: Duration = Duration::from_nanos(u64::MAX);

// ---- Engine and runtime ----

/// Progress policy; unset, chosen from the cores per rank.
pub static PROGRESS: OptVar<Choice> = OptVar {
    name: "OUTBOARD_PROGRESS",
    doc: "Who runs the engine and how waiting threads wait: a polling engine thread, waiting hosts that drive their engine, or threads that block.",
    group: Group::Runtime,
    kind: Choice { names: &[("dedicated", &[]), ("host-assisted", &[]), ("spin-then-block", &[])] },
    decided: "chosen from the cores per rank on this machine",
};

/// Where a process's engine runs.
pub static ENGINE: OptVar<Choice> = OptVar {
    name: "OUTBOARD_ENGINE",
    doc: "Where the engine runs: a thread of each process with a UDP socket of its own (process), or one engine process per node that serves every local process through shared memory (node).",
    group: Group::Runtime,
    kind: Choice { names: &[("process", &[]), ("node", &[])] },
    decided: "node under an MPI program with the library preloaded, else process (outboard run --ranks-per-node chooses node)",
};

/// The name ranks on one node share.
pub static NODE_NAME: OptVar<Text> = OptVar {
    name: "OUTBOARD_NODE_NAME",
    doc: "With OUTBOARD_ENGINE=node: the name of this process's node; ranks that give the same name share one node engine (outboard run --ranks-per-node sets it).",
    group: Group::Runtime,
    kind: Text { what: "name" },
    decided: "the host name and the network namespace",
};

/// The program that runs node engines.
pub static NODE_PROGRAM: OptVar<Text> = OptVar {
    name: "OUTBOARD_NODE_PROGRAM",
    doc: "With OUTBOARD_ENGINE=node: the outboard command the node's first rank starts as its node engine (outboard node).",
    group: Group::Runtime,
    kind: Text { what: "path" },
    decided: "an outboard beside the program or beside the C library (or in its ../bin), else outboard on the PATH",
};

/// The core a node engine polls on.
pub static ENGINE_CPU: OptVar<Count> = OptVar {
    name: "OUTBOARD_ENGINE_CPU",
    doc: "With OUTBOARD_ENGINE=node: the CPU the node engine process is pinned to.",
    group: Group::Runtime,
    kind: Count { min: 0, max: 65535 },
    decided: "the node's last core when it has more cores than local ranks and the engine polls (`outboard run` with several nodes on one machine: the last cores, one per node, when every rank and engine has one), else unpinned",
};

/// How long a silent peer has before the operations that need it fail.
pub static PEER_TIMEOUT: Var<Time> = Var {
    name: "OUTBOARD_PEER_TIMEOUT_MS",
    doc: "How long a peer may stay silent before the operations that need it fail, naming it.",
    group: Group::Runtime,
    kind: Time {
        bare: Some(Unit::Ms),
        min: Duration::from_millis(1),
        max: FOREVER,
    },
    default: Fallback::Value(Duration::from_secs(2)),
};

/// How long a rank keeps trying to reach the rendezvous.
pub static BOOTSTRAP_TIMEOUT: Var<Time> = Var {
    name: "OUTBOARD_BOOTSTRAP_TIMEOUT_MS",
    doc: "How long a rank keeps trying to reach the job's rendezvous before it gives up.",
    group: Group::Runtime,
    kind: Time {
        bare: Some(Unit::Ms),
        min: Duration::from_millis(1),
        max: FOREVER,
    },
    default: Fallback::Value(Duration::from_secs(60)),
};

/// The address the engine's socket binds.
pub static ADDR: OptVar<Ip> = OptVar {
    name: "OUTBOARD_ADDR",
    doc: "The IP address the engine's UDP socket binds.",
    group: Group::Runtime,
    kind: Ip,
    decided: "the address of OUTBOARD_IFACE; else the local address of the connection to the rendezvous; else 127.0.0.1 when every rank is on this machine; else the first IPv4 address of an interface that is up and not loopback",
};

/// The interface whose address the engine binds.
pub static IFACE: OptVar<Text> = OptVar {
    name: "OUTBOARD_IFACE",
    doc: "The network interface whose address the engine's UDP socket binds (its first IPv4 address, else an IPv6 one), as Open MPI's btl_tcp_if_include names one; not together with OUTBOARD_ADDR.",
    group: Group::Runtime,
    kind: Text { what: "interface name" },
    decided: "none: see OUTBOARD_ADDR",
};

/// The eager threshold of tagged messages. Above it a message's payload
/// moves by RDMA into the receive buffer, never through the receiver's
/// unexpected pool (no copy, no pool memory held for a large message that
/// arrives early). The handshake's extra round trip cost 3-7 % of a
/// ping-pong with receives posted in advance at 256 KiB-4 MiB on loopback
/// (docs/rendezvous.md), where the pool copy it saves never
/// happens: hence 64 KiB.
pub static EAGER_MAX: Var<SizeOrOff> = Var {
    name: "OUTBOARD_EAGER_MAX",
    doc: "Tagged messages longer than this go by rendezvous, straight into the receive buffer; off sends every message eagerly.",
    group: Group::Runtime,
    kind: SizeOrOff { max: u32::MAX as u64 },
    default: Fallback::Value(Some(64 << 10)),
};

/// The rendezvous protocol of large messages.
pub static RNDV: Var<Choice> = Var {
    name: "OUTBOARD_RNDV",
    doc: "How a large message moves: the receiver reads it, or the sender writes it after a clear-to-send.",
    group: Group::Runtime,
    kind: Choice { names: &[("read", &["get"]), ("write", &["put"])] },
    default: Fallback::Value("read"),
};

/// Segmented UDP sends.
pub static UDP_GSO: Var<Flag> = Var {
    name: "OUTBOARD_UDP_GSO",
    doc: "Segmented UDP sends where the kernel has them; off puts every datagram on the wire as its own packet.",
    group: Group::Runtime,
    kind: Flag,
    default: Fallback::Value(true),
};

/// Collectives of one node's processes through shared memory.
pub static SHM_COLL: Var<Flag> = Var {
    name: "OUTBOARD_SHM_COLL",
    doc: "With OUTBOARD_ENGINE=node: blocking offloaded collectives whose members all share a node meet in shared memory (/dev/shm) instead of going through the node engine; off sends them through the engine.",
    group: Group::Runtime,
    kind: Flag,
    default: Fallback::Value(true),
};

/// Messages between one node's processes through shared memory.
pub static SHM_P2P: Var<Flag> = Var {
    name: "OUTBOARD_SHM_P2P",
    doc: "With OUTBOARD_ENGINE=node: tagged messages between processes of one node go through shared memory (/dev/shm), matched by the receiving library, instead of through the node engine; off sends them through the engine. Tags with the top bit set always go through the engine.",
    group: Group::Runtime,
    kind: Flag,
    default: Fallback::Value(true),
};

/// How application bypass reaches the process.
pub static BYPASS_DELIVERY: OptVar<Choice> = OptVar {
    name: "OUTBOARD_BYPASS_DELIVERY",
    doc: "How the engine interrupts a process for application bypass: a realtime signal to the thread that chose bypass (signal), or a progress thread of the library that sleeps until woken (thread).",
    group: Group::Runtime,
    kind: Choice { names: &[("signal", &[]), ("thread", &[])] },
    decided: "signal, or thread where host-assisted progress runs the engine on the application's thread (a signal handler must not)",
};

/// The engine counters at the end of a world.
pub static STATS: Var<Choice> = Var {
    name: "OUTBOARD_STATS",
    doc: "stderr prints each rank's engine counters when its world ends, and the bytes its engine and its host library copied.",
    group: Group::Runtime,
    kind: Choice {
        names: &[
            ("off", &["0", "no", "false"]),
            ("stderr", &["1", "on", "yes", "true"]),
        ],
    },
    default: Fallback::Value("off"),
};

// ---- Joining a job ----

/// This process's rank under `outboard run`.
pub static RANK: OptVar<Count> = OptVar {
    name: "OUTBOARD_RANK",
    doc: "This process's rank under outboard run.",
    group: Group::Launch,
    kind: Count {
        min: 0,
        max: u32::MAX as u64 - 1,
    },
    decided: "the launcher's own variable (mpirun, Hydra, srun), else a job of one",
};

/// The number of ranks under `outboard run`.
pub static SIZE: OptVar<Count> = OptVar {
    name: "OUTBOARD_SIZE",
    doc: "The job's number of ranks under outboard run.",
    group: Group::Launch,
    kind: Count {
        min: 1,
        max: u32::MAX as u64,
    },
    decided: "the launcher's own variable, else 1",
};

/// Ranks on this machine.
pub static LOCAL_SIZE: OptVar<Count> = OptVar {
    name: "OUTBOARD_LOCAL_SIZE",
    doc: "How many of the job's ranks share this machine (for the progress policy's default).",
    group: Group::Launch,
    kind: Count {
        min: 1,
        max: u32::MAX as u64,
    },
    decided: "the launcher's own variable, else every rank under outboard run, else 1",
};

/// How the ranks find each other outside `outboard run`.
pub static BOOTSTRAP: Var<Choice> = Var {
    name: "OUTBOARD_BOOTSTRAP",
    doc: "How the ranks exchange their addresses: auto (outboard run's own variables, else OUTBOARD_RENDEZVOUS if set, else the launcher's PMIx, else its PMI-1), or one forced: tcp (OUTBOARD_RENDEZVOUS), pmix (libpmix.so.2, under Open MPI's mpirun or srun --mpi=pmix), pmi (PMI-1 over PMI_FD, under MPICH's mpiexec or srun --mpi=pmi2).",
    group: Group::Launch,
    kind: Choice {
        names: &[("auto", &[]), ("tcp", &["rendezvous"]), ("pmix", &[]), ("pmi", &["pmi1", "pmi-1"])],
    },
    default: Fallback::Value("auto"),
};

/// Where the rendezvous is.
pub static RENDEZVOUS: OptVar<HostPort> = OptVar {
    name: "OUTBOARD_RENDEZVOUS",
    doc: "Where the ranks meet to exchange addresses: a host:port that rank 0 can bind and every rank can reach.",
    group: Group::Launch,
    kind: HostPort,
    decided: "none: the launcher's PMIx or PMI-1, else a job of one (outboard run sets its own)",
};

/// The job key.
pub static JOB_KEY: OptVar<Hex64> = OptVar {
    name: "OUTBOARD_JOB_KEY",
    doc: "The job's key, carried by every datagram, so that jobs sharing a network ignore each other.",
    group: Group::Launch,
    kind: Hex64,
    decided: "drawn at random by rank 0",
};

/// The job secret.
pub static JOB_SECRET: OptVar<Secret> = OptVar {
    name: "OUTBOARD_JOB_SECRET",
    doc: "The key of every datagram's MAC; when set, the same on every rank.",
    group: Group::Launch,
    kind: Secret,
    decided: "drawn by rank 0 and handed to the others through the bootstrap (the rendezvous, or the launcher's PMIx or PMI-1 store)",
};

// ---- PMPI library ----

const MPI_HOW: Choice = Choice {
    names: &[
        ("offload", &["offloaded", "1"]),
        ("host", &["host-based"]),
        ("off", &["pmpi", "0"]),
    ],
};

/// [`MPI_HOW`] and application bypass: for broadcasts and reduces, which
/// have it.
const MPI_HOW_OR_BYPASS: Choice = Choice {
    names: &[
        ("offload", &["offloaded", "1"]),
        ("host", &["host-based"]),
        ("off", &["pmpi", "0"]),
        ("bypass", &["application-bypass"]),
    ],
};

/// How the PMPI library runs collectives.
pub static MPI: Var<Choice> = Var {
    name: "OUTBOARD_MPI",
    doc: "How MPI collectives run: offloaded to the engines, host-based over Outboard, or passed through to the MPI.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Value("offload"),
};

/// `OUTBOARD_MPI` for barriers alone.
pub static MPI_BARRIER: Var<Choice> = Var {
    name: "OUTBOARD_MPI_BARRIER",
    doc: "OUTBOARD_MPI for MPI_Barrier and MPI_Ibarrier alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for broadcasts alone.
pub static MPI_BCAST: Var<Choice> = Var {
    name: "OUTBOARD_MPI_BCAST",
    doc: "OUTBOARD_MPI for MPI_Bcast and MPI_Ibcast alone, or bypass: MPI_Bcast by application bypass (inner ranks forward in an interrupt handler, so a late rank delays nobody below it) up to 16384 bytes, offloaded beyond and for MPI_Ibcast.",
    group: Group::Mpi,
    kind: MPI_HOW_OR_BYPASS,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for reductions alone.
pub static MPI_REDUCE: Var<Choice> = Var {
    name: "OUTBOARD_MPI_REDUCE",
    doc: "OUTBOARD_MPI for MPI_Reduce and MPI_Ireduce alone, or bypass: MPI_Reduce by application bypass (a non-root returns once its value is copied; interrupt handlers fold and send up) up to 16384 bytes of built-in operations, offloaded beyond, for module operators and for MPI_Ireduce.",
    group: Group::Mpi,
    kind: MPI_HOW_OR_BYPASS,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for allreductions alone.
pub static MPI_ALLREDUCE: Var<Choice> = Var {
    name: "OUTBOARD_MPI_ALLREDUCE",
    doc: "OUTBOARD_MPI for MPI_Allreduce and MPI_Iallreduce alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Allgather, MPI_Allgatherv and MPI_Iallgather alone.
pub static MPI_ALLGATHER: Var<Choice> = Var {
    name: "OUTBOARD_MPI_ALLGATHER",
    doc: "OUTBOARD_MPI for MPI_Allgather, MPI_Allgatherv and MPI_Iallgather alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Gather, MPI_Gatherv and MPI_Igather alone.
pub static MPI_GATHER: Var<Choice> = Var {
    name: "OUTBOARD_MPI_GATHER",
    doc: "OUTBOARD_MPI for MPI_Gather, MPI_Gatherv and MPI_Igather alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Scatter, MPI_Scatterv and MPI_Iscatter alone.
pub static MPI_SCATTER: Var<Choice> = Var {
    name: "OUTBOARD_MPI_SCATTER",
    doc: "OUTBOARD_MPI for MPI_Scatter, MPI_Scatterv and MPI_Iscatter alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Alltoall and MPI_Ialltoall alone.
pub static MPI_ALLTOALL: Var<Choice> = Var {
    name: "OUTBOARD_MPI_ALLTOALL",
    doc: "OUTBOARD_MPI for MPI_Alltoall and MPI_Ialltoall alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Reduce_scatter, MPI_Reduce_scatter_block and MPI_Ireduce_scatter_block alone.
pub static MPI_REDUCE_SCATTER: Var<Choice> = Var {
    name: "OUTBOARD_MPI_REDUCE_SCATTER",
    doc: "OUTBOARD_MPI for MPI_Reduce_scatter, MPI_Reduce_scatter_block and MPI_Ireduce_scatter_block alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// `OUTBOARD_MPI` for MPI_Scan, MPI_Exscan, MPI_Iscan and MPI_Iexscan alone.
pub static MPI_SCAN: Var<Choice> = Var {
    name: "OUTBOARD_MPI_SCAN",
    doc: "OUTBOARD_MPI for MPI_Scan, MPI_Exscan, MPI_Iscan and MPI_Iexscan alone.",
    group: Group::Mpi,
    kind: MPI_HOW,
    default: Fallback::Follows(&MPI),
};

/// The PMPI library's size threshold (a C `long long`).
const MPI_BYTES: Size = Size {
    max: i64::MAX as u64,
};

/// Collectives on more bytes pass through.
pub static MPI_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_MAX_BYTES",
    doc: "Collectives on more bytes than this pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(1 << 20),
};

/// `OUTBOARD_MPI_MAX_BYTES` for broadcasts alone.
pub static MPI_BCAST_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_BCAST_MAX_BYTES",
    doc: "OUTBOARD_MPI_MAX_BYTES for MPI_Bcast and MPI_Ibcast alone.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Follows(&MPI_MAX_BYTES),
};

/// `OUTBOARD_MPI_MAX_BYTES` for reductions alone.
pub static MPI_REDUCE_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_REDUCE_MAX_BYTES",
    doc: "OUTBOARD_MPI_MAX_BYTES for MPI_Reduce and MPI_Ireduce alone.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Follows(&MPI_MAX_BYTES),
};

/// `OUTBOARD_MPI_MAX_BYTES` for allreductions alone.
pub static MPI_ALLREDUCE_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES",
    doc: "OUTBOARD_MPI_MAX_BYTES for MPI_Allreduce and MPI_Iallreduce alone.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Follows(&MPI_MAX_BYTES),
};

/// The size threshold of `OUTBOARD_MPI_ALLGATHER`'s calls: the whole
/// assembled buffer (docs/mpi.md).
pub static MPI_ALLGATHER_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_ALLGATHER_MAX_BYTES",
    doc: "MPI_Allgather, MPI_Allgatherv and MPI_Iallgather on more bytes than this (all ranks' blocks together) pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(64 << 10),
};

/// The size threshold of `OUTBOARD_MPI_GATHER`'s calls: the whole
/// assembled buffer.
pub static MPI_GATHER_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_GATHER_MAX_BYTES",
    doc: "MPI_Gather, MPI_Gatherv and MPI_Igather on more bytes than this (all ranks' blocks together) pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(64 << 10),
};

/// The size threshold of `OUTBOARD_MPI_SCATTER`'s calls: the whole
/// assembled buffer.
pub static MPI_SCATTER_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_SCATTER_MAX_BYTES",
    doc: "MPI_Scatter, MPI_Scatterv and MPI_Iscatter on more bytes than this (all ranks' blocks together) pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(64 << 10),
};

/// The size threshold of `OUTBOARD_MPI_ALLTOALL`'s calls: all n x n
/// blocks.
pub static MPI_ALLTOALL_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_ALLTOALL_MAX_BYTES",
    doc: "MPI_Alltoall and MPI_Ialltoall on more bytes than this (the n x n blocks of all ranks together) pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(64 << 10),
};

/// The size threshold of `OUTBOARD_MPI_REDUCE_SCATTER`'s calls. Long reduce-scatters run one reduce per block: no extra bytes.
pub static MPI_REDUCE_SCATTER_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_REDUCE_SCATTER_MAX_BYTES",
    doc: "MPI_Reduce_scatter, MPI_Reduce_scatter_block and MPI_Ireduce_scatter_block on more bytes than this (all ranks' blocks together) pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Follows(&MPI_MAX_BYTES),
};

/// The size threshold of `OUTBOARD_MPI_SCAN`'s calls. A scan's messages
/// carry one rank's data, but in shared memory a scan is the allgather of
/// every rank's: 64 KiB scans of 4 ranks took 202 us there against Open
/// MPI's 31 (docs/performance.md).
pub static MPI_SCAN_MAX_BYTES: Var<Size> = Var {
    name: "OUTBOARD_MPI_SCAN_MAX_BYTES",
    doc: "MPI_Scan, MPI_Exscan, MPI_Iscan and MPI_Iexscan on more bytes than this pass through to the MPI.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(16 << 10),
};

/// Broadcasts between machines on more bytes pass through: above this,
/// Open MPI over TCP was faster on 4 emulated nodes of 3 ranks of a
/// 16-core machine (docs/performance.md).
pub static MPI_BCAST_MAX_BYTES_BETWEEN_NODES: Var<Size> = Var {
    name: "OUTBOARD_MPI_BCAST_MAX_BYTES_BETWEEN_NODES",
    doc: "On communicators whose ranks use more than one engine (machines), MPI_Bcast and MPI_Ibcast on more bytes than this pass through to the MPI; the smaller of this and OUTBOARD_MPI_BCAST_MAX_BYTES applies.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(128 << 10),
};

/// Reductions between machines on more bytes pass through (measured as
/// for broadcasts).
pub static MPI_REDUCE_MAX_BYTES_BETWEEN_NODES: Var<Size> = Var {
    name: "OUTBOARD_MPI_REDUCE_MAX_BYTES_BETWEEN_NODES",
    doc: "On communicators whose ranks use more than one engine (machines), MPI_Reduce and MPI_Ireduce on more bytes than this pass through to the MPI; the smaller of this and OUTBOARD_MPI_REDUCE_MAX_BYTES applies.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(16 << 10),
};

/// Allreductions between machines on more bytes pass through (measured
/// as for broadcasts).
pub static MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES: Var<Size> = Var {
    name: "OUTBOARD_MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES",
    doc: "On communicators whose ranks use more than one engine (machines), MPI_Allreduce and MPI_Iallreduce on more bytes than this pass through to the MPI; the smaller of this and OUTBOARD_MPI_ALLREDUCE_MAX_BYTES applies.",
    group: Group::Mpi,
    kind: MPI_BYTES,
    default: Fallback::Value(16 << 10),
};

/// The barrier algorithm of the PMPI library's communicators. Also the
/// C ABI's `outboard_group_set_option("barrier_algorithm", ...)` and the
/// `outboard_barrier_algorithm` MPI_Info key, which parse with this kind.
pub static MPI_BARRIER_ALGORITHM: Var<ChoiceWith> = Var {
    name: "OUTBOARD_MPI_BARRIER_ALGORITHM",
    doc: "The algorithm of barriers taken over: dissemination, pairwise exchange, or gather to rank 0 and broadcast back on a tree of the degree after the colon (binomial without one); per communicator, the MPI_Info key outboard_barrier_algorithm.",
    group: Group::Mpi,
    kind: BARRIER_ALGORITHM,
    default: Fallback::Value(crate::kinds::Chosen { name: "dissemination", param: None }),
};

/// The forms of a barrier algorithm.
pub const BARRIER_ALGORITHM: ChoiceWith = ChoiceWith {
    names: &[
        ("dissemination", Param::Nothing),
        ("pairwise-exchange", Param::Nothing),
        ("gather-broadcast", Param::Count { what: "DEGREE", min: 0, max: 65535, optional: true }),
    ],
};

/// How the PMPI library's offloaded barriers travel.
pub static MPI_BARRIER_PROTOCOL: Var<Choice> = Var {
    name: "OUTBOARD_MPI_BARRIER_PROTOCOL",
    doc: "How offloaded barriers travel between the engines: over their reliable connections, or by the NIC collective protocol (no acknowledgements; the barrier recovers its own losses); per communicator, the MPI_Info key outboard_barrier_protocol.",
    group: Group::Mpi,
    kind: BARRIER_PROTOCOL,
    default: Fallback::Value("point-to-point"),
};

/// The names of a barrier protocol.
pub const BARRIER_PROTOCOL: Choice = Choice { names: &[("point-to-point", &["p2p"]), ("nic-collective", &[])] };

/// Where the PMPI library's broadcasts run.
pub static MPI_BCAST_MODE: Var<ChoiceWith> = Var {
    name: "OUTBOARD_MPI_BCAST_MODE",
    doc: "Where broadcasts taken over run: as OUTBOARD_MPI_BCAST says (collective), offloaded, host-based, NIC-assisted in pieces of the bytes after the colon (one packet's without; 4294967295: whole), or by application bypass (MPI_Bcast up to 16384 bytes); per communicator, the MPI_Info key outboard_bcast_mode.",
    group: Group::Mpi,
    kind: BCAST_MODE,
    default: Fallback::Value(crate::kinds::Chosen { name: "collective", param: None }),
};

/// The forms of a broadcast mode.
pub const BCAST_MODE: ChoiceWith = ChoiceWith {
    names: &[
        ("collective", Param::Nothing),
        ("offloaded", Param::Nothing),
        ("host-based", Param::Nothing),
        ("nic-assisted", Param::Count { what: "CHUNK", min: 0, max: u32::MAX as u64, optional: true }),
        ("bypass", Param::Nothing),
    ],
};

/// Where a group's reduces run: in its mode (collective) or by
/// application bypass (the C ABI's and Python's `reduce_mode` option).
pub const REDUCE_MODE: Choice = Choice { names: &[("collective", &[]), ("bypass", &["application-bypass"])] };

/// The tree of the PMPI library's broadcasts.
pub static MPI_BCAST_TREE: Var<ChoiceWith> = Var {
    name: "OUTBOARD_MPI_BCAST_TREE",
    doc: "The tree of broadcasts taken over: binomial, k-ary of the degree after the colon, a chain, or the postal model's for the lambda after the colon; per communicator, the MPI_Info key outboard_bcast_tree.",
    group: Group::Mpi,
    kind: BCAST_TREE,
    default: Fallback::Value(crate::kinds::Chosen { name: "binomial", param: None }),
};

/// The forms of a broadcast tree.
pub const BCAST_TREE: ChoiceWith = ChoiceWith {
    names: &[
        ("binomial", Param::Nothing),
        ("kary", Param::Count { what: "DEGREE", min: 1, max: 65535, optional: false }),
        ("chain", Param::Nothing),
        ("postal", Param::Number { what: "LAMBDA", min: 1.0 }),
    ],
};

/// The degree of the PMPI library's reduction trees.
pub static MPI_REDUCE_DEGREE: Var<Count> = Var {
    name: "OUTBOARD_MPI_REDUCE_DEGREE",
    doc: "The degree of the tree reductions taken over (reduce and allreduce) run on; 0 for binomial; per communicator, the MPI_Info key outboard_reduce_degree.",
    group: Group::Mpi,
    kind: REDUCE_DEGREE,
    default: Fallback::Value(0),
};

/// A reduction tree's degree.
pub const REDUCE_DEGREE: Count = Count { min: 0, max: 65535 };

/// The reduce algorithm of the PMPI library's communicators. Also the C
/// ABI's `outboard_group_set_option("reduce_algorithm", ...)` and the
/// `outboard_reduce_algorithm` MPI_Info key.
pub static MPI_REDUCE_ALGORITHM: Var<Choice> = Var {
    name: "OUTBOARD_MPI_REDUCE_ALGORITHM",
    doc: "The algorithm of reductions to a root taken over: tree (one tree rooted at the root), or block-trees (the data cut into blocks, each reduced on a tree rooted at a rank of its own and sent on to the root: one tree for data of one packet or between two nodes, the bandwidth of reduce-scatter plus gather for more); the trees' degree is OUTBOARD_MPI_REDUCE_DEGREE's; per communicator, the MPI_Info key outboard_reduce_algorithm.",
    group: Group::Mpi,
    kind: REDUCE_ALGORITHM,
    default: Fallback::Value("tree"),
};

/// The names of a reduce algorithm.
pub const REDUCE_ALGORITHM: Choice = Choice { names: &[("tree", &[]), ("block-trees", &[])] };

/// The allreduce algorithm of the PMPI library's communicators. Also the
/// C ABI's `outboard_group_set_option("allreduce_algorithm", ...)` and the
/// `outboard_allreduce_algorithm` MPI_Info key.
pub static MPI_ALLREDUCE_ALGORITHM: Var<Choice> = Var {
    name: "OUTBOARD_MPI_ALLREDUCE_ALGORITHM",
    doc: "The algorithm of allreductions taken over: auto (recursive doubling up to 8 KiB, the crossover measured between engines over UDP, in both modes so that they give the same bits; block trees above), block-trees (the data cut into blocks, each reduced and broadcast back on a tree rooted at a rank of its own: one tree for data of one packet, the bandwidth of reduce-scatter plus allgather for more), tree (reduce to rank 0 and broadcast back on one tree), or recursive-doubling; the trees' degree is OUTBOARD_MPI_REDUCE_DEGREE's; per communicator, the MPI_Info key outboard_allreduce_algorithm.",
    group: Group::Mpi,
    kind: ALLREDUCE_ALGORITHM,
    default: Fallback::Value("auto"),
};

/// The names of an allreduce algorithm.
pub const ALLREDUCE_ALGORITHM: Choice =
    Choice { names: &[("auto", &[]), ("block-trees", &[]), ("tree", &[]), ("recursive-doubling", &["rd"])] };

/// What the PMPI library took over, and why not.
pub static MPI_VERBOSE: Var<Flag> = Var {
    name: "OUTBOARD_MPI_VERBOSE",
    doc: "Print, per communicator and collective, what the PMPI library took over and why it did not.",
    group: Group::Mpi,
    kind: Flag,
    default: Fallback::Value(false),
};

// ---- Python ----

/// Where the Python package finds the C library.
pub static LIB: OptVar<Text> = OptVar {
    name: "OUTBOARD_LIB",
    doc: "The C library the Python package loads: the file, or a directory holding liboutboard_capi.so.",
    group: Group::Python,
    kind: Text { what: "path" },
    decided: "the newest cargo build of the repository, then the system's library path",
};

// ---- Tests and tools ----

/// Where the tests record what they skipped.
pub static SKIP_LOG: OptVar<Text> = OptVar {
    name: "OUTBOARD_SKIP_LOG",
    doc: "A file the tests append a line to for each test that cannot run on this machine (scripts/test.sh sets it).",
    group: Group::Tools,
    kind: Text { what: "path" },
    decided: "skips are only printed",
};

/// Rewrite checked-in generated files instead of comparing.
pub static BLESS: Var<Flag> = Var {
    name: "OUTBOARD_BLESS",
    doc: "Tests that compare a checked-in generated file (the C header) rewrite it instead.",
    group: Group::Tools,
    kind: Flag,
    default: Fallback::Value(false),
};

/// Where `outboard chaos` and the fault tests find the example programs.
pub static EXAMPLES_DIR: OptVar<Text> = OptVar {
    name: "OUTBOARD_EXAMPLES_DIR",
    doc: "The directory of the runtime's example programs that outboard chaos and the fault tests run.",
    group: Group::Tools,
    kind: Text { what: "directory" },
    decided: "examples/ beside the outboard binary",
};

/// How many broadcasts the host's lossy broadcast test runs.
pub static BCAST_COUNT: Var<Count> = Var {
    name: "OUTBOARD_BCAST_COUNT",
    doc: "How many broadcasts the host library's lossy broadcast test runs.",
    group: Group::Tools,
    kind: Count {
        min: 1,
        max: u32::MAX as u64,
    },
    default: Fallback::Value(1000),
};

/// Progress lines from the host's broadcast tests.
pub static BCAST_TRACE: Var<Flag> = Var {
    name: "OUTBOARD_BCAST_TRACE",
    doc: "The host library's broadcast tests print their progress, and where they stall.",
    group: Group::Tools,
    kind: Flag,
    default: Fallback::Value(false),
};

/// The secret `outboard bench` hands its child processes.
pub static BENCH_SECRET: OptVar<Secret> = OptVar {
    name: "OUTBOARD_BENCH_SECRET",
    doc: "The job secret outboard bench hands the processes it starts.",
    group: Group::Tools,
    kind: Secret,
    decided: "set by outboard bench for its own processes",
};

/// The job key `outboard bench` hands its child processes.
pub static BENCH_JOB_KEY: OptVar<Hex64> = OptVar {
    name: "OUTBOARD_BENCH_JOB_KEY",
    doc: "The job key outboard bench hands the processes it starts.",
    group: Group::Tools,
    kind: Hex64,
    decided: "set by outboard bench for its own processes",
};

/// Every variable, in the listing's order.
pub static ALL: &[&dyn Setting] = &[
    &PROGRESS,
    &ENGINE,
    &NODE_NAME,
    &NODE_PROGRAM,
    &ENGINE_CPU,
    &PEER_TIMEOUT,
    &BOOTSTRAP_TIMEOUT,
    &ADDR,
    &IFACE,
    &EAGER_MAX,
    &RNDV,
    &UDP_GSO,
    &SHM_COLL,
    &SHM_P2P,
    &BYPASS_DELIVERY,
    &STATS,
    &RANK,
    &SIZE,
    &LOCAL_SIZE,
    &BOOTSTRAP,
    &RENDEZVOUS,
    &JOB_KEY,
    &JOB_SECRET,
    &MPI,
    &MPI_BARRIER,
    &MPI_BCAST,
    &MPI_REDUCE,
    &MPI_ALLREDUCE,
    &MPI_ALLGATHER,
    &MPI_GATHER,
    &MPI_SCATTER,
    &MPI_ALLTOALL,
    &MPI_REDUCE_SCATTER,
    &MPI_SCAN,
    &MPI_MAX_BYTES,
    &MPI_BCAST_MAX_BYTES,
    &MPI_REDUCE_MAX_BYTES,
    &MPI_ALLREDUCE_MAX_BYTES,
    &MPI_ALLGATHER_MAX_BYTES,
    &MPI_GATHER_MAX_BYTES,
    &MPI_SCATTER_MAX_BYTES,
    &MPI_ALLTOALL_MAX_BYTES,
    &MPI_REDUCE_SCATTER_MAX_BYTES,
    &MPI_SCAN_MAX_BYTES,
    &MPI_BCAST_MAX_BYTES_BETWEEN_NODES,
    &MPI_REDUCE_MAX_BYTES_BETWEEN_NODES,
    &MPI_ALLREDUCE_MAX_BYTES_BETWEEN_NODES,
    &MPI_BARRIER_ALGORITHM,
    &MPI_BARRIER_PROTOCOL,
    &MPI_BCAST_MODE,
    &MPI_BCAST_TREE,
    &MPI_REDUCE_DEGREE,
    &MPI_REDUCE_ALGORITHM,
    &MPI_ALLREDUCE_ALGORITHM,
    &MPI_VERBOSE,
    &LIB,
    &SKIP_LOG,
    &BLESS,
    &EXAMPLES_DIR,
    &BCAST_COUNT,
    &BCAST_TRACE,
    &BENCH_SECRET,
    &BENCH_JOB_KEY,
];

/// The registered variable called `name`.
pub fn find(name: &str) -> Option<&'static dyn Setting> {
    ALL.iter().copied().find(|s| s.name() == name)
}
