//! A group's shared file on its node and where things lie in it.
//!
//! ```text
//! 0                      header: magic, members attached, sleepers
//! LINE * (1 + Ri + k)    member i's record for rounds s with s % R = k
//!                        (R = RECORDS): arrival, call (2 words), then
//!                        INLINE bytes of data
//! LINE * (1 + Rn + i)    member i's done (the last round it finished
//!                        reading) and folded (the last round whose
//!                        share of a reduction it folded)
//! data                   the result slot, then one slot per member
//! flat                   member i's ring of RECORDS flat data areas
//!                        (FLAT_DATA bytes each), for flat calls too long
//!                        for a record
//! ```
//!
//! Each line is written by one process only (a member its records and
//! its done line) and is a cache line pair of its own, so that
//! waiting on one never bounces another's. A record holds its round's
//! arrival, call and a short contribution in one cache line: one transfer
//! tells a waiting member all it needs. Each member has a ring of
//! [`RECORDS`] records because a member may publish rounds ahead of the
//! others' reading them: a split-phase call publishes at its start and
//! reads at its test. A member writes its record for round `s` only once
//! every member's done has reached `s - RECORDS`, the round that record
//! held before. The file lives in `/dev/shm` under a name
//! made of the job, the node, the group's id, a digest of its members and
//! how many groups of that id and membership this process made before, so
//! that every member of one group, and nobody else, opens the same file;
//! the member that attaches last removes the name, and the memory goes
//! with the last mapping.

use std::fs::OpenOptions;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::shm::{page_size, Segment};

/// Bytes per line: two cache lines, so that the adjacent-line prefetcher
/// does not couple neighbours.
pub const LINE: u64 = 128;

/// Bytes of a data slot: what one round of a collective moves; longer
/// data goes in rounds of this size.
pub const SLOT: u64 = 64 * 1024;

/// Bytes of data a record carries beside its arrival and call (the rest
/// of its first cache line).
pub const INLINE: usize = 40;

const RECORD_DATA: u64 = 24;

/// Records per member: how many rounds a member may publish ahead of the
/// slowest member's reading.
pub const RECORDS: u64 = 8;

/// Most bytes of data a flat round carries per member: up to [`INLINE`]
/// in the record, longer in the record's flat data area.
pub const FLAT_DATA: usize = 4096;

const MAGIC: u64 = u64::from_le_bytes(*b"obnodeco");

/// Where a group's region is named: what makes it this job's, this
/// node's and this group's.
#[derive(Debug, Clone)]
pub struct RegionName {
    /// The job's key.
    pub job_key: u64,
    /// When the job started (a job key may be chosen by hand and reused).
    pub boot: u64,
    /// This node's id.
    pub node: u32,
    /// The group's id.
    pub group: u64,
    /// The group's members, world ranks in group-rank order.
    pub members: Vec<u32>,
    /// How many groups of this id and membership this process made before.
    pub incarnation: u32,
}

impl RegionName {
    /// The prefix of every region of a job on a node (for removing what a
    /// failed job left).
    pub fn job_prefix(job_key: u64, boot: u64, node: u32) -> String {
        format!("outboard-{job_key:016x}-{boot:x}-n{node}-")
    }

    fn path(&self) -> PathBuf {
        let mut h = DefaultHasher::new();
        self.members.hash(&mut h);
        let prefix = Self::job_prefix(self.job_key, self.boot, self.node);
        PathBuf::from(format!("/dev/shm/{prefix}g{}-{:016x}-{}", self.group, h.finish(), self.incarnation))
    }
}

/// Removes the names of every region job `job_key` (started at `boot`)
/// left on node `node`: those of groups some member never attached to
/// (it died first). The node engine does it when the job's last process
/// on the node is gone; mappings still open keep their memory.
pub fn remove_job_regions(job_key: u64, boot: u64, node: u32) {
    let prefix = RegionName::job_prefix(job_key, boot, node);
    let Ok(dir) = std::fs::read_dir("/dev/shm") else { return };
    for e in dir.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A group's mapped region and its layout.
pub struct Region {
    seg: Segment,
    n: u64,
}

impl Region {
    /// Opens (creating it if this member is first) the region of a group
    /// of `n` members and attaches to it; the last member to attach
    /// removes its name.
    pub fn attach(name: &RegionName) -> io::Result<Region> {
        let n = name.members.len() as u64;
        let len = (LINE * (1 + (RECORDS + 1) * n) + SLOT * (1 + n) + FLAT_DATA as u64 * RECORDS * n).next_multiple_of(page_size() as u64);
        let path = name.path();
        // Never truncated: another member may be using it already.
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)?;
        // Every member sets the same size; setting it again changes
        // nothing, so the order members arrive in does not matter.
        file.set_len(len)?;
        let seg = Segment::open_file(file.into(), len as usize)?;
        let r = Region { seg, n };
        let magic = r.word(0);
        if let Err(found) = magic.compare_exchange(0, MAGIC, Ordering::AcqRel, Ordering::Acquire) {
            if found != MAGIC {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a group's region", path.display())));
            }
        }
        if r.word(8).fetch_add(1, Ordering::AcqRel) + 1 == n {
            std::fs::remove_file(&path)?;
        }
        Ok(r)
    }

    /// How many waiters sleep on the region's words (the header's third
    /// word).
    pub fn sleepers(&self) -> &AtomicU64 {
        self.word(16)
    }

    /// The 64-bit word at `off`.
    pub fn word(&self, off: u64) -> &AtomicU64 {
        self.seg.atomic_u64(off).expect("region offsets are aligned and inside by construction")
    }

    fn record(&self, i: usize, round: u64) -> u64 {
        LINE * (1 + RECORDS * i as u64 + round % RECORDS)
    }

    /// Member `i`'s arrival in `round`'s record: the sequence number of
    /// the last round it entered there.
    pub fn arrival(&self, i: usize, round: u64) -> &AtomicU64 {
        self.word(self.record(i, round))
    }

    /// Word `w` (0 or 1) of member `i`'s call in `round`.
    pub fn call_word(&self, i: usize, round: u64, w: u64) -> &AtomicU64 {
        self.word(self.record(i, round) + 8 * (1 + w))
    }

    /// Where member `i`'s short data for `round` lies ([`INLINE`] bytes).
    pub fn inline_data(&self, i: usize, round: u64) -> u64 {
        self.record(i, round) + RECORD_DATA
    }

    /// Member `i`'s done: the last round whose records and slots it has
    /// finished reading (rounds finish in order at each member).
    pub fn done(&self, i: usize) -> &AtomicU64 {
        self.word(LINE * (1 + RECORDS * self.n + i as u64))
    }

    /// Member `i`'s folded: the last round through the slots whose share
    /// of a reduction it folded into the result slot.
    pub fn folded(&self, i: usize) -> &AtomicU64 {
        self.word(LINE * (1 + RECORDS * self.n + i as u64) + 8)
    }

    fn data(&self) -> u64 {
        LINE * (1 + (RECORDS + 1) * self.n)
    }

    /// The result slot's offset.
    pub fn result_slot(&self) -> u64 {
        self.data()
    }

    /// Member `i`'s slot's offset.
    pub fn slot(&self, i: usize) -> u64 {
        self.data() + SLOT * (1 + i as u64)
    }

    /// Where member `i`'s data of `len` bytes for flat round `round`
    /// lies: in the record when it fits, else in the record's flat data
    /// area ([`FLAT_DATA`] bytes).
    pub fn flat_data(&self, i: usize, round: u64, len: usize) -> u64 {
        if len <= INLINE {
            return self.inline_data(i, round);
        }
        self.data() + SLOT * (1 + self.n) + FLAT_DATA as u64 * (RECORDS * i as u64 + round % RECORDS)
    }

    /// Copies `out.len()` bytes at `off` out.
    pub fn read(&self, off: u64, out: &mut [u8]) {
        self.seg.read(off, out).expect("slot accesses lie inside by construction");
    }

    /// Copies `data` to `off`.
    pub fn write(&self, off: u64, data: &[u8]) {
        self.seg.write(off, data).expect("slot accesses lie inside by construction");
    }
}
