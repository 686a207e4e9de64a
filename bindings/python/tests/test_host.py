"""gatehouse.host against the real daemon: examples/host/lab.sh makes two
sandboxes (network namespaces, the host in a namespace of its own) under
``gatehouse-egress host``, and every call of the client is made and seen
in force, from inside a sandbox where it is about the network.

Needs root, ``ip``, ``nft`` and the daemon: GATEHOUSE_EGRESS names it (CI
sets it, and then this must run); without it the module is skipped.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest

from gatehouse.host import Conflict, Denied, Host, HostError, NotFound, Rejected

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "examples" / "host" / "lab.sh"

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
    up = lab.lab("up", "--host-netns", "pyhost", "--dir", folder, "-n", "2")
    assert up.returncode == 0, up.stderr
    try:
        yield lab
    finally:
        down = lab.lab("down", "--dir", folder)
        assert down.returncode == 0, down.stderr


def test_the_sandboxes_are_listed(lab: Lab) -> None:
    host = Host(os.path.join(lab.dir, "control.sock"))
    ids: List[str] = [s.id for s in host.sandboxes()]
    assert ids == ["sandbox-1", "sandbox-2"]
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
