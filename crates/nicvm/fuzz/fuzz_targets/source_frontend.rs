//! Arbitrary text through lexer, parser, compiler and verifier: an error
//! value or a module, never a panic. Modules that compile are run briefly,
//! and must not hit an internal (verifier-bug) trap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_nicvm::harness::NullServices;
use outboard_nicvm::{compile, ModuleInstance, TrapKind};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(compiled) = compile(src) else {
        return;
    };
    let mut inst = ModuleInstance::new(compiled.module);
    let mut nic = NullServices {
        rank: 1,
        size: 4,
        root: 0,
        source: 2,
        sends: 0,
    };
    let packet = [7u8; 24];
    let mut acc = [0u8; 16];
    match inst.invoke(&mut nic, &packet, &mut acc, 10_000) {
        Ok(o) => assert!(o.instructions <= 10_000),
        Err(e) => {
            assert!(e.instructions <= 10_000);
            assert!(!matches!(e.kind, TrapKind::Internal(_)), "{e}");
        }
    }
});
