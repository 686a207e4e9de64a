//! Address classes (docs/language.md#non-public-addresses) and the canonical form of an address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4-mapped (`::ffff:a.b.c.d`) and IPv4-compatible (`::a.b.c.d`) IPv6
/// addresses are their IPv4 address; `::` and `::1` stay themselves.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// The IPv4 prefix an IPv6 prefix means, when it lies inside
/// `::ffff:0:0/96` (docs/language.md#network: `::ffff:10.0.0.0/104` is `10.0.0.0/8`); `None`
/// for every other IPv6 prefix (`::/0` and `::/96` included), which covers
/// IPv6 addresses only.
pub fn mapped_v4_prefix(net: ipnet::Ipv6Net) -> Option<ipnet::Ipv4Net> {
    let s = net.network().segments();
    let inside = net.prefix_len() >= 96 && matches!(s, [0, 0, 0, 0, 0, 0xffff, _, _]);
    let low = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    inside
        .then(|| ipnet::Ipv4Net::new(low, net.prefix_len() - 96).ok())
        .flatten()
}

/// A rule's prefix as it applies: a mapped IPv6 prefix is its IPv4 prefix;
/// every other prefix is itself.
pub fn canonical_net(net: ipnet::IpNet) -> ipnet::IpNet {
    match net {
        ipnet::IpNet::V6(n) => mapped_v4_prefix(n).map_or(net, ipnet::IpNet::V4),
        v4 => v4,
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, _, _] if u128::from(v6) > 1 => Some(low),
        _ => None,
    }
}

/// `(network, prefix length)` lists, checked with a mask: constant time,
/// whatever the size of the policy.
const V4_NON_PUBLIC: &[(u32, u8)] = &[
    (0x0000_0000, 8),  // 0.0.0.0/8 "this network"
    (0x0a00_0000, 8),  // 10.0.0.0/8
    (0x6440_0000, 10), // 100.64.0.0/10 shared address space
    (0x7f00_0000, 8),  // 127.0.0.0/8 loopback
    (0xa9fe_0000, 16), // 169.254.0.0/16 link-local, cloud metadata
    (0xac10_0000, 12), // 172.16.0.0/12
    (0xc000_0000, 24), // 192.0.0.0/24 IETF protocol assignments (anycast included)
    (0xc000_0200, 24), // 192.0.2.0/24 TEST-NET-1
    (0xc058_6300, 24), // 192.88.99.0/24 6to4 relay anycast
    (0xc0a8_0000, 16), // 192.168.0.0/16
    (0xc612_0000, 15), // 198.18.0.0/15 benchmarking
    (0xc633_6400, 24), // 198.51.100.0/24 TEST-NET-2
    (0xcb00_7100, 24), // 203.0.113.0/24 TEST-NET-3
    (0xe000_0000, 4),  // 224.0.0.0/4 multicast
    (0xf000_0000, 4),  // 240.0.0.0/4 reserved, broadcast included
];

const V6_NON_PUBLIC_IN_GLOBAL: &[(u128, u8)] = &[
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 23), // IETF protocol assignments, Teredo included
    (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32), // documentation
    (0x3fff_0000_0000_0000_0000_0000_0000_0000, 20), // documentation
];

/// The IPv4 non-public prefixes of docs/language.md#non-public-addresses (for the checker).
pub fn non_public_v4() -> impl Iterator<Item = ipnet::Ipv4Net> {
    V4_NON_PUBLIC
        .iter()
        .filter_map(|&(n, l)| ipnet::Ipv4Net::new(Ipv4Addr::from(n), l).ok())
}

/// The non-public IPv6 prefixes inside `2000::/3` (everything outside it is
/// non-public), plus 6to4 `2002::/16`, whose class depends on the IPv4
/// address it embeds.
pub fn non_public_v6_in_global() -> impl Iterator<Item = ipnet::Ipv6Net> {
    V6_NON_PUBLIC_IN_GLOBAL
        .iter()
        .chain(&[(0x2002_0000_0000_0000_0000_0000_0000_0000, 16)])
        .filter_map(|&(n, l)| ipnet::Ipv6Net::new(Ipv6Addr::from(n), l).ok())
}

/// The IPv4 non-public prefixes as `(network, length)` (for `diff`'s cells).
#[cfg(feature = "diff")]
pub(crate) fn non_public_v4_prefixes() -> impl Iterator<Item = (u32, u8)> {
    V4_NON_PUBLIC.iter().copied()
}

/// The non-public IPv6 prefixes inside `2000::/3` as `(network, length)`.
#[cfg(feature = "diff")]
pub(crate) fn non_public_v6_prefixes() -> impl Iterator<Item = (u128, u8)> {
    V6_NON_PUBLIC_IN_GLOBAL.iter().copied()
}

/// The first octets that some non-public IPv4 prefix starts with (bit `o`
/// of the 256-bit map for octet `o`): most public addresses are told apart
/// by one load and one bit test, not fifteen prefix comparisons.
// Indexing in a constant is checked when the crate compiles: it cannot
// panic at run time.
#[allow(clippy::indexing_slicing)]
const V4_NON_PUBLIC_FIRST_OCTETS: [u64; 4] = {
    let mut map = [0u64; 4];
    let mut i = 0;
    while i < V4_NON_PUBLIC.len() {
        let (net, len) = V4_NON_PUBLIC[i];
        let first = (net >> 24) as usize;
        let count = if len >= 8 { 1 } else { 1usize << (8 - len) };
        let mut j = 0;
        while j < count {
            let o = first + j;
            map[o / 64] |= 1 << (o % 64);
            j += 1;
        }
        i += 1;
    }
    map
};

fn is_non_public_v4(x: u32) -> bool {
    let o = (x >> 24) as usize;
    let maybe = V4_NON_PUBLIC_FIRST_OCTETS
        .get(o / 64)
        .is_some_and(|w| (w >> (o % 64)) & 1 != 0);
    maybe && V4_NON_PUBLIC.iter().any(|&(n, l)| in_v4(x, n, l))
}

fn in_v4(x: u32, net: u32, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    x & mask == net
}

fn in_v6(x: u128, net: u128, len: u8) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    x & mask == net
}

/// Whether an address is not globally reachable unicast (docs/language.md#non-public-addresses).
/// Mapped and compatible forms are judged by their IPv4 address; NAT64
/// (`64:ff9b::/96`) and 6to4 (`2002::/16`) by the IPv4 address they embed.
pub fn is_non_public(ip: IpAddr) -> bool {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => is_non_public_v4(u32::from(v4)),
        IpAddr::V6(v6) => {
            let x = u128::from(v6);
            if in_v6(x, 0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96) {
                return is_non_public(IpAddr::V4(Ipv4Addr::from(x as u32)));
            }
            if in_v6(x, 0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
                return is_non_public(IpAddr::V4(Ipv4Addr::from((x >> 80) as u32)));
            }
            if !in_v6(x, 0x2000_0000_0000_0000_0000_0000_0000_0000, 3) {
                return true; // everything outside 2000::/3, ::1 and fc00::/7 included
            }
            V6_NON_PUBLIC_IN_GLOBAL.iter().any(|&(n, l)| in_v6(x, n, l))
        }
    }
}

/// Loopback: `127.0.0.0/8` and `::1` (mapped forms included).
pub fn is_loopback(ip: IpAddr) -> bool {
    match canonical_ip(ip) {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// A rule prefix in canonical form: the IPv4 prefix it means and its IPv6
/// self (docs/language.md#network). An IPv6 prefix applies to IPv4 only when it lies inside
/// `::ffff:0:0/96`, and then means the IPv4 prefix it maps
/// (`::ffff:10.0.0.0/104` is `10.0.0.0/8`); every other IPv6 prefix, `::/0`
/// and `::/96` included, covers IPv6 addresses only.
pub fn canonical_prefixes(net: ipnet::IpNet) -> (Option<ipnet::Ipv4Net>, Option<ipnet::Ipv6Net>) {
    let v6 = match net {
        ipnet::IpNet::V4(n) => return (Some(n), None),
        ipnet::IpNet::V6(n) => n,
    };
    // A mapped prefix is its IPv4 prefix alone: queries never carry a
    // mapped IPv6 address (they are unmapped first).
    match mapped_v4_prefix(v6) {
        Some(v4) => (Some(v4), None),
        None => (None, Some(v6)),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_first_octet_map_agrees_with_the_prefix_list() {
        let list = |x: u32| V4_NON_PUBLIC.iter().any(|&(n, l)| in_v4(x, n, l));
        for o in 0u32..256 {
            for low in [
                0, 1, 0x00_63_ff, 0x12_3456, 0x40_0000, 0x7f_ffff, 0xa9_fe01, 0xff_ffff,
            ] {
                let x = (o << 24) | low;
                assert_eq!(is_non_public_v4(x), list(x), "{x:#010x}");
            }
        }
        // A wrong map would show: every listed prefix's first octet is in it.
        for &(n, _) in V4_NON_PUBLIC {
            assert!(is_non_public_v4(n), "{n:#010x}");
        }
        assert!(!is_non_public_v4(0x0808_0808)); // 8.8.8.8
    }

    use super::*;

    fn np(s: &str) -> bool {
        is_non_public(s.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)))
    }

    #[test]
    fn the_spec_lists() {
        for s in [
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.9",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.1.1.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378::1",
            "2001:db8::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "64:ff9b::a00:1",
            "2002:a00:1::1",
            "2002:7f00:1::",
            "4000::1",
        ] {
            assert!(np(s), "{s} should be non-public");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:200::1",
        ] {
            assert!(!np(s), "{s} should be public");
        }
    }

    #[test]
    fn mapped_and_compatible_become_v4() {
        let c = |s: &str| {
            canonical_ip(s.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))).to_string()
        };
        assert_eq!(c("::ffff:10.1.2.3"), "10.1.2.3");
        assert_eq!(c("::10.1.2.3"), "10.1.2.3");
        assert_eq!(c("::1"), "::1");
        assert_eq!(c("::"), "::");
        assert_eq!(c("64:ff9b::a00:1"), "64:ff9b::a00:1");
    }
}
