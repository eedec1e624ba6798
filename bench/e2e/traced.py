"""The cost of exporting spans (docs/traces.md): the 1-worker drain without and with a
`terminus traces` follower beside the worker, in one run, alternating.

The follower exports over OTLP/HTTP (protobuf) to a receiver in this process that decodes each
request with the official `opentelemetry-proto` classes, counts its spans, answers 200 and keeps
nothing: a backend that costs nothing, so what is measured is the follower's own work (reading
and folding the log, building and encoding the spans) next to the worker's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.common.otlp_receiver import running_receiver
from bench.e2e.phases import Run, drain_phase
from terminus.events.inbound import InboundEvent

PLAIN, TRACED = "e2e_events_per_s_1w", "e2e_events_per_s_traces"


async def traces_phase(run: Run, events: Sequence[InboundEvent]) -> dict[str, Any]:
    """The 1-worker drain plain, then with the follower, `--repeat` times, alternating so that
    a machine whose speed drifts slows both alike; the best of each and their ratio."""
    plain: list[dict[str, Any]] = []
    traced: list[dict[str, Any]] = []
    with running_receiver(keep=False) as receiver:
        for _ in range(run.args.repeat):
            plain.append(await drain_phase(run, events, 1))
            traced.append(await drain_phase(run, events, 1, traces=receiver.endpoint))
    report = _best(plain, PLAIN) | _best(traced, TRACED)
    report["traces_drain_ratio"] = report[TRACED] / report[PLAIN]
    report["traces_spans_received"] = receiver.span_count
    report["traces_export_requests"] = receiver.request_count
    return report


def _best(reports: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The report with the highest `key`, with every run's `key` under `<key>_runs`."""
    best = max(reports, key=lambda r: float(r[key]))
    return best | {f"{key}_runs": [r[key] for r in reports]}
