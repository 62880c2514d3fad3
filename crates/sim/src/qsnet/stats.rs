//! Latency distributions: mean, percentiles, shares below a bound, and
//! histograms (the paper reports barriers as distributions, Figs. 11-12).

/// A set of samples in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Dist {
    sorted: Vec<f64>,
}

impl Dist {
    /// The distribution of `samples`.
    pub fn new(mut samples: Vec<f64>) -> Dist {
        samples.sort_by(f64::total_cmp);
        Dist { sorted: samples }
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Their mean (NaN when empty).
    pub fn mean(&self) -> f64 {
        self.sorted.iter().sum::<f64>() / self.sorted.len() as f64
    }

    /// The `q`-quantile (0..=1), nearest rank.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.sorted.is_empty() {
            return f64::NAN;
        }
        let k = ((q * self.sorted.len() as f64).ceil() as usize).clamp(1, self.sorted.len());
        self.sorted[k - 1]
    }

    /// Percentage of samples below `x`.
    pub fn pct_below(&self, x: f64) -> f64 {
        100.0 * self.sorted.iter().filter(|&&v| v < x).count() as f64 / self.sorted.len() as f64
    }

    /// Counts per bin of `width` from 0 up to the largest sample.
    pub fn histogram(&self, width: f64) -> Vec<(f64, usize)> {
        let Some(&max) = self.sorted.last() else { return Vec::new() };
        let bins = (max / width).floor() as usize + 1;
        let mut h: Vec<(f64, usize)> = (0..bins).map(|b| (b as f64 * width, 0)).collect();
        for &v in &self.sorted {
            h[((v / width).floor() as usize).min(bins - 1)].1 += 1;
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_shares_and_bins() {
        let d = Dist::new((1..=100).rev().map(f64::from).collect());
        assert_eq!(d.mean(), 50.5);
        assert_eq!(d.quantile(0.93), 93.0);
        assert_eq!(d.quantile(1.0), 100.0);
        assert_eq!(d.pct_below(10.0), 9.0);
        let h = d.histogram(10.0);
        assert_eq!(h.len(), 11);
        assert_eq!(h.iter().map(|b| b.1).sum::<usize>(), 100);
        assert_eq!(h[0], (0.0, 9));
    }
}
