//! Cost of each candidate packet MAC at the engine's packet sizes, on this
//! machine: the measurement behind the choice in crates/wire/src/mac.rs
//! (README, "Authenticated packets"). Each figure is the median of 7 runs
//! of 100,000 tags over one buffer; CRC-32 (what version 1 of the wire
//! format carried, no authentication) is the reference.

use std::hash::Hasher;
use std::hint::black_box;
use std::time::Instant;

const SIZES: [usize; 4] = [64, 1024, 4096, 8192];

/// Median nanoseconds per call of `f` over a `len`-byte buffer.
fn time(len: usize, f: &mut dyn FnMut(&[u8]) -> u64) -> f64 {
    let buf: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let n = 100_000;
    let mut acc = 0u64;
    for _ in 0..1_000 {
        acc ^= f(&buf);
    }
    let mut runs: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                acc ^= f(black_box(&buf));
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    black_box(acc);
    runs.sort_by(|a, b| a.total_cmp(b));
    runs[3]
}

fn first_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("tags are at least 8 bytes"))
}

fn main() {
    let key16 = [0x42u8; 16];
    let key32 = [0x42u8; 32];
    let aegis = aegis::aegis128l::Aegis128LMac::<16>::new(&key16);
    let gcm_siv = {
        use aes_gcm_siv::KeyInit;
        aes_gcm_siv::Aes128GcmSiv::new_from_slice(&key16).expect("16-byte key")
    };
    let gmac = ring::aead::LessSafeKey::new(ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &key16).expect("16-byte key"));
    let hmac = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key32);
    let pmac = {
        use aes::cipher::KeyInit;
        <pmac::Pmac<aes::Aes128> as KeyInit>::new_from_slice(&key16).expect("16-byte key")
    };
    let mut candidates: Vec<(&str, Box<dyn FnMut(&[u8]) -> u64>)> = vec![
        ("AEGIS-128L MAC (aegis)", Box::new(move |b| {
            let mut m = aegis.clone();
            m.update(b);
            first_u64(&m.finalize())
        })),
        ("SipHash-1-3 (siphasher)", Box::new(|b| {
            let mut h = siphasher::sip::SipHasher13::new_with_key(&key16);
            h.write(b);
            h.finish()
        })),
        ("SipHash-2-4 128 (siphasher)", Box::new(|b| {
            use siphasher::sip128::Hasher128;
            let mut h = siphasher::sip128::SipHasher24::new_with_key(&key16);
            h.write(b);
            h.finish128().h1
        })),
        ("BLAKE3 keyed (blake3)", Box::new(|b| first_u64(blake3::keyed_hash(&key32, b).as_bytes()))),
        ("HMAC-SHA-256 (ring)", Box::new(move |b| first_u64(ring::hmac::sign(&hmac, b).as_ref()))),
        ("AES-GCM-SIV, data as AAD (aes-gcm-siv)", Box::new(move |b| {
            use aes_gcm_siv::aead::AeadInPlace;
            let mut empty: [u8; 0] = [];
            let tag = gcm_siv.encrypt_in_place_detached(aes_gcm_siv::Nonce::from_slice(&[0; 12]), b, &mut empty).expect("fits");
            first_u64(&tag)
        })),
        ("GMAC, data as AAD (ring)", Box::new(move |b| {
            let mut empty: [u8; 0] = [];
            let nonce = ring::aead::Nonce::assume_unique_for_key([1; 12]);
            let tag = gmac.seal_in_place_separate_tag(nonce, ring::aead::Aad::from(b), &mut empty).expect("fits");
            first_u64(tag.as_ref())
        })),
        ("PMAC-AES-128 (pmac)", Box::new(move |b| {
            use pmac::Mac;
            let mut m = pmac.clone();
            m.update(b);
            first_u64(&m.finalize().into_bytes())
        })),
        ("CRC-32, no authentication (crc32fast)", Box::new(|b| u64::from(crc32fast::hash(b)))),
    ];
    print!("{:<40}", "ns per packet");
    for s in SIZES {
        print!("{:>9}", format!("{s} B"));
    }
    println!();
    for (name, f) in candidates.iter_mut() {
        print!("{name:<40}");
        for s in SIZES {
            print!("{:>9.0}", time(s, f.as_mut()));
        }
        println!();
    }
}
