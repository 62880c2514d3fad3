//! The numbers the papers quote, looked up by id.
//!
//! `data/paper-figures.csv` is the project's copy of the rows of the shared
//! figure list that the experiments compare against; it is embedded so the
//! binary needs no files. Experiments name rows by id and never write a
//! paper's number into code.

/// The embedded table.
pub const CSV: &str = include_str!("../../../data/paper-figures.csv");

/// One quoted figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Its id.
    pub id: String,
    /// The paper (the number of its file in `shared/seeds/`: 000 the
    /// dissertation, 001 Quadrics, 002 NICVM, 003 GM-2, 004 the
    /// NIC collective protocol and MPICH2-over-InfiniBand abstracts).
    pub seed: String,
    /// Section of the paper.
    pub section: String,
    /// Platform it was measured on.
    pub platform: String,
    /// What was measured.
    pub experiment: String,
    /// The value, when it is a number (some rows hold a formula).
    pub value: Option<f64>,
    /// Its unit.
    pub unit: String,
}

/// Every row of the embedded table.
pub fn all() -> Vec<Figure> {
    CSV.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let get = |i: usize| f.get(i).copied().unwrap_or("").to_string();
            Figure {
                id: get(0),
                seed: get(1),
                section: get(2),
                platform: get(3),
                experiment: get(4),
                value: f.get(8).and_then(|v| v.parse().ok()),
                unit: get(9),
            }
        })
        .collect()
}

/// The figure with this id.
pub fn figure(id: &str) -> Option<Figure> {
    all().into_iter().find(|f| f.id == id)
}

/// The numeric value of a figure.
pub fn value(id: &str) -> Option<f64> {
    figure(id).and_then(|f| f.value)
}

/// A value derived from quoted figures: the product of the listed ids
/// (e.g. a NIC latency times a factor of improvement gives the host
/// latency the paper implies). `None` if any is missing.
pub fn product(ids: &[&str]) -> Option<f64> {
    ids.iter().map(|id| value(id)).product()
}

/// A value derived from quoted figures: a product of ids, optionally
/// divided by another product after a `"/"` element (`["a", "/", "b"]` is
/// a / b: a factor the paper gives only as two latencies).
pub fn derived(ids: &[&str]) -> Option<f64> {
    match ids.iter().position(|s| *s == "/") {
        None => product(ids),
        Some(i) => Some(product(&ids[..i])? / product(&ids[i + 1..])?),
    }
}

/// The id string of a derived value (`a*b`, `a/b`).
pub fn derived_id(ids: &[&str]) -> String {
    let mut s = String::new();
    for (i, id) in ids.iter().enumerate() {
        if *id == "/" {
            s.push('/');
        } else {
            if i > 0 && ids[i - 1] != "/" {
                s.push('*');
            }
            s.push_str(id);
        }
    }
    s
}

/// How the simulated value compares: (sim - paper) / paper.
pub fn rel_diff(sim: f64, paper: f64) -> f64 {
    (sim - paper) / paper
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_found_by_id() {
        assert_eq!(value("fm-closed-p2p"), Some(333.7294));
        assert_eq!(figure("fm-send-model").unwrap().value, None, "a formula is not a number");
        let host = product(&["barrier-gm-pe-nic-16", "barrier-gm-pe-foi-16"]).unwrap();
        assert!((host - 181.8092).abs() < 1e-9);
        assert!(value("no-such-id").is_none());
        let f = derived(&["barrier-gm-pe-host-8-l72", "/", "barrier-gm-pe-nic-8-l72"]).unwrap();
        assert!((f - 90.24 / 49.25).abs() < 1e-12);
        assert_eq!(derived_id(&["a", "b", "/", "c"]), "a*b/c");
    }
}
