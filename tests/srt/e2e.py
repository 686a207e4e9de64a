#!/usr/bin/env python3
"""End to end: sandbox-runtime's real `srt proxy` (npm) asking
`gatehouse-egress srt-decider` about every request, curl through it to
loopback servers.

Usage: e2e.py SRT_BIN GATEHOUSE_EGRESS_BIN

Everything listens on 127.0.0.1; every client call has a deadline, and the
whole run stops itself after 120 s.
"""
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from support import Cases, hits, server, sh  # noqa: E402

SRT, EGRESS = sys.argv[1], sys.argv[2]
signal.alarm(120)
work = tempfile.mkdtemp(prefix="gatehouse-srt-")


# A CA (the proxy terminates TLS with it; curl trusts it) and a server
# certificate for localhost from it (the proxy trusts it upstream).
sh(work, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
   "-subj", "/CN=gatehouse test CA", "-keyout", "ca.key", "-out", "ca.pem",
   "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
sh(work, "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
   "-keyout", "srv.key", "-out", "srv.csr")
with open(os.path.join(work, "ext.cnf"), "w") as f:
    f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
sh(work, "openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
   "-CAcreateserial", "-days", "2", "-out", "srv.pem", "-extfile", "ext.cnf")
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(os.path.join(work, "srv.pem"), os.path.join(work, "srv.key"))

allowed = server("allowed")
denied = server("denied")
secure = server("secure", tls)

policy = os.path.join(work, "srt.policy")
with open(policy, "w") as f:
    f.write(f"""policy srt-e2e {{
  network {{
    allow domain localhost port {allowed}, {secure}
    allow ip 127.0.0.1 port {allowed}, {secure}
    allow domain localhost port {denied}
    # A range too wide for the proxy's own deny list: the decider denies it.
    deny domain localhost port {denied}-{denied + 100}
  }}
}}
""")
log = os.path.join(work, "decisions.jsonl")

# The decider's two streams, proxy -> decider and decider -> proxy, as
# `--decider-out` and `--decider-in`. Socket pairs rather than pipes: under
# Node, srt 0.0.83 opens each descriptor as a duplex net.Socket and reads
# from it, which fails on the write end of a pipe (ENOTCONN); under Bun
# plain pipes work too. The decider only sees its stdin and stdout.
out_proxy, out_decider = socket.socketpair()
in_proxy, in_decider = socket.socketpair()
decider = subprocess.Popen(
    [EGRESS, "srt-decider", "--policy", policy, "--log", log],
    stdin=out_decider.fileno(), stdout=in_decider.fileno(),
    stderr=open(os.path.join(work, "decider.err"), "w"))
out_decider.close()
in_decider.close()
to_proxy_r, to_decider_w = in_proxy.fileno(), out_proxy.fileno()

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    proxy_port = s.getsockname()[1]
ca_r, ca_w = os.pipe()
with open(os.path.join(work, "ca.key")) as k, open(os.path.join(work, "ca.pem")) as c:
    os.write(ca_w, (k.read() + c.read()).encode())
os.close(ca_w)
env = dict(os.environ, NODE_EXTRA_CA_CERTS=os.path.join(work, "ca.pem"))
proxy_err = open(os.path.join(work, "proxy.err"), "w")
proxy = subprocess.Popen(
    [SRT, "proxy", "--listen", f"127.0.0.1:{proxy_port}",
     "--decider-in", str(to_proxy_r), "--decider-out", str(to_decider_w), "--ca-fd", str(ca_r)],
    pass_fds=(to_proxy_r, to_decider_w, ca_r), env=env, stderr=proxy_err)
in_proxy.close()
out_proxy.close()
os.close(ca_r)

deadline = time.time() + 30
while True:
    try:
        socket.create_connection(("127.0.0.1", proxy_port), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline or proxy.poll() is not None:
            print(open(os.path.join(work, "proxy.err")).read(), file=sys.stderr)
            print(open(os.path.join(work, "decider.err")).read(), file=sys.stderr)
            sys.exit("srt proxy did not start")
        time.sleep(0.1)

PROXY = f"http://127.0.0.1:{proxy_port}"


def curl(url, *extra):
    """(status, headers, body) of a request through the proxy."""
    out = subprocess.run(
        ["curl", "-sS", "--max-time", "10", "-x", PROXY, "-D", "-", "--cacert",
         os.path.join(work, "ca.pem"), *extra, url],
        capture_output=True, text=True)
    head, _, body = out.stdout.replace("\r\n", "\n").rpartition("\n\n")
    # The last response head (after a CONNECT's 200).
    blocks = [b for b in out.stdout.replace("\r\n", "\n").split("\n\n") if b.startswith("HTTP/")]
    status = int(blocks[-1].split()[1]) if blocks else 0
    headers = {}
    for line in (blocks[-1].split("\n")[1:] if blocks else []):
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body, out.stderr


def decisions():
    with open(log) as f:
        return [json.loads(l) for l in f if l.strip()]


case = Cases()


st, h, body, err = curl(f"http://localhost:{allowed}/")
case("plain HTTP to an allowed host passes", st == 200 and "hello from allowed" in body, (st, h, body, err))

st, h, body, err = curl(f"http://127.0.0.1:{allowed}/")
case("an allowed address passes", st == 200, (st, h, err))

before = hits.get("denied", 0)
st, h, body, err = curl(f"http://localhost:{denied}/")
case("the policy's deny is the decider's 403", st == 403 and h.get("x-deny-reason") == "decider", (st, h, body, err))
case("a denied request never reaches the server", hits.get("denied", 0) == before)

st, h, body, err = curl(f"https://localhost:{secure}/")
case("HTTPS (terminated, SNI = host) to an allowed host passes", st == 200 and "hello from secure" in body, (st, h, body, err))

before = hits.get("allowed", 0)
st, h, body, err = curl(f"http://localhost:{allowed}/", "-H", f"Host: evil.example:{allowed}")
case("a Host header naming another host is refused", st in (403, 421) and hits.get("allowed", 0) == before, (st, h, body, err))

before = hits.get("secure", 0)
st, h, body, err = curl(f"https://localhost:{secure}/", "-H", f"Host: evil.example:{secure}")
case("inside TLS, a Host naming another host is refused", st in (403, 421) and hits.get("secure", 0) == before, (st, h, body, err))

# SNI naming another host than the CONNECT: by hand, as curl always sends
# the URL's host in both.
def sni_mismatch():
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=10) as s:
        s.sendall(f"CONNECT 127.0.0.1:{secure} HTTP/1.1\r\nHost: 127.0.0.1:{secure}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                return 0
            head += chunk
        if b" 200" not in head.split(b"\r\n")[0]:
            return int(head.split()[1])
        # The proxy's certificate names the CONNECT host; this client
        # says another name and does not care what it gets back.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            t.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{secure}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while True:
                chunk = t.recv(4096)
                if not chunk:
                    break
                data += chunk
            return int(data.split()[1]) if data else 0


before = hits.get("secure", 0)
try:
    st = sni_mismatch()
except (ssl.SSLError, OSError) as e:
    st = str(e)
case("a server name other than the CONNECT host is refused", st in (403, 421), st)
case("... and never reaches the server", hits.get("secure", 0) == before)

st, h, body, err = curl(f"http://127.0.0.2:{allowed}/")
case("a host outside the hello's lists is refused by the proxy itself", st == 403 and h.get("x-deny-reason") != "decider", (st, h))

d = decisions()
reasons = [r.get("reason") for r in d if "reason" in r]
case("the decision log records the decider's decisions",
     "allowed_by_rule" in reasons and "denied_by_rule" in reasons, reasons)
accesses = [r["access"]["outcome"] for r in d if "access" in r]
# The proxy refuses Host and server-name disagreements itself (421
# misdirected) before asking; the decider's own checks (unit-tested) are
# the second line. So exactly four requests reached the decider.
case("the decider decided exactly the requests the proxy asked about",
     accesses == ["allowed", "allowed", "refused (denied_by_rule)", "allowed"], accesses)

# Fail closed: the decider gone, nothing passes.
decider.kill()
decider.wait()
time.sleep(0.5)
st, h, body, err = curl(f"http://localhost:{allowed}/")
case("with the decider gone, an allowed request is refused", st != 200, (st, h, err))

proxy.terminate()
try:
    proxy.wait(timeout=5)
except subprocess.TimeoutExpired:
    proxy.kill()


def dump():
    for f in ("proxy.err", "decider.err"):
        print(f"--- {f}", file=sys.stderr)
        print(open(os.path.join(work, f)).read()[-4000:], file=sys.stderr)


case.finish(dump)
