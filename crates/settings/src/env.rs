//! Where values come from: the process environment, or (in tests and in
//! the bootstrap's own tests) a table or a lookup function, so that nothing
//! has to change the process environment to try a value.

use std::collections::{BTreeMap, HashMap};

/// A set of environment variables.
pub trait Env {
    /// The raw value of `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
    /// Every name set (for the check of unknown `OUTBOARD_*` names); a
    /// source that cannot list its names returns none.
    fn names(&self) -> Vec<String>;
}

/// The process's own environment. A value that is not UTF-8 is read with
/// its bad bytes replaced, so it fails its kind's parser with a message
/// instead of looking unset.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    }

    fn names(&self) -> Vec<String> {
        std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }
}

/// A lookup function as an environment (one that cannot list its names).
pub struct FnEnv<F>(pub F);

impl<F: Fn(&str) -> Option<String>> Env for FnEnv<F> {
    fn var(&self, name: &str) -> Option<String> {
        (self.0)(name)
    }

    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<const N: usize> Env for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<String> {
        self.as_slice().var(name)
    }

    fn names(&self) -> Vec<String> {
        self.as_slice().names()
    }
}

impl Env for [(&str, &str)] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }

    fn names(&self) -> Vec<String> {
        self.iter().map(|(k, _)| k.to_string()).collect()
    }
}

impl Env for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

/// The value of `name` as the parsers see it: trimmed, and `None` when
/// unset or blank (`OUTBOARD_X= cmd` is a common way to unset a variable
/// for one command, and was read as unset before).
pub(crate) fn value(env: &dyn Env, name: &str) -> Option<String> {
    let v = env.var(name)?;
    let t = v.trim();
    (!t.is_empty()).then(|| t.to_string())
}
