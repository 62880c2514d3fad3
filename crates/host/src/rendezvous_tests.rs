//! Rendezvous through the lossy test network: every message exactly once,
//! intact, in order per source and tag, with zero copies for the large
//! ones; cancellation and a dead peer mid-transfer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use outboard_engine::{EngineConfig, NodeId};
use outboard_testnet::{LinkConfig, Network};
use proptest::prelude::*;

use crate::testnet_io::NetIo;
use crate::*;

const THRESHOLD: u32 = 256;

fn open(net: &Arc<Mutex<Network>>, node: u32) -> Port<NetIo> {
    let mut p = Port::new(NetIo::open(net, NodeId(node)).unwrap());
    p.set_rendezvous(RendezvousConfig { threshold: Some(THRESHOLD), cache_entries: 4, ..Default::default() });
    p
}

/// Message `index` of `sender`, `len` bytes: every byte says whose it is.
pub(crate) fn payload(sender: u32, index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (sender as usize * 131 + index * 31 + i) as u8).collect()
}

/// Who sent a received payload, and which of its messages it was: the
/// first not yet received (`taken`) whose bytes these are. Messages whose
/// bytes are alike (empty ones) cannot be told apart; taking them first
/// come lets the order check still see them in order.
fn identify(data: &[u8], len: usize, sent: &[(u32, u64, usize)], sender: u32, taken: &[(u32, u64, usize)]) -> Option<usize> {
    sent.iter().enumerate().position(|(i, &(s, _, l))| s == sender && l == len && payload(s, i, l) == data && !taken.iter().any(|t| t.2 == i))
}

#[derive(Debug, Clone)]
struct Plan {
    /// (sender 0 or 1, tag 0..3, length) in send order.
    msgs: Vec<(u32, u64, usize)>,
    /// How many receives are posted before any send.
    early: usize,
    /// Receives from any source (else from the message's own source).
    wildcard: bool,
    seed: u64,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::collection::vec((0u32..2, 0u64..3, prop_oneof![0usize..64, 200usize..400, 1000usize..6000]), 1..10),
        0usize..10,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(msgs, early, wildcard, seed)| Plan { early: early.min(msgs.len()), msgs, wildcard, seed })
}

/// What a plan's exchange needs to know: the messages ((sender 0 or 1,
/// tag, length) in send order), how many receives are posted before any
/// send, and whether receives take any source.
pub(crate) struct Exchange<'a> {
    pub msgs: &'a [(u32, u64, usize)],
    pub early: usize,
    pub wildcard: bool,
}

/// Waits for a receive at the receiving port, with the senders at hand
/// for protocols whose senders must be driven meanwhile.
pub(crate) type WaitAt<'w> = dyn FnMut(&mut Port<NetIo>, Request, &mut [Port<NetIo>; 2]) -> Result<Completion, HostError> + 'w;

/// Posts the exchange's receives (the early ones before any send), sends
/// every message from its sender, waits for each receive with `wait`, and
/// checks that every message arrived exactly once, intact, with its tag,
/// in order per source and tag. Hands back the sends (sender, request).
pub(crate) fn exchange_checked(
    x: &Exchange,
    senders: &mut [Port<NetIo>; 2],
    rx: &mut Port<NetIo>,
    wait: &mut WaitAt,
) -> Result<Vec<(u32, Request)>, TestCaseError> {
    let eps = [senders[0].endpoint(), senders[1].endpoint()];
    // The receives, in the order the messages were sent (per source and tag
    // the engine matches in order, so receive k of a (source, tag) takes
    // message k of it).
    let matching = |&(s, tag, _): &(u32, u64, usize)| {
        if x.wildcard {
            RecvMatch::any()
        } else {
            RecvMatch::from(eps[s as usize].node, eps[s as usize].port, tag)
        }
    };
    let mut recvs = Vec::new();
    let post = |rx: &mut Port<NetIo>, m: &(u32, u64, usize)| {
        let buf = rx.buffer(6000).unwrap();
        (rx.start_recv(matching(m), buf).unwrap(), buf)
    };
    for m in &x.msgs[..x.early] {
        recvs.push(post(rx, m));
    }
    let mut sends = Vec::new();
    for (i, &(s, tag, len)) in x.msgs.iter().enumerate() {
        let port = &mut senders[s as usize];
        let buf = port.buffer_from(&payload(s, i, len)).unwrap();
        sends.push((s, port.start_send(rx.endpoint(), tag, buf).unwrap()));
    }
    for m in &x.msgs[x.early..] {
        recvs.push(post(rx, m));
    }
    // Every receive completes with one message; collect (source, tag, index).
    let mut got: Vec<(u32, u64, usize)> = Vec::new();
    for (r, buf) in recvs {
        let c = wait(rx, r, senders).map_err(|e| TestCaseError::fail(format!("receive failed: {e}")))?;
        let Completion::Received { src, tag, len } = c else {
            return Err(TestCaseError::fail(format!("receive completed as {c:?}")));
        };
        let sender = eps.iter().position(|e| *e == src).expect("a known sender") as u32;
        let data = rx.read_buffer(buf).unwrap();
        let idx = identify(&data[..len as usize], len as usize, x.msgs, sender, &got)
            .ok_or_else(|| TestCaseError::fail(format!("{len} bytes from {sender} tag {tag} are no message sent")))?;
        prop_assert_eq!(x.msgs[idx].1, tag, "tag");
        got.push((sender, tag, idx));
    }
    // Exactly once.
    let mut seen: Vec<usize> = got.iter().map(|g| g.2).collect();
    seen.sort_unstable();
    prop_assert_eq!(seen, (0..x.msgs.len()).collect::<Vec<_>>(), "every message exactly once");
    // In order per source and tag.
    let mut last: HashMap<(u32, u64), usize> = HashMap::new();
    for (s, tag, idx) in got {
        if let Some(prev) = last.insert((s, tag), idx) {
            prop_assert!(prev < idx, "message {} of ({}, {}) overtook {}", idx, s, tag, prev);
        }
    }
    Ok(sends)
}

/// Runs a plan: senders on nodes 0 and 1, the receiver on node 2, links
/// losing 30 % and duplicating 10 % of packets.
fn run(p: &Plan) -> Result<(), TestCaseError> {
    let net = Arc::new(Mutex::new(Network::with_defaults(3, LinkConfig::lossy(0.3, 0.1, 0.0), p.seed)));
    let mut senders = [open(&net, 0), open(&net, 1)];
    let mut rx = open(&net, 2);
    let x = Exchange { msgs: &p.msgs, early: p.early, wildcard: p.wildcard };
    let sends = exchange_checked(&x, &mut senders, &mut rx, &mut |rx, r, _| rx.wait(r))?;
    for (s, r) in sends {
        prop_assert_eq!(senders[s as usize].wait(r).unwrap(), Completion::Sent);
    }
    // Large messages were read, never copied.
    let large: Vec<_> = p.msgs.iter().filter(|m| m.2 as u32 > THRESHOLD).collect();
    let st = rx.rendezvous_stats();
    prop_assert_eq!(st.receives, large.len() as u64);
    prop_assert_eq!(st.bytes_read, large.iter().map(|m| m.2 as u64).sum::<u64>());
    // The receiving engine copied out of its unexpected pool only eager
    // messages' bytes (announcements reach the host in their completion).
    let eager_total: u64 = p.msgs.iter().filter(|m| m.2 as u32 <= THRESHOLD).map(|m| m.2 as u64).sum();
    let copied = net.lock().unwrap().engine(NodeId(2)).stats().unexpected_bytes_copied;
    prop_assert!(copied <= eager_total, "{} bytes copied, eager messages hold {}", copied, eager_total);
    let sent_by_rndv: u64 = senders.iter().map(|s| s.rendezvous_stats().sends).sum();
    prop_assert_eq!(sent_by_rndv, large.len() as u64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn messages_across_the_threshold_arrive_exactly_once_in_order_through_loss(p in plan()) {
        run(&p)?;
    }
}

#[test]
fn a_short_receive_buffer_truncates_a_rendezvous_message_and_the_sender_completes() {
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::lossy(0.1, 0.0, 0.0), 5)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let data = payload(0, 0, 5000);
    let sbuf = a.buffer_from(&data).unwrap();
    let s = a.start_send(b.endpoint(), 9, sbuf).unwrap();
    let rbuf = b.buffer(1000).unwrap();
    let r = b.start_recv(RecvMatch::tag(9), rbuf).unwrap();
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::Truncated { src: a.endpoint(), tag: 9, len: 5000 })));
    assert_eq!(b.read_buffer(rbuf).unwrap(), data[..1000].to_vec(), "what fits is delivered");
    assert_eq!(a.wait(s).unwrap(), Completion::Sent);
}

#[test]
fn early_rendezvous_messages_are_never_copied_and_tiny_buffers_work() {
    // Every message arrives before its receive is posted: eagerly sent ones
    // wait in the engine's pool, rendezvous ones leave only an
    // announcement there.
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
        assert_eq!(b.wait(r).unwrap(), Completion::Received { src: a.endpoint(), tag: 1, len: n as u32 });
        assert_eq!(b.read_buffer(rbuf).unwrap(), payload(0, i, n));
    }
    for s in sends {
        assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    }
    assert_eq!(net.lock().unwrap().engine(NodeId(1)).stats().unexpected_bytes_copied, 0);
    assert_eq!(b.rendezvous_stats().bytes_read, sizes.iter().sum::<usize>() as u64);
    // A receive buffer of 8 bytes: an eager message fits, a rendezvous one
    // is truncated to what fits and its sender still completes.
    let tiny = b.buffer(8).unwrap();
    let r = b.start_recv(RecvMatch::tag(2), tiny).unwrap();
    a.send(b.endpoint(), 2, b"tiny").unwrap();
    assert_eq!(b.wait(r).unwrap(), Completion::Received { src: a.endpoint(), tag: 2, len: 4 });
    let r = b.start_recv(RecvMatch::tag(2), tiny).unwrap();
    let big = a.buffer_from(&payload(0, 9, 1000)).unwrap();
    let s = a.start_send(b.endpoint(), 2, big).unwrap();
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::Truncated { src: a.endpoint(), tag: 2, len: 1000 })));
    assert_eq!(b.read_buffer(tiny).unwrap(), payload(0, 9, 8));
    assert_eq!(a.wait(s).unwrap(), Completion::Sent);
}

#[test]
fn receives_sharing_one_buffer_still_read_each_announced_message() {
    // Several receives posted into one buffer (a benchmark's habit): each
    // announcement reaches the library in its completion, not through the
    // shared buffer, so none is read from the wrong sender's region.
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::default(), 10)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let shared = b.buffer(2000).unwrap();
    let recvs: Vec<_> = (0..8).map(|_| b.start_recv(RecvMatch::tag(3), shared).unwrap()).collect();
    let bufs: Vec<_> = (0..8).map(|i| a.buffer_from(&payload(0, i, 2000)).unwrap()).collect();
    let sends: Vec<_> = bufs.iter().map(|&buf| a.start_send(b.endpoint(), 3, buf).unwrap()).collect();
    for r in recvs {
        assert_eq!(b.wait(r).unwrap(), Completion::Received { src: a.endpoint(), tag: 3, len: 2000 });
    }
    for s in sends {
        assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    }
    assert_eq!(b.rendezvous_stats().receives, 8);
}

#[test]
fn repeated_sends_from_one_buffer_register_it_once_and_freeing_it_drops_the_key() {
    let net = Arc::new(Mutex::new(Network::with_defaults(2, LinkConfig::default(), 7)));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let sbuf = a.buffer_from(&payload(0, 0, 4096)).unwrap();
    let rbuf = b.buffer(4096).unwrap();
    for _ in 0..5 {
        let r = b.start_recv(RecvMatch::tag(2), rbuf).unwrap();
        let s = a.start_send(b.endpoint(), 2, sbuf).unwrap();
        b.wait(r).unwrap();
        a.wait(s).unwrap();
    }
    let st = a.rendezvous_stats();
    assert_eq!((st.cache_misses, st.cache_hits), (1, 4));
    // After the buffer is freed its registration is gone: a reader holding
    // the old key is refused.
    let cached = a.rndv.cached_keys();
    assert_eq!(cached.len(), 1, "one registration serves all five sends");
    let key_holder = cached[0];
    let probe = b.buffer(16).unwrap();
    let rd = b.start_read(a.endpoint(), key_holder, 0, probe).unwrap();
    assert_eq!(b.wait(rd).unwrap(), Completion::Read, "the key reads while the buffer lives");
    a.free(sbuf).unwrap();
    // Let the deregistration happen.
    for _ in 0..50 {
        a.progress();
        b.io().idle();
    }
    let dst = b.buffer(16).unwrap();
    let rd = b.start_read(a.endpoint(), key_holder, 0, dst).unwrap();
    assert_eq!(b.wait(rd), Err(HostError::Op(OpError::BadKey)));
}

#[test]
fn a_send_whose_announcement_is_refused_can_be_cancelled_and_is_never_received() {
    // The receiver keeps no unexpected messages: an announcement without a
    // posted receive is refused and waits at the sender to be retried.
    let net = Arc::new(Mutex::new(Network::new(2, LinkConfig::default(), 8, |node| EngineConfig {
        unexpected_bytes: 0,
        ..EngineConfig::new(node, 1, 0)
    })));
    let (mut a, mut b) = (open(&net, 0), open(&net, 1));
    let first = a.buffer_from(&payload(0, 0, 3000)).unwrap();
    let second = a.buffer_from(&payload(0, 1, 3000)).unwrap();
    let s1 = a.start_send(b.endpoint(), 4, first).unwrap();
    // Give the announcement time to be refused.
    for _ in 0..200 {
        b.io().idle();
    }
    // The announcement is cancellable while it waits between retries.
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
    assert_eq!(b.wait(r).unwrap(), Completion::Received { src: a.endpoint(), tag: 4, len: 3000 });
    assert_eq!(b.read_buffer(rbuf).unwrap(), payload(0, 1, 3000), "the cancelled message never arrives");
    assert_eq!(a.wait(s2).unwrap(), Completion::Sent);
}

#[test]
fn a_sender_dying_mid_transfer_fails_the_receive_and_a_dead_receiver_fails_the_send() {
    let net = Arc::new(Mutex::new(Network::with_defaults(3, LinkConfig::default(), 9)));
    let (mut a, mut b, mut c) = (open(&net, 0), open(&net, 1), open(&net, 2));
    // a announces to b, then dies before b posts its receive.
    let sbuf = a.buffer_from(&payload(0, 0, 50_000)).unwrap();
    let _s = a.start_send(b.endpoint(), 5, sbuf).unwrap();
    for _ in 0..100 {
        b.io().idle();
    }
    net.lock().unwrap().kill(NodeId(0));
    let rbuf = b.buffer(50_000).unwrap();
    let r = b.start_recv(RecvMatch::tag(5), rbuf).unwrap();
    assert_eq!(b.wait(r), Err(HostError::Op(OpError::PeerUnreachable(NodeId(0)))));
    // c announces to b, and b dies without ever receiving.
    let cbuf = c.buffer_from(&payload(2, 0, 50_000)).unwrap();
    let s = c.start_send(b.endpoint(), 6, cbuf).unwrap();
    for _ in 0..100 {
        c.io().idle();
    }
    net.lock().unwrap().kill(NodeId(1));
    assert_eq!(c.wait(s), Err(HostError::Op(OpError::PeerUnreachable(NodeId(1)))));
}

#[test]
fn application_wildcard_receives_never_take_library_messages() {
    let m = RecvMatch::any();
    let src = Endpoint { node: NodeId(1), port: PortId(0), gen: 1 };
    assert!(m.accepts(src, 7));
    assert!(!m.accepts(src, outboard_engine::LIBRARY_TAG_PREFIX | 7));
    let exact = RecvMatch::tag(outboard_engine::LIBRARY_TAG_PREFIX | 7);
    assert!(exact.accepts(src, outboard_engine::LIBRARY_TAG_PREFIX | 7));
}
