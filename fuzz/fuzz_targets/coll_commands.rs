//! Arbitrary bytes as the host-memory side of collective commands: member
//! lists and schedules the engine reads must never panic it; anything the
//! schedule decoder accepts re-encodes to the same bytes; a group and any
//! accepted schedule then run a collective without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use outboard_engine::*;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Schedule::decode(data) {
        assert_eq!(s.encode(), data, "decode then encode is the identity");
    }
    if let Ok(m) = MemberList::decode(data) {
        assert_eq!(m.encode(), data, "a member list has one byte form");
    }

    let mut e = Engine::new(EngineConfig::new(NodeId(0), 1, 1), VecMemory::new(), Instant::ZERO).unwrap();
    let ep = e.open_port(Instant::ZERO, PortId(0)).unwrap();
    let peers = [ep, Endpoint { node: NodeId(1), port: PortId(0), gen: 1 }, Endpoint { node: NodeId(2), port: PortId(0), gen: 1 }];
    let members = e.dma_mut().alloc_with(&MemberList::from_endpoints(peers).encode());
    let sched = e.dma_mut().alloc_with(data);
    let junk_members = e.dma_mut().alloc_with(data);
    let g = GroupId(1);
    let _ = e.handle_command(Instant::ZERO, PortId(0), Command::CreateGroup { op: OpId(1), group: GroupId(2), rank: 0, members: junk_members });
    let _ = e.handle_command(Instant::ZERO, PortId(0), Command::CreateGroup { op: OpId(2), group: g, rank: 0, members });
    let _ = e.handle_command(Instant::ZERO, PortId(0), Command::SetSchedule { op: OpId(3), group: g, schedule: ScheduleId(0), buf: sched });
    let send = e.dma_mut().alloc_with(&[1; 16]);
    let recv = e.dma_mut().alloc(16);
    let red = Reduction::new(ReduceOp::Sum, Datatype::I32).ok();
    let _ = e.handle_command(Instant::ZERO, PortId(0), Command::Collective { op: OpId(4), group: g, schedule: ScheduleId(0), reduction: red, send, recv });
    let mut buf = vec![0u8; e.config().mtu];
    while e.poll_transmit(Instant::ZERO, &mut buf).is_some() {}
    while e.poll_event().is_some() {}
});
