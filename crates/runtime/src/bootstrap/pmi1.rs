//! Outboard's own client of PMI-1's simple wire protocol: the key-value
//! store MPICH's Hydra (`mpiexec.mpich`) serves every process it starts, on
//! the file descriptor named by `PMI_FD`; Slurm's `srun --mpi=pmi2` serves
//! it too (its plugin answers PMI-1 as well as PMI-2). No Rust library speaks it, and a
//! C PMI library would tie the build to one MPI; the protocol is a handful
//! of text lines.
//!
//! Each request and each answer is one line of space-separated `name=value`
//! tokens, the first `cmd=...`:
//!
//! | request | answer |
//! | --- | --- |
//! | `cmd=init pmi_version=1 pmi_subversion=1` | `cmd=response_to_init ... rc=0` |
//! | `cmd=get_maxes` | `cmd=maxes kvsname_max=.. keylen_max=.. vallen_max=..` |
//! | `cmd=get_my_kvsname` | `cmd=my_kvsname kvsname=..` |
//! | `cmd=put kvsname=.. key=.. value=..` | `cmd=put_result rc=0` |
//! | `cmd=barrier_in` | `cmd=barrier_out` (once every process came in) |
//! | `cmd=get kvsname=.. key=.. srcid=-1` | `cmd=get_result rc=0 value=..` |
//! | `cmd=finalize` | `cmd=finalize_ack` |
//!
//! The store is one namespace for the whole job and its values are short
//! (`vallen_max`, 1024 under Hydra and Slurm, and Slurm takes a whole
//! request in one read of at most 1024 bytes, [`MAX_REQUEST`]) and may
//! not hold spaces, `=` or line ends; so a rank's value for `key` lives
//! under `ob.<rank>.<key>`, hex encoded, split over as many keys as it
//! needs ([`chunk_value`]). A key keeps its first value: a rank cannot put
//! the same key twice.
//!
//! The store is the launcher's: whatever a rank puts (the job secret that
//! rank 0 draws, among others) is readable by every process of the job and
//! by the launcher's own processes (Hydra's, or Slurm's `slurmstepd`),
//! and by nobody else (`PMI_FD` is a socket pair the launcher made for
//! this process).
// Adopts the inherited descriptor; see ARCHITECTURE.md's unsafe table.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;

use super::{Bootstrap, BootstrapError};

/// The longest answer line accepted (Hydra's lines are at most about
/// 1 KiB plus the names; anything far longer is not the protocol).
const MAX_LINE: usize = 64 << 10;

/// The longest request line sent, its newline included. Slurm's plugin
/// for `srun --mpi=pmi2` answers PMI-1 as well as PMI-2, but reads each
/// request with one `read` of at most 1024 bytes and takes the rest of a
/// longer line for the next request, after which neither side understands
/// the other; Hydra reads whole lines. So a `put` line must fit, not only
/// its value (`vallen_max`, 1024 under both).
pub const MAX_REQUEST: usize = 1024;

/// The value length assumed when the server's `maxes` omits it (PMI-1's
/// historical `PMI_MAX_VALLEN`).
const DEFAULT_VALLEN: usize = 1024;

/// The key length assumed when the server's `maxes` omits it.
const DEFAULT_KEYLEN: usize = 64;

/// One line of the protocol, its `name=value` tokens in order.
pub type Fields = Vec<(String, String)>;

/// The line for command `cmd` with `args`, newline included. Names and
/// values must hold no space, `=` or line end (the callers' values are hex
/// or numbers).
pub fn command(cmd: &str, args: &[(&str, &str)]) -> String {
    let mut line = format!("cmd={cmd}");
    for (k, v) in args {
        line.push(' ');
        line.push_str(k);
        line.push('=');
        line.push_str(v);
    }
    line.push('\n');
    line
}

/// The tokens of one line (its line end, if any, dropped). A token without
/// `=` is not the protocol; a value may itself hold `=` (what follows the
/// first one).
pub fn parse(line: &str) -> Result<Fields, String> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.split(' ')
        .filter(|t| !t.is_empty())
        .map(|t| t.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("token {t:?} has no '='")))
        .collect()
}

/// The value of `name` in `fields`.
pub fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// `value` as the store's values for one key, each at most `max` characters
/// of `[0-9a-f.]`: the first is `<count>.<hex>`, the others (the key's
/// chunks 1 to count-1) plain hex. `max` must leave room for the count
/// (at least 16).
pub fn chunk_value(value: &[u8], max: usize) -> Vec<String> {
    let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
    // An even chunk length keeps every byte in one chunk; the first chunk
    // gives up room for the count and its dot. Guess the count, then grow
    // it until the chunks fit (a count of more digits takes room).
    let piece = (max & !1).max(2);
    let mut count = 1usize;
    loop {
        let head = format!("{count}.").len();
        let first = (max.saturating_sub(head) & !1).max(2).min(hex.len());
        let rest = hex.len() - first;
        let need = 1 + rest.div_ceil(piece);
        if need <= count {
            let mut out = vec![format!("{count}.{}", &hex[..first])];
            out.extend(hex.as_bytes()[first..].chunks(piece).map(|c| String::from_utf8(c.to_vec()).expect("hex is ASCII")));
            while out.len() < count {
                out.push(String::new());
            }
            return out;
        }
        count = need;
    }
}

/// The number of chunks the first chunk of a value announces, and its hex.
pub fn chunk_count(first: &str) -> Option<(usize, &str)> {
    let (n, hex) = first.split_once('.')?;
    let n: usize = n.parse().ok()?;
    (n >= 1).then_some((n, hex))
}

/// The bytes of a value from its chunks, in order (as [`chunk_value`] made
/// them).
pub fn unchunk_value<S: AsRef<str>>(chunks: &[S]) -> Option<Vec<u8>> {
    let (n, first) = chunk_count(chunks.first()?.as_ref())?;
    if n != chunks.len() {
        return None;
    }
    let hex: String = std::iter::once(first).chain(chunks[1..].iter().map(AsRef::as_ref)).collect();
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

/// The store's key of chunk `i` of `rank`'s value for `key`.
fn store_key(rank: u32, key: &str, i: usize) -> String {
    match i {
        0 => format!("ob.{rank}.{key}"),
        _ => format!("ob.{rank}.{key}.{i}"),
    }
}

/// The connection to the PMI server, reads buffered across requests.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    /// Sends `line` and reads the answer, which must be `cmd=<expect>` and,
    /// where it carries an `rc`, `rc=0`.
    fn ask(&mut self, line: &str, expect: &str) -> Result<Fields, BootstrapError> {
        let fields = self.exchange(line, expect)?;
        match refusal(&fields) {
            None => Ok(fields),
            Some(why) => Err(BootstrapError::Protocol(format!("PMI server refused {}: {why}", name_of(line)))),
        }
    }

    /// Sends `line` and reads the answer, which must be `cmd=<expect>`,
    /// whatever its `rc`.
    fn exchange(&mut self, line: &str, expect: &str) -> Result<Fields, BootstrapError> {
        let what = name_of(line);
        self.writer.write_all(line.as_bytes()).map_err(|e| io_error(&what, e))?;
        let mut answer = Vec::new();
        let n = (&mut self.reader).take(MAX_LINE as u64).read_until(b'\n', &mut answer).map_err(|e| io_error(&what, e))?;
        if n == 0 {
            return Err(BootstrapError::Protocol(format!("PMI server closed the connection after {what}")));
        }
        if answer.last() != Some(&b'\n') {
            return Err(BootstrapError::Protocol(format!("PMI server's answer to {what} is not a line of at most {MAX_LINE} bytes")));
        }
        let text = String::from_utf8(answer).map_err(|_| BootstrapError::Protocol(format!("PMI server's answer to {what} is not text")))?;
        let fields = parse(&text).map_err(|e| BootstrapError::Protocol(format!("PMI server's answer to {what}: {e}")))?;
        if field(&fields, "cmd") != Some(expect) {
            return Err(BootstrapError::Protocol(format!("PMI server answered {what} with {:?}, not cmd={expect}", text.trim_end())));
        }
        Ok(fields)
    }
}

/// `cmd=<name>` of a request line, for messages.
fn name_of(line: &str) -> String {
    line.split(' ').next().unwrap_or(line).trim_end().to_string()
}

/// Why an answer says no (`rc` other than 0), if it does.
fn refusal(fields: &Fields) -> Option<String> {
    let rc = field(fields, "rc").filter(|rc| *rc != "0")?;
    Some(format!("rc={rc} ({})", field(fields, "msg").unwrap_or("no reason given")))
}

fn io_error(what: &str, e: io::Error) -> BootstrapError {
    BootstrapError::Protocol(format!("talking to the PMI server ({what}): {e}"))
}

/// A [`Bootstrap`] over a PMI-1 server (MPICH's Hydra).
pub struct Pmi1Bootstrap {
    rank: u32,
    size: u32,
    kvsname: String,
    vallen: usize,
    keylen: usize,
    conn: RefCell<Conn>,
    put: BTreeSet<String>,
    finalized: bool,
}

impl Pmi1Bootstrap {
    /// Takes over the descriptor `PMI_FD` names (a socket the launcher made
    /// for this process alone) and speaks PMI-1 on it as rank `rank` of
    /// `size`.
    pub fn from_fd(fd: i32, rank: u32, size: u32) -> Result<Pmi1Bootstrap, BootstrapError> {
        use std::os::fd::FromRawFd;
        // An fd that is not open, or not a socket, would make `from_raw_fd`
        // take over something else; ask the kernel first.
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fstat` only writes the `stat` it is given, which lives
        // for the call; a bad descriptor is an error return, not UB.
        if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            return Err(BootstrapError::Environment(format!("PMI_FD={fd} is not an open file descriptor ({e}): start the program with mpiexec, or unset PMI_FD")));
        }
        // SAFETY: `fstat` succeeded, so it filled the whole struct.
        let mode = unsafe { st.assume_init() }.st_mode;
        if mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(BootstrapError::Environment(format!("PMI_FD={fd} is not a socket: start the program with mpiexec, or unset PMI_FD")));
        }
        // SAFETY: the descriptor is open and a socket (checked above); the
        // launcher handed it to this process for PMI alone, and this is its
        // only user in the process (the PMPI library bootstraps through MPI,
        // not through PMI_FD), so taking ownership closes it exactly once.
        let stream = unsafe { UnixStream::from_raw_fd(fd) };
        // Launched children (a node engine) must not hold the job's PMI
        // connection open after this process closes it.
        nix::fcntl::fcntl(&stream, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC)).map_err(|e| io_error("init", e.into()))?;
        Self::over(stream, rank, size)
    }

    /// Speaks PMI-1 over `stream` (for tests: one end of a socket pair).
    pub fn over(stream: UnixStream, rank: u32, size: u32) -> Result<Pmi1Bootstrap, BootstrapError> {
        if size == 0 || rank >= size {
            return Err(BootstrapError::Environment(format!("PMI_RANK={rank} is not below PMI_SIZE={size}")));
        }
        let writer = stream.try_clone().map_err(|e| io_error("init", e))?;
        let mut conn = Conn { reader: BufReader::new(stream), writer };
        conn.ask(&command("init", &[("pmi_version", "1"), ("pmi_subversion", "1")]), "response_to_init")?;
        let maxes = conn.ask(&command("get_maxes", &[]), "maxes")?;
        let number = |name: &str, default: usize| field(&maxes, name).and_then(|v| v.parse().ok()).unwrap_or(default);
        let vallen = number("vallen_max", DEFAULT_VALLEN);
        let keylen = number("keylen_max", DEFAULT_KEYLEN);
        if vallen < 32 {
            return Err(BootstrapError::Protocol(format!("PMI server allows values of only {vallen} characters")));
        }
        let kvs = conn.ask(&command("get_my_kvsname", &[]), "my_kvsname")?;
        let kvsname = field(&kvs, "kvsname").filter(|k| !k.is_empty()).ok_or_else(|| BootstrapError::Protocol("PMI server named no key-value space".into()))?.to_string();
        Ok(Pmi1Bootstrap { rank, size, kvsname, vallen, keylen, conn: RefCell::new(conn), put: BTreeSet::new(), finalized: false })
    }

    /// The longest value chunk of `key`: the server's limit less one (some
    /// count the C string's terminating NUL in it), and short enough that
    /// the whole `put` line fits in [`MAX_REQUEST`] with the longest chunk
    /// key a value could need (a chunk index of 7 digits).
    fn chunk_len(&self, key: &str) -> usize {
        let line = command("put", &[("kvsname", &self.kvsname), ("key", &store_key(self.rank, key, 9_999_999)), ("value", "")]);
        (self.vallen - 1).min(MAX_REQUEST.saturating_sub(line.len()))
    }

    /// Tells the server this process is done with PMI (Hydra expects it
    /// before the process exits). Once; dropping does it too.
    pub fn finalize(&mut self) -> Result<(), BootstrapError> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        self.conn.get_mut().ask(&command("finalize", &[]), "finalize_ack").map(drop)
    }

    fn get_key(&self, key: &str) -> Result<Option<String>, BootstrapError> {
        let line = command("get", &[("kvsname", &self.kvsname), ("key", key), ("srcid", "-1")]);
        let f = self.conn.borrow_mut().exchange(&line, "get_result")?;
        // A key nobody put is a refusal (Hydra: rc=-1).
        Ok(refusal(&f).is_none().then(|| field(&f, "value").unwrap_or("").to_string()))
    }
}

impl Bootstrap for Pmi1Bootstrap {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn put(&mut self, key: &str, value: &[u8]) -> Result<(), BootstrapError> {
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(BootstrapError::Protocol(format!("key {key:?} is not letters, digits and '_' (PMI-1 store)")));
        }
        if !self.put.insert(key.to_string()) {
            return Err(BootstrapError::Protocol(format!("key {key:?} put twice: the PMI-1 store keeps a key's first value")));
        }
        let max = self.chunk_len(key);
        if max < 32 {
            return Err(BootstrapError::Protocol(format!("key {key:?} leaves room for only {max} characters of value in a PMI-1 request of {MAX_REQUEST} bytes")));
        }
        let chunks = chunk_value(value, max);
        let longest = store_key(self.rank, key, chunks.len() - 1);
        if longest.len() >= self.keylen {
            return Err(BootstrapError::Protocol(format!("key {longest:?} is longer than the PMI server's {} characters", self.keylen - 1)));
        }
        let conn = self.conn.get_mut();
        for (i, c) in chunks.iter().enumerate() {
            let k = store_key(self.rank, key, i);
            conn.ask(&command("put", &[("kvsname", &self.kvsname), ("key", &k), ("value", c)]), "put_result")?;
        }
        Ok(())
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        self.conn.get_mut().ask(&command("barrier_in", &[]), "barrier_out").map(drop)
    }

    fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, BootstrapError> {
        let missing = || BootstrapError::Missing { rank, key: key.to_string() };
        let first = self.get_key(&store_key(rank, key, 0))?.ok_or_else(missing)?;
        let (n, _) = chunk_count(&first).ok_or_else(|| BootstrapError::Protocol(format!("rank {rank}'s value for {key:?} in the PMI store is malformed")))?;
        let mut chunks = vec![first];
        for i in 1..n {
            chunks.push(self.get_key(&store_key(rank, key, i))?.ok_or_else(missing)?);
        }
        unchunk_value(&chunks).ok_or_else(|| BootstrapError::Protocol(format!("rank {rank}'s value for {key:?} in the PMI store is malformed")))
    }
}

impl Drop for Pmi1Bootstrap {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::{Arc, Barrier, Mutex};

    proptest! {
        #[test]
        fn lines_round_trip(cmd in "[a-z_]{1,12}", args in proptest::collection::vec(("[a-z_]{1,10}", "[0-9a-zA-Z._-]{0,40}"), 0..6)) {
            let borrowed: Vec<(&str, &str)> = args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let line = command(&cmd, &borrowed);
            prop_assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
            let fields = parse(&line).unwrap();
            prop_assert_eq!(field(&fields, "cmd"), Some(cmd.as_str()));
            let back: Vec<(String, String)> = fields[1..].to_vec();
            prop_assert_eq!(back, args);
        }

        #[test]
        fn values_survive_chunking(value in proptest::collection::vec(any::<u8>(), 0..3000), max in 16usize..1100) {
            let chunks = chunk_value(&value, max);
            for c in &chunks {
                prop_assert!(c.len() <= max, "chunk of {} > {}", c.len(), max);
                prop_assert!(c.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase() || b == b'.'), "{}", c);
            }
            prop_assert_eq!(chunk_count(&chunks[0]).map(|(n, _)| n), Some(chunks.len()));
            prop_assert_eq!(unchunk_value(&chunks), Some(value));
        }
    }

    #[test]
    fn the_codec_reads_what_hydra_writes() {
        let f = parse("cmd=get_result rc=0 msg=success value=3.0a0b=c\n").unwrap();
        assert_eq!(field(&f, "value"), Some("3.0a0b=c"), "a value keeps its '='");
        assert!(parse("cmd=barrier_out  \n").is_ok(), "extra spaces");
        assert!(parse("cmd=x junk\n").is_err());
        assert_eq!(chunk_value(b"", 16), vec!["1.".to_string()]);
        assert_eq!(unchunk_value(&["1.6869"]), Some(b"hi".to_vec()));
        assert_eq!(unchunk_value(&["2.68"]), None, "a chunk missing");
        assert_eq!(unchunk_value(&["1.686"]), None, "half a byte");
        assert_eq!(unchunk_value(&["x.68"]), None);
    }

    /// A PMI-1 server for `n` ranks, as Hydra answers (its `maxes` given),
    /// one thread per rank over a socket pair; returns each rank's end.
    fn fake_server(n: u32, vallen: usize) -> Vec<UnixStream> {
        let kvs: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
        let barrier = Arc::new(Barrier::new(n as usize));
        (0..n)
            .map(|_| {
                let (mine, theirs) = UnixStream::pair().unwrap();
                let (kvs, barrier) = (kvs.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut w = theirs.try_clone().unwrap();
                    for line in BufReader::new(theirs).lines() {
                        let line = line.unwrap();
                        // Slurm's server reads at most this much per request.
                        assert!(line.len() < MAX_REQUEST, "a request of {} bytes with its newline: {line:.60}...", line.len() + 1);
                        let f = parse(&line).unwrap();
                        let reply = match field(&f, "cmd").unwrap() {
                            "init" => command("response_to_init", &[("pmi_version", "1"), ("pmi_subversion", "1"), ("rc", "0")]),
                            "get_maxes" => command("maxes", &[("kvsname_max", "256"), ("keylen_max", "64"), ("vallen_max", &vallen.to_string())]),
                            "get_my_kvsname" => command("my_kvsname", &[("kvsname", "kvs_42_0")]),
                            "put" => {
                                let (k, v) = (field(&f, "key").unwrap(), field(&f, "value").unwrap());
                                assert!(v.len() < vallen, "value of {} characters", v.len());
                                assert_eq!(field(&f, "kvsname"), Some("kvs_42_0"));
                                kvs.lock().unwrap().insert(k.into(), v.into());
                                command("put_result", &[("rc", "0"), ("msg", "success")])
                            }
                            "barrier_in" => {
                                barrier.wait();
                                command("barrier_out", &[])
                            }
                            "get" => match kvs.lock().unwrap().get(field(&f, "key").unwrap()) {
                                Some(v) => command("get_result", &[("rc", "0"), ("msg", "success"), ("value", v)]),
                                None => command("get_result", &[("rc", "-1"), ("msg", "key_not_found")]),
                            },
                            "finalize" => {
                                let _ = w.write_all(command("finalize_ack", &[]).as_bytes());
                                return;
                            }
                            other => panic!("unknown command {other}"),
                        };
                        w.write_all(reply.as_bytes()).unwrap();
                    }
                });
                mine
            })
            .collect()
    }

    #[test]
    fn ranks_exchange_long_and_short_values_through_a_pmi1_server() {
        let n = 4;
        let ranks: Vec<_> = fake_server(n, 64)
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                std::thread::spawn(move || {
                    let r = r as u32;
                    let mut b = Pmi1Bootstrap::over(s, r, n).unwrap();
                    b.put("udp", format!("127.0.0.1:{}", 5000 + r).as_bytes()).unwrap();
                    if r == 0 {
                        b.put("secret", &[0xab; 300]).unwrap();
                    }
                    assert!(b.put("udp", b"again").is_err(), "a key keeps its first value");
                    b.fence().unwrap();
                    let addrs: Vec<Vec<u8>> = (0..n).map(|q| b.get(q, "udp").unwrap()).collect();
                    assert_eq!(b.get(0, "secret").unwrap(), vec![0xab; 300]);
                    assert!(matches!(b.get(1, "secret"), Err(BootstrapError::Missing { rank: 1, .. })));
                    b.put("ep", &[r as u8; 5]).unwrap();
                    b.fence().unwrap();
                    for q in 0..n {
                        assert_eq!(b.get(q, "ep").unwrap(), vec![q as u8; 5]);
                    }
                    b.finalize().unwrap();
                    addrs
                })
            })
            .collect();
        for t in ranks {
            let addrs = t.join().unwrap();
            for (q, a) in addrs.iter().enumerate() {
                assert_eq!(a, format!("127.0.0.1:{}", 5000 + q).as_bytes());
            }
        }
    }

    /// With the value limit of Hydra and Slurm (1024), long values go in
    /// chunks whose `put` lines fit in one of Slurm's 1024-byte reads (the
    /// fake server checks every line).
    #[test]
    fn long_values_go_in_put_lines_of_at_most_1024_bytes() {
        let n = 2;
        let long = |r: u32| -> Vec<u8> { (0..20_000u32).map(|i| (i * 7 + r) as u8).collect() };
        let ranks: Vec<_> = fake_server(n, 1024)
            .into_iter()
            .enumerate()
            .map(|(r, s)| {
                std::thread::spawn(move || {
                    let r = r as u32;
                    let mut b = Pmi1Bootstrap::over(s, r, n).unwrap();
                    b.put("a_rather_long_key_name_for_the_value", &long(r)).unwrap();
                    b.fence().unwrap();
                    for q in 0..n {
                        assert_eq!(b.get(q, "a_rather_long_key_name_for_the_value").unwrap(), long(q));
                    }
                    b.finalize().unwrap();
                })
            })
            .collect();
        for t in ranks {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_server_that_refuses_or_is_not_pmi1_is_an_error() {
        let (mine, theirs) = UnixStream::pair().unwrap();
        std::thread::spawn(move || {
            let mut w = theirs.try_clone().unwrap();
            let mut l = String::new();
            BufReader::new(theirs).read_line(&mut l).unwrap();
            // A PMI-2 server's answer to a PMI-1 init.
            w.write_all(b"cmd=response_to_init pmi_version=2 rc=-1\n").unwrap();
        });
        let e = Pmi1Bootstrap::over(mine, 0, 2).err().unwrap().to_string();
        assert!(e.contains("refused cmd=init"), "{e}");
        let (mine, theirs) = UnixStream::pair().unwrap();
        drop(theirs);
        assert!(Pmi1Bootstrap::over(mine, 0, 2).is_err());
    }
}
