//! gatehouse-wire's SOCKS5 readers on hostile bytes: never a panic; a
//! message is read from exactly the bytes it says it takes (the same at
//! any split of them, and never more than were given), and a datagram's
//! header written again reads back the same.
#![no_main]
use gatehouse_wire::socks::{self, Read};
use libfuzzer_sys::fuzz_target;

/// Feeds `parse` as a connection loop does: only as many bytes as it asks
/// for; the result and how many bytes were handed over.
fn stepwise<T>(data: &[u8], parse: impl Fn(&[u8]) -> Read<T>) -> (Read<T>, usize) {
    let mut have = 0;
    loop {
        match parse(&data[..have]) {
            Read::More(need) if need > have && need <= data.len() => have = need,
            Read::More(need) => {
                assert!(need > have, "a reader that asks for nothing more");
                return (Read::More(need), have);
            }
            done => return (done, have),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    for which in 0..2 {
        let (got, have) = if which == 0 {
            let (r, n) = stepwise(data, socks::greeting);
            (r.map_done(|v| format!("{v}")), n)
        } else {
            let (r, n) = stepwise(data, socks::request);
            (r.map_done(|v| format!("{v:?}")), n)
        };
        let at_once = if which == 0 {
            socks::greeting(data).map_done(|v| format!("{v}"))
        } else {
            socks::request(data).map_done(|v| format!("{v:?}"))
        };
        match (&got, &at_once) {
            (Read::Done(a, n), Read::Done(b, m)) => {
                assert_eq!((a, n), (b, m));
                assert_eq!(*n, have, "read exactly the message");
            }
            (Read::Invalid, Read::Invalid) | (Read::More(_), Read::More(_)) => {}
            other => panic!("stepwise and at once differ: {other:?}"),
        }
    }
    if let Some(d) = socks::datagram(data) {
        assert!(d.payload.len() < data.len());
        // An address (as the reader writes one: IPv4 as it is, IPv6 in
        // brackets) written back reads the same; a name that merely looks
        // like one (`]]2::`) is a name, and is not re-encoded.
        let ip = match d.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6),
            None => d.host.parse::<std::net::Ipv4Addr>().ok().map(std::net::IpAddr::V4),
        }
        .filter(|ip| match ip {
            std::net::IpAddr::V4(_) => ip.to_string() == d.host,
            std::net::IpAddr::V6(_) => format!("[{ip}]") == d.host,
        });
        if let Some(ip) = ip {
            let again = socks::datagram_from(std::net::SocketAddr::new(ip, d.port), d.payload);
            let back = socks::datagram(&again).expect("a written datagram reads back");
            assert_eq!((back.host, back.port, back.payload), (d.host, d.port, d.payload));
        }
    }
});
