//! A node's host memory as its NIC sees it: bytes a host is still writing
//! by programmed I/O are not there yet.
//!
//! With `pio_send` profiles (FM on a LANai 4.3) the host copies a send's
//! data into the NIC itself, and FM's streams do it one packet at a time:
//! the NIC transmits packet i while the host writes packet i+1 (dissertation
//! 2.4, `FM_send_piece`: "when enough data is sent to fill a packet, FM
//! creates a packet and writes it to the NIC"). So [`SimIo`](crate::SimIo)
//! hands a multi-packet send to the NIC once its first packet is written,
//! with the pace of the host's writes ([`PioPace`]); when the NIC takes
//! the command it records here when each byte of the buffer is written,
//! every engine read of those bytes reports when the last byte it read is
//! there, and the NIC does not start the work before it
//! ([`NicMemory::take_ready`]). Profiles whose NIC reads send data by DMA
//! record nothing, so their reads never wait.
//!
//! Writes are recorded in the NIC's command order (not when the host
//! posts, which may be ahead of the NIC), one per buffer: a later send
//! from the same buffer replaces the earlier one's record. Only a packet of
//! the earlier send read after the NIC took the later send (a
//! retransmission) can then wait for bytes it did not need; a host writes
//! one send after the other, so by then those bytes are mostly written.

use outboard_engine::{Dma, DmaFault, HostBuf, MultiCopy, PortId};

use super::host_memory::HostMemory;

use crate::time::{PerByte, Time};

/// How a host writes a send buffer by PIO: byte `k` (counted from 0) is
/// written at `start + per_byte x (k + 1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PioPace {
    /// When the host starts writing data (after its fixed send cost).
    pub start: Time,
    /// The host's PIO time per byte.
    pub per_byte: PerByte,
}

/// A send buffer the host is writing by PIO.
#[derive(Debug, Clone, Copy)]
struct PioWrite {
    addr: u64,
    len: u32,
    pace: PioPace,
}

impl PioWrite {
    /// When the first `bytes` bytes of the buffer have been written.
    fn written(&self, bytes: u64) -> Time {
        self.pace.start + self.pace.per_byte.for_bytes(bytes.min(u64::from(self.len)))
    }

    fn end(&self) -> u64 {
        self.addr + u64::from(self.len)
    }
}

/// A multi-send whose payload the engine took whole while the host was
/// still writing it: its copies' packets wait per packet instead.
#[derive(Debug, Clone, Copy)]
struct SharedWrite {
    port: PortId,
    write: PioWrite,
}

/// Simulated host memory plus the PIO writes still under way.
#[derive(Debug, Default)]
pub(crate) struct NicMemory {
    mem: HostMemory,
    writes: Vec<PioWrite>,
    shared: Vec<SharedWrite>,
    /// Receive buffers a PIO (FM) host handles packet by packet: when the
    /// NIC first wrote into each (see [`NicMemory::watch`]).
    watched: Vec<(HostBuf, Option<Time>)>,
    /// The NIC's time, for stamping writes into watched buffers.
    now: Time,
    /// The latest time a byte the engine read since the last
    /// [`NicMemory::take_ready`] is written.
    ready: Option<Time>,
}

impl NicMemory {
    pub fn new() -> NicMemory {
        NicMemory { mem: HostMemory::new(), writes: Vec::new(), shared: Vec::new(), watched: Vec::new(), now: Time::ZERO, ready: None }
    }

    /// The memory as the host's own code reaches it (no PIO waits: the
    /// host reads what it has).
    pub fn host(&mut self) -> &mut HostMemory {
        &mut self.mem
    }

    /// The NIC takes a send whose buffer `buf` the host writes at `pace`.
    /// Replaces the record of any earlier send of the same bytes and
    /// forgets writes finished by `now` (reads of them never wait).
    pub fn pio_write(&mut self, now: Time, buf: HostBuf, pace: PioPace) {
        let end = buf.addr + u64::from(buf.len);
        self.writes.retain(|w| w.written(u64::from(w.len)) > now && (w.end() <= buf.addr || w.addr >= end));
        if buf.len > 0 {
            self.writes.push(PioWrite { addr: buf.addr, len: buf.len, pace });
        }
    }

    /// The engine took the payload of a multi-send of `buf` from `port`
    /// whole (it keeps one copy for all destinations) while the host is
    /// still writing it at `pace`. FM's NIC sends each packet of a
    /// multi-send as the host writes it, so instead of waiting for the
    /// whole buffer the NIC sends each copy's packets as the host's write
    /// reaches them ([`NicMemory::packet_ready`]). Drops the pending
    /// [`NicMemory::take_ready`] of that read.
    pub fn pio_shared(&mut self, now: Time, port: PortId, buf: HostBuf, pace: PioPace) {
        self.ready = None;
        self.shared.retain(|s| s.write.written(u64::from(s.write.len)) > now);
        if buf.len > 0 {
            self.shared.push(SharedWrite { port, write: PioWrite { addr: buf.addr, len: buf.len, pace } });
        }
    }

    /// When the payload of a multi-send copy's fragment the engine just
    /// produced (`Work::multi_copy`) is written, if the host is still
    /// writing that multi-send (`port`'s latest such multi-send of the same
    /// buffer). Message fragments read from host memory report through
    /// [`NicMemory::take_ready`] instead.
    pub fn packet_ready(&self, copy: Option<MultiCopy>) -> Option<Time> {
        let c = copy?;
        let s = self.shared.iter().rev().find(|s| s.port == c.port && s.write.addr == c.buf.addr && s.write.len == c.buf.len)?;
        Some(s.write.written(u64::from(c.end)))
    }

    /// The NIC's clock for the engine call about to run.
    pub fn set_now(&mut self, now: Time) {
        self.now = now;
    }

    /// Notes when the NIC first writes into receive buffer `buf`: FM's
    /// handler copies each packet of a message out as it lands, so a host
    /// waiting for the message has copied all but the last packet by the
    /// time it is complete (see `SimIo`). Replaces an earlier watch of the
    /// same buffer.
    pub fn watch(&mut self, buf: HostBuf) {
        self.watched.retain(|(b, _)| b.addr != buf.addr);
        self.watched.push((buf, None));
    }

    /// Stops watching `buf`; when the NIC first wrote into it, if it did.
    pub fn unwatch(&mut self, buf: HostBuf) -> Option<Time> {
        let i = self.watched.iter().position(|(b, _)| b.addr == buf.addr)?;
        self.watched.swap_remove(i).1
    }

    /// The time by which every byte the engine read since the last call is
    /// written, if any of them came from a PIO write; resets.
    pub fn take_ready(&mut self) -> Option<Time> {
        self.ready.take()
    }

    fn note_read(&mut self, addr: u64, len: usize) {
        let end = addr + len as u64;
        for w in &self.writes {
            if addr < w.end() && end > w.addr {
                let t = w.written(end.saturating_sub(w.addr));
                self.ready = Some(self.ready.map_or(t, |r| r.max(t)));
            }
        }
    }
}

impl Dma for NicMemory {
    fn read(&mut self, port: PortId, addr: u64, out: &mut [u8]) -> Result<(), DmaFault> {
        self.mem.read(port, addr, out)?;
        if !self.writes.is_empty() {
            self.note_read(addr, out.len());
        }
        Ok(())
    }

    fn write(&mut self, port: PortId, addr: u64, data: &[u8]) -> Result<(), DmaFault> {
        self.mem.write(port, addr, data)?;
        let end = addr + data.len() as u64;
        for (b, first) in &mut self.watched {
            if first.is_none() && !data.is_empty() && addr < b.addr + u64::from(b.len) && end > b.addr {
                *first = Some(self.now);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_wait_for_the_last_byte_they_take() {
        let mut m = NicMemory::new();
        let buf = m.host().alloc(4096);
        let per = PerByte::from_us(0.01); // 10 ns = 10,000 ps per byte
        m.pio_write(Time::ZERO, buf, PioPace { start: Time(1_000), per_byte: per });
        let mut out = vec![0; 1024];
        m.read(PortId(0), buf.addr, &mut out).unwrap();
        assert_eq!(m.take_ready(), Some(Time(1_000 + 10_000 * 1024)));
        assert_eq!(m.take_ready(), None, "taken");
        // The last packet waits for the whole buffer; two reads in one
        // engine call report the later.
        m.read(PortId(0), buf.addr + 3072, &mut out).unwrap();
        m.read(PortId(0), buf.addr, &mut out).unwrap();
        assert_eq!(m.take_ready(), Some(Time(1_000 + 10_000 * 4096)));
        // Memory nobody writes by PIO never waits.
        let other = m.host().alloc(64);
        m.read(PortId(0), other.addr, &mut out[..64]).unwrap();
        assert_eq!(m.take_ready(), None);
        // A finished write is forgotten at the next one.
        m.pio_write(Time(100_000_000), other, PioPace { start: Time(100_000_000), per_byte: per });
        m.read(PortId(0), buf.addr, &mut out).unwrap();
        assert_eq!(m.take_ready(), None);
    }

    #[test]
    fn a_multi_send_copy_waits_for_the_bytes_its_fragment_reaches() {
        let mut m = NicMemory::new();
        let buf = m.host().alloc(4096);
        let other = m.host().alloc(4096);
        let per = PerByte::from_us(0.01);
        m.pio_shared(Time::ZERO, PortId(0), buf, PioPace { start: Time(1_000), per_byte: per });
        let copy = |buf, end| Some(MultiCopy { port: PortId(0), buf, end });
        assert_eq!(m.packet_ready(copy(buf, 2048)), Some(Time(1_000 + 10_000 * 2048)));
        // Another payload, another port, or no copy at all: nothing to wait for.
        assert_eq!(m.packet_ready(copy(other, 2048)), None);
        assert_eq!(m.packet_ready(Some(MultiCopy { port: PortId(1), buf, end: 2048 })), None);
        assert_eq!(m.packet_ready(None), None);
    }
}
