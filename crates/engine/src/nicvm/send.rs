//! The modules' own sends (the paper's NICVM send descriptors, 4.3): each
//! goes over the engine's reliable connection to its destination, holding
//! one of the engine's module send tokens until the receiver confirms it;
//! sends beyond the tokens wait in a bounded queue. The ports' send tokens
//! are never touched, so module traffic cannot starve the host's sends. A
//! refusal (port not open, group or module not there yet, no room) is
//! retried like a refused message; one refused past the retry timeout, or
//! for a peer that died, is given up and counted on its module.

use std::sync::Arc;

use outboard_wire::{self as wire, BodyRepr, NicvmType, RejectReason};

use super::ModuleId;
use crate::conn::TxRecord;
use crate::coll::GroupId;
use crate::{Completion, Dma, Endpoint, Engine, Generation, HostBuf, Instant, NodeId, OpError, OpId, PortId, TokenClass};

/// What a module packet names besides its ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub module: ModuleId,
    pub generation: u32,
    pub group: GroupId,
    pub root: u32,
    pub src_rank: u32,
}

/// A module packet's fixed part, its bytes held by the engine, or where in
/// host memory they are to be read from.
pub(crate) type ModulePacket = (BodyRepr, Arc<[u8]>, Option<(PortId, HostBuf)>);

/// A module send, from queueing until its receiver confirmed it.
#[derive(Debug, Clone)]
pub(crate) struct NicvmOut {
    pub src_port: PortId,
    pub src_gen: Generation,
    pub dest: Endpoint,
    pub route: Route,
    pub ptype: NicvmType,
    pub flags: u8,
    pub payload: Arc<[u8]>,
    /// A host's packet for a module on another engine (`Command::NicvmSend`):
    /// its bytes are read from host memory per transmission, like a
    /// message's, and its command completes when the receiver confirms it.
    /// It holds its host's send token, not a module one.
    pub host: Option<(HostBuf, OpId)>,
    pub attempt: u32,
    pub has_token: bool,
    pub retry_at: Option<Instant>,
    pub first_refused: Option<Instant>,
}

impl<D: Dma> Engine<D> {
    /// Queues a module send and starts what the tokens allow; with `host`,
    /// a host's packet read from its memory at transmission (see
    /// [`NicvmOut::host`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn nicvm_enqueue(
        &mut self,
        now: Instant,
        src_port: PortId,
        src_gen: Generation,
        dest: Endpoint,
        route: Route,
        ptype: NicvmType,
        flags: u8,
        payload: Arc<[u8]>,
        host: Option<(HostBuf, OpId)>,
    ) {
        let key = self.nicvm.alloc_key();
        let out = NicvmOut {
            src_port,
            src_gen,
            dest,
            route,
            ptype,
            flags,
            payload,
            host,
            attempt: 0,
            has_token: false,
            retry_at: None,
            first_refused: None,
        };
        let direct = out.host.is_some();
        self.nicvm.out.insert(key, out);
        if direct {
            self.keepalive_arm(now);
            self.nicvm_launch(now, key);
            return;
        }
        self.nicvm.queue.push_back(key);
        self.nicvm_pump(now);
    }

    /// Starts queued sends while module send tokens are free.
    fn nicvm_pump(&mut self, now: Instant) {
        while self.nicvm.in_flight < self.nicvm.limits.send_tokens {
            let Some(key) = self.nicvm.queue.pop_front() else { return };
            let Some(o) = self.nicvm.out.get_mut(&key) else { continue };
            o.has_token = true;
            self.nicvm.in_flight += 1;
            self.keepalive_arm(now);
            self.nicvm_launch(now, key);
        }
    }

    /// Puts (a new attempt of) send `key` on its connection.
    fn nicvm_launch(&mut self, now: Instant, key: u32) {
        let Some(o) = self.nicvm.out.get_mut(&key) else { return };
        o.attempt = o.attempt.wrapping_add(1);
        o.retry_at = None;
        let (node, attempt) = (o.dest.node, o.attempt);
        let ci = self.conn_for(node, now);
        if self.conns[ci].dead {
            self.nicvm_give_up(now, key);
            return;
        }
        self.conns[ci].push(TxRecord::Nicvm { key, attempt }, now);
        self.mark_ready(ci);
    }

    /// Ends send `key` without success: counted on its module.
    fn nicvm_give_up(&mut self, now: Instant, key: u32) {
        let Some(o) = self.nicvm.out.remove(&key) else { return };
        if let Some(s) = self.nicvm.jobs.get_mut(&self.cfg.job_key).and_then(|j| j.modules.get_mut(&o.route.module)) {
            s.counters.send_failures += 1;
        }
        self.stats.nicvm_errors += 1;
        self.nicvm_release(now, &o, Err(OpError::Nicvm(super::NicvmError::NotDelivered)));
    }

    /// Frees what send `o` held; a host's packet completes its command.
    fn nicvm_release(&mut self, now: Instant, o: &NicvmOut, result: Result<Completion, OpError>) {
        if let Some((_, op)) = o.host {
            self.complete(o.src_port, o.src_gen, op, result, TokenClass::Send);
        }
        if o.has_token {
            self.nicvm.in_flight -= 1;
            self.nicvm_pump(now);
        }
    }

    /// Builds the datagram of record (`key`, `attempt`); a `Nop` keeps the
    /// sequence number when that attempt is gone.
    pub(crate) fn nicvm_body(&self, key: u32, attempt: u32) -> Option<ModulePacket> {
        let o = self.nicvm.out.get(&key).filter(|o| o.attempt == attempt && o.retry_at.is_none())?;
        let h = wire::NicvmHeader {
            src_port: o.src_port.0,
            dst_port: o.dest.port.0,
            ptype: o.ptype,
            flags: o.flags,
            src_gen: o.src_gen,
            dst_gen: o.dest.gen,
            msg_id: key,
            module: o.route.module.0,
            generation: o.route.generation,
            group: o.route.group.0,
            root: o.route.root,
            src_rank: o.route.src_rank,
        };
        Some((BodyRepr::Nicvm(h), o.payload.clone(), o.host.map(|(buf, _)| (o.src_port, buf))))
    }

    /// The receiver confirmed record (`key`, `attempt`): the send is done.
    pub(crate) fn nicvm_confirmed(&mut self, key: u32, attempt: u32) {
        let live = self.nicvm.out.get(&key).is_some_and(|o| o.attempt == attempt && o.retry_at.is_none());
        if !live {
            return;
        }
        let o = self.nicvm.out.remove(&key).expect("checked");
        let now = self.now;
        self.nicvm_release(now, &o, Ok(Completion::NicvmSent { failed: false }));
    }

    /// A refusal of one of the module sends, if `r` is one (else `false`).
    pub(crate) fn nicvm_on_reject(&mut self, now: Instant, from: NodeId, r: wire::Reject) -> bool {
        let Some(o) = self.nicvm.out.get_mut(&r.msg_id) else { return false };
        if o.dest.node != from || o.src_port.0 != r.port || o.src_gen != r.gen {
            return false;
        }
        if o.retry_at.is_some() {
            return true;
        }
        if r.reason == RejectReason::NotReady {
            let since = *o.first_refused.get_or_insert(now);
            if now.saturating_since(since) < self.cfg.retry_timeout {
                o.retry_at = Some(now + self.cfg.retry_interval);
                return true;
            }
        }
        self.nicvm_give_up(now, r.msg_id);
        true
    }

    /// Resends refused module sends whose retry time came.
    pub(crate) fn nicvm_retry_due(&mut self, now: Instant) {
        let due: Vec<u32> = self.nicvm.out.iter().filter(|(_, o)| o.retry_at.is_some_and(|t| t <= now)).map(|(k, _)| *k).collect();
        for key in due {
            self.stats.retries += 1;
            self.nicvm_launch(now, key);
        }
    }

    /// A peer died or restarted: module sends to it are given up.
    pub(crate) fn nicvm_peer_failed(&mut self, node: NodeId) {
        let now = self.now;
        let doomed: Vec<u32> = self.nicvm.out.iter().filter(|(_, o)| o.dest.node == node).map(|(k, _)| *k).collect();
        for key in doomed {
            self.nicvm.queue.retain(|k| *k != key);
            self.nicvm_give_up(now, key);
        }
    }

    /// A port closed: the module sends it made are dropped, and the modules
    /// it loaded are purged unless persistent (all of the job's, when it was
    /// the job's last open port).
    pub(crate) fn nicvm_port_closed(&mut self, now: Instant, port: PortId, gen: Generation) {
        let doomed: Vec<u32> =
            self.nicvm.out.iter().filter(|(_, o)| o.src_port == port && o.src_gen == gen).map(|(k, _)| *k).collect();
        for key in doomed {
            self.nicvm.queue.retain(|k| *k != key);
            if let Some(o) = self.nicvm.out.remove(&key) {
                // (Its port is closed: no event goes out.)
                self.nicvm_release(now, &o, Err(OpError::PortGone));
            }
        }
        let last = !self.ports.iter().any(|p| p.open);
        if let Some(j) = self.nicvm.jobs.get_mut(&self.cfg.job_key) {
            j.port_closed((port, gen), last);
        }
    }
}
