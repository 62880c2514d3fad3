//! Arbitrary bytes through the packet parser: never a panic, and anything
//! accepted re-encodes to a packet that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_wire::{CollFailure, JobSecret, MacKey, Packet};

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
    // The cause a failed collective packet carries: exact or refused.
    if let Ok(c) = CollFailure::parse(data) {
        assert_eq!(c.encode(), data, "a parsed cause re-encodes to its bytes");
    }
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
        // The collective protocol's body (kind 13) is short and exact: a
        // copy forced to that kind and length reaches its parser on most
        // inputs instead of one in 256.
        let mut nic = data[..outboard_wire::HEADER_LEN].to_vec();
        let body = &data[outboard_wire::HEADER_LEN..];
        nic.extend_from_slice(&body[..body.len().min(outboard_wire::NIC_COLL_LEN)]);
        nic[0..2].copy_from_slice(&outboard_wire::MAGIC.to_be_bytes());
        nic[2] = outboard_wire::VERSION;
        nic[3] = outboard_wire::Kind::NicColl as u8;
        let body_len = (nic.len() - outboard_wire::HEADER_LEN) as u16;
        nic[6..8].copy_from_slice(&body_len.to_be_bytes());
        outboard_wire::seal(&mut nic, &key);
        check(&key, &nic);
        // Likewise the port-closure notice (kind 14, eight exact bytes).
        let mut closed = data[..outboard_wire::HEADER_LEN].to_vec();
        closed.extend_from_slice(&body[..body.len().min(8)]);
        closed[0..2].copy_from_slice(&outboard_wire::MAGIC.to_be_bytes());
        closed[2] = outboard_wire::VERSION;
        closed[3] = outboard_wire::Kind::PortClosed as u8;
        let body_len = (closed.len() - outboard_wire::HEADER_LEN) as u16;
        closed[6..8].copy_from_slice(&body_len.to_be_bytes());
        outboard_wire::seal(&mut closed, &key);
        check(&key, &closed);
    }
});
