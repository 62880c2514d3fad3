//! Per-module counters as a port reads them (`Command::NicvmList`), and as
//! the driver reads them (`Engine::nicvm_reports`).

use super::table::Slot;
use super::ModuleId;

/// Bytes of one encoded [`ModuleReport`].
pub const MODULE_REPORT_LEN: usize = 144;
/// Where the name starts in an encoded report (64 bytes, NUL-padded).
const NAME_AT: usize = 80;

/// One loaded module and what it has done on this engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleReport {
    /// The job's id for it.
    pub module: ModuleId,
    /// Its generation.
    pub generation: u32,
    /// Its name.
    pub name: String,
    /// Whether it outlives its loading port.
    pub persist: bool,
    /// Packets it ran for.
    pub invocations: u64,
    /// VM instructions it executed (charged), errors included.
    pub instructions: u64,
    /// Invocations stopped for want of fuel.
    pub out_of_fuel: u64,
    /// Invocations stopped by any other trap (bounds, call depth, stack,
    /// division, a full send queue).
    pub traps: u64,
    /// Invocations stopped by a send to a rank outside the group (or of an
    /// unknown packet type).
    pub bad_sends: u64,
    /// Module sends given up (peer dead, destination gone, refused past the
    /// retry timeout).
    pub send_failures: u64,
    /// Packets for another generation than the loaded one.
    pub stale: u64,
}

impl ModuleReport {
    pub(crate) fn of(module: ModuleId, s: &Slot) -> ModuleReport {
        let c = s.counters;
        ModuleReport {
            module,
            generation: s.generation,
            name: s.name.clone(),
            persist: s.persist,
            invocations: c.invocations,
            instructions: c.instructions,
            out_of_fuel: c.out_of_fuel,
            traps: c.traps,
            bad_sends: c.bad_sends,
            send_failures: c.send_failures,
            stale: c.stale,
        }
    }

    /// All errors together.
    pub fn errors(&self) -> u64 {
        self.out_of_fuel + self.traps + self.bad_sends + self.send_failures + self.stale
    }

    /// Encodes into [`MODULE_REPORT_LEN`] bytes (little-endian; the name
    /// NUL-padded in the last 64; the counters as 8-byte words from byte 16).
    pub fn encode(&self) -> [u8; MODULE_REPORT_LEN] {
        let mut b = [0u8; MODULE_REPORT_LEN];
        b[0..4].copy_from_slice(&self.module.0.to_le_bytes());
        b[4..8].copy_from_slice(&self.generation.to_le_bytes());
        b[8] = u8::from(self.persist);
        let words = [self.invocations, self.instructions, self.out_of_fuel, self.traps, self.bad_sends, self.send_failures, self.stale];
        for (i, w) in words.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        let n = self.name.len().min(64);
        b[NAME_AT..NAME_AT + n].copy_from_slice(&self.name.as_bytes()[..n]);
        b
    }

    /// Decodes what [`encode`](Self::encode) wrote; `None` if `b` is too short.
    pub fn decode(b: &[u8]) -> Option<ModuleReport> {
        let b = b.get(..MODULE_REPORT_LEN)?;
        let w = |i: usize| u64::from_le_bytes(b[16 + 8 * i..24 + 8 * i].try_into().expect("8 bytes"));
        let name_end = b[NAME_AT..].iter().position(|&c| c == 0).map_or(MODULE_REPORT_LEN, |p| NAME_AT + p);
        Some(ModuleReport {
            module: ModuleId(u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"))),
            generation: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            persist: b[8] != 0,
            invocations: w(0),
            instructions: w(1),
            out_of_fuel: w(2),
            traps: w(3),
            bad_sends: w(4),
            send_failures: w(5),
            stale: w(6),
            name: String::from_utf8_lossy(&b[NAME_AT..name_end]).into_owned(),
        })
    }
}
