//! Arbitrary bytes through the packet parser: never a panic, and anything
//! accepted re-encodes to a packet that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{JobSecret, MacKey, Packet};

fn check(key: &MacKey, data: &[u8]) {
    if let Ok(p) = Packet::parse(data, key) {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(key, &mut buf).expect("a parsed packet re-encodes");
        assert_eq!(Packet::parse(&buf[..n], key).expect("re-encoded packet parses"), p);
    }
}

fuzz_target!(|data: &[u8]| {
    let key = MacKey::new(&JobSecret::from_bytes([3; 16]), 1);
    check(&key, data);
    // Random bytes never carry a valid MAC; a copy with the magic, version
    // and length fields right, sealed, reaches every kind and body parser
    // behind them.
    if data.len() >= outboard_wire::HEADER_LEN && data.len() - outboard_wire::HEADER_LEN <= usize::from(u16::MAX) {
        let mut sealed = data.to_vec();
        sealed[0..2].copy_from_slice(&outboard_wire::MAGIC.to_be_bytes());
        sealed[2] = outboard_wire::VERSION;
        let body_len = (sealed.len() - outboard_wire::HEADER_LEN) as u16;
        sealed[6..8].copy_from_slice(&body_len.to_be_bytes());
        outboard_wire::seal(&mut sealed, &key);
        check(&key, &sealed);
    }
});
