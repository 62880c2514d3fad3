//! `outboard reproduce --quick`, run in-process once, checked against the
//! calibration record and against the figures committed in `docs/figures/`.
//!
//! The record is the list: every figure it says was fitted still comes out
//! within its fit's tolerance, every figure that misses is explained there
//! and every explained one still misses, every id it names is printed by
//! some run. And the committed tables are exactly what the code prints, so
//! docs cannot drift from the simulator. After a change that moves figures
//! on purpose: `outboard reproduce --quick --out docs/figures`.

use std::sync::OnceLock;

use outboard_sim::calibration::{profile_of_series, Basis, Record};
use outboard_sim::reproduce::{self, Report};

fn quick() -> &'static Report {
    static REPORT: OnceLock<Report> = OnceLock::new();
    REPORT.get_or_init(|| reproduce::run_all(true, &mut |_, _, _| {}).expect("every quick run succeeds"))
}

fn docs(name: &str) -> String {
    let path = format!("{}/../../docs/figures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_fitted_figure_is_within_its_fits_tolerance() {
    let record = Record::builtin();
    let mut checked = 0;
    for c in quick().compared().iter().filter(|c| c.basis() == Basis::Calibrated) {
        let id = c.row.paper_id.as_deref().unwrap();
        let tol = record.tolerance(c.profile(), id);
        let d = c.row.rel_diff().unwrap();
        assert!(d.abs() <= tol, "{id} ({}): {:+.2} % from the paper, fit tolerance {:.1} %: refit the profile", c.row.series, d * 100.0, tol * 100.0);
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} fitted figures printed");
}

#[test]
fn every_miss_is_explained_and_every_explained_miss_still_misses() {
    let record = Record::builtin();
    let compared = quick().compared();
    for c in &compared {
        let id = c.row.paper_id.as_deref().unwrap();
        let listed = record.known_miss(c.profile(), id);
        if c.misses() {
            assert!(listed, "{id} ({}) misses by {:+.1} % and data/calibration.toml does not say why", c.row.series, c.row.rel_diff().unwrap() * 100.0);
        }
    }
    for m in &record.known_misses {
        for id in &m.ids {
            let rows: Vec<_> = compared.iter().filter(|c| c.row.paper_id.as_deref() == Some(id.as_str()) && m.profiles.iter().any(|p| p == c.profile())).collect();
            assert!(!rows.is_empty(), "known miss {id} is printed by no run");
            assert!(rows.iter().any(|c| c.misses()), "{id} no longer misses: take it out of the known misses");
        }
    }
}

#[test]
fn every_id_the_record_names_is_printed_for_its_profiles() {
    let compared = quick().compared();
    for (id, profiles) in Record::builtin().ids() {
        let printed = |p: Option<&str>| compared.iter().any(|c| c.row.paper_id.as_deref() == Some(id.as_str()) && p.is_none_or(|p| profile_of_series(&c.row.series) == p));
        if profiles.is_empty() {
            assert!(printed(None), "{id} is printed by no run");
        }
        // A [[fit]] may name profiles that copy a parameter without
        // printing the figure (gm-lanai43's float cost): it is enough
        // that one of them prints it.
        assert!(profiles.is_empty() || profiles.iter().any(|p| printed(Some(p))), "{id} is printed for none of {profiles:?}");
    }
}

#[test]
fn every_compared_row_has_a_basis_and_the_summary_adds_up() {
    let report = quick();
    let compared = report.compared();
    assert!(compared.iter().all(|c| c.row.basis.is_some()));
    let s = report.summary();
    assert_eq!(s.predicted + s.calibrated + s.informed, compared.len());
    assert!(report.figures_md().trim_end().ends_with(&s.line()));
}

#[test]
fn the_committed_figures_are_what_the_simulator_prints() {
    let report = quick();
    assert!(docs("figures.md") == report.figures_md(), "docs/figures/figures.md is stale: run `outboard reproduce --quick --out docs/figures`");
    assert!(docs("figures.csv") == report.figures_csv(), "docs/figures/figures.csv is stale: run `outboard reproduce --quick --out docs/figures`");
    for r in &report.results {
        assert!(docs(&format!("{}.csv", r.run.slug)) == r.outcome.to_csv(), "docs/figures/{}.csv is stale", r.run.slug);
    }
}
