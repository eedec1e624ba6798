"""The soak's time series: per second of the run, events published, frames seen, turns ended and
the latency of each frame (publish acknowledged to frame read by a subscriber), with the faults
injected and the samples of Redis memory. One JSON file holds it all for the plot."""

from __future__ import annotations

import math
import time
from array import array
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec


class Fault(msgspec.Struct, kw_only=True):
    """One injected fault: its kind, start and end in seconds since the run began, details."""

    kind: str
    start_s: float
    end_s: float
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


class MemorySample(msgspec.Struct, frozen=True, kw_only=True):
    """Redis at one moment: `used_memory`, what the dead streams hold (kept by design), keys."""

    t_s: float
    used_memory: int
    dead_bytes: int
    keys: int

    @property
    def net(self) -> int:
        """Memory without the dead letters, which grow with the malformed entries injected."""
        return self.used_memory - self.dead_bytes


class Second(msgspec.Struct, frozen=True, kw_only=True):
    """One second of the run."""

    t_s: int
    published: int
    frames: int
    turns_ended: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile `q` (0-100), None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class Series:
    """Counters by whole second since `t0` (time.perf_counter), latencies kept per second."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.published: dict[int, int] = defaultdict(int)
        self.frames: dict[int, int] = defaultdict(int)
        self.turns_ended: dict[int, int] = defaultdict(int)
        self.latencies: dict[int, array[float]] = defaultdict(lambda: array("d"))
        self.faults: list[Fault] = []
        self.memory: list[MemorySample] = []

    def now(self) -> float:
        """Seconds since the run began."""
        return time.perf_counter() - self.t0

    def second(self, t: float) -> int:
        """The whole second of the run that perf_counter time `t` falls in."""
        return int(t - self.t0)

    def add_published(self, count: int, t: float) -> None:
        """`count` events acknowledged at `t`."""
        self.published[self.second(t)] += count

    def add_frame(self, t: float, latency_s: float | None, turn_end: bool) -> None:
        """A frame read at `t`, with its latency when known."""
        second = self.second(t)
        self.frames[second] += 1
        if latency_s is not None:
            self.latencies[second].append(latency_s * 1000)
        if turn_end:
            self.turns_ended[second] += 1

    def seconds(self) -> list[Second]:
        """Every second from the first to the last with anything in it."""
        last = max([*self.published, *self.frames, 0])
        return [self._row(s) for s in range(last + 1)]

    def _row(self, s: int) -> Second:
        lat = self.latencies.get(s, array("d"))
        return Second(
            t_s=s,
            published=self.published.get(s, 0),
            frames=self.frames.get(s, 0),
            turns_ended=self.turns_ended.get(s, 0),
            p50_ms=_round(percentile(lat, 50)),
            p99_ms=_round(percentile(lat, 99)),
            max_ms=_round(max(lat, default=None)),
        )

    def all_latencies(self) -> list[float]:
        """Every frame latency of the run, in ms."""
        return [v for values in self.latencies.values() for v in values]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
