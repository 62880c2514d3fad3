//! A registered variable: [`Var`] (with a default) and [`OptVar`] (without
//! one: unset means "decided at run time"), both seen through the
//! object-safe [`Setting`] by the registry, the check and the listing.

use crate::env::{value, Env};
use crate::error::SettingError;
use crate::kinds::{Kind, Problem};

/// Which part of Outboard reads a variable (the listing's sections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// The engine and the runtime, in every Outboard process.
    Runtime,
    /// How a process finds its job: set by `outboard run`, or by the user
    /// under another launcher.
    Launch,
    /// The PMPI library (`liboutboard_mpi`), read by its C code through
    /// `outboard_setting`.
    Mpi,
    /// The Python package.
    Python,
    /// The project's tests and tools.
    Tools,
}

impl Group {
    /// A heading for the group.
    pub fn title(self) -> &'static str {
        match self {
            Group::Runtime => "Engine and runtime",
            Group::Launch => "Joining a job (outboard run sets these; under mpirun, Hydra or srun the launcher's PMIx or PMI-1 stands in for most)",
            Group::Mpi => "PMPI library (liboutboard_mpi)",
            Group::Python => "Python package",
            Group::Tools => "Tests and tools",
        }
    }
}

/// A variable's value when it is unset.
pub enum Fallback<K: Kind> {
    /// This value.
    Value(K::Value),
    /// Whatever another variable of the same kind resolves to (a
    /// per-collective setting that follows the general one).
    Follows(&'static Var<K>),
}

/// A variable with a default.
pub struct Var<K: Kind> {
    /// Its name.
    pub name: &'static str,
    /// One line: what it does.
    pub doc: &'static str,
    /// Who reads it.
    pub group: Group,
    /// Its kind.
    pub kind: K,
    /// Its value when unset.
    pub default: Fallback<K>,
}

/// A variable without a default: unset, something else decides at run
/// time (`decided` says what).
pub struct OptVar<K: Kind> {
    /// Its name.
    pub name: &'static str,
    /// One line: what it does.
    pub doc: &'static str,
    /// Who reads it.
    pub group: Group,
    /// Its kind.
    pub kind: K,
    /// What happens when it is unset.
    pub decided: &'static str,
}

/// `name`'s value in `env`, parsed by `kind`; `None` when unset or blank.
fn parse_set<K: Kind>(
    name: &str,
    kind: &K,
    env: &dyn Env,
) -> Result<Option<K::Value>, SettingError> {
    let Some(text) = value(env, name) else {
        return Ok(None);
    };
    let shown = (!kind.hidden()).then(|| text.clone());
    match kind.parse(&text) {
        Ok(v) => Ok(Some(v)),
        Err(Problem::Malformed) => Err(SettingError::Malformed {
            name: name.into(),
            value: shown,
            noun: kind.noun(),
            accepted: kind.accepted(),
        }),
        Err(Problem::OutOfRange(problem)) => Err(SettingError::OutOfRange {
            name: name.into(),
            value: shown,
            problem,
            accepted: kind.accepted(),
        }),
    }
}

impl<K: Kind> Var<K> {
    /// The value set in `env`, if any (for a reader whose own default is
    /// "leave it to the layer below").
    pub fn set_value(&self, env: &dyn Env) -> Result<Option<K::Value>, SettingError> {
        parse_set(self.name, &self.kind, env)
    }

    /// The value: from `env` when set, else the default (a followed
    /// variable resolved in `env` too).
    pub fn get(&self, env: &dyn Env) -> Result<K::Value, SettingError> {
        match self.set_value(env)? {
            Some(v) => Ok(v),
            None => match &self.default {
                Fallback::Value(v) => Ok(v.clone()),
                Fallback::Follows(other) => other.get(env),
            },
        }
    }
}

impl<K: Kind> OptVar<K> {
    /// The value set in `env`, `None` when unset.
    pub fn get(&self, env: &dyn Env) -> Result<Option<K::Value>, SettingError> {
        parse_set(self.name, &self.kind, env)
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The variable is set.
    Environment,
    /// It is unset: its default (or the variable it follows).
    Default,
}

/// A variable's value as [`Setting::resolve`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical text (sizes in bytes, booleans `1`/`0`, durations in
    /// nanoseconds); `None`: unset and without a default.
    pub value: Option<String>,
    /// The same as people write it ("1M", "on", "2s").
    pub human: Option<String>,
    /// Where it came from.
    pub source: Source,
}

/// What the registry, the check and the listing see of any variable.
pub trait Setting: Sync {
    /// Its name.
    fn name(&self) -> &'static str;
    /// One line: what it does.
    fn doc(&self) -> &'static str;
    /// Who reads it.
    fn group(&self) -> Group;
    /// Its kind as a listing names it.
    fn kind_name(&self) -> String;
    /// What it accepts.
    fn accepted(&self) -> String;
    /// Its default, as people write it, or what decides when it is unset.
    fn default_text(&self) -> String;
    /// Whether its value is secret.
    fn hidden(&self) -> bool;
    /// Parses its value if set (nothing else: a followed variable is
    /// checked on its own).
    fn check(&self, env: &dyn Env) -> Result<(), SettingError>;
    /// Its value in `env`, default resolved.
    fn resolve(&self, env: &dyn Env) -> Result<Resolved, SettingError>;
    /// A canonical text read back and written again: the identity on any
    /// text [`Setting::resolve`] gives (the property tests and the fuzz
    /// target check that C code gets every value exactly); `None` if it is
    /// not canonical text of this setting's kind.
    fn reread(&self, canonical: &str) -> Option<String>;
}

impl<K: Kind> Setting for Var<K> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn doc(&self) -> &'static str {
        self.doc
    }
    fn group(&self) -> Group {
        self.group
    }
    fn kind_name(&self) -> String {
        self.kind.name()
    }
    fn accepted(&self) -> String {
        self.kind.accepted()
    }
    fn default_text(&self) -> String {
        match &self.default {
            Fallback::Value(v) => self.kind.human(v),
            Fallback::Follows(other) => format!("{}'s value", other.name),
        }
    }
    fn hidden(&self) -> bool {
        self.kind.hidden()
    }
    fn check(&self, env: &dyn Env) -> Result<(), SettingError> {
        self.set_value(env).map(drop)
    }
    fn resolve(&self, env: &dyn Env) -> Result<Resolved, SettingError> {
        let source = if self.set_value(env)?.is_some() {
            Source::Environment
        } else {
            Source::Default
        };
        let v = self.get(env)?;
        Ok(Resolved {
            value: Some(self.kind.canonical(&v)),
            human: Some(self.kind.human(&v)),
            source,
        })
    }
    fn reread(&self, canonical: &str) -> Option<String> {
        self.kind
            .read_canonical(canonical)
            .map(|v| self.kind.canonical(&v))
    }
}

impl<K: Kind> Setting for OptVar<K> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn doc(&self) -> &'static str {
        self.doc
    }
    fn group(&self) -> Group {
        self.group
    }
    fn kind_name(&self) -> String {
        self.kind.name()
    }
    fn accepted(&self) -> String {
        self.kind.accepted()
    }
    fn default_text(&self) -> String {
        self.decided.to_string()
    }
    fn hidden(&self) -> bool {
        self.kind.hidden()
    }
    fn check(&self, env: &dyn Env) -> Result<(), SettingError> {
        self.get(env).map(drop)
    }
    fn resolve(&self, env: &dyn Env) -> Result<Resolved, SettingError> {
        Ok(match self.get(env)? {
            Some(v) => Resolved {
                value: Some(self.kind.canonical(&v)),
                human: Some(self.kind.human(&v)),
                source: Source::Environment,
            },
            None => Resolved {
                value: None,
                human: None,
                source: Source::Default,
            },
        })
    }
    fn reread(&self, canonical: &str) -> Option<String> {
        self.kind
            .read_canonical(canonical)
            .map(|v| self.kind.canonical(&v))
    }
}
