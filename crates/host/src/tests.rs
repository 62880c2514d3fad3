//! The host library over the test network: the same calls an application
//! makes, with the network stepped whenever a port idles.

use std::cell::RefCell;
use std::rc::Rc;

use outboard_engine::{Dma, Event, Instant, NodeId, PortId};
use outboard_testnet::{LinkConfig, Network};

use crate::*;

struct NetIo {
    net: Rc<RefCell<Network>>,
    ep: Endpoint,
    events: std::collections::VecDeque<Event>,
}

impl NetIo {
    fn open(net: &Rc<RefCell<Network>>, node: u32) -> NetIo {
        let ep = net.borrow_mut().open_port(NodeId(node), PortId(0)).unwrap();
        NetIo {
            net: net.clone(),
            ep,
            events: Default::default(),
        }
    }
}

impl PortIo for NetIo {
    fn endpoint(&self) -> Endpoint {
        self.ep
    }
    fn post(&mut self, cmd: Command) -> Result<(), CommandError> {
        self.net
            .borrow_mut()
            .command(self.ep.node, self.ep.port, cmd)
    }
    fn poll_event(&mut self) -> Option<Event> {
        // The test network queues events per node; this test opens one port
        // per node, so they are all ours.
        let mut net = self.net.borrow_mut();
        self.events.extend(net.take_events(self.ep.node));
        self.events.pop_front()
    }
    fn now(&self) -> Instant {
        self.net.borrow().now()
    }
    fn idle(&mut self) {
        self.net.borrow_mut().step();
    }
    fn alloc(&mut self, len: u32) -> Result<HostBuf, MemoryError> {
        Ok(self.net.borrow_mut().memory(self.ep.node).alloc(len))
    }
    fn free(&mut self, buf: HostBuf) -> Result<(), MemoryError> {
        self.net.borrow_mut().memory(self.ep.node).free(buf);
        Ok(())
    }
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), MemoryError> {
        let mut net = self.net.borrow_mut();
        net.memory(self.ep.node)
            .read(self.ep.port, addr, out)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: out.len(),
            })
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryError> {
        let mut net = self.net.borrow_mut();
        net.memory(self.ep.node)
            .write(self.ep.port, addr, data)
            .map_err(|_| MemoryError::Invalid {
                addr,
                len: data.len(),
            })
    }
}

#[test]
fn split_phase_send_and_receive_complete_through_test_and_wait() {
    let net = Rc::new(RefCell::new(Network::with_defaults(
        2,
        LinkConfig::lossy(0.2, 0.05, 0.0),
        1,
    )));
    let mut a = Port::new(NetIo::open(&net, 0));
    let mut b = Port::new(NetIo::open(&net, 1));
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
    let net = Rc::new(RefCell::new(Network::with_defaults(
        2,
        LinkConfig::default(),
        2,
    )));
    let mut a = Port::new(NetIo::open(&net, 0));
    let mut b = Port::new(NetIo::open(&net, 1));
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
