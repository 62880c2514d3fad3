//! Multi-send and broadcast experiments (issue 5): the papers' figures
//! that are cheap to run, and the orderings every profile must show.

use outboard_host::{BcastMode, TreeShape};
use outboard_sim::experiments::multicast::{self, Skewed, MPICH_BINOMIAL};
use outboard_sim::experiments::multisend::{self, Method};
use outboard_sim::experiments::lambda;
use outboard_sim::{paper, Profile};

fn within(sim: f64, id: &str, tol: f64) {
    let want = paper::value(id).unwrap_or_else(|| panic!("paper id {id}"));
    let d = (sim - want) / want;
    assert!(d.abs() <= tol, "{id}: simulated {sim:.4}, paper {want}, {:+.1} %", d * 100.0);
}

#[test]
fn gm2_multi_send_to_four_destinations_is_the_calibrated_factor() {
    // The one point gm2-lanai91 is calibrated on (profile header).
    let gm2 = Profile::builtin("gm2-lanai91");
    let host = multisend::iteration(&gm2, 4, 128, Method::HostSends, 4, 1).unwrap();
    let multi = multisend::iteration(&gm2, 4, 128, Method::MultiSend, 4, 1).unwrap();
    within(host.last_arrival / multi.last_arrival, "gm2-multisend-foi", 0.05);
    // The reply round trip is paid both ways: the per-iteration factor is lower.
    assert!(host.iteration / multi.iteration < host.last_arrival / multi.last_arrival);
}

#[test]
fn multi_send_gains_grow_with_destinations() {
    let fm = Profile::builtin("fm-lanai43");
    let factor = |k: u32| {
        let h = multisend::iteration(&fm, k, 1024, Method::HostSends, 2, 1).unwrap();
        let m = multisend::iteration(&fm, k, 1024, Method::MultiSend, 2, 1).unwrap();
        h.iteration / m.iteration
    };
    let (two, four, eight) = (factor(2), factor(4), factor(8));
    assert!(two > 1.0 && four > two && eight > four, "2: {two}, 4: {four}, 8: {eight}");
}

#[test]
fn fm_multicast_without_pipelining_at_eight_nodes_is_within_15_percent() {
    // 2.5, Figure 2.7: NIC-assisted on the best postal tree, no pipelining,
    // against FM's binomial tree, 16 KiB to 8 nodes: 1.53.
    let fm = Profile::builtin("fm-lanai43");
    let host = multicast::latency(&fm, 8, 16384, BcastMode::HostBased, MPICH_BINOMIAL, 2, 1).unwrap();
    let (na, _) = multicast::best_postal(&fm, 8, 16384, BcastMode::nic_assisted_whole(), 2, 1).unwrap();
    within(host / na, "multicast-opt-nopipe-8", 0.15);
}

#[test]
fn every_mode_delivers_and_pipelining_and_forwarding_pay_off() {
    // `latency` fails if any member gets other bytes than the root sent.
    let gm2 = Profile::builtin("gm2-lanai91");
    let size = 3 * 4096 + 17;
    let run = |mode: BcastMode, shape: TreeShape| multicast::latency(&gm2, 16, size, mode, shape, 2, 3).unwrap();
    let host = run(BcastMode::HostBased, MPICH_BINOMIAL);
    let library_order = run(BcastMode::HostBased, TreeShape::Binomial);
    let pipe = run(BcastMode::nic_assisted(), MPICH_BINOMIAL);
    let whole = run(BcastMode::nic_assisted_whole(), MPICH_BINOMIAL);
    let fwd = run(BcastMode::Offloaded, MPICH_BINOMIAL);
    assert!(pipe < whole, "pipelined {pipe} vs whole {whole}");
    assert!(fwd < host, "NIC forwarding {fwd} vs host-based {host}");
    // Largest subtree first is never slower (the library's binomial lists
    // children nearest first; docs/multicast.md).
    assert!(host <= library_order, "largest subtree first {host} vs library order {library_order}");
    for n in [2, 5] {
        for size in [0, 1, 4096, 4097] {
            for mode in [BcastMode::HostBased, BcastMode::nic_assisted(), BcastMode::Offloaded] {
                multicast::latency(&gm2, n, size, mode, TreeShape::Binomial, 1, 5).unwrap();
            }
        }
    }
}

#[test]
fn nic_forwarded_broadcast_spares_late_hosts() {
    let gm2 = Profile::builtin("gm2-lanai91").at_mpi_level();
    // Every member's mean host time per broadcast, the root on time (6.3).
    let cpu = |mode| multicast::skew_times(&gm2, 16, 4, mode, MPICH_BINOMIAL, 400.0, Skewed::AllButRoot, 4, 1).unwrap().all;
    let (host, nic) = (cpu(BcastMode::HostBased), cpu(BcastMode::Offloaded));
    assert!(host > 3.0 * nic, "host {host} us vs offloaded {nic} us in the broadcast");
}

#[test]
fn lambda_falls_with_size_where_bytes_cost_the_receiver_less_than_the_sender() {
    // GM-2, NIC-assisted: the per-copy transmit grows with the link's
    // 0.004 us/B while the fixed latency stays, so lambda shrinks.
    let gm2 = Profile::builtin("gm2-lanai91");
    let small = lambda::lambda(&gm2, BcastMode::nic_assisted(), 8);
    let large = lambda::lambda(&gm2, BcastMode::nic_assisted(), 4096);
    assert!(small > large && large >= 1.0, "{small} -> {large}");
    assert_eq!(lambda::lambda(&gm2, BcastMode::HostBased, 0).max(1.0), lambda::lambda(&gm2, BcastMode::HostBased, 0));
}

/// An inner NIC forwards a broadcast piece before it writes the piece to
/// its host (GM-2: "before, and independently of, handing it to its
/// host"). With a host bus so slow that one DMA of the message dwarfs
/// everything else, a broadcast down a chain of 4 costs the root's read
/// and the last member's write - not a write at every inner member too.
#[test]
fn an_inner_nic_forwards_before_its_host_dma() {
    let mut slow_bus = Profile::builtin("gm2-lanai91");
    slow_bus.host_nic.dma_us_per_byte = 1.0;
    let size = 1000;
    let dma = f64::from(size) * slow_bus.host_nic.dma_us_per_byte;
    let t = multicast::latency(&slow_bus, 4, size, BcastMode::Offloaded, TreeShape::Chain, 2, 1).unwrap();
    assert!(t > 2.0 * dma, "a read and a write: {t} us");
    assert!(t < 2.5 * dma, "inner members' writes are off the path: {t} us against {dma} us per DMA");
}

/// MPICH-GM's eager copies (`[mpi] copy_us_per_byte`): a host-based
/// broadcast copies at every hop (out at the receiver, in again for each
/// send), an offloaded one at the root and at each member only; above the
/// eager limit nothing is copied.
#[test]
fn eager_copies_cost_host_based_hops_more_than_offloaded_members() {
    let base = Profile::builtin("gm2-lanai91").at_mpi_level();
    let mut copying = Profile::builtin("gm2-lanai91");
    copying.mpi.copy_us_per_byte = 0.004;
    copying.mpi.eager_below_bytes = 16384;
    let copying = copying.at_mpi_level();
    let run = |p: &Profile, size: u32, mode: BcastMode| multicast::latency(p, 16, size, mode, MPICH_BINOMIAL, 2, 1).unwrap();
    let size = 8192;
    let copy = f64::from(size) * 0.004;
    let host = run(&copying, size, BcastMode::HostBased) - run(&base, size, BcastMode::HostBased);
    let nic = run(&copying, size, BcastMode::Offloaded) - run(&base, size, BcastMode::Offloaded);
    // Offloaded: the root's copy in and the last member's copy out.
    assert!((nic - 2.0 * copy).abs() < 0.05 * copy, "offloaded pays two copies: +{nic} us, one copy {copy} us");
    // Host-based: a copy in at the root, out and in again at each of the
    // 3 inner levels, out at the leaf: 8 on the deepest path of 16 nodes.
    assert!(host >= 8.0 * copy - 0.05 * copy, "host-based pays copies at every hop: +{host} us, one copy {copy} us");
    // At the eager limit and above: rendezvous, no copies.
    for mode in [BcastMode::HostBased, BcastMode::Offloaded] {
        assert_eq!(run(&copying, 16384, mode), run(&base, 16384, mode), "{mode:?}");
    }
}
