//! What each compared figure is worth: fitted, informed or predicted.
//!
//! A simulated figure that matches a paper says something only if nothing
//! was fitted on it. `data/calibration.toml` records, per profile
//! parameter, the figure ids it was fitted on and the ids whose miss
//! informed its value; and the model or method choices made after seeing a
//! figure miss; and the figures that are identities of a profile's inputs.
//! From it every compared row gets its [`Basis`]:
//!
//! - **C** (calibrated): a parameter was fitted on this figure, or the
//!   figure is an identity of the profile's own costs;
//! - **I** (informed): a value or a choice was made after seeing this
//!   figure miss;
//! - **P** (predicted): neither.
//!
//! The record is embedded, like the profiles, so the binary needs no files.
//! It is data, not code, so that a refit changes one file and every table,
//! plot and test that reads a basis follows.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

use serde::Deserialize;
use thiserror::Error;

/// The embedded record.
pub const TOML: &str = include_str!("../../../data/calibration.toml");

/// How much a compared figure says about the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Basis {
    /// A parameter was fitted on it (or it is an identity of the inputs).
    Calibrated,
    /// A value or a choice was made after seeing it miss.
    Informed,
    /// Predicted: nothing was fitted or chosen on it.
    Predicted,
}

impl Basis {
    /// The one-letter label printed in tables: C, I or P.
    pub fn letter(self) -> &'static str {
        match self {
            Basis::Calibrated => "C",
            Basis::Informed => "I",
            Basis::Predicted => "P",
        }
    }

    /// Every basis, in the order summaries list them.
    pub const ALL: [Basis; 3] = [Basis::Predicted, Basis::Calibrated, Basis::Informed];
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

/// A profile parameter and the figures it was fitted on or informed by.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fit {
    /// Profiles (their `name`) whose parameter this is.
    pub profiles: Vec<String>,
    /// The parameter's TOML path(s) in the profile, comma-separated
    /// (`qsnet.<field>`: a field of `data/qsnet-elan3.toml`, which the
    /// `elan3` profile's QsNet model reads beside the profile).
    pub param: String,
    /// Row ids it was fitted on: basis C.
    #[serde(default)]
    pub fitted: Vec<String>,
    /// Row ids whose miss informed its value: basis I.
    #[serde(default)]
    pub informed: Vec<String>,
    /// How far its fitted figures may drift (relative) before the profile
    /// needs a refit; [`DEFAULT_TOLERANCE`] when not given.
    pub tolerance: Option<f64>,
    /// Why, in a sentence.
    pub why: String,
}

impl Fit {
    fn fitted_on(&self, profile: &str, id: &str) -> bool {
        names(&self.profiles, profile) && self.fitted.iter().any(|i| i == id)
    }

    fn informed_by(&self, profile: &str, id: &str) -> bool {
        names(&self.profiles, profile) && self.informed.iter().any(|i| i == id)
    }
}

/// How far a fitted figure may drift from the paper before its profile
/// needs a refit (later model changes move fitted figures a little; the
/// profile files say when they were fitted).
pub const DEFAULT_TOLERANCE: f64 = 0.025;

/// An identity of the profile's inputs comes out exact but for rounding.
pub const IDENTITY_TOLERANCE: f64 = 1e-6;

/// How far from the paper a figure that is not fitted may be before it
/// counts as a miss.
pub const MISS: f64 = 0.15;

/// Figures named for some profiles, with the reason: an identity of the
/// profiles' inputs (basis C), or a figure known to miss the paper by more
/// than [`MISS`] (the explanation - what the model lacks, what the paper's
/// own numbers rule out - is the finished result; the tests check that
/// every miss is listed and every listed one still misses).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listed {
    /// Profiles it concerns.
    pub profiles: Vec<String>,
    /// Row ids.
    pub ids: Vec<String>,
    /// Why, in a sentence or two.
    pub why: String,
}

impl Listed {
    fn names(&self, profile: &str, id: &str) -> bool {
        names(&self.profiles, profile) && self.ids.iter().any(|i| i == id)
    }
}

/// A model or method choice made after seeing figures miss.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// Profiles it concerns; empty for every profile.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// What was chosen.
    pub what: String,
    /// Row ids whose miss informed it: basis I.
    pub informed: Vec<String>,
    /// Why, in a sentence.
    pub why: String,
}

/// The whole record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Fitted parameters.
    #[serde(default, rename = "fit")]
    pub fits: Vec<Fit>,
    /// Choices made after misses.
    #[serde(default, rename = "choice")]
    pub choices: Vec<Choice>,
    /// Identities.
    #[serde(default, rename = "identity")]
    pub identities: Vec<Listed>,
    /// Explained misses.
    #[serde(default, rename = "known_miss")]
    pub known_misses: Vec<Listed>,
}

/// The record could not be read.
#[derive(Debug, Error)]
#[error("calibration record: {0}")]
pub struct RecordError(String);

/// The profile a series belongs to: its first word, less a `+variant`
/// suffix (`gm-lanai43+mpi PE` belongs to `gm-lanai43`, whose file holds
/// the `[mpi]` parameters too).
pub fn profile_of_series(series: &str) -> &str {
    let first = series.split_whitespace().next().unwrap_or("");
    first.split('+').next().unwrap_or(first)
}

fn names(list: &[String], profile: &str) -> bool {
    list.iter().any(|p| p == profile)
}

impl Record {
    /// Parses a record.
    pub fn parse(text: &str) -> Result<Record, RecordError> {
        toml::from_str(text).map_err(|e| RecordError(e.to_string()))
    }

    /// The embedded record (checked by the crate's tests, so it parses).
    pub fn builtin() -> &'static Record {
        static RECORD: OnceLock<Record> = OnceLock::new();
        RECORD.get_or_init(|| Record::parse(TOML).expect("data/calibration.toml is checked by the tests"))
    }

    /// The basis of the figure `id` (as a row carries it, `a*b` for a
    /// product) compared under `profile`.
    pub fn basis(&self, profile: &str, id: &str) -> Basis {
        let fitted = self.fits.iter().any(|f| f.fitted_on(profile, id))
            || self.identities.iter().any(|x| x.names(profile, id));
        if fitted {
            return Basis::Calibrated;
        }
        let informed = self.fits.iter().any(|f| f.informed_by(profile, id))
            || self
                .choices
                .iter()
                .any(|c| (c.profiles.is_empty() || names(&c.profiles, profile)) && c.informed.iter().any(|i| i == id));
        if informed {
            Basis::Informed
        } else {
            Basis::Predicted
        }
    }

    /// How far the figure `id`, fitted under `profile`, may drift: the
    /// tightest tolerance of the fits and identities that name it.
    pub fn tolerance(&self, profile: &str, id: &str) -> f64 {
        self.fits
            .iter()
            .filter(|f| f.fitted_on(profile, id))
            .map(|f| f.tolerance.unwrap_or(DEFAULT_TOLERANCE))
            .chain(self.identities.iter().any(|x| x.names(profile, id)).then_some(IDENTITY_TOLERANCE))
            .reduce(f64::min)
            .unwrap_or(DEFAULT_TOLERANCE)
    }

    /// Whether the record explains a miss of `id` under `profile`.
    pub fn known_miss(&self, profile: &str, id: &str) -> bool {
        self.known_misses.iter().any(|m| m.names(profile, id))
    }

    /// Every row id the record names, with the profiles it names it for
    /// (empty: every profile).
    pub fn ids(&self) -> BTreeSet<(String, Vec<String>)> {
        let mut out = BTreeSet::new();
        for f in &self.fits {
            for id in f.fitted.iter().chain(&f.informed) {
                out.insert((id.clone(), f.profiles.clone()));
            }
        }
        for c in &self.choices {
            for id in &c.informed {
                out.insert((id.clone(), c.profiles.clone()));
            }
        }
        for x in &self.identities {
            for id in &x.ids {
                out.insert((id.clone(), x.profiles.clone()));
            }
        }
        for m in &self.known_misses {
            for id in &m.ids {
                out.insert((id.clone(), m.profiles.clone()));
            }
        }
        out
    }

    /// Every profile the record names.
    pub fn profiles(&self) -> BTreeSet<&str> {
        let fits = self.fits.iter().flat_map(|f| f.profiles.iter());
        let choices = self.choices.iter().flat_map(|c| c.profiles.iter());
        let ids = self.identities.iter().flat_map(|x| x.profiles.iter());
        let misses = self.known_misses.iter().flat_map(|m| m.profiles.iter());
        fits.chain(choices).chain(ids).chain(misses).map(String::as_str).collect()
    }
}

/// The basis of a row of `series` compared with figure `id`, by the
/// embedded record.
pub fn basis(series: &str, id: &str) -> Basis {
    Record::builtin().basis(profile_of_series(series), id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::BUILTIN;

    #[test]
    fn the_embedded_record_parses() {
        let r = Record::parse(TOML).unwrap();
        assert!(!r.fits.is_empty());
    }

    #[test]
    fn every_profile_it_names_is_built_in() {
        for p in Record::builtin().profiles() {
            assert!(BUILTIN.iter().any(|(n, _)| *n == p), "{p} is not a built-in profile");
        }
    }

    #[test]
    fn every_parameter_it_names_exists_in_its_profiles() {
        for f in &Record::builtin().fits {
            for p in &f.profiles {
                let text = BUILTIN.iter().find(|(n, _)| n == p).map(|(_, t)| *t).unwrap();
                let doc: toml::Table = toml::from_str(text).unwrap();
                for path in f.param.split(',').map(str::trim) {
                    // `qsnet.*`: the QsNet model's own table, elan3's only.
                    let (doc, path) = match path.strip_prefix("qsnet.") {
                        Some(rest) => {
                            assert_eq!(p, "elan3", "{path}: only elan3 has the QsNet table");
                            (toml::from_str::<toml::Table>(crate::qsnet::params::TOML).unwrap(), rest)
                        }
                        None => (doc.clone(), path),
                    };
                    let mut at = toml::Value::Table(doc);
                    for part in path.split('.') {
                        at = at.get(part).unwrap_or_else(|| panic!("{p}: no parameter {path}")).clone();
                    }
                }
            }
        }
    }

    #[test]
    fn every_id_it_names_is_a_quoted_figure() {
        for (id, _) in Record::builtin().ids() {
            for part in id.split(['*', '/']) {
                assert!(crate::paper::figure(part).is_some(), "{id}: {part} is not in data/paper-figures.csv");
            }
        }
    }

    #[test]
    fn fitted_beats_informed_beats_predicted() {
        let r = Record::parse(
            r#"
            [[fit]]
            profiles = ["a"]
            param = "host.send_us"
            fitted = ["x"]
            informed = ["y"]
            why = "test"
            [[choice]]
            what = "a method"
            informed = ["x", "z"]
            why = "test"
            "#,
        )
        .unwrap();
        assert_eq!(r.basis("a", "x"), Basis::Calibrated);
        assert_eq!(r.basis("a", "y"), Basis::Informed);
        assert_eq!(r.basis("b", "y"), Basis::Predicted, "a fit is per profile");
        assert_eq!(r.basis("b", "z"), Basis::Informed, "a choice with no profiles concerns every profile");
        assert_eq!(r.basis("a", "w"), Basis::Predicted);
    }

    #[test]
    fn a_fit_may_loosen_its_tolerance_and_an_identity_is_exact() {
        let r = Record::parse(
            r#"
            [[fit]]
            profiles = ["a"]
            param = "host.send_us"
            fitted = ["x"]
            tolerance = 0.04
            why = "test"
            [[identity]]
            profiles = ["a"]
            ids = ["y"]
            why = "test"
            "#,
        )
        .unwrap();
        assert_eq!(r.tolerance("a", "x"), 0.04);
        assert_eq!(r.tolerance("a", "y"), IDENTITY_TOLERANCE);
        assert_eq!(r.tolerance("a", "z"), DEFAULT_TOLERANCE);
    }

    #[test]
    fn a_series_belongs_to_its_first_word_less_any_variant() {
        assert_eq!(profile_of_series("gm-lanai43+mpi PE"), "gm-lanai43");
        assert_eq!(profile_of_series("fm-lanai43-wc"), "fm-lanai43-wc");
        assert_eq!(profile_of_series("dpu400 NIC"), "dpu400");
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(Record::parse("[[fit]]\nprofiles=[]\nparam=\"x\"\nwhy=\"\"\nfited=[]\n").is_err());
    }
}
