//! Arbitrary module-invocation packets into a live engine with NICVM
//! modules loaded (the Figure 2 broadcast, an endless loop, a module that
//! reads past its packet) over an installed group: never a panic, never a
//! stall (the engine's next deadline is always handled), and the modules'
//! errors are counted, not fatal. The header fields, payload and packet
//! type come from the input; the datagram is sealed under the job's key so
//! the invocation path, not the MAC, sees it. Some inputs are collective
//! packets instead (any epoch, round, schedule, the failed flag
//! `COLL_ROUND_FAILED` set or not) for an allreduce under way whose
//! combine step is a module (a max operator, or the endless loop).
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_engine::{
    Command, Datatype, Endpoint, Engine, EngineConfig, Fold, GroupId, HostBuf, Instant, ModuleId, NodeId,
    OpId, PortId, RecvMatch, Reduction, Schedule, ScheduleId, Step, VecMemory,
};
use outboard_wire::{BodyRepr, CollHeader, Header, Kind, NicvmHeader, NicvmType, Seq, COLL_ROUND_FAILED, HEADER_LEN};

const BCAST: &str = include_str!("../../crates/nicvm/modules/bcast.nvm");
const LOOP: &str = "func main() while 1 do end while; return 0; end func;";
const PAST: &str = "func main() return packet_get_i64(packet_length()); end func;";
const MAX: &str = include_str!("../../crates/nicvm/modules/combine_max_i64.nvm");

fn load(e: &mut Engine<VecMemory>, id: u32, src: &str) {
    let code = outboard_nicvm::compile(src).unwrap().module.bytecode().encode();
    let name: HostBuf = e.dma_mut().alloc_with(b"m");
    let code: HostBuf = e.dma_mut().alloc_with(&code);
    let cmd = Command::NicvmLoad { op: OpId(10 + u64::from(id)), module: ModuleId(id), name, code, acc_len: 16, persist: false, replace: false };
    e.handle_command(Instant::ZERO, PortId(0), cmd).unwrap();
}

fuzz_target!(|data: &[u8]| {
    let mut cfg = EngineConfig::new(NodeId(1), 1, 7);
    cfg.mtu = 2048;
    let key = cfg.mac_key();
    let mut e = Engine::new(cfg, VecMemory::new(), Instant::ZERO).unwrap();
    let me = e.open_port(Instant::ZERO, PortId(0)).unwrap();
    let eps: Vec<Endpoint> = (0..4).map(|n| if n == 1 { me } else { Endpoint { node: NodeId(n), port: PortId(0), gen: 1 } }).collect();
    let members = e.dma_mut().alloc_with(&outboard_engine::MemberList::from_endpoints(eps.iter().copied()).encode());
    e.handle_command(Instant::ZERO, PortId(0), Command::CreateGroup { op: OpId(1), group: GroupId(3), rank: 1, members }).unwrap();
    load(&mut e, 1, BCAST);
    load(&mut e, 2, LOOP);
    load(&mut e, 3, PAST);
    load(&mut e, 4, MAX);
    // An allreduce at rank 1 of group 3: combine the other three, send to
    // them; its operator is the max module or the endless loop.
    let sched = Schedule::new(vec![Step::recv([0, 2, 3], Fold::Combine), Step::send([0, 2, 3])]).encode();
    let sched = e.dma_mut().alloc_with(&sched);
    e.handle_command(Instant::ZERO, PortId(0), Command::SetSchedule { op: OpId(3), group: GroupId(3), schedule: ScheduleId(0), buf: sched }).unwrap();
    let op_module = if data.first().is_some_and(|b| b & 1 == 1) { 2 } else { 4 };
    let (send, recv) = (e.dma_mut().alloc_with(&[5; 16]), e.dma_mut().alloc(16));
    let reduction = Some(Reduction::module(ModuleId(op_module), 1, Datatype::I64));
    let coll = Command::Collective { op: OpId(4), group: GroupId(3), schedule: ScheduleId(0), reduction, send, recv };
    e.handle_command(Instant::ZERO, PortId(0), coll).unwrap();
    let r = e.dma_mut().alloc(256);
    e.handle_command(Instant::ZERO, PortId(0), Command::Recv { op: OpId(2), matching: RecvMatch::any(), buf: r }).unwrap();
    let mut out = vec![0u8; 2048];
    let mut seq = [0u32; 4];
    // Each invocation: 24 bytes of header fields, a length byte, payload.
    let mut rest = data;
    let mut t = 0u64;
    while rest.len() >= 25 {
        let b = &rest[..25];
        let from = u32::from(b[0] % 4);
        let h = NicvmHeader {
            src_port: b[1] % 2,
            dst_port: b[2] % 2,
            ptype: if b[3] & 1 == 0 { NicvmType::NicData } else { NicvmType::HostData },
            flags: b[3] >> 1 & 1,
            src_gen: u32::from(b[4] % 3),
            dst_gen: u32::from(b[5] % 3),
            msg_id: u32::from_le_bytes([b[6], b[7], b[8], b[9]]),
            module: u32::from(b[10] % 5),
            generation: u32::from(b[11] % 3),
            group: u64::from(b[12] % 2) + 2,
            root: u32::from(b[13] % 6),
            src_rank: u32::from(b[14] % 6),
        };
        let len = usize::from(b[24]).min(rest.len() - 25);
        let payload = &rest[25..25 + len];
        let hdr = Header { kind: Kind::Nicvm, flags: 0, src_node: from, dst_node: 1, boot: 1, seq: Seq(seq[from as usize]), ack: Seq(0), horizon: Seq(seq[from as usize] + 1) };
        // Mostly in order; sometimes a repeat or a gap.
        if b[15] & 3 != 0 {
            seq[from as usize] += 1;
        }
        let (hdr, body) = if b[16] & 3 == 0 {
            let c = CollHeader {
                src_port: h.src_port,
                dst_port: h.dst_port,
                src_gen: h.src_gen,
                dst_gen: h.dst_gen,
                msg_id: h.msg_id,
                group: h.group,
                epoch: u32::from(b[17] % 3),
                round: u16::from(b[18] % 3) | if b[19] & 1 == 1 { COLL_ROUND_FAILED } else { 0 },
                src_rank: h.src_rank,
                total_len: len as u32,
                offset: 0,
                schedule: u16::from(b[20] % 2),
            };
            (Header { kind: Kind::Coll, ..hdr }, BodyRepr::Coll(c))
        } else {
            (hdr, BodyRepr::Nicvm(h))
        };
        let mut dgram = vec![0u8; HEADER_LEN + outboard_wire::NICVM_FIXED_LEN.max(outboard_wire::COLL_FIXED_LEN) + len];
        let off = outboard_wire::emit_prefix(&hdr, &body, len, &mut dgram).unwrap();
        dgram.truncate(off + len);
        dgram[off..].copy_from_slice(payload);
        outboard_wire::seal(&mut dgram, &key);
        t += 1_000;
        e.handle_packet(Instant::from_nanos(t), NodeId(from), &dgram);
        while e.poll_transmit(Instant::from_nanos(t), &mut out).is_some() {}
        while e.poll_event().is_some() {}
        if let Some(d) = e.poll_timeout() {
            t = t.max(d.as_nanos());
            e.handle_timeout(Instant::from_nanos(t));
        }
        rest = &rest[25 + len..];
    }
    assert!(e.nicvm_reports().len() == 4, "hostile packets unload nothing");
});
