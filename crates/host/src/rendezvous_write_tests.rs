//! The write-based rendezvous (clear-to-send, RDMA write, finish) through
//! the lossy test network: every message exactly once, intact, in order
//! per source and tag, zero copies for the large ones, alongside senders of
//! the read protocol; truncation, cancellation, a dead peer mid-transfer.

use std::sync::{Arc, Mutex};

use outboard_engine::{EngineConfig, NodeId};
use outboard_testnet::{LinkConfig, Network};
use proptest::prelude::*;

use crate::testnet_io::NetIo;
use crate::*;

const THRESHOLD: u32 = 256;

fn open_with(net: &Arc<Mutex<Network>>, node: u32, protocol: RendezvousProtocol) -> Port<NetIo> {
    let mut p = Port::new(NetIo::open(net, NodeId(node)).unwrap());
    p.set_rendezvous(RendezvousConfig { threshold: Some(THRESHOLD), cache_entries: 4, protocol });
    p
}

fn open(net: &Arc<Mutex<Network>>, node: u32) -> Port<NetIo> {
    open_with(net, node, RendezvousProtocol::Write)
}

use crate::rendezvous_tests::payload;

/// Waits for `r` at `p` while driving `peers`: with the write protocol
/// the sender's host must act on the clear-to-send (the data leaves only
/// when it does), so a single-threaded test drives every port.
fn wait_with(p: &mut Port<NetIo>, r: Request, peers: &mut [&mut Port<NetIo>]) -> Result<Completion, HostError> {
    loop {
        if let Some(x) = p.test(r) {
            return x;
        }
        for q in peers.iter_mut() {
            q.progress();
        }
        p.io().idle();
    }
}

fn copied(net: &Arc<Mutex<Network>>, node: u32) -> u64 {
    net.lock().unwrap().engine(NodeId(node)).stats().unexpected_bytes_copied
}

#[derive(Debug, Clone)]
struct Plan {
    /// (sender 0 or 1, tag 0..3, length) in send order.
    msgs: Vec<(u32, u64, usize)>,
    /// How many receives are posted before any send.
    early: usize,
    /// Receives from any source (else from the message's own source).
    wildcard: bool,
    /// Sender 1 uses the read protocol (sender 0 always writes).
    mixed: bool,
    seed: u64,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::collection::vec((0u32..2, 0u64..3, prop_oneof![0usize..64, 200usize..400, 1000usize..6000]), 1..10),
        0usize..10,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(msgs, early, wildcard, mixed, seed)| Plan { early: early.min(msgs.len()), msgs, wildcard, mixed, seed })
}

/// Runs a plan: senders on nodes 0 and 1, the receiver (write protocol,
/// which only matters for what it would send) on node 2, links losing 30 %
/// and duplicating 10 % of packets.
fn run(p: &Plan) -> Result<(), TestCaseError> {
    let net = Arc::new(Mutex::new(Network::with_defaults(3, LinkConfig::lossy(0.3, 0.1, 0.0), p.seed)));
    let second = if p.mixed { RendezvousProtocol::Read } else { RendezvousProtocol::Write };
    let mut senders = [open(&net, 0), open_with(&net, 1, second)];
    let mut rx = open(&net, 2);
    let x = crate::rendezvous_tests::Exchange { msgs: &p.msgs, early: p.early, wildcard: p.wildcard };
    let sends = crate::rendezvous_tests::exchange_checked(&x, &mut senders, &mut rx, &mut |rx, r, senders| {
        let [s0, s1] = senders;
        wait_with(rx, r, &mut [s0, s1])
    })?;
    for (s, r) in sends {
        prop_assert_eq!(senders[s as usize].wait(r).unwrap(), Completion::Sent);
    }
    // Large messages went by rendezvous, each protocol's bytes counted
    // where it moves them.
    let large = |s: u32| p.msgs.iter().filter(move |m| m.0 == s && m.2 as u32 > THRESHOLD);
    let large_bytes = |s: u32| large(s).map(|m| m.2 as u64).sum::<u64>();
    prop_assert_eq!(rx.rendezvous_stats().receives, (large(0).count() + large(1).count()) as u64);
    prop_assert_eq!(senders[0].rendezvous_stats().bytes_written, large_bytes(0));
    let (written1, read) = if p.mixed { (0, large_bytes(1)) } else { (large_bytes(1), 0) };
    prop_assert_eq!(senders[1].rendezvous_stats().bytes_written, written1);
    prop_assert_eq!(rx.rendezvous_stats().bytes_read, read);
    // Only eager messages' bytes were ever copied out of an unexpected
    // pool, at the receiver; the senders' clear-to-send receives were
    // posted before their announcements left, so nothing waited there.
    let eager_total: u64 = p.msgs.iter().filter(|m| m.2 as u32 <= THRESHOLD).map(|m| m.2 as u64).sum();
    prop_assert!(copied(&net, 2) <= eager_total, "{} bytes copied, eager messages hold {}", copied(&net, 2), eager_total);
    prop_assert_eq!(copied(&net, 0) + copied(&net, 1), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn written_messages_across_the_threshold_arrive_exactly_once_in_order_through_loss(p in plan()) {
        run(&p)?;
    }
}

#[test]
fn early_written_messages_are_never_copied_and_a_short_buffer_truncates() {
    // Every announcement arrives before its receive is posted; the data
    // moves only once a receive answered it, straight into its buffer.
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::lossy(0.2, 0.1, 0.0), 6)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let sizes = [4000usize, 300, 70_000, 257];
    let sends: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let buf = a.buffer_from(&payload(0, i, n)).unwrap();
            a.start_send(b.endpoint(), 1, buf).unwrap()
        })
        .collect();
    for _ in 0..2000 {
        b.io().idle();
    }
    for (i, &n) in sizes.iter().enumerate() {
        let rbuf = b.buffer(n as u32).unwrap();
        let r = b.start_recv(RecvMatch::tag(1), rbuf).unwrap();
        assert_eq!(wait_with(&mut b, r, &mut [&mut a]).unwrap(), Completion::Received { src: a.endpoint(), tag: 1, len: n as u32 });
        assert_eq!(b.read_buffer(rbuf).unwrap(), payload(0, i, n));
    }
    for s in sends {
        assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    }
    assert_eq!((copied(&net, 0), copied(&net, 1)), (0, 0), "no payload byte copied on either side");
    assert_eq!(a.rendezvous_stats().bytes_written, sizes.iter().sum::<usize>() as u64);
    assert_eq!(b.rendezvous_stats().bytes_read, 0);
    // A buffer of 1,000 bytes for 5,000: what fits is written, the rest
    // never leaves the sender, which completes.
    let data = payload(0, 9, 5000);
    let sbuf = a.buffer_from(&data).unwrap();
    let rbuf = b.buffer(1000).unwrap();
    let r = b.start_recv(RecvMatch::tag(9), rbuf).unwrap();
    let s = a.start_send(b.endpoint(), 9, sbuf).unwrap();
    assert_eq!(wait_with(&mut b, r, &mut [&mut a]), Err(HostError::Op(OpError::Truncated { src: a.endpoint(), tag: 9, len: 5000 })));
    assert_eq!(b.read_buffer(rbuf).unwrap(), data[..1000].to_vec());
    assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    assert_eq!(a.rendezvous_stats().bytes_written, sizes.iter().sum::<usize>() as u64 + 1000);
    // An empty receive buffer: nothing is written, both sides complete.
    let empty = b.buffer(0).unwrap();
    let r = b.start_recv(RecvMatch::tag(10), empty).unwrap();
    let s = a.start_send(b.endpoint(), 10, sbuf).unwrap();
    assert_eq!(wait_with(&mut b, r, &mut [&mut a]), Err(HostError::Op(OpError::Truncated { src: a.endpoint(), tag: 10, len: 5000 })));
    assert_eq!(a.wait(s).unwrap(), Completion::Sent);
}

#[test]
fn receives_sharing_one_buffer_get_each_message_and_register_it_once() {
    // A benchmark's habit: receives posted into one buffer, one after the
    // other. The receiver's registration cache registers that buffer once;
    // the senders register nothing.
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::lossy(0.1, 0.05, 0.0), 10)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let shared = b.buffer(2000).unwrap();
    let bufs: Vec<_> = (0..6).map(|i| a.buffer_from(&payload(0, i, 2000)).unwrap()).collect();
    for (i, &buf) in bufs.iter().enumerate() {
        let r = b.start_recv(RecvMatch::tag(3), shared).unwrap();
        let s = a.start_send(b.endpoint(), 3, buf).unwrap();
        assert_eq!(wait_with(&mut b, r, &mut [&mut a]).unwrap(), Completion::Received { src: a.endpoint(), tag: 3, len: 2000 });
        assert_eq!(b.read_buffer(shared).unwrap(), payload(0, i, 2000));
        assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    }
    let st = b.rendezvous_stats();
    assert_eq!((st.receives, st.cache_misses, st.cache_hits), (6, 1, 5));
    let sa = a.rendezvous_stats();
    assert_eq!((sa.cache_misses, sa.cache_hits), (0, 0), "a writing sender registers nothing");
    // Freeing the buffer drops the receiver's registration: the key the
    // sender was given no longer admits writes.
    let key = b.rndv.cached_keys()[0];
    b.free(shared).unwrap();
    for _ in 0..50 {
        b.progress();
        a.io().idle();
    }
    let w = a.start_write(b.endpoint(), key, 0, bufs[0]).unwrap();
    assert_eq!(a.wait(w), Err(HostError::Op(OpError::BadKey)));
}

#[test]
fn both_protocols_share_the_registration_cache() {
    // A buffer sent from by the read protocol and then received into by
    // the write protocol is registered once.
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::default(), 11)));
    let mut a = open_with(&net, 0, RendezvousProtocol::Read);
    let mut b = open(&net, 1);
    let buf = a.buffer_from(&payload(0, 0, 3000)).unwrap();
    let rb = b.buffer(3000).unwrap();
    let r = b.start_recv(RecvMatch::tag(1), rb).unwrap();
    let s = a.start_send(b.endpoint(), 1, buf).unwrap();
    wait_with(&mut b, r, &mut [&mut a]).unwrap();
    a.wait(s).unwrap();
    // Now b writes back into the same buffer a sent from.
    let back = b.buffer_from(&payload(1, 0, 3000)).unwrap();
    let r = a.start_recv(RecvMatch::tag(2), buf).unwrap();
    let s = b.start_send(a.endpoint(), 2, back).unwrap();
    assert_eq!(wait_with(&mut a, r, &mut [&mut b]).unwrap(), Completion::Received { src: b.endpoint(), tag: 2, len: 3000 });
    b.wait(s).unwrap();
    assert_eq!(a.read_buffer(buf).unwrap(), payload(1, 0, 3000));
    let st = a.rendezvous_stats();
    assert_eq!((st.cache_misses, st.cache_hits), (1, 1));
    assert_eq!(a.rndv.cached_keys().len(), 1);
}

#[test]
fn a_written_send_whose_announcement_is_refused_can_be_cancelled_and_is_never_received() {
    let net = Arc::new(Mutex::new(Network::new(2, LinkConfig::default(), 8, |node| EngineConfig {
        unexpected_bytes: 0,
        ..EngineConfig::new(node, 1, 0)
    })));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let first = a.buffer_from(&payload(0, 0, 3000)).unwrap();
    let second = a.buffer_from(&payload(0, 1, 3000)).unwrap();
    let s1 = a.start_send(b.endpoint(), 4, first).unwrap();
    for _ in 0..200 {
        b.io().idle();
    }
    let mut tries = 0;
    loop {
        match a.cancel(s1) {
            Ok(()) => break,
            Err(HostError::Op(OpError::NotCancellable)) if tries < 1000 => {
                tries += 1;
                b.io().idle();
            }
            Err(e) => panic!("cancel failed: {e}"),
        }
    }
    assert_eq!(a.wait(s1), Err(HostError::Op(OpError::Cancelled)));
    let s2 = a.start_send(b.endpoint(), 4, second).unwrap();
    let rbuf = b.buffer(3000).unwrap();
    let r = b.start_recv(RecvMatch::tag(4), rbuf).unwrap();
    assert_eq!(wait_with(&mut b, r, &mut [&mut a]).unwrap(), Completion::Received { src: a.endpoint(), tag: 4, len: 3000 });
    assert_eq!(b.read_buffer(rbuf).unwrap(), payload(0, 1, 3000), "the cancelled message never arrives");
    assert_eq!(a.wait(s2).unwrap(), Completion::Sent);
    // A receive not yet matched is still cancellable.
    let r = b.start_recv(RecvMatch::tag(5), rbuf).unwrap();
    b.cancel(r).unwrap();
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::Cancelled)));
}

/// Steps the network until `done` says so (bounded in steps, not time).
fn step_until(p: &mut Port<NetIo>, q: &mut Port<NetIo>, mut done: impl FnMut(&mut Port<NetIo>) -> bool) {
    for _ in 0..100_000 {
        if done(p) {
            return;
        }
        p.progress();
        q.progress();
        p.io().idle();
    }
    panic!("the condition never held");
}

#[test]
fn a_sender_dying_mid_write_fails_the_receive() {
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::default(), 9)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let len = 200_000usize;
    let rbuf = b.buffer(len as u32).unwrap();
    let r = b.start_recv(RecvMatch::tag(5), rbuf).unwrap();
    let data = payload(0, 1, len);
    let sbuf = a.buffer_from(&data).unwrap();
    let _s = a.start_send(b.endpoint(), 5, sbuf).unwrap();
    // Until the first bytes are in the receiver's buffer.
    let at = |n: &Arc<Mutex<Network>>, i: usize| {
        let mut byte = [0u8];
        outboard_engine::Dma::read(n.lock().unwrap().memory(NodeId(1)), PortId(0), rbuf.addr + i as u64, &mut byte).unwrap();
        byte[0]
    };
    assert!(data[0] != 0 && data[len - 1] != 0);
    step_until(&mut a, &mut b, |_| at(&net, 0) == data[0]);
    assert_eq!(at(&net, len - 1), 0, "the last byte is not written yet: the sender dies mid-transfer");
    assert!(b.test(r).is_none(), "the receive waits for the finish");
    net.lock().unwrap().kill(NodeId(0));
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::PeerUnreachable(NodeId(0)))));
}

#[test]
fn a_receiver_dying_fails_the_send_before_or_during_the_write() {
    let net = Arc::new(Mutex::new(Network::with_defaults(3, LinkConfig::default(), 12)));
    let (mut a, mut b, mut c) = (open(&net, 0), open(&net, 1), open(&net, 2));
    // a announces to b, which answers and dies while the data is moving.
    let len = 200_000usize;
    let rbuf = b.buffer(len as u32).unwrap();
    let _r = b.start_recv(RecvMatch::tag(6), rbuf).unwrap();
    let sbuf = a.buffer_from(&payload(0, 1, len)).unwrap();
    let s = a.start_send(b.endpoint(), 6, sbuf).unwrap();
    step_until(&mut a, &mut b, |a| a.rendezvous_stats().bytes_written > 0);
    net.lock().unwrap().kill(NodeId(1));
    assert_eq!(a.wait(s), Err(HostError::Op(OpError::PeerUnreachable(NodeId(1)))));
    // c announces to b, dead before any receive: the clear-to-send
    // receive names b, so the send fails too.
    let cbuf = c.buffer_from(&payload(2, 0, 50_000)).unwrap();
    let s = c.start_send(b.endpoint(), 6, cbuf).unwrap();
    assert_eq!(c.wait(s), Err(HostError::Op(OpError::PeerUnreachable(NodeId(1)))));
}
