//! NICVM: user-defined modules for the offload engine.
//!
//! A module is a small program in a Pascal/C-like language (the NICVM
//! paper's, extended with floats, loops, functions, arrays and packet
//! access) that the engine runs for each packet addressed to it: to forward
//! a broadcast down a tree, combine a reduction, echo a packet. This crate
//! is the whole pipeline, as separate stages:
//!
//! 1. [`parse`] (lexer, parser) and [`compile`] - source to bytecode, with
//!    errors at a line and column;
//! 2. [`verify`] - any bytecode, ours or not, is checked before it may run
//!    (targets, stack depth, indices, arities) and turned into a
//!    [`VerifiedModule`];
//! 3. [`ModuleInstance::invoke`] - the interpreter, with a fuel budget per
//!    invocation, a call-depth limit and bounds-checked packet access,
//!    talking to the NIC only through the [`NicServices`] trait;
//! 4. [`Registry`] - named modules per NIC, owned by jobs, persistent or not.
//!
//! It depends on no other Outboard crate; the engine depends on it. No input
//! (source, bytecode, packet) makes it panic: every failure is a typed error.
//! The language reference is `docs/nicvm.md`.
//!
//! ```
//! use outboard_nicvm::{compile, harness::Recorder, ModuleInstance, PacketFate};
//!
//! let m = compile("func main() mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, mpi_get_rank() + 1); return NICVM_RESULT_PACKET_CONSUMED; end func;").unwrap();
//! let mut inst = ModuleInstance::new(m.module);
//! let mut nic = Recorder::new(0, 4, 0);
//! let out = inst.invoke(&mut nic, b"hello", &mut [], 1000).unwrap();
//! assert_eq!(nic.sent_to(), vec![1]);
//! assert_eq!(out.fate, PacketFate::Consume);
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod asm;
pub mod ast;
pub mod builtins;
pub mod bytecode;
mod compiler;
mod error;
pub mod harness;
mod interp;
pub mod lexer;
mod limits;
pub mod parser;
mod program;
mod registry;
mod services;
mod verifier;

pub use compiler::{compile, compile_ast, compile_with, Compiled, DebugInfo};
pub use error::{CompileError, CompileErrorKind};
pub use interp::{Area, ModuleInstance, Outcome, PacketFate, TrapKind, VmError};
pub use limits::Limits;
pub use parser::parse;
pub use program::VerifiedModule;
pub use registry::{
    JobKey, LoadOptions, ModuleCode, ModuleInfo, PortId, Registry, RegistryError, RegistryLimits,
    Requester,
};
pub use services::{NicServices, PacketType, Payload, ServiceError};
pub use verifier::{verify, VerifyError, VerifyErrorKind};
