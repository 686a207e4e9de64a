"""What the end-to-end suites against real programs share (tests/srt,
tests/squid): loopback HTTP(S) servers that count their hits, and the
`ok`/`FAIL` lines with the closing `N passed, N failed`."""
import http.server
import subprocess
import sys
import threading

hits = {}


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = self.server.name
        hits[name] = hits.get(name, 0) + 1
        body = f"hello from {name}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def server(name, tls=None):
    """A server on 127.0.0.1 answering `hello from NAME`; its port."""
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    s.name = name
    if tls:
        s.socket = tls.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]


def sh(cwd, *args):
    subprocess.run(args, check=True, capture_output=True, cwd=cwd)


class Cases:
    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"ok    {name}")
        else:
            self.failed += 1
            print(f"FAIL  {name} {detail}")

    def finish(self, on_failure=None):
        print(f"{self.passed} passed, {self.failed} failed")
        if self.failed and on_failure:
            on_failure()
        sys.exit(1 if self.failed else 0)
