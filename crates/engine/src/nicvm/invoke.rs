//! Running a module for a packet: admission (port, group, module,
//! generation, room to deliver), the interpreter with a fuel budget, and
//! the packet's fate. A module's effects are collected while it runs and
//! carried out only if it finishes: one that traps sends nothing.

use std::sync::Arc;

use outboard_nicvm::{builtins, NicServices, PacketFate, PacketType, Payload, ServiceError, TrapKind};
use outboard_wire::{self as wire, NicvmType, RejectReason};

use super::send::Route;
use super::{nicvm_tag, ModuleId, NicvmError, NICVM_TAG_FAILED, NICVM_TAG_NEW};
use crate::coll::GroupId;
use crate::port::Unexpected;
use crate::{Dma, Endpoint, Engine, Generation, Instant, NodeId, PortId};

/// Where and for whom a module runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context {
    pub port: PortId,
    pub gen: Generation,
    pub group: GroupId,
    pub rank: u32,
    pub size: u32,
    pub root: u32,
    /// `mpi_get_source()`.
    pub source: u32,
    /// The endpoint deliveries name as their sender.
    pub src: Endpoint,
}

/// What a module asked for, carried out if it finishes.
#[derive(Debug)]
enum Effect {
    Send { ptype: PacketType, dest: u32, new: Option<Vec<u8>> },
    Deliver(Vec<u8>),
}

/// The engine's [`NicServices`] for one invocation.
struct Services {
    ctx: Context,
    effects: Vec<Effect>,
    /// Sends the queue still takes.
    send_room: usize,
    /// Bytes of new deliveries the host side still takes.
    deliver_room: usize,
}

impl NicServices for Services {
    fn rank(&self) -> u32 {
        self.ctx.rank
    }
    fn size(&self) -> u32 {
        self.ctx.size
    }
    fn root(&self) -> u32 {
        self.ctx.root
    }
    fn source(&self) -> u32 {
        self.ctx.source
    }
    fn send(&mut self, ptype: PacketType, dest: u32, payload: Payload<'_>) -> Result<(), ServiceError> {
        if self.send_room == 0 {
            return Err(ServiceError::QueueFull);
        }
        self.send_room -= 1;
        let new = match payload {
            Payload::Current => None,
            Payload::New(b) => Some(b.to_vec()),
        };
        self.effects.push(Effect::Send { ptype, dest, new });
        Ok(())
    }
    fn deliver(&mut self, bytes: &[u8]) -> Result<(), ServiceError> {
        if bytes.len() > self.deliver_room {
            return Err(ServiceError::QueueFull);
        }
        self.deliver_room -= bytes.len();
        self.effects.push(Effect::Deliver(bytes.to_vec()));
        Ok(())
    }
}

impl<D: Dma> Engine<D> {
    /// Bytes the port can take as deliveries now: engine memory for
    /// unexpected messages, plus one packet if a receive for the module's
    /// deliveries is posted.
    fn nicvm_room(&self, port: PortId, module: ModuleId) -> usize {
        let free = self.cfg.unexpected_bytes.saturating_sub(self.unexpected_used);
        let want = nicvm_tag(module, 0);
        let posted = self.ports[usize::from(port.0)].posted.iter().any(|r| (want ^ r.matching.tag) & r.matching.tag_mask & !0xff == 0);
        free + if posted { self.nicvm_max_payload() } else { 0 }
    }

    /// A module packet arrived from `from`.
    pub(crate) fn on_nicvm(&mut self, now: Instant, from: NodeId, h: wire::NicvmHeader, payload: &[u8]) {
        let refuse = |e: &mut Self, reason| e.reject(now, from, h.src_port, h.src_gen, h.msg_id, reason);
        if let Err(reason) = self.admit_port(h.dst_port, h.dst_gen) {
            refuse(self, reason);
            return;
        }
        let port = PortId(h.dst_port);
        let src = Endpoint { node: from, port: PortId(h.src_port), gen: h.src_gen };
        let module = ModuleId(h.module);
        if self.nicvm_room(port, module) < payload.len() {
            refuse(self, RejectReason::NotReady);
            return;
        }
        if h.ptype == NicvmType::HostData {
            let flags = if h.failed() { NICVM_TAG_FAILED } else { 0 };
            self.nicvm_deliver(port, src, nicvm_tag(module, flags), payload);
            return;
        }
        let group = GroupId(h.group);
        let Some((rank, size)) = self.coll_group_rank_size(port, group) else {
            // The group is not installed here yet: the sender retries.
            refuse(self, RejectReason::NotReady);
            return;
        };
        if h.root >= size || h.src_rank >= size {
            self.stats.malformed += 1;
            return;
        }
        let loaded = self.nicvm.jobs.get(&self.cfg.job_key).and_then(|j| j.modules.get(&module)).map(|s| (s.generation, s.acc.len()));
        match loaded {
            // Not loaded here yet (a collective load still on its way), or
            // a replacement still to come: the sender retries.
            None if !self.nicvm_was_loaded(module, h.generation) => {
                refuse(self, RejectReason::NotReady);
                return;
            }
            Some((g, _)) if g < h.generation => {
                refuse(self, RejectReason::NotReady);
                return;
            }
            Some((_, acc)) if self.nicvm_room(port, module) < payload.len() + acc => {
                refuse(self, RejectReason::NotReady);
                return;
            }
            _ => {}
        }
        let ctx = Context { port, gen: h.dst_gen, group, rank, size, root: h.root, source: h.src_rank, src };
        // Stale generations and purged modules take the default path inside.
        let _ = self.nicvm_run(now, ctx, module, h.generation, payload, true);
    }

    /// Whether generation `generation` of `module` was loaded here and is
    /// gone (purged or replaced): its packets take the default path.
    fn nicvm_was_loaded(&self, module: ModuleId, generation: u32) -> bool {
        self.nicvm.jobs.get(&self.cfg.job_key).and_then(|j| j.last_gen.get(&module)).is_some_and(|&g| g >= generation)
    }

    /// Runs `module` for `payload` in `ctx` and carries out what it asked
    /// for; on any failure the packet goes to the host flagged failed.
    /// Returns whether it failed. `remote`: the packet came from the wire
    /// (room was checked by the caller).
    pub(crate) fn nicvm_run(
        &mut self,
        now: Instant,
        ctx: Context,
        module: ModuleId,
        generation: u32,
        payload: &[u8],
        remote: bool,
    ) -> Result<bool, NicvmError> {
        let acc_len = self.nicvm.jobs.get(&self.cfg.job_key).and_then(|j| j.modules.get(&module)).map_or(0, |s| s.acc.len());
        let room = self.nicvm_room(ctx.port, module);
        if !remote && room < payload.len() + acc_len {
            return Err(NicvmError::Full);
        }
        let fuel = self.nicvm.limits.fuel;
        let send_room = self.nicvm.limits.max_queued.saturating_sub(self.nicvm.queue.len());
        let mut svc = Services { ctx, effects: Vec::new(), send_room, deliver_room: room.saturating_sub(payload.len()) };
        let job = self.nicvm.jobs.get_mut(&self.cfg.job_key);
        let slot = job.and_then(|j| j.modules.get_mut(&module));
        let outcome = match slot {
            Some(s) if s.generation == generation => {
                s.counters.invocations += 1;
                let r = s.instance.invoke(&mut svc, payload, &mut s.acc, fuel);
                let charged = match &r {
                    Ok(o) => o.instructions,
                    Err(e) => e.instructions,
                };
                s.counters.instructions += charged;
                self.work.vm_instructions += charged;
                self.work.nicvm_invocations += 1;
                self.stats.nicvm_invocations += 1;
                self.stats.vm_instructions += charged;
                match r {
                    Ok(o) => Some(o),
                    Err(e) => {
                        match e.kind {
                            TrapKind::OutOfFuel => s.counters.out_of_fuel += 1,
                            TrapKind::BadRank { .. } | TrapKind::BadPacketType(_) => s.counters.bad_sends += 1,
                            _ => s.counters.traps += 1,
                        }
                        None
                    }
                }
            }
            Some(s) => {
                s.counters.stale += 1;
                None
            }
            None => None,
        };
        let Some(o) = outcome else {
            self.stats.nicvm_errors += 1;
            self.nicvm_deliver(ctx.port, ctx.src, nicvm_tag(module, NICVM_TAG_FAILED), payload);
            return Ok(true);
        };
        let route = Route { module, generation, group: ctx.group, root: ctx.root, src_rank: ctx.rank };
        let mut current: Option<Arc<[u8]>> = None;
        for effect in svc.effects {
            match effect {
                Effect::Send { ptype, dest, new } => {
                    let Some(to) = self.coll_group_member(ctx.port, ctx.group, dest) else { continue };
                    let bytes = match new {
                        Some(b) => Arc::from(b),
                        None => current.get_or_insert_with(|| Arc::from(payload)).clone(),
                    };
                    let ptype = match ptype {
                        PacketType::NicData => NicvmType::NicData,
                        PacketType::HostData => NicvmType::HostData,
                    };
                    self.nicvm_enqueue(now, ctx.port, ctx.gen, to, route, ptype, 0, bytes, None);
                    if remote {
                        self.work.coll_relays_out += 1;
                    }
                }
                Effect::Deliver(bytes) => self.nicvm_deliver(ctx.port, ctx.src, nicvm_tag(module, NICVM_TAG_NEW), &bytes),
            }
        }
        if o.fate == PacketFate::Deliver {
            let flags = if o.result == builtins::NICVM_RESULT_FAILURE { NICVM_TAG_FAILED } else { 0 };
            self.nicvm_deliver(ctx.port, ctx.src, nicvm_tag(module, flags), payload);
        }
        Ok(false)
    }

    /// Hands bytes to the port as a message with `tag` from `src`: into a
    /// matching posted receive, or held as an unexpected message.
    pub(crate) fn nicvm_deliver(&mut self, port: PortId, src: Endpoint, tag: u64, bytes: &[u8]) {
        let p = &mut self.ports[usize::from(port.0)];
        if let Some(i) = p.match_posted(src, tag) {
            let recv = p.posted.remove(i).expect("index from position");
            self.deliver_buffered(port, recv, src, tag, bytes);
            return;
        }
        let key = (NodeId(u32::MAX), self.nicvm.alloc_key());
        p.unexpected.push_back(Unexpected { key, src, tag, announce: false, data: bytes.to_vec(), received: bytes.len() as u32, bound: None, interrupt: false });
        self.unexpected_used += bytes.len();
        self.stats.unexpected += 1;
    }
}
