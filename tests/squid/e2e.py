#!/usr/bin/env python3
"""End to end: squid (Debian) asking `gatehouse-egress squid-helper`, its
external ACL helper, about every request; curl through squid to loopback
servers, and a live policy change.

Usage: e2e.py GATEHOUSE_EGRESS_BIN

Everything listens on 127.0.0.1 (squid reads the test names from a hosts
file of its own); every client call has a deadline, and the whole run stops
itself after 120 s.
"""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from support import Cases, hits, server, sh  # noqa: E402

EGRESS = sys.argv[1]
signal.alarm(120)
work = tempfile.mkdtemp(prefix="gatehouse-squid-")
# squid drops to its own user when started as root: it must read and
# write here, and run the helper.
os.chmod(work, 0o1777)  # sticky, as /tmp: the helper takes no policy from a directory others could swap files in (docs/host.md, "Files the daemon trusts")
helper = os.path.join(work, "gatehouse-egress")
shutil.copy(EGRESS, helper)
os.chmod(helper, 0o755)


sh(work, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
   "-subj", "/CN=allowed.test", "-keyout", "srv.key", "-out", "srv.pem",
   "-addext", "subjectAltName=DNS:allowed.test,DNS:denied.test")
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(os.path.join(work, "srv.pem"), os.path.join(work, "srv.key"))

allowed = server("allowed")
denied = server("denied")
secure = server("secure", tls)

policy = os.path.join(work, "squid.policy")
POLICY = """policy squid-e2e {{
  network {{
    allow domain allowed.test port {allowed}, {secure}
    allow domain denied.test port {denied}, {secure}
    deny domain denied.test
  }}
}}
"""
with open(policy, "w") as f:
    f.write(POLICY.format(allowed=allowed, denied=denied, secure=secure))
log = os.path.join(work, "decisions.jsonl")
open(log, "w").close()
os.chmod(log, 0o666)
os.chmod(policy, 0o644)
with open(os.path.join(work, "hosts"), "w") as f:
    f.write("127.0.0.1 localhost allowed.test denied.test unlisted.test\n")

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
with open(os.path.join(work, "squid.conf"), "w") as f:
    f.write(f"""http_port 127.0.0.1:{port}
pid_filename {work}/squid.pid
cache_log {work}/cache.log
access_log {work}/access.log
cache_store_log none
cache deny all
cache_mem 8 MB
coredump_dir {work}
hosts_file {work}/hosts
dns_nameservers 127.0.0.1
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
# ttl=0 negative_ttl=0: no answer is cached past a policy reload.
external_acl_type gatehouse ttl=0 negative_ttl=0 concurrency=8 children-max=2 children-startup=1 %DST %PORT %METHOD {helper} squid-helper --policy {policy} --log {log}
acl gatehouse external gatehouse

http_access allow gatehouse
http_access deny all
""")
squid = subprocess.Popen(["squid", "-N", "-f", os.path.join(work, "squid.conf")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "squid.err"), "w"))


def dump():
    for f in ("squid.err", "cache.log"):
        p = os.path.join(work, f)
        if os.path.exists(p):
            print(f"--- {f}", file=sys.stderr)
            print(open(p).read()[-4000:], file=sys.stderr)


deadline = time.time() + 30
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline or squid.poll() is not None:
            dump()
            sys.exit("squid did not start")
        time.sleep(0.2)

PROXY = f"http://127.0.0.1:{port}"


def curl(url, *extra):
    out = subprocess.run(
        ["curl", "-sS", "--max-time", "10", "-x", PROXY, "-o", "-", "-w", "\n%{http_code} %{http_connect}",
         "--cacert", os.path.join(work, "srv.pem"), *extra, url],
        capture_output=True, text=True)
    body, _, codes = out.stdout.rpartition("\n")
    code, connect = (codes.split() + ["0", "0"])[:2]
    return int(code), int(connect), body, out.stderr


case = Cases()


code, _, body, err = curl(f"http://allowed.test:{allowed}/")
case("plain HTTP to an allowed host passes", code == 200 and "hello from allowed" in body, (code, body, err))

before = hits.get("denied", 0)
code, _, body, err = curl(f"http://denied.test:{denied}/")
case("a denied host is refused by squid (403)", code == 403, (code, err))
case("... and never reaches the server", hits.get("denied", 0) == before)

code, _, body, err = curl(f"http://unlisted.test:{allowed}/")
case("a host no rule allows is refused", code == 403, (code, err))

code, _, body, err = curl(f"http://allowed.test:{denied}/")
case("an allowed host on another port is refused", code == 403, (code, err))

code, connect, body, err = curl(f"https://allowed.test:{secure}/")
case("CONNECT to an allowed host passes", code == 200 and "hello from secure" in body, (code, connect, err))

before = hits.get("secure", 0)
code, connect, body, err = curl(f"https://denied.test:{secure}/")
case("CONNECT to a denied host is refused (403 to the CONNECT)", connect == 403, (code, connect, err))
case("... and never reaches the server", hits.get("secure", 0) == before)

# Many requests at once: the helper answers squid's concurrent channels.
results = []
threads = [threading.Thread(target=lambda u=u: results.append(curl(u)[0]))
           for u in [f"http://allowed.test:{allowed}/", f"http://denied.test:{denied}/"] * 8]
for t in threads:
    t.start()
for t in threads:
    t.join()
case("16 concurrent requests get their own answers", sorted(results) == [200] * 8 + [403] * 8, results)


def decisions():
    with open(log) as f:
        return [json.loads(l) for l in f if l.strip()]


reasons = {r.get("reason") for r in decisions() if "reason" in r}
case("the helper's decision log has the policy's reasons",
     {"allowed_by_rule", "denied_by_rule", "not_allowed"} <= reasons, reasons)

# Live: the policy file changes, and the next request is decided by it.
with open(policy, "w") as f:
    f.write(POLICY.format(allowed=allowed, denied=denied, secure=secure)
            .replace(f"allow domain allowed.test port {allowed}, {secure}", f"allow domain allowed.test port {secure}"))
deadline = time.time() + 10
code = 200
while time.time() < deadline:
    code, _, _, _ = curl(f"http://allowed.test:{allowed}/")
    if code == 403:
        break
    time.sleep(0.2)
case("a policy change is in force within seconds (no restart)", code == 403, code)

# A broken policy file is refused; the last good policy stays.
with open(policy, "w") as f:
    f.write("policy squid-e2e { network { allow domian x } }\n")
time.sleep(1)
code, connect, _, err = curl(f"https://allowed.test:{secure}/")
case("a broken policy file leaves the last good one in force", code == 200, (code, connect, err))
code, _, _, _ = curl(f"http://allowed.test:{allowed}/")
case("... still refusing what it refused", code == 403, code)

squid.send_signal(signal.SIGTERM)
try:
    squid.wait(timeout=10)
except subprocess.TimeoutExpired:
    squid.kill()
case.finish(dump)
