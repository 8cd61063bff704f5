#!/usr/bin/env python3
"""An OTLP/HTTP metrics receiver: the independent reader of `curlew bench --otlp` in the tests.

Usage: otlp_receiver.py {fd0} EXPORTS_FILE [--status CODE]

HTTP/1.1 on the listening descriptor the supervisor bound on 127.0.0.1. Each POST is decoded with the OpenTelemetry
project's own protobuf classes (PyPI `opentelemetry-proto`): an `ExportMetricsServiceRequest`, gzip-compressed or
not. One JSON line per export is appended to EXPORTS_FILE:

    {"path": "/v1/metrics", "resource": {"service.name": "curlew-bench", ...},
     "points": [{"name": ..., "kind": "sum|gauge|histogram", "attributes": {...}, "monotonic": true,
                 "temporality": "cumulative", "value": N}                       # sum and gauge
                {..., "count": N, "sum": S, "bounds": [...], "counts": [...]}]}  # histogram

with the request's Content-Type and Authorization headers, and the export is answered 200 with an empty
`ExportMetricsServiceResponse`. A body that does not decode is answered 400 and logged as {"error": ...}.
--status CODE answers every export with CODE instead, logged as {"refused": CODE} (a collector that refuses).
"""

import gzip
import http.server
import json
import socket
import sys
import threading

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

TEMPORALITY = {
    metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE: "cumulative",
    metrics_pb2.AGGREGATION_TEMPORALITY_DELTA: "delta",
}


def attribute_value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(key_values):
    return {item.key: str(attribute_value(item.value)) for item in key_values}


def number(point):
    return point.as_int if point.WhichOneof("value") == "as_int" else point.as_double


def points(metric):
    kind = metric.WhichOneof("data")
    if kind == "sum":
        for point in metric.sum.data_points:
            yield {"name": metric.name, "kind": "sum", "unit": metric.unit, "attributes": attributes(point.attributes),
                   "monotonic": metric.sum.is_monotonic,
                   "temporality": TEMPORALITY.get(metric.sum.aggregation_temporality, "unspecified"),
                   "value": number(point)}
    elif kind == "gauge":
        for point in metric.gauge.data_points:
            yield {"name": metric.name, "kind": "gauge", "unit": metric.unit, "attributes": attributes(point.attributes),
                   "value": number(point)}
    elif kind == "histogram":
        for point in metric.histogram.data_points:
            yield {"name": metric.name, "kind": "histogram", "unit": metric.unit,
                   "attributes": attributes(point.attributes),
                   "temporality": TEMPORALITY.get(metric.histogram.aggregation_temporality, "unspecified"),
                   "count": point.count, "sum": point.sum, "bounds": list(point.explicit_bounds),
                   "counts": list(point.bucket_counts)}
    else:
        yield {"name": metric.name, "kind": kind or "none", "attributes": {}}


def make_handler(exports_path, status, lock):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def record(self, entry):
            with lock, open(exports_path, "a", encoding="utf-8") as exports:
                exports.write(json.dumps(entry) + "\n")

        def answer(self, code, body=b"", content_type="application/x-protobuf"):
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if status != 200:
                self.record({"path": self.path, "refused": status})
                self.answer(status, b"refused", "text/plain")
                return
            try:
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                request = metrics_service_pb2.ExportMetricsServiceRequest()
                request.ParseFromString(body)
            except Exception as error:  # noqa: BLE001 - any undecodable body is the client's fault
                self.record({"path": self.path, "error": repr(error)})
                self.answer(400, str(error).encode(), "text/plain")
                return
            for resource_metrics in request.resource_metrics:
                self.record({
                    "path": self.path,
                    "contentType": self.headers.get("Content-Type", ""),
                    "authorization": self.headers.get("Authorization"),
                    "resource": attributes(resource_metrics.resource.attributes),
                    "points": [point for scope in resource_metrics.scope_metrics for metric in scope.metrics
                               for point in points(metric)],
                })
            self.answer(200, metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString())

    return Handler


def main():
    fd, exports_path = sys.argv[1:3]
    status = int(sys.argv[sys.argv.index("--status") + 1]) if "--status" in sys.argv else 200
    listener = socket.socket(fileno=int(fd))
    server = http.server.ThreadingHTTPServer(
        listener.getsockname(), make_handler(exports_path, status, threading.Lock()), bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.serve_forever()


if __name__ == "__main__":
    main()
