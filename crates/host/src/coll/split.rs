//! `Port::split`: MPI_Comm_split over the existing collectives.
//!
//! Two allreduces on the parent group, in its default mode and allreduce
//! algorithm:
//! 1. an allgather of everyone's (color, key), as a BOR over a vector with
//!    one u64 slot per rank that only its owner fills;
//! 2. the new group's id, as MPICH allocates context ids: a BAND over every
//!    member's mask of free split ids; the lowest bit left is free at every
//!    member, so all of them (whatever their color) agree on it, and groups
//!    of different colors share it without harm because they have no member
//!    in common. `split` is blocking, so no other allocation at this port
//!    can interleave between contributing the mask and taking the id.

use outboard_engine::{Datatype, MemberList, ReduceOp, Reduction};

use super::group::{IdPool, UNDEFINED};
use super::{CollectiveError, Group};
use crate::{HostError, Port, PortIo};

impl<P: PortIo> Port<P> {
    /// Splits `g` by `color` (MPI_Comm_split): members of one color form a
    /// new group, ranked by `key` then by their rank in `g`. Every member of
    /// `g` must call it; a member passing [`UNDEFINED`] joins no group and
    /// gets `None`. The new group inherits `g`'s defaults.
    pub fn split(
        &mut self,
        g: &mut Group,
        color: u32,
        key: u32,
    ) -> Result<Option<Group>, HostError> {
        let d = g.defaults();
        let n = g.size() as usize;
        let mut slots = vec![0u8; n * 8];
        let me = (u64::from(color) << 32) | u64::from(key);
        slots[g.rank() as usize * 8..][..8].copy_from_slice(&me.to_ne_bytes());
        let bor = Reduction {
            op: ReduceOp::Bor,
            dtype: Datatype::U64,
        };
        let all = self.allreduce(g, d.mode, d.allreduce, bor, &slots)?;
        let band = Reduction {
            op: ReduceOp::Band,
            dtype: Datatype::U64,
        };
        let mask = self.coll.ids.mask_bytes();
        let free = self.allreduce(g, d.mode, d.allreduce, band, &mask)?;
        let id = IdPool::lowest(&free).ok_or(CollectiveError::NoFreeGroupId)?;
        if color == UNDEFINED {
            return Ok(None);
        }
        let mut mine: Vec<(u32, u32)> = all
            .chunks_exact(8)
            .enumerate()
            .filter_map(|(r, c)| {
                let v = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
                ((v >> 32) as u32 == color).then_some((v as u32, r as u32))
            })
            .collect();
        mine.sort();
        let rank = mine
            .iter()
            .position(|&(_, r)| r == g.rank())
            .expect("this member is of its own color") as u32;
        let members = MemberList::from_endpoints(mine.iter().filter_map(|&(_, r)| g.member(r)));
        let mut ng = Group::build(id, rank, members)?;
        ng.set_defaults(d);
        self.coll.ids.take(id);
        self.register_group(&ng)?;
        Ok(Some(ng))
    }
}
