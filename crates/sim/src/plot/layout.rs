//! How an outcome's rows become panels and lines.
//!
//! The experiments put the compared forms in the metric ("host", "nic") and
//! the profile and variant in the series, so a panel holds one unit (both
//! forms' latencies together, the factor below them) and a line is one
//! (series, metric). Colour tells the series apart, line style and marker
//! the metric. Where an outcome sweeps a second parameter besides the x axis
//! (sizes at several node counts), each of its values gets its own column of
//! panels, or, past [`MAX_COLUMNS`], its own lines.

use super::axis::XUnit;
use crate::experiments::{Outcome, Row, XAxis};

/// More values of the second swept parameter than this become lines.
pub const MAX_COLUMNS: usize = 4;

/// What to draw, in data units.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The outcome's title.
    pub title: String,
    /// The x axis's description.
    pub x_label: String,
    /// How x values are labelled.
    pub x_unit: XUnit,
    /// One caption per column of panels ("16 nodes"); a single empty one
    /// when there is one column.
    pub columns: Vec<String>,
    /// One row of panels per unit (or magnitude within a unit).
    pub rows: Vec<PanelRow>,
    /// The series' names, in order: the colour of series `i` is colour `i`.
    pub series: Vec<String>,
    /// Whether colour tells the series apart (else it tells the metrics
    /// apart, as for a single series).
    pub color_by_series: bool,
}

/// One row of panels: values of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelRow {
    /// The unit ("us", "x"; may be empty).
    pub unit: String,
    /// The y axis's description.
    pub y_label: String,
    /// The metrics in this row, in order: the style of metric `i` is style `i`.
    pub metrics: Vec<String>,
    /// The lines.
    pub lines: Vec<Line>,
}

/// One line: a series' metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Index into [`Figure::series`].
    pub series: usize,
    /// Index into [`PanelRow::metrics`].
    pub metric: usize,
    /// The points, in the rows' order.
    pub points: Vec<Point>,
}

/// One simulated value and the paper's, where it quotes one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The column of panels it is drawn in.
    pub column: usize,
    /// x in data units.
    pub x: f64,
    /// The simulated value.
    pub y: f64,
    /// The paper's value.
    pub paper: Option<f64>,
}

/// The figure for `o`.
pub fn figure(o: &Outcome) -> Figure {
    let nodes = |r: &Row| f64::from(r.nodes);
    let size = |r: &Row| f64::from(r.size);
    let distinct = |f: &dyn Fn(&Row) -> f64| {
        let mut v: Vec<f64> = o.rows.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    // An outcome that declares one axis but holds a single value there and
    // sweeps the other (the skew experiments keep a delay in the bytes
    // column) is drawn against what it sweeps.
    let declared_size = o.x != XAxis::Nodes;
    let count = |on_size: bool| if on_size { distinct(&size).len() } else { distinct(&nodes).len() };
    let swapped = count(declared_size) <= 1 && count(!declared_size) > 1;
    let x_is_size = declared_size != swapped;
    let x_of = |r: &Row| if x_is_size { size(r) } else { nodes(r) };
    let other_of = |r: &Row| if x_is_size { nodes(r) } else { size(r) };
    let (x_unit, x_label) = match (x_is_size, swapped, o.x) {
        (false, _, _) => (XUnit::Nodes, "nodes".to_string()),
        (true, false, XAxis::Column(label)) => (XUnit::Plain, label.to_string()),
        (true, false, _) => (XUnit::Bytes, "message size".to_string()),
        (true, true, _) => (XUnit::Plain, "bytes column (see the table's notes)".to_string()),
    };
    let other_label = |v: f64| {
        if x_is_size {
            format!("{v:.0} nodes")
        } else if swapped {
            format!("{v:.0}")
        } else {
            super::axis::bytes_label(v)
        }
    };

    // A second parameter is swept where one (series, metric) holds several
    // of its values.
    let mut groups: Vec<(&str, &str, Vec<f64>)> = Vec::new();
    for r in &o.rows {
        match groups.iter_mut().find(|g| g.0 == r.series && g.1 == r.metric) {
            Some(g) => g.2.push(other_of(r)),
            None => groups.push((&r.series, r.metric, vec![other_of(r)])),
        }
    }
    let split = groups.iter().any(|g| g.2.iter().any(|&v| v != g.2[0]));
    let others = distinct(&other_of);
    let as_columns = split && others.len() <= MAX_COLUMNS;
    let columns: Vec<String> =
        if as_columns { others.iter().map(|&v| other_label(v)).collect() } else { vec![String::new()] };
    let column_of = |r: &Row| {
        if as_columns {
            others.iter().position(|&v| v == other_of(r)).unwrap_or(0)
        } else {
            0
        }
    };
    let series_of = |r: &Row| {
        if split && !as_columns {
            format!("{} ({})", r.series, other_label(other_of(r)))
        } else {
            r.series.clone()
        }
    };

    let mut series: Vec<String> = Vec::new();
    for r in &o.rows {
        let s = series_of(r);
        if !series.contains(&s) {
            series.push(s);
        }
    }

    let rows = panel_rows(o)
        .into_iter()
        .map(|(unit, metrics)| {
            let mut lines: Vec<Line> = Vec::new();
            for r in o.rows.iter().filter(|r| metrics.iter().any(|m| m == r.metric)) {
                let s = series.iter().position(|x| *x == series_of(r)).unwrap_or(0);
                let m = metrics.iter().position(|x| x == r.metric).unwrap_or(0);
                let p = Point { column: column_of(r), x: x_of(r), y: r.value, paper: r.paper };
                match lines.iter_mut().find(|l| l.series == s && l.metric == m) {
                    Some(l) => l.points.push(p),
                    None => lines.push(Line { series: s, metric: m, points: vec![p] }),
                }
            }
            let names = axis_title(&metrics);
            let y_label = if unit.is_empty() { names } else { format!("{names} ({unit})") };
            PanelRow { unit, y_label, metrics, lines }
        })
        .collect();

    Figure {
        title: o.title.clone(),
        x_label,
        x_unit,
        columns,
        rows,
        color_by_series: series.len() > 1,
        series,
    }
}

/// The rows of panels: (unit, metrics), one per unit in order of first
/// appearance, with metrics ten times smaller than the unit's largest moved
/// to a row of their own (an overhead of a few us would be a flat line under
/// latencies of hundreds).
fn panel_rows(o: &Outcome) -> Vec<(String, Vec<String>)> {
    let mut units: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for r in &o.rows {
        let v = if r.value.is_finite() { r.value.abs() } else { 0.0 };
        let u = match units.iter_mut().position(|u| u.0 == r.unit) {
            Some(i) => &mut units[i],
            None => {
                units.push((r.unit.to_string(), Vec::new()));
                units.last_mut().expect("just pushed")
            }
        };
        match u.1.iter_mut().find(|m| m.0 == r.metric) {
            Some(m) => m.1 = m.1.max(v),
            None => u.1.push((r.metric.to_string(), v)),
        }
    }
    let mut out = Vec::new();
    for (unit, metrics) in units {
        let top = metrics.iter().map(|m| m.1).fold(0.0, f64::max);
        let (big, small): (Vec<_>, Vec<_>) = metrics.into_iter().partition(|m| m.1 * 10.0 >= top);
        for part in [big, small] {
            if !part.is_empty() {
                out.push((unit.clone(), part.into_iter().map(|m| m.0).collect()));
            }
        }
    }
    out
}

/// A panel's y-axis title: its one metric, else the words all its metrics
/// have (`one-way` for `one-way mpi-eager` and `one-way mpi-rndv`,
/// `factor` for `factor` and `max factor`), else their names if they are
/// short, else `value`. The
/// legend tells the metrics apart; a title listing long names ran past the
/// panel's height.
fn axis_title(metrics: &[String]) -> String {
    match metrics {
        [] => "value".into(),
        [one] => one.clone(),
        [first, rest @ ..] => {
            // Words every metric has, in the first one's order.
            let common: Vec<&str> = first.split(' ').filter(|w| rest.iter().all(|m| m.split(' ').any(|x| x == *w))).collect();
            let all = metrics.join(", ");
            if !common.is_empty() {
                common.join(" ")
            } else if all.len() <= 36 {
                all
            } else {
                "value".into()
            }
        }
    }
}

#[cfg(test)]
mod axis_title_tests {
    use super::axis_title;

    #[test]
    fn a_panel_of_several_metrics_is_titled_by_the_words_they_share() {
        let t = |m: &[&str]| axis_title(&m.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(t(&["one-way"]), "one-way");
        assert_eq!(t(&["one-way mpi-eager", "one-way mpi-rndv"]), "one-way");
        assert_eq!(t(&["bandwidth", "bandwidth mpi-eager", "bandwidth mpi-rndv"]), "bandwidth");
        assert_eq!(t(&["latency", "factor"]), "latency, factor");
        assert_eq!(t(&["factor", "factor postal", "max factor"]), "factor");
        assert_eq!(t(&["host binomial", "nic binomial", "nic postal"]), "value");
        assert_eq!(t(&[]), "value");
    }
}
