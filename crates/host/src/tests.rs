//! The host library over the test network: the same calls an application
//! makes, with the network stepped whenever a port idles.

use std::sync::{Arc, Mutex};

use outboard_engine::NodeId;
use outboard_testnet::{LinkConfig, Network};

use crate::testnet_io::NetIo;
use crate::*;

fn open(net: &Arc<Mutex<Network>>, node: u32) -> NetIo {
    NetIo::open(net, NodeId(node)).unwrap()
}

#[test]
fn split_phase_send_and_receive_complete_through_test_and_wait() {
    let net = Arc::new(Mutex::new(Network::with_defaults(
        2,
        LinkConfig::lossy(0.2, 0.05, 0.0),
        1,
    )));
    let mut a = Port::new(open(&net, 0));
    let mut b = Port::new(open(&net, 1));
    let rbuf = b.buffer(64).unwrap();
    let r = b.start_recv(RecvMatch::tag(3), rbuf).unwrap();
    assert!(b.test(r).is_none());
    let sbuf = a.buffer_from(b"split phase").unwrap();
    let s = a.start_send(b.endpoint(), 3, sbuf).unwrap();
    assert_eq!(
        b.wait(r).unwrap(),
        Completion::Received {
            src: a.endpoint(),
            tag: 3,
            len: 11
        }
    );
    assert_eq!(&b.read_buffer(rbuf).unwrap()[..11], b"split phase");
    assert_eq!(a.wait(s).unwrap(), Completion::Sent);
    assert_eq!(
        a.test(s),
        Some(Err(HostError::UnknownRequest)),
        "a result is handed back once"
    );
}

#[test]
fn blocking_wrappers_and_rdma_work_end_to_end() {
    let net = Arc::new(Mutex::new(Network::with_defaults(
        2,
        LinkConfig::default(),
        2,
    )));
    let mut a = Port::new(open(&net, 0));
    let mut b = Port::new(open(&net, 1));
    let region = b.buffer_from(&[0; 32]).unwrap();
    let key = b.register(region).unwrap();
    let src = a.buffer_from(&[9; 8]).unwrap();
    let w = a.start_write(b.endpoint(), key, 4, src).unwrap();
    assert_eq!(a.wait(w).unwrap(), Completion::Written);
    let got = b.read_buffer(region).unwrap();
    assert_eq!(&got[4..12], &[9; 8]);
    assert!(got[..4].iter().chain(&got[12..]).all(|&x| x == 0));
    let w = a.start_write(b.endpoint(), key ^ 7, 0, src).unwrap();
    assert_eq!(a.wait(w), Err(HostError::Op(OpError::BadKey)));
    let (ea, eb) = (a.endpoint(), b.endpoint());
    a.send(eb, 1, b"blocking").unwrap_or_else(|e| panic!("{e}"));
    let (src, tag, data) = b.recv(RecvMatch::any(), 100).unwrap();
    assert_eq!((src, tag, data.as_slice()), (ea, 1, &b"blocking"[..]));
}
