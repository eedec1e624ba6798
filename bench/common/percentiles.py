"""Latency percentiles of the benchmarks, in milliseconds (the end-to-end and the fan-out)."""

from __future__ import annotations

from collections.abc import Sequence


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99, p99.9 and max in milliseconds (nearest rank); NaN when nothing was measured."""
    ordered = sorted(seconds)
    if not ordered:
        return dict.fromkeys(("p50", "p99", "p999", "max"), float("nan"))

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50": rank(0.5), "p99": rank(0.99), "p999": rank(0.999), "max": ordered[-1] * 1000}


def p99_by_second(latencies: Sequence[float], offsets: Sequence[float]) -> list[float]:
    """The p99 (ms) of the events sent in each whole second of the run: is the tail steady?"""
    seconds: dict[int, list[float]] = {}
    for latency, offset in zip(latencies, offsets, strict=True):
        seconds.setdefault(int(offset), []).append(latency)
    return [percentiles(seconds[s])["p99"] for s in sorted(seconds)]
