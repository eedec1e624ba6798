"""The shell around the span trees: OpenTelemetry SDK spans, exported over OTLP/HTTP.

Only this module imports OpenTelemetry (the `otel` extra). The spans are made as the SDK's
`ReadableSpan` with the trees' own ids and times, never started and ended on a tracer, which
would stamp them with its clock and random ids. The exporter is the SDK's OTLP/HTTP (protobuf)
one, configured by the standard `OTEL_EXPORTER_OTLP_*` variables; the resource by
`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (service.name defaults to `terminus`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from terminus.service import TerminusError
from terminus.service.traces.spans import Attributes, Span, TurnTrace
from terminus.service.traces.vocabulary import SCHEMA_URL

try:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise TerminusError(
        f"traces need the otel extra: pip install 'terminus[otel]' ({missing})"
    ) from None

MS: Final = 1_000_000  # ns
KINDS: Final = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
SCOPE: Final = InstrumentationScope("terminus", schema_url=SCHEMA_URL)


class ExportFailed(TerminusError):
    """The exporter refused or could not deliver a batch of spans."""


def resource() -> Resource:
    """The resource of every exported span: the OTEL_* variables', named `terminus` unless
    OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it."""
    found = Resource.create(schema_url=SCHEMA_URL)
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "terminus"}, SCHEMA_URL))
    return found


def otlp_exporter() -> SpanExporter:
    """The OTLP/HTTP protobuf exporter, configured from the environment."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def readable(span: Span, where: Resource) -> ReadableSpan:
    """The SDK span of one span of a tree, with its own ids and the log's times."""
    flags = TraceFlags(TraceFlags.SAMPLED if span.sampled else TraceFlags.DEFAULT)
    context = SpanContext(int(span.trace_id, 16), int(span.span_id, 16), False, flags)
    parent = None
    if span.parent_id is not None:
        parent = SpanContext(
            int(span.trace_id, 16), int(span.parent_id, 16), span.parent_remote, flags
        )
    events = [Event(e.name, _frozen(e.attributes), e.at_ms * MS) for e in span.events]
    status = Status(StatusCode.ERROR, span.error) if span.error is not None else Status()
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=where,
        attributes=_frozen(span.attributes),
        events=events,
        kind=KINDS[span.kind],
        status=status,
        start_time=span.start_ms * MS,
        end_time=span.end_ms * MS,
        instrumentation_scope=SCOPE,
    )


def _frozen(attributes: Attributes) -> dict[str, str | int | bool | tuple[str, ...]]:
    """Attributes as the SDK keeps a started span's: sequences are tuples."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attributes.items()}


def export(traces: Iterable[TurnTrace], exporter: SpanExporter, where: Resource) -> int:
    """Hand every span of `traces` to `exporter` in one batch; how many spans it took.
    Raises `ExportFailed` if the exporter says it failed."""
    spans = [readable(span, where) for trace in traces for span in trace.spans]
    if not spans:
        return 0
    if exporter.export(spans) is not SpanExportResult.SUCCESS:
        raise ExportFailed(f"the span exporter failed to export {len(spans)} spans")
    return len(spans)
