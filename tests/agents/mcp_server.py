"""A small MCP server over stdio (JSON-RPC, one message a line) for the
harness tests: `list_things` (read-only) and `delete_all` (destructive).
Each call leaves a marker file `called-TOOL` in the folder given as the
first argument, so a test can tell from the disk whether a call ran."""

import json
import os
import sys

MARKS = sys.argv[1]

TOOLS = [
    {
        "name": "list_things",
        "description": "Lists the things.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "delete_all",
        "description": "Deletes every thing, for good.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"destructiveHint": True, "readOnlyHint": False},
    },
]


def reply(id_, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, id_ = msg.get("method"), msg.get("id")
    if id_ is None:
        continue  # a notification
    if method == "initialize":
        reply(id_, {
            "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "things", "version": "1.0.0"},
        })
    elif method == "tools/list":
        reply(id_, {"tools": TOOLS})
    elif method == "tools/call":
        name = msg.get("params", {}).get("name", "")
        with open(os.path.join(MARKS, f"called-{name}"), "w") as f:
            f.write("called\n")
        reply(id_, {"content": [{"type": "text", "text": f"{name}: done"}]})
    elif method == "ping":
        reply(id_, {})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
