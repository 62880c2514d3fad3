//! An experiment's results as an SVG chart.
//!
//! [`outcome_svg`] draws every metric of an [`Outcome`]: one row of panels
//! per unit (both forms' latencies together, the factor of improvement in a
//! row of its own), a line with markers per (series, metric), the paper's
//! values as hollow black circles at the same x, log2 x axes where the
//! swept values double, round tick labels. `layout` decides what goes
//! where, `axis` the scales and ticks, `render` draws it with plotters'
//! SVG backend (no fonts or system libraries needed: the viewer renders
//! the text).

use thiserror::Error;

use crate::experiments::Outcome;

mod axis;
mod layout;
mod render;

/// The chart could not be drawn.
#[derive(Debug, Error)]
pub enum PlotError {
    /// The drawing library failed.
    #[error("drawing the chart: {0}")]
    Draw(String),
}

/// The outcome's chart as an SVG document.
pub fn outcome_svg(outcome: &Outcome) -> Result<String, PlotError> {
    render::svg(&layout::figure(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::{Row, XAxis};

    fn outcome(rows: Vec<Row>) -> Outcome {
        Outcome { title: "Barrier: host-based vs offloaded".into(), x: XAxis::Nodes, rows, notes: vec![] }
    }

    fn with_paper(mut r: Row, v: f64) -> Row {
        r.paper = Some(v);
        r.paper_id = Some("id".into());
        r
    }

    /// The texts of the SVG's <text> elements.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text").skip(1).filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string())).collect()
    }

    fn barrier() -> Outcome {
        let mut rows = Vec::new();
        for (s, k) in [("gm-lanai43 PE", 1.0), ("gm-lanai72 PE", 0.6)] {
            for n in [2u32, 4, 8, 16] {
                let host = 45.0 * k * f64::from(n).log2();
                let nic = host / 1.6;
                let mut h = Row::new(s, n, 0, "host", host, "us");
                let mut f = Row::new(s, n, 0, "factor", host / nic, "x");
                if n == 16 {
                    h = with_paper(h, host * 1.02);
                    f = with_paper(f, 1.7);
                }
                rows.extend([h, Row::new(s, n, 0, "nic", nic, "us"), f]);
            }
        }
        outcome(rows)
    }

    #[test]
    fn both_forms_share_a_panel_and_the_factor_has_its_own() {
        let f = layout::figure(&barrier());
        assert_eq!(f.rows.len(), 2);
        assert_eq!(f.rows[0].metrics, ["host", "nic"]);
        assert_eq!(f.rows[1].metrics, ["factor"]);
        assert_eq!(f.rows[0].lines.len(), 4);
        assert_eq!(f.series, ["gm-lanai43 PE", "gm-lanai72 PE"]);
    }

    #[test]
    fn the_svg_has_title_legend_paper_and_log_ticks() {
        let svg = outcome_svg(&barrier()).unwrap();
        let t = texts(&svg);
        for want in ["gm-lanai43 PE", "gm-lanai72 PE", "host", "nic", "paper", "nodes", "host, nic (us)", "factor (x)"] {
            assert!(t.iter().any(|x| x == want), "no {want:?} in {t:?}");
        }
        assert!(t.iter().any(|x| x.contains("host-based vs offloaded")));
        // Two panels, each with the power-of-two node ticks.
        for n in ["2", "4", "8", "16"] {
            assert_eq!(t.iter().filter(|x| *x == n).count(), 2, "tick {n} in {t:?}");
        }
        // Round y labels only.
        assert!(t.iter().all(|x| x.parse::<f64>().map_or(true, |_| x.len() <= 5)), "{t:?}");
        assert!(svg.matches("<circle").count() >= 4, "paper markers");
    }

    #[test]
    fn a_size_sweep_at_several_node_counts_gets_a_column_each() {
        let mut rows = Vec::new();
        for n in [4u32, 16] {
            for s in [0u32, 64, 1024, 16384] {
                rows.push(Row::new("fm", n, s, "latency", 10.0 + f64::from(s) / 100.0, "us"));
            }
        }
        let o = Outcome { title: "t".into(), x: XAxis::Size, rows, notes: vec![] };
        let f = layout::figure(&o);
        assert_eq!(f.columns, ["4 nodes", "16 nodes"]);
        let t = texts(&outcome_svg(&o).unwrap());
        assert!(t.iter().any(|x| x == "1 KiB") && t.iter().any(|x| x == "0"), "{t:?}");
    }

    #[test]
    fn empty_and_nan_outcomes_draw_without_panicking() {
        let svg = outcome_svg(&outcome(vec![])).unwrap();
        assert!(svg.contains("no results"));
        let rows = vec![
            Row::new("a", 2, 0, "host", f64::NAN, "us"),
            Row::new("a", 4, 0, "host", f64::INFINITY, "us"),
            Row::new("a", 8, 0, "host", 3.0, "us"),
        ];
        assert!(outcome_svg(&outcome(rows)).unwrap().starts_with("<svg"));
        let nan_only = vec![Row::new("a", 2, 0, "host", f64::NAN, "us")];
        assert!(outcome_svg(&outcome(nan_only)).is_ok());
    }

    #[test]
    fn labels_are_escaped() {
        let o = Outcome { title: "a < b & c".into(), ..outcome(vec![Row::new("x<y", 2, 0, "m", 1.0, "us")]) };
        let svg = outcome_svg(&o).unwrap();
        assert!(svg.contains("a &lt; b &amp; c") && svg.contains("x&lt;y"));
    }
}
