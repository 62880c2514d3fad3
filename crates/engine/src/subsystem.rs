//! The engine's parts with state of their own, and the events every one of
//! them must hear of, in one table.
//!
//! A peer's death, a port's closure, a timer pass, the next deadline and
//! quiescence concern every part that keeps operations, packets or timers:
//! the collectives, the NIC collective protocol, remote atomics, NICVM and
//! the keepalive probes. Called one by one from the engine, a new part
//! that forgot one of them would still compile - and then hang a host
//! whose peer died, or let time pass its timers by. Here each part is a
//! [`Subsystem`], a struct of its hooks: leaving one out does not compile.
//! The table's order is the order the hooks run in (timer passes in
//! particular: the simulator's figures depend on it).

use crate::{Dma, Engine, Generation, Instant, NodeId, PortId};

/// One part of the engine: what it does when a peer dies, when a port of
/// this engine closes, when its timers may be due, and what it tells of
/// its next deadline and its quiescence.
pub(crate) struct Subsystem<D: Dma> {
    /// Peer `node` is dead (declared by this engine or a notice): what
    /// needed it fails.
    pub peer_failed: fn(&mut Engine<D>, Instant, NodeId),
    /// Port `port` of this engine, incarnation `gen`, closed: what it had
    /// under way goes.
    pub port_closed: fn(&mut Engine<D>, Instant, PortId, Generation),
    /// A timer pass at `now`: retries and deadlines due.
    pub due: fn(&mut Engine<D>, Instant),
    /// The part's earliest deadline.
    pub deadline: fn(&Engine<D>) -> Option<Instant>,
    /// Whether the part has nothing under way.
    pub is_quiet: fn(&Engine<D>) -> bool,
}

impl<D: Dma> Engine<D> {
    /// Every part, in the order their hooks run.
    pub(crate) const SUBSYSTEMS: [Subsystem<D>; 5] = [
        // Keepalive probes.
        Subsystem {
            peer_failed: |_, _, _| {},
            port_closed: |_, _, _, _| {},
            due: |e, now| e.keepalive_due(now),
            deadline: |e| e.keepalive_deadline(),
            // Probes are answered or time out; they hold nothing a host
            // waits for.
            is_quiet: |_| true,
        },
        // Remote atomics.
        Subsystem {
            peer_failed: |e, _, node| e.atomic_peer_failed(node),
            port_closed: |e, now, port, _| e.atomic_port_closed(now, port),
            due: |e, now| e.atomic_retry_due(now),
            deadline: |e| e.atomics.deadline(),
            is_quiet: |e| e.atomics.is_quiet(),
        },
        // NICVM modules.
        Subsystem {
            peer_failed: |e, _, node| e.nicvm_peer_failed(node),
            port_closed: |e, now, port, gen| e.nicvm_port_closed(now, port, gen),
            due: |e, now| e.nicvm_retry_due(now),
            deadline: |e| e.nicvm.deadline(),
            is_quiet: |e| e.nicvm.is_quiet(),
        },
        // Collectives.
        Subsystem {
            peer_failed: |e, _, node| e.coll_peer_failed(node),
            port_closed: |e, _, port, gen| {
                e.coll_port_closed(port);
                // Its groups elsewhere on this engine lose a member.
                e.coll_member_closed(crate::Endpoint { node: e.cfg.node, port, gen });
            },
            due: |e, now| e.coll_retry_due(now),
            deadline: |e| e.coll_deadline(),
            is_quiet: |e| e.coll_is_quiet(),
        },
        // The NIC collective protocol.
        Subsystem {
            peer_failed: |e, now, node| e.nic_coll_peer_failed(now, node),
            port_closed: |e, _, port, _| e.nic_coll_port_closed(port),
            due: |e, now| e.nic_coll_due(now),
            deadline: |e| e.nic_coll.deadline(),
            is_quiet: |e| e.nic_coll.is_quiet(),
        },
    ];
}
