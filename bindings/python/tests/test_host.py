"""gatehouse.host against the real daemon: examples/host/lab.sh makes two
sandboxes (network namespaces, the host in a namespace of its own) under
``gatehouse-egress host``, and every call of the client is made and seen
in force, from inside a sandbox where it is about the network.

Needs root, ``ip``, ``nft`` and the daemon: GATEHOUSE_EGRESS names it (CI
sets it, and then this must run); without it the module is skipped.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from gatehouse.host import (
    Conflict,
    Denied,
    Host,
    HostError,
    NotFound,
    PhaseFailed,
    Rejected,
    two_phase,
)

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "examples" / "host" / "lab.sh"
PHASES = ROOT / "examples" / "host" / "two-phase"

pytestmark = pytest.mark.skipif(
    not os.environ.get("GATEHOUSE_EGRESS"), reason="GATEHOUSE_EGRESS names no daemon"
)

POLICY = """policy lab {
  network {
    default deny
    allow domain allowed.lab.test
  }
}
"""


class Lab:
    def __init__(self, folder: str) -> None:
        self.dir = folder

    def lab(self, *args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [str(LAB), *args], capture_output=True, text=True, timeout=60, check=False
        )

    def curl(self, k: int, url: str) -> int:
        """curl's exit code from inside sandbox ``k``."""
        r = self.lab("run", "--dir", self.dir, str(k), "curl", "-s", "-m", "5", "-o", "/dev/null", url)
        return r.returncode


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    folder = tempfile.mkdtemp(prefix="gatehouse-pyhost-")
    os.rmdir(folder)
    lab = Lab(folder)
    up = lab.lab("up", "--host-netns", "pyhost", "--dir", folder, "-n", "3")
    assert up.returncode == 0, up.stderr
    try:
        yield lab
    finally:
        down = lab.lab("down", "--dir", folder)
        assert down.returncode == 0, down.stderr


def test_the_sandboxes_are_listed(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    ids: List[str] = [s.id for s in host.sandboxes()]
    assert ids == ["sandbox-1", "sandbox-2", "sandbox-3"]
    first = host.sandboxes()[0]
    assert first.addresses == ["10.200.1.2"] and first.revision


def test_a_policy_put_is_in_force_for_that_sandbox_only(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    assert lab.curl(1, "http://denied.lab.test/") != 0
    revision = host.put_policy("sandbox-1", POLICY.replace("allowed.lab.test", "denied.lab.test"))
    assert revision
    assert lab.curl(1, "http://denied.lab.test/") == 0
    assert lab.curl(2, "http://denied.lab.test/") != 0
    # A policy that does not build: every diagnostic, and the one in force stays.
    with pytest.raises(Rejected) as e:
        host.put_policy("sandbox-1", "policy lab {\n  network {\n    allow domian x.test\n  }\n}\n")
    assert "domian" in e.value.message and e.value.status == 422
    assert lab.curl(1, "http://denied.lab.test/") == 0
    with pytest.raises(NotFound):
        host.put_policy("nobody", POLICY)


def test_the_zoo_calls_and_tool_calls(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    host.set_network("sandbox-2", "deny", allow_dns=True)
    host.add_rule("sandbox-2", "domain", "denied.lab.test")
    host.add_rule("sandbox-2", "cidr", "192.168.0.0/16", effect="deny", comment="the office")
    host.set_permission("sandbox-2", "shell", "exec", "deny")
    host.set_apps("sandbox-2", ["firefox"])
    assert lab.curl(2, "http://denied.lab.test/") == 0
    assert lab.curl(2, "http://allowed.lab.test/") != 0
    with pytest.raises(Rejected):
        host.add_rule("sandbox-2", "url", "https://x.test/")
    refused = host.decide("sandbox-2", {"kind": "tool", "permission": "shell.exec"})
    assert refused.refused and refused.decision == "deny" and refused.reason == "denied_by_rule"
    assert refused.rule is not None and "shell.exec" in str(refused.rule.get("source"))
    with pytest.raises(Denied) as e:
        host.require("sandbox-2", {"kind": "tool", "permission": "shell.exec"})
    assert e.value.decision.reason == "denied_by_rule"
    fine = host.require("sandbox-2", {"kind": "tool", "permission": "screen.read"})
    assert fine.allowed and not fine.refused
    assert host.decide("sandbox-2", {"kind": "app", "program": "firefox"}).refused
    with pytest.raises(Rejected):
        host.decide("sandbox-2", {"kind": "nonsense"})


def test_sandboxes_added_and_removed(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    host.add("sandbox-9", ["10.200.9.2"], POLICY)
    assert "sandbox-9" in [s.id for s in host.sandboxes()]
    with pytest.raises(Conflict):
        host.add("sandbox-9", ["10.200.9.3"], POLICY)
    with pytest.raises(Conflict):
        host.add("sandbox-10", ["10.200.9.2"], POLICY)
    with pytest.raises(TypeError):
        host.add("sandbox-11", "10.200.11.2", POLICY)
    host.remove("sandbox-9")
    assert "sandbox-9" not in [s.id for s in host.sandboxes()]
    with pytest.raises(NotFound):
        host.remove("sandbox-9")


def test_no_daemon_is_an_error_not_a_hang() -> None:
    with pytest.raises(HostError) as e:
        Host("/nonexistent/control.sock", timeout=2).sandboxes()
    assert e.value.status == 0


# An echo server in the lab's world outside, for a connection that stays open.
ECHO = """
import socketserver
class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("11.0.0.1", 9000), Echo).serve_forever()
"""

# A process of the sandbox outside gatehouse-run (a service the image left
# running) holding a connection the setup policy allows: it says `open`,
# then echoes every 50 ms and says `cut` when an echo fails (`still open`
# after ten seconds).
HOLD = """
import socket, sys, time
s = socket.create_connection(("allowed.lab.test", 9000), timeout=5)
s.sendall(b"ping\\n")
assert s.recv(5) == b"ping\\n"
print("open", flush=True)
s.settimeout(0.5)
end = time.monotonic() + 10
while time.monotonic() < end:
    try:
        s.sendall(b"x\\n")
        if not s.recv(2):
            raise OSError("closed")
    except OSError as e:
        print("cut", type(e).__name__, flush=True)
        sys.exit(0)
    time.sleep(0.05)
print("still open", flush=True)
"""


def line_of(p: "subprocess.Popen[str]", seconds: float) -> str:
    """The next line ``p`` prints within ``seconds`` ('' if none)."""
    assert p.stdout is not None
    ready, _, _ = select.select([p.stdout], [], [], seconds)
    return p.stdout.readline().strip() if ready else ""


def test_two_phase_cuts_the_setup_network_and_closes_its_secrets(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    run = os.environ.get("GATEHOUSE_RUN", str(ROOT / "target" / "release" / "gatehouse-run"))
    work = os.path.join(lab.dir, "work")
    os.makedirs(os.path.join(work, "secrets"))
    with open(os.path.join(work, "secrets", "token"), "w") as f:
        f.write("s3cret-file\n")
    echo = subprocess.Popen(["ip", "netns", "exec", "pyhost-o", sys.executable, "-c", ECHO])
    started: List["subprocess.Popen[Any]"] = [echo]
    enter = [str(LAB), "run", "--dir", lab.dir, "3"]
    setup_text = (PHASES / "setup.policy").read_text()
    agent_text = (PHASES / "agent.policy").read_text()
    try:
        # The switch: a connection the setup policy allows, held open by a
        # process of the sandbox, is cut within a second of it.
        host.put_policy("sandbox-3", setup_text)
        time.sleep(0.3)  # the echo server listens
        hold = subprocess.Popen([*enter, sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
        started.append(hold)
        assert line_of(hold, 30) == "open"
        switched = host.switch("sandbox-3", agent_text)
        at = time.monotonic()
        line = line_of(hold, 15)
        assert line.startswith("cut"), line
        assert time.monotonic() - at < 1.0
        hold.wait(timeout=5)
        assert switched.after != switched.before
        assert [s.revision for s in host.sandboxes() if s.id == "sandbox-3"] == [switched.after]
        # ... and a new one is refused.
        again = subprocess.run([*enter, sys.executable, "-c", HOLD], capture_output=True, text=True, timeout=30)
        assert "open" not in again.stdout and again.returncode != 0

        # Both phases under gatehouse-run: the setup's network and secrets,
        # then an agent phase that has neither.
        phases = two_phase(
            host,
            "sandbox-3",
            setup_policy=str(PHASES / "setup.policy"),
            agent_policy=str(PHASES / "agent.policy"),
            enter=enter,
            workspace=work,
            run=run,
            # A process the setup leaves behind would copy the secret later.
            setup=[
                "sh",
                "-c",
                "(sleep 1; cp secrets/token survivor.txt) & "
                'cat secrets/token && echo "env=${TOKEN:-none}" && curl -sf -m 5 http://allowed.lab.test/',
            ],
            agent=["sh", "-c", 'cat secrets/token; echo "env=${TOKEN:-none}"; curl -sf -m 5 http://allowed.lab.test/; echo "curl=$?"'],
            setup_env={"TOKEN": "s3cret-env"},
            capture_output=True,
        )
        setup_out = phases.setup.stdout.decode()
        assert phases.setup.returncode == 0, phases.setup.stderr.decode()
        assert "s3cret-file" in setup_out and "env=s3cret-env" in setup_out
        assert "hello from the lab's origin" in setup_out
        agent_out = phases.agent.stdout.decode()
        assert phases.agent.returncode == 0, phases.agent.stderr.decode()
        assert "s3cret" not in agent_out, agent_out
        assert "env=none" in agent_out
        assert "curl=" in agent_out and "curl=0" not in agent_out
        assert "No such file" in phases.agent.stderr.decode()
        # The sandbox's own processes are refused too, not only the launcher's.
        assert lab.curl(3, "http://allowed.lab.test/") != 0
        # Nothing of the setup phase outlived it.
        time.sleep(1.5)
        assert not os.path.exists(os.path.join(work, "survivor.txt"))

        # A setup phase that fails leaves the sandbox on its agent policy.
        with pytest.raises(PhaseFailed) as e:
            two_phase(
                host,
                "sandbox-3",
                setup_policy=str(PHASES / "setup.policy"),
                agent_policy=str(PHASES / "agent.policy"),
                enter=enter,
                workspace=work,
                run=run,
                setup=["sh", "-c", "exit 3"],
                agent=["true"],
                capture_output=True,
            )
        assert e.value.setup.returncode == 3
        assert lab.curl(3, "http://allowed.lab.test/") != 0
    finally:
        for p in started:
            p.kill()
            p.wait(timeout=5)
