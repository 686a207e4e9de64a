//! Signed bundles for a fleet, end to end: `gatehouse-egress squid-helper`
//! (the simplest adapter to drive: a line in, a line out) polling a bundle
//! URL served on loopback, with a trusted key; the proxy and the srt
//! decider take the same flags through the same code (`fleet::Options`).
//!
//! Every wait is bounded; the server listens on 127.0.0.1 only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gatehouse::PolicySet;
use gatehouse::bundle::Keypair;

const EGRESS: &str = env!("CARGO_BIN_EXE_gatehouse-egress");

#[derive(Default)]
struct State {
    /// The bundle served and its ETag; none: 404.
    bundle: Option<(Vec<u8>, String)>,
    /// The server is "away": connections are closed without an answer.
    down: bool,
    full: usize,
    not_modified: usize,
    posts: Vec<String>,
}

/// A loopback HTTP server for one bundle (GET, with ETag / If-None-Match)
/// and a decision-record endpoint (POST).
fn serve() -> (String, Arc<Mutex<State>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = Arc::new(Mutex::new(State::default()));
    let s = state.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_string());
            }
            let mut st = s.lock().unwrap();
            if st.down || head.is_empty() {
                continue;
            }
            let header = |name: &str| {
                head.iter().find_map(|h| {
                    let (k, v) = h.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                })
            };
            let answer: Vec<u8> = if head[0].starts_with("POST") {
                let n: usize = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; n];
                r.read_exact(&mut body).ok();
                st.posts.push(String::from_utf8_lossy(&body).into_owned());
                b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_vec()
            } else {
                match st.bundle.clone() {
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                    Some((_, etag))
                        if header("if-none-match").as_deref() == Some(etag.as_str()) =>
                    {
                        st.not_modified += 1;
                        format!(
                            "HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nConnection: close\r\n\r\n"
                        )
                        .into_bytes()
                    }
                    Some((bytes, etag)) => {
                        st.full += 1;
                        let mut a = format!(
                            "HTTP/1.1 200 OK\r\nETag: {etag}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            bytes.len()
                        )
                        .into_bytes();
                        a.extend_from_slice(&bytes);
                        a
                    }
                }
            };
            drop(st);
            let _ = conn.write_all(&answer);
        }
    });
    (base, state)
}

fn set(allow: &str) -> PolicySet {
    PolicySet::from_source(
        "fleet.policy",
        &format!("policy fleet {{\n  network {{\n    allow domain {allow} port 443\n  }}\n}}\n"),
    )
    .unwrap()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gatehouse-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Helper {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Helper {
    fn start(args: &[&str]) -> Helper {
        let mut child = Command::new(EGRESS)
            .arg("squid-helper")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Helper {
            child,
            stdin,
            stdout,
        }
    }

    fn ask(&mut self, host: &str) -> String {
        writeln!(self.stdin, "0 {host} 443 CONNECT -").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// Asks until the answer for `host` is `want`, for at most 10 s.
    fn until(&mut self, host: &str, want: &str) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.ask(host) == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starting with a flag set; the exit code and stderr when it does not
/// start (it is asked nothing).
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(EGRESS)
        .arg("squid-helper")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn keys(d: &Path) -> (Keypair, String) {
    let key = Keypair::generate().unwrap();
    let public = d.join("fleet.pub");
    std::fs::write(&public, key.public().to_text()).unwrap();
    (key, public.display().to_string())
}

const OK: &str = "0 OK";
const NO: &str = "0 ERR message=\"not_allowed\"";

#[test]
fn a_fleet_follows_its_signed_bundles_and_nothing_else() {
    let d = dir("follow");
    let (key, public) = keys(&d);
    let (base, state) = serve();
    let url = format!("{base}/policy.ghb");
    let cache = d.join("last-good.ghb");
    let cache_s = cache.display().to_string();
    let v1 = set("a.example");
    state.lock().unwrap().bundle = Some((key.sign(&v1.to_artifact().unwrap()), "\"v1\"".into()));
    let args = [
        "--policy",
        &cache_s,
        "--bundle-url",
        &url,
        "--trusted-key",
        &public,
        "--poll-interval",
        "0.2",
        "--log-url",
        &format!("{base}/decisions"),
    ];
    let mut h = Helper::start(&args);
    assert_eq!(h.ask("a.example"), OK);
    assert_eq!(h.ask("b.example"), NO);
    assert!(cache.exists(), "the last good bundle is kept on disk");

    // Unchanged: the poller asks with If-None-Match and gets 304s.
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        state.lock().unwrap().not_modified >= 2,
        "no 304: If-None-Match not sent"
    );

    // A new signed bundle is in force within the poll interval (and the
    // watcher's 200 ms).
    let v2 = set("b.example");
    state.lock().unwrap().bundle = Some((key.sign(&v2.to_artifact().unwrap()), "\"v2\"".into()));
    assert!(h.until("b.example", OK), "the new bundle was not picked up");
    assert_eq!(h.ask("a.example"), NO);

    // Tampered, unsigned, or signed by another key: refused, v2 stays.
    let mut tampered = key.sign(&set("c.example").to_artifact().unwrap());
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let other = Keypair::generate().unwrap();
    for (i, bad) in [
        tampered,
        set("c.example").to_artifact().unwrap(),
        b"policy fleet { network unrestricted }".to_vec(),
        other.sign(&set("c.example").to_artifact().unwrap()),
    ]
    .into_iter()
    .enumerate()
    {
        state.lock().unwrap().bundle = Some((bad, format!("\"bad{i}\"")));
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(h.ask("c.example"), NO, "bad bundle {i} was taken");
        assert_eq!(
            h.ask("b.example"),
            OK,
            "bad bundle {i} displaced the good one"
        );
    }
    assert_eq!(
        gatehouse::bundle::load(&std::fs::read(&cache).unwrap(), &[])
            .unwrap()
            .revision(),
        v2.revision(),
        "the cache holds the last good bundle"
    );

    // The server goes away: the last good policy stays in force.
    state.lock().unwrap().down = true;
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(h.ask("b.example"), OK);

    // Decision records reached the endpoint, with the revision of the
    // policy that made them.
    state.lock().unwrap().down = false;
    let end = Instant::now() + Duration::from_secs(10);
    let shipped = loop {
        let posts = state.lock().unwrap().posts.join("");
        if posts.contains(v2.revision()) || Instant::now() > end {
            break posts;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        shipped.contains(&format!("\"revision\":\"{}\"", v1.revision())),
        "{shipped}"
    );
    assert!(
        shipped.contains(&format!("\"revision\":\"{}\"", v2.revision())),
        "{shipped}"
    );
    drop(h);

    // A restart while the server is away starts from the last good bundle.
    state.lock().unwrap().down = true;
    let mut h = Helper::start(&args);
    assert_eq!(h.ask("b.example"), OK);
    assert_eq!(h.ask("a.example"), NO);
}

#[test]
fn nothing_unsigned_starts_where_a_key_is_trusted() {
    let d = dir("refuse");
    let (key, public) = keys(&d);
    let text = d.join("plain.policy");
    std::fs::write(&text, "policy fleet { network unrestricted }\n").unwrap();
    let artifact = d.join("bare.ghc");
    std::fs::write(&artifact, set("a.example").to_artifact().unwrap()).unwrap();
    let signed = d.join("signed.ghb");
    std::fs::write(&signed, key.sign(&set("a.example").to_artifact().unwrap())).unwrap();
    let mut tampered = std::fs::read(&signed).unwrap();
    tampered[100] ^= 1;
    let tampered_path = d.join("tampered.ghb");
    std::fs::write(&tampered_path, tampered).unwrap();

    for (file, why) in [
        (&text, "not signed"),
        (&artifact, "not signed"),
        (&tampered_path, "does not verify"),
    ] {
        let (code, err) = refused(&[
            "--policy",
            &file.display().to_string(),
            "--trusted-key",
            &public,
        ]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(why), "{file:?}: {err}");
    }
    // The signed bundle starts, as a file too (no URL).
    let mut h = Helper::start(&[
        "--policy",
        &signed.display().to_string(),
        "--trusted-key",
        &public,
    ]);
    assert_eq!(h.ask("a.example"), OK);
    // A tampered file written over it later is refused; the old one stays.
    std::fs::copy(&tampered_path, &signed).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(h.ask("a.example"), OK);

    // A bundle URL without a trusted key is refused, and so is a first
    // fetch that fails with no last good bundle.
    let (code, err) = refused(&[
        "--policy",
        "/nonexistent.ghb",
        "--bundle-url",
        "http://127.0.0.1:9/x",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--bundle-url needs --trusted-key"), "{err}");
    let (code, err) = refused(&[
        "--policy",
        &d.join("none.ghb").display().to_string(),
        "--bundle-url",
        "http://127.0.0.1:9/x",
        "--trusted-key",
        &public,
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no last good bundle"), "{err}");
}

/// The srt decider serves a signed bundle too: its hello's lists are read
/// back from the bundle's rules (no syntax tree travels in a bundle).
#[test]
fn the_srt_decider_announces_a_signed_bundles_lists() {
    let d = dir("srt");
    let (key, public) = keys(&d);
    let signed = d.join("signed.ghb");
    std::fs::write(&signed, key.sign(&set("a.example").to_artifact().unwrap())).unwrap();
    let mut child = Command::new(EGRESS)
        .args([
            "srt-decider",
            "--policy",
            &signed.display().to_string(),
            "--trusted-key",
            &public,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let hello = br#"{"t":"hello","proto":1}"#;
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(&(hello.len() as u32).to_be_bytes())
        .unwrap();
    stdin.write_all(hello).unwrap();
    stdin.flush().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut len = [0u8; 4];
    stdout.read_exact(&mut len).unwrap();
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    stdout.read_exact(&mut frame).unwrap();
    drop(stdin);
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_slice(&frame).unwrap();
    assert_eq!(
        v["allowedDomains"],
        serde_json::json!(["a.example:443"]),
        "{v}"
    );
    assert_eq!(v["deniedDomains"], serde_json::json!([]), "{v}");
}

/// Issue 35, finding 3: a bundle server that need not be trusted serves an
/// older bundle the same key once signed (more permissive): the fleet
/// refuses it, keeps the newer one in force, and keeps it on disk as the
/// last good bundle, so a restart does not roll back either.
#[test]
fn an_older_signed_bundle_is_never_rolled_back_to() {
    let d = dir("rollback");
    let (key, public) = keys(&d);
    let (base, state) = serve();
    let url = format!("{base}/policy.ghb");
    let cache = d.join("last-good.ghb");
    let cache_s = cache.display().to_string();
    // Signed first (older), and more permissive: b.example too.
    let old = key.sign_serial(&set("**.example").to_artifact().unwrap(), 100);
    let new = key.sign_serial(&set("a.example").to_artifact().unwrap(), 200);
    state.lock().unwrap().bundle = Some((new.clone(), "\"new\"".into()));
    let args = [
        "--policy",
        &cache_s,
        "--bundle-url",
        &url,
        "--trusted-key",
        &public,
        "--poll-interval",
        "0.2",
    ];
    let mut h = Helper::start(&args);
    assert_eq!(h.ask("a.example"), OK);
    assert_eq!(h.ask("b.example"), NO);
    state.lock().unwrap().bundle = Some((old.clone(), "\"old\"".into()));
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(h.ask("b.example"), NO, "rolled back to the older bundle");
    assert!(
        state.lock().unwrap().full >= 2,
        "the older bundle was never fetched"
    );
    assert_eq!(
        std::fs::read(&cache).unwrap(),
        new,
        "the last good bundle on disk rolled back"
    );
    drop(h);
    // A restart against the same server starts from the newer bundle on
    // disk, and still refuses the older one.
    let mut h = Helper::start(&args);
    assert_eq!(h.ask("a.example"), OK);
    assert_eq!(h.ask("b.example"), NO);
    // Written straight into the watched file, the older one is refused too.
    std::fs::write(&cache, &old).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(h.ask("b.example"), NO, "the watcher took an older bundle");
    // A newer one is taken.
    let newer = key.sign_serial(&set("**.example").to_artifact().unwrap(), 300);
    state.lock().unwrap().bundle = Some((newer, "\"newer\"".into()));
    assert!(
        h.until("b.example", OK),
        "the newer bundle was not picked up"
    );
}
