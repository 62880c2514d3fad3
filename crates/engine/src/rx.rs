//! The receive path: validating datagrams, the connection's in-order
//! delivery, and what each packet kind does at its port.

use outboard_wire::{self as wire, AbortWhat, Body, BodyRepr, Packet, RejectReason, Target};

use crate::conn::{RxVerdict, TxRecord};
use crate::engine::{Inbound, OutKind, Sink};
use crate::port::{Admission, Unexpected};
use crate::TokenClass;
use crate::{Completion, Dma, Endpoint, Engine, Instant, NodeId, OpError, PortId};

impl<D: Dma> Engine<D> {
    /// Handles a datagram that arrived from node `from` (the driver resolved
    /// the sender's address to a node; datagrams from unknown addresses
    /// should not reach the engine).
    ///
    /// Anything malformed, from another job, misaddressed or stale is
    /// counted in [`Stats`](crate::Stats) and dropped; it never panics and
    /// never disturbs other traffic.
    pub fn handle_packet(&mut self, now: Instant, from: NodeId, bytes: &[u8]) {
        self.set_now(now);
        self.receive(now, from, bytes);
        self.coll_drain(now);
        self.keepalive_settle();
        self.conns.settle();
        self.debug_check();
    }

    fn receive(&mut self, now: Instant, from: NodeId, bytes: &[u8]) {
        self.work.packets_in += 1;
        self.work.bytes_in += bytes.len() as u64;
        let pkt = match Packet::parse(bytes, &self.mac) {
            Ok(p) => p,
            Err(wire::WireError::BadMac) => {
                self.stats.unauthenticated += 1;
                return;
            }
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        let h = pkt.header;
        if h.kind == wire::Kind::Ack {
            self.work.acks_in += 1;
        }
        if matches!(pkt.body, Body::Coll(_, data) if !data.is_empty()) {
            self.work.coll_data_in += 1;
        }
        if h.dst_node != self.cfg.node.0 || h.src_node != from.0 {
            self.stats.misaddressed += 1;
            return;
        }
        if h.boot < self.cfg.min_peer_boot {
            // From before this job started: a replay of an earlier run.
            self.stats.stale_boot += 1;
            return;
        }
        let ci = self.conn_for(from, now);
        let c = &mut self.conns[ci];
        match c.peer_boot {
            None => c.peer_boot = Some(h.boot),
            Some(b) if h.boot < b => {
                // A replaced incarnation: a late packet or a replay.
                self.stats.stale_boot += 1;
                return;
            }
            Some(b) if h.boot > b => {
                // The peer restarted: its old connection state is void.
                c.peer_boot = Some(h.boot);
                self.peer_failed(ci, now, true);
            }
            Some(_) => {}
        }
        if self.conns[ci].dead {
            return;
        }
        if self.conns[ci].heard_at.replace(now).is_none() {
            // First heard from (or restarted): it may wait on a port that
            // closed before there was anyone to tell (module `port_closed`).
            self.announce_closed_ports_to(ci, now);
        }
        if let Body::NicColl(b) = pkt.body {
            // The collective protocol's own reliability: no sequence
            // number, and its header carries no acknowledgement to take.
            self.work.nic_coll_in += 1;
            self.on_nic_coll(now, from, b);
            return;
        }
        if h.kind.is_sequenced() {
            match self.conns[ci].receive(h.seq, now, &self.cfg) {
                RxVerdict::InOrder => self.process_body(now, from, h.flags, pkt.body),
                RxVerdict::Duplicate => self.stats.duplicates += 1,
                RxVerdict::Ahead => self.stats.out_of_order += 1,
            }
            self.mark_ready(ci);
        }
        let c = &mut self.conns[ci];
        if c.dead {
            return;
        }
        c.on_ack(h.ack, now, &self.cfg);
        if c.can_send(self.cfg.window) {
            self.mark_ready(ci);
        }
        if let Some(upto) = self.conns[ci].confirm(h.ack, h.horizon) {
            self.confirm_upto(ci, upto);
        }
    }

    /// Completes what the records confirmed up to `upto` finish.
    fn confirm_upto(&mut self, ci: usize, upto: wire::Seq) {
        let done: Vec<TxRecord> = self.conns[ci].pop_confirmed(upto).collect();
        self.conns[ci].release_if_idle();
        for rec in done {
            if let TxRecord::Coll { key, attempt } = rec {
                self.on_coll_confirmed(key, attempt);
                continue;
            }
            if let TxRecord::Nicvm { key, attempt } = rec {
                self.nicvm_confirmed(key, attempt);
                continue;
            }
            if let TxRecord::Fragment { key, attempt, offset, len, .. } = rec {
                let Some(op) = self.ops.get(&key) else { continue };
                if op.attempt != attempt || op.retry_at.is_some() {
                    continue;
                }
                if offset + len == op.buf.len {
                    self.finish_op(key);
                }
            }
        }
    }

    fn process_body(&mut self, now: Instant, from: NodeId, flags: u16, body: Body<'_>) {
        match body {
            Body::Ack | Body::Nop => {}
            Body::Data(h, payload) => self.on_data(now, from, h, flags & wire::FLAG_INTERRUPT != 0, payload),
            Body::Reject(r) if r.msg_id & crate::coll::run::COLL_KEY_BIT != 0 => self.on_coll_reject(now, from, r),
            Body::Reject(r) if r.msg_id & crate::nicvm::NICVM_KEY_BIT != 0 && self.nicvm_on_reject(now, from, r) => {}
            Body::Reject(r) => self.on_reject(now, from, r),
            Body::Nicvm(h, payload) => self.on_nicvm(now, from, h, payload),
            Body::Coll(h, payload) => self.on_coll(now, from, h, payload),
            Body::NicColl(_) => unreachable!("taken before the connection"),
            Body::ReadRequest(r) => self.on_read_request(now, from, r),
            Body::ReadResponse(h, payload) => self.on_read_response(from, h, payload),
            Body::PeerFailed(n) => self.on_peer_failed_notice(now, from, n),
            Body::PortClosed(n) => self.on_port_closed_notice(from, n),
            Body::CollResume(r) => self.on_coll_resume(now, from, r),
            Body::AtomicRequest(r) => self.on_atomic_request(now, from, r),
            Body::AtomicReply(r) => self.on_atomic_reply(now, from, r),
            Body::Abort(a) => match a.what {
                AbortWhat::Message => self.drop_inbound((from, a.msg_id)),
                AbortWhat::ReadResponse => {
                    if self.ops.get(&a.msg_id).is_some_and(|o| o.dest.node == from && matches!(o.kind, OutKind::Read { .. })) {
                        self.fail_op(a.msg_id, OpError::PortGone);
                    }
                }
            },
        }
        // Newly received packets may satisfy confirmations waiting on them.
        let ci = self.conn_index[&from];
        if let Some(upto) = self.conns[ci].drain_confirmed() {
            self.confirm_upto(ci, upto);
        }
    }

    /// Queues a refusal of message `msg_id` back to its sender.
    pub(crate) fn reject(&mut self, now: Instant, to: NodeId, port: u8, gen: u32, msg_id: u32, reason: RejectReason) {
        match reason {
            RejectReason::NotReady => self.stats.rejected_not_ready += 1,
            RejectReason::Stale | RejectReason::NoSuchPort => self.stats.rejected_port += 1,
            RejectReason::BadKey | RejectReason::OutOfBounds => self.stats.access_violations += 1,
        }
        let ci = self.conn_for(to, now);
        let body = BodyRepr::Reject(wire::Reject { port, gen, msg_id, reason });
        self.conns[ci].push(TxRecord::Control(body), now);
        self.mark_ready(ci);
    }

    /// Port admission shared by messages and read requests.
    pub(crate) fn admit_port(&self, port: u8, gen: u32) -> Result<(), RejectReason> {
        match self.ports.get(usize::from(port)) {
            None => Err(RejectReason::NoSuchPort),
            Some(p) => match p.admit(gen) {
                Admission::Open => Ok(()),
                Admission::NotYet => Err(RejectReason::NotReady),
                Admission::Stale => Err(RejectReason::Stale),
            },
        }
    }

    fn on_data(&mut self, now: Instant, from: NodeId, h: wire::DataHeader, interrupt: bool, payload: &[u8]) {
        let key = (from, h.msg_id);
        if !self.inbound.contains_key(&key) {
            self.source_seen(from, h.src_port, h.src_gen);
            if h.offset != 0 {
                // The rest of a message whose first fragment was refused.
                return;
            }
            match self.admit_message(from, &h, interrupt) {
                Ok(Some(m)) => {
                    self.inbound.insert(key, m);
                }
                // A placeholder: it only moved the stream on.
                Ok(None) => return,
                Err(reason) => {
                    self.reject(now, from, h.src_port, h.src_gen, h.msg_id, reason);
                    return;
                }
            }
        }
        let Some(m) = self.inbound.get_mut(&key) else { return };
        if h.offset != m.received || h.total_len != m.total {
            // Cannot happen with an honest sender over an in-order
            // connection; refuse to write anything out of place.
            self.stats.malformed += 1;
            return;
        }
        m.received += payload.len() as u32;
        let m = *m;
        let port = m.port;
        match m.sink {
            Sink::Posted(_) if m.announce => {
                // An announcement stays with the engine until it completes
                // the receive (admission bounded its length).
                let off = h.offset as usize;
                let info = &mut self.inbound.get_mut(&key).expect("present").info;
                info[off..off + payload.len()].copy_from_slice(payload);
            }
            Sink::Posted(r) => {
                let room = (r.buf.len as usize).saturating_sub(h.offset as usize);
                let n = payload.len().min(room);
                if n > 0 {
                    if self.dma.write(port, r.buf.addr + u64::from(h.offset), &payload[..n]).is_err() {
                        self.inbound.get_mut(&key).expect("present").fault = true;
                    }
                    self.work.dma_written += n as u64;
                }
            }
            Sink::Rdma { addr } => {
                if !payload.is_empty() {
                    if self.dma.write(port, addr + u64::from(h.offset), payload).is_err() {
                        self.inbound.get_mut(&key).expect("present").fault = true;
                    }
                    self.work.dma_written += payload.len() as u64;
                }
            }
            Sink::Unexpected => {
                let p = &mut self.ports[usize::from(port.0)];
                if let Some(i) = p.find_unexpected(key) {
                    let u = &mut p.unexpected[i];
                    let off = h.offset as usize;
                    u.data[off..off + payload.len()].copy_from_slice(payload);
                    u.received += payload.len() as u32;
                }
            }
        }
        if m.received == m.total {
            self.message_complete(key);
        } else {
            // Until its last fragment, the message waits on its sender.
            self.keepalive_arm(now);
        }
    }

    /// Decides whether the first fragment's message may enter its port, and
    /// where its bytes go. Checks happen before any byte is written, so a
    /// refused message leaves the target untouched.
    fn admit_message(&mut self, from: NodeId, h: &wire::DataHeader, interrupt: bool) -> Result<Option<Inbound>, RejectReason> {
        self.admit_port(h.dst_port, h.dst_gen)?;
        let port = PortId(h.dst_port);
        let src = Endpoint { node: from, port: PortId(h.src_port), gen: h.src_gen };
        let budget = self.cfg.unexpected_bytes;
        let used = self.unexpected_used;
        let p = &mut self.ports[usize::from(h.dst_port)];
        let stream = (from, h.src_port, h.src_gen);
        let expected = p.rx_streams.get(&stream).copied().unwrap_or(0);
        if h.stream_seq != expected {
            // An earlier message of this stream was refused and will be
            // retried first.
            return Err(RejectReason::NotReady);
        }
        // From here on the message takes its stream position, even if it is
        // refused for good (bad key, out of bounds): it will not be retried.
        p.rx_streams.insert(stream, expected.wrapping_add(1));
        let announce = matches!(h.target, Target::Announce { .. });
        if announce && h.total_len > crate::ANNOUNCE_MAX {
            // Refused for good (the stream moved on): no receive takes it.
            return Err(RejectReason::OutOfBounds);
        }
        let (tag, sink) = match h.target {
            Target::Void => return Ok(None),
            Target::Tagged { tag } | Target::Announce { tag } => match p.match_posted(src, tag) {
                Some(i) => (tag, Sink::Posted(p.posted.remove(i).expect("index from position"))),
                None => {
                    let need = h.total_len as usize;
                    if used + need > budget {
                        p.rx_streams.insert(stream, expected);
                        return Err(RejectReason::NotReady);
                    }
                    p.unexpected.push_back(Unexpected {
                        key: (from, h.msg_id),
                        src,
                        tag,
                        announce,
                        data: vec![0; need],
                        received: 0,
                        bound: None,
                        interrupt,
                    });
                    self.unexpected_used += need;
                    self.stats.unexpected += 1;
                    (tag, Sink::Unexpected)
                }
            },
            Target::Rdma { key, offset } => {
                let region = *p.regions.get(&key).ok_or(RejectReason::BadKey)?;
                let end = offset.checked_add(u64::from(h.total_len)).ok_or(RejectReason::OutOfBounds)?;
                if end > u64::from(region.len) {
                    return Err(RejectReason::OutOfBounds);
                }
                (0, Sink::Rdma { addr: region.addr + offset })
            }
        };
        Ok(Some(Inbound { port, src, tag, announce, info: [0; crate::ANNOUNCE_MAX as usize], total: h.total_len, received: 0, sink, fault: false, interrupt }))
    }

    fn message_complete(&mut self, key: (NodeId, u32)) {
        let Some(m) = self.inbound.remove(&key) else { return };
        let gen = self.ports[usize::from(m.port.0)].gen;
        match m.sink {
            Sink::Posted(r) => {
                let result = if m.announce {
                    Ok(Completion::Announced { src: m.src, tag: m.tag, len: m.total, info: m.info })
                } else if m.fault {
                    Err(OpError::DmaFault)
                } else if m.total > r.buf.len {
                    Err(OpError::Truncated { src: m.src, tag: m.tag, len: m.total })
                } else {
                    Ok(Completion::Received { src: m.src, tag: m.tag, len: m.total })
                };
                if m.interrupt {
                    self.marked_delivered(m.port);
                }
                self.complete(m.port, gen, r.op, result, TokenClass::Recv);
            }
            Sink::Unexpected => {
                let p = &mut self.ports[usize::from(m.port.0)];
                if let Some(i) = p.find_unexpected(key) {
                    if p.unexpected[i].bound.is_some() {
                        let u = p.unexpected.remove(i).expect("index from position");
                        self.unexpected_used -= u.data.len();
                        let r = u.bound.expect("checked");
                        self.deliver_buffered_as(m.port, r, u.src, u.tag, &u.data, u.announce, u.interrupt);
                    }
                }
            }
            Sink::Rdma { .. } => {}
        }
    }

    fn on_reject(&mut self, now: Instant, from: NodeId, r: wire::Reject) {
        let Some(op) = self.ops.get_mut(&r.msg_id) else { return };
        if op.dest.node != from || op.port.0 != r.port || op.port_gen != r.gen || op.retry_at.is_some() {
            return;
        }
        let err = match r.reason {
            RejectReason::NotReady => {
                // The retry clock runs only for the head of a stream: a
                // message refused because an earlier one of its stream is
                // still pending is not itself the one waiting.
                let (port, gen, dest) = (op.port, op.port_gen, op.dest);
                let behind_another = self.ops.range(..r.msg_id).any(|(_, o)| {
                    o.port == port
                        && o.port_gen == gen
                        && o.dest == dest
                        && matches!(o.kind, OutKind::Send { .. } | OutKind::Write { .. } | OutKind::Void)
                });
                let op = self.ops.get_mut(&r.msg_id).expect("looked up above");
                if behind_another {
                    op.first_refused = None;
                }
                let since = *op.first_refused.get_or_insert(now);
                op.retry_at = Some(now + self.cfg.retry_interval);
                self.parked.insert(r.msg_id);
                if now.saturating_since(since) >= self.cfg.retry_timeout {
                    if op.kind == OutKind::Void {
                        // Even the placeholder cannot get through: the
                        // port never opened. Give the stream up.
                        self.fail_op(r.msg_id, OpError::NotReadyTimeout);
                    } else {
                        self.give_up(r.msg_id, OpError::NotReadyTimeout);
                    }
                }
                return;
            }
            RejectReason::Stale => OpError::PortGone,
            RejectReason::NoSuchPort => OpError::NoSuchPort,
            RejectReason::BadKey => OpError::BadKey,
            RejectReason::OutOfBounds => OpError::OutOfBounds,
        };
        self.fail_op(r.msg_id, err);
    }

    fn on_read_request(&mut self, now: Instant, from: NodeId, r: wire::ReadRequest) {
        let verdict = self.admit_port(r.dst_port, r.dst_gen).and_then(|()| {
            let p = &self.ports[usize::from(r.dst_port)];
            let region = *p.regions.get(&r.key).ok_or(RejectReason::BadKey)?;
            let end = r.offset.checked_add(u64::from(r.len)).ok_or(RejectReason::OutOfBounds)?;
            if end > u64::from(region.len) {
                return Err(RejectReason::OutOfBounds);
            }
            Ok((region.addr + r.offset, p.gen))
        });
        match verdict {
            Err(reason) => self.reject(now, from, r.src_port, r.src_gen, r.msg_id, reason),
            Ok((addr, gen)) => {
                let requester = Endpoint { node: from, port: PortId(r.src_port), gen: r.src_gen };
                let serve = OutKind::Serve { requester_msg_id: r.msg_id };
                let out = crate::engine::OutOp::new(
                    PortId(r.dst_port),
                    gen,
                    crate::OpId(0),
                    serve,
                    requester,
                    crate::HostBuf { addr, len: r.len },
                );
                self.queue_out(now, out);
            }
        }
    }

    fn on_read_response(&mut self, from: NodeId, h: wire::ReadResponseHeader, payload: &[u8]) {
        let Some(op) = self.ops.get_mut(&h.msg_id) else { return };
        if op.dest.node != from
            || op.port.0 != h.dst_port
            || op.port_gen != h.dst_gen
            || !matches!(op.kind, OutKind::Read { .. })
            || h.total_len != op.buf.len
            || h.offset != op.progress
        {
            self.stats.malformed += 1;
            return;
        }
        op.progress += payload.len() as u32;
        let (port, addr, done) = (op.port, op.buf.addr, op.progress == op.buf.len);
        if !payload.is_empty() {
            self.work.dma_written += payload.len() as u64;
            if self.dma.write(port, addr + u64::from(h.offset), payload).is_err() {
                self.fail_op(h.msg_id, OpError::DmaFault);
                return;
            }
        }
        if done {
            self.finish_op(h.msg_id);
        }
    }
}
