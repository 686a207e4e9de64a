//! Host mode's kernel boundary (issue 52, findings 1–3): whatever arrives
//! on a sandbox interface is held as a sandbox's, whatever its source
//! address says. Over IPv6 link-local a sandbox reaches only the daemon's
//! ports of the host; a forged source never leaves, and a neighbour's
//! address claimed from the wrong interface is dropped; sandboxes on one
//! bridge never reach each other, whether or not the bridge hands its
//! frames to nftables (`bridge-nf-call-*` at 1 and at 0).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Netns;
use super::world::{World, daemon_err};

/// A child process killed (and waited for) when dropped, whatever the
/// test's outcome.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP listener inside `ns` on `[::]:port` (both families), accepting
/// and closing, for 60 s at most.
fn listener(ns: &Netns, port: u16) -> Killed {
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.0, "timeout", "60", "python3", "-c"])
        .arg(format!(
            "import socket\ns = socket.socket(socket.AF_INET6)\ns.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('::', {port}))\ns.listen(16)\nwhile True:\n    c, _ = s.accept()\n    c.sendall(b'hello\\n')\n    c.close()\n"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    Killed(child)
}

/// Whether a TCP connection from `ns` to `addr` (`('fe80::1%eth0', 2380)`:
/// a host and a port as Python writes them) gets the listener's greeting
/// within 3 s.
fn reaches(ns: &Netns, family: &str, addr: &str) -> bool {
    let out = ns.exec(
        "timeout",
        &[
            "5",
            "python3",
            "-c",
            &format!(
                "import socket\nh, p = {addr}\nto = socket.getaddrinfo(h, p, socket.{family}, socket.SOCK_STREAM)[0][4]\ns = socket.socket(socket.{family})\ns.settimeout(3)\ns.connect(to)\nprint(s.recv(16).decode())"
            ),
        ],
    );
    String::from_utf8_lossy(&out.stdout).contains("hello")
}

/// The link-local address of `dev` inside `ns`, once it is usable (past
/// duplicate address detection).
fn link_local(ns: &Netns, dev: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let out = ns.exec(
            "ip",
            &["-6", "-o", "addr", "show", "dev", dev, "scope", "link"],
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !text.contains("tentative")
            && let Some(a) = text.split_whitespace().skip_while(|w| *w != "inet6").nth(1)
        {
            return a.split('/').next().unwrap_or(a).to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{dev} in {} has no usable link-local address", ns.0);
}

/// Finding 1: from any sandbox, the host's services bound to `[::]` are
/// out of reach over IPv6 link-local (and over IPv4), while the daemon's
/// ports and neighbour discovery still work; from a non-sandbox interface
/// the same service answers (the rules hold sandbox interfaces only).
#[test]
fn link_local_reaches_only_the_daemons_ports() {
    let w = World::new("b1");
    let _etcd = listener(&w.host, 2380);
    let host_ll = link_local(&w.host, "s1");
    let from_origin_ll = link_local(&w.host, "o0");
    // The control: the origins' namespace is no sandbox.
    let origins = Netns(w.origins_name());
    let _ = link_local(&origins, "eth0");
    assert!(
        reaches(
            &origins,
            "AF_INET6",
            &format!("('{from_origin_ll}%eth0', 2380)")
        ),
        "the listener does not answer at all"
    );
    std::mem::forget(origins);
    for k in 1..=3 {
        let dev = format!("s{k}");
        let ll = if k == 1 {
            host_ll.clone()
        } else {
            link_local(&w.host, &dev)
        };
        let sb = &w.sandboxes[k - 1];
        // The sandbox's own link-local address is usable (a tentative one
        // would fail the probe for the wrong reason).
        let _ = link_local(sb, "eth0");
        assert!(
            !reaches(sb, "AF_INET6", &format!("('{ll}%eth0', 2380)")),
            "sandbox {k} reached a host service over IPv6 link-local ({ll})"
        );
        assert!(
            !reaches(sb, "AF_INET", &format!("('10.200.{k}.1', 2380)")),
            "sandbox {k} reached a host service over IPv4"
        );
    }
    // The daemon still answers: DNS through the redirect, and a TCP
    // connection through the transparent listener.
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1");
    let (code, out) = w.curl(1, "http://allowed.test/");
    assert_eq!(code, 0, "{out}");
}

/// Raw IPv4/IPv6 UDP datagrams with a forged source, sent from sandbox
/// one with `IP_HDRINCL` (Python, no third-party package).
const SPOOF: &str = r#"
import socket, struct, sys
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
def v4(src, dst, port, payload):
    udp = struct.pack("!HHHH", 40000, port, 8 + len(payload), 0) + payload
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                      socket.inet_aton(src), socket.inet_aton(dst))
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    for _ in range(5):
        s.sendto(hdr + udp, (dst, 0))
def v6(src, dst, port, payload):
    # An IPv6 raw socket fills the header from the socket; a forged source
    # needs the source bound with IP_FREEBIND / IPV6_TRANSPARENT.
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, 75, 1)  # IPV6_TRANSPARENT
    s.bind((src, 40000))
    for _ in range(5):
        s.sendto(payload, (dst, port))
dns = bytes.fromhex("abcd01000001000000000000") + b"\x0bspoof-probe\x04test\x00\x00\x01\x00\x01"
which = sys.argv[1]
if which == "outside4": v4("10.99.0.9", "11.0.0.1", 443, b"spoofed")
if which == "neighbour4": v4("10.200.2.2", "11.0.0.1", 443, b"spoofed")
if which == "neighbour-dns": v4("10.200.2.2", "192.0.2.53", 53, dns)
if which == "outside6": v6("2a00:9::9", "2a00:1::1", 443, b"spoofed")
print("sent")
"#;

/// Finding 3: a forged source from a sandbox's interface never leaves the
/// host — an address in no sandbox (IPv4 and IPv6), and a neighbour
/// sandbox's address claimed from the wrong interface (which would
/// otherwise be decided, and logged, as the neighbour's).
#[test]
fn forged_sources_never_leave_a_sandbox_interface() {
    let w = World::new("b3");
    let script = w.dir.join("spoof.py");
    std::fs::write(&script, SPOOF).unwrap();
    let spoof = |which: &str| {
        let (code, out, err) = w.sh(1, &format!("python3 {} {which}", script.display()));
        assert!(out.contains("sent"), "{which}: {code} {out} {err}");
    };
    // The control: sandbox one's own UDP is dropped too (every UDP but
    // DNS), so the counters below can only move by a forged datagram.
    spoof("outside4");
    spoof("neighbour4");
    spoof("outside6");
    spoof("neighbour-dns");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        w.seen.get("allowed.test:udp443"),
        0,
        "a forged IPv4 source left the host"
    );
    assert_eq!(
        w.seen.get("allowed.test:v6:udp443"),
        0,
        "a forged IPv6 source left the host"
    );
    let log = std::fs::read_to_string(w.dir.join("decisions.jsonl")).unwrap_or_default();
    assert!(
        !log.contains("spoof-probe"),
        "a question forged with a neighbour's address was decided as the neighbour's:\n{log}"
    );
    // Sandbox one's own question is still answered.
    let (_, out, _) = w.sh(1, "dig +short +time=3 +tries=1 @192.0.2.53 allowed.test");
    assert_eq!(out.trim(), "11.0.0.1", "{}", daemon_err(&w));
}

/// Finding 2: two sandboxes on one bridge. Whatever `bridge-nf-call-*`
/// says, neither reaches the other over IPv4, global IPv6 or IPv6
/// link-local (the table names the bridge and its ports' pattern).
#[test]
fn sandboxes_on_one_bridge_never_reach_each_other() {
    let dir = std::env::temp_dir().join(format!("gatehouse-host-bridge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let host = Netns::new("brh");
    host.ip(&["link", "add", "br-sbx", "type", "bridge"]);
    host.ip(&["addr", "add", "10.210.0.1/24", "dev", "br-sbx"]);
    host.ip(&[
        "-6",
        "addr",
        "add",
        "fd00:210::1/64",
        "dev",
        "br-sbx",
        "nodad",
    ]);
    host.ip(&["link", "set", "br-sbx", "up"]);
    let mut sbx = Vec::new();
    for k in 1..=2 {
        let s = Netns::new(&format!("brs{k}"));
        let port = format!("vsbx{k}");
        host.ip(&[
            "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &s.0,
        ]);
        host.ip(&["link", "set", &port, "master", "br-sbx"]);
        host.ip(&["link", "set", &port, "up"]);
        s.ip(&[
            "addr",
            "add",
            &format!("10.210.0.{}/24", k + 1),
            "dev",
            "eth0",
        ]);
        s.ip(&[
            "-6",
            "addr",
            "add",
            &format!("fd00:210::{}/64", k + 1),
            "dev",
            "eth0",
            "nodad",
        ]);
        s.ip(&["link", "set", "eth0", "up"]);
        s.ip(&["route", "add", "default", "via", "10.210.0.1"]);
        sbx.push(s);
    }
    let _server = listener(&sbx[1], 7000);
    let peer_ll = link_local(&sbx[1], "eth0");
    let _ = link_local(&sbx[0], "eth0");
    let probes = || {
        [
            ("AF_INET", "('10.210.0.3', 7000)".to_string()),
            ("AF_INET6", "('fd00:210::3', 7000)".to_string()),
            ("AF_INET6", format!("('{peer_ll}%eth0', 7000)")),
        ]
    };
    // The control: before host mode, the bridge joins them.
    for (family, addr) in probes() {
        assert!(
            reaches(&sbx[0], family, &addr),
            "no path to {addr} even before host mode"
        );
    }
    std::fs::write(
        dir.join("p.policy"),
        "policy p {\n  network {\n    allow domain example.test\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sandboxes.toml"),
        "networks = [\"10.210.0.0/24\", \"fd00:210::/64\"]\ninterfaces = [\"br-sbx\", \"vsbx*\"]\n\n[[sandbox]]\nid = \"a\"\naddresses = [\"10.210.0.2\", \"fd00:210::2\"]\npolicy = \"p.policy\"\n\n[[sandbox]]\nid = \"b\"\naddresses = [\"10.210.0.3\", \"fd00:210::3\"]\npolicy = \"p.policy\"\n",
    )
    .unwrap();
    let err = std::fs::File::create(dir.join("daemon.err")).unwrap();
    let _daemon = Killed(
        Command::new("ip")
            .args(["netns", "exec", &host.0])
            .arg(env!("CARGO_BIN_EXE_gatehouse-egress"))
            .args(["host", "--sandboxes"])
            .arg(dir.join("sandboxes.toml"))
            .args(["--upstream-dns", "127.0.0.1:53"])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(dir.join("daemon.err"))
        .unwrap_or_default()
        .contains("host mode for 2 sandboxes")
    {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    for call in ["1", "0"] {
        for v in ["iptables", "ip6tables"] {
            let set = host.exec(
                "sysctl",
                &["-qw", &format!("net.bridge.bridge-nf-call-{v}={call}")],
            );
            assert!(
                set.status.success(),
                "{}",
                String::from_utf8_lossy(&set.stderr)
            );
        }
        for (family, addr) in probes() {
            assert!(
                !reaches(&sbx[0], family, &addr),
                "bridge-nf-call-*={call}: sandbox a reached sandbox b at {addr}"
            );
        }
    }
    // Each still reaches the daemon on the bridge: its question is
    // decided (refused: the policy allows only example.test).
    let out = sbx[0].exec(
        "dig",
        &["+time=3", "+tries=1", "@10.210.0.1", "denied.example"],
    );
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("status: REFUSED"), "{out}");
}
