//! User-defined reduction operators (issue 19, item 5): offloaded reduces
//! and allreduces whose combine step is a NICVM module, through the lossy
//! test network (loss, duplication, corruption, reordering), checked
//! against Rust references on random inputs at 2-16 ranks; a hostile
//! operator (an endless loop) fails its collective at every member that
//! waits for a combination, with a typed error counted on the module, and
//! the collectives after it complete.
//!
//! One thread drives every rank: each host starts its collective, then
//! waits in turn; the engines run offloaded collectives without their
//! hosts, and waiting steps the whole network.

mod common;

use common::{Cluster, Rng};
use outboard_engine::{CollError, CombineFailure, Datatype, EngineConfig};
use outboard_host::nicvm::LoadOptions;
use outboard_host::{AllreduceAlgorithm, CollRequest, Group, GroupId, HostError, NicModule, TreeShape};
use outboard_testnet::LinkConfig;
use proptest::prelude::*;

const MAX: &str = include_str!("../../nicvm/modules/combine_max_i64.nvm");
const PROD: &str = include_str!("../../nicvm/modules/reduce_prod_f64.nvm");
const ENDLESS: &str = "func main() while 1 do end while; return 0; end func;";

/// `n` ranks in one group, with the max, product and endless operators
/// loaded everywhere.
struct Job {
    c: Cluster,
    groups: Vec<Group>,
    max: NicModule,
    prod: NicModule,
    endless: NicModule,
}

impl Job {
    fn new(n: u32, seed: u64) -> Job {
        let mut c = Cluster::new(n, LinkConfig::lossy(0.3, 0.1, 0.01), seed, |node| EngineConfig::new(node, 1, 0));
        let eps = c.endpoints();
        let mut groups: Vec<Group> = (0..n).map(|r| Group::new(GroupId(9), r, eps.clone()).unwrap()).collect();
        let mut load = |name: &str, src: &str| {
            let ms: Vec<NicModule> = (0..n as usize)
                .map(|r| c.ports[r].nicvm_load(&mut groups[r], name, src, LoadOptions::default()).unwrap_or_else(|e| panic!("{e}")))
                .collect();
            assert!(ms.iter().all(|m| *m == ms[0]), "one generation everywhere");
            ms[0].clone()
        };
        let (max, prod, endless) = (load("combine_max_i64", MAX), load("reduce_prod_f64", PROD), load("endless", ENDLESS));
        Job { c, groups, max, prod, endless }
    }

    fn n(&self) -> usize {
        self.groups.len()
    }

    /// Starts one collective per rank (`start(rank)`), then waits for each.
    fn run(&mut self, mut start: impl FnMut(&mut Self, usize) -> CollRequest) -> Vec<Result<Vec<u8>, HostError>> {
        let reqs: Vec<CollRequest> = (0..self.n()).map(|r| start(self, r)).collect();
        reqs.into_iter().enumerate().map(|(r, q)| self.c.ports[r].coll_wait(q)).collect()
    }

    fn allreduce(&mut self, m: &NicModule, dtype: Datatype, algo: AllreduceAlgorithm, data: &[Vec<u8>]) -> Vec<Result<Vec<u8>, HostError>> {
        self.run(|j, r| j.c.ports[r].start_nicvm_allreduce(&mut j.groups[r], m, dtype, algo, &data[r]).unwrap())
    }

    fn reduce(&mut self, m: &NicModule, dtype: Datatype, root: u32, data: &[Vec<u8>]) -> Vec<Result<Vec<u8>, HostError>> {
        self.run(|j, r| j.c.ports[r].start_nicvm_reduce(&mut j.groups[r], m, dtype, TreeShape::Binomial, root, &data[r]).unwrap())
    }
}

fn i64s(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Rust's element-wise maximum of the contributions.
fn max_reference(vals: &[Vec<i64>]) -> Vec<u8> {
    i64s(&(0..vals[0].len()).map(|i| vals.iter().map(|v| v[i]).max().unwrap()).collect::<Vec<_>>())
}

/// Rust's element-wise product. The inputs are halves of integers in
/// -6..=6, so every product of up to 16 of them is exact in an f64 and the
/// order the schedule combines in cannot change a bit.
fn prod_reference(vals: &[Vec<f64>]) -> Vec<u8> {
    f64s(&(0..vals[0].len()).map(|i| vals.iter().map(|v| v[i]).product()).collect::<Vec<_>>())
}

fn algos() -> [AllreduceAlgorithm; 3] {
    [AllreduceAlgorithm::Tree(TreeShape::Binomial), AllreduceAlgorithm::Tree(TreeShape::Kary(3)), AllreduceAlgorithm::RecursiveDoubling]
}

/// Random contributions, reduces and allreduces with both operators,
/// checked against the references at every rank that gets a result.
/// Returns the engines' retransmissions and duplicates: whether the
/// network's loss and duplication met these collectives at all is up to
/// chance on a small random job, so only the fixed 16-rank case asserts it.
fn user_operators_match_rust(n: u32, seed: u64) -> (u64, u64) {
    let mut job = Job::new(n, seed);
    let mut rng = Rng::new(seed);
    let (max, prod) = (job.max.clone(), job.prod.clone());
    for (k, algo) in algos().into_iter().enumerate() {
        let len = rng.below(40) as usize;
        let ints: Vec<Vec<i64>> = (0..n).map(|_| (0..len).map(|_| rng.next_u64() as i64).collect()).collect();
        let want = max_reference(&ints);
        let data: Vec<Vec<u8>> = ints.iter().map(|v| i64s(v)).collect();
        for (r, got) in job.allreduce(&max, Datatype::I64, algo, &data).into_iter().enumerate() {
            assert_eq!(got.unwrap_or_else(|e| panic!("rank {r}: {e}")), want, "max, {algo:?}, rank {r}");
        }
        let floats: Vec<Vec<f64>> =
            (0..n).map(|_| (0..len).map(|_| (rng.below(13) as f64 - 6.0) / 2.0).collect()).collect();
        let want = prod_reference(&floats);
        let data: Vec<Vec<u8>> = floats.iter().map(|v| f64s(v)).collect();
        for (r, got) in job.allreduce(&prod, Datatype::F64, algo, &data).into_iter().enumerate() {
            assert_eq!(got.unwrap_or_else(|e| panic!("rank {r}: {e}")), want, "prod, {algo:?}, rank {r}");
        }
        let root = rng.below(u64::from(n)) as u32;
        for (r, got) in job.reduce(&max, Datatype::I64, root, &data_i64(&ints)).into_iter().enumerate() {
            let got = got.unwrap_or_else(|e| panic!("rank {r}: {e}"));
            if r as u32 == root {
                assert_eq!(got, max_reference(&ints), "reduce {k} to {root}");
            } else {
                assert!(got.is_empty());
            }
        }
    }
    let (mut retx, mut dups) = (0, 0);
    for r in 0..n {
        let s = job.c.engine_stats(r);
        retx += s.retransmits;
        dups += s.duplicates;
    }
    // Every engine ran its operators and counted no error.
    for r in 0..n as usize {
        for rep in job.c.ports[r].nicvm_list().unwrap() {
            assert_eq!(rep.errors(), 0, "rank {r}: {rep:?}");
        }
    }
    (retx, dups)
}

fn data_i64(ints: &[Vec<i64>]) -> Vec<Vec<u8>> {
    ints.iter().map(|v| i64s(v)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn user_defined_operators_match_rust_through_loss(n in 2u32..=16, seed in any::<u64>()) {
        let _ = user_operators_match_rust(n, seed);
    }
}

#[test]
fn user_defined_operators_at_16_ranks() {
    // The network did lose and duplicate packets of these collectives (a
    // 2-rank random job once met 4 retransmissions and no duplicate).
    let (retx, dups) = user_operators_match_rust(16, 0x0DD);
    assert!(retx > 0 && dups > 0, "{retx} retransmits, {dups} duplicates");
}

/// The collective error inside a host error, if any.
fn coll_error(e: &HostError) -> Option<CollError> {
    e.coll_error().copied()
}

#[test]
fn an_endless_operator_fails_its_collective_everywhere_and_stalls_nothing() {
    let n = 7;
    let mut job = Job::new(n, 21);
    let (max, endless) = (job.max.clone(), job.endless.clone());
    let data: Vec<Vec<u8>> = (0..n).map(|r| i64s(&[i64::from(r), -i64::from(r)])).collect();
    for algo in algos() {
        let out = job.allreduce(&endless, Datatype::I64, algo, &data);
        let mut here = 0;
        for (r, got) in out.iter().enumerate() {
            let e = got.as_ref().expect_err("an endless operator never gives a result");
            match coll_error(e) {
                Some(CollError::ModuleFailed { module, failure: CombineFailure::OutOfFuel }) => {
                    assert_eq!(module, endless.id.0);
                    here += 1;
                }
                Some(CollError::FailedUpstream { .. }) => {}
                _ => panic!("rank {r}, {algo:?}: {e}"),
            }
        }
        assert!(here > 0, "some member ran it out of fuel, {algo:?}");
        // The next collective (and the group's) is unaffected.
        let want = i64s(&[i64::from(n) - 1, 0]);
        for (r, got) in job.allreduce(&max, Datatype::I64, algo, &data).into_iter().enumerate() {
            assert_eq!(got.unwrap_or_else(|e| panic!("rank {r}: {e}")), want);
        }
    }
    // A reduce: the root fails; leaves, which combine nothing, succeed.
    let out = job.reduce(&endless, Datatype::I64, 0, &data);
    assert!(out[0].as_ref().is_err_and(|e| coll_error(e).is_some()), "{:?}", out[0]);
    // Plain messages still go both ways.
    let (e0, e1) = (job.c.ports[0].endpoint(), job.c.ports[1].endpoint());
    job.c.ports[0].send(e1, 3, b"after").unwrap();
    let (src, tag, got) = job.c.ports[1].recv(outboard_host::RecvMatch::any(), 16).unwrap();
    assert_eq!((src, tag, &got[..]), (e0, 3, &b"after"[..]));
    // Counted on the module, by name; the other operator counted nothing.
    let mut fuel_outs = 0;
    for r in 0..n as usize {
        for rep in job.c.ports[r].nicvm_list().unwrap() {
            if rep.name == "endless" {
                fuel_outs += rep.out_of_fuel;
                assert_eq!(rep.out_of_fuel, rep.invocations, "rank {r}");
            } else {
                assert_eq!(rep.errors(), 0, "rank {r}: {rep:?}");
            }
        }
    }
    assert!(fuel_outs >= 3, "{fuel_outs}");
}

#[test]
fn a_module_operator_is_refused_host_based() {
    let mut job = Job::new(2, 4);
    let red = job.max.reduction(Datatype::I64);
    let e = job.c.ports[0]
        .start_allreduce(&mut job.groups[0], outboard_host::Mode::HostBased, AllreduceAlgorithm::RecursiveDoubling, red, &[0; 8])
        .unwrap_err();
    assert_eq!(coll_error(&e), Some(CollError::EngineOnly), "{e}");
}
