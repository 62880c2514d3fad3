//! One parser per kind of value. A kind turns a variable's text (trimmed,
//! never empty) into a typed value or a [`Problem`], and writes a value
//! back in its canonical form (what `outboard_setting` hands to C code:
//! sizes in bytes, booleans `1`/`0`, durations in nanoseconds). The
//! variable's name is added by [`crate::Var`], so the parsers stay plain
//! functions that property tests and the fuzz target drive directly.

mod choice;
mod count;
mod flag;
mod size;
mod text;
mod time;

pub use choice::{Choice, ChoiceWith, Chosen, Param};
pub use count::Count;
pub use flag::Flag;
pub use size::{human_size, parse_size, Size, SizeOrOff};
pub use text::{Hex64, HostPort, Ip, Secret, Text};
pub use time::{human_duration, Time, Unit};

/// Why a kind's parser refused a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not a value of the kind at all.
    Malformed,
    /// A value of the kind that the variable does not allow; says why
    /// ("shorter than 1 ms").
    OutOfRange(String),
}

/// A kind of value, with its parser.
pub trait Kind: Send + Sync + 'static {
    /// The parsed value.
    type Value: Clone + Send + Sync + 'static;
    /// The kind as a listing names it ("size", "boolean", ...).
    fn name(&self) -> String;
    /// What a value of the kind is called in an error ("a size").
    fn noun(&self) -> &'static str;
    /// What is accepted, as the end of a sentence after "use".
    fn accepted(&self) -> String;
    /// Parses a trimmed, non-empty text. Never panics.
    fn parse(&self, text: &str) -> Result<Self::Value, Problem>;
    /// The canonical text of a value (what C code reads), which
    /// [`Kind::read_canonical`] reads back as the same value.
    fn canonical(&self, v: &Self::Value) -> String;
    /// Reads a canonical text back. The same as [`Kind::parse`] except
    /// where a bare number means something else to the parser (a duration
    /// in a `_MS` variable: canonical durations are nanoseconds).
    fn read_canonical(&self, text: &str) -> Option<Self::Value> {
        self.parse(text).ok()
    }
    /// A value as people write it, for listings ("1M" for 1048576).
    fn human(&self, v: &Self::Value) -> String {
        self.canonical(v)
    }
    /// Whether values of this kind are secret (never shown).
    fn hidden(&self) -> bool {
        false
    }
}

/// "a, b or c".
pub(crate) fn or_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
