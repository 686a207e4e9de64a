//! The hot-path calls do not allocate: counted by a global allocator.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    unsafe_code
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gatehouse::PolicySet;
use gatehouse::query::Via;

/// Counts allocations made by the current thread while armed.
struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; the only
// addition is a thread-local counter that does not itself allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    COUNT.with(Cell::get)
}

const POLICY: &str = r#"
policy p {
  network {
    default deny
    allow domain github.com
    allow domain **.example.com port 443, 8000-8999
    deny domain *.bad.example.com
    allow ip 127.0.0.1 port 8080
    deny cidr 10.0.0.0/8
    allow cidr 2606:4700::/32
    allow socket "/var/run/docker.sock"
  }
  permissions { deny shell.exec }
  apps { deny firefox "Google Chrome" }
}
"#;

#[test]
fn hot_path_decisions_do_not_allocate() {
    let set = PolicySet::from_source("p.policy", POLICY).unwrap();
    let p = set.single().unwrap();
    let addrs = [
        "140.82.112.3",
        "2606:4700::1111",
        "10.0.0.7",
        "93.184.215.14",
    ];
    let n = allocations(|| {
        for _ in 0..100 {
            std::hint::black_box(p.connect("api.example.com", 443, Via::Https));
            std::hint::black_box(p.connect("GitHub.COM.", 443, Via::Https));
            std::hint::black_box(p.connect("x.bad.example.com", 443, Via::Https));
            std::hint::black_box(p.connect("nope.example.org", 443, Via::Https));
            std::hint::black_box(p.connect("127.0.0.1", 8080, Via::Https));
            std::hint::black_box(p.connect("[::ffff:10.1.2.3]", 443, Via::Socks5));
            std::hint::black_box(p.connect("2130706433", 80, Via::Https));
            std::hint::black_box(p.dns("github.com"));
            std::hint::black_box(p.dns("exfil.attacker.example"));
            std::hint::black_box(p.resolved("api.example.com", &addrs, Some(443)));
            std::hint::black_box(p.resolved("github.com", &addrs[..2], None));
            std::hint::black_box(p.socket("/var/run/docker.sock"));
            std::hint::black_box(p.listen("127.0.0.1:3128"));
            std::hint::black_box(p.tool("shell.exec"));
            std::hint::black_box(p.tool("files.read"));
            std::hint::black_box(p.app("/Applications/Firefox.app/Contents/MacOS/firefox"));
            std::hint::black_box(p.app("/usr/bin/vim"));
        }
    });
    assert_eq!(n, 0, "hot-path decisions allocated {n} times");
}

#[test]
fn the_counter_does_count() {
    // A test that cannot fail proves nothing: make sure allocations are seen.
    let n = allocations(|| {
        std::hint::black_box(vec![1u8; 16]);
    });
    assert_eq!(n, 1);
}
