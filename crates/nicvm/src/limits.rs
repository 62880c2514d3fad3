//! Resource limits of the VM, shared by compiler, verifier and interpreter.
//!
//! A NIC has little memory and must keep forwarding packets whatever a module
//! does, so every resource a module can claim is bounded here, checked once at
//! load time where possible (code size, frame sizes) and otherwise at run time
//! (call depth, fuel).

/// The limits one module is verified and run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Functions per module.
    pub max_functions: usize,
    /// Instructions per function.
    pub max_code_len: usize,
    /// Instructions per module, all functions together.
    pub max_total_code: usize,
    /// Local slots per function (parameters and array elements included).
    pub max_locals: usize,
    /// Operand stack depth per function.
    pub max_stack: usize,
    /// Module-level slots (array elements included).
    pub max_globals: usize,
    /// Nested calls an invocation may make (`main` is depth 0).
    pub max_call_depth: usize,
    /// Value-stack slots a module instance preallocates, at most; a call
    /// that would need more traps as a stack overflow.
    pub max_stack_slots: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_functions: 256,
            max_code_len: 16 * 1024,
            max_total_code: 64 * 1024,
            max_locals: 1024,
            max_stack: 256,
            max_globals: 4096,
            max_call_depth: 64,
            max_stack_slots: 16 * 1024,
        }
    }
}
