//! Offloaded execution: a collective becomes one engine `Collective`
//! command per chunk of up to [`MAX_COLL_PIECES`] packets (a whole number
//! of elements each), which the engine runs as consecutive one-packet
//! pieces under one command, so the pieces pipeline through the tree for
//! one command's price: a broadcast's piece is forwarded while the next
//! arrives, a reduction's parent combines one piece while its children
//! send the next. All chunks are posted at once and the request finishes
//! when the last one completed; the engine completes a group's
//! collectives in start order, so chunks stay in order and every member
//! splits alike (they must pass equal lengths).
//!
//! A broadcast's root hands the engine no result buffer (its result is its
//! own data: no write back over the bus) and its other members no send
//! buffer (the root's packet replaces their value, the engine never reads
//! it).
//!
//! A chunk the engine refuses for lack of a token waits in the port's
//! backlog and is posted, in order, by a later `progress`.

use outboard_engine::{Command, Completion, GroupId, HostBuf, Reduction, ScheduleId, MAX_COLL_PIECES};

use crate::{CommandError, HostError, Port, PortIo, Request};

/// One engine collective of an offloaded request.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub send: HostBuf,
    pub recv: HostBuf,
    pub req: Option<Request>,
    pub done: bool,
}

/// An offloaded collective at one member.
#[derive(Debug)]
pub(crate) struct OffRun {
    pub group: GroupId,
    pub schedule: ScheduleId,
    pub reduction: Option<Reduction>,
    pub chunks: Vec<Chunk>,
    /// The result known without the engine (a broadcast root's own data).
    pub own: Option<Vec<u8>>,
    /// A barrier on the engines' collective protocol
    /// ([`Command::NicBarrier`]) instead of a `Collective` command.
    pub nic_protocol: bool,
}

const EMPTY: HostBuf = HostBuf { addr: 0, len: 0 };

impl OffRun {
    /// Splits `data` into chunks and allocates their buffers (not posted
    /// yet). `want_result`: whether this member receives the value.
    /// `bcast_root`: for a broadcast, whether this member is its root.
    pub fn new<P: PortIo>(
        port: &mut Port<P>,
        group: GroupId,
        schedule: ScheduleId,
        reduction: Option<Reduction>,
        data: &[u8],
        want_result: bool,
        bcast_root: Option<bool>,
    ) -> Result<OffRun, HostError> {
        let elem = reduction.map_or(1, |r| r.dtype.size());
        let packet = (port.io_ref().coll_max_len() as usize / elem * elem).max(elem);
        let max = packet * MAX_COLL_PIECES as usize;
        let (sends, receives) = match bcast_root {
            Some(true) => (true, false),
            Some(false) => (false, want_result),
            None => (true, want_result),
        };
        let mut chunks = Vec::new();
        let pieces: Vec<&[u8]> = if data.is_empty() {
            vec![&[][..]]
        } else {
            data.chunks(max).collect()
        };
        for piece in pieces {
            let send = if piece.is_empty() || !sends {
                EMPTY
            } else {
                port.buffer_from(piece)?
            };
            let recv = if receives && !piece.is_empty() {
                port.buffer(piece.len() as u32)?
            } else {
                EMPTY
            };
            chunks.push(Chunk {
                send,
                recv,
                req: None,
                done: false,
            });
        }
        Ok(OffRun {
            group,
            schedule,
            reduction,
            chunks,
            own: (bcast_root == Some(true) && want_result).then(|| data.to_vec()),
            nic_protocol: false,
        })
    }

    /// Posts chunk `i`. `Ok(false)`: no send or collective token now, try
    /// later.
    pub fn post<P: PortIo>(&mut self, port: &mut Port<P>, i: usize) -> Result<bool, HostError> {
        let c = &self.chunks[i];
        let (group, schedule, reduction, send, recv) =
            (self.group, self.schedule, self.reduction, c.send, c.recv);
        let nic_protocol = self.nic_protocol;
        match port.start(|op| match nic_protocol {
            true => Command::NicBarrier { op, group, schedule },
            false => Command::Collective {
                op,
                group,
                schedule,
                reduction,
                send,
                recv,
            },
        }) {
            Ok(r) => {
                self.chunks[i].req = Some(r);
                Ok(true)
            }
            Err(HostError::Command(CommandError::NoSendToken | CommandError::NoCollToken)) => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Collects completed chunks. `Some` once all are done (or one failed):
    /// the concatenated result.
    pub fn advance<P: PortIo>(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        let mut failed = None;
        for c in &mut self.chunks {
            if c.done {
                continue;
            }
            let req = c.req?;
            match port.take(req) {
                None => return None,
                Some(Ok(Completion::Collective { .. })) => c.done = true,
                Some(Ok(other)) => unreachable!("collective completed as {other:?}"),
                Some(Err(e)) => {
                    c.done = true;
                    failed.get_or_insert(e);
                }
            }
        }
        let mut out = self.own.take().unwrap_or_default();
        for c in &self.chunks {
            if c.recv.len > 0 && failed.is_none() {
                match port.read_buffer(c.recv) {
                    Ok(v) => out.extend_from_slice(&v),
                    Err(e) => failed = Some(e),
                }
            }
        }
        for c in std::mem::take(&mut self.chunks) {
            for b in [c.send, c.recv] {
                if b.len > 0 {
                    if let Err(e) = port.free(b) {
                        failed.get_or_insert(e);
                    }
                }
            }
        }
        Some(match failed {
            Some(e) => Err(e),
            None => Ok(out),
        })
    }
}
