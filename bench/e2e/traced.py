"""The cost of exporting spans (docs/traces.md): the 1-worker drain without and with a
`terminus traces` follower beside the worker, in one run, alternating.

The follower exports over OTLP/HTTP (protobuf) to a receiver in this process that decodes each
request with the official `opentelemetry-proto` classes, counts its spans, answers 200 and keeps
nothing: a backend that costs nothing, so what is measured is the follower's own work (reading
and folding the log, building and encoding the spans) next to the worker's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from bench.e2e.phases import Run, drain_phase
from terminus.events.inbound import InboundEvent

PLAIN, TRACED = "e2e_events_per_s_1w", "e2e_events_per_s_traces"


class Receiver(ThreadingHTTPServer):
    """Accepts OTLP/HTTP trace exports on a free port of 127.0.0.1 and counts their spans."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans = self.requests = 0
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def count(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        with self.lock:  # a ThreadingHTTPServer answers each request on a thread of its own
            self.spans, self.requests = self.spans + spans, self.requests + 1


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = 200 if self.path == "/v1/traces" else 404
        if status == 200:
            self.server.count(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving until the block ends."""
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def traces_phase(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    """The 1-worker drain plain, then with the follower, `--repeat` times, alternating so that
    a machine whose speed drifts slows both alike; the best of each and their ratio."""
    plain: list[dict[str, Any]] = []
    traced: list[dict[str, Any]] = []
    with receiving() as receiver:
        for _ in range(run.args.repeat):
            plain.append(await drain_phase(run, events, 1))
            traced.append(await drain_phase(run, events, 1, traces=receiver.endpoint))
    report = _best(plain, PLAIN) | _best(traced, TRACED)
    report["traces_drain_ratio"] = report[TRACED] / report[PLAIN]
    report["traces_spans_received"] = receiver.spans
    report["traces_export_requests"] = receiver.requests
    return report


def _best(reports: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The report with the highest `key`, with every run's `key` under `<key>_runs`."""
    best = max(reports, key=lambda r: float(r[key]))
    return best | {f"{key}_runs": [r[key] for r in reports]}
