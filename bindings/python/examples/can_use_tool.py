"""A tool-permission hook for an agent harness, decided by gatehouse.

Harnesses call a function of the shape ``can_use_tool(tool_name, input)``
before each tool call and expect ``"allow"``, ``"deny"`` or ``"ask"``. This
one maps the common tools to gatehouse queries:

* ``Bash`` (``{"command": "..."}``): ``exec bash -c COMMAND``; gatehouse
  looks inside the script, so ``cd x && git push`` is judged by ``git push``.
* ``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit`` (``file_path``): a
  write, relative paths taken from the workspace.
* ``WebFetch`` (``url``): a connection to the URL's host and port.
* ``mcp__SERVER__TOOL``: an MCP call, with the tool's annotations when the
  harness knows them.

Anything else is asked, and a decision that needs a person or the reviewer
(``ask``, ``review``) is ``"ask"``: the hook never widens what the policy
says.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Literal, Mapping, Optional
from urllib.parse import urlsplit

import gatehouse

Verdict = Literal["allow", "deny", "ask"]
Hints = Mapping[str, Mapping[str, bool]]

_WRITES = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def verdict(d: gatehouse.Decision) -> Verdict:
    """A decision as the harness's three answers."""
    if d.outcome == "allow":
        return "allow"
    if d.outcome in ("ask", "review"):
        return "ask"
    return "deny"


def make_can_use_tool(
    policy: gatehouse.Policy,
    workspace: str,
    mcp_hints: Optional[Hints] = None,
) -> Callable[[str, Mapping[str, Any]], Verdict]:
    """A ``can_use_tool`` callback deciding with ``policy`` for an agent
    working in ``workspace``. ``mcp_hints`` maps ``"server/tool"`` to that
    tool's annotations (``destructive``, ``read_only``, ``open_world``)."""
    hints: Dict[str, Mapping[str, bool]] = dict(mcp_hints or {})

    def can_use_tool(tool_name: str, tool_input: Mapping[str, Any]) -> Verdict:
        if tool_name == "Bash":
            command = tool_input.get("command")
            if not isinstance(command, str):
                return "deny"
            return verdict(policy.exec(["bash", "-c", command]))
        if tool_name in _WRITES:
            path = tool_input.get("file_path") or tool_input.get("notebook_path")
            if not isinstance(path, str) or not path:
                return "deny"
            full = path if os.path.isabs(path) else os.path.join(workspace, path)
            return verdict(policy.write(full, workspace))
        if tool_name == "WebFetch":
            url = tool_input.get("url")
            if not isinstance(url, str):
                return "deny"
            try:
                parts = urlsplit(url)
                port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
            except ValueError:
                return "deny"
            if not parts.hostname or port is None:
                return "deny"
            via = "http" if parts.scheme == "http" else "https"
            return verdict(policy.connect(parts.hostname, port, via=via))
        if tool_name.startswith("mcp__"):
            server, _, tool = tool_name[len("mcp__"):].partition("__")
            if not server or not tool:
                return "deny"
            h = hints.get(f"{server}/{tool}", {})
            return verdict(
                policy.mcp(
                    server,
                    tool,
                    destructive=h.get("destructive"),
                    read_only=h.get("read_only"),
                    open_world=h.get("open_world"),
                )
            )
        # Read-only tools of the harness itself decide nothing here.
        if tool_name in ("Read", "Glob", "Grep", "LS"):
            return "allow"
        return "ask"

    return can_use_tool
