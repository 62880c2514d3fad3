//! The messages a process and its node engine exchange over the engine's
//! Unix socket (`SOCK_SEQPACKET`: one message per packet, and end of file
//! when either side dies), with the file descriptors that travel beside
//! some of them (`SCM_RIGHTS`).
//!
//! The socket carries only set-up and rare requests; commands and
//! completions go through the rings in the process's shared segment. Each
//! message is a kind byte and fixed little-endian fields; a message from
//! the other side is untrusted input, so [`Message::decode`] checks every
//! length and value and never panics.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use outboard_engine::{NodeId, Stats, STATS_WORDS};
use thiserror::Error;

/// The version of this protocol (and of the segment layout and the
/// command and event encodings): a process and an engine of different
/// versions refuse each other with a sentence, not garbled commands.
pub const PROTOCOL_VERSION: u32 = 2;

/// Most addresses in one [`Message::Peers`] message (a job's peer list
/// travels in several).
pub const PEERS_PER_MESSAGE: usize = 2048;

/// Largest message on the socket, in bytes.
pub const MAX_MESSAGE: usize = 16 + PEERS_PER_MESSAGE * ADDR_BYTES;

const ADDR_BYTES: usize = 19;

/// One message on a node engine's socket.
// Messages are rare (set-up, status) and short-lived: their size is no cost.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// First message of the process that started the engine: the engine's
    /// identity in the job, which only the job's bootstrap knows.
    Configure(Box<NodeSetup>),
    /// The engine's answer to [`Message::Configure`]: where its UDP socket
    /// listens, for the bootstrap to publish.
    Configured {
        /// The engine's UDP address.
        udp: SocketAddr,
    },
    /// Part of the UDP address of every node of the job (index = node id):
    /// addresses `first..first + addrs.len()` of `total`.
    Peers {
        /// Number of nodes.
        total: u32,
        /// Node id of the first address.
        first: u32,
        /// The addresses.
        addrs: Vec<SocketAddr>,
    },
    /// A process opens a port; its segment and its wake-up eventfd travel
    /// beside the message.
    Attach(AttachRequest),
    /// The engine opened the port; its doorbell eventfd travels beside.
    Attached {
        /// Node id of this engine.
        node: u32,
        /// The port's slot.
        port: u8,
        /// The port's incarnation.
        gen: u32,
    },
    /// The engine refuses a request, with a sentence that says why.
    Refused {
        /// Why.
        reason: String,
    },
    /// A process asks for the engine's state ([`Message::Status`]).
    Query,
    /// The engine's state.
    Status(EngineStatus),
    /// The process gives the job up after a failure: the engine tells its
    /// peers this node leaves (`Engine::leave`).
    Leave,
    /// Where the engine delivers its port's interrupts (application
    /// bypass); an eventfd travels beside [`InterruptTo::EventFd`]. The
    /// engine answers with the same message once they go there.
    Interrupts(InterruptTo),
}

/// Where a node engine delivers a port's interrupts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptTo {
    /// Nowhere (the default).
    Nowhere,
    /// The runtime's interrupt signal to this thread of the process (the
    /// engine takes the process from the socket's credentials, so a
    /// process can only signal itself).
    Thread(u32),
    /// One added to the eventfd sent beside.
    EventFd,
}

/// What the engine needs from the job's bootstrap to take part in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSetup {
    /// This node's id in the job.
    pub node: u32,
    /// The job key.
    pub job_key: u64,
    /// The job secret's bytes.
    pub secret: [u8; 16],
    /// The engine's incarnation.
    pub boot: u64,
    /// The oldest incarnation a peer of this job may have.
    pub min_peer_boot: u64,
    /// How long a silent peer has (`OUTBOARD_PEER_TIMEOUT_MS`).
    pub peer_timeout: Duration,
    /// How many of the job's processes run on this node.
    pub local_size: u32,
    /// The address the UDP socket binds.
    pub bind: IpAddr,
}

/// Where a process laid out its segment: a control block, the command
/// ring, the event ring, and registered memory after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachRequest {
    /// [`PROTOCOL_VERSION`] of the process.
    pub version: u32,
    /// The process's id, for messages.
    pub pid: u32,
    /// The process's rank in the job, for messages.
    pub rank: u32,
    /// The port slot asked for.
    pub port: u8,
    /// Offset of the command ring in the segment.
    pub commands: u64,
    /// Offset of the event ring in the segment.
    pub events: u64,
    /// Offset of the registered memory (to the segment's end).
    pub memory: u64,
}

/// What a process can learn of its node engine's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStatus {
    /// Nothing under way (every send confirmed).
    pub quiet: bool,
    /// The engine's counters.
    pub stats: Stats,
    /// Datagrams read from the socket.
    pub datagrams_in: u64,
    /// Datagrams written to the socket.
    pub datagrams_out: u64,
    /// Packets between ports of this node, which never touched the socket.
    pub loopback: u64,
}

/// A message that is not the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The message ends before its fields do.
    #[error("message truncated")]
    Truncated,
    /// An unknown message kind.
    #[error("unknown message kind {0}")]
    Kind(u8),
    /// A field with a value it cannot have.
    #[error("bad value of {0}")]
    Field(&'static str),
}

const CONFIGURE: u8 = 1;
const CONFIGURED: u8 = 2;
const PEERS: u8 = 3;
const ATTACH: u8 = 4;
const ATTACHED: u8 = 5;
const REFUSED: u8 = 6;
const QUERY: u8 = 7;
const STATUS: u8 = 8;
const LEAVE: u8 = 9;
const INTERRUPTS: u8 = 10;

impl Message {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(64);
        match self {
            Message::Configure(s) => {
                w.push(CONFIGURE);
                put_u32(&mut w, s.node);
                put_u64(&mut w, s.job_key);
                w.extend_from_slice(&s.secret);
                put_u64(&mut w, s.boot);
                put_u64(&mut w, s.min_peer_boot);
                put_u64(&mut w, u64::try_from(s.peer_timeout.as_nanos()).unwrap_or(u64::MAX));
                put_u32(&mut w, s.local_size);
                put_ip(&mut w, s.bind);
            }
            Message::Configured { udp } => {
                w.push(CONFIGURED);
                put_addr(&mut w, *udp);
            }
            Message::Peers { total, first, addrs } => {
                w.push(PEERS);
                put_u32(&mut w, *total);
                put_u32(&mut w, *first);
                put_u32(&mut w, addrs.len() as u32);
                for a in addrs {
                    put_addr(&mut w, *a);
                }
            }
            Message::Attach(a) => {
                w.push(ATTACH);
                put_u32(&mut w, a.version);
                put_u32(&mut w, a.pid);
                put_u32(&mut w, a.rank);
                w.push(a.port);
                put_u64(&mut w, a.commands);
                put_u64(&mut w, a.events);
                put_u64(&mut w, a.memory);
            }
            Message::Attached { node, port, gen } => {
                w.push(ATTACHED);
                put_u32(&mut w, *node);
                w.push(*port);
                put_u32(&mut w, *gen);
            }
            Message::Refused { reason } => {
                w.push(REFUSED);
                let r = &reason.as_bytes()[..reason.len().min(4096)];
                put_u32(&mut w, r.len() as u32);
                w.extend_from_slice(r);
            }
            Message::Query => w.push(QUERY),
            Message::Status(s) => {
                w.push(STATUS);
                w.push(u8::from(s.quiet));
                match s.stats.first_failed {
                    Some(n) => {
                        w.push(1);
                        put_u32(&mut w, n.0);
                    }
                    None => {
                        w.push(0);
                        put_u32(&mut w, 0);
                    }
                }
                put_u32(&mut w, STATS_WORDS as u32);
                for c in s.stats.to_words() {
                    put_u64(&mut w, c);
                }
                put_u64(&mut w, s.datagrams_in);
                put_u64(&mut w, s.datagrams_out);
                put_u64(&mut w, s.loopback);
            }
            Message::Leave => w.push(LEAVE),
            Message::Interrupts(to) => {
                w.push(INTERRUPTS);
                let (how, tid) = match to {
                    InterruptTo::Nowhere => (0, 0),
                    InterruptTo::Thread(t) => (1, *t),
                    InterruptTo::EventFd => (2, 0),
                };
                w.push(how);
                put_u32(&mut w, tid);
            }
        }
        w
    }

    /// Reads a message; anything that is not one is an error.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader(bytes);
        let kind = r.u8()?;
        let m = match kind {
            CONFIGURE => Message::Configure(Box::new(NodeSetup {
                node: r.u32()?,
                job_key: r.u64()?,
                secret: r.array()?,
                boot: r.u64()?,
                min_peer_boot: r.u64()?,
                peer_timeout: Duration::from_nanos(r.u64()?),
                local_size: r.u32()?,
                bind: r.ip()?,
            })),
            CONFIGURED => Message::Configured { udp: r.addr()? },
            PEERS => {
                let total = r.u32()?;
                let first = r.u32()?;
                let n = r.u32()? as usize;
                if n > PEERS_PER_MESSAGE || u64::from(first) + n as u64 > u64::from(total) {
                    return Err(DecodeError::Field("peer count"));
                }
                let mut addrs = Vec::with_capacity(n);
                for _ in 0..n {
                    addrs.push(r.addr()?);
                }
                Message::Peers { total, first, addrs }
            }
            ATTACH => Message::Attach(AttachRequest {
                version: r.u32()?,
                pid: r.u32()?,
                rank: r.u32()?,
                port: r.u8()?,
                commands: r.u64()?,
                events: r.u64()?,
                memory: r.u64()?,
            }),
            ATTACHED => Message::Attached { node: r.u32()?, port: r.u8()?, gen: r.u32()? },
            REFUSED => {
                let n = r.u32()? as usize;
                if n > 4096 {
                    return Err(DecodeError::Field("reason length"));
                }
                let b = r.take(n)?;
                Message::Refused { reason: String::from_utf8_lossy(b).into_owned() }
            }
            QUERY => Message::Query,
            STATUS => {
                let quiet = r.bool("quiet")?;
                let has = r.bool("first failed")?;
                let n = r.u32()?;
                if r.u32()? as usize != STATS_WORDS {
                    return Err(DecodeError::Field("counter count"));
                }
                let mut words = [0u64; STATS_WORDS];
                for w in words.iter_mut() {
                    *w = r.u64()?;
                }
                let stats = Stats::from_words(&words, has.then_some(NodeId(n))).ok_or(DecodeError::Field("counters"))?;
                Message::Status(EngineStatus {
                    quiet,
                    stats,
                    datagrams_in: r.u64()?,
                    datagrams_out: r.u64()?,
                    loopback: r.u64()?,
                })
            }
            LEAVE => Message::Leave,
            INTERRUPTS => {
                let how = r.u8()?;
                let tid = r.u32()?;
                Message::Interrupts(match (how, tid) {
                    (0, 0) => InterruptTo::Nowhere,
                    (1, t) if t != 0 => InterruptTo::Thread(t),
                    (2, 0) => InterruptTo::EventFd,
                    _ => return Err(DecodeError::Field("interrupt target")),
                })
            }
            k => return Err(DecodeError::Kind(k)),
        };
        if !r.0.is_empty() {
            return Err(DecodeError::Field("message length"));
        }
        Ok(m)
    }
}

fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_ip(w: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            w.push(4);
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&a.octets());
            w.extend_from_slice(&b);
        }
        IpAddr::V6(a) => {
            w.push(6);
            w.extend_from_slice(&a.octets());
        }
    }
}

fn put_addr(w: &mut Vec<u8>, a: SocketAddr) {
    put_ip(w, a.ip());
    w.extend_from_slice(&a.port().to_le_bytes());
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("length taken"))
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Field(field)),
        }
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn ip(&mut self) -> Result<IpAddr, DecodeError> {
        let family = self.u8()?;
        let b: [u8; 16] = self.array()?;
        match family {
            4 => Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(b))),
            _ => Err(DecodeError::Field("address family")),
        }
    }
    fn addr(&mut self) -> Result<SocketAddr, DecodeError> {
        let ip = self.ip()?;
        Ok(SocketAddr::new(ip, u16::from_le_bytes(self.array()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn samples() -> Vec<Message> {
        let v4: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let v6: SocketAddr = "[fe80::1]:9".parse().unwrap();
        vec![
            Message::Configure(Box::new(NodeSetup {
                node: 3,
                job_key: u64::MAX,
                secret: [7; 16],
                boot: 99,
                min_peer_boot: 98,
                peer_timeout: Duration::from_millis(2500),
                local_size: 4,
                bind: "127.0.0.1".parse().unwrap(),
            })),
            Message::Configured { udp: v6 },
            Message::Peers { total: 4, first: 2, addrs: vec![v4, v6] },
            Message::Attach(AttachRequest { version: 1, pid: 77, rank: 5, port: 3, commands: 4096, events: 8192, memory: 1 << 20 }),
            Message::Attached { node: 1, port: 2, gen: 0xdead },
            Message::Refused { reason: "rank 3 asked for port 9, which is taken".into() },
            Message::Query,
            Message::Status(EngineStatus {
                quiet: true,
                stats: Stats::from_words(&[5; STATS_WORDS], Some(NodeId(7))).unwrap(),
                datagrams_in: 2,
                datagrams_out: 3,
                loopback: 4,
            }),
            Message::Status(EngineStatus::default()),
            Message::Leave,
            Message::Interrupts(InterruptTo::Nowhere),
            Message::Interrupts(InterruptTo::Thread(4242)),
            Message::Interrupts(InterruptTo::EventFd),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in samples() {
            assert_eq!(Message::decode(&m.encode()), Ok(m.clone()), "{m:?}");
        }
        let full = Message::Peers { total: u32::MAX, first: 0, addrs: vec!["[::1]:1".parse().unwrap(); PEERS_PER_MESSAGE] };
        assert!(full.encode().len() <= MAX_MESSAGE);
    }

    #[test]
    fn truncated_extended_and_bad_messages_are_errors() {
        for m in samples() {
            let b = m.encode();
            for n in 0..b.len() {
                assert!(Message::decode(&b[..n]).is_err(), "{m:?} cut at {n}");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert_eq!(Message::decode(&longer), Err(DecodeError::Field("message length")));
        }
        assert_eq!(Message::decode(&[200]), Err(DecodeError::Kind(200)));
        let mut b = Message::Status(EngineStatus::default()).encode();
        b[1] = 2;
        assert_eq!(Message::decode(&b), Err(DecodeError::Field("quiet")));
        let mut b = Message::Peers { total: 1, first: 0, addrs: vec!["1.2.3.4:5".parse().unwrap()] }.encode();
        b[1] = 0; // total 0 < first + count
        assert_eq!(Message::decode(&b), Err(DecodeError::Field("peer count")));
        for (how, tid) in [(0u8, 7u32), (1, 0), (2, 1), (3, 0)] {
            let mut b = vec![INTERRUPTS, how];
            b.extend_from_slice(&tid.to_le_bytes());
            assert_eq!(Message::decode(&b), Err(DecodeError::Field("interrupt target")), "{how} {tid}");
        }
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(m) = Message::decode(&bytes) {
                prop_assert_eq!(Message::decode(&m.encode()), Ok(m));
            }
        }
    }
}
