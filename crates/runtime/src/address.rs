//! Which IP address a rank's engine binds.
//!
//! The user may name the address (`OUTBOARD_ADDR`) or the interface
//! (`OUTBOARD_IFACE`, as Open MPI's `btl_tcp_if_include`, UCX's
//! `UCX_NET_DEVICES` and libfabric's `FI_TCP_IFACE` name one): on a
//! cluster node with a management network beside the fast one, or with
//! container bridges, the first address the machine lists is often the
//! wrong one. Otherwise the job's bootstrap decides: the local end of the
//! connection to the rendezvous, the loopback address when every rank is
//! on this machine, else [`host_ip`].

use std::net::{IpAddr, Ipv4Addr};

use nix::net::if_::InterfaceFlags;
use outboard_settings::{registry as settings, Env, SettingError};

/// The address the user's settings fix, if any: `OUTBOARD_ADDR`, or the
/// address of the interface `OUTBOARD_IFACE` names. Both at once is an
/// error (they could disagree), as is an interface this machine does not
/// have or one without an address.
pub fn chosen(env: &dyn Env) -> Result<Option<IpAddr>, SettingError> {
    let addr = settings::ADDR.get(env)?;
    let Some(name) = settings::IFACE.get(env)? else { return Ok(addr) };
    if let Some(a) = addr {
        return Err(SettingError::OutOfRange {
            name: settings::IFACE.name.into(),
            value: Some(name),
            problem: format!("set beside OUTBOARD_ADDR={a}, which it may contradict"),
            accepted: "one of the two".into(),
        });
    }
    interface_address(&name, &interfaces()).map(Some)
}

/// One address of one interface, as the machine lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InterfaceAddr {
    pub name: String,
    pub ip: IpAddr,
    pub up: bool,
    pub loopback: bool,
}

/// Every IPv4 and IPv6 address of this machine's interfaces.
pub(crate) fn interfaces() -> Vec<InterfaceAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    addrs
        .filter_map(|a| {
            let s = a.address?;
            let ip = match (s.as_sockaddr_in(), s.as_sockaddr_in6()) {
                (Some(v4), _) => IpAddr::V4(v4.ip()),
                (None, Some(v6)) => IpAddr::V6(v6.ip()),
                (None, None) => return None,
            };
            Some(InterfaceAddr {
                name: a.interface_name,
                ip,
                up: a.flags.contains(InterfaceFlags::IFF_UP),
                loopback: a.flags.contains(InterfaceFlags::IFF_LOOPBACK),
            })
        })
        .collect()
}

/// The address of interface `name` among `list`: its first IPv4 address,
/// else its first IPv6 one (link-local ones last: they need a scope the
/// peers cannot know). The error names the interfaces that have one.
pub(crate) fn interface_address(name: &str, list: &[InterfaceAddr]) -> Result<IpAddr, SettingError> {
    let mine: Vec<&InterfaceAddr> = list.iter().filter(|a| a.name == name).collect();
    let link_local = |ip: &IpAddr| matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    let best = mine
        .iter()
        .find(|a| a.ip.is_ipv4())
        .or_else(|| mine.iter().find(|a| !link_local(&a.ip)))
        .or_else(|| mine.first());
    match best {
        Some(a) if a.up => Ok(a.ip),
        Some(_) => Err(SettingError::OutOfRange {
            name: settings::IFACE.name.into(),
            value: Some(name.into()),
            problem: "an interface that is down".into(),
            accepted: format!("an interface that is up: {}", names(list, true)),
        }),
        None => Err(SettingError::OutOfRange {
            name: settings::IFACE.name.into(),
            value: Some(name.into()),
            problem: "not an interface of this machine with an IP address".into(),
            accepted: format!("one of {}", names(list, false)),
        }),
    }
}

/// The interfaces of `list` (those up only, if `up`), each once, in order.
fn names(list: &[InterfaceAddr], up: bool) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for a in list.iter().filter(|a| a.up || !up) {
        if !seen.contains(&a.name.as_str()) {
            seen.push(&a.name);
        }
    }
    if seen.is_empty() {
        "(this machine lists none)".into()
    } else {
        seen.join(", ")
    }
}

/// The address an engine binds under a launcher's store, which (unlike a
/// rendezvous connection) shows no address of this host that the others
/// reach: loopback when every rank is on this machine, else the first
/// IPv4 address of an interface that is up and not loopback.
pub fn host_ip(all_local: bool) -> IpAddr {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    if all_local {
        return loopback;
    }
    interfaces().into_iter().find(|a| a.up && !a.loopback && a.ip.is_ipv4()).map_or(loopback, |a| a.ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(name: &str, ip: &str, up: bool) -> InterfaceAddr {
        InterfaceAddr { name: name.into(), ip: ip.parse().unwrap(), up, loopback: name == "lo" }
    }

    #[test]
    fn an_interface_gives_its_ipv4_address_before_its_ipv6_ones() {
        let list = [a("lo", "127.0.0.1", true), a("ib0", "fe80::1", true), a("ib0", "fd00::7", true), a("ib0", "10.1.0.7", true), a("eth0", "fe80::2", true)];
        assert_eq!(interface_address("ib0", &list).unwrap(), "10.1.0.7".parse::<IpAddr>().unwrap());
        assert_eq!(interface_address("lo", &list).unwrap(), "127.0.0.1".parse::<IpAddr>().unwrap());
        // Only IPv6: a routable one before a link-local one.
        let v6 = [a("ib0", "fe80::1", true), a("ib0", "fd00::7", true)];
        assert_eq!(interface_address("ib0", &v6).unwrap(), "fd00::7".parse::<IpAddr>().unwrap());
        assert_eq!(interface_address("eth0", &list).unwrap(), "fe80::2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn an_unknown_or_down_interface_is_refused_naming_the_ones_there_are() {
        let list = [a("lo", "127.0.0.1", true), a("eth0", "10.0.0.5", true), a("eth0", "fe80::5", true), a("ib0", "10.1.0.7", false)];
        let e = interface_address("eth9", &list).unwrap_err().to_string();
        assert!(e.starts_with("OUTBOARD_IFACE=\"eth9\" is not an interface of this machine with an IP address: use one of lo, eth0, ib0"), "{e}");
        let e = interface_address("ib0", &list).unwrap_err().to_string();
        assert!(e.contains("OUTBOARD_IFACE=\"ib0\" is an interface that is down: use an interface that is up: lo, eth0"), "{e}");
    }

    #[test]
    fn the_address_and_the_interface_are_not_both_taken() {
        let e = chosen(&[("OUTBOARD_ADDR", "10.0.0.5"), ("OUTBOARD_IFACE", "lo")]).unwrap_err().to_string();
        assert!(e.contains("OUTBOARD_IFACE") && e.contains("OUTBOARD_ADDR=10.0.0.5"), "{e}");
        assert_eq!(chosen(&[("OUTBOARD_IFACE", "lo")]).unwrap(), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(chosen(&[("OUTBOARD_ADDR", "10.0.0.5")]).unwrap(), Some("10.0.0.5".parse().unwrap()));
        assert_eq!(chosen(&[]).unwrap(), None);
    }
}
