//! Selective interrupts (dissertation 6.2.3): an interrupt only for marked
//! messages, only while the port's flag word is enabled, counted.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};

const P0: PortId = PortId(0);

fn pair(link: LinkConfig, seed: u64) -> (Network, Endpoint, Endpoint) {
    let mut net = Network::with_defaults(2, link, seed);
    let a = net.open_port(NodeId(0), P0).unwrap();
    let b = net.open_port(NodeId(1), P0).unwrap();
    (net, a, b)
}

fn interrupts(net: &mut Network, node: NodeId) -> Vec<Interrupt> {
    std::iter::from_fn(|| net.engine(node).poll_interrupt()).collect()
}

/// Sets `b`'s flag word and returns it.
fn arm(net: &mut Network, b: Endpoint) -> HostBuf {
    let word = net.memory(b.node).alloc(4);
    net.command(b.node, P0, Command::SetInterruptFlag { op: OpId(900), word }).unwrap();
    net.run_until_quiet().unwrap();
    let e = net.take_events(b.node);
    assert_eq!(e.iter().filter(|e| e.op == OpId(900)).map(|e| e.result).collect::<Vec<_>>(), [Ok(Completion::InterruptFlagSet)]);
    word
}

fn set_flag(net: &mut Network, node: NodeId, word: HostBuf, on: bool) {
    net.memory(node).bytes_mut(word).copy_from_slice(&u32::from(on).to_ne_bytes());
}

fn send(net: &mut Network, a: Endpoint, b: Endpoint, op: u64, marked: bool, len: usize) {
    let src = net.memory(a.node).alloc_with(&vec![op as u8; len]);
    let cmd = if marked {
        Command::SendMarked { op: OpId(op), dest: b, tag: 7, buf: src }
    } else {
        Command::Send { op: OpId(op), dest: b, tag: 7, buf: src }
    };
    net.command(a.node, P0, cmd).unwrap();
}

fn recv(net: &mut Network, b: Endpoint, op: u64, len: u32) -> HostBuf {
    let dst = net.memory(b.node).alloc(len);
    net.command(b.node, P0, Command::Recv { op: OpId(op), matching: RecvMatch::tag(7), buf: dst }).unwrap();
    dst
}

#[test]
fn only_marked_messages_interrupt_and_only_while_the_flag_is_on() {
    let (mut net, a, b) = pair(LinkConfig::default(), 1);
    let word = arm(&mut net, b);
    set_flag(&mut net, b.node, word, true);
    // Unmarked: delivered, no interrupt.
    recv(&mut net, b, 100, 64);
    send(&mut net, a, b, 1, false, 64);
    net.run_until_quiet().unwrap();
    assert!(interrupts(&mut net, b.node).is_empty());
    // Marked, flag on: one interrupt.
    recv(&mut net, b, 101, 64);
    send(&mut net, a, b, 2, true, 64);
    net.run_until_quiet().unwrap();
    assert_eq!(interrupts(&mut net, b.node), [Interrupt { port: P0 }]);
    // Marked, flag off: delivered, suppressed.
    set_flag(&mut net, b.node, word, false);
    recv(&mut net, b, 102, 64);
    send(&mut net, a, b, 3, true, 64);
    net.run_until_quiet().unwrap();
    assert!(interrupts(&mut net, b.node).is_empty());
    let done: Vec<OpId> = net.take_events(b.node).iter().map(|e| e.op).collect();
    assert_eq!(done, [OpId(100), OpId(101), OpId(102)]);
    let s = net.engine(b.node).stats().clone();
    assert_eq!((s.marked_delivered, s.interrupts_raised, s.interrupts_suppressed), (2, 1, 1));
    // The sender's engine never interrupts its own host for what it sent.
    assert_eq!(net.engine(a.node).stats().marked_delivered, 0);
}

#[test]
fn a_marked_message_held_as_unexpected_interrupts_when_a_receive_takes_it() {
    let (mut net, a, b) = pair(LinkConfig::default(), 2);
    let word = arm(&mut net, b);
    set_flag(&mut net, b.node, word, true);
    send(&mut net, a, b, 1, true, 3000);
    net.run_until_quiet().unwrap();
    assert!(interrupts(&mut net, b.node).is_empty(), "not delivered yet: nothing for the host to do");
    assert_eq!(net.engine(b.node).stats().unexpected, 1);
    let dst = recv(&mut net, b, 100, 3000);
    net.run_until_quiet().unwrap();
    assert_eq!(interrupts(&mut net, b.node), [Interrupt { port: P0 }]);
    assert_eq!(net.memory(b.node).bytes(dst), &[1u8; 3000][..]);
}

#[test]
fn deliveries_before_a_poll_coalesce_and_a_withdrawn_flag_never_interrupts() {
    let (mut net, a, b) = pair(LinkConfig::default(), 3);
    let word = arm(&mut net, b);
    set_flag(&mut net, b.node, word, true);
    for i in 0..5 {
        recv(&mut net, b, 100 + i, 16);
        send(&mut net, a, b, 1 + i, true, 16);
    }
    net.run_until_quiet().unwrap();
    assert_eq!(interrupts(&mut net, b.node).len(), 1);
    net.command(b.node, P0, Command::SetInterruptFlag { op: OpId(901), word: HostBuf { addr: 0, len: 0 } }).unwrap();
    recv(&mut net, b, 200, 16);
    send(&mut net, a, b, 20, true, 16);
    net.run_until_quiet().unwrap();
    assert!(interrupts(&mut net, b.node).is_empty());
    let s = net.engine(b.node).stats().clone();
    assert_eq!((s.marked_delivered, s.interrupts_raised, s.interrupts_suppressed), (6, 1, 1));
    // A flag word of any other size is refused.
    let bad = net.memory(b.node).alloc(8);
    net.command(b.node, P0, Command::SetInterruptFlag { op: OpId(902), word: bad }).unwrap();
    net.run_until_quiet().unwrap();
    let r: Vec<_> = net.take_events(b.node).into_iter().filter(|e| e.op == OpId(902)).map(|e| e.result).collect();
    assert_eq!(r, [Err(OpError::DmaFault)]);
}

#[test]
fn marked_messages_survive_loss_and_interrupt_once_each_delivery() {
    let (mut net, a, b) = pair(LinkConfig::lossy(0.2, 0.1, 0.05), 4);
    let word = arm(&mut net, b);
    set_flag(&mut net, b.node, word, true);
    let mut raised = 0;
    for i in 0..30u64 {
        let dst = recv(&mut net, b, 100 + i, 4000);
        send(&mut net, a, b, 1 + i, i % 3 == 0, 4000);
        net.run_until_quiet().unwrap();
        raised += interrupts(&mut net, b.node).len();
        assert_eq!(net.memory(b.node).bytes(dst), &vec![(1 + i) as u8; 4000][..]);
    }
    assert_eq!(raised, 10, "one per marked message, duplicates and retransmissions not counted again");
    assert_eq!(net.engine(b.node).stats().marked_delivered, 10);
}
