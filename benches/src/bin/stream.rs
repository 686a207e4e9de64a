//! Decides a realistic stream over and over, for `perf stat` (instructions,
//! cache misses and branch misses per decision) and quick timing:
//!
//! ```text
//! cargo build --release -p gatehouse-benches --bin stream
//! perf stat -e instructions,cycles,cache-misses,branch-misses \
//!     target/release/stream name 1000 10000000
//! ```
//!
//! `KIND` is `name` (`connect` by name), `dns`, `addr` (`connect_addr`,
//! random IPv4 addresses), `addrlocal` (the same under `local deny`, so
//! that each address's class is asked), `addrtext` (`connect` with them as
//! text) or
//! `normalize` (host normalisation alone); `RULES`
//! the rule count of the generated policy; `DECISIONS` how many to make
//! (the stream of 4 096 distinct queries, repeated). Prints the time per
//! decision, measured around the loop only (the policy is built first).

#![deny(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Instant;

use gatehouse::query::Via;
use gatehouse_benches::{addr_stream, cidr_policy, domain_policy, name_stream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map_or("name", String::as_str);
    let rules: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let n: usize = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let allowed;
    let start;
    match kind {
        "name" | "dns" | "normalize" | "touch" | "hostbuf" => {
            let (text, domains) = domain_policy(rules, 7);
            let set = gatehouse::PolicySet::from_source("bench.policy", &text).expect("compiles");
            let p = set.single().expect("one policy");
            let stream: Vec<String> = name_stream(&domains, 4096, 3)
                .into_iter()
                .map(|(_, q)| q)
                .collect();
            assert_eq!(stream.len(), 4096);
            let mut count = 0usize;
            start = Instant::now();
            for i in 0..n {
                let q = black_box(stream[i & 4095].as_str());
                count += match kind {
                    "name" => p.connect(q, 443, Via::Https).is_allow() as usize,
                    "dns" => p.dns(q).is_allow() as usize,
                    "touch" => q.len() + q.as_bytes()[q.len() / 2] as usize,
                    "hostbuf" => {
                        let buf = black_box(gatehouse::normalize::HostBuf::new());
                        std::mem::size_of_val(&buf) + q.len()
                    }
                    _ => {
                        let mut buf = gatehouse::normalize::HostBuf::new();
                        gatehouse::normalize::normalize_host(q, &mut buf).is_ok() as usize
                    }
                };
            }
            allowed = count;
        }
        "addr" | "addrtext" | "addrlocal" => {
            let (text, _) = cidr_policy(rules, 11);
            // `addrlocal`: the same rules under the usual `local deny`, so
            // that every address's class is asked.
            let text = if kind == "addrlocal" {
                text.replace("local allow", "local deny")
            } else {
                text
            };
            let set = gatehouse::PolicySet::from_source("bench.policy", &text).expect("compiles");
            let p = set.single().expect("one policy");
            let stream: Vec<std::net::IpAddr> = addr_stream(&text, 4096, 5)
                .into_iter()
                .map(std::net::IpAddr::V4)
                .collect();
            let text: Vec<String> = stream.iter().map(|a| a.to_string()).collect();
            let mut count = 0usize;
            start = Instant::now();
            for i in 0..n {
                count += if kind != "addrtext" {
                    let a = black_box(stream[i & 4095]);
                    p.connect_addr(a, 443, Via::Https).is_allow() as usize
                } else {
                    let t = black_box(text[i & 4095].as_str());
                    p.connect(t, 443, Via::Https).is_allow() as usize
                };
            }
            allowed = count;
        }
        other => {
            eprintln!("unknown kind `{other}`: name, dns, addr, addrlocal, addrtext or normalize");
            std::process::exit(2);
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{kind} at {rules} rules: {ns:.1} ns per decision ({allowed} of {n} allowed)");
}
