#!/usr/bin/env python3
"""What a collector pays to decode gatehouse's decision records, with the
official protocol definitions (PyPI `opentelemetry-proto`, protobuf's upb
backend): one ExportLogsServiceRequest of 2 048 records shaped as the
proxy's `connect` decisions (body, eleven attributes, trace and span ids),
parsed 50 times, its records counted as the load receiver counts them.
Prints the bytes a record takes and the microseconds a record costs.

Usage: target/otel-venv/bin/python egress/load/otlp_parse_cost.py
(the venv egress/load/otel.sh makes). BENCHMARKS.md quotes it.
"""

import time

from google.protobuf.internal import api_implementation
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

N, ROUNDS = 2048, 50
req = logs_service_pb2.ExportLogsServiceRequest()
rl = req.resource_logs.add()
for k, v in [("service.name", "gatehouse-egress"), ("service.version", "0.1.0")]:
    a = rl.resource.attributes.add()
    a.key, a.value.string_value = k, v
sl = rl.scope_logs.add()
sl.scope.name = "gatehouse"
for i in range(N):
    r = sl.log_records.add()
    r.time_unix_nano = 1_700_000_000_000_000_000 + i
    r.severity_number, r.severity_text = 9, "INFO"
    r.body.string_value = "allow connect allowed.test:8080: allowed_by_rule"
    for k, v in [("gatehouse.policy", "load"), ("gatehouse.revision", "sha256:0123456789ab"),
                 ("gatehouse.decision", "allow"), ("gatehouse.reason", "allowed_by_rule"),
                 ("gatehouse.query.kind", "connect"), ("gatehouse.rule", "load.policy:5:5"),
                 ("server.address", "allowed.test"), ("network.transport", "tcp"),
                 ("gatehouse.via", "http")]:
        a = r.attributes.add()
        a.key, a.value.string_value = k, v
    a = r.attributes.add()
    a.key, a.value.int_value = "server.port", 8080
    r.trace_id, r.span_id = bytes(range(16)), bytes(range(8))
    r.event_name = "gatehouse.decision"
body = req.SerializeToString()
start, n = time.perf_counter(), 0
for _ in range(ROUNDS):
    m = logs_service_pb2.ExportLogsServiceRequest()
    m.ParseFromString(body)
    n += sum(len(s.log_records) for r in m.resource_logs for s in r.scope_logs)
spent = time.perf_counter() - start
print(f"protobuf backend: {api_implementation.Type()}")
print(f"{len(body) / N:.0f} bytes a record; {spent / n * 1e6:.2f} µs a record to parse and count")
