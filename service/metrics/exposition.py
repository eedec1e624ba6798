"""Prometheus metrics of a pool, read from Redis by whichever process serves `GET /metrics`.

Four sources (docs/metrics.md): each partition's domain counters, added by its commits
(service/metrics/counters.py); each partition's consumer group, for entries pending (read, not
committed) and lag (appended, not yet read); each live worker's own hash of commit latencies and
lease changes (service/metrics/worker.py); each sink's counters per partition (docs/sinks.md).
The exposition format is prometheus_client's, from a collector over one snapshot of those reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from redis.asyncio import Redis

from terminus.service.keys import (
    GROUP,
    Keys,
    sink_prefix,
    sinks_key,
    worker_metrics_key,
    workers_key,
)
from terminus.service.metrics.counters import Key, key_of
from terminus.service.metrics.worker import BUCKETS, WorkerMetrics, parse
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import text
from terminus.service.settings import Settings

# hash counter name -> exposed name (without _total), help, label names after `partition`
COUNTERS: Final[dict[str, tuple[str, str, tuple[str, ...]]]] = {
    "events_in": ("terminus_events_in", "Inbound entries committed, by outcome", ("outcome",)),
    "frames_out": ("terminus_frames_out", "Session frames written", ()),
    "ignored": ("terminus_events_ignored", "Events the turn machine ignored", ("reason",)),
    "truncations": (
        "terminus_truncations",
        "Attempts that ended without terminal proof",
        ("reason", "provider", "model"),
    ),
    "unknown_finishes": (
        "terminus_unknown_finish_reasons",
        "Raw finish reasons no table knows, each an attempt retried as unknown_finish",
        ("provider", "raw"),
    ),
    "retries": ("terminus_retries", "Retries and compactions scheduled", ("reason",)),
    "failures": ("terminus_failures", "Turns failed, by error type", ("type",)),
    "dead_letters": ("terminus_dead_letters", "Entries dead-lettered", ("reason",)),
    "turns_finished": ("terminus_turns_finished", "Turns ended, by stop reason", ("stop_reason",)),
}


@dataclass
class Group:
    """A partition's consumer group as XINFO GROUPS tells it; lag None where Redis cannot
    tell (before 7.0, or after entries were deleted from the log)."""

    pending: int
    lag: int | None


@dataclass
class Snapshot:
    counters: dict[int, dict[Key, int]] = field(default_factory=dict)
    groups: dict[int, Group] = field(default_factory=dict)
    workers: dict[str, WorkerMetrics] = field(default_factory=dict)
    sinks: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)


# a sink's hash field -> exposed name, help (docs/sinks.md, "Counters")
SINK_COUNTERS: Final = {
    "rows": ("terminus_sink_rows", "Rows a sink wrote (messages and turn ends)"),
    "pages": ("terminus_sink_pages", "Transactions a sink committed"),
    "refused": ("terminus_sink_refused", "Rows the database refused, dead-lettered"),
    "database_errors": ("terminus_sink_database_errors", "Pages sent again: the database away"),
}


async def render_metrics(redis: Redis, settings: Settings) -> bytes:
    """The pool's metrics in the Prometheus text exposition format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(await read_snapshot(redis, settings)))
    return generate_latest(registry)


async def read_snapshot(redis: Redis, settings: Settings) -> Snapshot:
    """Every partition's counters and group, and every live worker's own metrics."""
    pipe = redis.pipeline(transaction=False)
    for partition in range(settings.partitions):
        keys = Keys(partition, settings.prefix)
        pipe.hgetall(keys.metrics)
        pipe.xinfo_groups(keys.inbound)
    pipe.zrange(workers_key(settings.prefix), 0, -1)
    pipe.hgetall(sinks_key(settings.prefix))  # HGETALL: the ACL user has it, not HKEYS
    replies: list[Any] = await pipe.execute(raise_on_error=False)
    snapshot = Snapshot()
    for partition in range(settings.partitions):
        stored, groups = replies[2 * partition], replies[2 * partition + 1]
        snapshot.counters[partition] = _counters(_raised(stored))
        group = _group(groups)  # a log nobody published to has no stream: an error, no group
        if group is not None:
            snapshot.groups[partition] = group
    snapshot.workers = await _workers(redis, settings.prefix, _raised(replies[-2]))
    snapshot.sinks = await _sinks(redis, settings, _raised(replies[-1]).keys())
    return snapshot


def _raised(reply: Any) -> Any:
    if isinstance(reply, Exception):
        raise reply
    return reply


def _counters(stored: Mapping[bytes, bytes]) -> dict[Key, int]:
    counts = {}
    for raw, value in stored.items():
        key = key_of(raw)
        if key is not None and key[0] in COUNTERS:
            counts[key] = int(value)
    return counts


def _group(groups: Any) -> Group | None:
    if isinstance(groups, Exception):
        return None
    for group in cast("list[dict[str, Any]]", groups):
        if text(group["name"]) == GROUP:
            lag = group.get("lag")
            return Group(int(group["pending"]), None if lag is None else int(lag))
    return None


async def _workers(redis: Redis, prefix: str, members: Sequence[bytes]) -> dict[str, WorkerMetrics]:
    ids = sorted(text(m) for m in members)
    pipe = redis.pipeline(transaction=False)
    for worker_id in ids:
        pipe.hgetall(worker_metrics_key(worker_id, prefix))
    stored = await execute(pipe) if ids else []
    return {w: parse(s) for w, s in zip(ids, stored, strict=True) if s}


async def _sinks(
    redis: Redis, settings: Settings, names: Iterable[bytes]
) -> dict[tuple[str, int], dict[str, int]]:
    wanted = [(text(n), p) for n in sorted(names) for p in range(settings.partitions)]
    pipe = redis.pipeline(transaction=False)
    for name, partition in wanted:
        pipe.hgetall(Keys(partition, sink_prefix(name, settings.prefix)).metrics)
    stored: list[dict[bytes, bytes]] = await execute(pipe) if wanted else []
    return {
        at: {text(k): int(v) for k, v in found.items() if text(k) != "position"}
        for at, found in zip(wanted, stored, strict=True)
        if found
    }


class _Collector:
    """Metric families of one snapshot, for a private registry."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from self._domain()
        yield from self._groups()
        yield from self._workers()
        yield from self._sinks()

    def _domain(self) -> Iterator[Metric]:
        families = {
            name: CounterMetricFamily(metric, doc, labels=("partition", *labels))
            for name, (metric, doc, labels) in COUNTERS.items()
        }
        for partition, counts in sorted(self.snapshot.counters.items()):
            for key, value in sorted(counts.items()):
                labels = dict(zip(key[1::2], key[2::2], strict=True))
                wanted = COUNTERS[key[0]][2]
                values = [str(partition), *(labels.get(name, "") for name in wanted)]
                families[key[0]].add_metric(values, value)
        yield from families.values()

    def _groups(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily(
            "terminus_partition_pending",
            "Entries read by the partition's owner and not committed yet",
            labels=("partition",),
        )
        lag = GaugeMetricFamily(
            "terminus_partition_lag",
            "Entries in the partition's log not read yet (absent where Redis cannot tell)",
            labels=("partition",),
        )
        for partition, group in sorted(self.snapshot.groups.items()):
            pending.add_metric([str(partition)], group.pending)
            if group.lag is not None:
                lag.add_metric([str(partition)], group.lag)
        yield pending
        yield lag

    def _workers(self) -> Iterator[Metric]:
        workers = sorted(self.snapshot.workers.items())
        commits = HistogramMetricFamily(
            "terminus_commit_seconds",
            "Round trip of a batch commit (with the read of the next batch), per worker",
            labels=("worker",),
        )
        lanes = GaugeMetricFamily(
            "terminus_worker_lanes",
            "Lanes (pump loops) in use, per worker: one at light load, more under load",
            labels=("worker",),
        )
        for worker_id, metrics in workers:
            commits.add_metric([worker_id], _cumulative(metrics), sum_value=metrics.seconds)
            lanes.add_metric([worker_id], metrics.lanes)
        yield commits
        yield _by_kind(
            "terminus_lease_changes",
            "Partition leases acquired, lost, rotated and released, per worker",
            [(w, m.leases) for w, m in workers],
        )
        yield lanes
        yield _by_kind(
            "terminus_lane_changes",
            "Times the lanes in use grew (doubled) or shrank back, per worker",
            [(w, m.lane_changes) for w, m in workers],
        )

    def _sinks(self) -> Iterator[Metric]:
        labels = ("sink", "partition")
        counters = {
            name: CounterMetricFamily(metric, doc, labels=labels)
            for name, (metric, doc) in SINK_COUNTERS.items()
        }
        lag = GaugeMetricFamily(
            "terminus_sink_lag_ms",
            "Log time between a sink's position and the newest committed entry, at its last page",
            labels=labels,
        )
        for (name, partition), counts in sorted(self.snapshot.sinks.items()):
            at = [name, str(partition)]
            for counted, family in counters.items():
                family.add_metric(at, counts.get(counted, 0))
            lag.add_metric(at, counts.get("lag_ms", 0))
        yield from counters.values()
        yield lag


def _by_kind(name: str, help_text: str, counts: list[tuple[str, dict[str, int]]]) -> Metric:
    """A counter labelled by kind and worker, from each worker's counts by kind."""
    family = CounterMetricFamily(name, help_text, labels=("kind", "worker"))
    for worker_id, by_kind in counts:
        for kind, n in sorted(by_kind.items()):
            family.add_metric([kind, worker_id], n)
    return family


def _cumulative(metrics: WorkerMetrics) -> list[tuple[str, float]]:
    bounds = [*map(str, BUCKETS), "+Inf"]
    total, out = 0, []
    for le, n in zip(bounds, metrics.buckets, strict=True):
        total += n
        out.append((le, float(total)))
    return out
