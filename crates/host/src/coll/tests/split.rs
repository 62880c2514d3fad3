//! Group splitting and group validation (threads: `split` is blocking).

use outboard_engine::{Endpoint, GroupId, NodeId, PortId};
use outboard_testnet::LinkConfig;

use super::harness::{Cluster, WORLD};
use crate::coll::{CollectiveError, Group, APP_GROUP_ID_LIMIT, UNDEFINED};
use crate::{HostError, Mode};

/// MPI_Comm_split: groups by color, ranked by key then old rank; UNDEFINED
/// joins none; every member of a new group agrees on its id, which is a
/// split id and differs from the parent's.
#[test]
fn split_groups_by_color_and_key_in_both_modes() {
    for mode in [Mode::Offloaded, Mode::HostBased] {
        let n = 7u32;
        let mut c = Cluster::new(n, LinkConfig::lossy(0.1, 0.05, 0.0), 11);
        let groups = c.world();
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = c
                .ports
                .iter_mut()
                .zip(groups)
                .map(|(p, mut g)| {
                    s.spawn(move || {
                        g.set_default(mode);
                        let r = g.rank();
                        let color = if r == 6 { UNDEFINED } else { r % 2 };
                        let key = 10 - r; // reverses the order
                        let a = p.split(&mut g, color, key).unwrap();
                        let b = p.split(&mut g, 0, 0).unwrap().unwrap();
                        (
                            a.map(|a| (a.id(), a.rank(), a.members().iter().collect::<Vec<_>>())),
                            b.id(),
                            b.rank(),
                        )
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let eps = c.endpoints();
        let even: Vec<Endpoint> = [4, 2, 0].iter().map(|&r| eps[r]).collect();
        let odd: Vec<Endpoint> = [5, 3, 1].iter().map(|&r| eps[r]).collect();
        let first = results[0].0.as_ref().unwrap().0;
        assert!(first.0 >= APP_GROUP_ID_LIMIT && first != WORLD);
        for (r, (a, b_id, b_rank)) in results.iter().enumerate() {
            if r == 6 {
                assert!(a.is_none());
            } else {
                let (id, rank, members) = a.as_ref().unwrap();
                assert_eq!(*id, first, "all members agree on the id");
                let want = if r % 2 == 0 { &even } else { &odd };
                assert_eq!(members, want);
                assert_eq!(members[*rank as usize], eps[r]);
            }
            assert_ne!(
                *b_id, first,
                "the second split gets a fresh id at ports that hold the first"
            );
            assert_eq!(*b_rank, r as u32);
        }
    }
}

#[test]
fn groups_are_validated() {
    let mut c = Cluster::new(2, LinkConfig::default(), 1);
    let eps = c.endpoints();
    let other = Endpoint {
        node: NodeId(9),
        port: PortId(0),
        gen: 1,
    };
    assert_eq!(
        c.ports[0].new_group(GroupId(3), 1, eps.clone()).err(),
        Some(HostError::Coll(CollectiveError::NotMember))
    );
    assert_eq!(
        Group::new(GroupId(3), 0, vec![eps[0], eps[0]]).err(),
        Some(CollectiveError::DuplicateMember)
    );
    assert_eq!(
        Group::new(GroupId(3), 2, eps.clone()).err(),
        Some(CollectiveError::RankOutOfRange { rank: 2, size: 2 })
    );
    assert!(matches!(
        Group::new(GroupId(APP_GROUP_ID_LIMIT), 0, eps.clone()),
        Err(CollectiveError::GroupIdOutOfRange(_))
    ));
    c.ports[0].new_group(GroupId(3), 0, eps.clone()).unwrap();
    assert_eq!(
        c.ports[0]
            .new_group(GroupId(3), 0, vec![eps[0], other])
            .err(),
        Some(HostError::Coll(CollectiveError::GroupIdInUse(GroupId(3))))
    );
}
