"""The CLI's decision tables, through the Python package, in both query
forms; and the package's contract: errors, immutability, threads."""

from __future__ import annotations

import glob
import os
import threading
from typing import Any, Dict, List, Tuple

import pytest

import gatehouse

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def shipped() -> gatehouse.PolicySet:
    files = sorted(glob.glob(os.path.join(ROOT, "policies", "*.policy")))
    assert files
    return gatehouse.PolicySet.from_files(files)


# policyc/tests/cli.rs `ROWS`: (policy, text form, JSON form, decision, reason).
ROWS: List[Tuple[str, str, Dict[str, Any], str, str]] = [
    ("coding-agent", "connect github.com:443", {"kind": "connect", "host": "github.com", "port": 443}, "allow", "allowed_by_rule"),
    ("coding-agent", "connect api.github.com:443", {"kind": "connect", "host": "api.github.com", "port": 443}, "deny", "not_allowed"),
    ("coding-agent", "connect GitHub.COM.:443", {"kind": "connect", "host": "GitHub.COM.", "port": 443}, "allow", "allowed_by_rule"),
    ("research", "connect 169.254.169.254:80", {"kind": "connect", "host": "169.254.169.254", "port": 80}, "deny", "local_address"),
    ("research", "connect 2130706433:80", {"kind": "connect", "host": "2130706433", "port": 80}, "deny", "ambiguous_ip_literal"),
    ("research", "connect [::ffff:10.1.2.3]:443", {"kind": "connect", "host": "[::ffff:10.1.2.3]", "port": 443}, "deny", "denied_by_rule"),
    ("research", "resolved anything.example -> 93.184.215.14, 10.0.0.7", {"kind": "resolved", "host": "anything.example", "addrs": ["93.184.215.14", "10.0.0.7"]}, "deny", "denied_by_rule"),
    ("research", "resolved rebind.example -> 127.0.0.1", {"kind": "resolved", "host": "rebind.example", "addrs": ["127.0.0.1"]}, "deny", "non_public_resolution"),
    ("research", "dns competitor.example.com", {"kind": "dns", "name": "competitor.example.com"}, "deny", "denied_by_rule"),
    ("observer", "tool input.control", {"kind": "tool", "permission": "input.control"}, "deny", "denied_by_rule"),
    ("observer", "tool screen.read", {"kind": "tool", "permission": "screen.read"}, "allow", "default_allow"),
    ("coding-agent", "dns exfil.attacker.example", {"kind": "dns", "name": "exfil.attacker.example"}, "deny", "not_allowed"),
    ("coding-agent", "connect 169.254.169.254:80", {"kind": "connect", "host": "169.254.169.254", "port": 80}, "deny", "local_address"),
    ("auto", "connect api.zerotwo.ai:443", {"kind": "connect", "host": "api.zerotwo.ai", "port": 443}, "allow", "allowed_by_rule"),
    ("auto", "connect example.com:443", {"kind": "connect", "host": "example.com", "port": 443}, "deny", "denied_by_rule"),
    ("kiosk", 'app "C:\\\\Program Files\\\\Mozilla Firefox\\\\firefox.exe"', {"kind": "app", "program": "C:\\Program Files\\Mozilla Firefox\\firefox.exe"}, "deny", "denied_by_rule"),
    ("kiosk", "app /usr/bin/vim", {"kind": "app", "program": "/usr/bin/vim"}, "allow", "default_allow"),
]


@pytest.mark.parametrize("policy,text,js,outcome,reason", ROWS)
def test_spec_rows_in_both_query_forms(policy: str, text: str, js: Dict[str, Any], outcome: str, reason: str) -> None:
    p = shipped()[policy]
    for d in (p.decide(text), p.decide(js)):
        assert (d.outcome, d.reason, d.policy) == (outcome, reason, policy), (text, d)


def test_every_expectation_of_the_shipped_policies_holds_in_both_forms() -> None:
    sets = [sorted(glob.glob(os.path.join(ROOT, "policies", "*.policy")))]
    sets.append(sorted(glob.glob(os.path.join(ROOT, "policies", "enterprise", "*.policy"))))
    for extra in ["spec.policy", "spec-agent.policy", "rulings.policy", "adversarial.policy"]:
        sets.append([os.path.join(ROOT, "tests", "data", extra)])
    checked = 0
    for files in sets:
        sources = [(f, open(f, encoding="utf-8").read()) for f in files]
        policies = gatehouse.PolicySet.from_sources(sources)
        for case in gatehouse.policy_tests(sources):
            name = case.policy or policies.names[0]
            p = policies[name]
            for d in (p.decide(case.query), p.decide(case.query_json)):
                assert case.passes(d), f"{case.file}:{case.line}: {case.query} gave {d!r}"
            checked += 1
    assert checked > 200


def test_typed_helpers_decide_as_the_query_forms() -> None:
    p = shipped()["coding-agent"]
    assert p.connect("github.com", 443) == p.decide("connect github.com:443")
    assert p.connect("github.com", 443, via="socks5") == p.decide("connect github.com:443 via socks5")
    assert p.dns("pypi.org") == p.decide({"kind": "dns", "name": "pypi.org"})
    assert p.resolved("pypi.org", ["10.0.0.1"], 443) == p.decide("resolved pypi.org -> 10.0.0.1 port 443")
    assert p.connect("github.com", 70000).reason == "invalid_port"
    agent = shipped()["auto"]
    assert agent.exec(["git", "status"]) == agent.decide({"kind": "exec", "argv": ["git", "status"]})
    assert agent.write("/work/.git/config", "/work") == agent.decide('write "/work/.git/config" in "/work"')
    assert agent.mcp("github", "delete_repo", destructive=True) == agent.decide("mcp github/delete_repo destructive=true")


def test_hostile_queries_are_decided_never_raised() -> None:
    p = shipped()["coding-agent"]
    for host in ["", "\x00", "a" * 10_000, "[::1", "0x7f.1", "xn--", "..", "github.com\x00.evil", "127.1"]:
        d = p.connect(host, 443)
        assert d.outcome == "deny", (host, d)
    # Spellings a resolver reads as github.com are github.com (IDNA maps
    # the ideographic full stop and full-width letters).
    for host in ["github.com\u3002", "\uff47\uff49\uff54\uff48\uff55\uff42.com", "GITHUB.com."]:
        assert p.connect(host, 443) == p.connect("github.com", 443), host
    assert p.exec([]).outcome == "deny"
    assert p.tool("no.such.permission").outcome in ("allow", "deny")


def test_malformed_queries_raise_value_error() -> None:
    p = shipped()["coding-agent"]
    with pytest.raises(gatehouse.QueryError):
        p.decide("connect github.com")
    assert issubclass(gatehouse.QueryError, gatehouse.GatehouseError)
    assert issubclass(gatehouse.PolicyError, gatehouse.GatehouseError)
    with pytest.raises(ValueError):
        p.decide("connect github.com")
    with pytest.raises(ValueError):
        p.decide({"kind": "connect", "host": "github.com"})
    with pytest.raises(ValueError):
        p.decide({"kind": "connect", "host": "a", "port": 1, "extra": True})
    with pytest.raises(ValueError):
        p.connect("github.com", 443, via="carrier-pigeon")
    with pytest.raises(TypeError):
        p.exec("rm -rf /")  # a str is a Sequence[str]: refused at run time


def test_decisions_are_immutable_hashable_and_readable() -> None:
    p = shipped()["coding-agent"]
    d = p.connect("github.com", 443)
    assert d.allowed and bool(d)
    assert d.rule is not None and d.rule.line > 0 and d.rule.source.startswith("allow")
    assert hash(d) == hash(p.connect("github.com", 443))
    assert "allow because allowed_by_rule" in repr(d)
    with pytest.raises(Exception):
        d.outcome = "deny"  # type: ignore[misc]
    assert {d, p.connect("github.com", 443)} == {d}


def test_errors_carry_every_diagnostic() -> None:
    text = "policy p {\n  network {\n    allow domian github.com\n    deny cidr 10.0.0.1/8\n  }\n}\n"
    with pytest.raises(gatehouse.PolicyError) as e:
        gatehouse.PolicySet.from_source("bad.policy", text)
    codes = [(d.code, d.line) for d in e.value.diagnostics]
    assert ("syntax_error", 3) in codes and ("cidr_host_bits", 4) in codes, codes
    assert "bad.policy:3" in str(e.value)
    first = e.value.diagnostics[0]
    assert str(first).startswith("error[") and "bad.policy:3:" in str(first)
    # The human form has the source line and a caret under the span.
    assert "allow domian github.com" in str(first) and "^" in str(first)
    assert gatehouse.check([("ok.policy", "policy p {\n  network off\n}\n")]) == []
    with pytest.raises(KeyError):
        shipped()["no-such-policy"]
    # The error names the set's policies, and the closest one (issue 37).
    with pytest.raises(KeyError) as missing:
        shipped()["coding-agnet"]
    said = str(missing.value)
    assert "no policy 'coding-agnet'" in said and "coding-agent, " in said, said
    assert "did you mean 'coding-agent'?" in said, said


def test_fmt_and_artifacts() -> None:
    assert gatehouse.fmt("policy p {network off}") == "policy p {\n  network off\n}\n"
    with pytest.raises(gatehouse.PolicyError):
        gatehouse.fmt("policy p {")
    s = shipped()
    back = gatehouse.PolicySet.from_artifact(s.to_artifact())
    assert back.revision == s.revision and back.names == s.names
    broken = bytearray(s.to_artifact())
    broken[-1] ^= 1
    with pytest.raises(gatehouse.PolicyError):
        gatehouse.PolicySet.from_artifact(bytes(broken))


def test_the_store_keeps_the_old_set_and_serves_threads() -> None:
    allow = "policy p {\n  network {\n    allow domain github.com\n  }\n}\n"
    deny = "policy p {\n  network off\n}\n"
    store = gatehouse.PolicyStore(gatehouse.PolicySet.from_source("p.policy", allow))
    with pytest.raises(gatehouse.PolicyError):
        store.update([("p.policy", "policy p {")])
    assert store.load()["p"].connect("github.com", 443).allowed
    seen: List[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(store.load()["p"].connect("github.com", 443).reason)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(50):
        store.update([("p.policy", deny if i % 2 else allow)])
    stop.set()
    for t in threads:
        t.join()
    assert set(seen) <= {"allowed_by_rule", "network_off"} and seen
