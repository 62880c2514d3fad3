//! Arbitrary datagrams into a live engine that has ports open, regions
//! registered and receives posted: never a panic, and the target region is
//! only ever written by well-formed RDMA with its key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_engine::{Command, Engine, EngineConfig, Instant, NodeId, OpId, PortId, RecvMatch, VecMemory};

fuzz_target!(|data: &[u8]| {
    let mut cfg = EngineConfig::new(NodeId(1), 1, 7);
    cfg.mtu = 2048;
    let key = cfg.mac_key();
    let mut e = Engine::new(cfg, VecMemory::new(), Instant::ZERO).unwrap();
    e.open_port(Instant::ZERO, PortId(0)).unwrap();
    let r = e.dma_mut().alloc(256);
    e.handle_command(Instant::ZERO, PortId(0), Command::Recv { op: OpId(1), matching: RecvMatch::any(), buf: r }).unwrap();
    // One naming a source, for the closure notice (kind 14) to fail.
    let named = e.dma_mut().alloc(64);
    e.handle_command(Instant::ZERO, PortId(0), Command::Recv { op: OpId(3), matching: RecvMatch::from(NodeId(2), PortId(0), 5), buf: named }).unwrap();
    let reg = e.dma_mut().alloc(64);
    e.handle_command(Instant::ZERO, PortId(0), Command::Register { op: OpId(2), buf: reg }).unwrap();
    let mut out = vec![0u8; 2048];
    // Datagrams are length-prefixed pieces of the input; the first byte of
    // each picks the claimed source node.
    let mut rest = data;
    let mut t = 0u64;
    while rest.len() >= 2 {
        let len = usize::from(rest[0]) * 4;
        let from = NodeId(u32::from(rest[1] % 4));
        let body = &rest[2..];
        let take = len.min(body.len());
        t += 1_000;
        let mut dgram = body[..take].to_vec();
        // Most datagrams get the magic, version, length and the job's MAC
        // right, so they reach the protocol logic; some stay raw.
        if rest[1] & 0x80 == 0 && dgram.len() >= outboard_wire::HEADER_LEN {
            dgram[0..2].copy_from_slice(&outboard_wire::MAGIC.to_be_bytes());
            dgram[2] = outboard_wire::VERSION;
            let body_len = (dgram.len() - outboard_wire::HEADER_LEN) as u16;
            dgram[6..8].copy_from_slice(&body_len.to_be_bytes());
            outboard_wire::seal(&mut dgram, &key);
        }
        e.handle_packet(Instant::from_nanos(t), from, &dgram);
        while e.poll_transmit(Instant::from_nanos(t), &mut out).is_some() {}
        while e.poll_event().is_some() {}
        if let Some(d) = e.poll_timeout() {
            e.handle_timeout(d.max(Instant::from_nanos(t)));
        }
        rest = &body[take..];
    }
});
