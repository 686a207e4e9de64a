//! Hosts, addresses and prefixes chosen to collide — names that are
//! suffixes of one another, addresses inside and outside the prefixes,
//! mapped, compatible and translated IPv6 — shared by the fuzzing
//! generators (`gatehouse::arbitrary`) and the property tests of `tests/`, so
//! that the two draw from one vocabulary (and explore it differently). Not
//! part of the API.

/// Domain names.
pub const NAMES: &[&str] = &[
    "example.com",
    "a.example.com",
    "b.a.example.com",
    "example.org",
    "localhost",
    "x.localhost",
    "com",
    "github.com",
    "api.github.com",
    "bücher.example",
    "xn--bcher-kva.example",
    "pastebin.com",
    "paste.pastebin.com",
];

/// Addresses, every one of which parses as an `IpAddr`.
pub const IPS: &[&str] = &[
    "10.0.0.1",
    "127.0.0.1",
    "169.254.169.254",
    "8.8.8.8",
    "93.184.215.14",
    "::1",
    "fd00::1",
    "2606:4700::1",
    "::ffff:8.8.8.8",
    "192.168.1.1",
    "64:ff9b::a00:1",
    "2002:808:808::1",
    "0.0.0.0",
    "::",
    "10.0.0.5",
    "::10.0.0.5",
    "::7f00:1",
    "::169.254.169.254",
];

/// Prefixes without host bits.
pub const CIDRS: &[&str] = &[
    "10.0.0.0/8",
    "127.0.0.0/8",
    "8.8.8.0/24",
    "0.0.0.0/0",
    "fd00::/8",
    "2606:4700::/32",
    "::ffff:10.0.0.0/104",
    "::/0",
    "192.168.0.0/16",
    "8.0.0.0/7",
    "169.254.169.254/32",
    "::10.0.0.0/104",
];
