use super::*;
use proptest::prelude::*;

/// The key most tests seal and parse under.
fn key() -> MacKey {
    MacKey::new(&JobSecret::from_bytes([7; SECRET_LEN]), 0x0b0b)
}

fn arb_header() -> impl Strategy<Value = Header> {
    (any::<u16>(), any::<u32>(), any::<u32>(), any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>())
        .prop_map(|(flags, src_node, dst_node, boot, seq, ack, horizon)| Header {
            kind: Kind::Ack,
            flags,
            src_node,
            dst_node,
            boot,
            seq: Seq(seq),
            ack: Seq(ack),
            horizon: Seq(horizon),
        })
}

fn arb_reason() -> impl Strategy<Value = RejectReason> {
    prop_oneof![
        Just(RejectReason::NotReady),
        Just(RejectReason::Stale),
        Just(RejectReason::BadKey),
        Just(RejectReason::OutOfBounds),
        Just(RejectReason::NoSuchPort),
    ]
}

/// A body and an owned payload consistent with it.
fn arb_body() -> impl Strategy<Value = (BodyRepr, Vec<u8>)> {
    let data = (
        any::<(u8, u8, u32, u32, u32, u32)>(),
        proptest::collection::vec(any::<u8>(), 0..600),
        0u32..10_000,
        0u32..10_000,
        prop_oneof![Just(Target::Void), any::<u64>().prop_map(|tag| Target::Tagged { tag }), any::<u64>().prop_map(|tag| Target::Announce { tag }), any::<(u64, u64)>().prop_map(|(key, offset)| Target::Rdma { key, offset })],
    )
        .prop_map(|((sp, dp, sg, dg, id, ss), payload, before, after, target)| {
            let (offset, total) = if payload.is_empty() { (0, 0) } else { (before, before + payload.len() as u32 + after) };
            let h = DataHeader { src_port: sp, dst_port: dp, src_gen: sg, dst_gen: dg, msg_id: id, stream_seq: ss, total_len: total, offset, target };
            (BodyRepr::Data(h), payload)
        });
    let resp = (any::<(u8, u32, u32)>(), proptest::collection::vec(any::<u8>(), 1..600), 0u32..5000).prop_map(|((p, g, id), payload, off)| {
        let h = ReadResponseHeader { dst_port: p, dst_gen: g, msg_id: id, total_len: off + payload.len() as u32, offset: off };
        (BodyRepr::ReadResponse(h), payload)
    });
    let coll = (any::<(u8, u8, u16, u32, u32, u32)>(), any::<(u64, u32, u32, u16)>(), proptest::collection::vec(any::<u8>(), 0..600), 0u32..5000).prop_map(
        |((sp, dp, round, sg, dg, id), (group, epoch, src_rank, schedule), payload, before)| {
            let (offset, total) = if payload.is_empty() { (0, 0) } else { (before, before + payload.len() as u32) };
            let h = CollHeader { src_port: sp, dst_port: dp, src_gen: sg, dst_gen: dg, msg_id: id, group, epoch, round, src_rank, total_len: total, offset, schedule };
            (BodyRepr::Coll(h), payload)
        },
    );
    prop_oneof![
        coll,
        Just((BodyRepr::Ack, vec![])),
        Just((BodyRepr::Nop, vec![])),
        data,
        (any::<(u8, u32, u32)>(), arb_reason()).prop_map(|((port, gen, msg_id), reason)| (BodyRepr::Reject(Reject { port, gen, msg_id, reason }), vec![])),
        any::<(u8, u8, u32, u32, u32, u64, u64, u32)>().prop_map(|(sp, dp, sg, dg, id, key, offset, len)| (
            BodyRepr::ReadRequest(ReadRequest { src_port: sp, dst_port: dp, src_gen: sg, dst_gen: dg, msg_id: id, key, offset, len }),
            vec![]
        )),
        resp,
        (prop_oneof![Just(AbortWhat::Message), Just(AbortWhat::ReadResponse)], any::<u32>()).prop_map(|(what, msg_id)| (BodyRepr::Abort(Abort { what, msg_id }), vec![])),
        any::<(u32, Option<u64>)>().prop_map(|(node, boot)| (BodyRepr::PeerFailed(PeerFailed { node, boot }), vec![])),
        crate::atomic::tests::arb_request().prop_map(|r| (BodyRepr::AtomicRequest(r), vec![])),
        crate::atomic::tests::arb_reply().prop_map(|r| (BodyRepr::AtomicReply(r), vec![])),
        (crate::nicvm::tests::arb_header(), proptest::collection::vec(any::<u8>(), 0..600)).prop_map(|(h, p)| (BodyRepr::Nicvm(h), p)),
        crate::nic_coll::tests::arb_header().prop_map(|h| (BodyRepr::NicColl(h), vec![])),
        any::<(u8, u32)>().prop_map(|(port, gen)| (BodyRepr::PortClosed(PortClosed { port, gen }), vec![])),
        any::<u32>().prop_map(|room| (BodyRepr::CollResume(CollResume { room }), vec![])),
    ]
}

fn body_of<'a>(repr: BodyRepr, payload: &'a [u8]) -> Body<'a> {
    match repr {
        BodyRepr::Ack => Body::Ack,
        BodyRepr::Nop => Body::Nop,
        BodyRepr::Data(h) => Body::Data(h, payload),
        BodyRepr::Reject(r) => Body::Reject(r),
        BodyRepr::ReadRequest(r) => Body::ReadRequest(r),
        BodyRepr::ReadResponse(h) => Body::ReadResponse(h, payload),
        BodyRepr::Abort(a) => Body::Abort(a),
        BodyRepr::Coll(h) => Body::Coll(h, payload),
        BodyRepr::PeerFailed(n) => Body::PeerFailed(n),
        BodyRepr::AtomicRequest(r) => Body::AtomicRequest(r),
        BodyRepr::AtomicReply(r) => Body::AtomicReply(r),
        BodyRepr::Nicvm(h) => Body::Nicvm(h, payload),
        BodyRepr::NicColl(h) => Body::NicColl(h),
        BodyRepr::PortClosed(c) => Body::PortClosed(c),
        BodyRepr::CollResume(c) => Body::CollResume(c),
    }
}

proptest! {
    #[test]
    fn decode_of_encode_is_identity(mut header in arb_header(), (repr, payload) in arb_body()) {
        header.kind = repr.kind();
        let pkt = Packet { header, body: body_of(repr, &payload) };
        let mut buf = vec![0u8; pkt.buffer_len()];
        let n = pkt.emit(&key(), &mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        let back = Packet::parse(&buf, &key()).unwrap();
        prop_assert_eq!(back, pkt);
    }

    #[test]
    fn another_secret_or_job_key_never_authenticates(mut header in arb_header(), (repr, payload) in arb_body(), other_job in 1u64..u64::MAX, other_secret in any::<[u8; SECRET_LEN]>()) {
        header.kind = repr.kind();
        let pkt = Packet { header, body: body_of(repr, &payload) };
        let mut buf = vec![0u8; pkt.buffer_len()];
        pkt.emit(&key(), &mut buf).unwrap();
        let other_job = MacKey::new(&JobSecret::from_bytes([7; SECRET_LEN]), 0x0b0b ^ other_job);
        prop_assert_eq!(Packet::parse(&buf, &other_job), Err(WireError::BadMac));
        prop_assume!(other_secret != [7; SECRET_LEN]);
        let other_secret = MacKey::new(&JobSecret::from_bytes(other_secret), 0x0b0b);
        prop_assert_eq!(Packet::parse(&buf, &other_secret), Err(WireError::BadMac));
    }

    #[test]
    fn any_truncation_or_single_byte_flip_is_an_error(mut header in arb_header(), (repr, payload) in arb_body(), cut in any::<prop::sample::Index>(), flip in 1u8..=255) {
        header.kind = repr.kind();
        let pkt = Packet { header, body: body_of(repr, &payload) };
        let mut buf = vec![0u8; pkt.buffer_len()];
        pkt.emit(&key(), &mut buf).unwrap();
        let at = cut.index(buf.len());
        prop_assert!(Packet::parse(&buf[..at], &key()).is_err());
        let mut bad = buf.clone();
        bad[at] ^= flip;
        prop_assert!(Packet::parse(&bad, &key()).is_err());
        let mut longer = buf.clone();
        longer.push(0);
        prop_assert!(Packet::parse(&longer, &key()).is_err());
    }

    /// The simulator's closed-world key: what it seals parses back, every
    /// single-byte flip (the wire model's corruption) is caught, another
    /// job's closed-world key refuses it, and it never passes for an
    /// authenticated packet nor the reverse.
    #[test]
    fn a_closed_world_key_catches_flips_and_is_not_a_mac(mut header in arb_header(), (repr, payload) in arb_body(), at in any::<prop::sample::Index>(), flip in 1u8..=255, job in any::<u64>(), other in any::<u64>()) {
        header.kind = repr.kind();
        let pkt = Packet { header, body: body_of(repr, &payload) };
        let closed = MacKey::closed_world(job);
        prop_assert!(!closed.authenticates());
        prop_assert!(key().authenticates());
        let mut buf = vec![0u8; pkt.buffer_len()];
        pkt.emit(&closed, &mut buf).unwrap();
        prop_assert_eq!(Packet::parse(&buf, &closed).unwrap(), pkt);
        let mut bad = buf.clone();
        bad[at.index(buf.len())] ^= flip;
        prop_assert!(Packet::parse(&bad, &closed).is_err());
        prop_assert_eq!(Packet::parse(&buf, &key()), Err(WireError::BadMac));
        prop_assume!(other != job);
        prop_assert_eq!(Packet::parse(&buf, &MacKey::closed_world(other)), Err(WireError::BadMac));
        let mut sealed = vec![0u8; pkt.buffer_len()];
        pkt.emit(&key(), &mut sealed).unwrap();
        prop_assert_eq!(Packet::parse(&sealed, &closed), Err(WireError::BadMac));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Packet::parse(&bytes, &key());
    }

    /// Random bytes under a valid magic, version, length and tag reach the
    /// kind and body parsers, which must refuse them without panicking.
    #[test]
    fn sealed_random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), HEADER_LEN..300)) {
        bytes[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        bytes[2] = VERSION;
        let body_len = (bytes.len() - HEADER_LEN) as u16;
        bytes[6..8].copy_from_slice(&body_len.to_be_bytes());
        seal(&mut bytes, &key());
        if let Err(e) = Packet::parse(&bytes, &key()) {
            prop_assert!(!matches!(e, WireError::BadMac | WireError::Truncated { .. } | WireError::LengthMismatch { .. }), "{e}");
        }
    }

    #[test]
    fn seq_comparison_is_modular(a in any::<u32>(), d in 1u32..(1 << 30)) {
        let x = Seq(a);
        let y = x.add(d);
        prop_assert!(x.before(y));
        prop_assert!(y.after(x));
        prop_assert_eq!(y.diff(x), d as i32);
        prop_assert_eq!(x.max(y), y);
    }
}

#[test]
fn emit_prefix_reports_short_buffers_and_long_payloads() {
    let h = Header { kind: Kind::Nop, flags: 0, src_node: 0, dst_node: 1, boot: 0, seq: Seq(0), ack: Seq(0), horizon: Seq(0) };
    let mut small = [0u8; 10];
    assert!(matches!(emit_prefix(&h, &BodyRepr::Nop, 0, &mut small), Err(WireError::BufferTooShort { .. })));
    let mut big = vec![0u8; 70_000];
    assert!(matches!(emit_prefix(&h, &BodyRepr::Nop, 66_000, &mut big), Err(WireError::PayloadTooLong { .. })));
}

#[test]
fn fragments_outside_their_message_are_rejected() {
    let h = Header { kind: Kind::Data, flags: 0, src_node: 0, dst_node: 1, boot: 0, seq: Seq(0), ack: Seq(0), horizon: Seq(0) };
    let d = DataHeader { src_port: 0, dst_port: 0, src_gen: 1, dst_gen: 1, msg_id: 0, stream_seq: 0, total_len: 4, offset: 2, target: Target::Tagged { tag: 0 } };
    let pkt = Packet { header: h, body: Body::Data(d, &[1, 2, 3]) };
    let mut buf = vec![0u8; pkt.buffer_len()];
    pkt.emit(&key(), &mut buf).unwrap();
    assert!(matches!(Packet::parse(&buf, &key()), Err(WireError::MalformedBody { .. })));
}

#[test]
fn job_secrets_read_32_hex_digits_and_hide_themselves() {
    let s = JobSecret::from_hex("00112233445566778899aabbccddeeff").unwrap();
    assert_eq!(s.to_hex(), "00112233445566778899aabbccddeeff");
    assert_eq!(JobSecret::from_hex(&s.to_hex()).unwrap(), s);
    assert_eq!(format!("{s:?}"), "JobSecret(..)");
    assert_eq!(JobSecret::from_hex("0011"), Err(SecretError::Length { found: 4 }));
    assert_eq!(JobSecret::from_hex("zz112233445566778899aabbccddeeff"), Err(SecretError::NotHex));
    assert_eq!(JobSecret::from_hex("é0112233445566778899aabbccddeef"), Err(SecretError::NotHex));
}

#[test]
fn the_header_stays_44_bytes_with_the_tag_last() {
    // The simulator charges every header byte on the wire: the MAC replaced
    // the job key and the CRC without growing the header.
    let h = Header { kind: Kind::Nop, flags: 0, src_node: 3, dst_node: 4, boot: 5, seq: Seq(6), ack: Seq(7), horizon: Seq(8) };
    let pkt = Packet { header: h, body: Body::Nop };
    let mut buf = vec![0u8; pkt.buffer_len()];
    assert_eq!(pkt.emit(&key(), &mut buf).unwrap(), HEADER_LEN);
    assert_eq!(HEADER_LEN, 44);
    assert_ne!(buf[36..44], [0; 8]);
}

/// A sealed packet of `kind` with `body` as its raw bytes.
fn sealed_raw(kind: u8, body: &[u8]) -> Vec<u8> {
    let h = Header { kind: Kind::Nop, flags: 0, src_node: 3, dst_node: 4, boot: 5, seq: Seq(6), ack: Seq(7), horizon: Seq(8) };
    let mut buf = vec![0u8; HEADER_LEN];
    emit_prefix(&h, &BodyRepr::Nop, 0, &mut buf).unwrap();
    buf[3] = kind;
    buf.extend_from_slice(body);
    buf[6..8].copy_from_slice(&(body.len() as u16).to_be_bytes());
    seal(&mut buf, &key());
    buf
}

#[test]
fn port_closed_is_eight_exact_bytes_with_zero_reserved_ones() {
    let good = [7, 0, 0, 0, 0, 0, 1, 2];
    let resume = sealed_raw(Kind::CollResume as u8, &[0, 1, 0, 2]);
    assert_eq!(Packet::parse(&resume, &key()).unwrap().body, Body::CollResume(CollResume { room: 0x10002 }));
    assert!(matches!(
        Packet::parse(&sealed_raw(Kind::CollResume as u8, &[0; 5]), &key()),
        Err(WireError::MalformedBody { kind: "coll-resume", .. })
    ));
    let raw = sealed_raw(Kind::PortClosed as u8, &good);
    assert_eq!(Packet::parse(&raw, &key()).unwrap().body, Body::PortClosed(PortClosed { port: 7, gen: 0x102 }));
    for bad in [&good[..7], &[7, 0, 0, 0, 0, 0, 1, 2, 0][..], &[7, 0, 1, 0, 0, 0, 1, 2][..], &[7, 0x80, 0, 0, 0, 0, 1, 2][..]] {
        assert!(
            matches!(Packet::parse(&sealed_raw(Kind::PortClosed as u8, bad), &key()), Err(WireError::MalformedBody { kind: "port-closed", .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn a_kind_this_build_does_not_know_is_an_error_not_a_panic() {
    // What an engine built before `CollResume` (15) does with one: the
    // parser refuses the kind and the engine drops the datagram.
    for kind in [0u8, 16, 200, 255] {
        assert_eq!(Packet::parse(&sealed_raw(kind, &[0; 8]), &key()), Err(WireError::UnknownKind { found: kind }));
    }
}
