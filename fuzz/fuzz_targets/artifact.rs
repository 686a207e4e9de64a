//! Any bytes as a compiled artifact: refused cleanly, never a panic; a
//! loaded set decides without panicking.
//!
//! An input starting with 0 is the artifact's bytes as they are (the
//! header, the checksum, the compression). Any other input is a list of
//! edits to the payload of a shipped policy's artifact (the binary form a
//! load decodes and validates once the checksum and the compression are
//! passed, which anyone who writes a file can pass): four bytes each,
//! an operation (flip, set, insert, remove, truncate), a position and a
//! value. The edited payload is decoded whole and, sealed again, while it
//! is inflated: both must accept or refuse it alike.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn payloads() -> &'static [Vec<u8>] {
    static P: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    P.get_or_init(|| {
        [
            include_str!("../../policies/coding-agent.policy"),
            include_str!("../../policies/guardian.policy"),
            include_str!("../../policies/apps.policy"),
            include_str!("../../policies/zerocode-proxy.policy"),
        ]
        .iter()
        .map(|text| {
            let set = gatehouse::PolicySet::from_source("p.policy", text).expect("shipped");
            gatehouse::testing::artifact_payload(&set.to_artifact().expect("writes"))
                .expect("reads")
        })
        .collect()
    })
}

fn decide(set: &gatehouse::PolicySet) {
    for p in set.policies() {
        let _ = p.connect("api.example.com", 443, gatehouse::query::Via::Https);
        let _ = p.connect("10.1.2.3", 22, gatehouse::query::Via::Socks5);
        let _ = p.dns("example.com");
        let _ = p.network();
    }
    for (id, _) in set.rules() {
        let _ = set.rule(id);
    }
    let _ = set.revision();
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if first == 0 {
        if let Ok(set) = gatehouse::PolicySet::from_artifact(rest) {
            decide(&set);
        }
        return;
    }
    let all = payloads();
    let mut p = all[usize::from(first) % all.len()].clone();
    for e in rest.chunks_exact(4) {
        let at = usize::from(u16::from_le_bytes([e[1], e[2]]));
        let at = if p.is_empty() { 0 } else { at % p.len() };
        match e[0] % 5 {
            0 if !p.is_empty() => p[at] ^= e[3],
            1 if !p.is_empty() => p[at] = e[3],
            2 => p.insert(at, e[3]),
            3 if !p.is_empty() => {
                p.remove(at);
            }
            4 => p.truncate(at),
            _ => {}
        }
    }
    // Decoded from the slice, and (what a load does) while it is inflated:
    // the same verdict either way.
    let whole = gatehouse::testing::load_payload(&p);
    let streamed = gatehouse::PolicySet::from_artifact(&gatehouse::testing::seal_payload(&p));
    assert_eq!(whole.is_ok(), streamed.is_ok(), "{whole:?} / {streamed:?}");
    if let (Ok(a), Ok(b)) = (whole, streamed) {
        assert_eq!(a.revision(), b.revision());
        decide(&b);
    }
});
