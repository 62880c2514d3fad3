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

#[cfg(test)]
mod tests {
    use super::*;

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
