//! Every `OUTBOARD_*` environment variable, declared once and parsed
//! strictly by its kind.
//!
//! Why one place: each part of Outboard used to read its variables its own
//! way, and each had its own idea of a valid value - `OUTBOARD_UDP_GSO=0`
//! turned segmentation *on* (only `off` was understood), `OUTBOARD_STATS=yes`
//! was ignored, the PMPI library read `OUTBOARD_MPI_MAX_BYTES=1M` with
//! `atoll` as one byte. A setting that is silently misread is worse than
//! one that stops the job, so here every variable has one entry in the
//! [`registry`] (name, kind, default, one line of documentation) and every
//! kind one parser ([`kinds`]); a value the parser refuses is a
//! [`SettingError`] whose message names the variable, the value and what
//! is accepted.
//!
//! Who reads through it: the runtime (world start fails on a bad value),
//! the C ABI (`outboard_setting` and `outboard_settings_check`, which the
//! PMPI library's C code calls at `MPI_Init` for its own variables),
//! `outboard config` (the listing), and the tests' own switches. The crate
//! has no Outboard dependency, so every layer, the tests of the lower
//! crates and the fuzz target can use it.
//!
//! ```
//! use outboard_settings::registry;
//! let env = [("OUTBOARD_MPI_MAX_BYTES", "1M")];
//! assert_eq!(registry::MPI_MAX_BYTES.get(&env).unwrap(), 1 << 20);
//! // A per-collective threshold follows the general one unless set.
//! assert_eq!(registry::MPI_BCAST_MAX_BYTES.get(&env).unwrap(), 1 << 20);
//! let bad = [("OUTBOARD_UDP_GSO", "maybe")];
//! let e = registry::UDP_GSO.get(&bad).unwrap_err().to_string();
//! assert!(e.starts_with("OUTBOARD_UDP_GSO=\"maybe\" is not a boolean: use"), "{e}");
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod check;
mod env;
mod error;
pub mod kinds;
pub mod registry;
mod suggest;
mod table;
mod var;

pub use check::{check, check_all, resolve};
pub use env::{Env, FnEnv, ProcessEnv};
pub use error::SettingError;
pub use kinds::{parse_size, Kind, Problem};
pub use registry::{find, ALL};
pub use suggest::closest;
pub use table::markdown_table;
pub use var::{Fallback, Group, OptVar, Resolved, Setting, Source, Var};

/// The prefix that marks a variable as Outboard's: one set with it that no
/// entry of the [`registry`] names is refused by [`check`] (a misspelt
/// setting would otherwise be silently ignored).
pub const PREFIX: &str = "OUTBOARD_";
