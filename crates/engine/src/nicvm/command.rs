//! The port commands: load, purge, list, and handing a packet to a module.

use outboard_wire::{self as wire, NicvmType};

use super::{ModuleId, ModuleReport, NicvmError, MODULE_REPORT_LEN};
use crate::coll::GroupId;
use crate::{CommandError, Completion, Dma, Engine, Generation, HostBuf, Instant, OpError, OpId, PortId, TokenClass};

/// What `Command::NicvmLoad` carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadRequest {
    pub module: ModuleId,
    pub name: HostBuf,
    pub code: HostBuf,
    pub acc_len: u32,
    pub persist: bool,
    pub replace: bool,
}

/// What `Command::NicvmSend` carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendRequest {
    pub module: ModuleId,
    pub generation: u32,
    pub group: GroupId,
    pub root: u32,
    pub dest: u32,
    pub buf: HostBuf,
}

impl<D: Dma> Engine<D> {
    /// The most payload a module packet carries.
    pub(crate) fn nicvm_max_payload(&self) -> usize {
        self.cfg.mtu - wire::HEADER_LEN - wire::NICVM_FIXED_LEN
    }

    fn nicvm_read(&mut self, port: PortId, buf: HostBuf, max: usize) -> Result<Vec<u8>, NicvmError> {
        if buf.len as usize > max {
            return Err(NicvmError::TooLong);
        }
        let mut v = vec![0; buf.len as usize];
        if buf.len > 0 {
            self.dma.read(port, buf.addr, &mut v).map_err(|_| NicvmError::DmaFault)?;
            self.work.dma_read += u64::from(buf.len);
        }
        Ok(v)
    }

    /// `Command::NicvmLoad`.
    pub(crate) fn nicvm_load(&mut self, port: PortId, gen: Generation, r: LoadRequest) -> Result<Completion, OpError> {
        let name = self.nicvm_read(port, r.name, 64).map_err(|_| NicvmError::BadName)?;
        let max_code = self.cfg.max_message as usize;
        let code = self.nicvm_read(port, r.code, max_code)?;
        let limits = self.nicvm.limits;
        let job = self.nicvm.jobs.entry(self.cfg.job_key).or_default();
        let generation = job.load(&limits, r.module, &name, &code, r.acc_len, (port, gen), r.persist, r.replace)?;
        Ok(Completion::NicvmLoaded { generation })
    }

    /// `Command::NicvmPurge`.
    pub(crate) fn nicvm_purge(&mut self, module: ModuleId) -> Result<Completion, OpError> {
        let job = self.nicvm.jobs.get_mut(&self.cfg.job_key).ok_or(NicvmError::NotFound)?;
        job.purge(module)?;
        Ok(Completion::NicvmPurged)
    }

    /// `Command::NicvmList`.
    pub(crate) fn nicvm_list(&mut self, port: PortId, buf: HostBuf) -> Result<Completion, OpError> {
        let reports = self.nicvm_reports();
        let fit = (buf.len as usize / MODULE_REPORT_LEN).min(reports.len());
        let mut bytes = Vec::with_capacity(fit * MODULE_REPORT_LEN);
        for r in &reports[..fit] {
            bytes.extend_from_slice(&r.encode());
        }
        if !bytes.is_empty() {
            self.dma.write(port, buf.addr, &bytes).map_err(|_| OpError::DmaFault)?;
            self.work.dma_written += bytes.len() as u64;
        }
        Ok(Completion::NicvmListed { count: reports.len() as u32 })
    }

    /// `Command::NicvmSend`: the send token is taken here and returned with
    /// the completion.
    pub(crate) fn nicvm_send_command(
        &mut self,
        now: Instant,
        port: PortId,
        gen: Generation,
        op: OpId,
        r: SendRequest,
    ) -> Result<(), CommandError> {
        let p = &mut self.ports[usize::from(port.0)];
        if p.send_tokens == 0 {
            return Err(CommandError::NoSendToken);
        }
        p.send_tokens -= 1;
        match self.nicvm_send_inner(now, port, gen, op, r) {
            Ok(None) => {}
            Ok(Some(c)) => self.complete(port, gen, op, Ok(c), TokenClass::Send),
            Err(e) => self.complete(port, gen, op, Err(e), TokenClass::Send),
        }
        Ok(())
    }

    /// `None`: the packet is on its way and completes on confirmation.
    fn nicvm_send_inner(&mut self, now: Instant, port: PortId, gen: Generation, op: OpId, r: SendRequest) -> Result<Option<Completion>, OpError> {
        let max = self.nicvm_max_payload();
        if r.buf.len as usize > max {
            return Err(NicvmError::TooLong.into());
        }
        let (rank, size) = self.coll_group_rank_size(port, r.group).ok_or(NicvmError::NoGroup)?;
        if r.dest >= size || r.root >= size {
            return Err(NicvmError::BadRank.into());
        }
        if r.dest == rank {
            // The local engine runs the module: it needs the bytes now.
            let data = self.nicvm_read(port, r.buf, max)?;
            let me = crate::Endpoint { node: self.cfg.node, port, gen };
            let ctx = super::invoke::Context { port, gen, group: r.group, rank, size, root: r.root, source: rank, src: me };
            let failed = self.nicvm_run(now, ctx, r.module, r.generation, &data, false)?;
            return Ok(Some(Completion::NicvmSent { failed }));
        }
        let dest = self.coll_group_member(port, r.group, r.dest).ok_or(NicvmError::BadRank)?;
        if self.conn_index.get(&dest.node).is_some_and(|&ci| self.conns[ci].dead) {
            return Err(OpError::PeerUnreachable(dest.node));
        }
        let hdr = super::send::Route { module: r.module, generation: r.generation, group: r.group, root: r.root, src_rank: rank };
        let empty: std::sync::Arc<[u8]> = std::sync::Arc::from(&[][..]);
        self.nicvm_enqueue(now, port, gen, dest, hdr, NicvmType::NicData, 0, empty, Some((r.buf, op)));
        Ok(None)
    }

    /// The loaded modules of this engine's job, with their counters.
    pub fn nicvm_reports(&self) -> Vec<ModuleReport> {
        self.nicvm
            .jobs
            .get(&self.cfg.job_key)
            .map(|j| j.modules.iter().map(|(id, s)| ModuleReport::of(*id, s)).collect())
            .unwrap_or_default()
    }

    /// Whether this engine's job has a module loaded (so an engine call may
    /// run VM instructions): a driver that times module work looks at the
    /// clock only then.
    pub fn nicvm_active(&self) -> bool {
        self.nicvm.jobs.get(&self.cfg.job_key).is_some_and(|j| !j.modules.is_empty())
    }

    /// Sets the bounds of NICVM work (fuel per invocation, module send
    /// tokens and queue, registry sizes).
    pub fn set_nicvm_limits(&mut self, limits: super::NicvmLimits) {
        self.nicvm.limits = limits;
    }

    /// Module sends under way (queued or on a connection).
    pub fn nicvm_sends_pending(&self) -> usize {
        self.nicvm.out.len()
    }
}
