use crate::{HostBuf, NodeId, PortId};

/// Counters of everything the engine dropped, refused or repeated: the
/// numbers an operator looks at when something is wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams that failed to parse (truncated, bad length, unknown kind,
    /// inconsistent body, ...).
    pub malformed: u64,
    /// Datagrams whose MAC did not verify under this job's key: forged,
    /// corrupted, another job's, or an earlier run's under another secret.
    pub unauthenticated: u64,
    /// Datagrams not addressed to this node, or whose claimed source differs
    /// from where they came from.
    pub misaddressed: u64,
    /// Authenticated datagrams from an engine incarnation older than the one
    /// known for their sender, or older than the job (a replay).
    pub stale_boot: u64,
    /// Sequenced packets received a second time.
    pub duplicates: u64,
    /// Sequenced packets received ahead of a gap (dropped, Go-Back-N).
    pub out_of_order: u64,
    /// Packets sent again after a timeout.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Messages this engine refused as not ready.
    pub rejected_not_ready: u64,
    /// Messages this engine refused for a stale or missing port.
    pub rejected_port: u64,
    /// Remote accesses refused for a bad key or bounds (the target's memory
    /// untouched).
    pub access_violations: u64,
    /// Messages retried after a not-ready refusal.
    pub retries: u64,
    /// Peers declared dead.
    pub peers_failed: u64,
    /// The first peer this engine learned had died, by its own timeout or
    /// by a failure notice: the job's first failure as seen from here.
    /// Survivors that exit after an error make later operations fail on
    /// them too; this still names the rank whose death started it.
    pub first_failed: Option<NodeId>,
    /// Keepalive probes sent to peers that operations wait on (see
    /// `EngineConfig::peer_timeout`).
    pub keepalives: u64,
    /// Failure notices sent: one per live peer each time this engine
    /// declared a peer dead by its own timeout (module `notice`).
    pub notices_sent: u64,
    /// Failure notices received, acted on or not.
    pub notices_received: u64,
    /// Of `notices_received`, those naming this node: a live node told it
    /// is dead (some peer's view of it was wrong). Ignored.
    pub notices_about_self: u64,
    /// Of `notices_received`, those from a peer leaving the job after a
    /// failure (naming itself): it is taken for dead at once.
    pub departures: u64,
    /// Of `notices_received`, those ignored because they named an
    /// incarnation other than the one known for that node (it restarted).
    pub notices_ignored: u64,
    /// Port-closure notices sent: one per live peer each time a port
    /// closed (module `port_closed`).
    pub port_closures_sent: u64,
    /// Port-closure notices received.
    pub port_closures_received: u64,
    /// Atomic requests this engine performed on its host's memory (each
    /// once, however often it arrived).
    pub atomics_executed: u64,
    /// Atomic requests that arrived again and were answered from the reply
    /// table without being performed again.
    pub atomic_duplicates: u64,
    /// Atomic requests older than the reply table reaches (an honest
    /// initiator never sends one): dropped unanswered.
    pub atomic_stale: u64,
    /// Messages that arrived before a matching receive.
    pub unexpected: u64,
    /// Payload bytes copied out of the unexpected pool into receive
    /// buffers: the copy an eager message pays for arriving early (a
    /// rendezvous message's payload never takes this path).
    pub unexpected_bytes_copied: u64,
    /// Collective packets that arrived before their collective started.
    pub coll_unexpected: u64,
    /// Collective packets refused because the unexpected pool was full.
    pub coll_refused: u64,
    /// Notices to peers whose packets the full pool refused that it has
    /// room again (`wire::CollResume`).
    pub coll_resumes_sent: u64,
    /// Such notices received: refused packets relaunched at once.
    pub coll_resumes_received: u64,
    /// Collective packets no schedule step expected (dropped).
    pub coll_unmatched: u64,
    /// Collective packets that failed (peer gone, refused too long) after
    /// their collective had already completed here.
    pub coll_abandoned: u64,
    /// Times a collective's sends waited because their port's unconfirmed
    /// collective packets had reached `EngineConfig::coll_send_bytes`.
    pub coll_deferred: u64,
    /// Collectives (broadcast receives) this engine started on its own from
    /// their first packet, before its host asked: it forwards them down the
    /// tree at once and keeps the result for the host.
    pub coll_forwarded_early: u64,
    /// NICVM module invocations (module `nicvm`).
    pub nicvm_invocations: u64,
    /// Marked messages ([`crate::Command::SendMarked`]) delivered to a
    /// port's receive.
    pub marked_delivered: u64,
    /// Interrupts raised: a port with marked deliveries whose interrupt
    /// flag was enabled when the driver polled ([`crate::Engine::poll_interrupt`]).
    pub interrupts_raised: u64,
    /// Interrupts not raised because the port's flag was disabled (its
    /// process was inside the library, polling) or never set.
    pub interrupts_suppressed: u64,
    /// VM instructions the modules ran (charged fuel, traps included): the
    /// engine's time in user code, for a runtime's statistics (per module:
    /// `Engine::nicvm_reports`).
    pub vm_instructions: u64,
    /// NICVM errors: invocations that failed (fuel, trap, bad send, stale
    /// generation, purged module) and module sends given up. Per module:
    /// `Engine::nicvm_reports`.
    pub nicvm_errors: u64,
}


/// How many counters [`Stats::to_words`] gives.
pub const STATS_WORDS: usize = 40;

impl Stats {
    /// The counters as words, in declaration order (`first_failed` apart),
    /// so that an engine in another process can report them
    /// ([`Stats::from_words`] reads them back).
    pub fn to_words(&self) -> [u64; STATS_WORDS] {
        [
            self.malformed,
            self.unauthenticated,
            self.misaddressed,
            self.stale_boot,
            self.duplicates,
            self.out_of_order,
            self.retransmits,
            self.timeouts,
            self.rejected_not_ready,
            self.rejected_port,
            self.access_violations,
            self.retries,
            self.peers_failed,
            self.keepalives,
            self.notices_sent,
            self.notices_received,
            self.notices_about_self,
            self.departures,
            self.notices_ignored,
            self.port_closures_sent,
            self.port_closures_received,
            self.atomics_executed,
            self.atomic_duplicates,
            self.atomic_stale,
            self.unexpected,
            self.unexpected_bytes_copied,
            self.coll_unexpected,
            self.coll_refused,
            self.coll_resumes_sent,
            self.coll_resumes_received,
            self.coll_unmatched,
            self.coll_abandoned,
            self.coll_deferred,
            self.coll_forwarded_early,
            self.nicvm_invocations,
            self.marked_delivered,
            self.interrupts_raised,
            self.interrupts_suppressed,
            self.vm_instructions,
            self.nicvm_errors,
        ]
    }

    /// The counters of [`Stats::to_words`], with `first_failed`; `None`
    /// when `words` has another length.
    pub fn from_words(words: &[u64], first_failed: Option<NodeId>) -> Option<Stats> {
        if words.len() != STATS_WORDS {
            return None;
        }
        let mut w = words.iter().copied();
        Some(Stats {
            malformed: w.next()?,
            unauthenticated: w.next()?,
            misaddressed: w.next()?,
            stale_boot: w.next()?,
            duplicates: w.next()?,
            out_of_order: w.next()?,
            retransmits: w.next()?,
            timeouts: w.next()?,
            rejected_not_ready: w.next()?,
            rejected_port: w.next()?,
            access_violations: w.next()?,
            retries: w.next()?,
            peers_failed: w.next()?,
            keepalives: w.next()?,
            notices_sent: w.next()?,
            notices_received: w.next()?,
            notices_about_self: w.next()?,
            departures: w.next()?,
            notices_ignored: w.next()?,
            port_closures_sent: w.next()?,
            port_closures_received: w.next()?,
            atomics_executed: w.next()?,
            atomic_duplicates: w.next()?,
            atomic_stale: w.next()?,
            unexpected: w.next()?,
            unexpected_bytes_copied: w.next()?,
            coll_unexpected: w.next()?,
            coll_refused: w.next()?,
            coll_resumes_sent: w.next()?,
            coll_resumes_received: w.next()?,
            coll_unmatched: w.next()?,
            coll_abandoned: w.next()?,
            coll_deferred: w.next()?,
            coll_forwarded_early: w.next()?,
            nicvm_invocations: w.next()?,
            marked_delivered: w.next()?,
            interrupts_raised: w.next()?,
            interrupts_suppressed: w.next()?,
            vm_instructions: w.next()?,
            nicvm_errors: w.next()?,
            first_failed,
        })
    }
}

/// Work done since the last [`crate::Engine::take_work`]: what the simulator
/// turns into NIC processor and DMA time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Datagrams handled on the receive path (including dropped ones).
    pub packets_in: u64,
    /// Datagrams produced.
    pub packets_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes transmitted.
    pub bytes_out: u64,
    /// Bytes read from host memory.
    pub dma_read: u64,
    /// Bytes written to host memory.
    pub dma_written: u64,
    /// Commands handled.
    pub commands: u64,
    /// Timer expiries handled.
    pub timers: u64,
    /// Integer elements combined by reductions.
    pub combine_int: u64,
    /// Floating-point elements combined by reductions (the papers' NICs had
    /// no FPU, so these cost more there).
    pub combine_float: u64,
    /// Of `packets_out`, acknowledgement-only datagrams: a NIC builds these
    /// from connection state alone (no DMA, no payload), so a cost model may
    /// charge them less than a packet that carries data.
    pub acks_out: u64,
    /// Of `packets_in`, acknowledgement-only datagrams (see `acks_out`).
    pub acks_in: u64,
    /// Payload bytes carried by the datagrams produced (message and write
    /// fragments, read responses, collective packets), wherever the engine
    /// took them from: host memory, or its own memory for a multi-send's
    /// copies and forwarded collective data. A NIC's send DMA moves these
    /// from NIC memory to the wire once per datagram.
    pub payload_out: u64,
    /// Of `packets_out`, collective packets that repeat a value their step
    /// already sent to another rank: a NIC keeps the prepared packet and
    /// only rewrites its destination, so a cost model may charge them less.
    pub coll_copies_out: u64,
    /// Collective packets this call queued that pass on a value which
    /// arrived from the network (an inner member forwarding a broadcast
    /// piece to its children, a partial result going up a tree), counted
    /// once per destination. Why it is reported: a NIC can send these
    /// before it writes the same value into its host's memory - GM-2's NIC
    /// forwarded a multicast packet "before, and independently of, handing
    /// it to its host" - so a cost model may charge this call's DMA to the
    /// host after its transmissions instead of before. Acknowledgements and
    /// a root's own data are not relays. NICVM module sends made for a
    /// packet that arrived from the network count too (002 4.3: the module's
    /// sends go first, then the DMA to the host).
    pub coll_relays_out: u64,
    /// Of `packets_in`, collective packets that carry data (a reduction
    /// contribution, a broadcast piece; barrier signals carry none),
    /// counted as they are parsed, before the engine decides what to do
    /// with them. Why it is reported: finding the collective a value
    /// belongs to and placing or folding it is NIC processor work per
    /// packet beyond the per-element combine count (dissertation 4.3.2),
    /// which a cost model charges without parsing the datagram again.
    pub coll_data_in: u64,
    /// The last datagram produced that carries a fragment of a multi-send's
    /// copy (sent from the engine's own copy of the payload), if any. Why
    /// it is reported: a NIC whose host writes the payload into NIC memory
    /// by programmed I/O (FM) sends each packet of a copy as soon as the
    /// host wrote that far, so a cost model needs to know which payload and
    /// how far into it the fragment reaches - which it could otherwise only
    /// guess from the datagram's header.
    pub multi_copy: Option<MultiCopy>,
    /// Atomic read-modify-writes this call performed on host memory (a
    /// request answered from the reply table is not counted). Why it is
    /// reported: besides its two DMAs (counted in `dma_read` and
    /// `dma_written`) an atomic costs NIC processor work - the operation
    /// itself, the reply-table entry, and on a NIC without atomic bus
    /// transactions the mutex with its host (dissertation 5.2.3) - which a
    /// cost model charges without parsing the request again.
    pub atomics: u64,
    /// Atomic replies this call delivered in the direct form (old value and
    /// flag written into host memory). Why it is reported: the paper's NIC
    /// made no receive token for these (5.2.2, "slightly faster"), so a
    /// cost model may charge their completion less than an event.
    pub atomic_direct: u64,
    /// NICVM module invocations. Why it is reported: each costs the NIC a
    /// fixed dispatch (lookup, frame set-up) besides its instructions.
    pub nicvm_invocations: u64,
    /// VM instructions the modules executed (charged fuel, traps
    /// included): the NIC processor time user code took.
    pub vm_instructions: u64,
    /// Of `packets_out`, collective-protocol packets (module
    /// `coll::proto`). Why it is reported: a NIC sends these from a packet
    /// prepared when the barrier began, rewriting only its epoch - no
    /// sequence number, window or retransmission record - so a cost model
    /// may charge them less than a connection's packet.
    pub nic_coll_out: u64,
    /// Of `packets_in`, collective-protocol packets: handled without the
    /// connection (no sequencing, no acknowledgement to send or take), a
    /// set lookup per notification.
    pub nic_coll_in: u64,
}

/// A fragment of a multi-send's copy: see [`Work::multi_copy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiCopy {
    /// The port that posted the multi-send.
    pub port: PortId,
    /// The multi-send's payload in host memory (the engine read it once).
    pub buf: HostBuf,
    /// How far into the payload the fragment reaches: its offset plus its
    /// length, in bytes.
    pub end: u32,
}

#[cfg(test)]
mod word_tests {
    use super::*;

    #[test]
    fn every_counter_survives_the_words_in_its_place() {
        let words: Vec<u64> = (1..=STATS_WORDS as u64).collect();
        let s = Stats::from_words(&words, Some(NodeId(9))).unwrap();
        assert_eq!(s.to_words().to_vec(), words);
        assert_eq!(s.first_failed, Some(NodeId(9)));
        assert_eq!(s.malformed, 1);
        assert_eq!(s.nicvm_errors, STATS_WORDS as u64);
        assert!(Stats::from_words(&words[1..], None).is_none());
    }
}
