//! `outboard reproduce`: regenerate every compared figure of the project.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use outboard_sim::reproduce;

/// Arguments of `outboard reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Fewer operations per point and no large-machine extensions (under
    /// 10 minutes on a 2-core machine); without it, the full counts.
    #[arg(long)]
    pub quick: bool,
    /// Where to write figures.md, figures.csv, one CSV and one SVG plot
    /// per run.
    #[arg(long, default_value = "figures")]
    pub out: PathBuf,
    /// Only these runs (comma-separated slugs, e.g. barrier,reduce-skew;
    /// an unknown one is refused with the list); default: every run.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// Runs `outboard reproduce`.
pub fn run(args: ReproduceArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let start = Instant::now();
    let report = reproduce::run_some(args.quick, &args.only, &mut |run, done, total| {
        eprintln!("[{}/{total}] {} ({:.0} s)", done + 1, run.command(args.quick), start.elapsed().as_secs_f64());
    })?;
    let write = |name: &str, text: String| -> anyhow::Result<()> {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    for r in &report.results {
        write(&format!("{}.csv", r.run.slug), r.outcome.to_csv())?;
        write(&format!("{}.svg", r.run.slug), outboard_sim::plot::outcome_svg(&r.outcome)?)?;
    }
    write("figures.csv", report.figures_csv())?;
    write("figures.md", report.figures_md())?;
    println!("{}", report.summary().line());
    println!("wrote {} ({:.0} s)", args.out.join("figures.md").display(), start.elapsed().as_secs_f64());
    Ok(())
}
