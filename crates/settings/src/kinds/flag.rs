//! Booleans.

use super::{Kind, Problem};

const ON: [&str; 4] = ["1", "on", "true", "yes"];
const OFF: [&str; 4] = ["0", "off", "false", "no"];

/// A boolean: 1, on, true, yes or 0, off, false, no (any case).
#[derive(Debug, Clone, Copy)]
pub struct Flag;

impl Kind for Flag {
    type Value = bool;
    fn name(&self) -> String {
        "boolean".into()
    }
    fn noun(&self) -> &'static str {
        "a boolean"
    }
    fn accepted(&self) -> String {
        "1, on, true or yes to turn it on, 0, off, false or no to turn it off".into()
    }
    fn parse(&self, text: &str) -> Result<bool, Problem> {
        let t = text.trim();
        if ON.iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(true)
        } else if OFF.iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(false)
        } else {
            Err(Problem::Malformed)
        }
    }
    fn canonical(&self, v: &bool) -> String {
        if *v { "1" } else { "0" }.into()
    }
    fn human(&self, v: &bool) -> String {
        if *v { "on" } else { "off" }.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling() {
        for t in ["1", "on", "TRUE", "Yes"] {
            assert_eq!(Flag.parse(t), Ok(true), "{t}");
        }
        for t in ["0", "Off", "false", "NO"] {
            assert_eq!(Flag.parse(t), Ok(false), "{t}");
        }
        for t in ["2", "y", "enable", "stderr"] {
            assert_eq!(Flag.parse(t), Err(Problem::Malformed), "{t}");
        }
    }
}
