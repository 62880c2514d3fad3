//! A bootstrap over an allgather the caller supplies: for processes that
//! already belong to a job with its own communication (an MPI job brought
//! up by `MPI_Init`), so Outboard needs no rendezvous and no environment.
//!
//! `put`s are collected locally; `fence` runs two allgathers (every rank's
//! encoded length, then the encodings padded to the longest) and keeps
//! every rank's values for `get`. Rank 0's job key (and whatever else rank
//! 0 alone puts) reaches the others through the same fence.

use std::collections::BTreeMap;

use super::{Bootstrap, BootstrapError};

/// The collective the caller supplies: every rank passes a slice of the
/// same length; each gets back all ranks' slices, concatenated in rank
/// order (`MPI_Allgather` of bytes). Errors are the caller's words.
pub type Allgather = Box<dyn FnMut(&[u8]) -> Result<Vec<u8>, String> + Send>;

/// A [`Bootstrap`] whose fence is an allgather the caller runs.
pub struct ExchangeBootstrap {
    rank: u32,
    size: u32,
    allgather: Allgather,
    mine: BTreeMap<String, Vec<u8>>,
    all: Vec<BTreeMap<String, Vec<u8>>>,
}

impl ExchangeBootstrap {
    /// This process is `rank` of `size`; `allgather` exchanges bytes among
    /// all of them.
    pub fn new(rank: u32, size: u32, allgather: Allgather) -> Result<Self, BootstrapError> {
        if size == 0 || rank >= size {
            return Err(BootstrapError::Environment(format!("rank {rank} is not below size {size}")));
        }
        Ok(ExchangeBootstrap { rank, size, allgather, mine: BTreeMap::new(), all: Vec::new() })
    }

    fn gather(&mut self, mine: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        let all = (self.allgather)(mine).map_err(|e| BootstrapError::Protocol(format!("allgather failed: {e}")))?;
        if all.len() != mine.len() * self.size as usize {
            return Err(BootstrapError::Protocol(format!(
                "allgather returned {} bytes for {} ranks of {}",
                all.len(),
                self.size,
                mine.len()
            )));
        }
        Ok(all)
    }
}

/// `u32 count, then per entry u32 key length, key, u32 value length, value`
/// (little-endian).
fn encode(map: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = (map.len() as u32).to_le_bytes().to_vec();
    for (k, v) in map {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

fn decode(mut b: &[u8]) -> Option<BTreeMap<String, Vec<u8>>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (h, t) = b.split_at(n);
        *b = t;
        Some(h)
    }
    fn len(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize)
    }
    let n = len(&mut b)?;
    let mut map = BTreeMap::new();
    for _ in 0..n {
        let kl = len(&mut b)?;
        let k = String::from_utf8(take(&mut b, kl)?.to_vec()).ok()?;
        let vl = len(&mut b)?;
        map.insert(k, take(&mut b, vl)?.to_vec());
    }
    Some(map)
}

impl Bootstrap for ExchangeBootstrap {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        self.mine.insert(key.to_string(), value.to_vec());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), BootstrapError> {
        let mut mine = encode(&self.mine);
        let lens = self.gather(&(mine.len() as u32).to_le_bytes())?;
        let longest = lens.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize).max().unwrap_or(0);
        mine.resize(longest, 0);
        let all = self.gather(&mine)?;
        self.all = all
            .chunks_exact(longest.max(1))
            .take(self.size as usize)
            .enumerate()
            .map(|(r, c)| decode(c).ok_or_else(|| BootstrapError::Protocol(format!("rank {r} sent a bad exchange"))))
            .collect::<Result<_, _>>()?;
        if longest == 0 {
            self.all = vec![BTreeMap::new(); self.size as usize];
        }
        Ok(())
    }
    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        self.all
            .get(rank as usize)
            .and_then(|m| m.get(key))
            .cloned()
            .ok_or_else(|| BootstrapError::Missing { rank, key: key.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    /// An in-process allgather among `n` threads.
    fn allgathers(n: u32) -> Vec<Allgather> {
        let slots = Arc::new(Mutex::new(vec![Vec::new(); n as usize]));
        let barrier = Arc::new(Barrier::new(n as usize));
        (0..n)
            .map(|r| {
                let (slots, barrier) = (slots.clone(), barrier.clone());
                Box::new(move |mine: &[u8]| {
                    slots.lock().unwrap()[r as usize] = mine.to_vec();
                    barrier.wait();
                    let all = slots.lock().unwrap().concat();
                    barrier.wait();
                    Ok(all)
                }) as Allgather
            })
            .collect()
    }

    #[test]
    fn values_put_before_a_fence_are_seen_by_every_rank() {
        let handles: Vec<_> = allgathers(3)
            .into_iter()
            .enumerate()
            .map(|(r, ag)| {
                std::thread::spawn(move || {
                    let mut b = ExchangeBootstrap::new(r as u32, 3, ag).unwrap();
                    b.put("udp", format!("addr-{r}").repeat(r + 1).as_bytes()).unwrap();
                    if r == 0 {
                        b.put("job_key", &[7; 8]).unwrap();
                    }
                    b.fence().unwrap();
                    let seen: Vec<Vec<u8>> = (0..3).map(|q| b.get(q, "udp").unwrap()).collect();
                    assert_eq!(b.get(0, "job_key").unwrap(), vec![7; 8]);
                    assert!(matches!(b.get(1, "job_key"), Err(BootstrapError::Missing { rank: 1, .. })));
                    b.fence().unwrap();
                    seen
                })
            })
            .collect();
        for h in handles {
            let seen = h.join().unwrap();
            for (q, v) in seen.iter().enumerate() {
                assert_eq!(v, format!("addr-{q}").repeat(q + 1).as_bytes());
            }
        }
    }

    #[test]
    fn a_failing_or_short_allgather_is_an_error() {
        let mut b = ExchangeBootstrap::new(0, 2, Box::new(|_: &[u8]| Err("broken".into()))).unwrap();
        assert!(b.fence().unwrap_err().to_string().contains("broken"));
        let mut b = ExchangeBootstrap::new(0, 2, Box::new(|m: &[u8]| Ok(m.to_vec()))).unwrap();
        assert!(b.fence().is_err(), "one rank's bytes for two ranks");
        assert!(ExchangeBootstrap::new(2, 2, Box::new(|m: &[u8]| Ok(m.to_vec()))).is_err());
    }
}
