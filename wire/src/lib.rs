//! gatehouse-wire: the wire formats `gatehouse-egress` reads from peers it
//! does not trust, parsed without I/O.
//!
//! Bytes in, a value or a refusal out: no socket, no runtime, no async.
//! The proxy's connection loops read bytes and hand them here; the fuzz
//! targets (`fuzz/fuzz_targets/wire_*.rs`) feed the same functions hostile
//! bytes directly.
//!
//! - [`http`]: HTTP/1 request and response heads, read strictly (every
//!   byte a lenient server might read differently is refused);
//! - [`tls`]: the server name of a TLS ClientHello;
//! - [`authority`]: `HOST:PORT` as targets, `Host` fields and `CONNECT`
//!   lines carry it;
//! - [`socks`]: SOCKS5 greetings, requests, replies and UDP datagrams;
//! - [`dns`]: DNS questions as a resolver may answer them, CNAME chains,
//!   and refusals.

#![deny(missing_docs)]

pub mod authority;
pub mod dns;
pub mod http;
pub mod socks;
pub mod tls;
