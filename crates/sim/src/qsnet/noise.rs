//! Operating-system noise on the hosts: daemons and interrupts that take a
//! host's processor away for a while (6.2.1 blames "scheduling issues on
//! the OS" for the hardware barrier's growth above 16 nodes, and Fig. 11
//! shows its tail in an empty network). Each host is interrupted at the
//! times of a Poisson process, each time for an exponentially distributed
//! span; a process that wants to act while its host is interrupted acts
//! when the interruption ends. The Elan is not affected.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::params::ps;

/// Each host's interruptions, drawn lazily from the seed.
pub struct Noise {
    gap_mean: f64,
    len_mean: f64,
    next: Vec<u64>,
    busy_until: Vec<u64>,
    rng: ChaCha8Rng,
}

impl Noise {
    /// `per_ms` interruptions per millisecond per host, each `mean_us`
    /// long on average (none when either is zero).
    pub fn new(hosts: u32, per_ms: f64, mean_us: f64, seed: u64) -> Noise {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4e4f_4953_4500_0002);
        let gap_mean = if per_ms > 0.0 && mean_us > 0.0 { 1000.0 / per_ms } else { f64::INFINITY };
        let next = (0..hosts).map(|_| Self::exp(&mut rng, gap_mean)).collect();
        Noise { gap_mean, len_mean: mean_us, next, busy_until: vec![0; hosts as usize], rng }
    }

    fn exp(rng: &mut ChaCha8Rng, mean: f64) -> u64 {
        if !mean.is_finite() {
            return u64::MAX;
        }
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        ps(-u.ln() * mean)
    }

    /// When host `h`, wanting to act at `t`, can act.
    pub fn ready(&mut self, h: u32, t: u64) -> u64 {
        let i = h as usize;
        while self.next[i] <= t {
            let start = self.next[i];
            let len = Self::exp(&mut self.rng, self.len_mean);
            self.busy_until[i] = self.busy_until[i].max(start + len);
            self.next[i] = start.saturating_add(Self::exp(&mut self.rng, self.gap_mean).max(1));
        }
        t.max(self.busy_until[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_noise_never_delays_and_noise_delays_about_its_share() {
        let mut quiet = Noise::new(2, 0.0, 10.0, 1);
        assert_eq!(quiet.ready(1, 123_456_789), 123_456_789);
        // 1 per ms of 10 us: about 1 % of instants fall in an interruption.
        let mut n = Noise::new(1, 1.0, 10.0, 7);
        let delayed = (1..=100_000u64).filter(|k| {
            let t = k * ps(1.0);
            n.ready(0, t) > t
        }).count();
        assert!((500..2000).contains(&delayed), "{delayed}");
    }
}
