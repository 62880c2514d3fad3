//! Batched UDP system calls under the driver: `recvmmsg` reads every
//! datagram waiting (up to a batch) in one call, and a run of datagrams
//! to one peer leaves in one `sendmsg` with UDP generic segmentation
//! offload (`UDP_SEGMENT`), which the kernel cuts into datagrams.
//!
//! Measured on loopback (docs/rendezvous.md, "The runtime's UDP path"): a system call
//! costs about 0.5-1.5 us here, as much as the engine's work on a small
//! packet, so one call per datagram is most of the runtime's overhead;
//! and the engine's polling loop no longer needs a second, empty receive
//! after each datagram.
//!
//! GSO is a Linux feature of the kernel and the device: it is probed once
//! (`getsockopt(UDP_SEGMENT)`), and a segmented send the device refuses
//! (`EIO`, `EINVAL`) turns it off for the socket, which then sends
//! datagram by datagram. Generic receive offload (`UDP_GRO`) is left off:
//! on this machine's kernel (6.18) a socket with it turned on saw its
//! datagrams on loopback late, by hundreds of microseconds under load,
//! which the engine took for losses (measured: 189 timeouts in a
//! ping-pong run with it, 11 without).

use std::io::{self, ErrorKind, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use nix::sys::socket::{
    getsockopt, recvmmsg, sendmsg, sockopt, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};

/// Datagram buffers one receive call fills.
pub(crate) const RX_SLOTS: usize = 8;
/// Bytes of one receive buffer: the largest UDP payload.
const RX_SLOT: usize = 65_536;
/// Largest UDP payload a segmented send may carry in all (IPv4: 65,535
/// minus the IP and UDP headers).
pub(crate) const GSO_MAX_BYTES: usize = 65_507;
/// Most segments one segmented send carries (the kernel's limit is 64 or
/// more).
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;

thread_local! {
    /// The `recvmmsg` headers of the thread calling (the engine thread, or
    /// a host thread driving the engine): they hold raw pointers, so they
    /// cannot travel with the socket between threads.
    static HEADERS: std::cell::RefCell<Option<MultiHeaders<SockaddrStorage>>> = const { std::cell::RefCell::new(None) };
}

/// What one receive buffer holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Bytes in the buffer.
    pub len: usize,
    /// The sender.
    pub from: Option<SocketAddr>,
}

/// A non-blocking UDP socket with batched receives and segmented sends.
pub(crate) struct BatchSocket {
    socket: mio::net::UdpSocket,
    rx: Vec<u8>,
    got: [Received; RX_SLOTS],
    gso: bool,
}

impl BatchSocket {
    /// Wraps `socket`; segmented sends are used if `wanted` and the kernel
    /// has them. Not wanted (`OUTBOARD_UDP_GSO=off`), every datagram is its
    /// own packet on the wire (the fault suite's packet rules and captures
    /// need that).
    pub fn new(socket: mio::net::UdpSocket, wanted: bool) -> BatchSocket {
        // UDP_SEGMENT readable means the kernel knows it (Linux 4.18+).
        let gso = wanted && getsockopt(&socket.as_fd(), sockopt::UdpGsoSegment).is_ok();
        BatchSocket { socket, rx: vec![0; RX_SLOTS * RX_SLOT], got: [Received { len: 0, from: None }; RX_SLOTS], gso }
    }

    /// The socket, to register with a poller.
    pub fn socket_mut(&mut self) -> &mut mio::net::UdpSocket {
        &mut self.socket
    }

    /// Whether segmented sends are in use (probed, and not refused since).
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Reads one datagram with `recvfrom` into buffer 0; returns 1
    /// (`WouldBlock` when none). Cheaper than `recvmmsg` for one datagram
    /// (measured in a 1-byte ping-pong on this machine: a successful call
    /// 1.9 us against 2.4 us, the polling loop's period 0.7 us against
    /// 1.0 us), so a host that polls for its reply uses it and stops at
    /// the datagram it waits for.
    pub fn recv_one(&mut self) -> io::Result<usize> {
        let (n, from) = self.socket.recv_from(&mut self.rx[..RX_SLOT])?;
        self.got[0] = Received { len: n, from: Some(from) };
        Ok(1)
    }

    /// Reads what is waiting, up to [`RX_SLOTS`] buffers, in one system
    /// call; returns how many buffers were filled (`WouldBlock` when none).
    pub fn recv(&mut self) -> io::Result<usize> {
        let fd = self.socket.as_raw_fd();
        let (rx, got) = (&mut self.rx, &mut self.got);
        HEADERS.with_borrow_mut(|headers| {
            let mut iovs: Vec<[IoSliceMut<'_>; 1]> = rx.chunks_mut(RX_SLOT).map(|c| [IoSliceMut::new(c)]).collect();
            let headers = headers.get_or_insert_with(|| MultiHeaders::preallocate(RX_SLOTS, None));
            let results = recvmmsg(fd, headers, iovs.iter_mut(), MsgFlags::MSG_DONTWAIT, None).map_err(io::Error::from)?;
            let mut n = 0;
            for r in results {
            let len = if r.flags.contains(MsgFlags::MSG_TRUNC) { 0 } else { r.bytes };
            got[n] = Received { len, from: r.address.as_ref().and_then(to_std) };
            n += 1;
            }
            Ok(n)
        })
    }

    /// Buffer `i` of the last [`BatchSocket::recv`] and what it holds.
    pub fn received(&self, i: usize) -> (Received, &[u8]) {
        let g = self.got[i];
        (g, &self.rx[i * RX_SLOT..i * RX_SLOT + g.len])
    }

    /// Sends `data`, datagrams of `seg` bytes (the last may be shorter), to
    /// `addr`: one system call where GSO is on, else one per datagram.
    /// On an error, says how many bytes of `data` went out before it.
    pub fn send(&mut self, addr: SocketAddr, data: &[u8], seg: usize) -> Result<(), (usize, io::Error)> {
        if data.len() > seg && self.gso {
            let to = SockaddrStorage::from(addr);
            let seg16 = u16::try_from(seg).unwrap_or(u16::MAX);
            let cmsg = [ControlMessage::UdpGsoSegments(&seg16)];
            match sendmsg(self.socket.as_raw_fd(), &[IoSlice::new(data)], &cmsg, MsgFlags::MSG_DONTWAIT, Some(&to)) {
                Ok(_) => return Ok(()),
                // The device cannot segment (or the route's MTU is below
                // a segment): send datagram by datagram from now on.
                Err(Errno::EIO | Errno::EINVAL) => self.gso = false,
                Err(e) => return Err((0, e.into())),
            }
        }
        let mut off = 0;
        for chunk in data.chunks(seg.max(1)) {
            match self.socket.send_to(chunk, addr) {
                Ok(_) => off += chunk.len(),
                Err(e) => return Err((off, e)),
            }
        }
        Ok(())
    }
}

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

/// Whether an error only means "try again later".
pub(crate) fn would_block(e: &io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
}
