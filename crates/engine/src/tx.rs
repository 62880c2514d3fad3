//! The transmit path: turning queued records into datagrams.

use outboard_wire::{self as wire, BodyRepr, Header, Kind, Target};

use crate::conn::TxRecord;
use crate::engine::OutKind;
use crate::{Dma, Engine, Instant, MultiCopy, OpError, Transmit};

impl<D: Dma> Engine<D> {
    /// Writes the next datagram to send into `buf` and says where it goes.
    ///
    /// Call until it returns `None` after every input. `buf` must hold at
    /// least `config().mtu` bytes. Connections take turns, one datagram
    /// each, so one busy peer cannot starve the others; acknowledgements
    /// ride on data where there is data and go alone otherwise.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        assert!(buf.len() >= self.cfg.mtu, "transmit buffer shorter than the MTU");
        self.set_now(now);
        // What the previous call sent moved its connection's deadline.
        self.conns.settle();
        // The collective protocol's packets bypass the connections.
        if let Some(t) = self.nic_coll_transmit(buf) {
            return Some(t);
        }
        while let Some(&ci) = self.ready.front() {
            let window = self.cfg.window;
            let c = &self.conns[ci];
            let out = if c.can_send(window) {
                let (seq, rec) = c.next_record().expect("can_send implies a record");
                let len = self.build(ci, seq, rec, buf);
                let c = &mut self.conns[ci];
                if c.mark_sent(now, &self.cfg) {
                    self.stats.retransmits += 1;
                }
                c.acked();
                Some(len)
            } else if c.ack_needed && !c.dead {
                let len = self.build_ack(ci, buf);
                self.work.acks_out += 1;
                self.conns[ci].acked();
                Some(len)
            } else {
                None
            };
            self.ready.pop_front();
            let c = &mut self.conns[ci];
            if c.can_send(window) || (c.ack_needed && !c.dead) {
                self.ready.push_back(ci);
            } else {
                c.queued = false;
            }
            if let Some(len) = out {
                self.work.packets_out += 1;
                self.work.bytes_out += len as u64;
                return Some(Transmit { dst: self.conns[ci].peer, len });
            }
        }
        None
    }

    fn header(&self, ci: usize, kind: Kind, seq: wire::Seq) -> Header {
        let c = &self.conns[ci];
        Header {
            kind,
            flags: 0,
            src_node: self.cfg.node.0,
            dst_node: c.peer.0,
            boot: self.cfg.boot,
            seq,
            ack: c.rcv_nxt,
            horizon: c.next_seq,
        }
    }

    fn build_ack(&mut self, ci: usize, buf: &mut [u8]) -> usize {
        let h = self.header(ci, Kind::Ack, wire::Seq(0));
        let off = wire::emit_prefix(&h, &BodyRepr::Ack, 0, buf).expect("buffer checked against the MTU");
        wire::seal(&mut buf[..off], &self.mac);
        off
    }

    fn build_control(&mut self, ci: usize, seq: wire::Seq, body: BodyRepr, buf: &mut [u8]) -> usize {
        let h = self.header(ci, body.kind(), seq);
        let off = wire::emit_prefix(&h, &body, 0, buf).expect("buffer checked against the MTU");
        wire::seal(&mut buf[..off], &self.mac);
        off
    }

    fn build_coll(&mut self, ci: usize, seq: wire::Seq, key: u32, attempt: u32, buf: &mut [u8]) -> usize {
        let now = self.now;
        self.coll_fill(now, key);
        let Some((body, data, copy)) = self.coll_body(key, attempt) else {
            return self.build_control(ci, seq, BodyRepr::Nop, buf);
        };
        let h = self.header(ci, body.kind(), seq);
        let off = wire::emit_prefix(&h, &body, data.len(), buf).expect("contribution sized to the MTU");
        let end = off + data.len();
        buf[off..end].copy_from_slice(&data);
        self.work.payload_out += data.len() as u64;
        if copy {
            self.work.coll_copies_out += 1;
        }
        wire::seal(&mut buf[..end], &self.mac);
        end
    }

    fn build_nicvm(&mut self, ci: usize, seq: wire::Seq, key: u32, attempt: u32, buf: &mut [u8]) -> usize {
        let Some((body, data, host)) = self.nicvm_body(key, attempt) else {
            return self.build_control(ci, seq, BodyRepr::Nop, buf);
        };
        let len = host.map_or(data.len(), |(_, b)| b.len as usize);
        let h = self.header(ci, body.kind(), seq);
        let off = wire::emit_prefix(&h, &body, len, buf).expect("module packets sized to the MTU");
        let end = off + len;
        match host {
            // A host's packet is read from its memory, like a message.
            Some((port, b)) if len > 0 => {
                if self.dma.read(port, b.addr, &mut buf[off..end]).is_err() {
                    buf[off..end].fill(0);
                }
                self.work.dma_read += len as u64;
            }
            Some(_) => {}
            None => buf[off..end].copy_from_slice(&data),
        }
        self.work.payload_out += len as u64;
        wire::seal(&mut buf[..end], &self.mac);
        end
    }

    /// Builds the datagram for record `rec` numbered `seq`.
    fn build(&mut self, ci: usize, seq: wire::Seq, rec: TxRecord, buf: &mut [u8]) -> usize {
        let (key, attempt, offset, len, abort) = match rec {
            TxRecord::Control(body) => return self.build_control(ci, seq, body, buf),
            TxRecord::Fragment { key, attempt, offset, len, abort } => (key, attempt, offset, len, abort),
            TxRecord::Coll { key, attempt } => return self.build_coll(ci, seq, key, attempt, buf),
            TxRecord::Nicvm { key, attempt } => return self.build_nicvm(ci, seq, key, attempt, buf),
        };
        let live = self.ops.get(&key).filter(|o| o.attempt == attempt && o.retry_at.is_none());
        let Some(op) = live else {
            // The operation was cancelled, failed, or is being retried as a
            // new attempt: tell the receiver to drop what it has of it.
            return self.build_control(ci, seq, BodyRepr::Abort(abort), buf);
        };
        let data = |total_len: u32, offset: u32, target: Target| {
            BodyRepr::Data(wire::DataHeader {
                src_port: op.port.0,
                dst_port: op.dest.port.0,
                src_gen: op.port_gen,
                dst_gen: op.dest.gen,
                msg_id: key,
                stream_seq: op.stream_seq,
                total_len,
                offset,
                target,
            })
        };
        let body = match op.kind {
            OutKind::Send { tag, announce: false } => data(op.buf.len, offset, Target::Tagged { tag }),
            OutKind::Send { tag, announce: true } => data(op.buf.len, offset, Target::Announce { tag }),
            OutKind::Write { key: rkey, offset: roff } => data(op.buf.len, offset, Target::Rdma { key: rkey, offset: roff }),
            OutKind::Void => data(0, 0, Target::Void),
            OutKind::Serve { requester_msg_id } => BodyRepr::ReadResponse(wire::ReadResponseHeader {
                dst_port: op.dest.port.0,
                dst_gen: op.dest.gen,
                msg_id: requester_msg_id,
                total_len: op.buf.len,
                offset,
            }),
            OutKind::Read { .. } => unreachable!("reads queue a control record, not fragments"),
        };
        let (port, payload, src) = (op.port, op.buf, op.buf.addr + u64::from(offset));
        // A void placeholder carries none of the payload.
        let of_payload = matches!(op.kind, OutKind::Send { .. } | OutKind::Write { .. });
        let shared = op.shared.clone();
        let marked = op.interrupt;
        let mut h = self.header(ci, body.kind(), seq);
        if marked {
            h.flags |= wire::FLAG_INTERRUPT;
        }
        let off = wire::emit_prefix(&h, &body, len as usize, buf).expect("fragment sized to the MTU");
        let end = off + len as usize;
        if let Some(data) = shared {
            // Multi-send: the payload is already in engine memory.
            buf[off..end].copy_from_slice(&data[offset as usize..(offset + len) as usize]);
            self.work.payload_out += u64::from(len);
            if of_payload {
                self.work.multi_copy = Some(MultiCopy { port, buf: payload, end: offset + len });
            }
            wire::seal(&mut buf[..end], &self.mac);
            return end;
        }
        if len > 0 && self.dma.read(port, src, &mut buf[off..end]).is_err() {
            let is_stream = matches!(self.ops.get(&key).map(|o| o.kind), Some(OutKind::Send { .. } | OutKind::Write { .. }));
            if is_stream && offset == 0 {
                // The receiver never saw this message: keep its stream
                // position with a void placeholder so later messages are
                // not held back.
                self.give_up(key, OpError::DmaFault);
                let now = self.now;
                self.launch(now, key);
            } else {
                self.fail_op(key, OpError::DmaFault);
            }
            return self.build_control(ci, seq, BodyRepr::Abort(abort), buf);
        }
        self.work.dma_read += u64::from(len);
        self.work.payload_out += u64::from(len);
        wire::seal(&mut buf[..end], &self.mac);
        end
    }
}
