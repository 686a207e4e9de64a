//! Hostile bytes against the head parser and the chunked decoder: valid
//! messages mutated at random (a deterministic generator, many thousands of
//! cases per run). Whatever the parser accepts must be unambiguous — no
//! control byte anywhere in it, and the head the proxy writes out reads
//! back as the same request — and whatever the decoder accepts must stop
//! exactly at the end of the body.

use super::rebuild_request;
use crate::conn::Conn;
use gatehouse_wire::http::{Framing, parse_request};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const HEADS: &[&str] = &[
    "GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\nAccept: */*",
    "POST http://a.test:8080/ HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 5\r\nX-A: b",
    "PUT /p?q=1 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked",
    "GET http://a.test/ HTTP/1.0",
    "OPTIONS * HTTP/1.1\r\nHost: a.test\r\nConnection: keep-alive, X-A\r\nX-A: 1",
];

/// Bytes that break framing when misplaced.
const NASTY: &[u8] = b"\r\n\0\t :;,\x0b\x0c\x1b\x7f\xff";

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len() + 1);
        let byte = NASTY[rng.below(NASTY.len())];
        match rng.below(3) {
            0 => b.insert(at, byte),
            1 if at < b.len() => b[at] = byte,
            _ if at < b.len() => {
                b.remove(at);
            }
            _ => b.push(byte),
        }
    }
    b
}

#[test]
fn accepted_heads_are_unambiguous_and_read_back_the_same() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    for i in 0..40_000 {
        let base = HEADS[i % HEADS.len()].as_bytes();
        let bytes = mutate(&mut rng, base);
        let Some(h) = parse_request(bytes) else {
            continue;
        };
        accepted += 1;
        for (k, v) in h.headers.iter() {
            assert!(
                !k.is_empty() && k.bytes().all(gatehouse_wire::http::is_tchar),
                "{k:?}"
            );
            assert!(
                !v.bytes().any(|c| c.is_ascii_control() && c != b'\t'),
                "{v:?}"
            );
        }
        assert!(
            !h.target()
                .bytes()
                .any(|c| c.is_ascii_control() || c == b' ')
        );
        // What the proxy writes upstream reads back as the same request.
        {
            let decided = super::Decided {
                host: "a.test",
                port: 8080,
            };
            let out = rebuild_request(&h, &decided, true);
            let again = parse_request(out)
                .unwrap_or_else(|| panic!("rebuilt head of {h:?} does not parse"));
            assert_eq!(again.method(), h.method());
            assert_eq!(again.version, h.version);
            assert_eq!(again.framing(), h.framing());
            // The client's Host, or the decided one when it sent none.
            assert_eq!(
                again.header("host"),
                Some(h.header("host").unwrap_or("a.test:8080"))
            );
        }
    }
    // Most mutations are refused; some (a changed letter, a blank inside a
    // value) are harmless and accepted.
    assert!(accepted > 1_000, "{accepted}");
}

#[tokio::test]
async fn accepted_chunked_bodies_stop_at_their_end() {
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let mut accepted = 0;
    for _ in 0..20_000 {
        // A valid chunked body, then the next request.
        let mut body = Vec::new();
        let mut payload = Vec::new();
        for _ in 0..rng.below(4) {
            let n = 1 + rng.below(20);
            let data: Vec<u8> = (0..n).map(|_| b'a' + rng.below(26) as u8).collect();
            body.extend_from_slice(format!("{n:x}\r\n").as_bytes());
            body.extend_from_slice(&data);
            body.extend_from_slice(b"\r\n");
            payload.extend_from_slice(&data);
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let next = b"GET /next HTTP/1.1\r\n\r\n";
        let clean = rng.below(4) == 0;
        let mut input = if clean {
            body.clone()
        } else {
            mutate(&mut rng, &body)
        };
        input.extend_from_slice(next);
        let mut c = Conn::new(&input[..], std::time::Duration::from_secs(1));
        let mut out = Vec::new();
        let Ok(n) = c.copy_body(&mut out, Framing::Chunked).await else {
            assert!(!clean, "a valid body was refused: {body:?}");
            continue;
        };
        accepted += 1;
        // The output is itself a valid chunked body of `n` bytes, and what
        // is left is exactly what followed the input's body.
        let mut again = Conn::new(&out[..], std::time::Duration::from_secs(1));
        let mut sink = Vec::new();
        assert_eq!(
            again.copy_body(&mut sink, Framing::Chunked).await.ok(),
            Some(n)
        );
        assert!(again.take_buffered().is_empty());
        let rest = c.take_buffered();
        assert!(input.ends_with(&rest));
        if clean {
            assert_eq!(rest, next);
            assert_eq!(n as usize, payload.len());
        }
    }
    assert!(accepted > 5_000, "{accepted}");
}
