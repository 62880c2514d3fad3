//! The link's queues between two attachments in one process (two local
//! ranks), through their own segments: fragments in order, a full queue,
//! the asleep word's wake-up, and a closed peer.

use std::sync::Arc;

use outboard_engine::{Endpoint, HostBuf, NodeId, PortId};
use outboard_host::local::{LinkError, LocalLink, PeerState, Sink};

use super::{NodeP2p, FRAGMENT};
use crate::shm::Segment;

fn ep(port: u8) -> Endpoint {
    Endpoint { node: NodeId(3), port: PortId(port), gen: 1 }
}

fn pair(job: u64) -> (NodeP2p, NodeP2p, Arc<Segment>, Arc<Segment>) {
    let ma = Arc::new(Segment::create("p2p-test-a", 1 << 20).unwrap());
    let mb = Arc::new(Segment::create("p2p-test-b", 1 << 20).unwrap());
    let mut a = NodeP2p::attach(job, 1, 3, 2, 0, ma.clone(), 4096..1 << 20).unwrap();
    let mut b = NodeP2p::attach(job, 1, 3, 2, 1, mb.clone(), 4096..1 << 20).unwrap();
    let pid = std::process::id();
    a.set_peers(vec![ep(0), ep(1)], vec![pid, pid]);
    b.set_peers(vec![ep(0), ep(1)], vec![pid, pid]);
    (a, b, ma, mb)
}

fn job() -> u64 {
    u64::from(std::process::id()) << 20 ^ rand_bits()
}

fn rand_bits() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos().into()
}

#[test]
fn fragments_cross_in_order_until_the_queue_is_full() {
    let (mut a, mut b, ma, mb) = pair(job());
    assert_eq!(a.peer(NodeId(3), PortId(1)), Some(ep(1)));
    assert_eq!(a.peer(NodeId(3), PortId(0)), None, "not itself");
    assert_eq!(a.peer(NodeId(4), PortId(1)), None, "not another node's");
    let data: Vec<u8> = (0..FRAGMENT).map(|i| (i % 251) as u8).collect();
    ma.write(4096, &data).unwrap();
    let mut put = 0;
    while a.push(ep(1), 7, 1 << 30, put * FRAGMENT, HostBuf { addr: 4096, len: FRAGMENT }).unwrap() {
        put += 1;
        assert!(put <= 64, "a queue has room for a bounded number of fragments");
    }
    assert!(put >= 4);
    assert!(b.has_incoming());
    for k in 0..put {
        let f = b.peek().unwrap();
        assert_eq!((f.src, f.tag, f.offset, f.len), (ep(0), 7, k * FRAGMENT, FRAGMENT));
        b.take(Sink::Memory { addr: 8192, len: 100 }).unwrap();
    }
    assert!(b.peek().is_none());
    let mut got = vec![0; 101];
    mb.read(8192, &mut got).unwrap();
    assert_eq!(&got[..100], &data[..100]);
    assert_eq!(got[100], 0, "only the sink's length is written");
    // Room again.
    assert!(a.push(ep(1), 8, 3, 0, HostBuf { addr: 4096, len: 3 }).unwrap());
    let mut v = Vec::new();
    assert_eq!(b.peek().unwrap().total, 3);
    b.take(Sink::Append(&mut v)).unwrap();
    assert_eq!(v, &data[..3]);
}

#[test]
fn a_sleeping_receiver_is_woken_and_a_closed_one_refuses() {
    let (mut a, b, ma, _mb) = pair(job());
    ma.write(4096, b"x").unwrap();
    b.set_asleep(true);
    assert!(a.push(ep(1), 1, 1, 0, HostBuf { addr: 4096, len: 1 }).unwrap());
    let mut buf = [0u8; 4];
    std::thread::sleep(std::time::Duration::from_millis(10));
    assert!(b.wake.recv(&mut buf).is_ok(), "the sender woke the sleeper");
    b.set_asleep(false);
    assert!(a.push(ep(1), 1, 1, 0, HostBuf { addr: 4096, len: 1 }).unwrap());
    assert!(b.wake.recv(&mut buf).is_err(), "an awake receiver is not woken");
    // Memory outside the buffers is refused.
    assert!(matches!(a.push(ep(1), 1, 1, 0, HostBuf { addr: 0, len: 1 }), Err(LinkError::Memory(_))));
    let mut a2 = a;
    drop(b);
    assert_eq!(a2.push(ep(1), 1, 1, 0, HostBuf { addr: 4096, len: 1 }), Err(LinkError::PeerGone));
    assert_eq!(a2.peer_state(ep(1)), PeerState::Closed);
}

#[test]
fn a_peer_is_closed_only_once_its_fragments_are_taken() {
    let (a, mut b, ma, _mb) = pair(job());
    let mut a = a;
    ma.write(4096, b"last").unwrap();
    assert!(a.push(ep(1), 1, 4, 0, HostBuf { addr: 4096, len: 4 }).unwrap());
    drop(a);
    assert_eq!(b.peer_state(ep(0)), PeerState::Open, "a fragment is still there");
    b.peek().unwrap();
    b.take(Sink::Append(&mut Vec::new())).unwrap();
    assert_eq!(b.peer_state(ep(0)), PeerState::Closed);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Whatever a peer writes into its queue (the slots' bytes, its head),
    /// the receiver shows only fragments within the format and copies only
    /// into the buffer it names: no panic, nothing written past a sink.
    #[test]
    fn whatever_a_peer_writes_the_receiver_stays_in_bounds(
        slots in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 1..20),
        head in 0u64..40,
    ) {
        let (a, mut b, _ma, mb) = pair(job());
        let ring = a.ring(0, 1);
        for (k, bytes) in slots.iter().enumerate() {
            a.region.write(a.slot(ring, k as u64), bytes).unwrap();
        }
        a.word(ring).store(head, std::sync::atomic::Ordering::Release);
        mb.fill(8192, 2 * FRAGMENT as usize, 0xAA).unwrap();
        for _ in 0..64 {
            let Some(f) = b.peek() else { break };
            proptest::prop_assert!(f.len <= FRAGMENT && f.offset as u64 + f.len as u64 <= f.total as u64, "{f:?}");
            b.take(Sink::Memory { addr: 8192, len: 16 }).unwrap();
        }
        let mut after = vec![0u8; FRAGMENT as usize];
        mb.read(8192 + 16, &mut after).unwrap();
        proptest::prop_assert!(after.iter().all(|&x| x == 0xAA), "a take wrote past its sink");
    }
}
