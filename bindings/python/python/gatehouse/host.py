"""A client for ``gatehouse-egress host``'s control API (docs/host.md), over
its Unix socket: the Zoo SDK's calls against a host daemon, from Python.

    from gatehouse.host import Host

    host = Host("/run/gatehouse/host.sock")
    host.add("ci-1", ["10.200.1.2"], open("ci.policy").read())
    host.set_network("ci-1", "deny", allow_dns=True)
    host.add_rule("ci-1", "domain", "github.com")
    host.set_permission("ci-1", "shell", "exec", "deny")
    host.set_apps("ci-1", ["firefox"])
    host.decide("ci-1", {"kind": "tool", "permission": "shell.exec"}).refused  # True
    host.require("ci-1", {"kind": "tool", "permission": "shell.exec"})  # raises Denied

Every change is in force for the sandbox's next connection when the call
returns, and open connections its new policy denies are closed. The
daemon's refusals are exceptions: :class:`NotFound` (404),
:class:`Conflict` (409), :class:`Rejected` (422, with every diagnostic of a
policy that does not build in its message) and :class:`DaemonError` (500);
the policy in force stays after each of them.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import GatehouseError

__all__ = [
    "Conflict",
    "DaemonError",
    "Denied",
    "Host",
    "HostDecision",
    "HostError",
    "NotFound",
    "PhaseFailed",
    "Rejected",
    "Sandbox",
    "Switched",
    "TwoPhase",
    "two_phase",
]


class HostError(GatehouseError):
    """The daemon refused a call (or could not be reached: ``status`` 0).
    ``message`` is the daemon's own."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message


class NotFound(HostError):
    """404: no such sandbox."""


class Conflict(HostError):
    """409: the id exists already, an address is another sandbox's, or
    removing the sandbox would release an address no ``networks`` entry
    covers."""


class Rejected(HostError):
    """422: a policy that does not build (every diagnostic in the message),
    a call outside the vocabulary, a malformed body."""


class DaemonError(HostError):
    """500: a file or ``nft`` failed; the policy in force stays."""


@dataclass(frozen=True)
class Sandbox:
    """One sandbox of the table, as the daemon lists it."""

    id: str
    addresses: List[str]
    policy: str
    revision: str


@dataclass(frozen=True)
class HostDecision:
    """The decision of a query for a sandbox, with its policy in force:
    ``decision`` (``allow``, ``deny``, ``ask``, ...), ``reason``, the
    ``policy``, the deciding ``rule`` (file, line, column, source) or
    ``None``, and the whole ``report`` as the daemon answered it."""

    decision: str
    reason: str
    policy: Optional[str]
    rule: Optional[Dict[str, Any]]
    #: 403 when refused (deny, denied, timed out, aborted, disabled), else 200.
    status: int
    report: Dict[str, Any]

    @property
    def allowed(self) -> bool:
        """Whether the decision is an allow."""
        return self.decision == "allow"

    @property
    def refused(self) -> bool:
        """Whether the daemon refused it (403); an ``ask`` is not refused."""
        return self.status == 403


class Denied(HostError):
    """Raised by :meth:`Host.require` for a refused query; ``decision``
    holds why."""

    def __init__(self, decision: HostDecision) -> None:
        super().__init__(403, f"{decision.decision}: {decision.reason}")
        self.decision = decision


@dataclass(frozen=True)
class Switched:
    """A sandbox switched to another policy: the revisions in force before
    and after."""

    id: str
    before: str
    after: str


@dataclass(frozen=True)
class TwoPhase:
    """What :func:`two_phase` ran: the setup phase, the switch, the agent
    phase."""

    setup: "subprocess.CompletedProcess[bytes]"
    switched: Switched
    agent: "subprocess.CompletedProcess[bytes]"


class PhaseFailed(GatehouseError):
    """The setup phase did not succeed (its exit status is ``setup.returncode``).
    The sandbox was switched to its agent policy all the same: it is never
    left on its setup policy."""

    def __init__(self, setup: "subprocess.CompletedProcess[bytes]", switched: Switched) -> None:
        super().__init__(f"the setup phase exited with {setup.returncode}; the agent phase did not start")
        self.setup = setup
        self.switched = switched


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("gatehouse", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


_ERRORS = {404: NotFound, 409: Conflict, 422: Rejected, 500: DaemonError}


class Host:
    """The control API of one host daemon (``--control PATH``). Only the
    socket's owner (the daemon's user, root) may use it."""

    def __init__(self, socket_path: str, timeout: float = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Host({self.socket_path!r})"

    def _call(
        self, method: str, path: str, body: Optional[str] = None, ok: Sequence[int] = (200,)
    ) -> Tuple[int, Any]:
        c = _UnixConnection(self.socket_path, self.timeout)
        try:
            data = body.encode("utf-8") if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            raw = r.read()
            status = r.status
        except OSError as e:
            raise HostError(0, f"{self.socket_path}: {e}") from None
        finally:
            c.close()
        answer: Any = None
        if raw:
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = {"error": raw.decode("utf-8", "replace")}
        if status in ok:
            return status, answer
        message = answer.get("error", "") if isinstance(answer, dict) else str(answer)
        raise _ERRORS.get(status, HostError)(status, message)

    @staticmethod
    def _id(id: str) -> str:
        return urllib.parse.quote(id, safe="")

    def sandboxes(self) -> List[Sandbox]:
        """Every sandbox of the table in force."""
        _, a = self._call("GET", "/v1/sandboxes")
        return [
            Sandbox(
                id=s["id"],
                addresses=list(s["addresses"]),
                policy=str(s["policy"]),
                revision=str(s["revision"]),
            )
            for s in a["sandboxes"]
        ]

    def add(
        self, id: str, addresses: Sequence[str], policy: str, policy_name: Optional[str] = None
    ) -> None:
        """Adds a sandbox with its source addresses and its policy's text."""
        if isinstance(addresses, str):
            raise TypeError("addresses is a list of addresses, not one string")
        body: Dict[str, Any] = {"id": id, "addresses": list(addresses), "policy": policy}
        if policy_name is not None:
            body["policy_name"] = policy_name
        self._call("POST", "/v1/sandboxes", json.dumps(body), ok=(201,))

    def remove(self, id: str) -> None:
        """Removes a sandbox; its open connections close."""
        self._call("DELETE", f"/v1/sandboxes/{self._id(id)}", ok=(204,))

    def put_policy(self, id: str, text: str, policy_name: Optional[str] = None) -> str:
        """Puts policy text in force for the sandbox (and starts its Zoo
        document afresh); the new revision."""
        path = f"/v1/sandboxes/{self._id(id)}/policy"
        if policy_name is not None:
            path += "?policy_name=" + urllib.parse.quote(policy_name, safe="")
        _, a = self._call("PUT", path, text)
        return str(a["revision"])

    def switch(self, id: str, text: str, policy_name: Optional[str] = None) -> Switched:
        """Switches the sandbox to the policy ``text`` (a two-phase
        sandbox's setup policy to its agent policy), atomically: in force
        for its next connection when this returns, and its open
        connections, DNS-fed passes and kernel-passed flows that ``text``
        denies are cut. ``gatehouse-egress switch`` is the same from a
        shell."""
        before = next((s.revision for s in self.sandboxes() if s.id == id), None)
        if before is None:
            raise NotFound(404, f"no sandbox `{id}`")
        after = self.put_policy(id, text, policy_name)
        return Switched(id=id, before=before, after=after)

    def _zoo(self, id: str, endpoint: str, args: Mapping[str, Any]) -> str:
        _, a = self._call("POST", f"/v1/sandboxes/{self._id(id)}/{endpoint}", json.dumps(dict(args)))
        return str(a["revision"])

    def set_network(self, id: str, default: str, allow_dns: bool = True) -> str:
        """Zoo's ``set_network``: ``default`` is ``"allow"`` or ``"deny"``.
        From the first Zoo call on, the sandbox's policy is what its Zoo
        calls say (a policy it had from a file does not carry over)."""
        return self._zoo(id, "network", {"default": default, "allow_dns": allow_dns})

    def add_rule(
        self, id: str, kind: str, value: str, effect: str = "allow", comment: Optional[str] = None
    ) -> str:
        """Zoo's ``add_rule``: ``kind`` is ``"domain"``, ``"ip"`` or
        ``"cidr"``; ``effect`` ``"allow"`` or ``"deny"``."""
        args: Dict[str, Any] = {"kind": kind, "value": value, "effect": effect}
        if comment is not None:
            args["comment"] = comment
        return self._zoo(id, "rules", args)

    def set_permission(self, id: str, permission: str, action: str, effect: str) -> str:
        """Zoo's ``set_permission``: ``permission.action`` allowed or denied."""
        return self._zoo(
            id, "permissions", {"permission": permission, "action": action, "effect": effect}
        )

    def set_apps(self, id: str, deny: Sequence[str]) -> str:
        """Zoo's ``set_apps``: programs the sandbox may not run."""
        if isinstance(deny, str):
            raise TypeError("deny is a list of programs, not one string")
        return self._zoo(id, "apps", {"deny": list(deny)})

    def decide(self, id: str, query: Mapping[str, Any]) -> HostDecision:
        """Decides a query (the JSON form, as ``policyc eval`` reads it:
        ``{"kind": "tool", "permission": "shell.exec"}``) with the
        sandbox's policy in force. A refusal is a decision too (see
        :meth:`require`)."""
        status, a = self._call(
            "POST", f"/v1/sandboxes/{self._id(id)}/decide", json.dumps(dict(query)), ok=(200, 403)
        )
        return HostDecision(
            decision=str(a.get("decision", "deny")),
            reason=str(a.get("reason", "")),
            policy=a.get("policy"),
            rule=a.get("rule"),
            status=status,
            report=a,
        )

    def require(self, id: str, query: Mapping[str, Any]) -> HostDecision:
        """:meth:`decide`, raising :class:`Denied` when the daemon refuses."""
        d = self.decide(id, query)
        if d.refused:
            raise Denied(d)
        return d


def two_phase(
    host: Host,
    id: str,
    *,
    setup_policy: str,
    agent_policy: str,
    setup: Sequence[str],
    agent: Sequence[str],
    enter: Sequence[str] = (),
    workspace: Optional[str] = None,
    run: str = "gatehouse-run",
    setup_name: Optional[str] = None,
    agent_name: Optional[str] = None,
    setup_env: Optional[Mapping[str, str]] = None,
    capture_output: bool = False,
) -> TwoPhase:
    """A two-phase sandbox, as ZeroCode's cloud runs one (docs/host.md,
    "Two-phase sandboxes"): the sandbox's network is put on
    ``setup_policy`` and ``setup`` runs under ``gatehouse-run
    setup_policy``; then the sandbox is switched to ``agent_policy``
    (:meth:`Host.switch`) and ``agent`` runs under a new ``gatehouse-run
    agent_policy`` launch, so that what the agent policy closes (the
    setup's secrets) is closed to every process of the agent phase —
    Landlock cannot take a right back from a running process, and
    ``gatehouse-run`` ends every process of its run when its command ends.

    ``enter`` is how a command gets into the sandbox (``["ip", "netns",
    "exec", "ci-1"]``, ``["docker", "exec", "ci-1"]``); the policy paths
    are read here for the daemon and passed as they are to
    ``gatehouse-run`` inside, so they must name the same file on both
    sides. ``setup_env`` is added to the setup phase's environment only
    (secrets as variables, as ZeroCode gives them to its setup script);
    the agent phase gets this process's environment without it, and
    ``enter`` must pass the environment on (``ip netns exec`` does;
    ``docker exec`` needs ``-e NAME``). A setup phase that fails raises
    :class:`PhaseFailed` after the switch: the sandbox never stays on its
    setup policy. Both phases' output goes where this process's goes, or
    with ``capture_output`` into the results."""
    with open(setup_policy, encoding="utf-8") as f:
        setup_text = f.read()
    with open(agent_policy, encoding="utf-8") as f:
        agent_text = f.read()

    def launch(
        policy: str, name: Optional[str], argv: Sequence[str], extra: Mapping[str, str]
    ) -> "subprocess.CompletedProcess[bytes]":
        cmd = [*enter, run, policy]
        if name is not None:
            cmd += ["--policy", name]
        if workspace is not None:
            cmd += ["--workspace", workspace]
        return subprocess.run(
            [*cmd, "--", *argv], env={**os.environ, **extra}, capture_output=capture_output, check=False
        )

    host.put_policy(id, setup_text, setup_name)
    try:
        first = launch(setup_policy, setup_name, setup, setup_env or {})
    finally:
        switched = host.switch(id, agent_text, agent_name)
    if first.returncode != 0:
        raise PhaseFailed(first, switched)
    second = launch(agent_policy, agent_name, agent, {})
    return TwoPhase(setup=first, switched=switched, agent=second)
