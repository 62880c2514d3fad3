//! Axis scales and tick marks.
//!
//! The chart draws in a transformed space (log2 for doubling x values,
//! log10 for y values spanning decades), so the ticks are chosen here, at
//! values a reader expects (powers of two, 1-2-5 steps), each with the label
//! it is printed with: the drawing library only places them.

/// How the x values are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XUnit {
    /// Node counts: plain integers.
    Nodes,
    /// Message sizes: "B", "KiB", "MiB".
    Bytes,
    /// A plain number (a column that holds something other than a size).
    Plain,
}

/// One axis: the drawn range in transformed space, the scale, the ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Drawn range, in transformed space.
    pub lo: f64,
    /// Drawn range, in transformed space.
    pub hi: f64,
    /// How data values map to the drawn space.
    pub scale: Scale,
    /// Tick positions (transformed space) and their labels.
    pub ticks: Vec<(f64, String)>,
}

/// How a data value maps to the drawn space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    /// Unchanged.
    Linear,
    /// log2; a zero is drawn at `zero` (one step left of the smallest
    /// positive value), since a size sweep often starts at 0 bytes.
    Log2 {
        /// Where 0 is drawn.
        zero: f64,
    },
    /// log10 (only positive values reach it).
    Log10,
}

impl Axis {
    /// Where `v` is drawn, or `None` where it cannot be (NaN, or not
    /// positive on a log scale).
    pub fn place(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        match self.scale {
            Scale::Linear => Some(v),
            Scale::Log2 { zero } if v == 0.0 => Some(zero),
            Scale::Log2 { .. } => (v > 0.0).then(|| v.log2()),
            Scale::Log10 => (v > 0.0).then(|| v.log10()),
        }
    }

    /// The label of the tick at drawn position `p` (empty if none is there).
    pub fn label_at(&self, p: f64) -> String {
        let tol = (self.hi - self.lo).abs() * 1e-6;
        self.ticks.iter().find(|(t, _)| (t - p).abs() <= tol).map(|(_, l)| l.clone()).unwrap_or_default()
    }

    /// The tick positions.
    pub fn positions(&self) -> Vec<f64> {
        self.ticks.iter().map(|t| t.0).collect()
    }
}

/// The x axis for these values, with at most `max_ticks` labels (the
/// panel's width decides): log2 where node counts or sizes double, or the
/// values span more than 8x (ticks at powers of two), linear otherwise
/// (integer ticks for nodes).
pub fn x_axis(values: &[f64], unit: XUnit, max_ticks: usize) -> Axis {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let pos: Vec<f64> = v.iter().copied().filter(|&x| x > 0.0).collect();
    let has_zero = v.first() == Some(&0.0);
    // Doubling counts for node counts and sizes, not for a plain column
    // (delays of 0, 200, 1000 us read better on a linear axis).
    let doubling = unit != XUnit::Plain && pos.len() >= 2 && pos.windows(2).all(|w| w[1] / w[0] >= 1.9);
    let log = v.iter().all(|&x| x >= 0.0)
        && pos.len() >= 2
        && (doubling || pos[pos.len() - 1] / pos[0] > 8.0);
    if log {
        log2_axis(&pos, has_zero, unit, max_ticks)
    } else {
        linear_x_axis(&v, unit, max_ticks)
    }
}

fn log2_axis(pos: &[f64], has_zero: bool, unit: XUnit, max_ticks: usize) -> Axis {
    let e0 = pos[0].log2().floor() as i32;
    let e1 = pos[pos.len() - 1].log2().ceil() as i32;
    // Every power of two, or every 2nd (4, 16, 64), 3rd (8, 64, 512),
    // 4th (16, 256, 4 KiB) ... with a tick left for 0 where it is drawn.
    let span = (e1 - e0 + 1) as usize;
    let room = max_ticks.saturating_sub(usize::from(has_zero)).max(2);
    let step: i32 = [1, 2, 3, 4, 5, 10].into_iter().find(|&s: &i32| span.div_ceil(s as usize) <= room).unwrap_or(10);
    let mut ticks: Vec<(f64, String)> = (e0..=e1)
        .filter(|e| e.rem_euclid(step) == 0)
        .map(|e| (f64::from(e), x_label(2f64.powi(e), unit)))
        .collect();
    let zero = f64::from(e0.div_euclid(step) * step - step);
    if has_zero {
        ticks.insert(0, (zero, "0".into()));
    }
    let lo = if has_zero { zero } else { f64::from(e0) } - 0.3;
    Axis { lo, hi: f64::from(e1) + 0.3, scale: Scale::Log2 { zero }, ticks }
}

fn linear_x_axis(v: &[f64], unit: XUnit, max_ticks: usize) -> Axis {
    let (min, max) = match (v.first(), v.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0.0, 1.0),
    };
    let integer = unit != XUnit::Plain || v.iter().all(|x| x.fract() == 0.0);
    let mut step = nice_step((max - min) / max_ticks.saturating_sub(1).max(1) as f64);
    if integer {
        step = step.max(1.0).round();
    }
    let pad = if max > min { (max - min) * 0.05 } else { step.max(1.0) };
    let (lo, hi) = (min - pad, max + pad);
    let ticks = steps(lo, hi, step).map(|t| (t, x_label(t, unit))).collect();
    Axis { lo, hi, scale: Scale::Linear, ticks }
}

/// Positive y values spanning more than this factor get a log10 axis (a
/// latency over a size sweep; a barrier's 10x over node counts stays linear).
const LOG_Y_SPAN: f64 = 20.0;

/// The y axis for these values: log10 where positive values span more than
/// [`LOG_Y_SPAN`], otherwise linear with 1-2-5 ticks; `include` (0 for times, 1 for
/// factors) is kept in range where it is near the data.
pub fn y_axis(values: &[f64], include: Option<f64>) -> Axis {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if v.is_empty() {
        return linear_y_axis(0.0, 1.0);
    }
    if min > 0.0 && max / min > LOG_Y_SPAN {
        return log10_axis(min, max);
    }
    let (mut lo, mut hi) = (min, max);
    if let Some(i) = include {
        // Only where the data keeps at least 30% of the height.
        let (l, h) = (lo.min(i), hi.max(i));
        if h > l && (hi - lo) / (h - l) >= 0.3 {
            (lo, hi) = (l, h);
        }
    }
    linear_y_axis(lo, hi)
}

fn linear_y_axis(min: f64, max: f64) -> Axis {
    let (min, max) = if max > min {
        (min, max)
    } else {
        let d = if min == 0.0 { 1.0 } else { min.abs() * 0.1 };
        (min - d, max + d)
    };
    let step = nice_step((max - min) / 5.0);
    let lo = (min / step).floor() * step;
    let hi = (max / step).ceil() * step;
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let ticks = steps(lo, hi, step).map(|t| (t, format!("{:.*}", decimals, t + 0.0))).collect();
    // A little room so that markers on the edge are not cut.
    let pad = (hi - lo) * 0.03;
    Axis { lo: lo - pad, hi: hi + pad, scale: Scale::Linear, ticks }
}

fn log10_axis(min: f64, max: f64) -> Axis {
    let (l0, l1) = (min.log10(), max.log10());
    let pad = (l1 - l0) * 0.04;
    // Out to the nearest 1-2-5 value where it is close, so that a label sits
    // near each end of the data.
    let near = |v: f64, down: bool| {
        let e = v.floor();
        let steps = [0.0, 2f64.log10(), 5f64.log10(), 1.0].map(|m| e + m);
        let s = if down {
            steps.into_iter().rev().find(|&s| s <= v)
        } else {
            steps.into_iter().find(|&s| s >= v)
        };
        s.filter(|s| (s - v).abs() <= 0.2)
    };
    let lo = near(l0, true).map_or(l0 - pad, |s| s.min(l0 - pad / 2.0) - pad / 4.0);
    let hi = near(l1, false).map_or(l1 + pad, |s| s.max(l1 + pad / 2.0) + pad / 4.0);
    // Powers of ten; 1-2-5 steps where fewer than three powers fall in range.
    let mut candidates = Vec::new();
    for e in lo.floor() as i32..=hi.ceil() as i32 {
        for m in [1.0, 2.0, 5.0] {
            let t: f64 = m * 10f64.powi(e);
            if (lo..=hi).contains(&t.log10()) {
                candidates.push((m == 1.0, e, t));
            }
        }
    }
    let decades = candidates.iter().filter(|c| c.0).count() >= 3;
    let ticks = candidates
        .into_iter()
        .filter(|c| c.0 || !decades)
        .map(|(_, e, t)| (t.log10(), format!("{:.*}", (-e).max(0) as usize, t)))
        .collect();
    Axis { lo, hi, scale: Scale::Log10, ticks }
}

/// The 1-2-5 step nearest above `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || raw.is_infinite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Multiples of `step` within [lo, hi], computed by index so that no
/// rounding error accumulates.
fn steps(lo: f64, hi: f64, step: f64) -> impl Iterator<Item = f64> {
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(move |i| i as f64 * step)
}

/// A tick label for an x value.
fn x_label(v: f64, unit: XUnit) -> String {
    match unit {
        XUnit::Bytes => bytes_label(v),
        XUnit::Nodes | XUnit::Plain => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        }
    }
}

/// "512 B", "1 KiB", "1.5 KiB", "16 MiB".
pub fn bytes_label(v: f64) -> String {
    let (d, u) = if v >= 1024.0 * 1024.0 {
        (1024.0 * 1024.0, "MiB")
    } else if v >= 1024.0 {
        (1024.0, "KiB")
    } else {
        (1.0, "B")
    };
    let q = v / d;
    if (q - q.round()).abs() < 1e-9 {
        format!("{q:.0} {u}")
    } else {
        format!("{q:.1} {u}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(a: &Axis) -> Vec<&str> {
        a.ticks.iter().map(|t| t.1.as_str()).collect()
    }

    #[test]
    fn doubling_nodes_get_log2_ticks_at_their_powers() {
        let a = x_axis(&[2.0, 4.0, 8.0, 16.0], XUnit::Nodes, 10);
        assert!(matches!(a.scale, Scale::Log2 { .. }));
        assert_eq!(labels(&a), ["2", "4", "8", "16"]);
        assert_eq!(a.place(8.0), Some(3.0));
    }

    #[test]
    fn consecutive_nodes_stay_linear_with_integer_ticks() {
        let v: Vec<f64> = (2..=16).map(f64::from).collect();
        let a = x_axis(&v, XUnit::Nodes, 10);
        assert_eq!(a.scale, Scale::Linear);
        assert!(a.ticks.iter().all(|t| t.0.fract() == 0.0 && !t.1.contains('.')), "{:?}", a.ticks);
    }

    #[test]
    fn a_size_sweep_from_zero_draws_zero_left_of_the_first_power() {
        let a = x_axis(&[0.0, 8.0, 64.0, 512.0, 4096.0, 1048576.0], XUnit::Bytes, 10);
        let l = labels(&a);
        assert_eq!(l[0], "0");
        assert!(l.contains(&"1 KiB") && l.contains(&"1 MiB"), "{l:?}");
        assert!(l.len() <= 10);
        let narrow = x_axis(&[0.0, 8.0, 1048576.0], XUnit::Bytes, 6);
        assert_eq!(labels(&narrow), ["0", "16 B", "256 B", "4 KiB", "64 KiB", "1 MiB"]);
        assert!(a.place(0.0).unwrap() < a.place(8.0).unwrap());
    }

    #[test]
    fn y_ticks_are_round() {
        let a = y_axis(&[44.97, 463.929, 222.3], Some(0.0));
        assert_eq!(a.scale, Scale::Linear);
        assert_eq!(labels(&a), ["0", "100", "200", "300", "400", "500"]);
        let f = y_axis(&[1.15, 1.76], Some(1.0));
        assert!(labels(&f).iter().all(|l| l.len() <= 4), "{:?}", labels(&f));
        assert_eq!(f.ticks[0].1, "1.0");
    }

    #[test]
    fn y_spanning_decades_is_log10() {
        let a = y_axis(&[2.2, 5206.0], Some(0.0));
        assert_eq!(a.scale, Scale::Log10);
        assert_eq!(labels(&a), ["10", "100", "1000"]);
        let two = y_axis(&[3.0, 90.0, 400.0], None);
        assert_eq!(labels(&two), ["2", "5", "10", "20", "50", "100", "200", "500"]);
        assert_eq!(a.place(-1.0), None);
    }

    #[test]
    fn no_values_or_nan_still_make_an_axis() {
        let a = y_axis(&[f64::NAN], None);
        assert!(a.hi > a.lo && !a.ticks.is_empty());
        let x = x_axis(&[], XUnit::Nodes, 10);
        assert!(x.hi > x.lo);
        assert_eq!(x.place(f64::NAN), None);
    }
}
