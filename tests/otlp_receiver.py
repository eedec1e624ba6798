"""A local OTLP/HTTP trace receiver for the tests of `terminus traces`: each POST body is decoded
with the official protobuf classes (`opentelemetry-proto`) as an `ExportTraceServiceRequest`."""

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


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: each POST body decoded as an `ExportTraceServiceRequest`."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[Span]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        assert self.headers["Content-Type"] == "application/x-protobuf"
        self.server.paths.append(self.path)
        self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def running_receiver() -> Iterator[Receiver]:
    """A receiver serving on a free port of 127.0.0.1 until the block ends."""
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
