"""One worker process's own metrics: its commit latencies, lease changes and lanes.

They describe the process rather than the log, so they are kept in memory and written, whole,
to `worker_metrics_key(worker_id)` at every tick of the worker, with a TTL of a few ticks: the
gateway reads the live workers' hashes, and a dead worker's hash expires with it. Values are
totals since the process started (Prometheus counters); fields are encoded as the domain
counters' are (service/metrics/counters.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from redis.asyncio import Redis

from terminus.service.keys import DEFAULT_PREFIX, worker_metrics_key
from terminus.service.metrics.counters import field_of, key_of
from terminus.service.redis.connect import execute

# Upper bounds (seconds) of the commit latency buckets; one more bucket, +Inf, follows.
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

COMMIT_BUCKET: Final = "commit_seconds_bucket"
COMMIT_SUM: Final = "commit_seconds_sum"
LEASE_CHANGES: Final = "lease_changes"
LANES: Final = "lanes"
LANE_CHANGES: Final = "lane_changes"


@dataclass
class WorkerMetrics:
    """Totals since the process started; `buckets[i]` counts latencies in (BUCKETS[i-1],
    BUCKETS[i]], the last one those above every bound."""

    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    seconds: float = 0.0
    leases: dict[str, int] = field(default_factory=dict)
    lanes: int = 1  # lanes in use when stored (service/runtime/lanes.py)
    lane_changes: dict[str, int] = field(default_factory=dict)  # "grew" / "shrank" -> count

    @property
    def commits(self) -> int:
        return sum(self.buckets)

    def observe_commit(self, seconds: float) -> None:
        self.buckets[bisect_left(BUCKETS, seconds)] += 1
        self.seconds += seconds

    def lease_changed(self, kind: str) -> None:
        """`kind`: acquired, lost (renewal refused, or a fenced script found it gone), rotated
        (a new epoch after a connection error) or released."""
        self.leases[kind] = self.leases.get(kind, 0) + 1

    def lanes_changed(self, lanes: int) -> None:
        """The lanes in use are now `lanes`: more (grew) or fewer (shrank) than before."""
        kind = "grew" if lanes > self.lanes else "shrank"
        self.lane_changes[kind] = self.lane_changes.get(kind, 0) + 1
        self.lanes = lanes

    def fields(self) -> dict[str, str]:
        """The hash this process's metrics are stored as."""
        bounds = [*map(str, BUCKETS), "+Inf"]
        out = {
            field_of((COMMIT_BUCKET, "le", le)): str(n)
            for le, n in zip(bounds, self.buckets, strict=True)
        }
        out[field_of((COMMIT_SUM,))] = repr(self.seconds)
        for kind, n in self.leases.items():
            out[field_of((LEASE_CHANGES, "kind", kind))] = str(n)
        out[field_of((LANES,))] = str(self.lanes)
        for kind, n in self.lane_changes.items():
            out[field_of((LANE_CHANGES, "kind", kind))] = str(n)
        return out

    async def flush(
        self, redis: Redis, worker_id: str, ttl_ms: int, prefix: str = DEFAULT_PREFIX
    ) -> None:
        """Store the totals for `ttl_ms`; the set and the TTL in one MULTI, so no hash is
        ever left without an expiry."""
        key = worker_metrics_key(worker_id, prefix)
        async with redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=cast("Mapping[Any, Any]", self.fields()))
            pipe.pexpire(key, ttl_ms)
            await execute(pipe)


def parse(stored: Mapping[bytes, bytes]) -> WorkerMetrics:
    """A worker's metrics as `flush` stored them; fields this version cannot read are skipped."""
    metrics = WorkerMetrics()
    index = {str(le): n for n, le in enumerate(BUCKETS)}
    for raw, value in stored.items():
        key = key_of(raw)
        if key is None:
            continue
        if key[0] == COMMIT_BUCKET and len(key) == 3:
            metrics.buckets[index.get(key[2], len(BUCKETS))] = int(value)
        elif key[0] == COMMIT_SUM:
            metrics.seconds = float(value)
        elif key[0] == LEASE_CHANGES and len(key) == 3:
            metrics.leases[key[2]] = int(value)
        elif key[0] == LANES:
            metrics.lanes = int(value)
        elif key[0] == LANE_CHANGES and len(key) == 3:
            metrics.lane_changes[key[2]] = int(value)
    return metrics
