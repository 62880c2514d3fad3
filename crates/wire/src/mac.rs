//! The message authentication code every datagram carries.
//!
//! A job's engines share a [`JobSecret`] that never travels in a datagram
//! (the launcher or the bootstrap hands it to the ranks). Every packet ends
//! its header with a tag computed under a key derived from that secret and
//! the job key: a datagram whose tag does not verify - forged, corrupted,
//! from another job, or from an earlier run under another secret - is
//! refused by [`Packet::parse`](crate::Packet::parse) before any field of it
//! is read, so it cannot change any state.
//!
//! The MAC is AEGIS-128L in its MAC mode (the `aegis` crate: CAESAR
//! portfolio, IRTF CFRG draft), chosen by measured cost on this project's
//! packet sizes against SipHash-1-3 / 2-4, keyed BLAKE3, HMAC-SHA-256,
//! AES-GCM-SIV, PMAC and GMAC (docs/reliability.md, "Authenticated packets"): it is the
//! only one that keeps a 1 KiB packet inside the engine's 300 ns budget,
//! because it runs on the AES instructions. The 128-bit tag is truncated to
//! its first 64 bits, which keeps the header at 44 bytes: a forger's chance
//! per datagram is 2^-64.
//!
//! The tag also replaces version 1's CRC-32: random corruption is caught
//! with the same 2^-64 odds.
//!
//! A closed world - the simulator, whose every datagram is written by one
//! of its own engines and crosses no network - has no forger to stop, only
//! the corruption its wire model injects. There the key may be
//! [`MacKey::closed_world`]: the same 64-bit tag field, filled by a fast
//! non-cryptographic hash (rustc-hash's FxHasher over the same bytes),
//! which still catches every injected corruption with 2^-64 odds of a miss
//! and needs no keyed state cloned per packet (in a 1,024-node simulation
//! the MAC was a fifth of a host-based barrier's instructions). It
//! authenticates nothing: a driver whose datagrams cross a real network
//! must use [`MacKey::new`].

use core::fmt;
use core::ops::Range;

use aegis::aegis128l::Aegis128LMac;

/// Bytes of a [`JobSecret`].
pub const SECRET_LEN: usize = 16;
/// Bytes of the tag a packet carries.
pub const TAG_LEN: usize = 8;

/// A job's shared secret: 128 random bits, the same on every rank, never in
/// a datagram. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret([u8; SECRET_LEN]);

impl JobSecret {
    /// A secret from its bytes (the driver draws them from the operating
    /// system's random source, or a user supplies them).
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> JobSecret {
        JobSecret(bytes)
    }

    /// The secret's bytes, to hand to another rank over a trusted channel.
    pub fn to_bytes(&self) -> [u8; SECRET_LEN] {
        self.0
    }

    /// Parses exactly 32 hexadecimal digits (what `openssl rand -hex 16`
    /// prints), the form users put in `OUTBOARD_JOB_SECRET`.
    pub fn from_hex(text: &str) -> Result<JobSecret, SecretError> {
        let text = text.trim();
        if text.len() != 2 * SECRET_LEN {
            return Err(SecretError::Length { found: text.len() });
        }
        let mut out = [0u8; SECRET_LEN];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).ok_or(SecretError::NotHex)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| SecretError::NotHex)?;
        }
        Ok(JobSecret(out))
    }

    /// The 32 hexadecimal digits [`JobSecret::from_hex`] reads.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JobSecret(..)")
    }
}

/// Why a text is not a job secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not 32 characters long.
    #[error("a job secret is 32 hexadecimal digits (128 bits), found {found} characters")]
    Length {
        /// Characters found.
        found: usize,
    },
    /// A character that is not a hexadecimal digit.
    #[error("a job secret is 32 hexadecimal digits; found a character that is not one")]
    NotHex,
}

/// The key one job's packets are authenticated with, derived from the
/// job's secret and its job key, so two jobs that share a secret by mistake
/// still cannot accept each other's packets.
#[derive(Clone)]
pub struct MacKey {
    alg: Alg,
}

/// How a [`MacKey`] computes its tags.
#[derive(Clone)]
enum Alg {
    /// The MAC's state after keying, cloned per packet (keying costs more
    /// than a short packet's tag).
    Aegis(Box<Aegis128LMac<16>>),
    /// An integrity check only, seeded by the job key (see the module doc).
    ClosedWorld { seed: u64 },
}

/// Domain separation of the key derivation.
const DERIVATION_LABEL: &[u8] = b"outboard wire v2 packet mac key\0";

impl MacKey {
    /// Derives the packet key: AEGIS-128L-MAC under the secret, over a
    /// fixed label and the job key (a PRF used as a key-derivation
    /// function).
    pub fn new(secret: &JobSecret, job_key: u64) -> MacKey {
        let mut kdf = Aegis128LMac::<16>::new(&secret.0);
        kdf.update(DERIVATION_LABEL);
        kdf.update(&job_key.to_be_bytes());
        let key = kdf.finalize();
        MacKey { alg: Alg::Aegis(Box::new(Aegis128LMac::new(&key))) }
    }

    /// A key for a closed world only (the simulator): tags are a fast
    /// hash seeded by `job_key`, which catches corruption but, having no
    /// secret, authenticates nothing (see the module doc). Two jobs'
    /// packets still do not verify under each other's keys, barring the
    /// 2^-64 chance of a colliding tag.
    pub fn closed_world(job_key: u64) -> MacKey {
        MacKey { alg: Alg::ClosedWorld { seed: job_key } }
    }

    /// Whether this key authenticates (it is not [`MacKey::closed_world`]).
    pub fn authenticates(&self) -> bool {
        matches!(self.alg, Alg::Aegis(_))
    }

    /// The tag of `packet`, whose bytes in `skip` (the tag field) are not
    /// covered.
    pub(crate) fn tag(&self, packet: &[u8], skip: Range<usize>) -> [u8; TAG_LEN] {
        match &self.alg {
            Alg::Aegis(keyed) => {
                let mut mac = (**keyed).clone();
                mac.update(&packet[..skip.start]);
                mac.update(&packet[skip.end..]);
                let full = mac.finalize();
                let mut tag = [0u8; TAG_LEN];
                tag.copy_from_slice(&full[..TAG_LEN]);
                tag
            }
            Alg::ClosedWorld { seed } => {
                use core::hash::Hasher;
                let mut h = rustc_hash::FxHasher::with_seed(*seed as usize);
                h.write(&packet[..skip.start]);
                h.write(&packet[skip.end..]);
                h.finish().to_le_bytes()
            }
        }
    }

    /// Whether the tag stored at `field` is `packet`'s. The comparison is
    /// of two 64-bit words, whose time does not depend on where they differ.
    pub(crate) fn verify(&self, packet: &[u8], field: Range<usize>) -> bool {
        let expected = u64::from_ne_bytes(self.tag(packet, field.clone()));
        let mut found = [0u8; TAG_LEN];
        found.copy_from_slice(&packet[field]);
        expected == u64::from_ne_bytes(found)
    }
}

impl fmt::Debug for MacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MacKey(..)")
    }
}
