//! What the ranks run: the runtime's examples (each checks its own
//! results and exits non-zero on a mismatch or an error) and `outboard
//! bench bcast` workers, one per broadcast mode (each rank checks every
//! broadcast's bytes against the root's).

use std::path::{Path, PathBuf};

use anyhow::bail;

/// One job's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// `examples/ring`: a token around the ring (point-to-point).
    Ring,
    /// `examples/collectives`: every barrier, reduce, allreduce and
    /// broadcast, offloaded and host-based.
    Collectives,
    /// `examples/rdma_write`: RDMA writes into rank 0's window.
    RdmaWrite,
    /// `outboard bench bcast` workers, offloaded broadcast.
    BcastOffloaded,
    /// `outboard bench bcast` workers, NIC-assisted broadcast.
    BcastNic,
    /// `outboard bench bcast` workers, host-based broadcast.
    BcastHost,
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `outboard` binary (for the bench workers).
    pub outboard: PathBuf,
    /// The directory with the runtime's example binaries.
    pub examples: PathBuf,
}

impl Programs {
    /// Finds the examples in `dir`, else in `OUTBOARD_EXAMPLES_DIR`, else
    /// in `examples/` beside this binary (where `cargo build --examples`
    /// puts them for the same profile).
    pub fn locate(dir: Option<&Path>) -> anyhow::Result<Programs> {
        let outboard = std::env::current_exe()?;
        let examples = match dir {
            Some(d) => d.to_path_buf(),
            None => match outboard_settings::registry::EXAMPLES_DIR.get(&outboard_settings::ProcessEnv)? {
                Some(d) => PathBuf::from(d),
                None => outboard.parent().map(|p| p.join("examples")).unwrap_or_default(),
            },
        };
        for name in ["ring", "collectives", "rdma_write"] {
            if !examples.join(name).is_file() {
                bail!(
                    "example binary {} not found: build them (`cargo build --release -p outboard-runtime --examples`) \
                     or pass --examples-dir / OUTBOARD_EXAMPLES_DIR",
                    examples.join(name).display()
                );
            }
        }
        Ok(Programs { outboard, examples })
    }
}

/// How long a workload should run: short for the loss matrix (30 % loss
/// multiplies run times), long enough for a kill to land mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// For the loss scenario.
    Short,
    /// For the kill and replay scenarios.
    Long,
}

impl Workload {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Ring => "ring",
            Workload::Collectives => "collectives",
            Workload::RdmaWrite => "rdma-write",
            Workload::BcastOffloaded => "bcast-offloaded",
            Workload::BcastNic => "bcast-nic",
            Workload::BcastHost => "bcast-host",
        }
    }

    /// The program and its arguments.
    pub fn command(self, p: &Programs, len: Length) -> (PathBuf, Vec<String>) {
        let laps = if len == Length::Long { "2000" } else { "20" };
        let iters = if len == Length::Long { "150" } else { "5" };
        let bench = |mode: &str| {
            let args = ["bench", "bcast", "--worker", "--sizes=8,1024,16384,65536", "--warmup=1", "--rounds=1"];
            let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            v.push(format!("--iters={iters}"));
            v.push(format!("--modes={mode}"));
            (p.outboard.clone(), v)
        };
        match self {
            Workload::Ring => (p.examples.join("ring"), vec![laps.to_string()]),
            Workload::Collectives => (p.examples.join("collectives"), Vec::new()),
            Workload::RdmaWrite => (p.examples.join("rdma_write"), Vec::new()),
            Workload::BcastOffloaded => bench("offloaded"),
            Workload::BcastNic => bench("nic"),
            Workload::BcastHost => bench("host"),
        }
    }
}
