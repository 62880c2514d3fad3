//! The write-based rendezvous: clear-to-send, then RDMA write.
//!
//! The alternative to the read protocol of the parent module (MVAPICH's
//! "RPUT", UCX's `put_zcopy`), selected per port by
//! [`RendezvousProtocol::Write`]. The sender announces as before, but the
//! announcement names no memory of its own (only the length and a cookie):
//! nothing is registered at the sender. The receive that takes it
//! registers its own buffer (through the same bounded registration cache the
//! read path uses), posts the receive of the finish, and answers with a
//! *clear-to-send* under a library tag naming that buffer's key, offset and
//! how many bytes fit. The sender then RDMA-writes that many bytes straight
//! from its buffer into the receiver's (one engine command: the engine
//! streams the fragments through its reliable window, pipelined) and, right
//! behind it, sends a finish. The connection delivers in order and a
//! message takes its stream position only after every earlier one, so the
//! finish reaches the receiver only after the last written byte is in place,
//! the same fence InfiniBand's reliable connection gives a send after an
//! RDMA write. The receive completes on the finish; the send completes when
//! the write and the finish are acknowledged (its buffer is free again).
//!
//! Against the read protocol: as many one-way trips before the data (an
//! announcement, then a clear-to-send where the read has a read request),
//! but the middle one is taken by the sending *library*, where the read
//! request is served by the sending engine alone: the data leaves only
//! when the sending process next calls into the library (a sender that
//! computes, or sleeps, holds the transfer up). The receiver registers
//! memory instead of the sender; the data moves as the sender's own
//! stream, so the target needs no read support, and the sender learns of
//! completion from acknowledgements, not from a message of the receiver.
//!
//! Failure: the sender's clear-to-send receive names the receiver and the
//! receiver's finish receive names the sender, so the keepalive probes the
//! peer and a dead one fails the request (`PeerUnreachable`), as on the
//! read path. A write can otherwise fail only at a bad key, which the
//! receiver rules out by holding its registration until the finish
//! arrives.

use outboard_engine::{Command, Completion, Endpoint, HostBuf, OpError, OpId, RecvMatch, LIBRARY_TAG_PREFIX};

use super::{LibOp, RecvSlot, SendTo, ANNOUNCE_LEN};
use crate::{HostError, Port, PortIo, Request};

/// How a port moves messages above its eager threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RendezvousProtocol {
    /// The receiver pulls the data by RDMA read and answers with a finish.
    #[default]
    Read,
    /// The receiver answers with a clear-to-send naming its buffer; the
    /// sender RDMA-writes the data, then a finish.
    Write,
}

impl std::str::FromStr for RendezvousProtocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" | "get" => Ok(RendezvousProtocol::Read),
            "write" | "put" => Ok(RendezvousProtocol::Write),
            other => Err(format!("{other:?} is neither \"read\" nor \"write\"")),
        }
    }
}

/// Magic of a write-protocol announcement ("RTW1"): length and cookie only.
const RTW_MAGIC: u32 = 0x5254_5731;
/// Magic of a clear-to-send ("CTS1").
const CTS_MAGIC: u32 = 0x4354_5331;
/// Bytes of a clear-to-send: magic, bytes to write, key, offset.
const CTS_LEN: u32 = 24;
/// Bytes of a finish: a status word.
const FIN_LEN: u32 = 8;
/// Library tags (kind bytes distinct from the read path's finish, so that
/// two ports sending each other by both protocols never confuse them).
const CTS_TAG: u64 = LIBRARY_TAG_PREFIX | 0x00F2_0000_0000_0000;
const FIN_TAG: u64 = LIBRARY_TAG_PREFIX | 0x00F3_0000_0000_0000;
const STATUS_OK: u64 = 0;

pub(super) fn encode_rtw(len: u32, cookie: u32) -> [u8; ANNOUNCE_LEN as usize] {
    let mut b = [0u8; ANNOUNCE_LEN as usize];
    b[0..4].copy_from_slice(&RTW_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&len.to_le_bytes());
    b[8..12].copy_from_slice(&cookie.to_le_bytes());
    b
}

/// A write-protocol announcement's (length, cookie), if it is one.
pub(super) fn decode_rtw(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < ANNOUNCE_LEN as usize || b[0..4] != RTW_MAGIC.to_le_bytes() {
        return None;
    }
    let w = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Some((w(4), w(8)))
}

fn encode_cts(n: u32, key: u64, offset: u64) -> [u8; CTS_LEN as usize] {
    let mut b = [0u8; CTS_LEN as usize];
    b[0..4].copy_from_slice(&CTS_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&n.to_le_bytes());
    b[8..16].copy_from_slice(&key.to_le_bytes());
    b[16..24].copy_from_slice(&offset.to_le_bytes());
    b
}

/// A clear-to-send's (bytes to write, key, offset), if well formed.
fn decode_cts(b: &[u8]) -> Option<(u32, u64, u64)> {
    if b.len() < CTS_LEN as usize || b[0..4] != CTS_MAGIC.to_le_bytes() {
        return None;
    }
    let n = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    let key = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
    let offset = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
    Some((n, key, offset))
}

/// What an engine operation of the write protocol is for.
#[derive(Debug, Clone, Copy)]
pub(super) enum WOp {
    /// Sender: the announcement of this send.
    Announce(OpId),
    /// Sender: the clear-to-send receive of this send.
    Cts(OpId),
    /// Sender: the RDMA write of this send.
    Write(OpId),
    /// Sender: the finish of this send.
    Finish(OpId),
    /// Receiver: registering the buffer of this receive.
    Register(OpId),
    /// Receiver: the finish receive of this receive.
    FinishRecv(OpId),
    /// Receiver: a clear-to-send being sent; free its buffer when done.
    CtsSent(HostBuf),
}

impl WOp {
    /// Whether it holds a send token the application's commands may wait
    /// for (it completes without the application doing anything).
    pub(super) fn holds_send_token(&self) -> bool {
        matches!(self, WOp::Write(_) | WOp::Finish(_) | WOp::CtsSent(_))
    }
}

/// A write-protocol send under way.
#[derive(Debug)]
struct WSend {
    to: SendTo,
    rts_buf: HostBuf,
    /// The clear-to-send receive's buffer; `None` once handed to a
    /// withdrawn receive to free.
    cts_buf: Option<HostBuf>,
    fin_buf: Option<HostBuf>,
    rts_op: Option<OpId>,
    cts_op: Option<OpId>,
    /// Engine operations of it still to complete.
    outstanding: u32,
    /// The first failure.
    error: Option<OpError>,
}

/// A receive that took a write-protocol announcement.
#[derive(Debug, Clone, Copy)]
struct WRecv {
    src: Endpoint,
    tag: u64,
    /// The announced length (may exceed what fits: truncation).
    len: u32,
    /// What the receive's buffer holds.
    buf: HostBuf,
    cookie: u32,
    fin_buf: HostBuf,
    /// The registration the sender writes into, once known.
    key: Option<u64>,
}

/// The write protocol's state of one port.
#[derive(Debug, Default)]
pub(super) struct WriteState {
    sends: std::collections::HashMap<OpId, WSend>,
    recvs: std::collections::HashMap<OpId, WRecv>,
}

impl<P: PortIo> Port<P> {
    /// Starts a write-protocol send: announces the length; the data goes
    /// when the clear-to-send comes.
    pub(super) fn start_write_send(&mut self, dest: Endpoint, tag: u64, buf: HostBuf) -> Result<Request, HostError> {
        let max = self.io.max_message();
        if buf.len > max {
            return Err(outboard_engine::CommandError::TooLong { len: u64::from(buf.len), max }.into());
        }
        let cts_buf = self.io.alloc(CTS_LEN)?;
        let rts_buf = match self.io.alloc(ANNOUNCE_LEN) {
            Ok(b) => b,
            Err(e) => {
                let _ = self.io.free(cts_buf);
                return Err(e.into());
            }
        };
        let user = self.fresh_op();
        let cookie = self.rndv.next_cookie;
        self.rndv.next_cookie = cookie.wrapping_add(1);
        if let Err(e) = self.io.write(rts_buf.addr, &encode_rtw(buf.len, cookie)) {
            let _ = self.io.free(cts_buf);
            let _ = self.io.free(rts_buf);
            return Err(e.into());
        }
        let to = SendTo { user, dest, tag, buf, cookie };
        let s = WSend { to, rts_buf, cts_buf: Some(cts_buf), fin_buf: None, rts_op: None, cts_op: None, outstanding: 2, error: None };
        self.rndv.w.sends.insert(user, s);
        self.pending.insert(user, None);
        self.rndv.stats.sends += 1;
        // The clear-to-send receive first: posted before the announcement
        // can even leave.
        let m = RecvMatch::from(dest.node, dest.port, CTS_TAG | u64::from(cookie));
        let cts_op = self.post_lib_or_queue(Command::Recv { op: OpId(0), matching: m, buf: cts_buf }, LibOp::W(WOp::Cts(user)));
        let rts_op = self.post_lib_or_queue(Command::Announce { op: OpId(0), dest, tag, buf: rts_buf }, LibOp::W(WOp::Announce(user)));
        if let Some(s) = self.rndv.w.sends.get_mut(&user) {
            s.cts_op = Some(cts_op);
            s.rts_op = Some(rts_op);
        }
        Ok(Request(user))
    }

    /// Cancels a write-protocol send whose announcement was not taken;
    /// `None` if `req` is not one.
    pub(super) fn write_cancel(&mut self, req: Request) -> Option<Result<(), HostError>> {
        let Some(rts_op) = self.rndv.w.sends.get(&req.0)?.rts_op else {
            return Some(Err(OpError::NotCancellable.into()));
        };
        let r = match self.start(|op| Command::Cancel { op, target: rts_op }) {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        Some(self.wait(r).map(|_| ()))
    }

    /// Whether the write-protocol send `req` still needs this library
    /// before its receiver can finish: its clear-to-send has not been
    /// acted on (the data leaves only when the sending library writes it),
    /// or its write or finish waits for a token.
    pub(super) fn write_send_needs_host(&self, req: Request) -> bool {
        let Some(s) = self.rndv.w.sends.get(&req.0) else { return false };
        let queued = self.rndv.retry.iter().any(|(_, l)| matches!(l, LibOp::W(WOp::Write(u) | WOp::Finish(u)) if *u == req.0));
        (s.fin_buf.is_none() && s.error.is_none()) || queued
    }

    /// Whether `op` is a receive that answered a write-protocol
    /// announcement (its buffer is promised to the sender).
    pub(super) fn write_receiving(&self, op: OpId) -> bool {
        self.rndv.w.recvs.contains_key(&op)
    }

    /// A watched receive took a write-protocol announcement: register its
    /// buffer, then answer with a clear-to-send.
    pub(super) fn write_announced(&mut self, user: OpId, slot: RecvSlot, src: Endpoint, tag: u64, len: u32, cookie: u32) {
        let fin_buf = match self.io.alloc(FIN_LEN) {
            Ok(b) => b,
            // The sender learns of it by its clear-to-send receive failing
            // when this port closes.
            Err(_) => return self.finish_user(user, Err(OpError::DmaFault)),
        };
        let n = len.min(slot.buf.len);
        let buf = HostBuf { addr: slot.buf.addr, len: n };
        let r = WRecv { src, tag, len, buf, cookie, fin_buf, key: None };
        self.rndv.w.recvs.insert(user, r);
        if n == 0 {
            return self.clear_to_send(user, 0, 0);
        }
        match self.rndv.cache.acquire(buf) {
            Some((key, offset)) => {
                self.rndv.stats.cache_hits += 1;
                self.clear_to_send(user, key, offset);
            }
            None => {
                self.rndv.stats.cache_misses += 1;
                self.post_lib_or_queue(Command::Register { op: OpId(0), buf }, LibOp::W(WOp::Register(user)));
            }
        }
    }

    /// The receive's buffer is registered under `key` (0 when nothing is
    /// to be written): post the finish receive, then send the clear-to-send.
    fn clear_to_send(&mut self, user: OpId, key: u64, offset: u64) {
        let Some(r) = self.rndv.w.recvs.get_mut(&user) else { return };
        if r.buf.len > 0 {
            r.key = Some(key);
        }
        let r = *r;
        let cts = match self.io.alloc(CTS_LEN) {
            Ok(b) => b,
            Err(_) => return self.write_recv_failed(user, OpError::DmaFault),
        };
        if self.io.write(cts.addr, &encode_cts(r.buf.len, key, offset)).is_err() {
            let _ = self.io.free(cts);
            return self.write_recv_failed(user, OpError::DmaFault);
        }
        let m = RecvMatch::from(r.src.node, r.src.port, FIN_TAG | u64::from(r.cookie));
        self.post_lib_or_queue(Command::Recv { op: OpId(0), matching: m, buf: r.fin_buf }, LibOp::W(WOp::FinishRecv(user)));
        let tag = CTS_TAG | u64::from(r.cookie);
        self.post_lib_or_queue(Command::Send { op: OpId(0), dest: r.src, tag, buf: cts }, LibOp::W(WOp::CtsSent(cts)));
    }

    /// A receive of the write protocol ends with `result`: release what it
    /// holds.
    fn write_recv_done(&mut self, user: OpId, result: Result<Completion, OpError>) {
        let Some(r) = self.rndv.w.recvs.remove(&user) else { return };
        let _ = self.io.free(r.fin_buf);
        if let Some(key) = r.key {
            self.release_key(key);
        }
        let out = match result {
            Ok(_) => {
                self.rndv.stats.receives += 1;
                if r.len > r.buf.len {
                    Err(OpError::Truncated { src: r.src, tag: r.tag, len: r.len })
                } else {
                    Ok(Completion::Received { src: r.src, tag: r.tag, len: r.len })
                }
            }
            Err(e) => Err(e),
        };
        self.finish_user(user, out);
    }

    fn write_recv_failed(&mut self, user: OpId, err: OpError) {
        self.write_recv_done(user, Err(err));
    }

    /// The clear-to-send came: write the data, then the finish, back to
    /// back (the connection's order makes the finish a fence).
    fn cleared(&mut self, user: OpId) {
        let Some(s) = self.rndv.w.sends.get(&user) else { return };
        let (to, cts_buf) = (s.to, s.cts_buf);
        let mut raw = [0u8; CTS_LEN as usize];
        let parsed = cts_buf.and_then(|b| self.io.read(b.addr, &mut raw).ok()).and_then(|()| decode_cts(&raw));
        let Some((n, key, offset)) = parsed.filter(|&(n, _, _)| n <= to.buf.len) else {
            // The sender's half of a broken exchange: nothing is written,
            // and the receiver learns of it by its finish receive failing.
            return self.send_part_done(user, Err(OpError::BadAnnouncement));
        };
        let fin = match self.io.alloc(FIN_LEN) {
            Ok(b) => b,
            Err(_) => return self.send_part_done(user, Err(OpError::DmaFault)),
        };
        let _ = self.io.write(fin.addr, &STATUS_OK.to_le_bytes());
        let s = self.rndv.w.sends.get_mut(&user).expect("present");
        s.fin_buf = Some(fin);
        s.outstanding += if n > 0 { 2 } else { 1 };
        if n > 0 {
            let buf = HostBuf { addr: to.buf.addr, len: n };
            self.rndv.stats.bytes_written += u64::from(n);
            self.post_lib_or_queue(Command::RdmaWrite { op: OpId(0), dest: to.dest, key, offset, buf }, LibOp::W(WOp::Write(user)));
        }
        let tag = FIN_TAG | u64::from(to.cookie);
        self.post_lib_or_queue(Command::Send { op: OpId(0), dest: to.dest, tag, buf: fin }, LibOp::W(WOp::Finish(user)));
        // The clear-to-send receive is done.
        self.send_part_done(user, Ok(Completion::Sent));
    }

    /// One engine operation of a write-protocol send is in; the send
    /// completes when all are.
    fn send_part_done(&mut self, user: OpId, result: Result<Completion, OpError>) {
        let Some(s) = self.rndv.w.sends.get_mut(&user) else { return };
        s.outstanding = s.outstanding.saturating_sub(1);
        if let Err(e) = result {
            s.error.get_or_insert(e);
        }
        if s.outstanding > 0 {
            return;
        }
        let s = self.rndv.w.sends.remove(&user).expect("present");
        for b in [s.cts_buf, s.fin_buf].into_iter().flatten() {
            let _ = self.io.free(b);
        }
        self.finish_user(user, s.error.map_or(Ok(Completion::Sent), Err));
    }

    /// An engine operation of the write protocol completed.
    pub(super) fn write_event(&mut self, what: WOp, result: Result<Completion, OpError>) {
        match what {
            WOp::Announce(user) => {
                let Some(s) = self.rndv.w.sends.get_mut(&user) else { return };
                let _ = self.io.free(s.rts_buf);
                let withdraw = if result.is_err() { s.cts_op.zip(s.cts_buf.take()) } else { None };
                self.send_part_done(user, result);
                if let Some((cts_op, cts_buf)) = withdraw {
                    // No receive took the announcement, so no clear-to-send
                    // will come: withdraw its receive, which frees its
                    // buffer when it completes.
                    self.rndv.lib.insert(cts_op, LibOp::Discard(Some(cts_buf)));
                    self.post_lib_or_queue(Command::Cancel { op: OpId(0), target: cts_op }, LibOp::Discard(None));
                    self.send_part_done(user, Err(OpError::Cancelled));
                }
            }
            WOp::Cts(user) => match result {
                Ok(Completion::Received { .. }) => self.cleared(user),
                Ok(_) => self.send_part_done(user, Err(OpError::BadAnnouncement)),
                Err(e) => self.send_part_done(user, Err(e)),
            },
            WOp::Write(user) | WOp::Finish(user) => self.send_part_done(user, result),
            WOp::Register(user) => match result {
                Ok(Completion::Registered { key }) => {
                    if let Some(r) = self.rndv.w.recvs.get(&user) {
                        self.rndv.cache.insert(r.buf, key, false);
                        self.clear_to_send(user, key, 0);
                    } else {
                        self.post_lib_or_queue(Command::Deregister { op: OpId(0), key }, LibOp::Discard(None));
                    }
                }
                Ok(other) => unreachable!("register completed as {other:?}"),
                Err(e) => self.write_recv_failed(user, e),
            },
            WOp::FinishRecv(user) => {
                let ok = matches!(result, Ok(Completion::Received { .. }));
                let status = self.rndv.w.recvs.get(&user).and_then(|r| {
                    let mut w = [0u8; FIN_LEN as usize];
                    self.io.read(r.fin_buf.addr, &mut w).ok().map(|()| u64::from_le_bytes(w))
                });
                match result {
                    Err(e) => self.write_recv_done(user, Err(e)),
                    Ok(_) if ok && status == Some(STATUS_OK) => self.write_recv_done(user, Ok(Completion::Read)),
                    Ok(_) => self.write_recv_done(user, Err(OpError::BadAnnouncement)),
                }
            }
            WOp::CtsSent(b) => {
                let _ = self.io.free(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_round_trip_and_reject_garbage() {
        let a = encode_rtw(1 << 20, 9);
        assert_eq!(decode_rtw(&a), Some((1 << 20, 9)));
        assert_eq!(super::super::decode_announce(&a), None, "the read path does not take a write announcement");
        let read = super::super::encode_announce(10, 1, 2, 3);
        assert_eq!(decode_rtw(&read), None, "nor the write path a read one");
        let c = encode_cts(4096, 0xABCD, 64);
        assert_eq!(decode_cts(&c), Some((4096, 0xABCD, 64)));
        let mut bad = c;
        bad[1] ^= 1;
        assert_eq!(decode_cts(&bad), None);
        assert_eq!(decode_cts(&c[..23]), None);
        assert_ne!(CTS_TAG, super::super::FINISH_TAG);
        assert_ne!(FIN_TAG, super::super::FINISH_TAG);
    }

    #[test]
    fn protocols_parse_from_their_names() {
        assert_eq!("write".parse(), Ok(RendezvousProtocol::Write));
        assert_eq!(" Read ".parse(), Ok(RendezvousProtocol::Read));
        assert!("rget".parse::<RendezvousProtocol>().is_err());
    }
}
