"""Metrics against a real Redis and an in-process worker: `render_metrics` gives the exact domain
counts of a workload, the worker's commit latencies and lease changes, pending and lag; a replay
counts the same; a commit refused for a lost lease counts nothing (service/metrics*.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Final, cast

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from redis.asyncio import Redis

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    StreamClosed,
    StreamError,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.cli.replay import clear_prefix, replay
from terminus.service.fold.applier import Entry
from terminus.service.fold.commit import LeaseLost
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session, partition_of
from terminus.service.metrics.exposition import render_metrics
from terminus.service.redis.replies import StreamEntry
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

PARTITIONS: Final = 4
USAGE: Final = Usage(output_tokens=1)


def settings_for(prefix: str) -> Settings:
    # A lease long enough that a pause of the loaded test machine never expires one: a test
    # here counts the lease changes exactly (CI once saw 6 acquisitions, a 600 ms lease lost).
    return Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, lease_ttl_ms=3000)


def ids(session: str) -> dict[str, Any]:
    return {"session_id": session, "turn_id": session.replace("s-", "t-", 1)}


def answered(session: str, attempt: int = 1, first: int = 1) -> list[InboundEvent]:
    i, n = ids(session), first
    return [
        AttemptStarted(**i, attempt=attempt, seq=n, provider="openai", model="gpt-x"),
        TextStart(**i, attempt=attempt, seq=n + 1, part_id=f"a{attempt}"),
        TextDelta(**i, attempt=attempt, seq=n + 2, part_id=f"a{attempt}", delta="Hi"),
        TextEnd(**i, attempt=attempt, seq=n + 3, part_id=f"a{attempt}"),
        FinishStep(
            **i,
            attempt=attempt,
            seq=n + 4,
            finish_reason="stop",
            raw_finish_reason="e",
            usage=USAGE,
        ),
    ]


def retried() -> list[InboundEvent]:
    """Cut once (EOF before the proof), then answered by the second attempt."""
    i = ids("s-retry")
    cut: list[InboundEvent] = [
        TurnStarted(**i, seq=0),
        AttemptStarted(**i, seq=1, provider="openai", model="gpt-x"),
        TextStart(**i, seq=2, part_id="a"),
        TextDelta(**i, seq=3, part_id="a", delta="He"),
        TextDelta(**i, seq=3, part_id="a", delta="He"),  # published twice: a duplicate
        StreamClosed(**i, seq=4),
    ]
    return [*cut, *answered("s-retry", attempt=2, first=0)]


def failed() -> list[InboundEvent]:
    i = ids("s-fail")
    return [
        TurnStarted(**i, seq=0),
        AttemptStarted(**i, seq=1, provider="anthropic", model="claude"),
        StreamError(**i, seq=2, status=401, message="invalid key"),
    ]


async def quiet(redis: Redis, prefix: str) -> bool:
    """Every log with entries was read to its end and has nothing pending."""
    for partition in range(PARTITIONS):
        inbound = Keys(partition, prefix).inbound
        last = cast("list[StreamEntry]", await redis.xrevrange(inbound, count=1))
        if not last:
            continue
        groups = await redis.xinfo_groups(inbound)
        group = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
        # Redis 6.2 reports no lag: compare the last delivered id with the stream's last id.
        if group is None or group["pending"] or group["last-delivered-id"] != last[0][0]:
            return False
    return True


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(redis: Redis, settings: Settings) -> Samples:
    """`render_metrics` parsed by prometheus_client: sample name and labels -> value."""
    body = await render_metrics(redis, settings)
    families = text_string_to_metric_families(body.decode())
    samples: list[Sample] = [s for family in families for s in family.samples]
    return {(s.name, frozenset(s.labels.items())): s.value for s in samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over every sample whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


@pytest.fixture
async def worker(redis: Redis, prefix: str) -> AsyncIterator[Worker]:
    """A running worker that has committed the workload and then gone quiet."""
    settings = settings_for(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    running = Worker(redis, settings, "worker-m")
    task = asyncio.create_task(running.run())
    try:
        await producer.publish([*retried(), *failed()])
        await producer.publish([TurnStarted(**ids("s-ok"), seq=0), *answered("s-ok")])
        dead = keys_for_session("s-bad", PARTITIONS, prefix).inbound
        await redis.xadd(dead, {FIELD: b"{not json"})
        await redis.xadd(dead, {b"x": b"no e"})
        await producer.publish([TextDelta(**ids("s-ghost"), seq=3, part_id="a", delta="boo")])
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
        yield running
    finally:
        await running.stop()
        await task


async def test_render_metrics_counts_the_workload_exactly(redis: Redis, worker: Worker) -> None:
    settings = worker.settings
    logged = sum([await redis.xlen(Keys(p, settings.prefix).inbound) for p in range(PARTITIONS)])
    sessions = ("s-retry", "s-fail", "s-ok")
    streams = [keys_for_session(s, PARTITIONS, settings.prefix).session(s) for s in sessions]
    frames = sum([await redis.xlen(stream) for stream in streams])
    samples = await scrape(redis, settings)

    assert total(samples, "terminus_events_in_total") == logged
    assert total(samples, "terminus_events_in_total", outcome="dead") == 3
    assert total(samples, "terminus_events_in_total", outcome="ignored") == 1
    assert total(samples, "terminus_events_ignored_total", reason="duplicate") == 1
    assert total(samples, "terminus_frames_out_total") == frames > 0
    retry_partition = str(partition_of("s-retry", PARTITIONS))
    cut = {"reason": "missing_terminal", "provider": "openai", "model": "gpt-x"}
    assert total(samples, "terminus_truncations_total", partition=retry_partition, **cut) == 1
    assert total(samples, "terminus_truncations_total") == 1
    assert total(samples, "terminus_retries_total", reason="missing_terminal") == 1
    assert total(samples, "terminus_retries_total") == 1
    assert total(samples, "terminus_failures_total", type="auth") == 1
    assert total(samples, "terminus_failures_total") == 1
    assert total(samples, "terminus_turns_finished_total", stop_reason="end_turn") == 2
    assert total(samples, "terminus_turns_finished_total", stop_reason="error") == 1
    assert total(samples, "terminus_turns_finished_total") == 3
    for reason in ("undecodable", "missing_field", "illegal"):
        assert total(samples, "terminus_dead_letters_total", reason=reason) == 1
    assert total(samples, "terminus_dead_letters_total") == 3


async def test_render_metrics_has_pending_lag_and_the_workers_own_metrics(
    redis: Redis, admin_redis: Redis, worker: Worker
) -> None:
    settings = worker.settings

    async def flushed() -> bool:
        samples = await scrape(redis, settings)
        count = total(samples, "terminus_commit_seconds_count", worker="worker-m")
        return count == worker.metrics.commits > 0

    await until(flushed, "the worker's metrics to be stored")
    samples = await scrape(redis, settings)
    commits = worker.metrics.commits
    assert total(samples, "terminus_commit_seconds_bucket", worker="worker-m", le="+Inf") == commits
    assert total(samples, "terminus_commit_seconds_sum", worker="worker-m") > 0
    assert total(samples, "terminus_lease_changes_total", kind="acquired") == PARTITIONS
    # A workload of a few entries never fills a round: one lane, which never changed.
    assert total(samples, "terminus_worker_lanes", worker="worker-m") == 1
    assert total(samples, "terminus_lane_changes_total") == 0
    used = {str(partition_of(s, PARTITIONS)) for s in ("s-retry", "s-fail", "s-ok", "s-bad")}
    reports_lag = await server_reports_lag(admin_redis)
    for partition in used:
        assert ("terminus_partition_pending", frozenset({("partition", partition)})) in samples
        lag = ("terminus_partition_lag", frozenset({("partition", partition)}))
        assert samples.get(lag) == (0 if reports_lag else None)
    assert total(samples, "terminus_partition_pending") == 0

    keys = Keys(int(sorted(used)[0]), settings.prefix)
    await worker.stop()  # else it may read the second entry before the scrape: pending 2, lag 0
    await redis.xadd(keys.inbound, {FIELD: b"{}"})
    await redis.xreadgroup(GROUP, "crashed", {keys.inbound: ">"}, count=1)
    await redis.xadd(keys.inbound, {FIELD: b"{}"})
    samples = await scrape(redis, settings)
    assert total(samples, "terminus_partition_pending", partition=str(keys.partition)) == 1
    lag = ("terminus_partition_lag", frozenset({("partition", str(keys.partition))}))
    assert samples.get(lag) == (1 if reports_lag else None)


async def server_reports_lag(admin: Redis) -> bool:
    """XINFO GROUPS has `lag` from Redis 7 on; on 6.2 the gauge is omitted. INFO is not the
    service's: `admin` may run it."""
    info = await admin.info("server")
    return int(str(info["redis_version"]).split(".")[0]) >= 7


async def test_a_replay_counts_the_same(redis: Redis, admin_redis: Redis, worker: Worker) -> None:
    await worker.stop()
    settings = worker.settings
    target = f"{settings.prefix}-again"
    try:
        report = await replay(redis, settings, verify=True, target=target, keep=True)
        assert report.differences == []
        for partition in range(PARTITIONS):
            live = await redis.hgetall(Keys(partition, settings.prefix).metrics)
            assert live == await redis.hgetall(Keys(partition, target).metrics)
        assert await admin_redis.exists(Keys(partition_of("s-retry", PARTITIONS), target).metrics)

        keys = keys_for_session("s-fail", PARTITIONS, settings.prefix)
        await redis.hincrby(keys.metrics, '["failures","type","auth"]', 1)
        report = await replay(redis, settings, verify=True, target=target)
        [difference] = report.differences
        assert difference.startswith(f'p{keys.partition} metrics ["failures","type","auth"]: ')
    finally:
        await clear_prefix(redis, target)


async def test_turn_events_are_logged_with_their_ids(
    redis: Redis, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="terminus.partition")
    running = Worker(redis, settings_for(prefix), "worker-l")
    task = asyncio.create_task(running.run())
    try:
        await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(retried())
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    finally:
        await running.stop()
        await task
    noted = [r for r in caplog.records if getattr(r, "event", None)]
    assert [(r.__dict__["event"], r.__dict__["turn_id"]) for r in noted] == [
        ("truncated", "t-retry"),
        ("retrying", "t-retry"),
        ("finished", "t-retry"),
    ]
    partition = partition_of("s-retry", PARTITIONS)
    assert {(r.__dict__["session_id"], r.__dict__["partition"]) for r in noted} == {
        ("s-retry", partition)
    }
    assert {r.__dict__["worker"] for r in noted} == {"worker-l"}


async def test_a_commit_refused_for_a_lost_lease_counts_nothing(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    settings = settings_for(prefix)
    keys = keys_for_session("s-retry", PARTITIONS, prefix)
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(retried())
    await redis.xgroup_create(keys.inbound, GROUP, id="0-0")
    leases = Leases(redis, prefix)
    epoch = await leases.acquire(keys.partition, "worker-a", 30)
    assert epoch is not None
    owner = PartitionOwner(redis, settings, keys.partition, "worker-a", epoch)
    await asyncio.sleep(0.1)
    assert await leases.acquire(keys.partition, "worker-b", 30_000) is not None
    with pytest.raises(LeaseLost):
        await owner.start()  # the drain claims nothing: the lease is gone before it
    reply = await redis.xreadgroup(GROUP, "worker-a", {keys.inbound: ">"}, count=100)
    [(_, rows)] = cast("list[tuple[bytes, list[StreamEntry]]]", reply)
    entries = [Entry(entry_id.decode(), fields) for entry_id, fields in rows]
    with pytest.raises(LeaseLost):
        await owner.process(entries)
    _, refused = owner.fold.apply(owner.decode(entries))  # the fold forgot the refused batch
    assert refused.counts, "the batch had counts to commit"
    assert await admin_redis.exists(keys.metrics) == 0
    assert owner.metrics.commits == 0
    samples = await scrape(redis, settings)
    assert total(samples, "terminus_events_in_total") == 0
