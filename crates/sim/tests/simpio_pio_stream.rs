//! FM's streams in the simulator (issue 5): a host that writes send data
//! into the NIC by PIO (`pio_send`, fm-lanai43) hands a message over a
//! packet at a time, the NIC transmitting packet i while the host writes
//! packet i+1, and its receive handler copies each packet out as it lands
//! (dissertation 2.4). Before this, a 16 KiB FM send paid the host's whole
//! write and then every packet's transmission, and the receiver the whole
//! copy after the last packet.

use outboard_host::{BcastMode, TreeShape};
use outboard_sim::cost::CostModel;
use outboard_sim::experiments::{multicast, pingpong};
use outboard_sim::{Dur, Profile, Simulation};

const SIZE: u32 = 16_384;

fn costs(p: &Profile) -> CostModel {
    Simulation::new(p, 2, 1).expect("simulation").cost()
}

/// NIC time to transmit one full packet (the paper's t_xmit).
fn xmit(c: &CostModel) -> Dur {
    c.nic_tx_packet + c.nic_tx_byte.for_bytes(u64::from(c.packet_payload))
}

fn us(d: Dur) -> f64 {
    d.as_us()
}

#[test]
fn a_pio_send_streams_to_the_nic_and_the_receiver_copies_as_packets_land() {
    let p = Profile::builtin("fm-lanai43");
    let c = costs(&p);
    let packets = SIZE.div_ceil(c.packet_payload);
    assert_eq!(packets, 11, "a 16 KiB FM message is 11 packets of 1,536 bytes");
    let one_way = pingpong::one_way(&p, SIZE, 1, 1).unwrap();
    // Writing all, then transmitting all, would take at least this long.
    let serial = us(c.send(SIZE)) + f64::from(packets - 1) * us(xmit(&c));
    assert!(one_way < serial, "16 KiB one-way {one_way} us: the packets did not overlap the host's write ({serial} us)");
    // Copying the whole message after its last packet would take at least
    // this long.
    let whole_copy = us(c.send(SIZE)) + us(c.recv(SIZE));
    assert!(one_way < whole_copy, "16 KiB one-way {one_way} us: the receiver copied after the last packet ({whole_copy} us)");
    // The host still writes every byte: nothing arrives before that.
    assert!(one_way > us(c.send(SIZE)), "{one_way} us is faster than the host's own write");
}

#[test]
fn a_pio_multi_send_sends_each_packet_to_every_destination_as_it_is_written() {
    let p = Profile::builtin("fm-lanai43");
    let c = costs(&p);
    // Root and two children: one whole-message multi-send of 16 KiB.
    let whole = BcastMode::NicAssisted { chunk: BcastMode::WHOLE };
    let lat = multicast::latency(&p, 3, SIZE, whole, TreeShape::Kary(2), 2, 1).unwrap();
    let packets = SIZE.div_ceil(c.packet_payload);
    let serial = us(c.send(SIZE)) + f64::from(2 * (packets - 1)) * us(xmit(&c));
    assert!(lat < serial, "multi-send of 16 KiB to 2: {lat} us, no better than write-then-copy ({serial} us)");
    assert!(lat > us(c.send(SIZE)));
}

#[test]
fn dma_profiles_hand_sends_over_whole_and_copy_receives_whole() {
    for name in ["gm-lanai43", "gm-lanai91", "gm2-lanai91", "dpu400"] {
        let p = Profile::builtin(name);
        assert!(!p.host_nic.pio_send, "{name}");
        let c = costs(&p);
        for len in [0, 1, c.packet_payload, SIZE, 1 << 20] {
            assert_eq!(c.send_visible(len), c.send(len), "{name}, {len} B");
            assert_eq!(c.recv_overlap(len, Dur::from_us(1e6)), Dur::ZERO, "{name}, {len} B");
        }
    }
    // A one-packet FM send is handed over whole, as the closed form (2.1)
    // has it.
    let c = costs(&Profile::builtin("fm-lanai43"));
    assert_eq!(c.send_visible(c.packet_payload), c.send(c.packet_payload));
    assert_eq!(c.recv_overlap(c.packet_payload, Dur::from_us(1e6)), Dur::ZERO);
    assert!(c.send_visible(SIZE) < c.send(SIZE));
}
