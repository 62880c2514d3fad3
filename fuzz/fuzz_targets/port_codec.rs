//! Arbitrary bytes as the slots a port's process and its node's engine
//! exchange (`outboard_engine::port_codec`): decoding never panics,
//! whatever decodes re-encodes to the same bytes and decodes again to the
//! same value, and a decoded command handed to a live engine never panics
//! it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_engine::port_codec::{decode_command, decode_event, encode_command, encode_event, COMMAND_BYTES, EVENT_BYTES};
use outboard_engine::{Engine, EngineConfig, Instant, NodeId, PortId, VecMemory};

fuzz_target!(|data: &[u8]| {
    // The first COMMAND_BYTES are a command slot, the next EVENT_BYTES an
    // event slot; a short input is zero-filled.
    let mut c = [0u8; COMMAND_BYTES];
    let n = data.len().min(COMMAND_BYTES);
    c[..n].copy_from_slice(&data[..n]);
    let rest = &data[n..];
    let mut ev = [0u8; EVENT_BYTES];
    let m = rest.len().min(EVENT_BYTES);
    ev[..m].copy_from_slice(&rest[..m]);

    if let Ok(event) = decode_event(&ev) {
        let mut again = [0u8; EVENT_BYTES];
        encode_event(&event, &mut again);
        assert_eq!(again, ev, "an event has one encoding");
        assert_eq!(decode_event(&again), Ok(event));
    }

    if let Ok(cmd) = decode_command(&c) {
        let mut again = [0u8; COMMAND_BYTES];
        encode_command(&cmd, &mut again);
        assert_eq!(again, c, "a command has one encoding");
        assert_eq!(decode_command(&again), Ok(cmd));

        // What a hostile port could hand the engine: no panic.
        let mut e = Engine::new(EngineConfig::new(NodeId(0), 1, 1), VecMemory::new(), Instant::ZERO).unwrap();
        e.open_port(Instant::ZERO, PortId(0)).unwrap();
        e.dma_mut().alloc_with(&[7; 256]);
        let _ = e.handle_command(Instant::ZERO, PortId(0), cmd);
        let mut buf = vec![0u8; e.config().mtu];
        while e.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
        while e.poll_event().is_some() {}
    }
});
