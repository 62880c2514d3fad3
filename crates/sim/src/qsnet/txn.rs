//! Transactions an Elan performs for a packet, and acknowledgement status.
//!
//! Write-block transactions carry data; non-write-block ones (2.2.1) test
//! and write or fetch and add a word at the destination and report the
//! outcome in the acknowledgement token, without a reply packet. The
//! Elites combine a multicast's acknowledgements so that the worst one
//! reaches the source (2.3.1).

use std::collections::BTreeMap;

/// An acknowledgement's status; the order is "worst wins": a network error
/// beats an unsuccessful transaction, which beats success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Every destination performed the transaction.
    Ok,
    /// A destination's test failed (e.g. a process not yet at the barrier).
    Unsuccessful,
    /// The packet was lost or corrupted, or a destination is dead.
    Error,
}

impl Status {
    /// Two acknowledgements combined by a switch.
    pub fn combine(self, other: Status) -> Status {
        self.max(other)
    }
}

/// A word address in a job's Elan-visible memory.
pub type Addr = u64;

/// What the destination Elan does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Txn {
    /// Data only (write blocks into a buffer nobody tests).
    Data,
    /// Write a word.
    Write {
        /// Where.
        addr: Addr,
        /// What.
        value: u64,
    },
    /// Remote test-and-write: if the word at `addr` equals `expect`, the
    /// destination reports success and `write` (if any) is performed - at
    /// once for a unicast, and for a multicast closed by EOP only when the
    /// EOP says every destination succeeded (elan_hgsync, 4.1). Otherwise
    /// the status is unsuccessful and nothing is written.
    TestAndWrite {
        /// Word tested.
        addr: Addr,
        /// Value it must hold.
        expect: u64,
        /// Word and value written on success.
        write: Option<(Addr, u64)>,
    },
    /// Remote fetch-and-add: the old value comes back with the ack.
    FetchAdd {
        /// Word.
        addr: Addr,
        /// Added (wrapping).
        delta: u64,
    },
}

/// One node's memory as Elans see it: words per job (agent).
#[derive(Debug, Clone, Default)]
pub struct Memory {
    words: BTreeMap<(usize, Addr), u64>,
}

impl Memory {
    /// The word (0 if never written).
    pub fn read(&self, job: usize, addr: Addr) -> u64 {
        self.words.get(&(job, addr)).copied().unwrap_or(0)
    }

    /// Writes a word.
    pub fn write(&mut self, job: usize, addr: Addr, value: u64) {
        self.words.insert((job, addr), value);
    }

    /// Performs `txn` on arrival; `defer_write` keeps a test-and-write's
    /// write for the EOP. Returns the status and the value for the ack.
    pub fn apply(&mut self, job: usize, txn: Txn, defer_write: bool) -> (Status, Option<u64>) {
        match txn {
            Txn::Data => (Status::Ok, None),
            Txn::Write { addr, value } => {
                self.write(job, addr, value);
                (Status::Ok, None)
            }
            Txn::TestAndWrite { addr, expect, write } => {
                let old = self.read(job, addr);
                if old != expect {
                    return (Status::Unsuccessful, Some(old));
                }
                if let (Some((a, v)), false) = (write, defer_write) {
                    self.write(job, a, v);
                }
                (Status::Ok, Some(old))
            }
            Txn::FetchAdd { addr, delta } => {
                let old = self.read(job, addr);
                self.write(job, addr, old.wrapping_add(delta));
                (Status::Ok, Some(old))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_status_wins_in_any_order() {
        use Status::*;
        for (a, b, w) in [(Ok, Ok, Ok), (Ok, Unsuccessful, Unsuccessful), (Unsuccessful, Error, Error), (Error, Ok, Error)] {
            assert_eq!(a.combine(b), w);
            assert_eq!(b.combine(a), w);
        }
    }

    #[test]
    fn test_and_write_and_fetch_add() {
        let mut m = Memory::default();
        let tw = Txn::TestAndWrite { addr: 1, expect: 5, write: Some((2, 9)) };
        assert_eq!(m.apply(0, tw, false), (Status::Unsuccessful, Some(0)));
        assert_eq!(m.read(0, 2), 0);
        m.write(0, 1, 5);
        assert_eq!(m.apply(0, tw, true), (Status::Ok, Some(5)));
        assert_eq!(m.read(0, 2), 0, "deferred to the EOP");
        assert_eq!(m.apply(0, tw, false), (Status::Ok, Some(5)));
        assert_eq!(m.read(0, 2), 9);
        let fa = Txn::FetchAdd { addr: 3, delta: 2 };
        assert_eq!(m.apply(0, fa, false).1, Some(0));
        assert_eq!(m.apply(0, fa, false).1, Some(2));
        assert_eq!(m.read(1, 3), 0, "jobs do not share words");
    }
}
