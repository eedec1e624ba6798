"""A local OTLP/HTTP trace receiver: each POST to /v1/traces is decoded with the official
protobuf classes (`opentelemetry-proto`) as an `ExportTraceServiceRequest` and answered 200.

The tests of `terminus traces` keep every request to look at its spans; the bench (bench.e2e
--traces) only counts them, so that a long drain's export costs the receiver no memory."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

__all__ = ["Receiver", "running_receiver"]

PROTOBUF = "application/x-protobuf"


class Receiver(ThreadingHTTPServer):
    """Serves on a free port of 127.0.0.1; `keep` keeps each decoded request in `requests`."""

    def __init__(self, keep: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.keep = keep
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.span_count = self.request_count = 0
        self.lock = threading.Lock()  # a ThreadingHTTPServer answers each request on its own thread

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[Span]:
        with self.lock:
            requests = list(self.requests)
        return [
            span
            for request in requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def take(self, path: str, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with self.lock:
            self.paths.append(path)
            self.span_count += spans
            self.request_count += 1
            if self.keep:
                self.requests.append(request)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        # Anything but a protobuf export to /v1/traces is refused, so an exporter that sends
        # something else loses its spans, and a test counting them fails.
        if self.path != "/v1/traces":
            status = 404
        elif self.headers["Content-Type"] != PROTOBUF:
            status = 415
        else:
            status = 200
            self.server.take(self.path, body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(status)
        self.send_header("Content-Type", PROTOBUF)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def running_receiver(keep: bool = True) -> Iterator[Receiver]:
    """A receiver serving until the block ends."""
    server = Receiver(keep)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
