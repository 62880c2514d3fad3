//! The shared-memory path's matching beside real engines: two nodes of
//! the test network stand for two ports of one node, joined by an
//! in-memory link with small fragments and short queues, and a third node
//! reaches them only through the engines.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use outboard_engine::{AtomicOp, AtomicWidth, Command, CommandError, Endpoint, Event, HostBuf, Instant, NodeId, PortId};
use outboard_testnet::{LinkConfig, Network};

use super::{Fragment, LinkError, LocalLink, PeerState, Sink};
use crate::testnet_io::NetIo;
use crate::*;

const FRAGMENT: u32 = 16;
const QUEUE: usize = 4;

/// Fragments with their bytes, in order.
type Queue = VecDeque<(Fragment, Vec<u8>)>;

/// Queues between linked ports: (from, to) -> fragments with their bytes;
/// and the ports that closed.
#[derive(Default)]
struct Wires {
    queues: HashMap<(u32, u32), Queue>,
    closed: Vec<u32>,
    pushed: u64,
}

/// A test network port with an in-memory link to the nodes in `linked`.
struct Linked {
    net: NetIo,
    wires: Arc<Mutex<Wires>>,
    linked: Vec<Endpoint>,
    peeked: Option<(u32, Fragment)>,
}

impl LocalLink for Linked {
    fn peer(&self, node: NodeId, port: PortId) -> Option<Endpoint> {
        self.linked.iter().copied().find(|e| e.node == node && e.port == port && *e != self.net.endpoint())
    }
    fn fragment_max(&self) -> u32 {
        FRAGMENT
    }
    fn push(&mut self, dest: Endpoint, tag: u64, total: u32, offset: u32, from: HostBuf) -> Result<bool, LinkError> {
        let mut w = self.wires.lock().unwrap();
        if w.closed.contains(&dest.node.0) {
            return Err(LinkError::PeerGone);
        }
        let q = w.queues.entry((self.net.endpoint().node.0, dest.node.0)).or_default();
        if q.len() >= QUEUE {
            return Ok(false);
        }
        let mut data = vec![0; from.len as usize];
        self.net.read(from.addr, &mut data)?;
        q.push_back((Fragment { src: self.net.endpoint(), tag, total, offset, len: from.len }, data));
        w.pushed += 1;
        Ok(true)
    }
    fn peek(&mut self) -> Option<Fragment> {
        let me = self.net.endpoint().node.0;
        let w = self.wires.lock().unwrap();
        let mut from: Vec<u32> = w.queues.iter().filter(|((_, to), q)| *to == me && !q.is_empty()).map(|((f, _), _)| *f).collect();
        from.sort_unstable();
        let f = *from.first()?;
        let frag = w.queues[&(f, me)].front().expect("non-empty").0;
        self.peeked = Some((f, frag));
        Some(frag)
    }
    fn take(&mut self, sink: Sink<'_>) -> Result<(), LinkError> {
        let (f, _) = self.peeked.take().expect("peeked first");
        let me = self.net.endpoint().node.0;
        let (_, data) = self.wires.lock().unwrap().queues.get_mut(&(f, me)).unwrap().pop_front().unwrap();
        match sink {
            Sink::Memory { addr, len } => self.net.write(addr, &data[..len as usize])?,
            Sink::Append(v) => v.extend_from_slice(&data),
        }
        Ok(())
    }
    fn peer_state(&mut self, peer: Endpoint) -> PeerState {
        let w = self.wires.lock().unwrap();
        let waiting = w.queues.get(&(peer.node.0, self.net.endpoint().node.0)).is_some_and(|q| !q.is_empty());
        if w.closed.contains(&peer.node.0) && !waiting {
            PeerState::Closed
        } else {
            PeerState::Open
        }
    }
}

impl PortIo for Linked {
    fn endpoint(&self) -> Endpoint {
        self.net.endpoint()
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.net.post(cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.net.poll_event()
    }
    fn now(&self) -> Instant {
        self.net.now()
    }
    fn idle(&mut self) {
        self.net.idle()
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        self.net.alloc(len)
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.net.free(buf)
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        self.net.read(addr, out)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        self.net.write(addr, data)
    }
    fn atomic(&mut self, addr: u64, width: AtomicWidth, op: AtomicOp) -> Result<u64, MemoryError> {
        self.net.atomic(addr, width, op)
    }
    fn local_link(&mut self) -> Option<&mut dyn LocalLink> {
        Some(self)
    }
}

/// Nodes 0 and 1 linked, node 2 reached only through the engines.
fn three() -> (Port<Linked>, Port<Linked>, Port<NetIo>, Arc<Mutex<Wires>>) {
    let net = Arc::new(Mutex::new(Network::with_defaults(3, LinkConfig::lossy(0.1, 0.05, 0.0), 7)));
    let wires = Arc::new(Mutex::new(Wires::default()));
    let a = NetIo::open(&net, NodeId(0)).unwrap();
    let b = NetIo::open(&net, NodeId(1)).unwrap();
    let c = NetIo::open(&net, NodeId(2)).unwrap();
    let linked = vec![a.endpoint(), b.endpoint()];
    let wrap = |net| Linked { net, wires: wires.clone(), linked: linked.clone(), peeked: None };
    (Port::new(wrap(a)), Port::new(wrap(b)), Port::new(c), wires)
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect()
}

/// Waits for `r` on `p` while `q` makes progress too (a full queue needs
/// its receiver).
fn wait_both<A: PortIo, B: PortIo>(p: &mut Port<A>, r: Request, q: &mut Port<B>) -> Result<Completion, HostError> {
    loop {
        if let Some(x) = p.test(r) {
            return x;
        }
        q.progress();
        p.io().idle();
    }
}

#[test]
fn a_long_message_crosses_the_link_in_fragments_into_a_posted_or_a_later_receive() {
    let (mut a, mut b, _c, wires) = three();
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let m = bytes(100, 3);
    let rbuf = b.buffer(128).unwrap();
    let r = b.start_recv(RecvMatch::from(ea.node, ea.port, 5), rbuf).unwrap();
    let s = { let sb = a.buffer_from(&m).unwrap(); a.start_send(eb, 5, sb) }.unwrap();
    assert_eq!(wait_both(&mut b, r, &mut a).unwrap(), Completion::Received { src: ea, tag: 5, len: 100 });
    assert_eq!(wait_both(&mut a, s, &mut b).unwrap(), Completion::Sent);
    assert_eq!(&b.read_buffer(rbuf).unwrap()[..100], &m[..]);
    // Sent before any receive: kept, then taken by the receive.
    let m2 = bytes(40, 9);
    let s = { let sb = a.buffer_from(&m2).unwrap(); a.start_send(eb, 6, sb) }.unwrap();
    assert_eq!(wait_both(&mut a, s, &mut b).unwrap(), Completion::Sent);
    let (src, tag, got) = b.recv(RecvMatch::tag(6), 64).unwrap();
    assert_eq!((src, tag, got), (ea, 6, m2));
    assert_eq!(wires.lock().unwrap().pushed, 7 + 3, "100 and 40 bytes in 16-byte fragments");
    assert_eq!(b.io_ref().net.repeated_events, 0);
}

#[test]
fn a_message_longer_than_the_receive_is_truncated_to_its_first_bytes() {
    let (mut a, mut b, _c, _) = three();
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let m = bytes(50, 1);
    let rbuf = b.buffer(20).unwrap();
    let r = b.start_recv(RecvMatch::tag(1), rbuf).unwrap();
    let _s = { let sb = a.buffer_from(&m).unwrap(); a.start_send(eb, 1, sb) }.unwrap();
    assert_eq!(wait_both(&mut b, r, &mut a), Err(HostError::Op(OpError::Truncated { src: ea, tag: 1, len: 50 })));
    assert_eq!(b.read_buffer(rbuf).unwrap(), &m[..20]);
    // The next message from the same sender is whole.
    let _s = { let sb = a.buffer_from(b"next").unwrap(); a.start_send(eb, 2, sb) }.unwrap();
    let (_, _, got) = loop {
        a.progress();
        if let Ok(x) = b.recv(RecvMatch::tag(2), 8) {
            break x;
        }
    };
    assert_eq!(got, b"next");
}

#[test]
fn messages_of_one_sender_and_tag_are_taken_in_the_order_sent() {
    let (mut a, mut b, _c, _) = three();
    let eb = b.endpoint();
    let mut sends = Vec::new();
    for (i, tag) in [1u64, 2, 1, 1, 2].into_iter().enumerate() {
        let buf = a.buffer_from(&bytes(20 + i, i as u8)).unwrap();
        sends.push(a.start_send(eb, tag, buf).unwrap());
    }
    let mut got = Vec::new();
    for tag in [1u64, 1, 2, 1, 2] {
        let rbuf = b.buffer(64).unwrap();
        let r = b.start_recv(RecvMatch::tag(tag), rbuf).unwrap();
        let Completion::Received { len, .. } = wait_both(&mut b, r, &mut a).unwrap() else { panic!() };
        got.push((tag, len));
    }
    assert_eq!(got, [(1, 20), (1, 22), (2, 21), (1, 23), (2, 24)]);
    for s in sends {
        assert_eq!(wait_both(&mut a, s, &mut b).unwrap(), Completion::Sent);
    }
}

#[test]
fn receives_from_any_source_take_the_link_and_the_engine_each_exactly_once() {
    let (mut a, mut b, mut c, _) = three();
    let (ea, eb, ec) = (a.endpoint(), b.endpoint(), c.endpoint());
    let r1buf = b.buffer(64).unwrap();
    let r2buf = b.buffer(64).unwrap();
    let r1 = b.start_recv(RecvMatch::tag(4), r1buf).unwrap();
    let r2 = b.start_recv(RecvMatch::tag(4), r2buf).unwrap();
    // The engine's message first, then the link's.
    c.send(eb, 4, b"through the engine").unwrap();
    let s = { let sb = a.buffer_from(b"through shared memory").unwrap(); a.start_send(eb, 4, sb) }.unwrap();
    let x1 = wait_both(&mut b, r1, &mut a).unwrap();
    let x2 = wait_both(&mut b, r2, &mut a).unwrap();
    assert_eq!(wait_both(&mut a, s, &mut b).unwrap(), Completion::Sent);
    let mut srcs = [x1, x2].map(|x| match x {
        Completion::Received { src, .. } => src,
        other => panic!("{other:?}"),
    });
    srcs.sort_by_key(|e| e.node.0);
    assert_eq!(srcs, [ea, ec]);
    // Receives posted in order take the link's message in that order: the
    // first of two from any source, then one from the sender.
    let r3 = b.start_recv(RecvMatch::tag(8), r1buf).unwrap();
    let r4 = b.start_recv(RecvMatch::from(ea.node, ea.port, 8), r2buf).unwrap();
    let s = { let sb = a.buffer_from(b"first").unwrap(); a.start_send(eb, 8, sb) }.unwrap();
    assert_eq!(wait_both(&mut b, r3, &mut a).unwrap(), Completion::Received { src: ea, tag: 8, len: 5 });
    assert!(b.test(r4).is_none(), "one message satisfies one receive");
    let _ = wait_both(&mut a, s, &mut b);
    let s = { let sb = a.buffer_from(b"second").unwrap(); a.start_send(eb, 8, sb) }.unwrap();
    assert_eq!(wait_both(&mut b, r4, &mut a).unwrap(), Completion::Received { src: ea, tag: 8, len: 6 });
    let _ = wait_both(&mut a, s, &mut b);
    assert_eq!(b.io_ref().net.repeated_events, 0);
}

#[test]
fn a_cancelled_receive_leaves_the_message_to_the_next() {
    let (mut a, mut b, _c, _) = three();
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let rbuf = b.buffer(16).unwrap();
    let only_link = b.start_recv(RecvMatch::from(ea.node, ea.port, 3), rbuf).unwrap();
    let both = b.start_recv(RecvMatch::tag(3), rbuf).unwrap();
    b.cancel(only_link).unwrap();
    b.cancel(both).unwrap();
    assert_eq!(b.wait(only_link), Err(HostError::Op(OpError::Cancelled)));
    assert_eq!(b.wait(both), Err(HostError::Op(OpError::Cancelled)));
    a.send(eb, 3, b"kept").unwrap();
    let (src, _, got) = b.recv(RecvMatch::tag(3), 16).unwrap();
    assert_eq!((src, got.as_slice()), (ea, &b"kept"[..]));
}

#[test]
fn a_receive_waiting_on_a_closed_peer_fails_naming_it_and_a_send_to_it_fails() {
    let (a, mut b, _c, wires) = three();
    let ea = a.endpoint();
    let rbuf = b.buffer(16).unwrap();
    let r = b.start_recv(RecvMatch::from(ea.node, ea.port, 3), rbuf).unwrap();
    wires.lock().unwrap().closed.push(ea.node.0);
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::SourceClosed(ea))));
    let s = b.start_send(ea, 1, rbuf).unwrap();
    assert_eq!(b.wait(s), Err(HostError::Op(OpError::PortGone)));
    drop(a);
}

#[test]
fn a_sender_that_closes_mid_message_fails_the_receive_from_any_source_it_was_filling() {
    let (mut a, mut b, _c, wires) = three();
    let (ea, eb) = (a.endpoint(), b.endpoint());
    let rbuf = b.buffer(128).unwrap();
    let r = b.start_recv(RecvMatch::tag(5), rbuf).unwrap();
    let sb = a.buffer_from(&bytes(100, 0)).unwrap();
    // 4 of its 7 fragments fit the queue; the receive takes them.
    let _s = a.start_send(eb, 5, sb).unwrap();
    for _ in 0..10 {
        b.progress();
    }
    wires.lock().unwrap().closed.push(ea.node.0);
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::SenderAborted)));
}

/// One step of a random mix at the receiving port's side.
#[derive(Debug, Clone)]
enum Step {
    /// The linked port sends `len` bytes with `tag` (through the link).
    SendLinked { tag: u64, len: usize },
    /// The engine-only port sends (through the engines).
    SendEngine { tag: u64, len: usize },
    /// The receiving port posts a receive: `tag` (None: any tag, which
    /// also accepts the library's tags and so goes to both paths) from
    /// `src` (None: any source; 0 the linked port, 2 the engine-only one).
    Recv { tag: Option<u64>, src: Option<u32> },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (1u64..4, 2usize..60).prop_map(|(tag, len)| Step::SendLinked { tag, len }),
        (1u64..4, 2usize..60).prop_map(|(tag, len)| Step::SendEngine { tag, len }),
        (proptest::option::of(1u64..4), proptest::option::of(prop_oneof![Just(0u32), Just(2u32)])).prop_map(|(tag, src)| Step::Recv { tag, src }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Whatever the mix of link and engine messages and of receives that
    /// wait on one path or both: every message is received exactly once,
    /// intact, and a receive never takes a sender's later message while an
    /// earlier one it accepts went to a receive posted after it.
    #[test]
    fn every_message_is_taken_once_intact_and_in_order(steps in proptest::collection::vec(step(), 1..40)) {
        let (mut a, mut b, mut c, _) = three();
        let eb = b.endpoint();
        let eps = [a.endpoint(), b.endpoint(), c.endpoint()];
        // Messages: (sender node, seq) -> (tag, bytes); the bytes start with
        // the sender and its sequence number.
        let mut sent: Vec<(u32, u8, u64, Vec<u8>)> = Vec::new();
        let mut sends = Vec::new();
        let mut recvs: Vec<(Request, RecvMatch, HostBuf)> = Vec::new();
        for s in &steps {
            match *s {
                Step::SendLinked { tag, len } | Step::SendEngine { tag, len } => {
                    let from = if matches!(s, Step::SendLinked { .. }) { 0 } else { 2 };
                    let seq = sent.iter().filter(|m| m.0 == from).count() as u8;
                    let mut m = bytes(len, seq);
                    (m[0], m[1]) = (from as u8, seq);
                    if from == 0 {
                        let sb = a.buffer_from(&m).unwrap();
                        sends.push(a.start_send(eb, tag, sb).unwrap());
                    } else {
                        c.send(eb, tag, &m).unwrap();
                    }
                    sent.push((from, seq, tag, m));
                }
                Step::Recv { tag, src } => {
                    let mut m = match tag { Some(t) => RecvMatch::tag(t), None => RecvMatch::any() };
                    m.source = src.map(|n| (eps[n as usize].node, eps[n as usize].port));
                    let buf = b.buffer(64).unwrap();
                    recvs.push((b.start_recv(m, buf).unwrap(), m, buf));
                }
            }
            a.progress();
            b.progress();
        }
        for s in sends {
            proptest::prop_assert_eq!(wait_both(&mut a, s, &mut b).unwrap(), Completion::Sent);
        }
        // Let everything land, withdraw the receives nothing can satisfy,
        // then take the rest with receives from anyone.
        for _ in 0..2000 {
            b.progress();
            b.io().idle();
        }
        let mut got: Vec<(usize, Endpoint, u64, Vec<u8>)> = Vec::new();
        for (i, (r, _, buf)) in recvs.iter().enumerate() {
            let done = match b.test(*r) {
                Some(x) => Some(x),
                None => match b.cancel(*r) {
                    Ok(()) => None,
                    Err(_) => Some(b.wait(*r)),
                },
            };
            if let Some(x) = done {
                let Completion::Received { src, tag, len } = x.unwrap() else { panic!() };
                got.push((i, src, tag, b.read_buffer(*buf).unwrap()[..len as usize].to_vec()));
            }
        }
        while got.len() < sent.len() {
            let buf = b.buffer(64).unwrap();
            let r = b.start_recv(RecvMatch::any(), buf).unwrap();
            let mut done = None;
            for _ in 0..100_000 {
                done = b.test(r);
                if done.is_some() {
                    break;
                }
                b.io().idle();
            }
            let Some(Ok(Completion::Received { src, tag, len })) = done else {
                return Err(proptest::test_runner::TestCaseError::fail(format!("{} of {} messages received, then {done:?}", got.len(), sent.len())));
            };
            got.push((usize::MAX, src, tag, b.read_buffer(buf).unwrap()[..len as usize].to_vec()));
        }
        // Exactly once, intact.
        let mut seen: Vec<(u8, u8)> = got.iter().map(|g| (g.3[0], g.3[1])).collect();
        seen.sort_unstable();
        let mut want: Vec<(u8, u8)> = sent.iter().map(|m| (m.0 as u8, m.1)).collect();
        want.sort_unstable();
        proptest::prop_assert_eq!(seen, want);
        for (_, src, tag, data) in &got {
            let m = sent.iter().find(|m| m.0 as u8 == data[0] && m.1 == data[1]).unwrap();
            proptest::prop_assert_eq!((src.node.0, *tag, data), (m.0, m.2, &m.3));
        }
        // Non-overtaking: receive i took message (s, k); an earlier message
        // (s, j < k) that receive i accepts went to a receive posted later.
        for (i, src, _, data) in got.iter().filter(|g| g.0 != usize::MAX) {
            let matching = recvs[*i].1;
            for (i2, _, tag2, data2) in &got {
                if data2[0] == data[0] && data2[1] < data[1] && *i2 > *i && matching.accepts(*src, *tag2) {
                    proptest::prop_assert!(false, "receive {} took message {:?} while receive {} posted later took the earlier {:?}", i, (data[0], data[1]), i2, (data2[0], data2[1]));
                }
            }
        }
    }
}
