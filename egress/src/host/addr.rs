//! How host mode keys a sandbox's source address.

use std::net::IpAddr;

/// The address a source is looked up by: an IPv4-mapped IPv6 address is
/// its IPv4 address (a dual-stack socket reports IPv4 peers that way).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
