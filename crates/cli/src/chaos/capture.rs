//! Captures every engine datagram of a job, and sends captured, forged,
//! truncated and bit-flipped datagrams at a later job from the addresses
//! of its ranks.
//!
//! Capture: an `AF_PACKET` socket in the hub namespace reads every IPv4
//! packet that arrives from a rank's veth (the bridge forwards it to the
//! destination rank; frames the bridge sends out are skipped, so each
//! datagram is seen once). Injection: a raw IPv4 socket (`IPPROTO_RAW`,
//! the header is ours) in the hub namespace sends each datagram with the
//! source address of the rank that sent it originally, rewritten to the
//! later job's engine ports (each engine binds an ephemeral port), and the
//! UDP checksum set to zero (IPv4's "none", so veth checksum offload in
//! the capture cannot make the copies invalid).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::bail;
use rand::Rng;

use crate::netns::{rank_ip, Net, HUB_IP};

/// One captured UDP datagram: its IPv4 packet.
#[derive(Debug, Clone)]
pub struct Datagram(pub Vec<u8>);

impl Datagram {
    fn ihl(&self) -> usize {
        usize::from(self.0[0] & 0x0f) * 4
    }
    /// Source address and port.
    pub fn src(&self) -> SocketAddrV4 {
        let (p, h) = (&self.0, self.ihl());
        SocketAddrV4::new(Ipv4Addr::new(p[12], p[13], p[14], p[15]), u16::from_be_bytes([p[h], p[h + 1]]))
    }
    /// Destination address and port.
    pub fn dst(&self) -> SocketAddrV4 {
        let (p, h) = (&self.0, self.ihl());
        SocketAddrV4::new(Ipv4Addr::new(p[16], p[17], p[18], p[19]), u16::from_be_bytes([p[h + 2], p[h + 3]]))
    }
    /// The UDP payload.
    pub fn payload(&self) -> &[u8] {
        &self.0[self.ihl() + 8..]
    }
    /// An IPv4/UDP packet from `src` to `dst` carrying `payload`.
    pub fn build(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Datagram {
        let mut p = vec![0u8; 28 + payload.len()];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src.ip().octets());
        p[16..20].copy_from_slice(&dst.ip().octets());
        p[20..22].copy_from_slice(&src.port().to_be_bytes());
        p[22..24].copy_from_slice(&dst.port().to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        // Checksum 0: none (IPv4). The kernel fills the IP checksum.
        p[28..].copy_from_slice(payload);
        Datagram(p)
    }
    fn is_udp(p: &[u8]) -> bool {
        p.len() >= 28 && p[0] >> 4 == 4 && p[9] == 17 && p.len() >= usize::from(p[0] & 0x0f) * 4 + 8
    }
}

/// A capture under way in the hub namespace.
pub struct Capture {
    stop: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<Datagram>>>,
    thread: Option<JoinHandle<()>>,
}

fn check(ret: libc::c_int, what: &str) -> anyhow::Result<libc::c_int> {
    if ret < 0 {
        bail!("{what}: {}", std::io::Error::last_os_error());
    }
    Ok(ret)
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T, what: &str) -> anyhow::Result<()> {
    // SAFETY: `v` is a live value of the size passed.
    let r = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (v as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t) };
    check(r, what).map(drop)
}

impl Capture {
    /// Starts capturing every UDP datagram the ranks of `net` send.
    pub fn start(net: &Net) -> anyhow::Result<Capture> {
        let fd = Net::inside(&net.hub, || {
            // ETH_P_ALL: a bridge port's frames reach only the taps for
            // every protocol (per-protocol handlers run after the bridge
            // has taken the frame).
            let proto = (libc::ETH_P_ALL as u16).to_be();
            // SAFETY: plain socket(2); the descriptor is owned at once.
            let raw = check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM, libc::c_int::from(proto)) }, "AF_PACKET socket")?;
            // SAFETY: `raw` is a new descriptor nobody else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(raw) })
        })?;
        // A big buffer (forced past rmem_max: root), and a timeout so the
        // thread sees the stop flag.
        let size: libc::c_int = 64 << 20;
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &size, "SO_RCVBUFFORCE")?;
        let tv = libc::timeval { tv_sec: 0, tv_usec: 20_000 };
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv, "SO_RCVTIMEO")?;
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (s, g) = (stop.clone(), got.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !s.load(Ordering::Relaxed) {
                // SAFETY: all-zero is a valid sockaddr_ll.
                let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                // SAFETY: buffer and address are live and sized as passed.
                let n = unsafe {
                    libc::recvfrom(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0, (&mut from as *mut libc::sockaddr_ll).cast(), &mut len)
                };
                if n <= 0 || from.sll_pkttype == libc::PACKET_OUTGOING || from.sll_protocol != (libc::ETH_P_IP as u16).to_be() {
                    continue;
                }
                let p = &buf[..n as usize];
                let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
                if Datagram::is_udp(p) && src.octets()[..3] == [10, 77, 0] && src != HUB_IP {
                    g.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Datagram(p.to_vec()));
                }
            }
        });
        Ok(Capture { stop, got, thread: Some(thread) })
    }

    /// The engine address of each rank seen so far (the source of its
    /// datagrams), by rank.
    pub fn engine_ports(&self, ranks: u32) -> Vec<Option<u16>> {
        let got = self.got.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ports(&got, ranks)
    }

    /// Stops; every datagram captured, in order.
    pub fn stop(mut self) -> Vec<Datagram> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.got.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The engine port of each rank in `d` (the source port of the first
/// datagram from its address).
pub fn ports(d: &[Datagram], ranks: u32) -> Vec<Option<u16>> {
    let mut v = vec![None; ranks as usize];
    for x in d {
        let s = x.src();
        if let Some(r) = (0..ranks).find(|&r| rank_ip(r) == *s.ip()) {
            v[r as usize].get_or_insert(s.port());
        }
    }
    v
}

/// What to send at the later job.
#[derive(Debug, Default, Clone, Copy)]
pub struct Injected {
    /// Captured datagrams, unchanged but for the ports.
    pub replayed: usize,
    /// Right header (job key included), random body.
    pub forged: usize,
    /// Captured datagrams cut short.
    pub truncated: usize,
    /// Captured datagrams with one bit flipped.
    pub flipped: usize,
}

/// Every datagram of `old` (a job whose engine ports were `old_ports`)
/// re-addressed to the job whose ports are `new_ports`, then `extra` each
/// of forged (the first `header` bytes of a real one, random bytes after),
/// truncated and bit-flipped copies of random ones.
pub fn plan(old: &[Datagram], old_ports: &[Option<u16>], new_ports: &[u16], header: usize, extra: usize, rng: &mut impl Rng) -> (Vec<Datagram>, Injected) {
    let by_ip: HashMap<Ipv4Addr, u16> = (0..new_ports.len() as u32).map(|r| (rank_ip(r), new_ports[r as usize])).collect();
    let remap = |a: SocketAddrV4| -> SocketAddrV4 {
        match by_ip.get(a.ip()) {
            // Only the engine's port moves; anything else stays as it was.
            Some(&p) if old_ports.contains(&Some(a.port())) => SocketAddrV4::new(*a.ip(), p),
            _ => a,
        }
    };
    let mut out: Vec<Datagram> = old.iter().map(|d| Datagram::build(remap(d.src()), remap(d.dst()), d.payload())).collect();
    let mut n = Injected { replayed: out.len(), ..Injected::default() };
    if out.is_empty() {
        return (out, n);
    }
    let base = out.clone();
    for _ in 0..extra {
        let d = &base[rng.gen_range(0..base.len())];
        let p = d.payload();
        let mut body = p[..p.len().min(header)].to_vec();
        let mut tail = vec![0u8; p.len().saturating_sub(header).max(1)];
        rng.fill_bytes(&mut tail);
        body.extend_from_slice(&tail);
        out.push(Datagram::build(d.src(), d.dst(), &body));
        n.forged += 1;

        let d = &base[rng.gen_range(0..base.len())];
        let p = d.payload();
        out.push(Datagram::build(d.src(), d.dst(), &p[..rng.gen_range(0..p.len())]));
        n.truncated += 1;

        let d = &base[rng.gen_range(0..base.len())];
        let mut p = d.payload().to_vec();
        let bit = rng.gen_range(0..p.len() * 8);
        p[bit / 8] ^= 1 << (bit % 8);
        out.push(Datagram::build(d.src(), d.dst(), &p));
        n.flipped += 1;
    }
    (out, n)
}

/// A raw IPv4 socket in the hub namespace that sends packets whose
/// headers are ours.
pub struct Injector(OwnedFd);

impl Injector {
    /// Opens it in `net`'s hub.
    pub fn open(net: &Net) -> anyhow::Result<Injector> {
        let fd = Net::inside(&net.hub, || {
            // SAFETY: plain socket(2); owned at once.
            let raw = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) }, "raw IPv4 socket")?;
            // SAFETY: `raw` is a new descriptor nobody else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(raw) })
        })?;
        Ok(Injector(fd))
    }

    /// Sends `d`; a full socket buffer is waited out, other errors fail.
    pub fn send(&self, d: &Datagram) -> anyhow::Result<()> {
        let dst = d.dst();
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(dst.ip().octets()) },
            sin_zero: [0; 8],
        };
        loop {
            // SAFETY: packet and address are live and sized as passed.
            let r = unsafe {
                libc::sendto(self.0.as_raw_fd(), d.0.as_ptr().cast(), d.0.len(), 0, (&sa as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
            };
            if r >= 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOBUFS) || e.kind() == std::io::ErrorKind::WouldBlock {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            bail!("sending a {}-byte datagram to {dst}: {e}", d.0.len());
        }
    }
}
