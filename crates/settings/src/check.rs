//! Checking an environment as a whole, and one variable by name.

use crate::env::{value, Env};
use crate::error::SettingError;
use crate::registry::{find, ALL};
use crate::suggest::closest;
use crate::var::Resolved;
use crate::PREFIX;

/// Every problem in `env`: each registered variable that is set is parsed
/// (in registry order), then each set `OUTBOARD_*` name that is not
/// registered is reported (sorted), with the closest known name.
pub fn check_all(env: &dyn Env) -> Vec<SettingError> {
    let mut errors: Vec<SettingError> = ALL.iter().filter_map(|s| s.check(env).err()).collect();
    let mut unknown: Vec<String> = env
        .names()
        .into_iter()
        .filter(|n| n.starts_with(PREFIX) && find(n).is_none() && value(env, n).is_some())
        .collect();
    unknown.sort();
    unknown.dedup();
    errors.extend(unknown.into_iter().map(|name| {
        let suggestion = closest(&name);
        SettingError::Unknown { name, suggestion }
    }));
    errors
}

/// The first problem [`check_all`] finds. What a process runs before it
/// starts: the runtime at world start, the PMPI library at `MPI_Init`.
pub fn check(env: &dyn Env) -> Result<(), SettingError> {
    check_all(env).into_iter().next().map_or(Ok(()), Err)
}

/// The variable called `name`, resolved in `env` (`outboard_setting`'s
/// answer); an unknown name is [`SettingError::Unknown`].
pub fn resolve(name: &str, env: &dyn Env) -> Result<Resolved, SettingError> {
    let s = find(name).ok_or_else(|| SettingError::Unknown {
        name: name.to_string(),
        suggestion: closest(name),
    })?;
    s.resolve(env)
}
