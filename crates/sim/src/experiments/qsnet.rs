//! QsNet's collectives (Petrini et al., sections 6-7) on the QsNet model
//! (`crate::qsnet`): `qsnet-barrier` (elan_hgsync, elan_hgsyncEvent,
//! elan_gsync against nodes), `qsnet-traffic` (the barriers' distributions
//! under complement and uniform background traffic, with histograms) and
//! `qsnet-bcast` (elan_hbcast and elan_bcast latency and bandwidth against
//! size, nodes and traffic, and a point-to-point DMA's bandwidth).
//!
//! `--iters N` runs N x 100 consecutive barriers per point (the paper ran
//! 10,000), N x 10 of a software barrier under traffic, and N x 10 small
//! broadcasts (a few of the large ones). The basis of a compared row comes
//! from `data/calibration.toml`, like every other experiment's (the QsNet
//! parameters it names as `qsnet.*` are `data/qsnet-elan3.toml`'s).

use super::{ExperimentError, Outcome, Params, Row, XAxis};
use crate::profile::Profile;
use crate::qsnet::elanlib::Algo;
use crate::qsnet::stats::Dist;
use crate::qsnet::traffic::Pattern;
use crate::qsnet::{self, Setup};

fn paper(r: Row, ids: &[&str]) -> Row {
    r.with_paper(ids)
}

fn check(r: &qsnet::Result, what: &str) -> Result<(), ExperimentError> {
    if r.completed {
        Ok(())
    } else {
        Err(ExperimentError::Param(format!("{what}: did not complete ({:?})", r.failed)))
    }
}

fn measure(prof: &Profile, s: &Setup) -> Result<Dist, ExperimentError> {
    let r = qsnet::run(prof, s);
    check(&r, &format!("{:?} on {} nodes", s.algo, s.nodes))?;
    // The first operation includes the start; leave it out.
    Ok(Dist::new(r.times_us.into_iter().skip(1).collect()))
}

fn or<T: Clone>(v: &[T], d: &[T]) -> Vec<T> {
    if v.is_empty() { d.to_vec() } else { v.to_vec() }
}

/// `qsnet-barrier`: mean barrier time against nodes, empty network.
pub fn run_barrier(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = or(&p.nodes, &[4, 8, 16, 32, 64]);
    let algos = [Algo::HgSync, Algo::HgSyncEvent, Algo::GSync];
    let total = p.profiles.len() * nodes.len() * algos.len();
    let mut rows = Vec::new();
    let mut done = 0;
    for prof in &p.profiles {
        let mut means = std::collections::BTreeMap::new();
        for algo in algos {
            for &n in &nodes {
                let d = measure(prof, &Setup::new(n, algo, p.iters.max(1) * 100, p.seed))?;
                means.insert((algo.name(), n), d.mean());
                let id = match (algo, n) {
                    (Algo::HgSync, 4 | 8 | 16 | 32 | 64) => Some(format!("elan-hgsync-{n}")),
                    (Algo::GSync, 64) => Some("elan-gsync-64".to_string()),
                    _ => None,
                };
                let row = Row::new(format!("{} {}", prof.name, algo.name()), n, 0, "latency", d.mean(), "us");
                rows.push(match id {
                    Some(id) => paper(row, &[&id]),
                    None => row,
                });
                done += 1;
                progress(done, total);
            }
        }
        let top = *nodes.iter().max().expect("nodes");
        let deltas: Vec<f64> = nodes.iter().map(|&n| means[&("hgsyncEvent", n)] - means[&("hgsync", n)]).collect();
        let delta = deltas.iter().sum::<f64>() / deltas.len() as f64;
        rows.push(paper(Row::new(format!("{} hgsyncEvent", prof.name), top, 0, "event extra", delta, "us"), &["elan-hgsyncevent-delta"]));
        if nodes.contains(&4) && nodes.contains(&64) {
            for (a, id) in [("hgsync", "elan-hgsync-growth-4-64"), ("gsync", "elan-gsync-growth-4-64")] {
                let g = 100.0 * (means[&(a, 64)] / means[&(a, 4)] - 1.0);
                rows.push(paper(Row::new(format!("{} {a}", prof.name), 64, 0, "growth 4-64", g, "%"), &[id]));
            }
            let per = (means[&("gsync", 64)] - means[&("gsync", 4)]) / 2.0;
            rows.push(paper(Row::new(format!("{} gsync", prof.name), 64, 0, "per x4 nodes", per, "us"), &["elan-gsync-per-x4"]));
        }
    }
    Ok(Outcome {
        title: "QsNet barriers, empty network: elan_hgsync, elan_hgsyncEvent, elan_gsync (Petrini et al. 6.2.1)".into(),
        x: XAxis::Nodes,
        rows,
        notes: vec![
            "mean over --iters x 100 consecutive barriers, root exit to root exit; hosts' OS noise from the seed".into(),
            "basis from data/calibration.toml: qsnet.thread_us fitted on elan-hgsync-16, qsnet.event_wake_us on the event extra, the noise on the empty network's tail (qsnet-traffic)".into(),
        ],
    })
}

/// `qsnet-traffic`: the summary rows.
pub fn run_traffic(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    run_traffic_with_histograms(p, progress).map(|(o, _)| o)
}

fn pattern_name(t: Option<Pattern>) -> &'static str {
    t.map_or("none", Pattern::name)
}

/// `qsnet-traffic`: barriers under background traffic, as distributions;
/// the second outcome holds the histograms (share of barriers per 1 us
/// bin, 10 us for the software barrier under traffic).
pub fn run_traffic_with_histograms(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<(Outcome, Outcome), ExperimentError> {
    let nodes = or(&p.nodes, &[4, 64]);
    let patterns = [None, Some(Pattern::Complement), Some(Pattern::Uniform)];
    let algos = [Algo::HgSync, Algo::GSync];
    let total = p.profiles.len() * nodes.len() * patterns.len() * algos.len();
    let (mut rows, mut hist) = (Vec::new(), Vec::new());
    let mut done = 0;
    for prof in &p.profiles {
        let mut means = std::collections::BTreeMap::new();
        for algo in algos {
            for pat in patterns {
                for &n in &nodes {
                    let iters = if pat.is_some() && algo == Algo::GSync { p.iters.max(1) * 10 } else { p.iters.max(1) * 100 };
                    let mut s = Setup::new(n, algo, iters, p.seed);
                    s.traffic = pat;
                    let d = measure(prof, &s)?;
                    means.insert((algo.name(), pattern_name(pat), n), d.mean());
                    let series = format!("{} {} {}", prof.name, algo.name(), pattern_name(pat));
                    let at64 = n == 64;
                    let id = |want: bool, id: &str| if want && at64 { Some(id.to_string()) } else { None };
                    let (a, u, none) = (algo == Algo::HgSync, pat == Some(Pattern::Uniform), pat.is_none());
                    let mut add = |metric: &'static str, v: f64, unit: &'static str, id: Option<String>| {
                        let r = Row::new(series.clone(), n, 0, metric, v, unit);
                        rows.push(match id {
                            Some(id) => paper(r, &[&id]),
                            None => r,
                        });
                    };
                    add("mean", d.mean(), "us", id(a && u, "elan-hgsync-64-uniform").or(id(!a && u, "elan-gsync-64-uniform")));
                    add("p50", d.quantile(0.5), "us", None);
                    add("p93", d.quantile(0.93), "us", None);
                    if a {
                        add("below 9 us", d.pct_below(9.0), "%", id(none, "elan-hgsync-64-below9"));
                        add("over 20 us", 100.0 - d.pct_below(20.0), "%", id(none, "elan-hgsync-64-over20"));
                        add("below 20 us", d.pct_below(20.0), "%", id(u, "elan-hgsync-64-uniform-below20"));
                    } else {
                        add("over 30 us", 100.0 - d.pct_below(30.0), "%", id(none, "elan-gsync-64-over30"));
                        add("below 605 us", d.pct_below(605.0), "%", id(u, "elan-gsync-64-uniform-below605"));
                    }
                    let width = if d.mean() > 100.0 { 10.0 } else { 1.0 };
                    for (lo, count) in d.histogram(width) {
                        let share = 100.0 * count as f64 / d.len() as f64;
                        hist.push(Row::new(format!("{series} {n}"), n, lo as u32, "share", share, "%"));
                    }
                    done += 1;
                    progress(done, total);
                }
            }
        }
        let top = *nodes.iter().max().expect("nodes");
        for algo in ["hgsync", "gsync"] {
            for pat in ["complement", "uniform"] {
                let slow = means[&(algo, pat, top)] / means[&(algo, "none", top)];
                let r = Row::new(format!("{} {algo} {pat}", prof.name), top, 0, "slowdown", slow, "x");
                let id = format!("elan-{algo}-slowdown-{pat}-64");
                rows.push(if top == 64 && pat == "uniform" { paper(r, &[&id]) } else { r });
                if nodes.contains(&4) && top == 64 {
                    let g = 100.0 * (means[&(algo, pat, 64)] / means[&(algo, pat, 4)] - 1.0);
                    let id = format!("elan-{algo}-growth-4-64-{pat}");
                    rows.push(paper(Row::new(format!("{} {algo} {pat}", prof.name), 64, 0, "growth 4-64", g, "%"), &[&id]));
                }
            }
        }
    }
    let notes = vec![
        "traffic: a second process per node keeps traffic_window packets of 320 B open (Elan memory), complement or uniform destinations".into(),
        "hgsync under uniform traffic is compared with 6.2.1's 14.8 us (elan-hgsync-64-uniform), the measured section with its distribution; section 7 quotes 13 us for the same case (elan-hgsync-64-uniform-concl, not compared)".into(),
        format!("iters: {} barriers per point ({} for gsync under traffic); the first is left out", p.iters.max(1) * 100, p.iters.max(1) * 10),
    ];
    let o = Outcome { title: "QsNet barriers under background traffic: distributions (Petrini et al. 6.2.1, Figs. 10-12)".into(), x: XAxis::Nodes, rows, notes };
    let h = Outcome { title: "QsNet barrier latency histograms (share of barriers per bin)".into(), x: XAxis::Column("latency (us)"), rows: hist, notes: vec![] };
    Ok((o, h))
}

/// `qsnet-bcast`: elan_hbcast and elan_bcast latency and bandwidth.
pub fn run_bcast(p: &Params, progress: &mut dyn FnMut(usize, usize)) -> Result<Outcome, ExperimentError> {
    let nodes = or(&p.nodes, &[64]);
    let sizes = or(&p.sizes, &[32, 256, 2048, 16384, 262_144, 1_048_576]);
    let top = *nodes.iter().max().expect("nodes");
    let algos = [Algo::HBcast, Algo::Bcast];
    let iters = |size: u32| if size >= 65536 { 3 } else { p.iters.max(1) * 10 };
    let scal: Vec<u32> = [4u32, 16, 64].into_iter().filter(|n| !nodes.contains(n)).collect();
    let total = p.profiles.len() * (2 * (nodes.len() * sizes.len() + scal.len() + 3) + 1);
    let mut done = 0;
    let mut rows = Vec::new();
    for prof in &p.profiles {
        for mk in algos {
            let name = mk(0).name();
            let series = format!("{} {name}", prof.name);
            let mut lat = std::collections::BTreeMap::new();
            for &n in nodes.iter().chain(scal.iter()) {
                for &size in &sizes {
                    if scal.contains(&n) && size != 262_144 {
                        continue;
                    }
                    let d = measure(prof, &Setup::new(n, mk(size), iters(size), p.seed))?;
                    lat.insert((n, size), d.mean());
                    done += 1;
                    progress(done, total);
                    if scal.contains(&n) {
                        continue;
                    }
                    let small = if name == "hbcast" { "elan-hbcast-small" } else { "elan-bcast-small" };
                    let r = Row::new(series.clone(), n, size, "latency", d.mean(), "us");
                    rows.push(if n == 64 && size == 256 { paper(r, &[small]) } else { r });
                    let bw = f64::from(size) / d.mean();
                    let r = Row::new(series.clone(), n, size, "bandwidth", bw, "MB/s");
                    let bwid = if name == "hbcast" { "elan-hbcast-bw" } else { "elan-bcast-bw" };
                    rows.push(if n == 64 && size == 1_048_576 { paper(r, &[bwid]) } else { r });
                }
            }
            if let (Some(a), Some(b)) = (lat.get(&(16, 262_144)), lat.get(&(64, 262_144))) {
                rows.push(paper(Row::new(series.clone(), 64, 262_144, "bw change 16-64", 100.0 * (a / b - 1.0), "%"), &["elan-bcast-bw-scal-16-64"]));
                rows.push(paper(Row::new(series.clone(), 64, 262_144, "lat change 16-64", 100.0 * (b / a - 1.0), "%"), &["elan-bcast-lat-scal-16-64"]));
            }
            if let (Some(a), Some(b)) = (lat.get(&(4, 262_144)), lat.get(&(16, 262_144))) {
                rows.push(paper(Row::new(series.clone(), 16, 262_144, "lat change 4-16", 100.0 * (b / a - 1.0), "%"), &["elan-bcast-scal-4-16"]));
            }
            // Under traffic: 1 MB from main memory, and 2 KB latency.
            for pat in [Pattern::Complement, Pattern::Uniform] {
                let mut s = Setup::new(top, mk(1_048_576), 1, p.seed);
                s.traffic = Some(pat);
                s.main_memory = true;
                let r = qsnet::run(prof, &s);
                check(&r, "broadcast under traffic")?;
                let bw = 1_048_576.0 / r.times_us[0];
                let row = Row::new(format!("{series} {}", pat.name()), top, 1_048_576, "bandwidth", bw, "MB/s");
                let id = format!("elan-bcast-bw-{}", pat.name());
                rows.push(if top == 64 { paper(row, &[&id]) } else { row });
                done += 1;
                progress(done, total);
            }
            let mut s = Setup::new(top, mk(2048), p.iters.max(1) * 10, p.seed);
            s.traffic = Some(Pattern::Uniform);
            s.main_memory = true;
            let d = measure(prof, &s)?;
            let row = Row::new(format!("{series} uniform"), top, 2048, "latency", d.mean(), "us");
            rows.push(if top == 64 && name == "hbcast" { paper(row, &["elan-hbcast-2k-traffic-max"]) } else { row });
            done += 1;
            progress(done, total);
        }
        // 6.1's peak Elan-memory-to-Elan-memory bandwidth: a 1 MiB remote
        // DMA between two nodes.
        let d = measure(prof, &Setup::new(2, Algo::Put(1_048_576), 3, p.seed))?;
        let r = Row::new(format!("{} put", prof.name), 2, 1_048_576, "bandwidth", 1_048_576.0 / d.mean(), "MB/s");
        rows.push(paper(r, &["elan3-bw-elan"]));
        done += 1;
        progress(done, total);
        let find = |s: &str| rows.iter().find(|r: &&Row| r.series == format!("{} {s}", prof.name) && r.nodes == top && r.size == 256 && r.metric == "latency").map(|r| r.value);
        if let (Some(h), Some(b)) = (find("hbcast"), find("bcast")) {
            rows.push(paper(Row::new(format!("{} hbcast", prof.name), top, 256, "gain vs bcast", b - h, "us"), &["elan-hbcast-gain"]));
        }
    }
    Ok(Outcome {
        title: "QsNet broadcast: elan_hbcast and elan_bcast, Elan-memory buffers; under traffic main memory (Petrini et al. 6.2.2)".into(),
        x: XAxis::Size,
        rows,
        notes: vec![
            "latency: mean per broadcast, root to root (the root is done when the last packet's combined ack says every node has it); bandwidth = size / latency".into(),
            "elan-hbcast-2k-traffic-max is an upper bound (section 7: less than 200 us up to 2 KB under load): a value below it agrees".into(),
            "under traffic: 1 MB from and to main memory (the background job holds Elan memory), one broadcast per point".into(),
            "put: one remote DMA of 1 MB from Elan memory to Elan memory between two nodes, compared with 6.1's peak".into(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::Basis;

    fn params(nodes: Vec<u32>, sizes: Vec<u32>) -> Params {
        Params { profiles: vec![Profile::builtin("elan3")], nodes, sizes, seed: 1, iters: 1 }
    }

    #[test]
    fn the_barrier_rows_carry_paper_ids_and_basis() {
        let o = run_barrier(&params(vec![4, 16, 64], vec![]), &mut |_, _| {}).unwrap();
        let row = |s: &str, n: u32, m: &str| o.rows.iter().find(|r| r.series == s && r.nodes == n && r.metric == m).unwrap_or_else(|| panic!("{s} {n} {m}"));
        let h16 = row("elan3 hgsync", 16, "latency");
        assert_eq!(h16.paper_id.as_deref(), Some("elan-hgsync-16"));
        assert_eq!(h16.basis, Some(Basis::Calibrated));
        let g64 = row("elan3 gsync", 64, "latency");
        assert_eq!((g64.paper, g64.basis), (Some(14.8), Some(Basis::Predicted)));
        // The hardware barrier beats the software one and grows less.
        assert!(row("elan3 hgsync", 64, "latency").value < g64.value);
        assert!(row("elan3 hgsync", 64, "growth 4-64").value < row("elan3 gsync", 64, "growth 4-64").value);
    }

    #[test]
    fn the_traffic_run_gives_histograms_that_add_up() {
        let (o, h) = run_traffic_with_histograms(&params(vec![16], vec![]), &mut |_, _| {}).unwrap();
        assert!(o.rows.iter().any(|r| r.metric == "slowdown"));
        for series in ["elan3 hgsync none 16", "elan3 gsync uniform 16"] {
            let total: f64 = h.rows.iter().filter(|r| r.series == series).map(|r| r.value).sum();
            assert!((total - 100.0).abs() < 1e-6, "{series}: {total}");
        }
        // Traffic slows both barriers down.
        let mean = |s: &str| o.rows.iter().find(|r| r.series == s && r.metric == "mean").unwrap().value;
        assert!(mean("elan3 gsync uniform") > mean("elan3 gsync none"));
        assert!(mean("elan3 hgsync uniform") > mean("elan3 hgsync none"));
    }
}
