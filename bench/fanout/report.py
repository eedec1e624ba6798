"""The fan-out benchmark's figures, from what the readers received, and their checks.

The raw reader's frames are the truth of each session stream: every subscriber must have
received exactly its session's list of cursors, in order. Latencies are taken per delta frame
published after the warm-up: end to end (subscriber's receive - publish), baseline (raw reader's
receive - publish: the worker and Redis) and added by the gateway (subscriber's receive - raw
reader's receive of the same frame).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, NamedTuple

from bench.common.percentiles import p99_by_second, percentiles
from bench.fanout.wire import ReaderResult, Received


class Window(NamedTuple):
    """The monotonic times between which frames are counted and latencies kept."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _position(cursor: bytes) -> tuple[int, int]:
    ms, _, seq = cursor.partition(b"-")
    return int(ms), int(seq or 0)


def faults(got: Sequence[bytes], truth: Sequence[bytes]) -> dict[str, int]:
    """Frames lost, duplicated, out of order and unknown of one subscriber against the truth."""
    if list(got) == list(truth):
        return {"lost": 0, "duplicates": 0, "out_of_order": 0, "unknown": 0}
    seen, known = set(got), set(truth)
    positions = [_position(c) for c in got]
    return {
        "lost": len(known - seen),
        "duplicates": len(got) - len(seen),
        "out_of_order": sum(b <= a for a, b in pairwise(positions)),
        "unknown": len(seen - known),
    }


def checks(
    base: ReaderResult, clients: Sequence[ReaderResult], counts: Sequence[int]
) -> dict[str, Any]:
    """Totals of `faults` over every subscriber; the raw reader's own shortfall against XLEN."""
    totals = {"lost": 0, "duplicates": 0, "out_of_order": 0, "unknown": 0}
    errors = [r.error for c in clients for r in c.received if r.error]
    for client in clients:
        for got in client.received:
            for name, n in faults(got.cursors, base.received[got.session].cursors).items():
                totals[name] += n
    shortfall = sum(max(0, n - len(r.cursors)) for n, r in zip(counts, base.received, strict=True))
    return {
        **{f"frames_{k}": v for k, v in totals.items()},
        "subscriber_errors": len(errors),
        "first_subscriber_error": errors[0] if errors else None,
        "baseline_frames_missing": shortfall,
        "readers_complete": base.complete and all(c.complete for c in clients),
        "exactly_once_in_order": not any(totals.values()) and not errors and not shortfall,
    }


class Latencies:
    """Seconds per delta frame after the warm-up, and when each one was published."""

    def __init__(self) -> None:
        self.e2e: list[float] = []
        self.added: list[float] = []
        self.added_offsets: list[float] = []
        self.baseline: list[float] = []

    def collect(self, base: ReaderResult, clients: Sequence[ReaderResult], window: Window) -> None:
        tables: list[dict[bytes, tuple[float, float]]] = []
        for stream in base.received:
            seen_at = zip(stream.published, stream.times, strict=True)
            tables.append(dict(zip(stream.cursors, seen_at, strict=True)))
            for published, seen in zip(stream.published, stream.times, strict=True):
                if published >= window.start:  # NaN compares false: not a delta
                    self.baseline.append(seen - published)
        for client in clients:
            for got in client.received:
                self._subscriber(got, tables[got.session], window.start)

    def _subscriber(
        self, got: Received, table: Mapping[bytes, tuple[float, float]], start: float
    ) -> None:
        for cursor, now in zip(got.cursors, got.times, strict=True):
            published, seen = table.get(cursor, (math.nan, math.nan))
            if published >= start:
                self.e2e.append(now - published)
                self.added.append(now - seen)
                self.added_offsets.append(published - start)


def rates(base: ReaderResult, clients: Sequence[ReaderResult], window: Window) -> dict[str, float]:
    """Frames/s received within the window, by the subscribers and by the raw reader."""

    def within(received: Sequence[Received]) -> int:
        return sum(window.start <= t <= window.end for r in received for t in r.times)

    delivered = sum(within(c.received) for c in clients)
    return {
        "frames_per_s": delivered / window.seconds,
        "baseline_frames_per_s": within(base.received) / window.seconds,
    }


def latency_report(lat: Latencies) -> dict[str, Any]:
    report: dict[str, Any] = {"latency_samples": len(lat.added)}
    for name, values in (("e2e", lat.e2e), ("baseline", lat.baseline), ("added", lat.added)):
        report.update({f"{name}_{k}_ms": v for k, v in percentiles(values).items()})
    report["p99_ms"] = report["added_p99_ms"]
    report["added_p99_by_second_ms"] = p99_by_second(lat.added, lat.added_offsets)
    return report


def cpu_report(used: Mapping[str, float | None], seconds: float, frames: int) -> dict[str, Any]:
    """Cores busy per component over the measured span, and the gateway's and the subscribers'
    CPU microseconds per frame delivered."""
    report: dict[str, Any] = {f"cpu_cores_{k}": _ratio(v, seconds) for k, v in used.items()}
    for name in ("gateway", "clients"):
        report[f"{name}_cpu_us_per_frame"] = _ratio(used.get(name), frames / 1e6)
    return report


def _ratio(value: float | None, by: float) -> float | None:
    return None if value is None or not by else value / by


def table(report: Mapping[str, Any]) -> str:
    r = report
    lines = [
        f"fan-out: {r['subscribers']} SSE subscribers over {r['sessions']} sessions, "
        f"{r['rate_events_per_s']:,.0f} events/s offered ({r['achieved_events_per_s']:,.0f} "
        f"achieved) for {r['seconds']:.0f} s, {r['redis']}",
        f"delivered {r['frames_per_s']:,.0f} frames/s; raw reader {r['baseline_frames_per_s']:,.0f}"
        f" frames/s; ratio to raw x fan-out {r['ratio_to_baseline']:.3f}",
        "latency ms                       p50      p99    p99.9      max",
    ]
    for label, key in (
        ("end to end (publish -> SSE)", "e2e"),
        ("baseline (publish -> raw XREAD)", "baseline"),
        ("added by the gateway", "added"),
    ):
        cells = [r[f"{key}_{q}_ms"] for q in ("p50", "p99", "p999", "max")]
        lines.append(f"{label:31}" + "".join(f"{c:9.1f}" for c in cells))
    met = "met" if r["p99_target_met"] else "NOT met"
    lines.append(f"target: p99 added <= {r['target_p99_ms']:.0f} ms: {met}")
    cores = ", ".join(f"{k[10:]} {v:.2f}" for k, v in r.items() if k.startswith("cpu_cores_") and v)
    lines.append(f"CPU cores: {cores}")
    gateway_us, clients_us = r["gateway_cpu_us_per_frame"] or 0, r["clients_cpu_us_per_frame"] or 0
    lines.append(f"gateway {gateway_us:.1f} µs/frame, clients {clients_us:.1f} µs/frame")
    lines.append(
        f"checks: lost {r['frames_lost']}, duplicates {r['frames_duplicates']}, out of order "
        f"{r['frames_out_of_order']}, unknown {r['frames_unknown']}, subscriber errors "
        f"{r['subscriber_errors']}, dead letters {r['dead_letters']}"
    )
    return "\n".join(lines)
