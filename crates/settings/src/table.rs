//! The registry as the configuration page's table (docs/configuration.md), so the documentation cannot drift
//! from what the code reads (a test compares the two).

use crate::registry::ALL;
use crate::var::Group;

/// A Markdown table per group: variable, kind, default, what it does.
pub fn markdown_table() -> String {
    let mut out = String::new();
    let mut groups: Vec<Group> = ALL.iter().map(|s| s.group()).collect();
    groups.dedup();
    for g in groups {
        out += &format!(
            "{}:\n\n| variable | kind | default | what it does |\n| --- | --- | --- | --- |\n",
            g.title()
        );
        for s in ALL.iter().filter(|s| s.group() == g) {
            let kind = s.kind_name().replace('|', " \\| ");
            out += &format!(
                "| `{}` | {} | {} | {} |\n",
                s.name(),
                kind,
                s.default_text(),
                s.doc()
            );
        }
        out += "\n";
    }
    out
}
