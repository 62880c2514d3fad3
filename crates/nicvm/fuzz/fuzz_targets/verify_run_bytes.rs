//! Arbitrary bytes as bytecode: the decoder or verifier rejects them, or the
//! interpreter runs them to a result or a clean trap within the fuel, never
//! a panic, a hang or an out-of-bounds access.
//!
//! The first byte picks the shape: even - the rest is a whole encoded
//! module; odd - the next three bytes give main's locals, the global count
//! and the packet length, and the rest is main's instruction stream (which
//! reaches the verifier and interpreter far more often than whole modules).
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use outboard_nicvm::bytecode::{decode_code, Function, Module};
use outboard_nicvm::harness::NullServices;
use outboard_nicvm::{verify, Limits, ModuleInstance, TrapKind};

const FUEL: u64 = 10_000;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (module, packet_len) = if mode % 2 == 0 {
        match Module::decode(rest) {
            Ok(m) => (m, 16),
            Err(_) => return,
        }
    } else {
        let [locals, globals, plen, code @ ..] = rest else {
            return;
        };
        let Ok(code) = decode_code(code, 4) else {
            return;
        };
        let m = Module {
            entry: 0,
            globals: vec![0; usize::from(*globals % 5)],
            functions: vec![Function {
                name: "main".into(),
                params: 0,
                locals: u16::from(*locals % 17),
                code,
            }],
        };
        (m, usize::from(*plen % 33))
    };
    let Ok(verified) = verify(&module, &Limits::default()) else {
        return;
    };
    let mut inst = ModuleInstance::new(Arc::new(verified));
    let mut nic = NullServices {
        rank: 1,
        size: 4,
        root: 0,
        source: 2,
        sends: 0,
    };
    let packet: Vec<u8> = (0..packet_len as u8).collect();
    let mut acc = [0u8; 16];
    for _ in 0..2 {
        match inst.invoke(&mut nic, &packet, &mut acc, FUEL) {
            Ok(o) => assert!(o.instructions <= FUEL),
            Err(e) => {
                assert!(e.instructions <= FUEL);
                assert!(
                    !matches!(e.kind, TrapKind::Internal(_)),
                    "verifier let through: {e}"
                );
            }
        }
    }
});
