//! The experiments that reproduce and extend the papers' figures.
//!
//! Each experiment runs simulations for every (profile, node count or size)
//! point asked for and returns [`Row`]s: the simulated value and, where a
//! paper quotes a number for that point, the paper's value (looked up by id
//! in [`crate::paper`]) and the relative difference. The `outboard sim`
//! command prints them, writes them as CSV and plots them.

use thiserror::Error;

use crate::calibration::{self, Basis};
use crate::profile::Profile;
use crate::sim::SimError;

pub mod atomics;
pub mod bandwidth;
pub mod movement;
pub mod barrier;
pub mod bypass;
pub mod closed_form;
pub mod coll;
mod common;
pub mod dissemination;
pub mod granularity;
pub mod lambda;
pub mod multicast;
pub mod multisend;
pub mod nic_barrier;
pub mod nicvm;
pub mod overlap;
pub mod pingpong;
pub mod qsnet;
pub mod reduction;

/// Names of the experiments, for the command line.
pub const NAMES: &[&str] = &["closed-form", "pingpong", "dissemination", "barrier",
    "barrier-mpi",
    "granularity",
    "synthetic",
    "reduce",
    "reduce-chain",
    "reduce-degree",
    "reduce-cpu",
    "reduce-skew",
    "multisend",
    "multicast",
    "bcast",
    "bcast-skew",
    "bcast-skew-size",
    "bcast-bypass",
    "lambda-sweep",
    "overlap",
    "qsnet-barrier",
    "qsnet-traffic",
    "qsnet-bcast",
    "atomics",
    "lock",
    "lock-cpu",
    "nicvm",
    "coll-size",
    "coll-move",
];

/// An experiment could not run.
#[derive(Debug, Error)]
pub enum ExperimentError {
    /// No experiment of that name.
    #[error("unknown experiment {0:?} (known: {known})", known = NAMES.join(", "))]
    Unknown(String),
    /// A simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A host-library call failed inside the simulation.
    #[error("host library: {0}")]
    Host(#[from] outboard_host::HostError),
    /// The host library's MCS lock refused a call inside the simulation.
    #[error("lock: {0}")]
    Lock(#[from] outboard_host::lock::LockError),
    /// A parameter is out of range.
    #[error("{0}")]
    Param(String),
    /// The operation this variant needs does not exist yet.
    #[error("{0} is not available yet: {1}")]
    NotYet(&'static str, &'static str),
}

/// The first host-library error of any simulated process in a run: processes
/// record their result, the experiment checks once the simulation is over.
#[derive(Clone, Default)]
pub(crate) struct FirstError(Shared<Option<ExperimentError>>);

impl FirstError {
    /// Keeps `r`'s error unless an earlier one is already kept.
    pub(crate) fn record<E: Into<ExperimentError>>(&self, r: Result<(), E>) {
        if let Err(e) = r {
            self.0.borrow_mut().get_or_insert(e.into());
        }
    }

    /// The kept error, if any.
    pub(crate) fn check(&self) -> Result<(), ExperimentError> {
        match self.0.borrow_mut().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    /// One series per profile.
    pub profiles: Vec<Profile>,
    /// Node counts (experiments that sweep nodes).
    pub nodes: Vec<u32>,
    /// Message sizes in bytes (experiments that sweep sizes).
    pub sizes: Vec<u32>,
    /// The seed.
    pub seed: u64,
    /// Repetitions averaged per point (consecutive operations).
    pub iters: u32,
}

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Series (the profile, possibly with a variant).
    pub series: String,
    /// Nodes.
    pub nodes: u32,
    /// Message size in bytes.
    pub size: u32,
    /// What was measured.
    pub metric: &'static str,
    /// The simulated value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
    /// The id(s) of the paper's figure, joined by `*` for a product.
    pub paper_id: Option<String>,
    /// The paper's value.
    pub paper: Option<f64>,
    /// Whether the paper's figure was fitted on, informed a choice, or is
    /// predicted (from `data/calibration.toml`; see [`crate::calibration`]).
    pub basis: Option<Basis>,
}

impl Row {
    /// A result with no paper figure (attach one with [`Row::with_paper`]).
    pub fn new(series: impl Into<String>, nodes: u32, size: u32, metric: &'static str, value: f64, unit: &'static str) -> Row {
        Row { series: series.into(), nodes, size, metric, value, unit, paper_id: None, paper: None, basis: None }
    }

    /// (sim - paper) / paper, where the paper has a value.
    pub fn rel_diff(&self) -> Option<f64> {
        self.paper.map(|p| crate::paper::rel_diff(self.value, p))
    }

    /// Attaches the paper's figure (a product of the ids' values, or a
    /// quotient: see [`crate::paper::derived`]) and its basis for this
    /// row's profile.
    pub fn with_paper(mut self, ids: &[&str]) -> Row {
        self.paper = crate::paper::derived(ids);
        self.paper_id = self.paper.map(|_| crate::paper::derived_id(ids));
        self.basis = self.paper_id.as_deref().map(|id| calibration::basis(&self.series, id));
        self
    }
}

/// An experiment's results.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Title for the table and the plot.
    pub title: String,
    /// Which field is the x axis.
    pub x: XAxis,
    /// The rows.
    pub rows: Vec<Row>,
    /// Remarks printed under the table.
    pub notes: Vec<String>,
}

/// The swept parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Node count.
    Nodes,
    /// Message size.
    Size,
    /// Another quantity the experiment keeps in the bytes column (an
    /// efficiency, a computation time), named by the label: plotted on a
    /// plain axis.
    Column(&'static str),
}

impl Outcome {
    /// The results as CSV (a header line, then one line per row).
    pub fn to_csv(&self) -> String {
        let mut s = String::from("series,nodes,size_bytes,metric,value,unit,paper_id,paper_value,rel_diff,basis\n");
        for r in &self.rows {
            s.push_str(&format!(
                "{},{},{},{},{:.6},{},{},{},{},{}\n",
                r.series,
                r.nodes,
                r.size,
                r.metric,
                r.value,
                r.unit,
                r.paper_id.as_deref().unwrap_or(""),
                r.paper.map(|p| format!("{p}")).unwrap_or_default(),
                r.rel_diff().map(|d| format!("{d:.6}")).unwrap_or_default(),
                r.basis.map(Basis::letter).unwrap_or_default()
            ));
        }
        s
    }

    /// The results as an aligned text table.
    pub fn to_table(&self) -> String {
        let mut s = format!("{}\n", self.title);
        s.push_str(&format!(
            "{:<22} {:>7} {:>9} {:<12} {:>14} {:<5} {:>12} {:>9} {:>5}  {}\n",
            "series", "nodes", "bytes", "metric", "sim", "unit", "paper", "diff", "basis", "paper id"
        ));
        for r in &self.rows {
            s.push_str(&format!(
                "{:<22} {:>7} {:>9} {:<12} {:>14.4} {:<5} {:>12} {:>9} {:>5}  {}\n",
                r.series,
                r.nodes,
                r.size,
                r.metric,
                r.value,
                r.unit,
                r.paper.map(|p| format!("{p:.4}")).unwrap_or_else(|| "-".into()),
                r.rel_diff().map(|d| format!("{:+.2}%", d * 100.0)).unwrap_or_else(|| "-".into()),
                r.basis.map(Basis::letter).unwrap_or("-"),
                r.paper_id.as_deref().unwrap_or("")
            ));
        }
        for n in &self.notes {
            s.push_str(&format!("note: {n}\n"));
        }
        s
    }
}

/// Runs experiment `name`; `progress(done, total)` is called after each
/// simulated point.
pub fn run(name: &str, p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    if p.profiles.is_empty() {
        return Err(ExperimentError::Param("no profile given".into()));
    }
    match name {
        "closed-form" => closed_form::run(p, progress),
        "pingpong" => pingpong::run(p, progress),
        "dissemination" => dissemination::run(p, progress),
        "barrier" => barrier::run(p, progress),
        "barrier-mpi" => barrier::run_mpi(p, progress),
        "granularity" => granularity::run(p, progress),
        "synthetic" => granularity::run_synthetic(p, progress),
        "reduce" => reduction::run_latency(p, progress),
        "reduce-chain" => reduction::run_chain(p, progress),
        "reduce-degree" => reduction::run_degree(p, progress),
        "reduce-cpu" => reduction::run_cpu(p, progress),
        "reduce-skew" => reduction::run_skew(p, progress),
        "overlap" => overlap::run(p, progress),
        "nicvm" => nicvm::run(p, progress),
        "multisend" => multisend::run(p, progress),
        "multicast" => multicast::run(p, progress),
        "bcast" => multicast::run_bcast(p, progress),
        "bcast-skew" => multicast::run_skew(p, progress),
        "bcast-skew-size" => multicast::run_skew_size(p, progress),
        "bcast-bypass" => bypass::run(p, progress),
        "lambda-sweep" => lambda::run(p, progress),
        "qsnet-barrier" => qsnet::run_barrier(p, progress),
        "qsnet-traffic" => qsnet::run_traffic(p, progress),
        "qsnet-bcast" => qsnet::run_bcast(p, progress),
        "atomics" => atomics::run_ops(p, progress),
        "lock" => atomics::run_lock(p, progress),
        "lock-cpu" => atomics::run_lock_cpu(p, progress),
        "coll-size" => bandwidth::run(p, progress),
        "coll-move" => movement::run(p, progress),
        other => Err(ExperimentError::Unknown(other.to_string())),
    }
}

/// A shared slot a simulated process writes its result into.
pub(crate) type Shared<T> = std::rc::Rc<std::cell::RefCell<T>>;
