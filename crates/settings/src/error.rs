//! [`SettingError`]: a bad setting, told as a sentence a user can act on.

use thiserror::Error;

/// A variable whose value its kind's parser refused, or an `OUTBOARD_*`
/// variable that is not a setting. The message is one sentence naming the
/// variable, the value (unless the variable is secret) and what is
/// accepted, e.g. `OUTBOARD_MPI_MAX_BYTES="1Q" is not a size: use a number
/// of bytes with an optional K, M or G suffix (e.g. 65536, 64K, 1M)`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SettingError {
    /// The value is not of the variable's kind at all.
    #[error("{} is not {noun}: use {accepted}", shown(name, value))]
    Malformed {
        /// The variable.
        name: String,
        /// Its value (`None`: a secret, not repeated).
        value: Option<String>,
        /// What a value of the kind is called ("a size").
        noun: &'static str,
        /// What the variable accepts.
        accepted: String,
    },
    /// A value of the right kind that the variable does not allow.
    #[error("{} is {problem}: use {accepted}", shown(name, value))]
    OutOfRange {
        /// The variable.
        name: String,
        /// Its value (`None`: a secret, not repeated).
        value: Option<String>,
        /// What is wrong with it ("shorter than 1 ms").
        problem: String,
        /// What the variable accepts.
        accepted: String,
    },
    /// A name with Outboard's prefix that no part of Outboard reads
    /// (asked for, or set in the environment): most likely a misspelling.
    #[error("{name} is not a setting Outboard knows{}: `outboard config` lists them all", did_you_mean(*suggestion))]
    Unknown {
        /// The name.
        name: String,
        /// The registered name closest to it, if any is close.
        suggestion: Option<&'static str>,
    },
}

impl SettingError {
    /// The variable the error is about.
    pub fn name(&self) -> &str {
        match self {
            SettingError::Malformed { name, .. }
            | SettingError::OutOfRange { name, .. }
            | SettingError::Unknown { name, .. } => name,
        }
    }
}

fn shown(name: &str, value: &Option<String>) -> String {
    match value {
        Some(v) => format!("{name}={v:?}"),
        None => format!("{name} (its value not shown: it is a secret)"),
    }
}

fn did_you_mean(s: Option<&'static str>) -> String {
    s.map(|s| format!(" (did you mean {s}?)"))
        .unwrap_or_default()
}
