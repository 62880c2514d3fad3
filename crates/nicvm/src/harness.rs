//! A local stand-in for the NIC: records what a module asks for.
//!
//! Used by the tests, the benchmarks and `outboard nicvm run` to run a module
//! for one rank of a group without an engine, and to print or check its
//! sends and deliveries.

use std::fmt;

use crate::services::{NicServices, PacketType, Payload, ServiceError};

/// What a module did through its services, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A send.
    Send {
        /// Packet type.
        ptype: PacketType,
        /// Destination rank.
        dest: u32,
        /// `None` for the current packet, else the new packet's bytes.
        data: Option<Vec<u8>>,
    },
    /// A delivery of new bytes to the host.
    Deliver(Vec<u8>),
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Send { ptype, dest, data } => {
                write!(f, "send {ptype:?} to rank {dest}: ")?;
                match data {
                    None => f.write_str("current packet"),
                    Some(d) => write!(f, "new packet {}", hex(d)),
                }
            }
            Event::Deliver(d) => write!(f, "deliver to host: {}", hex(d)),
        }
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex (whitespace and an optional `0x` ignored) into bytes.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let clean: String = s
        .trim()
        .trim_start_matches("0x")
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '_')
        .collect();
    if clean.len() % 2 != 0 {
        return Err("hex payload has an odd number of digits".into());
    }
    let digits: Vec<char> = clean.chars().collect();
    digits
        .chunks(2)
        .map(|pair| {
            let s: String = pair.iter().collect();
            u8::from_str_radix(&s, 16).map_err(|_| format!("bad hex byte {s:?}"))
        })
        .collect()
}

/// A [`NicServices`] that records every request and grants it, unless
/// `refuse_after` sends have already been made (to exercise refusals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorder {
    /// This node's rank.
    pub rank: u32,
    /// Group size.
    pub size: u32,
    /// Root of the operation.
    pub root: u32,
    /// Rank the current packet came from.
    pub source: u32,
    /// What the module did.
    pub events: Vec<Event>,
    /// Refuse sends with [`ServiceError::QueueFull`] once this many were made.
    pub refuse_after: Option<usize>,
}

impl Recorder {
    /// A recorder for `rank` of `size` with root `root`, for a packet from
    /// its own host (source = rank).
    pub fn new(rank: u32, size: u32, root: u32) -> Self {
        Recorder {
            rank,
            size,
            root,
            source: rank,
            events: Vec::new(),
            refuse_after: None,
        }
    }

    /// Destinations of the sends, in order.
    pub fn sent_to(&self) -> Vec<u32> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Send { dest, .. } => Some(*dest),
                Event::Deliver(_) => None,
            })
            .collect()
    }
}

impl NicServices for Recorder {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn root(&self) -> u32 {
        self.root
    }
    fn source(&self) -> u32 {
        self.source
    }
    fn send(
        &mut self,
        ptype: PacketType,
        dest: u32,
        payload: Payload<'_>,
    ) -> Result<(), ServiceError> {
        if let Some(n) = self.refuse_after {
            if self.sent_to().len() >= n {
                return Err(ServiceError::QueueFull);
            }
        }
        self.events.push(Event::Send {
            ptype,
            dest,
            data: match payload {
                Payload::Current => None,
                Payload::New(b) => Some(b.to_vec()),
            },
        });
        Ok(())
    }
    fn deliver(&mut self, bytes: &[u8]) -> Result<(), ServiceError> {
        self.events.push(Event::Deliver(bytes.to_vec()));
        Ok(())
    }
}

/// A [`NicServices`] that does nothing and allocates nothing: for
/// benchmarks and fuzzing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NullServices {
    /// This node's rank.
    pub rank: u32,
    /// Group size.
    pub size: u32,
    /// Root.
    pub root: u32,
    /// Source of the current packet.
    pub source: u32,
    /// Sends made.
    pub sends: u64,
}

impl NicServices for NullServices {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn root(&self) -> u32 {
        self.root
    }
    fn source(&self) -> u32 {
        self.source
    }
    fn send(&mut self, _: PacketType, _: u32, _: Payload<'_>) -> Result<(), ServiceError> {
        self.sends += 1;
        Ok(())
    }
    fn deliver(&mut self, _: &[u8]) -> Result<(), ServiceError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_errors() {
        assert_eq!(parse_hex("0x01ff 10").unwrap(), vec![1, 255, 16]);
        assert_eq!(hex(&[1, 255, 16]), "01ff10");
        assert!(parse_hex("abc").is_err());
        assert!(parse_hex("zz").is_err());
        assert_eq!(parse_hex("").unwrap(), Vec::<u8>::new());
    }
}
