//! NICVM modules on the engine, through the seeded lossy test network:
//! the paper's Figure 2 broadcast reaches every rank exactly once; hostile
//! modules are stopped, counted per module and stall nothing; modules live
//! as long as they should.

use outboard_engine::*;
use outboard_testnet::{LinkConfig, Network};
use proptest::prelude::*;

mod common;
use common::{cfg, P0};

const G: GroupId = GroupId(77);
const BCAST: &str = include_str!("../../nicvm/modules/bcast.nvm");
const ECHO: &str = include_str!("../../nicvm/modules/echo.nvm");

fn lossy() -> LinkConfig {
    LinkConfig::lossy(0.3, 0.1, 0.01)
}

fn bytecode(src: &str) -> Vec<u8> {
    outboard_nicvm::compile(src).unwrap_or_else(|e| panic!("{e}")).module.bytecode().encode()
}

/// `n` ranks, each with port 0 in group `G`.
struct Job {
    net: Network,
    eps: Vec<Endpoint>,
    next_op: u64,
}

impl Job {
    fn new(n: u32, link: LinkConfig, seed: u64) -> Job {
        // No test here is about failure detection: a peer timeout long
        // enough that 30 % loss never declares a live peer dead (with the
        // common 40 ms, about ten retransmissions, it occasionally did).
        let mut net = Network::new(n, link, seed, |node| EngineConfig { peer_timeout: std::time::Duration::from_secs(2), ..cfg(node) });
        let eps: Vec<Endpoint> = (0..n).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
        let mut job = Job { net, eps, next_op: 1 };
        for r in 0..n {
            let members = job.net.memory(NodeId(r)).alloc_with(&MemberList::from_endpoints(job.eps.iter().copied()).encode());
            let op = job.op();
            job.net.command(NodeId(r), P0, Command::CreateGroup { op, group: G, rank: r, members }).unwrap();
            assert!(matches!(job.result(r, op), Ok(Completion::GroupCreated)));
        }
        job
    }

    fn op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    fn result(&mut self, rank: u32, op: OpId) -> Result<Completion, OpError> {
        let mut r = None;
        self.net
            .run_until("completion", |n| {
                for e in n.take_events(NodeId(rank)) {
                    assert_eq!(e.op, op, "only {op:?} completes: {e:?}");
                    r = Some(e.result);
                }
                r.is_some()
            })
            .unwrap_or_else(|e| panic!("{e}"));
        r.unwrap()
    }

    fn load_at(&mut self, rank: u32, module: ModuleId, name: &str, code: &[u8], persist: bool, replace: bool) -> Result<Completion, OpError> {
        let node = NodeId(rank);
        let name = self.net.memory(node).alloc_with(name.as_bytes());
        let code = self.net.memory(node).alloc_with(code);
        let op = self.op();
        self.net.command(node, P0, Command::NicvmLoad { op, module, name, code, acc_len: 0, persist, replace }).unwrap();
        self.result(rank, op)
    }

    /// Loads on every rank; the generation.
    fn load(&mut self, module: ModuleId, name: &str, src: &str) -> u32 {
        let code = bytecode(src);
        let mut gen = None;
        for r in 0..self.eps.len() as u32 {
            let Ok(Completion::NicvmLoaded { generation }) = self.load_at(r, module, name, &code, false, false) else { panic!("load") };
            assert_eq!(*gen.get_or_insert(generation), generation);
        }
        gen.unwrap()
    }

    /// Hands `data` to `module` at rank `dest` from rank `from`.
    fn send(&mut self, from: u32, module: ModuleId, generation: u32, root: u32, dest: u32, data: &[u8]) -> Result<Completion, OpError> {
        let buf = self.net.memory(NodeId(from)).alloc_with(data);
        let op = self.op();
        self.net.command(NodeId(from), P0, Command::NicvmSend { op, module, generation, group: G, root, dest, buf }).unwrap();
        self.result(from, op)
    }

    /// Posts a receive for `module`'s deliveries at `rank`.
    fn post(&mut self, rank: u32, module: ModuleId, len: u32) -> (OpId, HostBuf) {
        let buf = self.net.memory(NodeId(rank)).alloc(len);
        let op = self.op();
        self.net.command(NodeId(rank), P0, Command::Recv { op, matching: nicvm_match(module), buf }).unwrap();
        (op, buf)
    }

    fn reports(&mut self, rank: u32) -> Vec<ModuleReport> {
        self.net.engine(NodeId(rank)).nicvm_reports()
    }
}

/// Runs `rounds` Figure 2 broadcasts of distinct payloads from rank 0 and
/// checks every other rank got each exactly once, in order, and rank 0
/// none (its module consumed them).
fn broadcast_exactly_once(n: u32, seed: u64, len: usize, rounds: u8) {
    let mut job = Job::new(n, lossy(), seed);
    let m = ModuleId(2);
    let gen = job.load(m, "bcast", BCAST);
    let payload = |k: u8| -> Vec<u8> { (0..len).map(|i| (i as u8).wrapping_mul(31) ^ k).collect() };
    for k in 0..rounds {
        assert_eq!(job.send(0, m, gen, 0, 0, &payload(k)), Ok(Completion::NicvmSent { failed: false }));
    }
    job.net.run_until_quiet().unwrap_or_else(|e| panic!("{e}"));
    for r in 1..n {
        for k in 0..rounds {
            let (op, buf) = job.post(r, m, len as u32 + 8);
            let Ok(Completion::Received { tag, len: got, .. }) = job.result(r, op) else { panic!("rank {r} round {k}") };
            assert_eq!(tag, nicvm_tag(m, 0), "delivered unflagged");
            assert_eq!(got as usize, len);
            assert_eq!(&job.net.memory(NodeId(r)).bytes(buf)[..len], &payload(k)[..], "rank {r} round {k}");
        }
        // Nothing more: a second copy would match this receive at once.
        let _ = job.post(r, m, len as u32 + 8);
    }
    let _ = job.post(0, m, len as u32 + 8);
    job.net.run_until_quiet().unwrap_or_else(|e| panic!("{e}"));
    for r in 0..n {
        assert!(job.net.take_events(NodeId(r)).is_empty(), "rank {r} got a second copy");
        let rep = &job.reports(r)[0];
        assert_eq!(rep.errors(), 0, "{rep:?}");
        // Every rank's module ran once per broadcast.
        assert_eq!(rep.invocations, u64::from(rounds), "rank {r}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn figure_2_broadcast_reaches_every_rank_exactly_once_through_loss(n in 2u32..=16, seed in any::<u64>(), len in 0usize..3000) {
        broadcast_exactly_once(n, seed, len, 3);
    }
}

#[test]
fn figure_2_broadcast_at_16_ranks_and_4096_bytes() {
    broadcast_exactly_once(16, 7, 4096, 2);
}

#[test]
fn echo_module_turns_the_packet_around_without_its_host() {
    let mut job = Job::new(2, lossy(), 3);
    let m = ModuleId(5);
    let gen = job.load(m, "echo", ECHO);
    let (op, buf) = job.post(0, m, 64);
    let data = job.net.memory(NodeId(0)).alloc_with(b"ping");
    let send = job.op();
    job.net.command(NodeId(0), P0, Command::NicvmSend { op: send, module: m, generation: gen, group: G, root: 0, dest: 1, buf: data }).unwrap();
    let mut events = std::collections::BTreeMap::new();
    job.net.run_until("echo", |n| {
        events.extend(n.take_events(NodeId(0)).into_iter().map(|e| (e.op, e.result)));
        events.len() == 2
    }).unwrap();
    // The packet is read from host memory as it goes, so the send completes
    // once rank 1's engine took it (the reply may come first).
    assert_eq!(events[&send], Ok(Completion::NicvmSent { failed: false }));
    let Ok(Completion::Received { tag, len, src }) = events[&op] else { panic!() };
    assert_eq!((tag, len, src.node), (nicvm_tag(m, 0), 4, NodeId(1)));
    assert_eq!(&job.net.memory(NodeId(0)).bytes(buf)[..4], b"ping");
    job.net.run_until_quiet().unwrap();
    assert!(job.net.take_events(NodeId(1)).is_empty(), "rank 1's host saw nothing");
    // The engine's statistics sum what its modules report.
    for node in [NodeId(0), NodeId(1)] {
        let e = job.net.engine(node);
        let by_module: u64 = e.nicvm_reports().iter().map(|r| r.instructions).sum();
        assert_eq!(e.stats().vm_instructions, by_module);
    }
    assert!(job.net.engine(NodeId(1)).stats().vm_instructions > 0, "rank 1 ran the echo");
}

const LOOP: &str = "func main() while 1 do end while; return 0; end func;";
const RECURSE: &str = "func f(x) return f(x + 1) + 1; end func; func main() return f(0); end func;";
const PAST: &str = "func main() return packet_get_byte(packet_length() + 3); end func;";
const SEND_NEG: &str = "func main() mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, -1); return 0; end func;";
const SEND_SIZE: &str = "func main() mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, mpi_get_size()); return 0; end func;";

/// Lists this job's modules at `rank` through the port, as a host reads them.
fn listed(job: &mut Job, rank: u32) -> Vec<ModuleReport> {
    let buf = job.net.memory(NodeId(rank)).alloc(16 * MODULE_REPORT_LEN as u32);
    let op = job.op();
    job.net.command(NodeId(rank), P0, Command::NicvmList { op, buf }).unwrap();
    let Ok(Completion::NicvmListed { count }) = job.result(rank, op) else { panic!("list") };
    let bytes = job.net.memory(NodeId(rank)).bytes(buf).to_vec();
    (0..count as usize).map(|i| ModuleReport::decode(&bytes[i * MODULE_REPORT_LEN..]).unwrap()).collect()
}

#[test]
fn hostile_modules_are_stopped_counted_by_name_and_stall_nothing() {
    let n = 4;
    let mut job = Job::new(n, lossy(), 11);
    job.net.engine(NodeId(0)); // (all engines share the defaults: fuel 100,000)
    let bcast = ModuleId(2);
    let bgen = job.load(bcast, "bcast", BCAST);
    let hostile = [(10, "endless_loop", LOOP), (11, "deep_recursion", RECURSE), (12, "past_payload", PAST), (13, "send_minus_one", SEND_NEG), (14, "send_size", SEND_SIZE)];
    for (id, name, src) in hostile {
        assert_eq!(job.load(ModuleId(id), name, src), 1);
    }
    // Bytecode that does not decode, and bytecode that decodes but fails
    // the engine's verifier (its code removed: it runs off the
    // end), are refused; nothing is loaded.
    let mut bad = outboard_nicvm::compile(BCAST).unwrap().module.bytecode().clone();
    bad.functions[0].code.clear();
    assert_eq!(job.load_at(1, ModuleId(20), "bad", &bad.encode(), false, false), Err(OpError::Nicvm(NicvmError::Verify)));
    assert_eq!(job.load_at(1, ModuleId(21), "junk", b"NVM\x01junk", false, false), Err(OpError::Nicvm(NicvmError::Decode)));

    // Every hostile module runs for a packet at every rank, while broadcasts
    // and plain messages go on.
    let per_rank_recv: Vec<(OpId, HostBuf)> = (1..n).map(|r| {
        let buf = job.net.memory(NodeId(r)).alloc(64);
        let op = job.op();
        job.net.command(NodeId(r), P0, Command::Recv { op, matching: RecvMatch::tag(5), buf }).unwrap();
        (op, buf)
    }).collect();
    for (id, _, _) in hostile {
        for dest in 0..n {
            let r = job.send(0, ModuleId(id), 1, 0, dest, b"hostile packet");
            if dest == 0 {
                // Delegated locally: the failure is the command's answer.
                assert_eq!(r, Ok(Completion::NicvmSent { failed: true }), "module {id}");
            } else {
                assert_eq!(r, Ok(Completion::NicvmSent { failed: false }));
            }
        }
        assert_eq!(job.send(0, bcast, bgen, 0, 0, &[id as u8; 100]), Ok(Completion::NicvmSent { failed: false }));
    }
    for r in 1..n {
        let buf = job.net.memory(NodeId(0)).alloc_with(b"plain");
        let op = job.op();
        job.net.command(NodeId(0), P0, Command::Send { op, dest: job.eps[r as usize], tag: 5, buf }).unwrap();
        assert_eq!(job.result(0, op), Ok(Completion::Sent));
    }
    job.net.run_until_quiet().unwrap_or_else(|e| panic!("{e}"));
    let mut plain = 0;
    for r in 1..n {
        for e in job.net.take_events(NodeId(r)) {
            assert_eq!(e.op, per_rank_recv[r as usize - 1].0);
            assert!(matches!(e.result, Ok(Completion::Received { len: 5, .. })));
            plain += 1;
        }
    }
    assert_eq!(plain, n - 1, "plain messages arrived");
    for r in 0..n {
        // Each hostile packet reached the host flagged failed, exactly once.
        for (id, _, _) in hostile {
            let (op, buf) = job.post(r, ModuleId(id), 64);
            let Ok(Completion::Received { tag, len, .. }) = job.result(r, op) else { panic!("rank {r} module {id}") };
            assert_eq!((tag, len), (nicvm_tag(ModuleId(id), NICVM_TAG_FAILED), 14));
            assert_eq!(&job.net.memory(NodeId(r)).bytes(buf)[..14], b"hostile packet");
        }
        if r > 0 {
            for id in [10u8, 11, 12, 13, 14] {
                let (op, buf) = job.post(r, bcast, 128);
                assert!(matches!(job.result(r, op), Ok(Completion::Received { len: 100, .. })));
                assert_eq!(job.net.memory(NodeId(r)).bytes(buf)[0], id, "broadcasts in order");
            }
        }
        let reports = listed(&mut job, r);
        let by = |name: &str| reports.iter().find(|m| m.name == name).cloned().unwrap();
        assert_eq!(by("endless_loop").out_of_fuel, 1);
        let spent = by("endless_loop").instructions;
        assert!(spent > 99_000 && spent <= 100_000, "fuel bounds the loop: {spent}");
        assert_eq!(by("deep_recursion").traps, 1);
        assert_eq!(by("past_payload").traps, 1);
        assert_eq!(by("send_minus_one").bad_sends, 1);
        assert_eq!(by("send_size").bad_sends, 1);
        assert_eq!(by("bcast").errors(), 0);
        assert_eq!(by("bcast").invocations, 5);
        assert_eq!(reports.len(), 6, "nothing else was loaded at rank {r}");
        assert_eq!(job.net.engine(NodeId(r)).stats().nicvm_errors, 5);
    }
}

#[test]
fn another_jobs_engine_cannot_invoke_a_module() {
    // Node 2 belongs to another job (its key differs); it builds a group
    // naming job A's ports and sends to their module.
    let mut net = Network::new(3, LinkConfig::perfect(Duration::from_micros(5)), 5, |n| {
        let mut c = cfg(n);
        if n == NodeId(2) {
            c.job_key += 1;
        }
        c
    });
    let eps: Vec<Endpoint> = (0..3).map(|i| net.open_port(NodeId(i), P0).unwrap()).collect();
    let mut job = Job { net, eps: eps[..2].to_vec(), next_op: 1 };
    for r in 0..3u32 {
        let members = job.net.memory(NodeId(r)).alloc_with(&MemberList::from_endpoints(eps.iter().copied()).encode());
        let op = job.op();
        job.net.command(NodeId(r), P0, Command::CreateGroup { op, group: G, rank: r, members }).unwrap();
        assert!(job.result(r, op).is_ok());
    }
    let m = ModuleId(2);
    let gen = job.load(m, "bcast", BCAST);
    assert_eq!(job.load_at(2, m, "bcast", &bytecode(BCAST), false, false), Ok(Completion::NicvmLoaded { generation: 1 }));
    // Dropped at the MAC, never acknowledged: job A's engine is dead to it.
    assert_eq!(job.send(2, m, gen, 0, 0, b"intruder"), Err(OpError::Nicvm(NicvmError::NotDelivered)));
    let _ = job.net.run_for(Duration::from_millis(200));
    let e0 = job.net.engine(NodeId(0));
    assert!(e0.stats().unauthenticated > 0, "refused at the MAC");
    assert_eq!(e0.nicvm_reports()[0].invocations, 0, "job A's module never ran");
    // The intruder's own module counts the send it gave up.
    assert_eq!(job.net.engine(NodeId(2)).nicvm_reports()[0].send_failures, 1);
}

#[test]
fn persistent_modules_outlive_their_port_and_go_with_the_job() {
    let n = 3;
    let mut job = Job::new(n, lossy(), 21);
    let p1: Vec<Endpoint> = (0..n).map(|i| job.net.open_port(NodeId(i), PortId(1)).unwrap()).collect();
    assert_eq!(p1.len(), 3);
    let code = bytecode(BCAST);
    let (keep, temp) = (ModuleId(3), ModuleId(4));
    for r in 0..n {
        // Loaded from port 1, used from port 0's group.
        for (m, persist) in [(keep, true), (temp, false)] {
            let name = job.net.memory(NodeId(r)).alloc_with(b"bcast");
            let code = job.net.memory(NodeId(r)).alloc_with(&code);
            let op = job.op();
            job.net.command(NodeId(r), PortId(1), Command::NicvmLoad { op, module: m, name, code, acc_len: 0, persist, replace: false }).unwrap();
            let mut got = None;
            job.net.run_until("load", |net| { got = net.take_events(NodeId(r)).pop(); got.is_some() }).unwrap();
            assert_eq!(got.unwrap().result, Ok(Completion::NicvmLoaded { generation: 1 }));
        }
        job.net.close_port(NodeId(r), PortId(1));
        let ids: Vec<ModuleId> = job.reports(r).iter().map(|m| m.module).collect();
        assert_eq!(ids, vec![keep], "the non-persistent module went with its port");
    }
    // The persistent one still broadcasts.
    assert_eq!(job.send(0, keep, 1, 0, 0, b"still here"), Ok(Completion::NicvmSent { failed: false }));
    for r in 1..n {
        let (op, buf) = job.post(r, keep, 16);
        assert!(matches!(job.result(r, op), Ok(Completion::Received { len: 10, .. })));
        assert_eq!(&job.net.memory(NodeId(r)).bytes(buf)[..10], b"still here");
    }
    // The purged one's packets take the default path, flagged.
    assert_eq!(job.send(0, temp, 1, 0, 0, b"gone"), Ok(Completion::NicvmSent { failed: true }));
    // Purge removes it everywhere; replacing starts a new generation.
    for r in 0..n {
        let op = job.op();
        job.net.command(NodeId(r), P0, Command::NicvmPurge { op, module: keep }).unwrap();
        assert_eq!(job.result(r, op), Ok(Completion::NicvmPurged));
        assert!(job.reports(r).is_empty());
        assert_eq!(job.load_at(r, keep, "bcast", &code, true, false), Ok(Completion::NicvmLoaded { generation: 2 }));
        assert_eq!(job.load_at(r, keep, "bcast", &code, true, false), Err(OpError::Nicvm(NicvmError::Taken)));
        assert_eq!(job.load_at(r, keep, "bcast", &code, true, true), Ok(Completion::NicvmLoaded { generation: 3 }));
    }
    // A packet for an older generation takes the default path.
    assert_eq!(job.send(0, keep, 2, 0, 0, b"old"), Ok(Completion::NicvmSent { failed: true }));
    assert_eq!(job.reports(0)[0].stale, 1);
    // The job's last port closing takes even persistent modules.
    for r in 0..n {
        job.net.close_port(NodeId(r), P0);
        assert!(job.net.engine(NodeId(r)).nicvm_reports().is_empty());
    }
}

#[test]
fn ports_of_one_engine_share_one_copy_of_a_module_until_the_last_of_them_closes() {
    let mut job = Job::new(2, lossy(), 5);
    job.net.open_port(NodeId(0), PortId(1)).unwrap();
    let code = bytecode(BCAST);
    let m = ModuleId(7);
    let load_from = |job: &mut Job, port: PortId, code: &[u8]| {
        let name = job.net.memory(NodeId(0)).alloc_with(b"bcast");
        let code = job.net.memory(NodeId(0)).alloc_with(code);
        let op = job.op();
        job.net.command(NodeId(0), port, Command::NicvmLoad { op, module: m, name, code, acc_len: 0, persist: false, replace: false }).unwrap();
        let mut got = None;
        job.net.run_until("load", |net| { got = net.take_events(NodeId(0)).pop(); got.is_some() }).unwrap();
        got.unwrap().result
    };
    assert_eq!(load_from(&mut job, P0, &code), Ok(Completion::NicvmLoaded { generation: 1 }));
    // The node's other process loads the same module: the same copy.
    assert_eq!(load_from(&mut job, PortId(1), &code), Ok(Completion::NicvmLoaded { generation: 1 }));
    assert_eq!(job.reports(0).len(), 1);
    // The same port twice, or another module under the id, is refused.
    assert_eq!(load_from(&mut job, PortId(1), &code), Err(OpError::Nicvm(NicvmError::Taken)));
    let other = bytecode(ECHO);
    assert_eq!(load_from(&mut job, PortId(1), &other), Err(OpError::Nicvm(NicvmError::Taken)));
    // It stays while either loader's port is open, and goes with the last.
    job.net.close_port(NodeId(0), P0);
    assert_eq!(job.reports(0).len(), 1, "port 1 still has it");
    job.net.close_port(NodeId(0), PortId(1));
    assert!(job.reports(0).is_empty());
}

/// A case that once declared a live peer dead (30 % loss outlasting the
/// common 40 ms peer timeout) and counted a module send as failed.
#[test]
fn figure_2_broadcast_survives_a_long_run_of_losses() {
    broadcast_exactly_once(11, 13239368445048479921, 688, 3);
}
