//! A small SVG line-chart writer.
//!
//! Why not `plotters`: its SVG backend alone pulls in a font stack and a
//! dozen crates, a noticeable build on the shared 2-core CI machine, for
//! what is a few polylines, two axes and a legend. This writer does only
//! that, with a log scale for size sweeps, and escapes every label.

use std::fmt::Write as _;

/// One line of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// A chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Y-axis label.
    pub y_label: String,
    /// Log2 x axis (sizes, node counts).
    pub log_x: bool,
    /// The lines.
    pub series: Vec<Series>,
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn nice(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 || v.abs() < 0.01 {
        format!("{v:.3e}")
    } else {
        format!("{}", (v * 1000.0).round() / 1000.0)
    }
}

impl Chart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let pts = self.series.iter().flat_map(|s| s.points.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
        let tx = |x: f64| if self.log_x { x.max(1e-9).log2() } else { x };
        let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
        for &(x, y) in pts {
            x0 = x0.min(tx(x));
            x1 = x1.max(tx(x));
            y1 = y1.max(y);
        }
        if !x0.is_finite() {
            (x0, x1, y1) = (0.0, 1.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let y0 = 0.0;
        if y1 <= y0 {
            y1 = 1.0;
        }
        y1 *= 1.05;
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let px = |x: f64| LEFT + (tx(x) - x0) / (x1 - x0) * pw;
        let py = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + pw / 2.0,
            esc(&self.title)
        );
        let _ = writeln!(
            s,
            r##"<g stroke="#888" fill="none"><line x1="{LEFT}" y1="{}" x2="{}" y2="{}"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}"/></g>"##,
            TOP + ph,
            LEFT + pw,
            TOP + ph,
            TOP + ph
        );
        for i in 0..=5 {
            let v = y0 + (y1 - y0) * f64::from(i) / 5.0;
            let y = py(v);
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{y}" x2="{LEFT}" y2="{y}" stroke="#888"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                LEFT - 5.0,
                LEFT - 8.0,
                y + 4.0,
                nice(v)
            );
        }
        let mut xticks: Vec<f64> = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
        xticks.sort_by(f64::total_cmp);
        xticks.dedup();
        let step = xticks.len().div_ceil(10).max(1);
        for x in xticks.iter().step_by(step) {
            let xx = px(*x);
            let _ = writeln!(
                s,
                r##"<line x1="{xx}" y1="{}" x2="{xx}" y2="{}" stroke="#888"/><text x="{xx}" y="{}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 5.0,
                TOP + ph + 18.0,
                nice(*x)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 15.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + ph / 2.0,
            esc(&self.y_label)
        );
        for (i, ser) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let path: Vec<String> = ser
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| format!("{:.2},{:.2}", px(x), py(y)))
                .collect();
            let _ = writeln!(s, r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#, path.join(" "));
            for p in &path {
                let (x, y) = p.split_once(',').expect("formatted above");
                let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#);
            }
            let ly = TOP + 10.0 + 18.0 * i as f64;
            let lx = LEFT + pw + 12.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                lx + 20.0,
                lx + 25.0,
                ly + 4.0,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_a_polyline_per_series_and_escapes_labels() {
        let c = Chart {
            title: "a < b".into(),
            x_label: "bytes".into(),
            y_label: "us".into(),
            log_x: true,
            series: vec![
                Series { name: "x&y".into(), points: vec![(1.0, 2.0), (1024.0, 10.0)] },
                Series { name: "z".into(), points: vec![(2.0, 3.0)] },
            ],
        };
        let svg = c.to_svg();
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b") && svg.contains("x&amp;y"));
    }
}
