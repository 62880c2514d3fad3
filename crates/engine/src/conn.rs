//! One reliable connection to a peer engine: sequence numbers, the send
//! window, cumulative acknowledgements and Go-Back-N retransmission.
//!
//! Every packet except a standalone acknowledgement occupies one sequence
//! number and is delivered to the receiving engine exactly once, in order.
//! A sequence number is assigned when a packet is *queued*, not when it is
//! first sent; the window only limits how far ahead of the last
//! acknowledgement transmission may run.
//!
//! **Confirmed acknowledgements.** An acknowledgement says the peer's engine
//! received a packet, not what it did with it: the peer may have refused the
//! message inside (a [`wire::Reject`] travelling back on the peer's own
//! reliable stream). So a send must not complete on a bare acknowledgement.
//! Every packet carries the sender's *horizon* (its next unassigned sequence
//! number); a refusal is queued, and so numbered, before any acknowledgement
//! of the refused packet is written. An acknowledgement `A` with horizon `H`
//! is therefore *confirmed* once we have received everything the peer
//! numbered below `H`: by then any refusal of a packet below `A` has been
//! processed. Window space is released on the raw acknowledgement; sends
//! complete on the confirmed one.

use std::collections::VecDeque;
use std::time::Duration;

use outboard_wire::{self as wire, AbortWhat, Seq};

use crate::{EngineConfig, Instant, NodeId};

/// What a sequence number carries, kept until it is confirmed so that it can
/// be rebuilt for retransmission. Payload bytes are never kept: they are
/// read from host memory again, as GM's send records do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxRecord {
    /// A fragment of an outgoing operation's data (message, RDMA write or
    /// read response). If the operation or this attempt of it is gone by
    /// transmission time, an [`wire::Abort`] goes out in its place.
    Fragment {
        /// The engine-local operation key.
        key: u32,
        /// The attempt this fragment belongs to.
        attempt: u32,
        /// Offset in the operation's buffer.
        offset: u32,
        /// Length.
        len: u32,
        /// What an abort in its place refers to.
        abort: wire::Abort,
    },
    /// A small control packet, kept whole.
    Control(wire::BodyRepr),
    /// A collective packet; its payload lives in the engine's collective
    /// state. If that attempt is gone by transmission time, a `Nop` keeps
    /// the sequence number.
    Coll {
        /// The collective packet key.
        key: u32,
        /// Which attempt.
        attempt: u32,
    },
    /// A NICVM module's send; its payload lives in the engine's NICVM
    /// state (module `nicvm`). A `Nop` in its place if that attempt is gone.
    Nicvm {
        /// The module send's key.
        key: u32,
        /// Which attempt.
        attempt: u32,
    },
}

impl TxRecord {
    pub(crate) fn abort_for(what: AbortWhat, msg_id: u32) -> wire::Abort {
        wire::Abort { what, msg_id }
    }
}

/// Result of receiving a sequenced packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxVerdict {
    /// The next expected packet: process it.
    InOrder,
    /// Seen before: drop it, acknowledge again.
    Duplicate,
    /// Ahead of a gap: drop it (Go-Back-N), acknowledge what we have.
    Ahead,
}

/// What a timer expiry means for this connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerVerdict {
    /// Nothing due.
    Idle,
    /// Retransmit from the oldest unacknowledged packet.
    Retransmit,
    /// No progress for the peer timeout: the peer is dead.
    PeerDead,
}

/// Packets a new connection may have in flight before its first
/// acknowledgement.
const INITIAL_CWND: u32 = 16;

/// What a timeout changed, kept (with [`EngineConfig::timeout_probe`]) until
/// the next acknowledgement tells whether the timeout was spurious.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeoutUndo {
    /// The congestion state before the timeout.
    pub cwnd: u32,
    pub ssthresh: u32,
    /// The oldest unacknowledged packet when the timer fired: the one
    /// resent alone as the probe.
    pub una: Seq,
}

#[derive(Debug)]
pub(crate) struct Conn {
    pub peer: NodeId,
    /// The peer's incarnation as last heard; packets from smaller ones are
    /// dropped, a larger one is a restart.
    pub peer_boot: Option<u64>,
    pub dead: bool,
    /// Records for sequence numbers `base .. next_seq`.
    pub records: VecDeque<TxRecord>,
    /// Sequence number of `records[0]`: everything before is confirmed.
    pub base: Seq,
    /// Everything before is acknowledged.
    pub snd_una: Seq,
    /// Next sequence number to transmit.
    pub snd_nxt: Seq,
    /// Highest sequence number transmitted so far, plus one.
    pub high_sent: Seq,
    /// Next sequence number to assign: the horizon.
    pub next_seq: Seq,
    pub rto: Duration,
    /// Smoothed round-trip time and its mean deviation (RFC 6298), from
    /// one timed packet at a time; `None` until the first sample.
    pub srtt: Option<Duration>,
    pub rttvar: Duration,
    /// The packet being timed and when it was first sent. Karn's rule: a
    /// timeout drops it, so a retransmitted packet is never timed.
    pub rtt_probe: Option<(Seq, Instant)>,
    /// Congestion window in packets (additive increase per acknowledged
    /// round, halved on timeout, never above the configured window): under
    /// heavy loss Go-Back-N then resends a few packets per timeout instead
    /// of a whole window.
    pub cwnd: u32,
    pub cwnd_credit: u32,
    pub ssthresh: u32,
    pub rto_deadline: Option<Instant>,
    /// Set by a timeout under [`EngineConfig::timeout_probe`].
    pub undo: Option<TimeoutUndo>,
    pub last_progress: Instant,
    /// When a valid packet from the peer last arrived (`None`: never):
    /// a peer heard from this recently needs no keepalive probe.
    pub heard_at: Option<Instant>,
    /// Next sequence number expected from the peer.
    pub rcv_nxt: Seq,
    pub ack_needed: bool,
    /// When a delayed acknowledgement must go out alone (see
    /// `EngineConfig::ack_delay`).
    pub ack_due: Option<Instant>,
    /// In-order packets received since we last acknowledged.
    pub rx_unacked: u32,
    /// Acknowledgements waiting for the peer's packets below their horizon.
    pub pending_confirm: VecDeque<(Seq, Seq)>,
    /// Whether the connection is in the engine's ready queue.
    pub queued: bool,
    /// [`crate::conn_table::ConnTable`]'s bookkeeping, kept here so that
    /// it shares the connection's cache lines: whether the connection was
    /// touched since the table last looked, and the deadline of its latest
    /// heap entry.
    pub timer_dirty: bool,
    pub timer_pushed: Option<Instant>,
}

impl Conn {
    pub fn new(peer: NodeId, cfg: &EngineConfig, now: Instant) -> Conn {
        Conn {
            peer,
            peer_boot: None,
            dead: false,
            records: VecDeque::new(),
            base: Seq(0),
            snd_una: Seq(0),
            snd_nxt: Seq(0),
            high_sent: Seq(0),
            next_seq: Seq(0),
            rto: cfg.rto_initial,
            srtt: None,
            rttvar: Duration::ZERO,
            rtt_probe: None,
            cwnd: cfg.window.min(INITIAL_CWND),
            cwnd_credit: 0,
            ssthresh: cfg.window,
            rto_deadline: None,
            undo: None,
            last_progress: now,
            heard_at: None,
            rcv_nxt: Seq(0),
            ack_needed: false,
            ack_due: None,
            rx_unacked: 0,
            pending_confirm: VecDeque::new(),
            queued: false,
            timer_dirty: false,
            timer_pushed: None,
        }
    }

    /// Forgets all sequencing state, as after the peer restarted.
    pub fn reset(&mut self, cfg: &EngineConfig, now: Instant) {
        let peer = self.peer;
        let boot = self.peer_boot;
        let (queued, timer_dirty, timer_pushed) = (self.queued, self.timer_dirty, self.timer_pushed);
        *self = Conn::new(peer, cfg, now);
        self.peer_boot = boot;
        self.queued = queued;
        (self.timer_dirty, self.timer_pushed) = (timer_dirty, timer_pushed);
    }

    /// Queues a record; returns its sequence number.
    pub fn push(&mut self, rec: TxRecord, now: Instant) -> Seq {
        if self.snd_una == self.next_seq {
            // Idle until now: the peer timeout counts from here.
            self.last_progress = now;
        }
        let s = self.next_seq;
        self.records.push_back(rec);
        self.next_seq = s.next();
        s
    }

    /// Whether a packet may be transmitted now.
    pub fn can_send(&self, window: u32) -> bool {
        !self.dead && self.snd_nxt != self.next_seq && (self.snd_nxt.diff(self.snd_una) as u32) < window.min(self.cwnd)
    }

    /// The next record to transmit and its sequence number.
    pub fn next_record(&self) -> Option<(Seq, TxRecord)> {
        let idx = usize::try_from(self.snd_nxt.diff(self.base)).ok()?;
        self.records.get(idx).map(|r| (self.snd_nxt, *r))
    }

    /// Marks the record at `snd_nxt` transmitted. Returns whether it was a
    /// retransmission.
    pub fn mark_sent(&mut self, now: Instant, cfg: &EngineConfig) -> bool {
        let retrans = self.snd_nxt.before(self.high_sent);
        if !retrans && self.rtt_probe.is_none() {
            self.rtt_probe = Some((self.snd_nxt, now));
        }
        self.snd_nxt = self.snd_nxt.next();
        self.high_sent = self.high_sent.max(self.snd_nxt);
        if self.rto_deadline.is_none() {
            self.arm(now, cfg);
        }
        retrans
    }

    fn arm(&mut self, now: Instant, cfg: &EngineConfig) {
        let by_rto = now + self.rto;
        let by_peer = self.last_progress + cfg.peer_timeout;
        self.rto_deadline = Some(by_rto.min(by_peer).max(now));
    }

    /// Classifies an arriving sequenced packet and advances `rcv_nxt` when
    /// it is the next one.
    ///
    /// With an `ack_delay`, a lone in-order packet is acknowledged later
    /// (by the next packet we send the peer, or alone when the delay runs
    /// out); every `ack_every`-th one (TCP: every second), and anything
    /// duplicate or out of order, at once, as TCP's delayed
    /// acknowledgements do.
    pub fn receive(&mut self, seq: Seq, now: Instant, cfg: &EngineConfig) -> RxVerdict {
        if seq == self.rcv_nxt {
            self.rcv_nxt = seq.next();
            self.rx_unacked += 1;
            if cfg.ack_delay.is_zero() || self.rx_unacked >= cfg.ack_every {
                self.ack_needed = true;
            } else if self.ack_due.is_none() {
                self.ack_due = Some(now + cfg.ack_delay);
            }
            return RxVerdict::InOrder;
        }
        self.ack_needed = true;
        if seq.before(self.rcv_nxt) {
            RxVerdict::Duplicate
        } else {
            RxVerdict::Ahead
        }
    }

    /// Applies an acknowledgement: releases window space and restarts the
    /// timer on progress. Acknowledgements beyond what we numbered are
    /// ignored (they cannot be genuine).
    pub fn on_ack(&mut self, ack: Seq, now: Instant, cfg: &EngineConfig) {
        if !ack.after(self.snd_una) || ack.after(self.high_sent) {
            return;
        }
        let acked = ack.diff(self.snd_una) as u32;
        if let Some(u) = self.undo.take() {
            if ack.after(u.una.next()) {
                // Beyond the one packet resent: the peer had the originals,
                // so no data was lost (a peer whose engine was not driven
                // for a while, or an acknowledgement lost). Undo the
                // congestion response. The delay is not taken as a round
                // trip: without timestamps this acknowledgement may answer
                // the probe after the originals' was lost, and timing the
                // original from it takes the whole timeout as a round trip
                // - under loss of acknowledgements the timeout then climbs
                // to `rto_max`, and every loss costs that long (Karn's
                // rule; measured: 4 ranks at 30 % loss, 28 s against 6 s).
                // A peer that stalls often raises the estimate through the
                // round trips of packets sent once.
                self.cwnd = u.cwnd;
                self.ssthresh = u.ssthresh;
            }
        }
        self.snd_una = ack;
        if self.cwnd < self.ssthresh {
            // Slow start: grow by what was acknowledged.
            self.cwnd = (self.cwnd + acked).min(cfg.window);
        } else {
            self.cwnd_credit += acked;
            if self.cwnd_credit >= self.cwnd {
                self.cwnd_credit = 0;
                self.cwnd = (self.cwnd + 1).min(cfg.window);
            }
        }
        if self.snd_nxt.before(ack) {
            self.snd_nxt = ack;
        }
        if let Some((seq, sent)) = self.rtt_probe {
            if ack.after(seq) {
                self.rtt_probe = None;
                self.rtt_sample(now.saturating_since(sent));
            }
        }
        self.rto = self.base_rto(cfg);
        self.last_progress = now;
        self.rto_deadline = None;
        if self.snd_una != self.high_sent {
            self.arm(now, cfg);
        }
    }

    /// Folds one round-trip sample into the estimate (RFC 6298, 2.2-2.3).
    fn rtt_sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let dev = srtt.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + dev) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
    }

    /// The timeout after progress: SRTT + 4 x RTTVAR, never below the
    /// configured first timeout (which is the floor, as RFC 6298's one
    /// second is: a peer whose engine answers late - its host computing
    /// while no core drives it - raises the timeout instead of drawing
    /// spurious retransmissions) nor above `rto_max`.
    pub fn base_rto(&self, cfg: &EngineConfig) -> Duration {
        match self.srtt {
            None => cfg.rto_initial,
            Some(srtt) => (srtt + self.rttvar * 4).clamp(cfg.rto_initial, cfg.rto_max),
        }
    }

    /// Records `(ack, horizon)` from a valid packet; returns the highest
    /// acknowledgement that is now confirmed, if it moved.
    pub fn confirm(&mut self, ack: Seq, horizon: Seq) -> Option<Seq> {
        if ack.after(self.snd_una) || !ack.after(self.base) {
            // Not a valid acknowledgement, or nothing new in it.
            return self.drain_confirmed();
        }
        match self.pending_confirm.back() {
            Some(&(a, _)) if !ack.after(a) => {}
            _ => self.pending_confirm.push_back((ack, horizon)),
        }
        self.drain_confirmed()
    }

    /// Pops the pending acknowledgements whose horizon we have reached.
    pub fn drain_confirmed(&mut self) -> Option<Seq> {
        let mut best = None;
        while let Some(&(a, h)) = self.pending_confirm.front() {
            if h.after(self.rcv_nxt) {
                break;
            }
            self.pending_confirm.pop_front();
            best = Some(a);
        }
        best
    }

    /// Removes and returns the records confirmed up to `upto`.
    pub fn pop_confirmed(&mut self, upto: Seq) -> impl Iterator<Item = TxRecord> + '_ {
        let n = upto.diff(self.base).max(0) as usize;
        let n = n.min(self.records.len());
        self.base = self.base.add(n as u32);
        self.records.drain(..n)
    }

    /// Gives back the record queue's memory once everything sent is
    /// confirmed. A node talks to most peers in bursts (a collective's few
    /// packets), and an engine of a large job keeps a connection to each
    /// peer it ever talked to: held, the queues' capacity would be most of
    /// its memory (a simulation holds a million engines).
    pub fn release_if_idle(&mut self) {
        if self.records.is_empty() && self.records.capacity() > 0 {
            self.records = VecDeque::new();
        }
    }

    /// The timer deadline, if one is armed.
    pub fn deadline(&self) -> Option<Instant> {
        if self.dead {
            None
        } else {
            match (self.rto_deadline, self.ack_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
    }

    /// An acknowledgement (alone or riding on data) went out.
    pub fn acked(&mut self) {
        self.ack_needed = false;
        self.ack_due = None;
        self.rx_unacked = 0;
    }

    /// Handles the timer at `now`.
    pub fn on_timer(&mut self, now: Instant, cfg: &EngineConfig) -> TimerVerdict {
        if self.ack_due.is_some_and(|d| d <= now) && !self.dead {
            self.ack_due = None;
            self.ack_needed = true;
        }
        match self.rto_deadline {
            Some(d) if d <= now && !self.dead => {}
            _ => return TimerVerdict::Idle,
        }
        if self.snd_una == self.high_sent {
            self.rto_deadline = None;
            return TimerVerdict::Idle;
        }
        if now.saturating_since(self.last_progress) >= cfg.peer_timeout {
            self.rto_deadline = None;
            return TimerVerdict::PeerDead;
        }
        self.snd_nxt = self.snd_una;
        self.rtt_probe = None;
        if cfg.timeout_probe {
            // Resend only the oldest packet, and remember what to restore
            // if the peer turns out to have had everything (the first
            // timeout's state, when several fire before an answer).
            let first = self.undo.unwrap_or(TimeoutUndo { cwnd: self.cwnd, ssthresh: self.ssthresh, una: self.snd_una });
            self.undo = Some(first);
            self.ssthresh = (self.cwnd / 2).max(2);
            self.cwnd = 1;
        } else {
            self.cwnd = (self.cwnd / 2).max(1);
            self.ssthresh = self.cwnd.max(2);
        }
        self.cwnd_credit = 0;
        self.rto = (self.rto * 2).min(cfg.rto_max);
        self.arm(now, cfg);
        TimerVerdict::Retransmit
    }

    /// Whether every packet numbered so far is acknowledged: nothing in
    /// flight would notice the peer's death by itself.
    pub fn nothing_unacked(&self) -> bool {
        self.snd_una == self.next_seq
    }

    /// Whether every numbered packet is confirmed.
    pub fn is_quiet(&self) -> bool {
        self.records.is_empty() && !self.ack_needed && self.ack_due.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> (Conn, EngineConfig) {
        let cfg = EngineConfig::new(NodeId(0), 1, 1);
        (Conn::new(NodeId(1), &cfg, Instant::from_nanos(0)), cfg)
    }

    fn send_one(c: &mut Conn, cfg: &EngineConfig, at: Instant) -> Seq {
        let s = c.push(TxRecord::Coll { key: 0, attempt: 0 }, at);
        assert!(c.can_send(cfg.window));
        c.mark_sent(at, cfg);
        s
    }

    #[test]
    fn slow_acknowledgements_raise_the_timeout_and_fast_ones_keep_the_floor() {
        let (mut c, cfg) = conn();
        let mut t = Instant::from_nanos(0);
        for _ in 0..8 {
            let s = send_one(&mut c, &cfg, t);
            t += Duration::from_micros(2_000);
            c.on_ack(s.next(), t, &cfg);
        }
        assert!(c.rto >= Duration::from_micros(2_000), "rto {:?} after 2 ms round trips", c.rto);
        assert!(c.rto <= cfg.rto_max);
        let (mut fast, cfg) = conn();
        let mut t = Instant::from_nanos(0);
        for _ in 0..8 {
            let s = send_one(&mut fast, &cfg, t);
            t += Duration::from_micros(20);
            fast.on_ack(s.next(), t, &cfg);
        }
        assert_eq!(fast.rto, cfg.rto_initial, "a fast peer keeps the configured first timeout");
        assert!(fast.srtt.unwrap() < Duration::from_micros(40));
    }

    /// A connection with a measured round trip of 100 us.
    fn timed(c: &mut Conn, cfg: &EngineConfig) -> Instant {
        let t0 = Instant::from_nanos(0);
        let s = send_one(c, cfg, t0);
        let t = t0 + Duration::from_micros(100);
        c.on_ack(s.next(), t, cfg);
        assert_eq!(c.srtt, Some(Duration::from_micros(100)));
        t
    }

    /// The peer had every packet: its engine was late, or the originals'
    /// acknowledgement was lost and the probe's duplicate drew a fresh
    /// one. Nothing was lost, so the congestion response is undone; the
    /// round trip is not taken from it, for it may be the whole timeout
    /// (under loss of acknowledgements the timeout would climb to its
    /// maximum).
    #[test]
    fn a_spurious_timeout_resends_one_packet_and_is_undone() {
        let (mut c, mut cfg) = conn();
        cfg.timeout_probe = true;
        let t0 = timed(&mut c, &cfg);
        let first = send_one(&mut c, &cfg, t0);
        for _ in 0..7 {
            send_one(&mut c, &cfg, t0);
        }
        let cwnd = c.cwnd;
        let t1 = t0 + c.rto;
        assert_eq!(c.on_timer(t1, &cfg), TimerVerdict::Retransmit);
        // One packet may go again, not the whole flight.
        assert!(c.can_send(cfg.window));
        assert!(c.mark_sent(t1, &cfg));
        assert!(!c.can_send(cfg.window), "only the oldest packet is resent");
        // The peer had all eight: its acknowledgement covers them.
        c.on_ack(first.add(8), t1 + Duration::from_micros(5), &cfg);
        assert!(c.cwnd >= cwnd, "the congestion window is restored (then grows): {} < {cwnd}", c.cwnd);
        assert_eq!(c.srtt, Some(Duration::from_micros(100)), "an ambiguous acknowledgement is not timed");
    }

    #[test]
    fn a_real_loss_after_a_probe_keeps_the_congestion_response() {
        let (mut c, mut cfg) = conn();
        cfg.timeout_probe = true;
        let t0 = Instant::from_nanos(0);
        let first = send_one(&mut c, &cfg, t0);
        for _ in 0..7 {
            send_one(&mut c, &cfg, t0);
        }
        let t1 = t0 + cfg.rto_initial;
        assert_eq!(c.on_timer(t1, &cfg), TimerVerdict::Retransmit);
        c.mark_sent(t1, &cfg);
        // Only the probe arrived: the originals were lost.
        c.on_ack(first.next(), t1 + Duration::from_micros(5), &cfg);
        assert!(c.cwnd <= 2, "slow start from one packet, cwnd {}", c.cwnd);
        assert_eq!(c.srtt, None, "no sample from a resent packet");
    }

    #[test]
    fn a_retransmitted_packet_is_not_timed() {
        let (mut c, cfg) = conn();
        let t0 = Instant::from_nanos(0);
        let s = send_one(&mut c, &cfg, t0);
        let t1 = t0 + cfg.rto_initial;
        assert_eq!(c.on_timer(t1, &cfg), TimerVerdict::Retransmit);
        assert!(c.mark_sent(t1, &cfg), "the resend is a retransmission");
        // The ack arrives long after the first send: timing it would take
        // the whole timeout as a round trip.
        c.on_ack(s.next(), t1 + Duration::from_micros(10), &cfg);
        assert_eq!(c.srtt, None);
        assert_eq!(c.rto, cfg.rto_initial);
    }
}
