//! `outboard sim`: run one of the simulator's experiments.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use outboard_sim::experiments::{self, Params};
use outboard_sim::profile::{builtin_names, Profile};
use outboard_sim::reproduce::paper_profiles;

/// The list of experiments `outboard sim --help` ends with, made from the
/// simulator's own list so that none is left out, each with the profiles
/// it runs on by default; and the built-in profiles.
pub fn experiments_help() -> String {
    let mut s = String::from("Experiments (default profiles):\n");
    for name in experiments::NAMES {
        let profiles = paper_profiles(name).map(|p| p.join(", ")).unwrap_or_default();
        s.push_str(&format!("  {name:<16} {profiles}\n"));
    }
    s.push_str(&format!("\nBuilt-in profiles: {}", builtin_names().join(", ")));
    s
}

/// Arguments of `outboard sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// The experiment to run (listed below, with the profiles each runs on
    /// by default). Each prints its simulated figures beside the paper's,
    /// with the basis of each.
    #[arg(required_unless_present = "list_profiles")]
    pub experiment: Option<String>,
    /// Hardware profiles, comma-separated, one series each: built-in names
    /// (`--list-profiles`) or paths to profile TOML files (a file's series
    /// is named after the file). Default: the profiles of the experiment's
    /// paper. With a profile that prices the NIC collective protocol
    /// ([coll_proto]: elan3, gm2-lanaixp), `barrier` compares the
    /// protocol's barrier with the point-to-point and host-based ones.
    #[arg(long, value_delimiter = ',')]
    pub profile: Vec<String>,
    /// Node counts to sweep, comma-separated (each experiment has a
    /// default); for lock, the contenders; for bcast-bypass, Figure 6.6's
    /// machine sizes.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<u32>,
    /// Message sizes in bytes, comma-separated (each experiment has a
    /// default); for reduce-skew, the maximum delays in microseconds; for
    /// bcast-skew, the average skews in microseconds; for lock-cpu, the
    /// delays in microseconds.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<u32>,
    /// Seed for every random choice; the same seed gives the same figures.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Consecutive operations averaged per point.
    #[arg(long, default_value_t = 10)]
    pub iters: u32,
    /// Write the results as CSV to this file (qsnet-traffic also writes
    /// its latency histograms beside it, as NAME-hist.csv).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write a plot of the results as SVG to this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Print the built-in profiles and exit.
    #[arg(long)]
    pub list_profiles: bool,
}

/// Runs `outboard sim`.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    if args.list_profiles {
        for n in builtin_names() {
            let p = Profile::load(n)?;
            println!("{n:<12} {}", p.description);
        }
        return Ok(());
    }
    let experiment = args.experiment.unwrap_or_default();
    let names: Vec<&str> = if args.profile.is_empty() {
        let paper = paper_profiles(&experiment).ok_or_else(|| experiments::ExperimentError::Unknown(experiment.clone()))?;
        println!("profiles: {} (the paper's; --profile for others)", paper.join(", "));
        paper.to_vec()
    } else {
        args.profile.iter().map(String::as_str).collect()
    };
    let profiles = names.iter().map(|p| Profile::load(p)).collect::<Result<Vec<_>, _>>()?;
    let params = Params { profiles, nodes: args.nodes, sizes: args.sizes, seed: args.seed, iters: args.iters };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} points ({elapsed})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(experiment.clone());
    let mut progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    // qsnet-traffic also gives its latency histograms (written beside the
    // CSV and SVG as NAME-hist.csv / NAME-hist.svg).
    let (outcome, histograms) = if experiment == "qsnet-traffic" && !params.profiles.is_empty() {
        match experiments::qsnet::run_traffic_with_histograms(&params, &mut progress) {
            Ok((o, h)) => (Ok(o), Some(h)),
            Err(e) => (Err(e), None),
        }
    } else {
        (experiments::run(&experiment, &params, &mut progress), None)
    };
    bar.finish_and_clear();
    let outcome = outcome?;
    print!("{}", outcome.to_table());
    println!("seed {}", args.seed);
    if let Some(path) = &args.csv {
        std::fs::write(path, outcome.to_csv()).with_context(|| format!("writing {}", path.display()))?;
        println!("csv: {}", path.display());
    }
    if let Some(path) = &args.svg {
        let svg = outboard_sim::plot::outcome_svg(&outcome)?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        println!("svg: {}", path.display());
    }
    if let Some(h) = histograms {
        let beside = |p: &PathBuf| p.with_file_name(format!("{}-hist.{}", p.file_stem().unwrap_or_default().to_string_lossy(), p.extension().unwrap_or_default().to_string_lossy()));
        if let Some(path) = args.csv.as_ref().map(beside) {
            std::fs::write(&path, h.to_csv()).with_context(|| format!("writing {}", path.display()))?;
            println!("histograms csv: {}", path.display());
        }
        if let Some(path) = args.svg.as_ref().map(beside) {
            std::fs::write(&path, outboard_sim::plot::outcome_svg(&h)?).with_context(|| format!("writing {}", path.display()))?;
            println!("histograms svg: {}", path.display());
        }
    }
    Ok(())
}
