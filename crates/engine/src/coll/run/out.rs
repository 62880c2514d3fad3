//! Outgoing collective packets, kept (payload included) until their
//! receiver confirms them, and the per-port bound on the bytes they hold
//! ([`EngineConfig::coll_send_bytes`](crate::EngineConfig::coll_send_bytes)):
//! a collective whose step would send past it waits, and runs on once
//! confirmations free room ([`Engine::coll_drain`]).

use std::sync::{Arc, OnceLock};

use outboard_wire as wire;

use super::super::GroupId;
use super::collective::PendingSends;
use super::COLL_KEY_BIT;
use crate::conn::TxRecord;
use crate::{Dma, Endpoint, Engine, Generation, HostBuf, Instant, OpError, PortId};

/// Bookkeeping charged per unconfirmed outgoing packet against
/// `EngineConfig::coll_send_bytes` (about the size of a [`CollOut`]).
pub(super) const OUT_OVERHEAD: usize = 96;

/// A piece's value still in host memory: the engine reads it when its
/// first packet is transmitted (not at command time), so a root's piece
/// i+1 is read while piece i is on the wire. Every copy of the piece shares
/// the cell, so the host buffer is read once.
#[derive(Debug, Clone)]
pub(crate) struct Lazy {
    pub buf: HostBuf,
    pub cell: Arc<OnceLock<Arc<[u8]>>>,
}

impl Lazy {
    /// The value of `buf`, to be read when first sent.
    pub(super) fn new(buf: HostBuf) -> Lazy {
        Lazy { buf, cell: Arc::new(OnceLock::new()) }
    }
}

/// An outgoing packet's payload: in engine memory, or still in the host's
/// (see [`Lazy`]).
#[derive(Debug, Clone)]
pub(crate) enum OutData {
    Ready(Arc<[u8]>),
    Host(Lazy),
}

impl OutData {
    fn len(&self) -> usize {
        match self {
            OutData::Ready(d) => d.len(),
            OutData::Host(l) => l.buf.len as usize,
        }
    }
}

/// An outgoing collective packet, kept (payload included: it lives in
/// engine memory, not the host's) until its receiver confirms it.
#[derive(Debug, Clone)]
pub(crate) struct CollOut {
    pub port: PortId,
    pub port_gen: Generation,
    pub group: GroupId,
    pub epoch: u32,
    pub src_rank: u32,
    pub round: u16,
    pub schedule: u16,
    /// Not the first packet of its step: the same value the step already
    /// sent to another rank (a NIC re-sends a prepared packet with another
    /// destination).
    pub copy: bool,
    pub dest: Endpoint,
    pub data: OutData,
    pub attempt: u32,
    pub retry_at: Option<Instant>,
    pub first_refused: Option<Instant>,
}

impl CollOut {
    /// What it holds against its port's send bound.
    pub(super) fn cost(&self) -> usize {
        self.data.len() + OUT_OVERHEAD
    }
}

impl<D: Dma> Engine<D> {
    pub(super) fn coll_port_full(&self, port: PortId) -> bool {
        self.coll.out_bytes.get(&port).copied().unwrap_or(0) >= self.cfg.coll_send_bytes
    }

    /// Runs on the collectives whose sends waited for room, for every
    /// port that has room again. Runs at the end of an engine input, never
    /// inside the handling of a packet, so it cannot interleave with the
    /// bookkeeping that freed the room.
    pub(crate) fn coll_drain(&mut self, now: Instant) {
        // Advancing can free room again (a send to a dead peer fails at
        // once), so look until nothing changes.
        while std::mem::take(&mut self.coll.drain_due) {
            let ready: Vec<(PortId, GroupId)> =
                self.coll.blocked.iter().copied().filter(|(p, _)| !self.coll_port_full(*p)).collect();
            for (port, group) in ready {
                self.coll.blocked.remove(&(port, group));
                self.coll_advance(now, port, group);
            }
        }
        self.coll_resume_refused(now);
    }

    /// Turns the packets a group's steps send into outgoing packets, each
    /// charged to the port, and queues their first attempts.
    pub(super) fn coll_send(&mut self, now: Instant, port: PortId, group: GroupId, sends: Vec<PendingSends>) {
        if sends.is_empty() {
            return;
        }
        let Some(g) = self.coll.groups.get(&(port, group)) else { return };
        let (gen, rank, members) = (g.gen, g.rank, g.members.clone()); // shared, not copied
        for PendingSends { epoch, schedule, data, to, relay } in sends {
            if relay {
                self.work.coll_relays_out += to.len() as u64;
            }
            for (i, (dst_rank, round)) in to.into_iter().enumerate() {
                let key = self.coll_alloc_key();
                let out = CollOut {
                    port,
                    port_gen: gen,
                    group,
                    epoch,
                    src_rank: rank,
                    round,
                    schedule,
                    copy: i > 0,
                    dest: members.get(dst_rank).expect("schedules are validated against the group size"),
                    data: data.clone(),
                    attempt: 0,
                    retry_at: None,
                    first_refused: None,
                };
                *self.coll.out_bytes.entry(port).or_default() += out.cost();
                self.coll.out.insert(key, out);
                self.coll_launch(now, key);
            }
        }
    }

    /// Queues a (new) attempt of collective packet `key`.
    pub(super) fn coll_launch(&mut self, now: Instant, key: u32) {
        let Some(o) = self.coll.out.get_mut(&key) else { return };
        o.attempt = o.attempt.wrapping_add(1);
        o.retry_at = None;
        let (dest, attempt) = (o.dest, o.attempt);
        let node = dest.node;
        if self.coll_member_is_closed(dest) {
            // Its receiver left: nothing would take the packet.
            self.coll_fail_packet(key, OpError::SourceClosed(dest));
            return;
        }
        let ci = self.conn_for(node, now);
        if self.conns[ci].dead {
            self.coll_fail_packet(key, OpError::PeerUnreachable(node));
            return;
        }
        self.conns[ci].push(TxRecord::Coll { key, attempt }, now);
        self.mark_ready(ci);
    }

    fn coll_alloc_key(&mut self) -> u32 {
        loop {
            let k = COLL_KEY_BIT | (self.coll.next_key & !COLL_KEY_BIT);
            self.coll.next_key = self.coll.next_key.wrapping_add(1);
            if !self.coll.out.contains_key(&k) {
                return k;
            }
        }
    }

    /// Reads the payload of packet `key` from host memory if it is still
    /// there (its first copy going out): see [`Lazy`]. A fault fails its
    /// collective. Called by the transmit path just before it builds the
    /// packet, so the read is charged with the packet it goes out in.
    pub(crate) fn coll_fill(&mut self, _now: Instant, key: u32) {
        let Some(o) = self.coll.out.get(&key) else { return };
        let OutData::Host(l) = &o.data else { return };
        if l.cell.get().is_some() {
            return;
        }
        let (port, group, buf, cell) = (o.port, o.group, l.buf, l.cell.clone());
        let mut v = vec![0; buf.len as usize];
        if self.dma.read(port, buf.addr, &mut v).is_err() {
            self.coll_fail_packet(key, OpError::DmaFault);
            return;
        }
        self.work.dma_read += u64::from(buf.len);
        let _first = cell.set(Arc::from(v));
        self.coll_complete_front(port, group);
    }

    /// Builds the body of collective packet `key`, if it is still live.
    pub(crate) fn coll_body(&self, key: u32, attempt: u32) -> Option<(wire::BodyRepr, Arc<[u8]>, bool)> {
        let o = self.coll.out.get(&key).filter(|o| o.attempt == attempt && o.retry_at.is_none())?;
        let data = match &o.data {
            OutData::Ready(d) => d.clone(),
            OutData::Host(l) => l.cell.get()?.clone(),
        };
        let h = wire::CollHeader {
            src_port: o.port.0,
            dst_port: o.dest.port.0,
            src_gen: o.port_gen,
            dst_gen: o.dest.gen,
            msg_id: key,
            group: o.group.0,
            epoch: o.epoch,
            round: o.round,
            src_rank: o.src_rank,
            total_len: o.data.len() as u32,
            offset: 0,
            schedule: o.schedule,
        };
        Some((wire::BodyRepr::Coll(h), data, o.copy))
    }

    /// A collective packet's record was confirmed by its receiver: it is
    /// delivered and need not be kept.
    pub(crate) fn on_coll_confirmed(&mut self, key: u32, attempt: u32) {
        let live = self.coll.out.get(&key).is_some_and(|o| o.attempt == attempt && o.retry_at.is_none());
        if live {
            self.coll_out_remove(key);
        }
    }

    /// Removes outgoing packet `key`, returning its room to its port.
    pub(super) fn coll_out_remove(&mut self, key: u32) -> Option<CollOut> {
        let o = self.coll.out.remove(&key)?;
        self.coll.parked.remove(&key);
        self.coll_out_freed(o.port, o.cost());
        Some(o)
    }

    /// Keeps the outgoing packets `keep` accepts.
    pub(super) fn coll_out_retain(&mut self, mut keep: impl FnMut(&CollOut) -> bool) {
        let mut freed: Vec<(PortId, usize)> = Vec::new();
        self.coll.out.retain(|_, o| {
            let k = keep(o);
            if !k {
                freed.push((o.port, o.cost()));
            }
            k
        });
        self.coll.parked.retain(|k| self.coll.out.contains_key(k));
        for (port, bytes) in freed {
            self.coll_out_freed(port, bytes);
        }
    }

    fn coll_out_freed(&mut self, port: PortId, bytes: usize) {
        if let Some(b) = self.coll.out_bytes.get_mut(&port) {
            debug_assert!(*b >= bytes, "port {port:?} frees {bytes} collective send bytes of {b}");
            *b -= bytes;
            if *b == 0 {
                self.coll.out_bytes.remove(&port);
            }
        }
        self.coll.drain_due = true;
    }

    /// Bytes port `port`'s unconfirmed outgoing collective packets hold
    /// (payload plus bookkeeping), as bounded by
    /// [`EngineConfig::coll_send_bytes`](crate::EngineConfig::coll_send_bytes).
    pub fn coll_send_bytes(&self, port: PortId) -> usize {
        self.coll.out_bytes.get(&port).copied().unwrap_or(0)
    }
}
