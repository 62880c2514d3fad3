//! The simulator runs the host library's write rendezvous when a profile's
//! `[mpi] rendezvous_write` asks for it: it completes, and its extra hop
//! through the sender's host (the clear-to-send is taken by the sending
//! library, not served by its NIC as a read request is) shows in the
//! one-way time, while messages below the eager limit are untouched.

use outboard_sim::experiments::pingpong;
use outboard_sim::profile::Profile;

#[test]
fn the_write_rendezvous_runs_and_costs_the_senders_host_a_turn() {
    let read = Profile::load("ib-sdr").unwrap();
    assert!(read.mpi.rendezvous && !read.mpi.rendezvous_write, "ib-sdr reads by default");
    let mut write = read.clone();
    write.mpi.rendezvous_write = true;
    let (read, write) = (read.at_mpi_level(), write.at_mpi_level());
    assert!(write.host.rendezvous_write && !read.host.rendezvous_write);
    let eager = read.mpi.eager_below_bytes.max(read.host.rendezvous_from_bytes.unwrap()) / 2;
    let below = (pingpong::one_way(&read, eager, 5, 1).unwrap(), pingpong::one_way(&write, eager, 5, 1).unwrap());
    assert_eq!(below.0, below.1, "below the eager limit the protocol does not matter");
    let (r, w) = (pingpong::one_way(&read, 65_536, 5, 1).unwrap(), pingpong::one_way(&write, 65_536, 5, 1).unwrap());
    assert!(w > r, "64 KiB: write {w} us, read {r} us: the sender's host handles the clear-to-send");
    assert!(w < r * 1.2, "64 KiB: write {w} us, read {r} us: one host turn, not a copy");
}
