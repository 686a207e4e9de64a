#!/usr/bin/env python3
"""A real OTLP receiver for gatehouse's telemetry tests.

It decodes with the official protocol definitions (PyPI `opentelemetry-proto`)
and serves OTLP/gRPC with `grpcio` and OTLP/HTTP (protobuf) with the standard
library's HTTP server. Every log record and every metric data point it gets
is written as one JSON line to OUT:

  {"signal": "log", "transport": "grpc"|"http", "resource": {...},
   "event_name": ..., "body": ..., "attributes": {...},
   "headers": {the request's x-* headers or gRPC metadata}}
  {"signal": "span", "transport": ..., "resource": {...}, "name": ..., "kind": N,
   "status": N, "start": NS, "end": NS, "trace_id": HEX, "attributes": {...}}
  {"signal": "metric", "transport": ..., "resource": {...}, "name": ...,
   "kind": "sum"|"histogram"|"gauge", "value": N, "count": N, "attributes": {...}}

Usage: receiver.py --grpc PORT --http PORT --out FILE [--hang SECONDS] [--count-only] [--no-traces] [--discard]
With --discard (gRPC only) every export is answered without being decoded:
a collector whose CPU is not on this machine, as far as a load run can make
one (`GET /count` then says {"logs": 0, "bytes": N}).
With --no-traces it has no trace service (gRPC: UNIMPLEMENTED; HTTP: 404),
as a collector without a traces pipeline.
With --hang every export waits that long before it is answered (a collector
that hangs). With --count-only log records are decoded and counted, not
written (load runs), and `GET /count` on the HTTP port answers
{"logs": N}. Listens on 127.0.0.1 only.
"""

import argparse
import base64
import json
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

LOCK = threading.Lock()
ARGS = None
COUNT = 0
BYTES = 0


def value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def write(rows):
    with LOCK, open(ARGS.out, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def logs(req, transport, headers=None):
    global COUNT
    if ARGS.count_only:
        n = sum(len(sl.log_records) for rl in req.resource_logs for sl in rl.scope_logs)
        with LOCK:
            COUNT += n
        return
    rows = []
    for rl in req.resource_logs:
        res = attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                rows.append({
                    "signal": "log", "transport": transport, "resource": res,
                    "scope": sl.scope.name, "event_name": r.event_name,
                    "body": value(r.body), "attributes": attrs(r.attributes),
                    "time_unix_nano": r.time_unix_nano,
                    "trace_id": r.trace_id.hex(), "span_id": r.span_id.hex(),
                    "headers": headers or {},
                })
    write(rows)


def metrics(req, transport):
    if ARGS.count_only:
        return
    rows = []
    for rm in req.resource_metrics:
        res = attrs(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                for p in getattr(m, kind).data_points:
                    row = {"signal": "metric", "transport": transport, "resource": res,
                           "name": m.name, "kind": kind, "attributes": attrs(p.attributes)}
                    if kind == "histogram":
                        row["count"] = p.count
                        row["sum"] = p.sum
                    else:
                        row["value"] = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                    rows.append(row)
    write(rows)


def traces(req, transport):
    if ARGS.count_only:
        return
    rows = []
    for rs in req.resource_spans:
        res = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                rows.append({
                    "signal": "span", "transport": transport, "resource": res,
                    "name": s.name, "kind": s.kind, "status": s.status.code,
                    "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                    "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                    "parent": s.parent_span_id.hex(),
                    "attributes": attrs(s.attributes),
                })
    write(rows)


def hang():
    if ARGS.hang:
        time.sleep(ARGS.hang)


class Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request, context):
        hang()
        meta = {k: v for k, v in context.invocation_metadata() if k.startswith("x-")}
        logs(request, "grpc", meta)
        return logs_service_pb2.ExportLogsServiceResponse()


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request, context):
        hang()
        metrics(request, "grpc")
        return metrics_service_pb2.ExportMetricsServiceResponse()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        hang()
        traces(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


def parse(body, msg, content_type):
    """OTLP/HTTP's two encodings: protobuf, or OTLP/JSON (protobuf's JSON
    mapping, except that trace and span ids are hex, not base64)."""
    if not content_type.startswith("application/json"):
        msg.ParseFromString(body)
        return "http"
    data = json.loads(body)

    def ids(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                    o[k] = base64.b64encode(bytes.fromhex(v)).decode()
                else:
                    ids(v)
        elif isinstance(o, list):
            for x in o:
                ids(x)
    ids(data)
    json_format.ParseDict(data, msg)
    return "http/json"


class Http(BaseHTTPRequestHandler):
    def do_GET(self):
        out = json.dumps({"logs": COUNT, "bytes": BYTES}).encode()
        self.send_response(200 if self.path == "/count" else 404)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        hang()
        ctype = self.headers.get("content-type", "")
        if self.path == "/v1/logs":
            req = logs_service_pb2.ExportLogsServiceRequest()
            how = parse(body, req, ctype)
            logs(req, how, {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-")})
            resp = logs_service_pb2.ExportLogsServiceResponse()
        elif self.path == "/v1/metrics":
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            metrics(req, parse(body, req, ctype))
            resp = metrics_service_pb2.ExportMetricsServiceResponse()
        elif self.path == "/v1/traces" and not ARGS.no_traces:
            req = trace_service_pb2.ExportTraceServiceRequest()
            traces(req, parse(body, req, ctype))
            resp = trace_service_pb2.ExportTraceServiceResponse()
        else:
            self.send_response(404)
            self.end_headers()
            return
        out = resp.SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--grpc", type=int, required=True)
    p.add_argument("--http", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--hang", type=float, default=0)
    p.add_argument("--count-only", action="store_true")
    p.add_argument("--no-traces", action="store_true")
    p.add_argument("--discard", action="store_true")
    ARGS = p.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    if ARGS.discard:
        def took(request, context):
            global BYTES
            with LOCK:
                BYTES += len(request)
            return b""
        for svc in ("logs.v1.LogsService", "metrics.v1.MetricsService", "trace.v1.TraceService"):
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
                f"opentelemetry.proto.collector.{svc}",
                {"Export": grpc.unary_unary_rpc_method_handler(took)}),))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    if not ARGS.no_traces:
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    server.add_insecure_port(f"127.0.0.1:{ARGS.grpc}")
    server.start()
    http = ThreadingHTTPServer(("127.0.0.1", ARGS.http), Http)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    print("ready", flush=True)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
