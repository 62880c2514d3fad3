//! What the `outboard` command (src/main.rs) shares with its integration
//! tests, which call it directly: the recipe that builds liboutboard_mpi,
//! so that the command and the tests build it one way.

pub mod mpi_lib;
