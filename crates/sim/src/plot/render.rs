//! Drawing a [`Figure`] with plotters' SVG backend.
//!
//! Text is left to the SVG viewer: with neither of plotters' font features
//! on, it estimates text sizes itself and writes `<text>` elements, so no
//! font file or system library is needed to build or to run.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{self, Axis};
use super::layout::{Figure, PanelRow};
use super::PlotError;

/// A panel's width: wider where there is one column.
const PANEL_W: u32 = 440;
const PANEL_W_ALONE: u32 = 620;
/// Pixels per x tick label ("256 KiB" at 12 px).
const TICK_W: u32 = 46;
const PANEL_H: u32 = 270;
/// Legend width: room for the longest label at ~7 px a character, within bounds.
const LEGEND_CHAR_W: u32 = 7;
const LEGEND_MIN_W: u32 = 140;
const LEGEND_MAX_W: u32 = 380;
const TITLE_LINE: u32 = 23;
/// The SVG names a generic family; plotters writes sizes at 1/1.24 of those
/// asked for (its text-box estimate), so 14 here is about 11 px in the file.
const FONT: &str = "sans-serif";

/// Series colours (colour-blind friendly, Okabe-Ito with a few more).
const COLORS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(140, 86, 75),
    RGBColor(148, 103, 189),
    RGBColor(188, 189, 34),
];
const GRID: RGBColor = RGBColor(225, 225, 225);
const PAPER: RGBColor = BLACK;

/// An [`Axis`] as a plotters coordinate: linear in the drawn space, with
/// exactly the axis's ticks as mesh lines and labels.
struct Ticked<'a>(&'a Axis);

impl Ranged for Ticked<'_> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = (v - self.0.lo) / (self.0.hi - self.0.lo);
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.0.positions()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.0.lo..self.0.hi
    }
}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// The SVG document for `f`.
pub fn svg(f: &Figure) -> Result<String, PlotError> {
    let cols = f.columns.len().max(1) as u32;
    let panel_w = if cols == 1 { PANEL_W_ALONE } else { PANEL_W };
    let legend_w = legend_width(f);
    let width = legend_w + cols * panel_w;
    let title = wrap(&f.title, (width as usize - 40) / 9);
    let top = 12 + TITLE_LINE * title.len() as u32;
    let rows = f.rows.len().max(1) as u32;
    let height = top + rows * PANEL_H;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let font = (FONT, 20).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        for (i, line) in title.iter().enumerate() {
            root.draw(&Text::new(line.as_str(), (width as i32 / 2, 8 + (TITLE_LINE as i32) * i as i32), font.clone()))
                .map_err(draw_err)?;
        }
        let (_, body) = root.split_vertically(top);
        if f.rows.is_empty() {
            let style = (FONT, 15).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center));
            body.draw(&Text::new("no results", (width as i32 / 2, PANEL_H as i32 / 2), style)).map_err(draw_err)?;
        } else {
            let xs: Vec<f64> = f.rows.iter().flat_map(|r| r.lines.iter()).flat_map(|l| l.points.iter()).map(|p| p.x).collect();
            let x = axis::x_axis(&xs, f.x_unit, ((panel_w - 90) / TICK_W) as usize);
            for (i, (row, area)) in f.rows.iter().zip(body.split_evenly((f.rows.len(), 1))).enumerate() {
                let last = i + 1 == f.rows.len();
                draw_row(f, row, &area, &x, last, legend_w)?;
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

/// One row of panels and its legend.
fn draw_row<DB: DrawingBackend>(
    f: &Figure,
    row: &PanelRow,
    area: &DrawingArea<DB, Shift>,
    x: &Axis,
    last: bool,
    legend_w: u32,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let ys: Vec<f64> = row
        .lines
        .iter()
        .flat_map(|l| l.points.iter())
        .flat_map(|p| std::iter::once(p.y).chain(p.paper))
        .collect();
    let reference = match row.unit.as_str() {
        "x" => Some(1.0),
        "" | "%" => None,
        _ => Some(0.0),
    };
    let y = axis::y_axis(&ys, reference);
    let (plots, legend) = area.split_horizontally(area.dim_in_pixel().0 - legend_w);
    let cells = plots.split_evenly((1, f.columns.len().max(1)));
    for (c, cell) in cells.iter().enumerate() {
        let mut b = ChartBuilder::on(cell);
        b.margin(8).margin_right(16).x_label_area_size(if last { 42 } else { 24 }).y_label_area_size(if c == 0 { 64 } else { 44 });
        if !f.columns[c].is_empty() {
            b.caption(&f.columns[c], (FONT, 16));
        }
        let mut chart = b
            .build_cartesian_2d(Ticked(x), Ticked(&y))
            .map_err(draw_err)?;
        let xl = |v: &f64| x.label_at(*v);
        let yl = |v: &f64| y.label_at(*v);
        let mut mesh = chart.configure_mesh();
        mesh.x_label_formatter(&xl)
            .y_label_formatter(&yl)
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15));
        if last {
            mesh.x_desc(f.x_label.as_str());
        }
        if c == 0 {
            mesh.y_desc(row.y_label.as_str());
        }
        mesh.draw().map_err(draw_err)?;
        if let Some(r) = reference.filter(|&r| r != 0.0).and_then(|r| y.place(r)) {
            chart
                .draw_series(DashedLineSeries::new(vec![(x.lo, r), (x.hi, r)], 6, 4, RGBColor(90, 90, 90).stroke_width(1)))
                .map_err(draw_err)?;
        }
        let pa = chart.plotting_area();
        for line in &row.lines {
            let (color, style) = look(f, line.series, line.metric);
            let mut pts: Vec<(f64, f64)> = line
                .points
                .iter()
                .filter(|p| p.column == c)
                .filter_map(|p| Some((x.place(p.x)?, y.place(p.y)?)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let stroke = color.stroke_width(2);
            if dashed(style) {
                for dash in DashedLineSeries::new(pts.clone(), 7, 4, stroke) {
                    pa.draw(&dash).map_err(draw_err)?;
                }
            } else {
                pa.draw(&PathElement::new(pts.clone(), stroke)).map_err(draw_err)?;
            }
            for p in pts {
                marker(pa, p, style, color)?;
            }
        }
        for line in &row.lines {
            for p in line.points.iter().filter(|p| p.column == c) {
                if let (Some(px), Some(py)) = (x.place(p.x), p.paper.and_then(|v| y.place(v))) {
                    pa.draw(&Circle::new((px, py), 6, PAPER.stroke_width(2))).map_err(draw_err)?;
                }
            }
        }
    }
    draw_legend(f, row, &legend, legend_w)
}

/// The colour and style (line dash and marker) of a (series, metric) line.
fn look(f: &Figure, series: usize, metric: usize) -> (RGBColor, usize) {
    if f.color_by_series {
        (COLORS[series % COLORS.len()], metric)
    } else {
        (COLORS[metric % COLORS.len()], 0)
    }
}

/// Whether lines of style `style` are dashed: styles 0-7 are the eight
/// (marker, dash) pairs, solid and dashed alternating.
fn dashed(style: usize) -> bool {
    (style + style / 4) % 2 == 1
}

/// The marker of style `style` at `at`: circle, triangle, square, diamond.
fn marker<DB: DrawingBackend, CT: CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    style: usize,
    color: RGBColor,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let fill = color.filled();
    let e = EmptyElement::at(at);
    match style % 4 {
        0 => area.draw(&(e + Circle::new((0, 0), 4, fill))),
        1 => area.draw(&(e + TriangleMarker::new((0, 0), 5, fill))),
        2 => area.draw(&(e + Rectangle::new([(-4, -4), (4, 4)], fill))),
        _ => area.draw(&(e + Polygon::new(vec![(0, -5), (5, 0), (0, 5), (-5, 0)], fill))),
    }
    .map_err(draw_err)
}

/// The legend beside a row: the series' colours, the metrics' styles,
/// and the paper's marker where the row has a paper value.
fn draw_legend<DB: DrawingBackend>(
    f: &Figure,
    row: &PanelRow,
    area: &DrawingArea<DB, Shift>,
    legend_w: u32,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let mut entries: Vec<(String, RGBColor, Option<usize>)> = Vec::new();
    if f.color_by_series {
        let mut seen: Vec<usize> = row.lines.iter().map(|l| l.series).collect();
        seen.sort_unstable();
        seen.dedup();
        // The metrics' styles first: a long list of series is cut, not them.
        if row.metrics.len() > 1 {
            entries.extend(row.metrics.iter().enumerate().map(|(i, m)| (m.clone(), RGBColor(60, 60, 60), Some(i))));
        }
        entries.extend(seen.iter().map(|&s| (f.series[s].clone(), COLORS[s % COLORS.len()], None)));
    } else {
        entries.extend(row.metrics.iter().enumerate().map(|(i, m)| (m.clone(), COLORS[i % COLORS.len()], Some(0))));
    }
    let has_paper = row.lines.iter().flat_map(|l| l.points.iter()).any(|p| p.paper.is_some_and(f64::is_finite));
    // Past what fits beside the row, the last line says how many are left
    // out (the table lists them all).
    let height = area.dim_in_pixel().1 as i32;
    let step = if (entries.len() as i32 + 2) * 18 + 20 <= height { 18 } else { 15 };
    let room = ((height - 20) / step - 2).max(1) as usize;
    let left_out = entries.len().saturating_sub(room);
    if left_out > 0 {
        entries.truncate(room - 1);
    }
    let text = (FONT, 14).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let max_chars = ((legend_w - 50) / LEGEND_CHAR_W) as usize;
    let mut yy = 20;
    if !f.color_by_series {
        if let Some(name) = f.series.first() {
            let bold = (FONT, 15, FontStyle::Bold).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
            area.draw(&Text::new(clip(name, max_chars), (8, yy), bold)).map_err(draw_err)?;
            yy += step;
        }
    }
    for (label, color, style) in &entries {
        let stroke = color.stroke_width(2);
        if style.is_some_and(dashed) {
            area.draw(&PathElement::new(vec![(2, yy), (9, yy)], stroke)).map_err(draw_err)?;
            area.draw(&PathElement::new(vec![(27, yy), (34, yy)], stroke)).map_err(draw_err)?;
        } else {
            area.draw(&PathElement::new(vec![(2, yy), (34, yy)], stroke)).map_err(draw_err)?;
        }
        marker(area, (18, yy), style.unwrap_or(0), *color)?;
        area.draw(&Text::new(clip(label, max_chars), (42, yy), text.clone())).map_err(draw_err)?;
        yy += step;
    }
    if left_out > 0 {
        let more = format!("... {} more (see the table)", left_out + 1);
        area.draw(&Text::new(more, (8, yy), text.clone())).map_err(draw_err)?;
        yy += step;
    }
    if has_paper {
        area.draw(&Circle::new((18, yy), 6, PAPER.stroke_width(2))).map_err(draw_err)?;
        area.draw(&Text::new("paper", (42, yy), text)).map_err(draw_err)?;
    }
    Ok(())
}

/// The legend's width for the figure's longest label.
fn legend_width(f: &Figure) -> u32 {
    let metrics = f.rows.iter().flat_map(|r| r.metrics.iter());
    let longest = f.series.iter().chain(metrics).map(|s| s.chars().count()).max().unwrap_or(0) as u32;
    (50 + LEGEND_CHAR_W * longest).clamp(LEGEND_MIN_W, LEGEND_MAX_W)
}

/// `s` cut to `n` characters, with an ellipsis where cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n.saturating_sub(1)).chain(std::iter::once('…')).collect()
    }
}

/// `s` broken at spaces into lines of at most `n` characters.
fn wrap(s: &str, n: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in s.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > n {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}
