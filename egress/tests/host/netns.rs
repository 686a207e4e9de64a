//! Network namespaces of a test's (or a benchmark's) own: made, linked by
//! veth pairs, commands and servers run inside, deleted when dropped.
//! Shared by host mode's tests and `egress/examples/host_compare.rs`.

use std::os::fd::AsFd as _;
use std::process::{Command, Output, Stdio};

/// A network namespace of the test's own, deleted when dropped (with the
/// resolv.conf `ip netns exec` gives it, if any).
pub(crate) struct Netns(pub(crate) String);

impl Netns {
    pub(crate) fn new(tag: &str) -> Netns {
        let name = format!("gh-{tag}-{}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip").args(["netns", "add", &name]).status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "`ip netns add` failed: host mode's tests need root and iproute2 (.ci/run installs them)"
        );
        let ns = Netns(name);
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip ARGS` inside; panics when it fails.
    pub(crate) fn ip(&self, args: &[&str]) {
        let out = self.exec("ip", args);
        assert!(
            out.status.success(),
            "ip {args:?} in {}: {}",
            self.0,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `cmd ARGS` inside.
    pub(crate) fn exec(&self, cmd: &str, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0, cmd])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `nft ARGS` inside, with `stdin`; its stdout.
    pub(crate) fn nft(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write as _;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.0, "nft"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nft (Debian package nftables)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `f` on a thread of its own moved into this namespace (its
    /// sockets live here), and returns what it returned.
    #[allow(dead_code)] // the examples that share this file have no use for it
    pub(crate) fn inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.0);
        std::thread::spawn(move || {
            move_into(&path);
            f()
        })
        .join()
        .unwrap()
    }

    /// Runs `f` on a thread of its own moved into this namespace: sockets
    /// it opens live here. The thread keeps running what `f` spawned on its
    /// runtime; returns what `f` returned once it did.
    pub(crate) fn serve<T, F, Fut>(&self, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T>,
    {
        let path = format!("/run/netns/{}", self.0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            move_into(&path);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let _ = tx.send(f().await);
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    }

    /// A veth pair from this namespace (`here`, with `here_addr`) to
    /// `other` (`there`, with `there_addr`), both up.
    pub(crate) fn link(
        &self,
        here: &str,
        here_addr: &str,
        other: &Netns,
        there: &str,
        there_addr: &str,
    ) {
        self.ip(&[
            "link", "add", here, "type", "veth", "peer", "name", there, "netns", &other.0,
        ]);
        self.ip(&["addr", "add", here_addr, "dev", here]);
        self.ip(&["link", "set", here, "up"]);
        other.ip(&["addr", "add", there_addr, "dev", there]);
        other.ip(&["link", "set", there, "up"]);
    }
}

impl Netns {
    /// Sandbox `k` (1 to 254): a namespace named `name`, linked to this
    /// one (the host) as `s{k}`, 10.200.k.2/24 behind 10.200.k.1, routed
    /// through the host; `ip netns exec` gives its programs `hosts` as
    /// /etc/hosts and a resolv.conf naming 192.0.2.53 (any nameserver will
    /// do: the kernel sends every question to host mode's resolver).
    pub(crate) fn sandbox(&self, name: &str, k: usize, hosts: &str) -> Netns {
        let s = Netns::new(name);
        self.link(
            &format!("s{k}"),
            &format!("10.200.{k}.1/24"),
            &s,
            "eth0",
            &format!("10.200.{k}.2/24"),
        );
        s.ip(&["route", "add", "default", "via", &format!("10.200.{k}.1")]);
        let etc = std::path::PathBuf::from(format!("/etc/netns/{}", s.0));
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(etc.join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
        std::fs::write(etc.join("hosts"), hosts).unwrap();
        s
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.0));
    }
}

/// Moves the calling thread into the network namespace at `path`.
fn move_into(path: &str) {
    let file = std::fs::File::open(path).unwrap();
    rustix::thread::move_into_link_name_space(
        file.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .unwrap();
}
