//! The node engine's Unix socket: a `SOCK_SEQPACKET` socket in the
//! abstract namespace (no file to clean up, and private to the network
//! namespace, so each emulated node of a `--netns` job has its own), which
//! keeps message boundaries, carries file descriptors (`SCM_RIGHTS`), and
//! reads as end of file when the other side's process ends.
//!
//! Received descriptors are the only raw file descriptors the runtime
//! adopts; this module turns them into `OwnedFd`s at once.

#![allow(unsafe_code)]

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{
    accept4, bind, connect, listen, recvmsg, sendmsg, socket, AddressFamily, Backlog, ControlMessage, ControlMessageOwned,
    MsgFlags, SockFlag, SockType, UnixAddr,
};

use super::protocol::{Message, MAX_MESSAGE};

/// Most descriptors one message carries.
const MAX_FDS: usize = 4;

/// The abstract socket name of job `job_key`'s engine on node `node`.
pub fn engine_name(job_key: u64, node: u32) -> String {
    format!("outboard-{job_key:016x}-node-{node}")
}

/// A listening socket.
pub struct Listener {
    fd: OwnedFd,
}

/// One connection: a process and its engine.
pub struct Conn {
    fd: OwnedFd,
}

fn errno(e: nix::errno::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

fn seqpacket(nonblocking: bool) -> std::io::Result<OwnedFd> {
    let mut flags = SockFlag::SOCK_CLOEXEC;
    if nonblocking {
        flags |= SockFlag::SOCK_NONBLOCK;
    }
    socket(AddressFamily::Unix, SockType::SeqPacket, flags, None).map_err(errno)
}

impl Listener {
    /// Listens on abstract name `name`; an engine of the same name already
    /// listening makes this fail with `AddrInUse`.
    pub fn bind(name: &str) -> std::io::Result<Listener> {
        let fd = seqpacket(true)?;
        let addr = UnixAddr::new_abstract(name.as_bytes()).map_err(errno)?;
        bind(fd.as_raw_fd(), &addr).map_err(errno)?;
        listen(&fd, Backlog::new(128).map_err(errno)?).map_err(errno)?;
        Ok(Listener { fd })
    }

    /// A waiting connection, if any (non-blocking).
    pub fn accept(&self) -> std::io::Result<Option<Conn>> {
        match accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK) {
            // SAFETY: accept4 returned a new descriptor nobody else owns.
            Ok(fd) => Ok(Some(Conn { fd: unsafe { OwnedFd::from_raw_fd(fd) } })),
            Err(nix::errno::Errno::EAGAIN) => Ok(None),
            Err(nix::errno::Errno::EINTR) | Err(nix::errno::Errno::ECONNABORTED) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Conn {
    /// The process at the other end, as the kernel recorded it when the
    /// connection was made (`SO_PEERCRED`).
    pub fn peer_pid(&self) -> Option<u32> {
        nix::sys::socket::getsockopt(&self.fd, nix::sys::socket::sockopt::PeerCredentials).ok().and_then(|c| u32::try_from(c.pid()).ok())
    }

    /// Connects to the engine listening on `name` (blocking socket).
    pub fn connect(name: &str) -> std::io::Result<Conn> {
        let fd = seqpacket(false)?;
        let addr = UnixAddr::new_abstract(name.as_bytes()).map_err(errno)?;
        connect(fd.as_raw_fd(), &addr).map_err(errno)?;
        Ok(Conn { fd })
    }

    /// Sends `m` with `fds` beside it.
    pub fn send(&self, m: &Message, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        let bytes = m.encode();
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsg = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
        loop {
            match sendmsg::<()>(self.fd.as_raw_fd(), &[IoSlice::new(&bytes)], cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => {
                    // A non-blocking engine-side socket whose peer does not
                    // read: the reply waits a moment (replies are rare and
                    // small).
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                Err(e) => return Err(errno(e)),
            }
        }
    }

    /// Receives one message and the descriptors beside it. `Ok(None)`:
    /// nothing waiting on a non-blocking socket. End of file (the other
    /// process ended or closed) is `UnexpectedEof`; a message that is not
    /// the protocol is `InvalidData`.
    pub fn recv(&self) -> std::io::Result<Option<(Message, Vec<OwnedFd>)>> {
        self.recv_with(MsgFlags::MSG_CMSG_CLOEXEC)
    }

    /// [`Conn::recv`] that never blocks, also on a blocking socket.
    pub fn try_recv(&self) -> std::io::Result<Option<(Message, Vec<OwnedFd>)>> {
        self.recv_with(MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT)
    }

    fn recv_with(&self, flags: MsgFlags) -> std::io::Result<Option<(Message, Vec<OwnedFd>)>> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
        let (n, fds, truncated) = loop {
            let mut iov = [IoSliceMut::new(&mut buf)];
            match recvmsg::<()>(self.fd.as_raw_fd(), &mut iov, Some(&mut space), flags) {
                Ok(msg) => {
                    let mut fds = Vec::new();
                    for c in msg.cmsgs().map_err(errno)? {
                        if let ControlMessageOwned::ScmRights(raw) = c {
                            // SAFETY: the kernel installed these descriptors
                            // in this process for this message; nobody else
                            // owns them.
                            fds.extend(raw.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                        }
                    }
                    let truncated = msg.flags.intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
                    break (msg.bytes, fds, truncated);
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(errno(e)),
            }
        };
        if n == 0 && fds.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the other side closed"));
        }
        if truncated {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "message or descriptors cut short"));
        }
        let m = Message::decode(&buf[..n]).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(Some((m, fds)))
    }

    /// Whether the other side is gone (a non-blocking look: hang-up or an
    /// error on the socket).
    pub fn peer_gone(&self) -> bool {
        self.look(nix::poll::PollFlags::empty())
    }

    /// Whether a message waits or the other side is gone: a cheap look
    /// before [`Conn::try_recv`], which sets up a buffer for the largest
    /// message.
    pub fn has_news(&self) -> bool {
        self.look(nix::poll::PollFlags::POLLIN)
    }

    fn look(&self, wanted: nix::poll::PollFlags) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let mut p = [PollFd::new(self.fd.as_fd(), wanted)];
        match poll(&mut p, PollTimeout::ZERO) {
            Ok(n) if n > 0 => p[0].revents().is_some_and(|r| r.intersects(wanted | PollFlags::POLLHUP | PollFlags::POLLERR)),
            _ => false,
        }
    }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
