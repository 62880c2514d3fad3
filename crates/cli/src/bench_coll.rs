//! `outboard bench barrier|allreduce|reduce|bcast|overlap`: collectives
//! across real processes, offloaded beside host-based (and, for broadcast,
//! NIC-assisted) in one run, and Open MPI's over its TCP transport where
//! `mpicc` and `mpirun` are present.
//!
//! The command launches a job of its own (`outboard run -n N` of this very
//! binary in worker mode) for every rank count asked for. Each rank times
//! every iteration of a collective on its own, after a warm-up; the figure
//! printed is the median of a rank's samples, averaged over the ranks.
//! The modes alternate round by round, so a burst of noise on this shared
//! machine hits them alike. Broadcast runs on the binomial tree from rank 0
//! in all three modes (NIC-assisted with its default packet-sized pieces),
//! every rank checks every result against the root's bytes, and an untimed
//! barrier follows every broadcast (as in OSU's `osu_bcast`): a root returns
//! before its receivers have the data, so without it back-to-back
//! broadcasts would time a pipeline rather than one broadcast.
//!
//! `overlap` follows OSU's `osu_ibarrier`/`osu_iallreduce`: the pure
//! latency of start + wait (mean), then start, compute (a busy loop) for
//! that long, wait; overlap % = max(0, 1 - (overall - compute) / pure) *
//! 100, every term averaged over the iterations and the ranks.
//!
//! Open MPI's side is a small C program (`mpi_coll.c`, built into this
//! binary) compiled with `mpicc` into a temporary directory and run with
//! `mpirun --oversubscribe --mca btl tcp,self -n N`; it measures the same
//! way and prints lines this module parses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use outboard_engine::{Datatype, ReduceOp, Reduction};
use outboard_host::{
    AllreduceAlgorithm, BarrierAlgorithm, BarrierProtocol, BcastMode, CollRequest, Group, HostError, Layout, Mode, Port, RecvMatch, ReduceAlgorithm,
    TreeShape,
};
use outboard_runtime::{machine_cores, Options, Progress, RtPort};

use crate::bench::{run_a, run_b, EngineSide, Step, WINDOW_MAX};
use crate::stats::median;

/// Which collective a benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Barrier, every algorithm.
    Barrier,
    /// Allreduce, every algorithm and size.
    Allreduce,
    /// Reduce to rank 0, every algorithm and size.
    Reduce,
    /// Split-phase overlap (OSU style).
    Overlap,
    /// Broadcast from rank 0, every size.
    Bcast,
    /// Allgather, every size (each rank's block).
    Allgather,
    /// Alltoall, every size (each pair's block).
    Alltoall,
    /// Reduce-scatter of i64 sums, every size (each rank's block).
    ReduceScatter,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Allreduce => "allreduce",
            Kind::Reduce => "reduce",
            Kind::Overlap => "overlap",
            Kind::Bcast => "bcast",
            Kind::Allgather => "allgather",
            Kind::Alltoall => "alltoall",
            Kind::ReduceScatter => "reduce-scatter",
        }
    }

    /// The data-movement collectives' op, which sizes are blocks of.
    fn movement(self) -> Option<Op> {
        match self {
            Kind::Allgather => Some(Op::Allgather),
            Kind::Alltoall => Some(Op::Alltoall),
            Kind::ReduceScatter => Some(Op::ReduceScatter),
            _ => None,
        }
    }

    /// The modes measured, in column order.
    fn modes(self, a: &CollArgs) -> Vec<BcastMode> {
        match self {
            Kind::Bcast => a.modes.iter().map(|c| c.mode()).collect(),
            _ => MODES.iter().map(|&m| m.into()).collect(),
        }
    }

    /// Figures per case (outside `overlap`): one per mode, and for a
    /// barrier one more, the offloaded barrier on the engines' NIC
    /// collective protocol (`BarrierProtocol::NicCollective`), measured in
    /// the same rounds so that the machine's load hits all columns alike.
    fn columns(self, a: &CollArgs) -> usize {
        self.modes(a).len() + usize::from(self == Kind::Barrier)
    }

    /// Sizes used when `--sizes` is not given.
    fn default_sizes(self) -> Vec<u32> {
        match self {
            Kind::Bcast => vec![8, 1024, 16 << 10, 256 << 10],
            Kind::Allgather | Kind::Alltoall | Kind::ReduceScatter => vec![8, 1024, 64 << 10, 1 << 20],
            _ => vec![8, 64, 1024, 4096],
        }
    }
}

/// Operations `overlap` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OverlapOp {
    /// Split-phase barrier (pairwise exchange).
    Barrier,
    /// Split-phase allreduce (recursive doubling), every size.
    Allreduce,
    /// Split-phase allgather (by length), every size.
    Allgather,
}

impl OverlapOp {
    /// The operation measured.
    fn op(self) -> Op {
        match self {
            OverlapOp::Barrier => Op::Barrier(BarrierAlgorithm::PairwiseExchange),
            OverlapOp::Allreduce => Op::Allreduce(AllreduceAlgorithm::RecursiveDoubling),
            OverlapOp::Allgather => Op::Allgather,
        }
    }

    /// Its name on the command line.
    fn name(self) -> &'static str {
        match self {
            OverlapOp::Barrier => "barrier",
            OverlapOp::Allreduce => "allreduce",
            OverlapOp::Allgather => "allgather",
        }
    }
}

/// Broadcast modes `bench bcast` can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BcastCol {
    /// Offloaded: the engines forward each piece (NIC-based forwarding).
    Offloaded,
    /// NIC-assisted, pipelined in packet-sized pieces.
    Nic,
    /// NIC-assisted without pipelining.
    NicWhole,
    /// Host-based over point-to-point.
    Host,
}

impl BcastCol {
    fn mode(self) -> BcastMode {
        match self {
            BcastCol::Offloaded => BcastMode::Offloaded,
            BcastCol::Nic => BcastMode::nic_assisted(),
            BcastCol::NicWhole => BcastMode::nic_assisted_whole(),
            BcastCol::Host => BcastMode::HostBased,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BcastCol::Offloaded => "offloaded",
            BcastCol::Nic => "nic",
            BcastCol::NicWhole => "nic-whole",
            BcastCol::Host => "host",
        }
    }

    fn header(self) -> &'static str {
        match self {
            BcastCol::Offloaded => "offloaded",
            BcastCol::Nic => "nic-asst",
            BcastCol::NicWhole => "nic-whole",
            BcastCol::Host => "host-based",
        }
    }
}

/// Options every collective benchmark takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Ranks (processes on this machine); one job per value.
    #[arg(short = 'n', long = "np", value_delimiter = ',', default_value = "2,4",
          value_parser = clap::value_parser!(u32).range(2..=64))]
    ranks: Vec<u32>,
    /// Untimed iterations before each round.
    #[arg(long, default_value_t = 200)]
    warmup: u32,
    /// Timed iterations per round.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Rounds (offloaded and host-based alternate round by round).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Progress policy: dedicated, host-assisted or spin-then-block
    /// (default: OUTBOARD_PROGRESS, else chosen from this machine's cores
    /// per rank).
    #[arg(long)]
    progress: Option<String>,
    /// Leave Open MPI out.
    #[arg(long)]
    no_mpi: bool,
    /// Seconds one job may take before it is killed.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Run Outboard's side on node engines of this many ranks each, as
    /// `outboard run --ranks-per-node` (Open MPI's side is unchanged).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    ranks_per_node: Option<u32>,
    /// Each node (or rank) in a network namespace of its own, as
    /// `outboard run --netns` (needs root).
    #[arg(long)]
    netns: bool,
    /// Internal: this process is one rank of the benchmark's job.
    #[arg(long, hide = true)]
    worker: bool,
}

/// A size in bytes as people write it: `65536`, `64K`, `1M`.
pub(crate) fn parse_bytes(text: &str) -> Result<u32, String> {
    outboard_settings::kinds::parse_size(text)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{text:?} is not a size: use a number of bytes with an optional K or M suffix (e.g. 8, 64K, 1M)"))
}

/// `outboard bench barrier`.
#[derive(clap::Args, Debug, Clone)]
pub struct BarrierArgs {
    #[command(flatten)]
    common: CommonArgs,
}

/// `outboard bench allreduce` and `reduce`.
#[derive(clap::Args, Debug, Clone)]
pub struct SizedArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Contributions in bytes, comma-separated, with optional K or M
    /// suffixes (i64 sums; multiples of 8, at most 16M; default
    /// 8,64,1K,4K).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    sizes: Option<Vec<u32>>,
}

/// `outboard bench bcast`.
#[derive(clap::Args, Debug, Clone)]
pub struct BcastArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Messages in bytes, comma-separated, with optional K or M suffixes
    /// (1 B to 16M; default 8,1K,16K,256K).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    sizes: Option<Vec<u32>>,
    /// Broadcast modes, in column order (`nic-whole`: NIC-assisted
    /// without pipelining).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "offloaded,nic,host")]
    modes: Vec<BcastCol>,
}

/// `outboard bench overlap`.
#[derive(clap::Args, Debug, Clone)]
pub struct OverlapArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Allreduce contributions in bytes, comma-separated, with optional K
    /// or M suffixes (multiples of 8, at most 16M; default 8,64,1K,4K).
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes)]
    sizes: Option<Vec<u32>>,
    /// Operations to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "barrier,allreduce")]
    ops: Vec<OverlapOp>,
}

/// What every collective benchmark runs with: its subcommand's options,
/// with the ones it does not take at their defaults.
#[derive(Debug, Clone)]
pub struct CollArgs {
    ranks: Vec<u32>,
    sizes: Option<Vec<u32>>,
    warmup: u32,
    iters: u32,
    rounds: u32,
    progress: Option<String>,
    ops: Vec<OverlapOp>,
    modes: Vec<BcastCol>,
    no_mpi: bool,
    timeout: f64,
    ranks_per_node: Option<u32>,
    netns: bool,
    worker: bool,
}

impl CollArgs {
    fn from_common(c: CommonArgs, sizes: Option<Vec<u32>>) -> CollArgs {
        CollArgs {
            ranks: c.ranks,
            sizes,
            warmup: c.warmup,
            iters: c.iters,
            rounds: c.rounds,
            progress: c.progress,
            ops: vec![OverlapOp::Barrier, OverlapOp::Allreduce],
            modes: vec![BcastCol::Offloaded, BcastCol::Nic, BcastCol::Host],
            no_mpi: c.no_mpi,
            timeout: c.timeout,
            ranks_per_node: c.ranks_per_node,
            netns: c.netns,
            worker: c.worker,
        }
    }
}

impl From<BarrierArgs> for CollArgs {
    fn from(a: BarrierArgs) -> CollArgs {
        CollArgs::from_common(a.common, None)
    }
}

impl From<SizedArgs> for CollArgs {
    fn from(a: SizedArgs) -> CollArgs {
        CollArgs::from_common(a.common, a.sizes)
    }
}

impl From<BcastArgs> for CollArgs {
    fn from(a: BcastArgs) -> CollArgs {
        CollArgs { modes: a.modes, ..CollArgs::from_common(a.common, a.sizes) }
    }
}

impl From<OverlapArgs> for CollArgs {
    fn from(a: OverlapArgs) -> CollArgs {
        CollArgs { ops: a.ops, ..CollArgs::from_common(a.common, a.sizes) }
    }
}

impl CollArgs {
    /// The sizes asked for (filled in with the kind's defaults by [`run`]).
    fn sizes(&self) -> &[u32] {
        self.sizes.as_deref().unwrap_or(&[])
    }
}

const MODES: [Mode; 2] = [Mode::Offloaded, Mode::HostBased];
const TAG_GATHER: u64 = 0x0b_e7c4;

/// The barrier algorithms `bench barrier` measures, in row order, with
/// the labels their rows and figures go by.
const BARRIERS: [(&str, BarrierAlgorithm); 3] = [
    ("pairwise-exchange", BarrierAlgorithm::PairwiseExchange),
    ("dissemination", BarrierAlgorithm::Dissemination),
    ("gather-bcast(2)", BarrierAlgorithm::GatherBroadcast { degree: 2 }),
];

/// The allreduce algorithms `bench allreduce` measures, likewise.
const ALLREDUCES: [(&str, AllreduceAlgorithm); 3] = [
    ("tree(binomial)", AllreduceAlgorithm::Tree(TreeShape::Binomial)),
    ("recursive-doubling", AllreduceAlgorithm::RecursiveDoubling),
    ("block-trees", AllreduceAlgorithm::BlockTrees(TreeShape::Binomial)),
];

/// The reduce algorithms `bench reduce` measures, likewise.
const REDUCES: [(&str, ReduceAlgorithm); 2] = [
    ("binomial", ReduceAlgorithm::Tree(TreeShape::Binomial)),
    ("block-trees", ReduceAlgorithm::BlockTrees(TreeShape::Binomial)),
];

/// The label of `x` in a table of labelled algorithms.
fn label<T: PartialEq>(table: &[(&'static str, T)], x: &T) -> &'static str {
    table.iter().find(|(_, y)| y == x).map_or("unlisted", |(l, _)| *l)
}

const SUM_I64: Reduction = Reduction { op: ReduceOp::Sum, dtype: Datatype::I64 };

/// A collective a benchmark measures, with its algorithm: what a case
/// calls, and the names its rows, `@` lines and Open MPI's program use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A barrier.
    Barrier(BarrierAlgorithm),
    /// An allreduce of i64 sums.
    Allreduce(AllreduceAlgorithm),
    /// A reduce of i64 sums to rank 0.
    Reduce(ReduceAlgorithm),
    /// A broadcast from rank 0 on the binomial tree.
    Bcast,
    /// An allgather of each rank's block (by length).
    Allgather,
    /// An alltoall of each pair's block (by length).
    Alltoall,
    /// A reduce-scatter of i64 sums, each rank's block (by length).
    ReduceScatter,
}

/// What the data-movement collectives run on: the allreduce chosen by
/// length, and the reduce-scatter's trees binomial.
const BY_LENGTH: AllreduceAlgorithm = AllreduceAlgorithm::Auto(TreeShape::Binomial);

impl Op {
    /// The operation's name in rows and `@` lines.
    fn name(self) -> &'static str {
        match self {
            Op::Barrier(_) => "barrier",
            Op::Allreduce(_) => "allreduce",
            Op::Reduce(_) => "reduce",
            Op::Bcast => "bcast",
            Op::Allgather => "allgather",
            Op::Alltoall => "alltoall",
            Op::ReduceScatter => "reduce-scatter",
        }
    }

    /// The algorithm's label.
    fn alg(self) -> &'static str {
        match self {
            Op::Barrier(b) => label(&BARRIERS, &b),
            Op::Allreduce(x) => label(&ALLREDUCES, &x),
            Op::Reduce(x) => label(&REDUCES, &x),
            Op::Bcast => "binomial",
            Op::Allgather | Op::Alltoall | Op::ReduceScatter => "by-length",
        }
    }

    /// The name `mpi_coll.c` takes for it: the split-phase call for
    /// `overlap`.
    fn mpi_name(self, split_phase: bool) -> &'static str {
        match (self, split_phase) {
            (Op::Barrier(_), false) => "barrier",
            (Op::Barrier(_), true) => "ibarrier",
            (Op::Allreduce(_), false) => "allreduce",
            (Op::Allreduce(_), true) => "iallreduce",
            (Op::Reduce(_), _) => "reduce",
            (Op::Bcast, _) => "bcast",
            (Op::Allgather, false) => "allgather",
            (Op::Allgather, true) => "iallgather",
            (Op::Alltoall, _) => "alltoall",
            (Op::ReduceScatter, _) => "reduce_scatter",
        }
    }

    /// What `rank` of `n` passes for a case of `size` bytes: a broadcast
    /// root's message (zeros of the same length elsewhere), or i64
    /// elements: one block, or (alltoall, reduce-scatter) one per rank.
    fn data(self, rank: u32, n: u32, size: u32) -> Vec<u8> {
        let blocks = match self {
            Op::Alltoall | Op::ReduceScatter => n,
            _ => 1,
        };
        match self {
            Op::Bcast => (0..size).map(|i| if rank == 0 { (i.wrapping_mul(2_654_435_761) >> 13) as u8 } else { 0 }).collect(),
            _ => (0..size / 8 * blocks).flat_map(|i| (i64::from(rank) * 1000 + i64::from(i)).to_le_bytes()).collect(),
        }
    }

    /// Runs one blocking collective; its result (empty for a barrier).
    /// A broadcast runs in `bmode`, the others in the [`Mode`] it names
    /// (the columns of their tables are offloaded and host-based).
    fn run(self, port: &mut Port<RtPort>, g: &mut Group, bmode: BcastMode, data: &[u8]) -> Result<Vec<u8>, HostError> {
        let mode = match bmode {
            BcastMode::Offloaded => Mode::Offloaded,
            _ => Mode::HostBased,
        };
        match self {
            Op::Bcast => port.bcast(g, bmode, TreeShape::Binomial, 0, data),
            Op::Barrier(alg) => port.barrier(g, mode, alg).map(|()| Vec::new()),
            Op::Allreduce(alg) => port.allreduce(g, mode, alg, SUM_I64, data),
            Op::Reduce(alg) => port.reduce(g, mode, alg, 0, SUM_I64, data),
            Op::Allgather => port.allgather(g, mode, BY_LENGTH, &Layout::even(g.size(), data.len()), data),
            Op::Alltoall => port.alltoall(g, mode, BY_LENGTH, data.len() / g.size() as usize, data),
            Op::ReduceScatter => port.reduce_scatter(g, mode, TreeShape::Binomial, SUM_I64, &Layout::even(g.size(), data.len() / g.size() as usize), data),
        }
    }

    /// Starts one split-phase collective in `mode`.
    fn start(self, port: &mut Port<RtPort>, g: &mut Group, mode: Mode, data: &[u8]) -> Result<CollRequest, HostError> {
        match self {
            Op::Bcast => port.start_bcast(g, mode, TreeShape::Binomial, 0, data),
            Op::Barrier(alg) => port.start_barrier(g, mode, alg),
            Op::Allreduce(alg) => port.start_allreduce(g, mode, alg, SUM_I64, data),
            Op::Reduce(alg) => port.start_reduce(g, mode, alg, 0, SUM_I64, data),
            Op::Allgather => port.start_allgather(g, mode, BY_LENGTH, &Layout::even(g.size(), data.len()), data),
            Op::Alltoall => port.start_alltoall(g, mode, BY_LENGTH, data.len() / g.size() as usize, data),
            Op::ReduceScatter => {
                port.start_reduce_scatter(g, mode, TreeShape::Binomial, SUM_I64, &Layout::even(g.size(), data.len() / g.size() as usize), data)
            }
        }
    }
}

/// One measured configuration: an operation and a size.
#[derive(Debug, Clone)]
struct Case {
    op: Op,
    size: u32,
}

impl Case {
    /// The key of its figures: operation, algorithm, size.
    fn key(&self) -> (String, String, u32) {
        (self.op.name().to_string(), self.op.alg().to_string(), self.size)
    }

    /// The key of Open MPI's figures for it.
    fn mpi_key(&self, split_phase: bool) -> (String, String, u32) {
        (self.op.mpi_name(split_phase).to_string(), "mpi".to_string(), self.size)
    }
}

fn cases(kind: Kind, a: &CollArgs) -> Vec<Case> {
    let mut v = Vec::new();
    match kind {
        Kind::Barrier => {
            for (_, alg) in BARRIERS {
                v.push(Case { op: Op::Barrier(alg), size: 0 });
            }
        }
        Kind::Allreduce => {
            for &size in a.sizes() {
                for (_, alg) in ALLREDUCES {
                    v.push(Case { op: Op::Allreduce(alg), size });
                }
            }
        }
        Kind::Reduce => {
            for &size in a.sizes() {
                for (_, alg) in REDUCES {
                    v.push(Case { op: Op::Reduce(alg), size });
                }
            }
        }
        Kind::Bcast => {
            for &size in a.sizes() {
                v.push(Case { op: Op::Bcast, size });
            }
        }
        Kind::Allgather | Kind::Alltoall | Kind::ReduceScatter => {
            let op = kind.movement().expect("a data-movement kind");
            for &size in a.sizes() {
                v.push(Case { op, size });
            }
        }
        Kind::Overlap => {
            for o in &a.ops {
                match o.op() {
                    op @ Op::Barrier(_) => v.push(Case { op, size: 0 }),
                    op => {
                        for &size in a.sizes() {
                            v.push(Case { op, size });
                        }
                    }
                }
            }
        }
    }
    v
}

// ------------------------------------------------------------- worker --

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One rank of the job: measures every case, gathers to rank 0, which
/// prints `@` lines for the parent.
fn worker(kind: Kind, a: &CollArgs) -> anyhow::Result<()> {
    let mut opts = Options::from_env()?;
    if let Some(p) = &a.progress {
        opts.progress = Some(Progress::parse(p)?);
    }
    let mut world = outboard_runtime::init_with(opts)?;
    // A failure names the job's first dead rank, not only the peer this
    // rank's operation needed.
    worker_cases(kind, a, &mut world).map_err(|e| anyhow::anyhow!(world.failure_report(&*e)))?;
    world.finalize()?;
    Ok(())
}

/// A worker's cases, timed, and the figures gathered at rank 0.
fn worker_cases(kind: Kind, a: &CollArgs, world: &mut outboard_runtime::World) -> anyhow::Result<()> {
    let (rank, n) = (world.rank(), world.size());
    if rank == 0 {
        let (p, why) = world.progress();
        println!("@progress {p} ({why})");
    }
    let mut g = world.group()?;
    let mut mine: Vec<f64> = Vec::new();
    for case in cases(kind, a) {
        let data = case.op.data(rank, n, case.size);
        // What a broadcast delivers: the root's data.
        let root_data = case.op.data(0, n, case.size);
        // Runs one blocking collective of this case in `mode`.
        let once = |port: &mut Port<RtPort>, g: &mut Group, bmode: BcastMode| -> anyhow::Result<()> {
            let got = case.op.run(port, g, bmode, &data)?;
            if case.op == Op::Bcast && got != root_data {
                bail!("rank {rank}: {bmode:?} broadcast of {} bytes delivered other bytes", case.size);
            }
            Ok(())
        };
        // A broadcast's root (and Open MPI's, after an eager send) returns
        // before its receivers have the data, so back-to-back broadcasts
        // would time a pipeline, not a broadcast: as OSU's osu_bcast does,
        // an untimed barrier follows every broadcast.
        let sync = |port: &mut Port<RtPort>, g: &mut Group| -> anyhow::Result<()> {
            if kind == Kind::Bcast {
                port.barrier(g, Mode::Offloaded, BarrierAlgorithm::Dissemination)?;
            }
            Ok(())
        };
        let start = |port: &mut Port<RtPort>, g: &mut Group, mode: Mode| case.op.start(port, g, mode, &data);
        if kind != Kind::Overlap {
            let modes = kind.modes(a);
            // Column m: mode m, or past the modes the protocol barrier.
            let column = |port: &mut Port<RtPort>, g: &mut Group, m: usize| -> anyhow::Result<()> {
                if let Some(&mode) = modes.get(m) {
                    return once(port, g, mode);
                }
                let Op::Barrier(alg) = case.op else { unreachable!("only barriers have a protocol column") };
                g.set_barrier_protocol(BarrierProtocol::NicCollective);
                let r = port.barrier(g, Mode::Offloaded, alg);
                g.set_barrier_protocol(BarrierProtocol::PointToPoint);
                Ok(r?)
            };
            let mut samples: Vec<Vec<f64>> = vec![Vec::new(); kind.columns(a)];
            // Bytes this rank's engine, and its host library, copied over
            // each column's timed iterations.
            let mut copied = vec![(0u64, 0u64); kind.columns(a)];
            for _ in 0..a.rounds {
                for (m, s) in samples.iter_mut().enumerate() {
                    world.barrier()?;
                    for _ in 0..a.warmup {
                        column(world.port(), &mut g, m)?;
                        sync(world.port(), &mut g)?;
                    }
                    let before = copies(world.port());
                    for _ in 0..a.iters {
                        let t = Instant::now();
                        column(world.port(), &mut g, m)?;
                        s.push(t.elapsed().as_secs_f64() * 1e6);
                        sync(world.port(), &mut g)?;
                    }
                    let after = copies(world.port());
                    copied[m].0 += after.0.saturating_sub(before.0);
                    copied[m].1 += after.1.saturating_sub(before.1);
                }
            }
            for s in &mut samples {
                mine.push(median(s));
            }
            // Copies per byte of data per collective, after the latencies:
            // the engines', then the host library's.
            let per = f64::from(a.iters * a.rounds) * f64::from(case.size.max(1));
            mine.extend(copied.iter().map(|&(e, _)| e as f64 / per));
            mine.extend(copied.iter().map(|&(_, h)| h as f64 / per));
        } else {
            let total = a.iters * a.rounds;
            for &mode in &MODES {
                world.barrier()?;
                for _ in 0..a.warmup {
                    once(world.port(), &mut g, mode.into())?;
                }
                let mut pure = 0.0;
                for _ in 0..total {
                    let t = Instant::now();
                    let r = start(world.port(), &mut g, mode)?;
                    world.port().coll_wait(r)?;
                    pure += t.elapsed().as_secs_f64();
                }
                pure /= f64::from(total);
                let compute_for = Duration::from_secs_f64(pure);
                world.barrier()?;
                let (mut overall, mut compute) = (0.0, 0.0);
                for i in 0..a.warmup + total {
                    let t = Instant::now();
                    let r = start(world.port(), &mut g, mode)?;
                    let c = Instant::now();
                    busy(compute_for);
                    let c = c.elapsed().as_secs_f64();
                    world.port().coll_wait(r)?;
                    let t = t.elapsed().as_secs_f64();
                    if i >= a.warmup {
                        overall += t;
                        compute += c;
                    }
                }
                mine.extend([pure * 1e6, overall / f64::from(total) * 1e6, compute / f64::from(total) * 1e6]);
            }
        }
    }
    if kind == Kind::Allreduce && n > 1 {
        for (size, mbs) in streaming_bandwidth(world, a)? {
            println!("@stream {size} {mbs:.3}");
        }
    }
    let threads = |n: usize| if n == 1 { "1 thread".to_string() } else { format!("{n} threads") };
    let threads = match world.threads() {
        (Some(mine), Some((pid, Some(engine)))) => format!("{} in its process, {} in its node engine's (process {pid})", threads(mine), threads(engine)),
        (Some(mine), None) => format!("{} in its process, its engine's among them", threads(mine)),
        _ => "threads not readable from /proc".to_string(),
    };
    eprintln!("# rank {rank}: {threads}");
    let (st, tr) = world.stats();
    eprintln!(
        "# rank {rank} engine: {} retransmits, {} timeouts, {} retries, {} collective refusals, {} not-ready rejections, {} send stalls, {} host sleeps (preempted waits)",
        st.retransmits, st.timeouts, st.retries, st.coll_refused, st.rejected_not_ready, tr.send_stalls, tr.host_sleeps
    );
    // Gather every rank's figures at rank 0 and average them.
    let bytes: Vec<u8> = mine.iter().flat_map(|x| x.to_le_bytes()).collect();
    if rank == 0 {
        let mut sum = mine.clone();
        for r in 1..n {
            let ep = world.endpoint(r);
            let (_, _, got) = world.port().recv(RecvMatch::from(ep.node, ep.port, TAG_GATHER), bytes.len() as u32)?;
            if got.len() != bytes.len() {
                bail!("rank {r} sent {} bytes of figures, expected {}", got.len(), bytes.len());
            }
            for (s, c) in sum.iter_mut().zip(got.chunks_exact(8)) {
                *s += f64::from_le_bytes(c.try_into().expect("8 bytes"));
            }
        }
        let avg: Vec<f64> = sum.iter().map(|s| s / f64::from(n)).collect();
        // Overlap: pure, overall, compute per mode; the others: latency,
        // the engine's copies per byte and the host library's, per column.
        let per = if kind == Kind::Overlap { 6 } else { 3 * kind.columns(a) };
        for (case, v) in cases(kind, a).iter().zip(avg.chunks_exact(per)) {
            let vals: Vec<String> = v.iter().map(|x| format!("{x:.3}")).collect();
            println!("@ {} {} {} {}", case.op.name(), case.op.alg(), case.size, vals.join(" "));
        }
    } else {
        let root = world.endpoint(0);
        world.port().send(root, TAG_GATHER, &bytes)?;
    }
    Ok(())
}

/// Payload bytes copied so far: by this rank's engine between host
/// memory and its packets (its DMA: reading send buffers and
/// contributions, writing results and received data; 0 with a node
/// engine, whose counts stay in its own process), and by the host library
/// between the caller's memory and the engine's.
fn copies(port: &Port<RtPort>) -> (u64, u64) {
    let (_, t) = port.io_ref().stats();
    (t.copied_out + t.copied_in, port.io_ref().host_copied())
}

/// The runtime's own streaming bandwidth from rank 0 to rank 1 at each
/// size (`outboard bench pingpong`'s bandwidth step, in this job's
/// placement), in MB/s, at rank 0: what an allreduce's bus bandwidth is
/// held against. The other ranks wait.
fn streaming_bandwidth(world: &mut outboard_runtime::World, a: &CollArgs) -> anyhow::Result<Vec<(u32, f64)>> {
    let sizes = a.sizes().to_vec();
    let max = sizes.iter().copied().max().unwrap_or(1) as usize;
    // Windows of half the send tokens: the collectives' last host-based
    // sends may still hold some.
    let steps: Vec<Step> = sizes.iter().map(|&s| Step::bandwidth(s.max(1) as usize, WINDOW_MAX / 2, 32e6, 1.0)).collect();
    world.barrier()?;
    let mut out = Vec::new();
    match world.rank() {
        0 => {
            let peer = world.endpoint(1);
            let mut side = EngineSide::new(&mut *world.port(), peer, max)?;
            // After a failure requests may still be posted on its buffers:
            // they are left to the job's end rather than freed under them.
            let (times, _) = run_a(&mut side, &steps, a.rounds.max(1))?;
            side.release()?;
            for ((step, t), &size) in steps.iter().zip(times).zip(&sizes) {
                out.push((size, step.mb_per_s(median(&t)).expect("bandwidth steps only")));
            }
        }
        1 => {
            let peer = world.endpoint(0);
            let mut side = EngineSide::new(&mut *world.port(), peer, max)?;
            run_b(&mut side, &steps, a.rounds.max(1))?;
            side.release()?;
        }
        _ => {}
    }
    world.barrier()?;
    Ok(out)
}

// ------------------------------------------------------------- parent --

/// Figures of one job, by (op, algorithm, size).
type Figures = HashMap<(String, String, u32), Vec<f64>>;

/// Where [`parse_lines`] files the streaming bandwidth at `size`.
fn stream_key(size: u32) -> (String, String, u32) {
    ("stream".to_string(), "stream".to_string(), size)
}

fn parse_lines(text: &str, prefix: &str) -> (Figures, Option<String>) {
    let mut f = Figures::new();
    let mut progress = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix) else { continue };
        if let Some(p) = rest.strip_prefix("@progress ") {
            progress = Some(p.to_string());
            continue;
        }
        if let Some((size, mbs)) = rest.strip_prefix("@stream ").and_then(|r| r.split_once(' ')) {
            if let (Ok(size), Ok(mbs)) = (size.parse(), mbs.trim().parse()) {
                f.insert(stream_key(size), vec![mbs]);
            }
            continue;
        }
        let Some(rest) = rest.strip_prefix("@ ") else { continue };
        let w: Vec<&str> = rest.split_whitespace().collect();
        if w.len() < 4 {
            continue;
        }
        let Ok(size) = w[2].parse() else { continue };
        let vals: Vec<f64> = w[3..].iter().filter_map(|x| x.parse().ok()).collect();
        f.insert((w[0].to_string(), w[1].to_string(), size), vals);
    }
    (f, progress)
}

fn worker_args(kind: Kind, a: &CollArgs) -> Vec<String> {
    let mut v = vec![
        "bench".to_string(),
        kind.name().to_string(),
        "--worker".to_string(),
        format!("--warmup={}", a.warmup),
        format!("--iters={}", a.iters),
        format!("--rounds={}", a.rounds),
    ];
    // Each subcommand's own options only.
    if kind != Kind::Barrier {
        v.push(format!("--sizes={}", a.sizes().iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
    }
    if kind == Kind::Overlap {
        let ops: Vec<&str> = a.ops.iter().map(|o| o.name()).collect();
        v.push(format!("--ops={}", ops.join(",")));
    }
    if kind == Kind::Bcast {
        let modes: Vec<&str> = a.modes.iter().map(|m| m.name()).collect();
        v.push(format!("--modes={}", modes.join(",")));
    }
    if let Some(p) = &a.progress {
        v.push(format!("--progress={p}"));
    }
    v
}

fn run_job(kind: Kind, a: &CollArgs, n: u32) -> anyhow::Result<(Figures, Option<String>)> {
    let mut launcher = vec!["-n".to_string(), n.to_string(), "--timeout".into(), a.timeout.to_string()];
    if let Some(r) = a.ranks_per_node {
        launcher.extend(["--ranks-per-node".to_string(), r.to_string()]);
    }
    if a.netns {
        launcher.push("--netns".into());
    }
    let (so, se) = crate::bench_job::run(&launcher, &worker_args(kind, a), &format!("the {n}-rank job"))?;
    for l in se.lines().filter(|l| l.contains("# rank ")) {
        eprintln!("{l}");
    }
    Ok(parse_lines(&so, "[0] "))
}

/// Open MPI's side: compiled once per run.
pub(crate) struct Mpi {
    pub(crate) exe: PathBuf,
    dir: PathBuf,
}

impl Drop for Mpi {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn found(cmd: &str) -> bool {
    Command::new(cmd).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Compiles the C program, or says why Open MPI is skipped.
fn mpi_setup() -> Result<Mpi, String> {
    mpi_build("mpi_coll.c", include_str!("mpi_coll.c"), "ob_mpi_coll")
}

/// Compiles an Open MPI benchmark program `src` (named `name`) into a
/// temporary directory as `exe`, or says why Open MPI is skipped.
pub(crate) fn mpi_build(name: &str, src: &str, exe: &str) -> Result<Mpi, String> {
    if !found("mpicc.openmpi") {
        return Err("skipped: mpicc not found (apt install libopenmpi-dev)".into());
    }
    if !found("mpirun.openmpi") {
        return Err("skipped: mpirun not found (apt install openmpi-bin)".into());
    }
    let dir = std::env::temp_dir().join(format!("outboard-mpi-{}-{exe}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("skipped: cannot create {}: {e}", dir.display()))?;
    let mpi = Mpi { exe: dir.join(exe), dir: dir.clone() };
    let path = dir.join(name);
    std::fs::write(&path, src).map_err(|e| format!("skipped: cannot write {}: {e}", path.display()))?;
    let src = path;
    let out = Command::new("mpicc.openmpi")
        .args(["-O2", "-o"])
        .arg(&mpi.exe)
        .arg(&src)
        .output()
        .map_err(|e| format!("skipped: running mpicc: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("").trim().to_string();
        return Err(format!("skipped: mpicc could not compile the benchmark (apt install libopenmpi-dev): {first}"));
    }
    Ok(mpi)
}

/// Builds an Open MPI one-sided benchmark (`src`, named `name`) and runs it
/// under `mpirun.openmpi -n N` with its windows on the network: `osc pt2pt`
/// over `btl tcp` (on one machine Open MPI would otherwise pick `osc sm`,
/// plain CPU atomics on shared memory). Its standard output, or a line
/// saying why Open MPI's figures are missing.
pub(crate) fn run_osc_program(name: &str, src: &str, exe: &str, n: u32, args: &[String]) -> Result<String, String> {
    run_program(name, src, exe, n, &["--mca", "osc", "pt2pt"], args)
}

/// Builds an Open MPI benchmark (`src`, named `name`) and runs it under
/// `mpirun.openmpi -n N` over `btl tcp`, with `mca` added to mpirun's
/// options. Its standard output, or a line saying why Open MPI's figures
/// are missing.
pub(crate) fn run_program(name: &str, src: &str, exe: &str, n: u32, mca: &[&str], args: &[String]) -> Result<String, String> {
    let mpi = mpi_build(name, src, exe)?;
    let out = Command::new("mpirun.openmpi")
        .args(["--oversubscribe", "--mca", "btl", "tcp,self"])
        .args(mca)
        .args(["-n", &n.to_string()])
        .arg(&mpi.exe)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start mpirun: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("mpirun failed: {}", err.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs Open MPI's side of `op` (its split-phase call for `overlap`).
fn run_mpi(mpi: &Mpi, op: Op, split_phase: bool, a: &CollArgs, n: u32, timeout: Duration) -> anyhow::Result<Figures> {
    let sizes = if matches!(op, Op::Barrier(_)) { "0".to_string() } else { a.sizes().iter().map(u32::to_string).collect::<Vec<_>>().join(",") };
    let op = op.mpi_name(split_phase);
    let mut child = Command::new("mpirun.openmpi")
        .args(["--oversubscribe", "--mca", "btl", "tcp,self", "-n", &n.to_string()])
        .arg(&mpi.exe)
        .args([op, &sizes, &a.warmup.to_string(), &a.iters.to_string(), &a.rounds.to_string()])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting mpirun")?;
    let start = Instant::now();
    while child.try_wait()?.is_none() {
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!("mpirun did not finish within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    let so = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("mpirun failed:\n{so}{}", String::from_utf8_lossy(&out.stderr));
    }
    let (f, _) = parse_lines(&so, "");
    // The C program names the operation but has no algorithm column.
    Ok(f.into_iter().map(|((op, _, size), v)| ((op, "mpi".to_string(), size), v)).collect())
}

fn size_label(s: u32) -> String {
    match s {
        0 => "-".into(),
        s if s >= 1024 && s % 1024 == 0 => format!("{} KiB", s / 1024),
        s => format!("{s} B"),
    }
}

fn fmt(x: Option<f64>, prec: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.prec$}"),
        _ => "-".into(),
    }
}

/// A ratio of two latencies: two decimals, or as many as its first two
/// significant digits need, so a ratio far below one (one mode stalled on
/// a loaded machine) still reads as what it is, never as "0.00".
fn fmt_ratio(x: Option<f64>) -> String {
    fmt_nonzero(x, 2)
}

/// `prec` decimals, or as many as the first two significant digits of a
/// small positive value need: a figure is never printed as zero unless it
/// is.
fn fmt_nonzero(x: Option<f64>, prec: usize) -> String {
    match x {
        Some(v) if v.is_finite() && v > 0.0 && v < 0.1 => {
            let digits = (1 - v.log10().floor() as i32).clamp(prec as i32, 12) as usize;
            format!("{v:.digits$}")
        }
        _ => fmt(x, prec),
    }
}

/// An allreduce's bus bandwidth in GB/s: the bytes each rank must move,
/// 2(p-1)/p of the data for any algorithm that reaches the bound (reduce-
/// scatter then allgather), over the latency - the figure nccl-tests and
/// UCC's perftest print, comparable across group sizes and with a link's
/// streaming bandwidth.
fn bus_bandwidth(ranks: u32, bytes: u32, latency_us: f64) -> f64 {
    let p = f64::from(ranks);
    2.0 * (p - 1.0) / p * f64::from(bytes) / (latency_us * 1e-6) / 1e9
}

/// The allreduce table's sizes again as bus bandwidth, beside the
/// runtime's own streaming bandwidth from rank 0 to rank 1 at the same
/// size in the same job (the bandwidth step of `outboard bench pingpong`),
/// and the faster of our two forms as a fraction of it.
fn print_bus_bandwidth(a: &CollArgs, n: u32, fig: &Figures, mpi_fig: &Figures) {
    println!("# bus bandwidth in MB/s = 2(p-1)/p x size / latency (as nccl-tests print it); stream = this job's streaming bandwidth from rank 0 to rank 1 at that size (by `outboard bench pingpong`'s method, windows of at most 32 messages); best/stream = the faster of offloaded and host-based over it");
    println!("{:<10} {:<19} {:>7} | {:>9} {:>10} | {:>9} | {:>9} {:>11}", "op", "algorithm", "size", "offloaded", "host-based", "Open MPI", "stream", "best/stream");
    for c in cases(Kind::Allreduce, a) {
        let v = fig.get(&c.key()).cloned().unwrap_or_default();
        let bw = |t: Option<f64>| t.filter(|&t| t > 0.0).map(|t| bus_bandwidth(n, c.size, t) * 1e3);
        let m = mpi_fig.get(&c.mpi_key(false)).and_then(|m| m.first().copied());
        let (o, h) = (bw(v.first().copied()), bw(v.get(1).copied()));
        let stream = fig.get(&stream_key(c.size)).and_then(|s| s.first().copied()).filter(|&s| s > 0.0);
        let best = match (o, h) {
            (Some(o), Some(h)) => Some(o.max(h)),
            (x, y) => x.or(y),
        };
        println!(
            "{:<10} {:<19} {:>7} | {:>9} {:>10} | {:>9} | {:>9} {:>11}",
            c.op.name(),
            c.op.alg(),
            size_label(c.size),
            fmt_nonzero(o, 1),
            fmt_nonzero(h, 1),
            fmt_nonzero(bw(m), 1),
            fmt_nonzero(stream, 1),
            fmt_ratio(best.zip(stream).map(|(b, s)| b / s)),
        );
    }
}

/// Copies per byte: the bytes an engine copied between host memory and
/// its packets over a column's timed collectives, over the data's bytes
/// times the collectives, averaged over the ranks - what zero copy would
/// bring down to the reads and writes the hardware must make.
fn print_copies(kind: Kind, a: &CollArgs, fig: &Figures) {
    let modes = kind.modes(a);
    let cols = kind.columns(a);
    println!("# copies per byte of data per collective, mean over the ranks, engine + host library: the engine's between host memory and its packets (the DMA a NIC must make: 2 for an allreduce's read and write; a node engine's are not counted, -), the host library's between the caller's memory and the engine's (what zero copy would save)");
    let mut head = format!("{:<10} {:<19} {:>7} |", "op", "algorithm", "size");
    for m in &modes {
        head += &format!(" {:>17}", mode_label(*m));
    }
    println!("{head}");
    for c in cases(kind, a) {
        let v = fig.get(&c.key()).cloned().unwrap_or_default();
        let mut row = format!("{:<10} {:<19} {:>7} |", c.op.name(), c.op.alg(), size_label(c.size));
        for i in 0..modes.len() {
            // An engine count of zero: not counted (a node engine's
            // counts stay in its process).
            let engine = fmt(v.get(cols + i).copied().filter(|&c| c > 0.0), 2);
            let host = fmt(v.get(2 * cols + i).copied(), 2);
            row += &format!(" {:>17}", format!("{engine} + {host}"));
        }
        println!("{row}");
    }
}

/// A mode's column header: its broadcast column's, as the latency tables
/// head it (every mode a benchmark measures is one of theirs).
fn mode_label(m: BcastMode) -> &'static str {
    use clap::ValueEnum;
    BcastCol::value_variants().iter().find(|c| c.mode() == m).map_or("?", |c| c.header())
}

/// The broadcast table: one column per mode, then host-based over each
/// other mode, Open MPI, and Open MPI over each of ours but host-based.
fn print_bcast(a: &CollArgs, fig: &Figures, mpi_fig: &Figures) {
    let short = |c: BcastCol| match c {
        BcastCol::Offloaded => "offl",
        BcastCol::Nic => "nic",
        BcastCol::NicWhole => "nicw",
        BcastCol::Host => "host",
    };
    let host = a.modes.iter().position(|&c| c == BcastCol::Host);
    let others: Vec<usize> = (0..a.modes.len()).filter(|&i| Some(i) != host).collect();
    let mut head = format!("{:<6} {:<9} {:>8} |", "op", "tree", "size");
    for c in &a.modes {
        head += &format!(" {:>10}", c.header());
    }
    head += " |";
    let host = host.filter(|_| !others.is_empty());
    if host.is_some() {
        for &i in &others {
            head += &format!(" {:>9}", format!("host/{}", short(a.modes[i])));
        }
        head += " |";
    }
    head += &format!(" {:>9}", "Open MPI");
    for &i in &others {
        head += &format!(" {:>9}", format!("MPI/{}", short(a.modes[i])));
    }
    println!("{head}");
    for c in cases(Kind::Bcast, a) {
        let v = fig.get(&c.key()).cloned().unwrap_or_default();
        let m = mpi_fig.get(&c.mpi_key(false)).and_then(|m| m.first().copied());
        let ratio = |x: Option<f64>, y: Option<f64>| x.zip(y).map(|(x, y)| x / y);
        let mut line = format!("{:<6} {:<9} {:>8} |", c.op.name(), c.op.alg(), size_label(c.size));
        for i in 0..a.modes.len() {
            line += &format!(" {:>10}", fmt(v.get(i).copied(), 1));
        }
        line += " |";
        if let Some(h) = host {
            for &i in &others {
                line += &format!(" {:>9}", fmt_ratio(ratio(v.get(h).copied(), v.get(i).copied())));
            }
            line += " |";
        }
        line += &format!(" {:>9}", fmt(m, 1));
        for &i in &others {
            line += &format!(" {:>9}", fmt_ratio(ratio(m, v.get(i).copied())));
        }
        println!("{line}");
    }
}

fn check(kind: Kind, a: &CollArgs) -> anyhow::Result<()> {
    let sized = matches!(kind, Kind::Allreduce | Kind::Reduce | Kind::Allgather | Kind::Alltoall | Kind::ReduceScatter);
    if sized || (kind == Kind::Overlap && a.ops.iter().any(|o| *o != OverlapOp::Barrier)) {
        if a.sizes().is_empty() {
            bail!("--sizes: give at least one size");
        }
        for &s in a.sizes() {
            if s == 0 || s % 8 != 0 || s > SIZED_MAX {
                bail!("--sizes: {s} is not a multiple of 8 between 8 and 16M (16,777,216 bytes) (i64 elements)");
            }
        }
    }
    if kind == Kind::Bcast {
        if a.modes.is_empty() {
            bail!("--modes: give at least one mode");
        }
        if a.sizes().is_empty() {
            bail!("--sizes: give at least one size");
        }
        if let Some(s) = a.sizes().iter().find(|&&s| s == 0 || s > BCAST_MAX) {
            bail!("--sizes: {s} is not between 1 byte and 16 MiB");
        }
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    if let Some(p) = &a.progress {
        Progress::parse(p)?;
    }
    Ok(())
}

/// The operations Open MPI's side runs for `kind`: each one the cases
/// name, once, in case order.
fn mpi_ops(kind: Kind, a: &CollArgs) -> Vec<Op> {
    let split = kind == Kind::Overlap;
    let mut ops: Vec<Op> = Vec::new();
    for c in cases(kind, a) {
        if !ops.iter().any(|o| o.mpi_name(split) == c.op.mpi_name(split)) {
            ops.push(c.op);
        }
    }
    ops
}

/// The largest broadcast `bench bcast` takes.
const BCAST_MAX: u32 = 16 << 20;
/// Largest allreduce or reduce contribution the benchmarks take.
const SIZED_MAX: u32 = 16 << 20;

/// Runs `outboard bench barrier|allreduce|reduce|bcast|overlap`.
pub fn run(kind: Kind, mut a: CollArgs) -> anyhow::Result<()> {
    a.sizes.get_or_insert_with(|| kind.default_sizes());
    check(kind, &a)?;
    if a.worker {
        return worker(kind, &a);
    }
    let mpi = if a.no_mpi { Err("skipped: --no-mpi".to_string()) } else { mpi_setup() };
    let placement = match (a.ranks_per_node, a.netns) {
        (Some(r), true) => format!("node engines of {r} ranks, a network namespace per node on a bridge"),
        (Some(r), false) => format!("node engines of {r} ranks, UDP over 127.0.0.1 between them"),
        (None, true) => "an engine per rank, a network namespace per rank on a bridge".to_string(),
        (None, false) => "an engine per rank, UDP over 127.0.0.1".to_string(),
    };
    println!(
        "# outboard bench {}: ranks = processes on this machine ({} cores; more ranks than cores oversubscribe it); {placement}",
        kind.name(),
        machine_cores()
    );
    if kind == Kind::Overlap {
        println!("# OSU-style overlap: pure = mean(start + wait); then start, busy-loop for pure, wait; overlap % = max(0, 1 - (overall - compute) / pure) * 100; means over {} iterations (after {} warm-up) and over the ranks", a.iters * a.rounds, a.warmup);
    } else {
        println!("# figure: per-iteration latency in us, median of {} x {} iterations per rank (after {} warm-up per round), mean over the ranks; the modes alternate by round", a.rounds, a.iters, a.warmup);
    }
    if kind == Kind::Barrier {
        println!("# offloaded = over the engines' point-to-point connections (the default); nic-proto = offloaded on the engines' NIC collective protocol (no sequencing, no acks, NACK on timeout; Group::set_barrier_protocol); both alternate with host-based round by round");
    }
    if kind == Kind::Bcast {
        println!("# data: bytes from rank 0, binomial tree in every mode; NIC-assisted = one multi-send per host and piece, packet-sized pieces; every result checked; an untimed barrier after every broadcast (OSU osu_bcast style; MPI_Barrier for Open MPI)");
    } else if kind.movement().is_some() {
        println!("# size: each rank's block (allgather: what it contributes; alltoall: what it sends each rank; reduce-scatter: what it gets, of i64 SUM), so the result holds ranks x size; Outboard's offloaded and host-based forms carry the whole result in every message up to 8 KiB of it (bitwise or of placed blocks), one collective per block beyond (a broadcast per block, the pairwise exchange, a tree reduce per block)");
    } else if cases(kind, &a).iter().any(|c| matches!(c.op, Op::Allreduce(_) | Op::Reduce(_))) {
        println!("# data: i64 elements, SUM; reduce to rank 0");
    }
    match &mpi {
        Ok(_) => println!("# Open MPI: mpirun --oversubscribe --mca btl tcp,self (same methodology, C program compiled with mpicc)"),
        Err(why) => println!("# Open MPI: {why}"),
    }
    let timeout = Duration::from_secs_f64(a.timeout);
    for &n in &a.ranks {
        let (fig, progress) = run_job(kind, &a, n).with_context(|| format!("{} with {n} ranks", kind.name()))?;
        println!();
        println!("## {n} ranks, progress {}", progress.as_deref().unwrap_or("?"));
        if progress.as_deref().is_some_and(|p| !p.contains("dedicated")) {
            // Said beside the figures so nobody reads them as offload.
            println!("# not evidence of offload: without a core per engine, each engine runs on its waiting host's thread (or shares the cores), so \"offloaded\" compares two protocols on the same cores");
        }
        let mut mpi_fig = Figures::new();
        let mut mpi_err = None;
        if let Ok(m) = &mpi {
            for op in mpi_ops(kind, &a) {
                match run_mpi(m, op, kind == Kind::Overlap, &a, n, timeout) {
                    Ok(f) => mpi_fig.extend(f),
                    Err(e) => mpi_err = Some(format!("{e:#}")),
                }
            }
        }
        if let Some(e) = &mpi_err {
            println!("# Open MPI failed: {}", e.lines().next().unwrap_or(""));
        }
        if kind == Kind::Overlap {
            println!(
                "{:<10} {:<19} {:>7} | {:>9} {:>9} {:>8} | {:>9} {:>9} {:>8} | {:>9} {:>8}",
                "op", "algorithm", "size", "offl pure", "overall", "overlap%", "host pure", "overall", "overlap%", "MPI pure", "overlap%"
            );
            for c in cases(kind, &a) {
                let v = fig.get(&c.key()).cloned().unwrap_or_default();
                let ov = |pure: f64, overall: f64, comp: f64| (1.0 - (overall - comp) / pure).max(0.0) * 100.0;
                let (o, h) = if v.len() == 6 { (Some(ov(v[0], v[1], v[2])), Some(ov(v[3], v[4], v[5]))) } else { (None, None) };
                let m = mpi_fig.get(&c.mpi_key(true));
                println!(
                    "{:<10} {:<19} {:>7} | {:>9} {:>9} {:>8} | {:>9} {:>9} {:>8} | {:>9} {:>8}",
                    c.op.name(),
                    c.op.alg(),
                    size_label(c.size),
                    fmt(v.first().copied(), 1),
                    fmt(v.get(1).copied(), 1),
                    fmt(o, 1),
                    fmt(v.get(3).copied(), 1),
                    fmt(v.get(4).copied(), 1),
                    fmt(h, 1),
                    fmt(m.as_ref().and_then(|m| m.first().copied()), 1),
                    fmt(m.as_ref().and_then(|m| m.get(3).copied()), 1),
                );
            }
        } else if kind == Kind::Bcast {
            print_bcast(&a, &fig, &mpi_fig);
        } else {
            // A barrier's offloaded column is over the point-to-point
            // connections; its protocol column follows.
            let proto = kind == Kind::Barrier;
            let ph = if proto { format!(" {:>9} {:>10}", "nic-proto", "offl/proto") } else { String::new() };
            println!(
                "{:<10} {:<19} {:>7} | {:>9} {:>10} {:>9}{} | {:>9} {:>9}",
                "op", "algorithm", "size", "offloaded", "host-based", "host/offl", ph, "Open MPI", "MPI/offl"
            );
            for c in cases(kind, &a) {
                let v = fig.get(&c.key()).cloned().unwrap_or_default();
                let (o, h, p) = (v.first().copied(), v.get(1).copied(), v.get(2).copied());
                let m = mpi_fig.get(&c.mpi_key(false)).and_then(|m| m.first().copied());
                let pc = if proto { format!(" {:>9} {:>10}", fmt(p, 1), fmt_ratio(o.zip(p).map(|(o, p)| o / p))) } else { String::new() };
                println!(
                    "{:<10} {:<19} {:>7} | {:>9} {:>10} {:>9}{} | {:>9} {:>9}",
                    c.op.name(),
                    c.op.alg(),
                    size_label(c.size),
                    fmt(o, 1),
                    fmt(h, 1),
                    fmt_ratio(o.zip(h).map(|(o, h)| h / o)),
                    pc,
                    fmt(m, 1),
                    fmt_ratio(o.zip(m).map(|(o, m)| m / o)),
                );
            }
            if kind == Kind::Allreduce && n > 1 {
                print_bus_bandwidth(&a, n, &fig, &mpi_fig);
            }
        }
        if matches!(kind, Kind::Allreduce | Kind::Reduce | Kind::Bcast) {
            print_copies(kind, &a, &fig);
        }
    }
    if let Err(why) = &mpi {
        println!();
        println!("Open MPI comparison {why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_bandwidth_is_the_bound_s_bytes_per_rank_over_the_time() {
        // 2 ranks: each moves the whole vector once; 1 MB in 1 ms is 1 GB/s.
        assert!((bus_bandwidth(2, 1_000_000, 1000.0) - 1.0).abs() < 1e-12);
        // 4 ranks: 2 x 3/4 of the vector.
        assert!((bus_bandwidth(4, 1_000_000, 1000.0) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn parses_rank_zero_lines_only() {
        let text = "[0] @progress host-assisted (x)\n[0] @ barrier dissemination 0 12.5 30.25\n[1] @ barrier x 0 1 2\n[0] noise\n";
        let (f, p) = parse_lines(text, "[0] ");
        assert_eq!(p.as_deref(), Some("host-assisted (x)"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[&("barrier".into(), "dissemination".into(), 0)], vec![12.5, 30.25]);
    }

    #[test]
    fn cases_keep_their_rows_and_labels() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: OverlapArgs,
        }
        let a: CollArgs = Cli::parse_from(["x", "--sizes=8,64", "--ops=allreduce,barrier"]).a.into();
        let rows = |k| cases(k, &a).iter().map(|c| format!("{} {} {}", c.op.name(), c.op.alg(), c.size)).collect::<Vec<_>>();
        // Barriers add the collective protocol's column to the two modes.
        assert_eq!((Kind::Barrier.columns(&a), Kind::Allreduce.columns(&a), Kind::Reduce.columns(&a)), (3, 2, 2));
        assert_eq!(rows(Kind::Barrier), ["barrier pairwise-exchange 0", "barrier dissemination 0", "barrier gather-bcast(2) 0"]);
        assert_eq!(
            rows(Kind::Allreduce),
            [
                "allreduce tree(binomial) 8",
                "allreduce recursive-doubling 8",
                "allreduce block-trees 8",
                "allreduce tree(binomial) 64",
                "allreduce recursive-doubling 64",
                "allreduce block-trees 64"
            ]
        );
        assert_eq!(rows(Kind::Reduce), ["reduce binomial 8", "reduce block-trees 8", "reduce binomial 64", "reduce block-trees 64"]);
        assert_eq!(rows(Kind::Bcast), ["bcast binomial 8", "bcast binomial 64"]);
        assert_eq!(rows(Kind::Overlap), ["allreduce recursive-doubling 8", "allreduce recursive-doubling 64", "barrier pairwise-exchange 0"]);
        let mpi = |k| mpi_ops(k, &a).iter().map(|o| o.mpi_name(k == Kind::Overlap)).collect::<Vec<_>>();
        assert_eq!(mpi(Kind::Barrier), ["barrier"]);
        assert_eq!(mpi(Kind::Overlap), ["iallreduce", "ibarrier"]);
    }

    #[test]
    fn a_small_ratio_keeps_two_significant_digits() {
        assert_eq!(fmt_ratio(Some(1.234)), "1.23");
        assert_eq!(fmt_ratio(Some(0.5)), "0.50");
        // 8.8 us host-based over a stalled 1,997.8 us offloaded (a CI run).
        assert_eq!(fmt_ratio(Some(8.8 / 1997.8)), "0.0044");
        assert_eq!(fmt_ratio(Some(0.0)), "0.00");
        assert_eq!(fmt_ratio(None), "-");
        assert_eq!(fmt_ratio(Some(f64::INFINITY)), "-");
    }

    /// An 8-byte allreduce's bus bandwidth on a slow machine is a few
    /// hundredths of a MB/s: printed, never as "0.0" (a CI run did).
    #[test]
    fn a_small_bus_bandwidth_is_not_printed_as_zero() {
        assert_eq!(fmt_nonzero(Some(bus_bandwidth(2, 8, 200.0) * 1e3), 1), "0.040");
        assert_eq!(fmt_nonzero(Some(1234.56), 1), "1234.6");
        assert_eq!(fmt_nonzero(Some(0.0), 1), "0.0");
    }

    #[test]
    fn the_mpi_program_is_embedded() {
        let src = include_str!("mpi_coll.c");
        assert!(src.contains("MPI_Iallreduce") && src.contains("MPI_Bcast") && src.contains("@ %s mpi %d"));
    }
}
