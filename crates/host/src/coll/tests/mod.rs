//! Collective tests: schedules under the reference evaluator, and both
//! modes through the (lossy) test network.

mod bcast;
mod harness;
mod movement;
mod network;
mod nic_protocol;
mod reference_checks;
mod split;
