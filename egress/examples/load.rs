//! A bounded load test on loopback: `wrk` through the proxy to a local HTTP
//! server, with the policy check and without it (`--no-policy`), and
//! straight to the server, so that the engine's share is visible.
//!
//!     cargo run --release -p gatehouse-egress --example load -- [SECONDS] [CONNECTIONS]
//!
//! Needs `wrk` (Debian's package). Every address is 127.0.0.1; each run stops
//! after SECONDS (default 5).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::process::Command;

use gatehouse_egress::{Config, start, testing};

const POLICY: &str = "policy load {
  network {
    default deny
    local deny
    allow domain **.example.com
    allow domain api.github.com
    allow domain bench.test
    deny domain **.pastebin.com
    allow ip 127.0.0.1
  }
}
";

/// Runs wrk; (requests/s, p99 latency) as wrk prints them.
fn wrk(
    target: &str,
    lua: Option<&str>,
    seconds: u32,
    connections: u32,
) -> (String, String, String) {
    let mut cmd = Command::new("wrk");
    cmd.args([
        "-t",
        "1",
        "-c",
        &connections.to_string(),
        "-d",
        &format!("{seconds}s"),
        "--latency",
    ]);
    if let Some(script) = lua {
        cmd.args(["-s", script]);
    }
    cmd.arg(target);
    let out = cmd.output().expect("wrk (apt-get install wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .unwrap_or("?")
        .trim()
        .to_string();
    let p50 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("50%"))
        .unwrap_or("?")
        .trim()
        .to_string();
    (rps, p50, p99)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u32 = args
        .first()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .min(60);
    let connections: u32 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
        .min(256);
    let dns = testing::fake_dns(&[("bench.test", "127.0.0.1")])
        .await
        .unwrap()
        .addr;
    let server = testing::http_server("ok\n").await.unwrap();
    let dir = std::env::temp_dir().join(format!("gatehouse-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("load.policy");
    std::fs::write(&policy, POLICY).unwrap();
    let config = |no_policy| Config {
        http: "127.0.0.1:0".parse().unwrap(),
        no_policy,
        ..Config::new(policy.clone(), dns)
    };
    let checked = start(config(false)).await.unwrap();
    let bypass = start(config(true)).await.unwrap();
    let lua = dir.join("absolute.lua");
    std::fs::write(
        &lua,
        format!(
            "wrk.path = \"http://bench.test:{p}/\"\nwrk.headers[\"Host\"] = \"bench.test:{p}\"\n",
            p = server.port()
        ),
    )
    .unwrap();
    let lua = lua.to_str().unwrap().to_string();
    println!(
        "wrk, 1 thread, {connections} connections, {seconds} s each, loopback; one request per proxied connection"
    );
    println!("| path | requests/s | p50 | p99 |");
    println!("|---|---|---|---|");
    let runs = [
        (
            "straight to the server (keep-alive)",
            format!("http://{server}/"),
            None,
        ),
        (
            "through the proxy, no policy check",
            format!("http://{}/", bypass.http),
            Some(lua.clone()),
        ),
        (
            "through the proxy, policy checked",
            format!("http://{}/", checked.http),
            Some(lua.clone()),
        ),
    ];
    for (name, target, script) in runs {
        let (rps, p50, p99) = tokio::task::spawn_blocking(move || {
            wrk(&target, script.as_deref(), seconds, connections)
        })
        .await
        .unwrap();
        println!("| {name} | {rps} | {p50} | {p99} |");
    }
}
