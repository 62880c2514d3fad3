//! Profiles added for the multicast experiments (issue 5), embedded here
//! so that experiments and tests can name them like built-in ones. The
//! command line takes them by path (`--profile profiles/gm2-lanai91.toml`)
//! until they join [`crate::profile::BUILTIN`].

use crate::profile::{Profile, ProfileError};

/// (name, TOML text) of each profile this module knows.
pub const EXTRA: &[(&str, &str)] = &[
    ("fm-lanai43-wc", include_str!("../../../../profiles/fm-lanai43-wc.toml")),
    ("gm2-lanai91", include_str!("../../../../profiles/gm2-lanai91.toml")),
];

/// A profile by name: one of [`EXTRA`], else whatever [`Profile::load`]
/// finds (a built-in name or a path).
pub fn load(name: &str) -> Result<Profile, ProfileError> {
    match EXTRA.iter().find(|(n, _)| *n == name) {
        Some((n, text)) => Profile::from_toml(n, text),
        None => Profile::load(name),
    }
}

/// [`load`] for names known to be there; panics otherwise (experiments and
/// tests that name a profile in code).
pub fn get(name: &str) -> Profile {
    load(name).unwrap_or_else(|e| panic!("profile {name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extra_profile_loads_and_is_named_like_its_entry() {
        for (n, _) in EXTRA {
            assert_eq!(&get(n).name, n);
        }
    }
}
