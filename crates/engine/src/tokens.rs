//! Token classes, and the host side's mirror of a port's tokens.
//!
//! A driver that hands commands to the engine asynchronously (through a
//! ring, or after a simulated doorbell) cannot get the engine's verdict at
//! `post` time; it keeps its own count of the port's tokens so that a
//! command the engine would refuse for want of one is refused at once.
//! Which command takes which token is the engine's rule, so it lives here
//! once rather than in every driver.

use crate::{Command, CommandError, EngineConfig, OpId};

/// The class of token an operation holds until it completes: sends,
/// receives and collectives are bounded apart (a collective waits for its
/// peers and must not starve the point-to-point traffic they wait on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenClass {
    /// Send, RDMA write, RDMA read, multi-send, atomic.
    Send,
    /// A posted receive.
    Recv,
    /// An offloaded collective.
    Coll,
}

impl Command {
    /// The token this command holds until it completes, if any.
    pub fn token_class(&self) -> Option<TokenClass> {
        match self {
            Command::Send { .. }
            | Command::Announce { .. }
            | Command::SendMarked { .. }
            | Command::RdmaWrite { .. }
            | Command::RdmaRead { .. }
            | Command::MultiSend { .. }
            | Command::Atomic { .. }
            | Command::NicvmSend { .. } => {
                Some(TokenClass::Send)
            }
            Command::Recv { .. } => Some(TokenClass::Recv),
            Command::Collective { .. } | Command::NicBarrier { .. } => Some(TokenClass::Coll),
            Command::Register { .. }
            | Command::Deregister { .. }
            | Command::Cancel { .. }
            | Command::CreateGroup { .. }
            | Command::DestroyGroup { .. }
            | Command::SetSchedule { .. }
            | Command::NicvmLoad { .. }
            | Command::NicvmPurge { .. }
            | Command::NicvmList { .. }
            | Command::SetInterruptFlag { .. } => None,
        }
    }
}

/// A host-side count of one port's free tokens (see the module doc).
#[derive(Debug, Clone)]
pub struct TokenMirror {
    free: [u32; 3],
    max_message: u32,
    /// The operations holding a token, unordered. A list, not a hash map:
    /// a port rarely has more than a few operations outstanding, and a
    /// short list stays in one or two cache lines where a table sized for
    /// every token spread consecutive operation ids over kilobytes (a
    /// cache miss per post and per completion at 1,024 simulated nodes,
    /// whose state outgrows the caches). At its longest, every token held,
    /// a completion scans a few kilobytes.
    held: Vec<(OpId, TokenClass)>,
}

fn slot(t: TokenClass) -> usize {
    match t {
        TokenClass::Send => 0,
        TokenClass::Recv => 1,
        TokenClass::Coll => 2,
    }
}

impl TokenMirror {
    /// All of a freshly opened port's tokens free.
    pub fn new(cfg: &EngineConfig) -> TokenMirror {
        // Room for every token at once: taking one never allocates, so a
        // signal handler may post (application bypass, host `bypass`).
        TokenMirror::with_room(cfg, (cfg.send_tokens + cfg.recv_tokens + cfg.coll_tokens) as usize)
    }

    fn with_room(cfg: &EngineConfig, room: usize) -> TokenMirror {
        TokenMirror {
            free: [cfg.send_tokens, cfg.recv_tokens, cfg.coll_tokens],
            max_message: cfg.max_message,
            held: Vec::with_capacity(room),
        }
    }

    /// As [`TokenMirror::new`], but with room for a few operations only,
    /// growing as more are held: for drivers whose posts never run in a
    /// signal handler (the simulator, whose interrupt handlers are plain
    /// calls), where room for every token was 6 KiB allocated per
    /// simulated port: 3.9 KB of each simulated node's peak memory, a
    /// fifth (scale bench, 16,384-node allreduce).
    pub fn growable(cfg: &EngineConfig) -> TokenMirror {
        TokenMirror::with_room(cfg, 8)
    }

    /// The longest message the engine takes in one command.
    pub fn max_message(&self) -> u32 {
        self.max_message
    }

    /// Takes the token `cmd` needs, or says why the engine would refuse it
    /// (no token of its class free, or a message longer than the engine
    /// takes).
    pub fn take(&mut self, cmd: &Command) -> Result<(), CommandError> {
        if let Command::Send { buf, .. }
        | Command::Announce { buf, .. }
        | Command::SendMarked { buf, .. }
        | Command::RdmaWrite { buf, .. }
        | Command::RdmaRead { buf, .. }
        | Command::MultiSend { buf, .. } = cmd
        {
            let max = if matches!(cmd, Command::Announce { .. }) { crate::ANNOUNCE_MAX } else { self.max_message };
            if buf.len > max {
                return Err(CommandError::TooLong { len: u64::from(buf.len), max });
            }
        }
        let Some(t) = cmd.token_class() else { return Ok(()) };
        let free = &mut self.free[slot(t)];
        if *free == 0 {
            return Err(match t {
                TokenClass::Send => CommandError::NoSendToken,
                TokenClass::Recv => CommandError::NoRecvToken,
                TokenClass::Coll => CommandError::NoCollToken,
            });
        }
        *free -= 1;
        self.held.push((cmd.op(), t));
        Ok(())
    }

    /// Operation `op` completed: its token (if it held one) is free again.
    pub fn give_back(&mut self, op: OpId) {
        if let Some(i) = self.held.iter().position(|&(held, _)| held == op) {
            let (_, t) = self.held.swap_remove(i);
            self.free[slot(t)] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HostBuf, NodeId, RecvMatch};

    #[test]
    fn each_class_is_counted_apart_and_returned_on_completion() {
        let mut cfg = EngineConfig::new(NodeId(0), 1, 1);
        (cfg.send_tokens, cfg.recv_tokens, cfg.coll_tokens) = (1, 1, 1);
        // Preallocated or growing, the same counts.
        for mut m in [TokenMirror::new(&cfg), TokenMirror::growable(&cfg)] {
            let buf = HostBuf { addr: 0, len: 8 };
            let recv = |op| Command::Recv { op: OpId(op), matching: RecvMatch::tag(1), buf };
            m.take(&recv(1)).unwrap();
            assert_eq!(m.take(&recv(2)), Err(CommandError::NoRecvToken));
            let big = HostBuf { addr: 0, len: cfg.max_message + 1 };
            let dest = crate::Endpoint { node: NodeId(1), port: crate::PortId(0), gen: 1 };
            assert!(matches!(m.take(&Command::Send { op: OpId(3), dest, tag: 0, buf: big }), Err(CommandError::TooLong { .. })));
            m.take(&Command::Send { op: OpId(4), dest, tag: 0, buf }).unwrap();
            m.give_back(OpId(1));
            m.take(&recv(5)).unwrap();
            m.give_back(OpId(99)); // not held: nothing changes
            assert_eq!(m.take(&recv(6)), Err(CommandError::NoRecvToken));
        }
    }

    proptest::proptest! {
        /// Past its first few entries a growing mirror counts as the
        /// preallocated one: a token per operation held, each returned
        /// once, in any order.
        #[test]
        fn a_growing_mirror_counts_like_a_preallocated_one(steps in proptest::collection::vec((proptest::bool::ANY, 0usize..64), 1..300)) {
            let mut cfg = EngineConfig::new(NodeId(0), 1, 1);
            cfg.recv_tokens = 40;
            let (mut fixed, mut growing) = (TokenMirror::new(&cfg), TokenMirror::growable(&cfg));
            let buf = HostBuf { addr: 0, len: 8 };
            let (mut held, mut next) = (Vec::new(), 1u64);
            for (take, pick) in steps {
                if take || held.is_empty() {
                    let cmd = Command::Recv { op: OpId(next), matching: RecvMatch::tag(1), buf };
                    let r = fixed.take(&cmd);
                    proptest::prop_assert_eq!(growing.take(&cmd), r);
                    proptest::prop_assert_eq!(r.is_ok(), held.len() < 40);
                    if r.is_ok() {
                        held.push(OpId(next));
                    }
                    next += 1;
                } else {
                    let op = held.swap_remove(pick % held.len());
                    fixed.give_back(op);
                    growing.give_back(op);
                    growing.give_back(op); // a second return changes nothing
                }
                proptest::prop_assert_eq!(growing.free, fixed.free);
                proptest::prop_assert_eq!(growing.free[1] as usize, 40 - held.len());
            }
        }
    }
}
