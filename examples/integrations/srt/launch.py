#!/usr/bin/env python3
"""Starts sandbox-runtime's `srt proxy` with gatehouse deciding every request.

  launch.py POLICY [PORT]

The proxy listens on 127.0.0.1:PORT (default 3128); point the workload's
HTTP_PROXY/HTTPS_PROXY there. `srt proxy` needs its decider on inherited
descriptors: under Node, srt 0.0.83 reads from every descriptor it is given,
so each direction is a socket pair, not a pipe. Add `--ca-fd` (a descriptor
holding the TLS-termination CA's key and certificate) to serve HTTPS; without
it, `srt proxy` refuses CONNECT. Stops when either process ends.
"""
import os
import shutil
import socket
import subprocess
import sys

policy = sys.argv[1]
port = sys.argv[2] if len(sys.argv) > 2 else "3128"
srt = shutil.which("srt") or "node_modules/.bin/srt"
egress = shutil.which("gatehouse-egress") or "target/release/gatehouse-egress"

out_proxy, out_decider = socket.socketpair()  # proxy -> decider
in_proxy, in_decider = socket.socketpair()    # decider -> proxy
decider = subprocess.Popen([egress, "srt-decider", "--policy", policy],
                           stdin=out_decider.fileno(), stdout=in_decider.fileno())
out_decider.close()
in_decider.close()
proxy = subprocess.Popen(
    [srt, "proxy", "--listen", f"127.0.0.1:{port}",
     "--decider-in", str(in_proxy.fileno()), "--decider-out", str(out_proxy.fileno())],
    pass_fds=(in_proxy.fileno(), out_proxy.fileno()))
in_proxy.close()
out_proxy.close()
try:
    os.wait()
finally:
    for p in (proxy, decider):
        p.terminate()
