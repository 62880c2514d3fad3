//! The QsNet model's parameters: the `elan3` profile's wire and host costs
//! plus `data/qsnet-elan3.toml` (packet format, Elan engines, back-off,
//! OS noise), all converted to picoseconds.

use serde::Deserialize;

use crate::profile::Profile;

/// The embedded QsNet table.
pub const TOML: &str = include_str!("../../../../data/qsnet-elan3.toml");

/// `data/qsnet-elan3.toml`, field by field (the file says where each comes from).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Table {
    pub packet_overhead_bytes: u32,
    pub dma_issue_us: f64,
    pub dma_window: u32,
    pub input_us: f64,
    pub pci_word_us: f64,
    pub thread_us: f64,
    pub event_wake_us: f64,
    pub backoff_us: f64,
    pub backoff_max_us: f64,
    pub max_errors: u32,
    pub gsync_degree: u32,
    pub noise_per_ms: f64,
    pub noise_mean_us: f64,
    pub traffic_window: u32,
    pub traffic_packet_bytes: u32,
    pub tport_thread_us: f64,
}

/// The embedded table.
pub fn table() -> Table {
    toml::from_str(TOML).expect("data/qsnet-elan3.toml parses (checked by a test)")
}

/// Picoseconds from microseconds.
pub fn ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// Everything the model charges, in picoseconds (per byte: picoseconds).
#[derive(Debug, Clone)]
pub struct Params {
    /// Header (and ack, EOP) time through one link and switch: Elite
    /// flow-through plus cable.
    pub hop: u64,
    /// Link time per byte (400 MB/s).
    pub link_byte: u64,
    /// Bytes of data per packet.
    pub max_data: u32,
    /// Bytes every packet adds.
    pub overhead: u32,
    /// Host to Elan command latency.
    pub doorbell: u64,
    /// A polling host sees a word change after this.
    pub poll: u64,
    /// Host cost of posting a DMA.
    pub host_send: u64,
    /// PCI time per byte of DMA from or to main memory.
    pub pci_byte: u64,
    /// The rest, from the table.
    pub t: Table,
}

impl Params {
    /// The parameters for `profile` (its wire, host and PCI costs) and the
    /// embedded table.
    pub fn new(profile: &Profile) -> Params {
        Params::with_table(profile, table())
    }

    /// The same with another table (tests, fits).
    pub fn with_table(profile: &Profile, t: Table) -> Params {
        let w = &profile.wire;
        Params {
            hop: ps(w.switch_latency_us + w.cable_latency_us),
            link_byte: ps(w.link_us_per_byte),
            max_data: profile.nic.max_payload,
            overhead: t.packet_overhead_bytes,
            doorbell: ps(profile.host_nic.doorbell_us),
            poll: ps(profile.host.poll_us),
            host_send: ps(profile.host.send_us),
            pci_byte: ps(profile.host_nic.dma_us_per_byte),
            t,
        }
    }

    /// Wire time of a packet carrying `data` bytes.
    pub fn wire(&self, data: u32) -> u64 {
        u64::from(data + self.overhead) * self.link_byte
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_takes_the_profile_wire() {
        let p = Params::new(&Profile::builtin("elan3"));
        assert_eq!(p.hop, 55_000);
        assert_eq!(p.max_data, 320);
        // 378 bytes at 400 MB/s.
        assert_eq!(p.wire(320), 945_000);
    }
}
