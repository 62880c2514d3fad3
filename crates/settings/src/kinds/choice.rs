//! Enumerations, by name.

use super::{or_list, Kind, Problem};

/// One of a fixed set of names (any case). Each name may have aliases,
/// kept where an older reader accepted them, so that values that worked
/// keep working; the value is always the canonical name.
#[derive(Debug, Clone, Copy)]
pub struct Choice {
    /// (canonical name, aliases).
    pub names: &'static [(&'static str, &'static [&'static str])],
}

impl Choice {
    /// The canonical names.
    pub fn canonical_names(&self) -> Vec<&'static str> {
        self.names.iter().map(|(n, _)| *n).collect()
    }
}

impl Kind for Choice {
    type Value = &'static str;
    fn name(&self) -> String {
        self.canonical_names().join("|")
    }
    fn noun(&self) -> &'static str {
        "an accepted name"
    }
    fn accepted(&self) -> String {
        or_list(&self.canonical_names())
    }
    fn parse(&self, text: &str) -> Result<&'static str, Problem> {
        let t = text.trim();
        self.names
            .iter()
            .find(|(n, aliases)| {
                n.eq_ignore_ascii_case(t) || aliases.iter().any(|a| a.eq_ignore_ascii_case(t))
            })
            .map(|(n, _)| *n)
            .ok_or(Problem::Malformed)
    }
    fn canonical(&self, v: &&'static str) -> String {
        v.to_string()
    }
}

/// What may follow a name of a [`ChoiceWith`] after a colon.
#[derive(Debug, Clone, Copy)]
pub enum Param {
    /// Nothing.
    Nothing,
    /// A whole number from `min` to `max`, required or optional (then
    /// the value carries none).
    Count {
        /// What the number is, for the accepted forms ("DEGREE").
        what: &'static str,
        /// The least accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
        /// Whether the name alone is accepted too.
        optional: bool,
    },
    /// A finite decimal number of at least `min`, required.
    Number {
        /// What the number is ("LAMBDA").
        what: &'static str,
        /// The least accepted.
        min: f64,
    },
}

/// One of a fixed set of names (any case), each perhaps with a number
/// after a colon: `gather-broadcast:3`, `postal:2.5`. For choices that
/// take a parameter of their own, so that one variable (or one MPI_Info
/// value) says all of it.
#[derive(Debug, Clone, Copy)]
pub struct ChoiceWith {
    /// (canonical name, what may follow it).
    pub names: &'static [(&'static str, Param)],
}

/// A [`ChoiceWith`] value: the canonical name and its number, if any.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chosen {
    /// The canonical name.
    pub name: &'static str,
    /// The number after the colon.
    pub param: Option<f64>,
}

impl ChoiceWith {
    fn forms(&self) -> Vec<String> {
        self.names
            .iter()
            .map(|(n, p)| match p {
                Param::Nothing => n.to_string(),
                Param::Count { what, optional: true, .. } => format!("{n}[:{what}]"),
                Param::Count { what, .. } | Param::Number { what, .. } => format!("{n}:{what}"),
            })
            .collect()
    }

    fn ranges(&self) -> String {
        let r: Vec<String> = self
            .names
            .iter()
            .filter_map(|(_, p)| match p {
                Param::Nothing => None,
                Param::Count { what, min, max, .. } => Some(format!("{what} a whole number from {min} to {max}")),
                Param::Number { what, min } => Some(format!("{what} a number of at least {min}")),
            })
            .collect();
        if r.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.join("; "))
        }
    }
}

impl Kind for ChoiceWith {
    type Value = Chosen;
    fn name(&self) -> String {
        self.forms().join("|")
    }
    fn noun(&self) -> &'static str {
        "an accepted form"
    }
    fn accepted(&self) -> String {
        let f = self.forms();
        let f: Vec<&str> = f.iter().map(String::as_str).collect();
        format!("{}{}", or_list(&f), self.ranges())
    }
    fn parse(&self, text: &str) -> Result<Chosen, Problem> {
        let t = text.trim();
        let (n, arg) = match t.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (t, None),
        };
        let (name, p) = self.names.iter().find(|(c, _)| c.eq_ignore_ascii_case(n)).ok_or(Problem::Malformed)?;
        let param = match (p, arg) {
            (Param::Nothing, None) => None,
            (Param::Count { optional: true, .. }, None) => None,
            (Param::Count { min, max, .. }, Some(a)) => {
                let v = super::Count { min: *min, max: *max }.parse(a)?;
                Some(v as f64)
            }
            (Param::Number { min, .. }, Some(a)) => {
                let v: f64 = a.parse().map_err(|_| Problem::Malformed)?;
                if !v.is_finite() {
                    return Err(Problem::Malformed);
                }
                if v < *min {
                    return Err(Problem::OutOfRange(format!("{name}'s number is below {min}")));
                }
                Some(v)
            }
            _ => return Err(Problem::Malformed),
        };
        Ok(Chosen { name, param })
    }
    fn canonical(&self, v: &Chosen) -> String {
        match v.param {
            None => v.name.to_string(),
            Some(p) => format!("{}:{p}", v.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_numbers() {
        let c = ChoiceWith {
            names: &[
                ("binomial", Param::Nothing),
                ("kary", Param::Count { what: "DEGREE", min: 1, max: 64, optional: false }),
                ("gather", Param::Count { what: "DEGREE", min: 0, max: 64, optional: true }),
                ("postal", Param::Number { what: "LAMBDA", min: 1.0 }),
            ],
        };
        assert_eq!(c.parse("Binomial"), Ok(Chosen { name: "binomial", param: None }));
        assert_eq!(c.parse("kary:3"), Ok(Chosen { name: "kary", param: Some(3.0) }));
        assert_eq!(c.parse("kary"), Err(Problem::Malformed));
        assert_eq!(c.parse("kary:0"), Err(Problem::OutOfRange("below 1".into())));
        assert_eq!(c.parse("gather"), Ok(Chosen { name: "gather", param: None }));
        assert_eq!(c.parse("postal:2.5"), Ok(Chosen { name: "postal", param: Some(2.5) }));
        assert!(matches!(c.parse("postal:0.5"), Err(Problem::OutOfRange(_))));
        assert_eq!(c.parse("postal:inf"), Err(Problem::Malformed));
        assert_eq!(c.parse("binomial:2"), Err(Problem::Malformed));
        assert_eq!(c.canonical(&c.parse("postal:2.5").unwrap()), "postal:2.5");
        assert_eq!(c.canonical(&c.parse("kary:3").unwrap()), "kary:3");
        assert_eq!(c.accepted(), "binomial, kary:DEGREE, gather[:DEGREE] or postal:LAMBDA (DEGREE a whole number from 1 to 64; DEGREE a whole number from 0 to 64; LAMBDA a number of at least 1)");
    }

    #[test]
    fn names_and_aliases() {
        let c = Choice {
            names: &[
                ("offload", &["offloaded", "1"]),
                ("host", &["host-based"]),
                ("off", &["pmpi", "0"]),
            ],
        };
        assert_eq!(c.parse("Offload"), Ok("offload"));
        assert_eq!(c.parse("host-based"), Ok("host"));
        assert_eq!(c.parse("0"), Ok("off"));
        assert_eq!(c.parse("nic"), Err(Problem::Malformed));
        assert_eq!(c.accepted(), "offload, host or off");
        assert_eq!(c.name(), "offload|host|off");
    }
}
