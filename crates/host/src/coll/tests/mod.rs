//! Collective tests: schedules under the reference evaluator, and both
//! modes through the (lossy) test network.

mod harness;
mod network;
mod reference_checks;
mod split;
