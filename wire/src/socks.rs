//! SOCKS5 (RFC 1928) as the proxy speaks it: a greeting offering "no
//! authentication", a `CONNECT` or `UDP ASSOCIATE` request, replies, and
//! UDP datagrams with their header.
//!
//! The readers take the bytes received so far and say how many more they
//! need, so that a connection loop can read exactly one message and leave
//! what follows it unread.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The protocol version byte.
pub const VERSION: u8 = 5;
/// The command `CONNECT`.
pub const CONNECT: u8 = 1;
/// The command `UDP ASSOCIATE`.
pub const UDP_ASSOCIATE: u8 = 3;
/// The reply code for success.
pub const SUCCEEDED: u8 = 0;
/// The reply code for a command not supported.
pub const COMMAND_NOT_SUPPORTED: u8 = 7;

/// What a reader made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Read<T> {
    /// A message, and the number of bytes it took.
    Done(T, usize),
    /// Not all there: at least this many bytes in all are needed.
    More(usize),
    /// Not this message.
    Invalid,
}

impl<T> Read<T> {
    /// The message mapped by `f`, the rest as it is.
    pub fn map_done<U>(self, f: impl FnOnce(T) -> U) -> Read<U> {
        match self {
            Read::Done(v, n) => Read::Done(f(v), n),
            Read::More(n) => Read::More(n),
            Read::Invalid => Read::Invalid,
        }
    }
}

/// A client's greeting: whether it offers "no authentication", the only
/// method served.
pub fn greeting(b: &[u8]) -> Read<bool> {
    match b {
        [] | [_] => Read::More(2),
        [v, ..] if *v != VERSION => Read::Invalid,
        [_, n, methods @ ..] => {
            let n = usize::from(*n);
            match methods.get(..n) {
                Some(m) => Read::Done(m.contains(&0), 2 + n),
                None => Read::More(2 + n),
            }
        }
    }
}

/// The answer to a greeting: "no authentication", or no acceptable method.
pub fn choice(no_auth: bool) -> [u8; 2] {
    [VERSION, if no_auth { 0 } else { 0xff }]
}

/// A request: its command and target (the host as text, an IPv6 address in
/// brackets; a name that is not UTF-8 is kept lossy, so that validation
/// refuses it).
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The command ([`CONNECT`], [`UDP_ASSOCIATE`], or another).
    pub command: u8,
    /// The target host.
    pub host: String,
    /// The target port.
    pub port: u16,
}

/// A request (VER CMD RSV ATYP ADDR PORT).
pub fn request(b: &[u8]) -> Read<Request> {
    let Some(head) = b.get(..3) else {
        return Read::More(3);
    };
    if head.first() != Some(&VERSION) {
        return Read::Invalid;
    }
    let command = head.get(1).copied().unwrap_or(0);
    match address(b.get(3..).unwrap_or_default()) {
        Read::Done((host, port), n) => Read::Done(
            Request {
                command,
                host,
                port,
            },
            3 + n,
        ),
        Read::More(n) => Read::More(3 + n),
        Read::Invalid => Read::Invalid,
    }
}

/// ATYP, the address and the port: the host as text (IPv6 bracketed).
pub fn address(b: &[u8]) -> Read<(String, u16)> {
    let Some(&atyp) = b.first() else {
        return Read::More(1);
    };
    let (len, host): (usize, Option<String>) = match atyp {
        1 => (
            1 + 4,
            b.get(1..5)
                .and_then(|a| <[u8; 4]>::try_from(a).ok())
                .map(|a| Ipv4Addr::from(a).to_string()),
        ),
        3 => {
            let Some(&n) = b.get(1) else {
                return Read::More(2);
            };
            let n = usize::from(n);
            (
                2 + n,
                b.get(2..2 + n)
                    .map(|name| String::from_utf8_lossy(name).into_owned()),
            )
        }
        4 => (
            1 + 16,
            b.get(1..17)
                .and_then(|a| <[u8; 16]>::try_from(a).ok())
                .map(|a| format!("[{}]", Ipv6Addr::from(a))),
        ),
        _ => return Read::Invalid,
    };
    let port = b
        .get(len..len + 2)
        .and_then(|p| <[u8; 2]>::try_from(p).ok())
        .map(u16::from_be_bytes);
    match (host, port) {
        (Some(host), Some(port)) => Read::Done((host, port), len + 2),
        _ => Read::More(len + 2),
    }
}

/// A reply with `code` and the bound address.
pub fn reply(code: u8, bound: SocketAddr) -> Vec<u8> {
    let mut out = vec![VERSION, code, 0];
    match bound.ip() {
        IpAddr::V4(a) => {
            out.push(1);
            out.extend(a.octets());
        }
        IpAddr::V6(a) => {
            out.push(4);
            out.extend(a.octets());
        }
    }
    out.extend(bound.port().to_be_bytes());
    out
}

/// A UDP datagram from the client: its target and payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The target host (as in [`Request`]).
    pub host: String,
    /// The target port.
    pub port: u16,
    /// What to send there.
    pub payload: &'a [u8],
}

/// A client's UDP datagram (RSV RSV FRAG ATYP ADDR PORT DATA); `None` when
/// it is malformed or a fragment (fragments are not supported).
pub fn datagram(d: &[u8]) -> Option<Datagram<'_>> {
    let (&frag, rest) = d.get(2..)?.split_first()?;
    if frag != 0 {
        return None;
    }
    match address(rest) {
        Read::Done((host, port), n) => Some(Datagram {
            host,
            port,
            payload: rest.get(n..)?,
        }),
        _ => None,
    }
}

/// A datagram to the client: the header for `from`, then `payload`.
pub fn datagram_from(from: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut out = reply(0, from);
    // RSV RSV FRAG where a reply has VER REP RSV.
    if let Some(head) = out.get_mut(..2) {
        head.copy_from_slice(&[0, 0]);
    }
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn greetings() {
        assert_eq!(greeting(&[]), Read::More(2));
        assert_eq!(greeting(&[5, 2, 0]), Read::More(4));
        assert_eq!(greeting(&[5, 2, 2, 0, 9]), Read::Done(true, 4));
        assert_eq!(greeting(&[5, 1, 2]), Read::Done(false, 3));
        assert_eq!(greeting(&[4, 1, 0]), Read::Invalid);
        assert_eq!(choice(false), [5, 0xff]);
    }

    #[test]
    fn requests_read_exactly_one_message() {
        let v4 = [5, 1, 0, 1, 10, 0, 0, 1, 0, 80, 0xaa];
        for n in 0..10 {
            assert!(matches!(request(&v4[..n]), Read::More(m) if m > n), "{n}");
        }
        let want = Request {
            command: 1,
            host: "10.0.0.1".into(),
            port: 80,
        };
        assert_eq!(request(&v4), Read::Done(want, 10));
        let mut name = vec![5, 1, 0, 3, 8];
        name.extend(b"a.test\xff\xfe");
        name.extend([1, 187]);
        let Read::Done(r, 15) = request(&name) else {
            panic!("{:?}", request(&name))
        };
        assert_eq!((r.host.as_str(), r.port), ("a.test\u{fffd}\u{fffd}", 443));
        let mut v6 = vec![5, 3, 0, 4];
        v6.extend(Ipv6Addr::LOCALHOST.octets());
        v6.extend([0, 53]);
        assert!(
            matches!(request(&v6), Read::Done(Request { command: 3, ref host, port: 53 }, 22) if host == "[::1]")
        );
        assert_eq!(request(&[5, 1, 0, 2, 0]), Read::Invalid);
        assert_eq!(request(&[4, 1, 0, 1]), Read::Invalid);
    }

    #[test]
    fn datagrams() {
        let d = [0, 0, 0, 1, 127, 0, 0, 1, 0, 53, b'q'];
        let got = datagram(&d).expect("parses");
        assert_eq!(
            (got.host.as_str(), got.port, got.payload),
            ("127.0.0.1", 53, &b"q"[..])
        );
        assert!(
            datagram(&[0, 0, 1, 1, 127, 0, 0, 1, 0, 53]).is_none(),
            "a fragment"
        );
        assert!(datagram(&d[..8]).is_none());
        let from = SocketAddr::from(([127, 0, 0, 1], 53));
        assert_eq!(datagram_from(from, b"q"), d);
        assert_eq!(reply(0, from)[..4], [5, 0, 0, 1]);
    }
}
