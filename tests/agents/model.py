"""A scripted model server on loopback: a stand-in for the model only.

Codex talks to it through the Responses API (POST .../responses, SSE),
Claude Code through the Messages API (POST .../v1/messages, streaming).
Each session's first user message names a case (`gatehouse-case: NAME`);
the server answers turn N of that case (N tool results have come back)
with the case's Nth tool call, and once they are all made, with a short
text.
Every request is appended to a JSON-lines log, so a test can read what the
harness sent back to the model (a tool's output, a hook's refusal).
"""

import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CASE = re.compile(r"gatehouse-case: ([a-z0-9_]+)")


class Script:
    def __init__(self, cases, log):
        self.cases = cases  # name -> {"codex": {...}, "claude": {...}}
        self.log = log
        self.lock = threading.Lock()
        self.calls = 0
        self.schemas = False  # log each request's tool schemas (probing a new version)

    def record(self, entry):
        with self.lock:
            with open(self.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def next_id(self):
        with self.lock:
            self.calls += 1
            return self.calls


def texts(value):
    """Every string inside a JSON value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from texts(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from texts(v)


def find_case(messages):
    for t in texts(messages):
        m = CASE.search(t)
        if m:
            return m.group(1)
    return None


def step(cases, case, harness, turn):
    """The tool call of this turn of the case (a case is one call or a
    list of calls, one a turn), or None: answer with text."""
    calls = cases.get(case, {}).get(harness) if case else None
    if isinstance(calls, dict):
        calls = [calls]
    if not calls or turn >= len(calls):
        return None
    return calls[turn]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = None

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def sse(self, events):
        payload = b"".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def json_reply(self, obj, status=200):
        payload = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self.script.record({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            return self.json_reply({"data": [], "models": []})
        self.json_reply({})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        req = self.body()
        path = self.path.split("?")[0]
        if path.endswith("/responses"):
            return self.codex_turn(req)
        if path.endswith("/messages/count_tokens"):
            self.script.record({"path": path})
            return self.json_reply({"input_tokens": 10})
        if path.endswith("/messages"):
            return self.claude_turn(req)
        self.script.record({"path": path, "unknown": True})
        self.json_reply({"error": "not here"}, 404)

    # -- Codex: the Responses API ------------------------------------------
    def codex_turn(self, req):
        items = req.get("input") or []
        case = find_case(items)
        outputs = [i for i in items if isinstance(i, dict) and i.get("type", "").endswith("_output")]
        tools = [t.get("name") or t.get("type") for t in req.get("tools") or []]
        self.script.record(
            {"api": "responses", "case": case, "turn": len(outputs), "tools": tools, "input": items,
             "schemas": req.get("tools") if self.script.schemas else None}
        )
        rid = f"resp_{self.script.next_id()}"
        call = step(self.script.cases, case, "codex", len(outputs))
        if call:
            item = dict(call)
            item.setdefault("type", "function_call")
            item["call_id"] = f"call_{rid}"
            item["id"] = f"fc_{rid}"
            if item["type"] == "function_call" and not isinstance(item.get("arguments"), str):
                item["arguments"] = json.dumps(item["arguments"])
            if item["type"] == "custom_tool_call" and not isinstance(item.get("input"), str):
                item["input"] = json.dumps(item["input"])
        else:
            item = {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{rid}",
                "content": [{"type": "output_text", "text": f"done ({case})"}],
            }
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        self.sse([
            ("response.created", {"type": "response.created", "response": {"id": rid}}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}),
        ])

    # -- Claude Code: the Messages API -------------------------------------
    def claude_turn(self, req):
        msgs = req.get("messages") or []
        case = find_case(msgs)
        results = [
            b for m in msgs if isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        tools = [t.get("name") for t in req.get("tools") or []]
        self.script.record(
            {"api": "messages", "case": case, "turn": len(results), "tools": tools, "messages": msgs,
             "schemas": req.get("tools") if self.script.schemas else None}
        )
        mid = f"msg_{self.script.next_id()}"
        call = step(self.script.cases, case, "claude", len(results)) if tools else None
        usage = {"input_tokens": 10, "output_tokens": 5}
        start = {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": req.get("model", "m"),
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}
        if call:
            block = {"type": "tool_use", "id": f"toolu_{mid}", "name": call["name"], "input": {}}
            events = [
                ("message_start", start),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(call["input"])}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
                ("message_stop", {"type": "message_stop"}),
            ]
        else:
            text = f"done ({case})"
            events = [
                ("message_start", start),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
                ("message_stop", {"type": "message_stop"}),
            ]
        if req.get("stream"):
            self.sse(events)
        else:
            content = [events[1][1]["content_block"]]
            if content[0]["type"] == "text":
                content[0]["text"] = f"done ({case})"
            else:
                content[0]["input"] = call["input"]
            self.json_reply({"id": mid, "type": "message", "role": "assistant", "model": req.get("model", "m"),
                             "content": content, "stop_reason": events[-2][1]["delta"]["stop_reason"],
                             "stop_sequence": None, "usage": usage})


def serve(cases, log, port=0):
    """Starts the server on 127.0.0.1 in a thread; returns it."""
    Handler.script = Script(cases, log)
    Handler.script.schemas = bool(os.environ.get("MODEL_LOG_SCHEMAS"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    cases = json.load(open(sys.argv[1]))
    s = serve(cases, sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    print(s.server_address[1], flush=True)
    threading.Event().wait()
