//! NIC-assisted broadcast (dissertation 2.2, Figure 2.4(b)): every host
//! on the tree hands each piece of the message to its NIC **once**, with
//! one multi-send to all its children, instead of one send per child.
//!
//! The root multi-sends its data; an intermediate host, when a piece
//! arrives from its parent, re-sends that same buffer (no copy) with one
//! multi-send to its children; a leaf only receives. Long messages are cut
//! into chunks of `chunk` bytes that travel as separate messages, so an
//! intermediate host forwards chunk `i` while chunk `i + 1` is still on the
//! wire (the dissertation's packet-wise pipelining); with one chunk for the
//! whole message a host forwards only once it has all of it (2.5's "without
//! pipelining").
//!
//! As with [`super::hostbased`], the host does the forwarding, so it
//! happens only while the application is inside the library
//! ([`crate::Port::progress`]). A member that posts late loses nothing: the
//! pieces wait in its engine's unexpected store, as for any point-to-point
//! message, until its receives match them.
//!
//! Tags come from [`super::hostbased::tag`] with the NIC-assisted half of
//! the epoch space (bit 23 of the epoch set) and the chunk index as the
//! round, so they never match a host-based collective's messages.

use std::collections::VecDeque;

use outboard_engine::{
    CollError, Command, Completion, Endpoint, GroupId, HostBuf, MemberList, RecvMatch,
};

use super::hostbased::{nic_tag, MAX_ROUNDS};
use super::{CollectiveError, Tree};
use crate::{CommandError, HostError, Port, PortIo, Request};

/// How many bytes more a point-to-point data packet's header takes than a
/// collective packet's (the engine's `DATA_FIXED_LEN - COLL_FIXED_LEN`):
/// [`packet_payload`] derives the one from the other, and a test counts
/// the packets to catch a header change.
const DATA_OVER_COLL_HEADER: u32 = 2;

/// The payload of one point-to-point packet for this port's engines: the
/// default piece of a pipelined NIC-assisted broadcast, so each piece is
/// one packet (the dissertation's packet-wise pipelining).
pub(crate) fn packet_payload<P: PortIo>(io: &P) -> u32 {
    io.coll_max_len()
        .saturating_sub(DATA_OVER_COLL_HEADER)
        .max(1)
}

/// Receives one NIC-assisted broadcast keeps posted at a time; later
/// pieces wait in the engine's unexpected store until one completes.
const RECV_WINDOW: u32 = 64;
/// Receives all NIC-assisted broadcasts of a port keep posted together:
/// half the engine's default 256 receive tokens. The rest stays for
/// host-based steps and the application, so broadcasts that wait for data
/// from a member still busy with an earlier collective can never hold the
/// receive tokens that earlier collective needs.
const RECV_SHARE: u32 = 128;
/// Multi-sends one NIC-assisted broadcast keeps posted at a time.
const SEND_WINDOW: u32 = 16;
/// Multi-sends all NIC-assisted broadcasts of a port keep posted together:
/// half the engine's default 64 send tokens, for the same reason (a
/// multi-send to a member whose unexpected store is full completes only
/// once that member's host takes data).
const SEND_SHARE: u32 = 32;

/// One NIC-assisted broadcast at one member.
#[derive(Debug)]
pub(crate) struct NicRun {
    group: GroupId,
    epoch: u32,
    parent: Option<Endpoint>,
    /// The encoded child list the engine reads for every multi-send
    /// (`None` at a leaf).
    dests: Option<HostBuf>,
    /// The whole message: the root's data, or where the pieces land.
    buf: HostBuf,
    /// Length of every chunk but possibly the last.
    chunk: u32,
    chunks: u32,
    /// Receives posted so far (chunks `0..recvs_posted`).
    recvs_posted: u32,
    /// Receives posted and not yet completed: (chunk, request).
    recvs: VecDeque<(u32, Request)>,
    received: u32,
    /// Chunks held and not yet multi-sent to the children, in order.
    to_forward: VecDeque<u32>,
    /// Multi-sends posted and not yet completed.
    sends: Vec<Request>,
}

/// Whether a refusal only means "try again later".
fn busy(e: &HostError) -> bool {
    matches!(
        e,
        HostError::Command(CommandError::NoSendToken | CommandError::NoRecvToken)
    )
}

impl NicRun {
    /// Sets up `rank`'s part of a broadcast of `data` (the root's; others
    /// pass a slice of the same length) down `tree` in pieces of `chunk`
    /// bytes (0 is taken as 1). Nothing is posted yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new<P: PortIo>(
        port: &mut Port<P>,
        group: GroupId,
        epoch: u32,
        rank: u32,
        members: &MemberList,
        tree: &Tree,
        chunk: u32,
        data: &[u8],
    ) -> Result<NicRun, HostError> {
        let len = u32::try_from(data.len()).map_err(|_| {
            CollectiveError::Engine(CollError::Malformed("message longer than 4 GiB"))
        })?;
        let chunk = chunk.max(1);
        let chunks = len.div_ceil(chunk).max(1);
        if chunks > MAX_ROUNDS {
            return Err(CollectiveError::TooManyChunks {
                chunks,
                max: MAX_ROUNDS,
            }
            .into());
        }
        let parent = tree.parent(rank).and_then(|p| members.get(p));
        let kids: Vec<Endpoint> = tree
            .send_order(rank)
            .into_iter()
            .filter_map(|c| members.get(c))
            .collect();
        let buf = if parent.is_none() {
            port.buffer_from(data)?
        } else {
            port.buffer(len)?
        };
        let dests = if kids.is_empty() {
            None
        } else {
            match port.buffer_from(&MemberList::from_endpoints(kids.iter().copied()).encode()) {
                Ok(b) => Some(b),
                Err(e) => {
                    port.free(buf)?;
                    return Err(e);
                }
            }
        };
        // The root holds every chunk at once.
        let to_forward = if parent.is_none() && dests.is_some() {
            (0..chunks).collect()
        } else {
            VecDeque::new()
        };
        Ok(NicRun {
            group,
            epoch,
            parent,
            dests,
            buf,
            chunk,
            chunks,
            recvs_posted: 0,
            recvs: VecDeque::new(),
            received: if parent.is_none() { chunks } else { 0 },
            to_forward,
            sends: Vec::new(),
        })
    }

    /// The part of the message chunk `i` covers.
    fn piece(&self, i: u32) -> HostBuf {
        let off = i * self.chunk;
        let len = self.chunk.min(self.buf.len - off.min(self.buf.len));
        HostBuf {
            addr: self.buf.addr + u64::from(off),
            len,
        }
    }

    /// Does whatever can be done now. `Some` once finished: the message, or
    /// the first error.
    pub fn advance<P: PortIo>(&mut self, port: &mut Port<P>) -> Option<Result<Vec<u8>, HostError>> {
        match self.advance_inner(port) {
            Ok(false) => None,
            Ok(true) => {
                let out = if self.buf.len > 0 {
                    port.read_buffer(self.buf)
                } else {
                    Ok(Vec::new())
                };
                let freed = self.free_buffers(port);
                Some(out.and_then(|v| freed.map(|()| v)))
            }
            Err(e) => {
                self.abandon(port);
                Some(Err(e))
            }
        }
    }

    fn free_buffers<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<(), HostError> {
        port.free(self.buf)?;
        if let Some(d) = self.dests.take() {
            port.free(d)?;
        }
        Ok(())
    }

    /// After a failure: receives still posted are cancelled and forgotten,
    /// multi-sends forgotten; the buffers are leaked rather than freed,
    /// since the engine may still use them.
    fn abandon<P: PortIo>(&mut self, port: &mut Port<P>) {
        port.coll.nic_recvs -= self.recvs.len() as u32;
        port.coll.nic_sends -= self.sends.len() as u32;
        for (_, r) in self.recvs.drain(..) {
            port.forget(r);
            let target = r.op();
            if let Ok(c) = port.start(|op| Command::Cancel { op, target }) {
                port.forget(c);
            }
        }
        for r in self.sends.drain(..) {
            port.forget(r);
        }
    }

    fn advance_inner<P: PortIo>(&mut self, port: &mut Port<P>) -> Result<bool, HostError> {
        // Multi-sends that finished.
        let mut i = 0;
        while i < self.sends.len() {
            match port.take(self.sends[i]) {
                None => i += 1,
                Some(r) => {
                    let _done = self.sends.swap_remove(i);
                    port.coll.nic_sends -= 1;
                    r?;
                }
            }
        }
        if let Some(from) = self.parent {
            // Chunks that arrived (in posting order; a later one may
            // finish first, and is taken when its turn comes).
            let mut k = 0;
            while k < self.recvs.len() {
                let (c, r) = self.recvs[k];
                match port.take(r) {
                    None => k += 1,
                    Some(res) => {
                        self.recvs.remove(k);
                        port.coll.nic_recvs -= 1;
                        let got = match res? {
                            Completion::Received { len, .. } => len,
                            other => unreachable!("receive completed as {other:?}"),
                        };
                        let want = self.piece(c).len;
                        if got != want {
                            return Err(CollectiveError::from(CollError::LengthMismatch {
                                expected: want,
                                got,
                            })
                            .into());
                        }
                        self.received += 1;
                        if self.dests.is_some() {
                            self.to_forward.push_back(c);
                        }
                    }
                }
            }
            // Post the next receives, in order, as the window, the port's
            // share and the tokens allow.
            while self.recvs_posted < self.chunks
                && (self.recvs.len() as u32) < RECV_WINDOW
                && port.coll.nic_recvs < RECV_SHARE
            {
                let c = self.recvs_posted;
                let m = RecvMatch::from(
                    from.node,
                    from.port,
                    nic_tag(self.group, self.epoch, c as u16),
                );
                match port.start_recv(m, self.piece(c)) {
                    Ok(r) => {
                        self.recvs.push_back((c, r));
                        port.coll.nic_recvs += 1;
                    }
                    Err(e) if busy(&e) => break,
                    Err(e) => return Err(e),
                }
                self.recvs_posted += 1;
            }
        }
        // Hand every chunk held to the NIC once, for all children.
        if let Some(dests) = self.dests {
            while let Some(&c) = self.to_forward.front() {
                if self.sends.len() as u32 >= SEND_WINDOW || port.coll.nic_sends >= SEND_SHARE {
                    break;
                }
                let (buf, tag) = (self.piece(c), nic_tag(self.group, self.epoch, c as u16));
                match port.start(|op| Command::MultiSend {
                    op,
                    dests,
                    tag,
                    buf,
                }) {
                    Ok(r) => {
                        self.sends.push(r);
                        port.coll.nic_sends += 1;
                        self.to_forward.pop_front();
                    }
                    Err(e) if busy(&e) => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(self.received == self.chunks && self.to_forward.is_empty() && self.sends.is_empty())
    }
}
