//! Outboard's own rendezvous: a TCP server that runs fences for a job, and
//! the client side, [`TcpBootstrap`].
//!
//! Protocol (all integers big-endian u32, every message a length-prefixed
//! frame whose first byte is its type):
//!
//! - client -> server: `HELLO rank size`, then any number of
//!   `FENCE n (key, value)*n`, then `BYE`;
//! - server -> client: `DONE` followed by every rank's entries of that
//!   fence, in rank order; or `ABORT rank reason` when a rank's connection
//!   closed without `BYE` (the rank died): every rank waiting in or coming
//!   to a fence gets it, so nobody hangs on a dead job;
//! - server -> client, while the client waits in a fence: `PING` every
//!   [`PING_INTERVAL`]. A client that hears nothing for its silence limit
//!   (the peer timeout, at least [`MIN_SILENCE`]) gives the rendezvous up
//!   ([`BootstrapError::RendezvousLost`]) instead of waiting forever on a
//!   server whose host died or was cut off, or whose process is stopped.
//!   Pings go only to ranks in a fence, the only time a rank reads, so they
//!   never pile up in a computing rank's socket.
//!
//! A rank that never says `HELLO` within the join deadline (the serving
//! rank's bootstrap timeout) is taken for dead: every rank gets `ABORT`
//! naming it, instead of waiting in the first fence for a process that was
//! killed, or never started, before it reached the rendezvous.
//!
//! When the rank that serves the rendezvous leaves ([`TcpBootstrap::finish`])
//! it waits a bounded time for the others' `BYE`, then closes the
//! rendezvous: every rank still connected gets `ABORT` naming the rank that
//! left (or the first rank lost), so its next fence fails with
//! [`BootstrapError::RankLost`] rather than with a broken connection.
//!
//! Input from the network is untrusted: frames are bounded and every length
//! is checked.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Bootstrap, BootstrapError};

const HELLO: u8 = 1;
const FENCE: u8 = 2;
const BYE: u8 = 3;
const DONE: u8 = 10;
const ABORT: u8 = 11;
const PING: u8 = 12;

/// How long the serving rank waits, after a fence failed on an abort,
/// before it returns the error (and likely ends the process and its
/// server): time for the other ranks to read the abort.
const ABORT_LINGER: Duration = Duration::from_millis(200);

/// How often the server pings a rank that waits in a fence.
pub const PING_INTERVAL: Duration = Duration::from_millis(100);

/// The shortest silence after which a rank in a fence gives the rendezvous
/// up, whatever the peer timeout: ten pings missed in a row, which a loaded
/// machine's scheduler alone does not cause.
pub const MIN_SILENCE: Duration = Duration::from_secs(1);

/// How long [`TcpBootstrap::finish`] waits, once it has closed the
/// rendezvous, for the server to have told every rank (a few local socket
/// writes).
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// How long the server lets a write to one rank's connection block (a rank
/// stopped for minutes with its socket buffer full) before it gives that
/// write up, so one stuck rank cannot stall every other rank's fence.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest frame accepted.
const MAX_FRAME: usize = 16 << 20;

type Entries = Vec<(String, Vec<u8>)>;

fn write_frame(s: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(body);
    s.write_all(&buf)?;
    s.flush()
}

fn read_frame(s: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes")));
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// A cursor over a received frame; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Result<u32, BootstrapError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], BootstrapError> {
        if self.0.len() < n {
            return Err(BootstrapError::Protocol("truncated frame".into()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn bytes(&mut self) -> Result<Vec<u8>, BootstrapError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn entries(&mut self) -> Result<Entries, BootstrapError> {
        let n = self.u32()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let k = String::from_utf8(self.bytes()?).map_err(|_| BootstrapError::Protocol("key not UTF-8".into()))?;
            out.push((k, self.bytes()?));
        }
        Ok(out)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

fn put_entries(out: &mut Vec<u8>, e: &Entries) {
    out.extend_from_slice(&(e.len() as u32).to_be_bytes());
    for (k, v) in e {
        put_bytes(out, k.as_bytes());
        put_bytes(out, v);
    }
}

/// What the connection threads tell the coordinator.
enum Msg {
    Hello { rank: u32, size: u32, stream: TcpStream },
    Fence { rank: u32, entries: Entries },
    Bye { rank: u32 },
    Gone { rank: u32, reason: String },
    /// The serving rank leaves: abort every rank still connected, naming
    /// `rank` unless a rank was lost before, and stop.
    Close { rank: u32 },
}

/// How a job's rendezvous ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousReport {
    /// The first rank whose connection closed without saying goodbye, and
    /// how.
    pub lost: Option<(u32, String)>,
}

/// The rendezvous server of one job.
pub struct RendezvousServer {
    listener: TcpListener,
}

impl RendezvousServer {
    /// Listens on `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> io::Result<RendezvousServer> {
        Ok(RendezvousServer { listener: TcpListener::bind(addr)? })
    }

    /// The address ranks connect to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves a job of `size` ranks on a thread of its own, until every
    /// rank said goodbye or went away.
    /// A launcher that watches its ranks' processes (`outboard run`) sees a
    /// rank die before it joins; no join deadline.
    pub fn spawn(self, size: u32) -> io::Result<JoinHandle<RendezvousReport>> {
        Ok(self.spawn_closable(size, None)?.0)
    }

    /// [`spawn`](Self::spawn), also returning the sender through which the
    /// serving rank closes the rendezvous when it leaves; with `join`, the
    /// job is aborted if a rank has not connected by then.
    fn spawn_closable(self, size: u32, join: Option<Duration>) -> io::Result<(JoinHandle<RendezvousReport>, mpsc::Sender<Msg>)> {
        let join_by = join.map(|d| Instant::now() + d);
        let (tx, rx) = mpsc::channel();
        let listener = self.listener;
        let accept_tx = tx.clone();
        std::thread::Builder::new().name("outboard-rendezvous-accept".into()).spawn(move || {
            // Ends with the process; a job's ranks connect once each.
            for s in listener.incoming().flatten() {
                let tx = accept_tx.clone();
                let _ = std::thread::Builder::new().name("outboard-rendezvous-conn".into()).spawn(move || serve_conn(s, &tx));
            }
        })?;
        let h = std::thread::Builder::new().name("outboard-rendezvous".into()).spawn(move || coordinate(size, join_by, &rx))?;
        Ok((h, tx))
    }
}

/// Reads one rank's connection and forwards what it says.
fn serve_conn(mut s: TcpStream, tx: &mpsc::Sender<Msg>) {
    let _ = s.set_nodelay(true);
    let hello = match read_frame(&mut s) {
        Ok(f) => f,
        Err(_) => return,
    };
    let mut r = Reader(&hello);
    let (rank, size) = match (r.take(1), r.u32(), r.u32()) {
        (Ok([HELLO]), Ok(rank), Ok(size)) => (rank, size),
        _ => return,
    };
    let Ok(writer) = s.try_clone() else { return };
    let _ = writer.set_write_timeout(Some(WRITE_TIMEOUT));
    if tx.send(Msg::Hello { rank, size, stream: writer }).is_err() {
        return;
    }
    loop {
        let msg = match read_frame(&mut s) {
            Err(e) => Msg::Gone { rank, reason: format!("connection closed ({e})") },
            Ok(f) => {
                let mut r = Reader(&f);
                match r.take(1) {
                    Ok([FENCE]) => match r.entries() {
                        Ok(entries) => Msg::Fence { rank, entries },
                        Err(e) => Msg::Gone { rank, reason: e.to_string() },
                    },
                    Ok([BYE]) => Msg::Bye { rank },
                    _ => Msg::Gone { rank, reason: "unknown message".into() },
                }
            }
        };
        let last = matches!(msg, Msg::Gone { .. } | Msg::Bye { .. });
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

/// Writes `frame` to every connected rank.
fn send_all(writers: &mut [Option<TcpStream>], frame: &[u8]) {
    for w in writers.iter_mut().flatten() {
        let _ = write_frame(w, frame);
    }
}

fn coordinate(size: u32, join_by: Option<Instant>, rx: &mpsc::Receiver<Msg>) -> RendezvousReport {
    let n = size as usize;
    let mut writers: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut fenced: Vec<Option<Entries>> = vec![None; n];
    let mut finished = vec![false; n];
    let mut lost: Option<(u32, String)> = None;
    let abort_frame = |rank: u32, reason: &str| {
        let mut f = vec![ABORT];
        f.extend_from_slice(&rank.to_be_bytes());
        put_bytes(&mut f, reason.as_bytes());
        f
    };
    let mut next_ping = Instant::now() + PING_INTERVAL;
    loop {
        let msg = match rx.recv_timeout(next_ping.saturating_duration_since(Instant::now())) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if Instant::now() >= next_ping {
            // Only ranks waiting in a fence read; pings to the others
            // would pile up in their sockets.
            if lost.is_none() {
                for (w, f) in writers.iter_mut().zip(&fenced) {
                    if let (Some(w), Some(_)) = (w, f) {
                        let _ = write_frame(w, &[PING]);
                    }
                }
            }
            next_ping = Instant::now() + PING_INTERVAL;
            if lost.is_none() && join_by.is_some_and(|t| Instant::now() >= t) {
                let missing = (0..n).find(|&i| writers[i].is_none() && !finished[i]);
                if let Some(r) = missing {
                    let reason = "never joined the job (killed or not started before it reached the rendezvous)".to_string();
                    let f = abort_frame(r as u32, &reason);
                    send_all(&mut writers, &f);
                    lost = Some((r as u32, reason));
                }
            }
        }
        let Some(msg) = msg else { continue };
        match msg {
            Msg::Hello { rank, size: claimed, mut stream } => {
                let i = rank as usize;
                if claimed != size || i >= n || writers[i].is_some() || finished[i] {
                    let reason = format!("bad hello: rank {rank} of {claimed} in a job of {size}");
                    let _ = write_frame(&mut stream, &abort_frame(rank, &reason));
                    continue;
                }
                if let Some((r, why)) = &lost {
                    let _ = write_frame(&mut stream, &abort_frame(*r, why));
                }
                writers[i] = Some(stream);
            }
            Msg::Fence { rank, entries } => {
                let i = rank as usize;
                if lost.is_none() {
                    if let Some(gone) = finished.iter().position(|&f| f) {
                        // A rank said goodbye without this fence: it will
                        // never come.
                        let reason = "left the job without reaching the fence".to_string();
                        let f = abort_frame(gone as u32, &reason);
                        send_all(&mut writers, &f);
                        lost = Some((gone as u32, reason));
                        continue;
                    }
                }
                if let Some((r, why)) = &lost {
                    if let Some(w) = writers[i].as_mut() {
                        let _ = write_frame(w, &abort_frame(*r, why));
                    }
                    continue;
                }
                fenced[i] = Some(entries);
                if fenced.iter().all(Option::is_some) {
                    let mut f = vec![DONE];
                    for e in fenced.iter_mut() {
                        put_entries(&mut f, &e.take().expect("all fenced"));
                    }
                    send_all(&mut writers, &f);
                }
            }
            Msg::Bye { rank } => {
                finished[rank as usize] = true;
                writers[rank as usize] = None;
                if lost.is_none() && fenced.iter().any(Option::is_some) {
                    let reason = "left the job without reaching the fence".to_string();
                    let f = abort_frame(rank, &reason);
                    send_all(&mut writers, &f);
                    lost = Some((rank, reason));
                }
            }
            Msg::Close { rank } => {
                let (who, why) = lost.clone().unwrap_or((rank, "left the job; the rendezvous it served is closed".to_string()));
                let f = abort_frame(who, &why);
                send_all(&mut writers, &f);
                return RendezvousReport { lost: Some((who, why)) };
            }
            Msg::Gone { rank, reason } => {
                finished[rank as usize] = true;
                writers[rank as usize] = None;
                if lost.is_none() {
                    let f = abort_frame(rank, &reason);
                    send_all(&mut writers, &f);
                    lost = Some((rank, reason));
                }
            }
        }
        if finished.iter().all(|&f| f) {
            break;
        }
    }
    RendezvousReport { lost }
}

/// The client side: a rank's connection to the rendezvous.
pub struct TcpBootstrap {
    rank: u32,
    size: u32,
    addr: SocketAddr,
    stream: TcpStream,
    pending: Entries,
    values: Vec<BTreeMap<String, Vec<u8>>>,
    server: Option<JoinHandle<RendezvousReport>>,
    /// Where the serving rank tells its server to close.
    closer: Option<mpsc::Sender<Msg>>,
    /// How long a fence hears nothing before it gives the rendezvous up.
    silence: Duration,
    /// Whether a fence failed: the job is broken.
    failed: bool,
}

impl TcpBootstrap {
    /// Connects rank `rank` of `size` to the rendezvous at `addr`, retrying
    /// for up to `timeout` (the server may not be up yet). With `serve`,
    /// this process first starts the server itself at `addr`, which aborts
    /// the job if a rank has not joined within `timeout`.
    pub fn connect(rank: u32, size: u32, addr: SocketAddr, serve: bool, timeout: Duration) -> Result<TcpBootstrap, BootstrapError> {
        let io = |source| BootstrapError::Io { addr, source };
        let (server, closer) = if serve {
            let (h, tx) = RendezvousServer::bind(addr).map_err(io)?.spawn_closable(size, Some(timeout)).map_err(io)?;
            (Some(h), Some(tx))
        } else {
            (None, None)
        };
        let start = Instant::now();
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(e) if start.elapsed() >= timeout => {
                    // Its server (rank 0 under mpirun/srun) never came up,
                    // or died before this rank reached it.
                    let reason = format!("not reached within {timeout:?} ({e}); the process serving it never started or died");
                    return Err(BootstrapError::RendezvousLost { addr, reason });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let _ = stream.set_nodelay(true);
        let mut hello = vec![HELLO];
        hello.extend_from_slice(&rank.to_be_bytes());
        hello.extend_from_slice(&size.to_be_bytes());
        write_frame(&mut stream, &hello).map_err(io)?;
        stream.set_read_timeout(Some(MIN_SILENCE)).map_err(io)?;
        Ok(TcpBootstrap { rank, size, addr, stream, pending: Vec::new(), values: Vec::new(), server, closer, silence: MIN_SILENCE, failed: false })
    }

    /// Sets how long a fence may hear nothing from the rendezvous (not even
    /// a ping) before it fails with [`BootstrapError::RendezvousLost`]: the
    /// World passes its peer timeout. Never below [`MIN_SILENCE`] (the
    /// default).
    pub fn set_silence_limit(&mut self, limit: Duration) -> Result<(), BootstrapError> {
        self.silence = limit.max(MIN_SILENCE);
        self.stream.set_read_timeout(Some(self.silence)).map_err(|source| BootstrapError::Io { addr: self.addr, source })
    }

    /// Whether a fence of this rank failed (a rank was lost or the
    /// rendezvous is gone): the job cannot finish cleanly.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The local address of the connection: an address of this host that
    /// the rendezvous host can reach, hence a good default for the engine's
    /// socket.
    pub fn local_ip(&self) -> Option<IpAddr> {
        self.stream.local_addr().ok().map(|a| a.ip())
    }

    /// Says goodbye. On the rank that serves the rendezvous, first waits
    /// (up to `wait`) until every other rank said goodbye too, so that after
    /// a clean job's last fence the server outlives the job (every rank got
    /// its `DONE`); then closes the rendezvous: every rank still connected
    /// is sent `ABORT` naming this rank (or the first rank lost), so its
    /// next fence fails with [`BootstrapError::RankLost`] instead of
    /// hanging or finding a broken connection. Returns within `wait` plus a
    /// fraction of a second, whether the other ranks are alive or not;
    /// `wait` zero (a job known to have failed) does not wait for them.
    pub fn finish(mut self, wait: Duration) {
        let _ = write_frame(&mut self.stream, &[BYE]);
        if let Some(h) = self.server.take() {
            let until = |h: &JoinHandle<RendezvousReport>, limit: Duration| {
                let start = Instant::now();
                while !h.is_finished() && start.elapsed() < limit {
                    std::thread::sleep(Duration::from_millis(2));
                }
            };
            until(&h, wait);
            if !h.is_finished() {
                if let Some(tx) = self.closer.take() {
                    let _ = tx.send(Msg::Close { rank: self.rank });
                }
                until(&h, CLOSE_GRACE);
            }
        }
    }

    /// One fence, without the bookkeeping of [`Bootstrap::fence`].
    fn exchange(&mut self) -> Result<(), BootstrapError> {
        let mut f = vec![FENCE];
        put_entries(&mut f, &std::mem::take(&mut self.pending));
        // A failed write still reads on: an `ABORT` the server sent
        // before it went away may wait in the socket, and it names the
        // rank that left.
        let sent = write_frame(&mut self.stream, &f);
        let reply = loop {
            match read_frame(&mut self.stream) {
                Ok(r) if r == [PING] => continue,
                Ok(r) => break r,
                Err(e) => return Err(self.lost(sent.err().unwrap_or(e))),
            }
        };
        let mut r = Reader(&reply);
        match r.take(1)? {
            [DONE] => {
                let mut values = Vec::with_capacity(self.size as usize);
                for _ in 0..self.size {
                    values.push(r.entries()?.into_iter().collect());
                }
                // Later fences add to and override earlier values.
                if self.values.is_empty() {
                    self.values = values;
                } else {
                    for (old, new) in self.values.iter_mut().zip(values) {
                        old.extend(new);
                    }
                }
                Ok(())
            }
            [ABORT] => {
                let rank = r.u32()?;
                let reason = String::from_utf8_lossy(&r.bytes()?).into_owned();
                Err(BootstrapError::RankLost { rank, reason })
            }
            _ => Err(BootstrapError::Protocol("unexpected reply to a fence".into())),
        }
    }

    /// The error for a connection to the rendezvous that failed with `e`.
    fn lost(&self, e: io::Error) -> BootstrapError {
        let reason = match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!("silent for {:?} (not even a ping)", self.silence),
            io::ErrorKind::UnexpectedEof => "the connection closed".to_string(),
            _ => e.to_string(),
        };
        BootstrapError::RendezvousLost { addr: self.addr, reason }
    }
}

impl Bootstrap for TcpBootstrap {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        self.pending.retain(|(k, _)| k != key);
        self.pending.push((key.to_string(), value.to_vec()));
        Ok(())
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        let r = self.exchange();
        self.failed |= r.is_err();
        if matches!(r, Err(BootstrapError::RankLost { .. })) && self.server.is_some() {
            // This process serves the rendezvous and is likely to end on
            // this error: give the others a moment to read their abort
            // before its end resets their connections (a reset discards
            // what they have not read yet).
            std::thread::sleep(ABORT_LINGER);
        }
        r
    }

    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        self.values
            .get(rank as usize)
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| BootstrapError::Missing { rank, key: key.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn fences_exchange_every_ranks_values() {
        let server = RendezvousServer::bind(local()).unwrap();
        let addr = server.local_addr().unwrap();
        let h = server.spawn(3).unwrap();
        let ranks: Vec<_> = (0..3)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut b = TcpBootstrap::connect(r, 3, addr, false, Duration::from_secs(5)).unwrap();
                    b.put("addr", format!("rank{r}").as_bytes()).unwrap();
                    b.fence().unwrap();
                    let all: Vec<_> = (0..3).map(|o| b.get(o, "addr").unwrap()).collect();
                    b.put("second", &[r as u8]).unwrap();
                    b.fence().unwrap();
                    assert_eq!(b.get(2, "second").unwrap(), vec![2]);
                    assert!(b.get(1, "nothing").is_err());
                    b.finish(Duration::from_secs(1));
                    all
                })
            })
            .collect();
        for t in ranks {
            assert_eq!(t.join().unwrap(), vec![b"rank0".to_vec(), b"rank1".to_vec(), b"rank2".to_vec()]);
        }
        assert_eq!(h.join().unwrap(), RendezvousReport { lost: None });
    }

    #[test]
    fn a_rank_that_dies_aborts_the_others_fence() {
        let server = RendezvousServer::bind(local()).unwrap();
        let addr = server.local_addr().unwrap();
        let h = server.spawn(2).unwrap();
        let dead = TcpBootstrap::connect(1, 2, addr, false, Duration::from_secs(5)).unwrap();
        let mut alive = TcpBootstrap::connect(0, 2, addr, false, Duration::from_secs(5)).unwrap();
        drop(dead); // closes without BYE
        match alive.fence() {
            Err(BootstrapError::RankLost { rank: 1, .. }) => {}
            other => panic!("expected rank 1 lost, got {other:?}"),
        }
        alive.finish(Duration::from_secs(1));
        assert_eq!(h.join().unwrap().lost.map(|l| l.0), Some(1));
    }

    #[test]
    fn a_rank_that_never_joins_aborts_the_job_at_the_join_deadline() {
        // Rank 0 serves with a 1.5 s bootstrap timeout; rank 1 joins and
        // fences; rank 2 was killed before it reached the rendezvous.
        let port = TcpListener::bind(local()).unwrap().local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut b = TcpBootstrap::connect(0, 3, port, true, Duration::from_millis(1_500)).unwrap();
            b.fence()
        });
        std::thread::sleep(Duration::from_millis(200));
        let joined = std::thread::spawn(move || {
            let mut b = TcpBootstrap::connect(1, 3, port, false, Duration::from_secs(5)).unwrap();
            b.fence()
        });
        for (who, t) in [("rank 0", server), ("rank 1", joined)] {
            match join_or_hang(t, who) {
                Err(BootstrapError::RankLost { rank: 2, reason }) => assert!(reason.contains("never joined"), "{who}: {reason}"),
                other => panic!("{who}: expected rank 2 lost, got {other:?}"),
            }
        }
    }

    /// Waits for `t` up to a limit only a hang reaches.
    fn join_or_hang<T>(t: std::thread::JoinHandle<T>, what: &str) -> T {
        let start = Instant::now();
        while !t.is_finished() && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(t.is_finished(), "{what} hung");
        t.join().unwrap()
    }

    #[test]
    fn a_fence_on_a_rendezvous_that_stopped_answering_fails_instead_of_hanging() {
        // Accepts the connection and never says anything: a server whose
        // host died or is cut off, or whose process is stopped.
        let silent = TcpListener::bind(local()).unwrap();
        let addr = silent.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut b = TcpBootstrap::connect(1, 2, addr, false, Duration::from_secs(5)).unwrap();
            b.fence()
        });
        let _held = silent.accept().unwrap();
        match join_or_hang(t, "the fence") {
            Err(BootstrapError::RendezvousLost { addr: a, .. }) => assert_eq!(a, addr),
            other => panic!("expected the rendezvous lost, got {other:?}"),
        }
    }

    #[test]
    fn a_fence_longer_than_the_silence_limit_completes_on_pings() {
        let server = RendezvousServer::bind(local()).unwrap();
        let addr = server.local_addr().unwrap();
        let h = server.spawn(2).unwrap();
        let early = std::thread::spawn(move || {
            let mut b = TcpBootstrap::connect(0, 2, addr, false, Duration::from_secs(5)).unwrap();
            let r = b.fence();
            b.finish(Duration::from_secs(1));
            r
        });
        std::thread::sleep(MIN_SILENCE * 2);
        let mut late = TcpBootstrap::connect(1, 2, addr, false, Duration::from_secs(5)).unwrap();
        late.fence().unwrap();
        late.finish(Duration::ZERO);
        join_or_hang(early, "the early rank's fence").unwrap();
        assert_eq!(join_or_hang(h, "the server").lost, None);
    }

    #[test]
    fn garbage_on_the_rendezvous_port_is_ignored() {
        let server = RendezvousServer::bind(local()).unwrap();
        let addr = server.local_addr().unwrap();
        let _h = server.spawn(1).unwrap();
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(&[0xff; 64]).unwrap();
        drop(junk);
        let mut b = TcpBootstrap::connect(0, 1, addr, false, Duration::from_secs(5)).unwrap();
        b.put("k", b"v").unwrap();
        b.fence().unwrap();
        assert_eq!(b.get(0, "k").unwrap(), b"v");
    }
}
