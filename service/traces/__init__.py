"""Traces: a turn's story as OpenTelemetry spans (issue 36, DESIGN section 7).

The order of work, and why: each partition's log is read as replay reads it (`logs.py`, which
keeps a follower's position in Redis, `marks.py`) and folded through the core (`records.py`),
turn by turn, into what each event did (its transitions and frames) at the log's own time, the
ms of its entry id; once a turn is final, a pure projection (`attempts.py` gathers the facts,
`project.py` makes the spans) turns those records into a span tree of plain structs
(`spans.py`, names in `vocabulary.py`), with ids derived from the turn (`ids.py`) or from the
W3C `traceparent` its producer propagated. Only then does the shell (`otel.py`, the optional
`otel` extra) make OpenTelemetry SDK spans of them and export them over OTLP/HTTP.

Why from the log and not from the workers' clocks: the same log must give the same tree, byte
for byte, whether it is exported by `terminus traces` now or replayed next year, like every
other projection (invariant 4). Nothing here adds state that replay could not rebuild.
"""
