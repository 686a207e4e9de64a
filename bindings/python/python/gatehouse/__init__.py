"""gatehouse: the policy engine for AI-agent sandboxes, in Python.

Build a policy set from the gatehouse language, pick a policy, and ask it
questions: may this sandbox connect to ``api.github.com:443``? may the agent
run ``git push``, write ``.git/hooks/pre-commit``, call a destructive MCP
tool? Every answer is a :class:`Decision`; nothing raises on a hostile
query, and any internal surprise is a deny::

    import gatehouse

    policies = gatehouse.PolicySet.from_source("agent.policy", TEXT)
    agent = policies["agent"]
    agent.connect("api.github.com", 443).allowed        # True
    agent.exec(["git", "push"]).outcome                  # "ask"
    agent.decide("write .git/hooks/pre-commit in /work") # the text form
    agent.decide({"kind": "dns", "name": "exfil.example"})  # the JSON form
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _gatehouse

__all__ = [
    "Decision",
    "Diagnostic",
    "GatehouseError",
    "QueryError",
    "Policy",
    "PolicyError",
    "PolicySet",
    "PolicyStore",
    "Rule",
    "TestCase",
    "check",
    "fmt",
    "host",
    "policy_tests",
    "__version__",
]

__version__: str = _gatehouse.version()

#: A query: the text form (``"connect github.com:443"``) or the JSON form as
#: a mapping (``{"kind": "connect", "host": "github.com", "port": 443}``).
Query = Union[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Diagnostic:
    """One error or warning of ``check``, with where it is."""

    code: str
    severity: str
    message: str
    file: str
    line: int
    column: int
    help: Optional[str] = None
    rendered: str = ""

    def __str__(self) -> str:
        """The human form, as ``policyc check`` prints it: the file, line
        and column, the source line with a caret under the span, and the
        help line."""
        if self.rendered:
            return self.rendered.rstrip("\n")
        out = f"{self.severity}[{self.code}]: {self.message}\n  --> {self.file}:{self.line}:{self.column}"
        if self.help:
            out += f"\n  = help: {self.help}"
        return out


def _diagnostics(records: str) -> List[Diagnostic]:
    return [
        Diagnostic(
            code=r["code"],
            severity=r["severity"],
            message=r["message"],
            file=r["file"],
            line=r["line"],
            column=r["column"],
            help=r.get("help"),
            rendered=r.get("rendered", ""),
        )
        for r in json.loads(records)
    ]


class GatehouseError(Exception):
    """The base of every error this package raises."""


class QueryError(GatehouseError, ValueError):
    """A query that is not a query: malformed text, an unknown or missing
    JSON field, an unknown transport. (Any well-formed query is decided.)"""


class PolicyError(GatehouseError):
    """A policy set that does not build, with every diagnostic attached.

    ``str(error)`` is the rendered form that ``policyc check`` prints;
    ``error.diagnostics`` holds them one by one.
    """

    def __init__(self, message: str, diagnostics: Sequence[Diagnostic] = ()) -> None:
        super().__init__(message)
        self.diagnostics: List[Diagnostic] = list(diagnostics)


def _raise(e: Exception) -> PolicyError:
    message, records = e.args if len(e.args) == 2 else (str(e), "[]")
    return PolicyError(str(message), _diagnostics(str(records)))


#: An answer: ``outcome``, ``reason``, ``policy``, ``rule`` (a :class:`Rule`
#: or ``None``), ``escalation``, ``status``, ``risk``, ``category``, and
#: ``allowed``. Immutable and hashable, made in Rust; a field is converted
#: only when it is read.
Decision = _gatehouse.Decision

#: Where the deciding rule was written: ``file``, ``line``, ``column``,
#: ``source``, ``because``.
Rule = _gatehouse.Rule


class Policy:
    """One compiled policy of a :class:`PolicySet`. Obtain it with
    ``policies["name"]``; it keeps its set alive."""

    __slots__ = ("_set", "_index", "name")

    def __init__(self, set_: "PolicySet", index: int, name: str) -> None:
        self._set = set_
        self._index = index
        self.name = name

    def __repr__(self) -> str:
        return f"Policy({self.name!r})"

    def decide(self, query: Query, workspace: Optional[str] = None) -> Decision:
        """Decides a query in the text form or the JSON form (a mapping).

        A malformed query raises :class:`QueryError` (a ``ValueError``);
        any well-formed query, however hostile, is decided.
        """
        inner = self._set._inner
        try:
            if isinstance(query, str):
                return inner.decide_text(self._index, query, workspace)
            return inner.decide_json(self._index, json.dumps(dict(query)), workspace)
        except ValueError as e:
            raise QueryError(str(e)) from None

    def connect(self, host: str, port: int, via: str = "https") -> Decision:
        """May the sandbox open a connection to ``host:port``? ``via`` is how
        it reaches the proxy: ``https`` (a CONNECT tunnel), ``http``,
        ``socks5`` or ``socks5_udp``."""
        try:
            return self._set._inner.connect(self._index, host, port, via)
        except ValueError as e:
            raise QueryError(str(e)) from None

    def dns(self, name: str) -> Decision:
        """May the resolver answer ``name``?"""
        return self._set._inner.dns(self._index, name)

    def resolved(self, name: str, addrs: Iterable[str], port: Optional[int] = None) -> Decision:
        """May the sandbox use the addresses ``name`` resolved to?"""
        return self._set._inner.resolved(self._index, name, list(addrs), port)

    def tool(self, permission: str) -> Decision:
        """Is a tool permission (``shell.exec``, ``files.write``, ...) granted?"""
        return self._set._inner.tool(self._index, permission)

    def app(self, program: str) -> Decision:
        """May the sandbox run this app?"""
        return self._set._inner.app(self._index, program)

    def exec(self, argv: Sequence[str], escalate: bool = False, workspace: Optional[str] = None) -> Decision:
        """May the agent run this command (an argv, not a shell string)?
        ``escalate`` asks to run it outside the sandbox."""
        if isinstance(argv, str):
            raise TypeError("exec takes an argv (a list of words), not a shell string")
        if workspace is not None:
            return self.decide({"kind": "exec", "argv": list(argv), "escalate": escalate}, workspace)
        return self._set._inner.exec(self._index, list(argv), escalate)

    def write(self, path: str, workspace: str) -> Decision:
        """May the agent write ``path`` (absolute) while working in
        ``workspace``? The workspace's ``.git`` pointer file is read once."""
        return self._set._inner.write(self._index, path, workspace)

    def mcp(
        self,
        server: str,
        tool: str,
        *,
        destructive: Optional[bool] = None,
        read_only: Optional[bool] = None,
        open_world: Optional[bool] = None,
    ) -> Decision:
        """May the agent call MCP tool ``server/tool``, given the tool's
        annotations (a missing hint is ``None``)?"""
        return self._set._inner.mcp(self._index, server, tool, destructive, read_only, open_world)

    def review(self, action: Query, assessment: Mapping[str, Any]) -> Decision:
        """What becomes of ``action`` after the auto-reviewer's
        ``assessment`` (``risk``, ``category``, ``user_authorization``,
        ``outcome``, ``status``)?"""
        if isinstance(action, str):
            raise TypeError("review takes the action in the JSON form (a mapping)")
        return self.decide({"kind": "review", "action": dict(action), "assessment": dict(assessment)})


class PolicySet:
    """An immutable, compiled set of policies; safe to share between threads."""

    __slots__ = ("_inner", "_names")

    def __init__(self, inner: _gatehouse._PolicySet) -> None:
        self._inner = inner
        self._names: List[str] = inner.names()

    @classmethod
    def from_source(cls, name: str, text: str) -> "PolicySet":
        """Compiles one source text (``name`` is what diagnostics show)."""
        return cls.from_sources([(name, text)])

    @classmethod
    def from_sources(cls, sources: Iterable[Tuple[str, str]]) -> "PolicySet":
        """Compiles (name, text) pairs as one set; raises :class:`PolicyError`
        with every diagnostic if any has an error."""
        try:
            return cls(_gatehouse._PolicySet.from_sources(list(sources)))
        except _gatehouse.GatehouseError as e:
            raise _raise(e) from None

    @classmethod
    def from_files(cls, paths: Iterable[Union[str, "os.PathLike[str]"]]) -> "PolicySet":
        """Compiles policy files as one set."""
        sources = []
        for p in paths:
            with open(p, encoding="utf-8") as f:
                sources.append((os.fspath(p), f.read()))
        return cls.from_sources(sources)

    @classmethod
    def from_artifact(cls, data: bytes) -> "PolicySet":
        """Loads a compiled artifact (``policyc compile``); its tables are
        checked before use."""
        try:
            return cls(_gatehouse._PolicySet.from_artifact(bytes(data)))
        except _gatehouse.GatehouseError as e:
            raise _raise(e) from None

    def to_artifact(self) -> bytes:
        """The set as a checksummed artifact."""
        return self._inner.to_artifact()

    @property
    def names(self) -> List[str]:
        """The policies' names, in source order."""
        return list(self._names)

    @property
    def revision(self) -> str:
        """A digest of the compiled set, for logs and live updates."""
        return self._inner.revision()

    def __getitem__(self, name: str) -> Policy:
        try:
            return Policy(self, self._names.index(name), name)
        except ValueError:
            raise KeyError(_unknown_policy(name, self._names)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[Policy]:
        return (Policy(self, i, n) for i, n in enumerate(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"PolicySet({self._names!r}, revision={self.revision!r})"


def _unknown_policy(name: object, names: List[str]) -> str:
    """What a KeyError for an unknown policy says: the set's policies, and
    the closest name when one is close (as the CLI's did-you-mean)."""
    import difflib

    listed = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
    message = f"no policy {name!r} in this set (it holds: {listed or 'none'})"
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    if close:
        message += f"; did you mean {close[0]!r}?"
    return message


class PolicyStore:
    """The live policy set of a running program. ``load()`` is lock-free
    and safe from many threads; ``update()`` compiles new sources and
    swaps them in, or raises :class:`PolicyError` and keeps the old set."""

    __slots__ = ("_inner",)

    def __init__(self, policies: PolicySet) -> None:
        self._inner = _gatehouse._PolicyStore(policies._inner)

    def load(self) -> PolicySet:
        """The set in force now."""
        return PolicySet(self._inner.load())

    def update(self, sources: Iterable[Tuple[str, str]]) -> None:
        """Replaces the set with one compiled from ``sources``; on any error
        the old set stays in force."""
        try:
            self._inner.update(list(sources))
        except _gatehouse.GatehouseError as e:
            raise _raise(e) from None

    def replace(self, policies: PolicySet) -> None:
        """Replaces the set with an already compiled one."""
        self._inner.replace(policies._inner)


def check(sources: Iterable[Tuple[str, str]]) -> List[Diagnostic]:
    """Every error and warning of a set of (name, text) sources, as
    ``policyc check`` reports them. An empty list means a clean set."""
    records, _rendered = _gatehouse.check(list(sources))
    return _diagnostics(records)


def fmt(text: str) -> str:
    """The canonical layout of one policy file; raises :class:`PolicyError`
    if it does not parse."""
    try:
        return _gatehouse.fmt(text)
    except _gatehouse.GatehouseError as e:
        raise _raise(e) from None


@dataclass(frozen=True)
class TestCase:
    """One ``expect`` line of a ``test`` block."""

    file: str
    line: int
    column: int
    test: str
    policy: Optional[str]
    query: str
    query_json: Dict[str, Any]
    outcome: str
    because: Optional[str]

    def passes(self, decision: Decision) -> bool:
        """Whether ``decision`` is what the line expects."""
        return decision.outcome == self.outcome and (
            self.because is None or decision.reason == self.because
        )


def policy_tests(sources: Iterable[Tuple[str, str]]) -> List[TestCase]:
    """Every ``expect`` of the ``test`` blocks of a set of (name, text)
    sources, in source order, to run with :meth:`Policy.decide`."""
    try:
        cases = _gatehouse.tests(list(sources))
    except _gatehouse.GatehouseError as e:
        raise _raise(e) from None
    return [
        TestCase(f, line, col, test, policy, text, json.loads(js), outcome, because)
        for (f, line, col, test, policy, text, js, outcome, because) in cases
    ]


# The control API of `gatehouse-egress host`: `gatehouse.host.Host`.
from . import host as host  # noqa: E402  (it builds on GatehouseError above)
