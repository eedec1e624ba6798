"""The chaos soak's checks can fail: a frame lost, duplicated, foreign or out of order in a
session stream, a malformed entry that was not dead-lettered, a dead letter nobody injected,
and memory that grows with the load are each reported (bench/soak/check.py, verify.py).

The session stream is written here as a worker would write it, from the same fold the soak
uses, then tampered with; the soak's reader reads it from a real Redis and judges it.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, cast

import pytest
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from bench.soak.check import Diff, FrameReader, Watch, compare
from bench.soak.load import turn_attempts
from bench.soak.log import LogReader
from bench.soak.series import Series
from bench.soak.verify import bounded, dead_letter_report, memory_and_keys
from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent
from terminus.service.keys import FIELD, Keys
from terminus.service.settings import Settings
from tests.support.faults import malformed

A, B, C = b"a", b"b", b"c"


@pytest.mark.parametrize(
    ("observed", "diff"),
    [
        ([A, B, C, A], Diff()),
        ([A, C, A], Diff(lost=1)),
        ([A, B, B, C, A], Diff(duplicated=1)),
        ([A, B, C, A, A], Diff(duplicated=1)),
        ([A, B, b"x", C, A], Diff(unexpected=1)),
        ([A, C, B, A], Diff(inversions=1)),
        ([A, B, A, C], Diff(inversions=1)),
        ([], Diff(lost=4)),
    ],
)
def test_compare_counts_each_kind_of_difference(observed: list[bytes], diff: Diff) -> None:
    assert compare([A, B, C, A], observed) == diff


def tamper(frames: list[bytes], how: str) -> list[bytes]:
    match how:
        case "lose":
            return frames[:3] + frames[4:]
        case "duplicate":
            return [*frames[:5], frames[4], *frames[5:]]
        case "swap":
            return [*frames[:2], frames[3], frames[2], *frames[4:]]
    return frames


async def publish(redis: Redis, watch: Watch, events: list[InboundEvent], how: str) -> None:
    """XADD the events as the producer would, but for `how`; tell the watch they were all
    acknowledged, in order."""
    order = list(range(len(events)))
    if how == "swap_events":
        order[3], order[4] = 4, 3
    if how == "repeat_event":  # a retried publish: a copy in the log, which is fine
        order.insert(4, 3)
    ids: dict[int, bytes] = {4: b"0-1"} if how == "lose_event" else {}
    for n in order:
        if ids.get(n) != b"0-1":
            entry_id = cast(
                bytes, await redis.xadd(watch.inbound, {FIELD: encode_event(events[n])})
            )
            ids.setdefault(n, entry_id)
    watch.published([(ids[n], events[n]) for n in range(len(events))], time.perf_counter())


async def judged(redis: Redis, prefix: str, how: str) -> dict[str, Any]:
    """One session published and folded, its frames written as a worker writes them, either of
    them tampered `how`, then read and judged by the soak's readers."""
    settings = Settings(prefix=prefix, partitions=4)
    log = LogReader(redis, settings)
    reader = FrameReader(redis, settings, Series(), log, grace_s=0.2)
    watch = reader.watch("sess-1")
    attempts = turn_attempts(random.Random(3), "sess-1", "turn-1", "cut_retried", deltas=6)
    await publish(redis, watch, [event for attempt in attempts for event in attempt], how)
    watch.closed = True
    written = tamper(watch.fold.result().frames, how)
    for frame in written:
        await redis.xadd(watch.key, {FIELD: frame})
    tasks = [asyncio.create_task(reader.run(time.perf_counter)), asyncio.create_task(log.run())]
    while watch.key in reader.active and (
        len(watch.observed) < len(written) or not log.caught_up(watch.inbound, watch.last_entry)
    ):
        await asyncio.sleep(0.01)
    for task in tasks:
        task.cancel()
    reader.judge_all()  # as the soak does after its drain, what is missing then is lost
    return reader.totals.report()


COUNTS = ["lost", "duplicated", "unexpected", "inversions", "events_lost", "events_inversions"]


@pytest.mark.cluster  # the soak reads per slot on a cluster (bench/soak/reads.py)
@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("none", None),
        ("repeat_event", None),
        ("lose", "lost"),
        ("duplicate", "duplicated"),
        ("swap", "inversions"),
        ("lose_event", "events_lost"),
        ("swap_events", "events_inversions"),
    ],
)
async def test_readers_report_a_tampered_session(
    redis: Redis, prefix: str, how: str, kind: str | None
) -> None:
    report = await judged(redis, prefix, how)
    assert {k: report[k] for k in COUNTS} == {k: int(k == kind) for k in COUNTS}
    assert report["log_repeats"] == int(how == "repeat_event")
    assert report["sessions"] == 1
    assert report["frames_expected"] > 10


def dead_letter(source_id: str, reason: str, raw: bytes) -> dict[FieldT, EncodableT]:
    return {"source_stream": "in-1", "source_id": source_id, "reason": reason, "raw": raw}


@pytest.mark.cluster
async def test_memory_is_summed_over_a_cluster_s_primaries(
    redis: Redis, admin_redis: Redis, prefix: str
) -> None:
    used, keys = await memory_and_keys(admin_redis)  # INFO, DBSIZE: the soak's, an admin's
    for tag in range(6):  # slots on every shard of the test cluster
        await redis.set(f"{prefix}:{{{tag}}}:x", b"x" * 50_000)
    grown, more = await memory_and_keys(admin_redis)
    assert grown - used >= 6 * 50_000
    assert more - keys == 6


async def test_dead_letter_report_finds_missing_and_unexpected(redis: Redis, prefix: str) -> None:
    settings = Settings(prefix=prefix, partitions=2)
    dead = Keys(1, prefix).dead
    await redis.xadd(dead, dead_letter("1-1", "malformed json: x", b"{"))
    await redis.xadd(dead, dead_letter("9-9", "illegal: y", b"?"))
    injected = {
        ("in-1", "1-1"): malformed.Junk({FIELD: b"{"}, "malformed json"),
        ("in-0", "2-2"): malformed.Junk({FIELD: b"["}, "malformed json"),
    }
    report = await dead_letter_report(redis, settings, injected, {})
    assert (report["missing"], report["wrong_reason_or_bytes"], report["unexpected"]) == (1, 0, 1)
    injected["in-1", "1-1"] = malformed.Junk({FIELD: b"{"}, "$.type")
    report = await dead_letter_report(redis, settings, injected, {})
    assert report["wrong_reason_or_bytes"] == 1


def test_bounded_fails_memory_that_grows_with_the_load() -> None:
    growing = [float(n) for n in range(1, 61)]
    sawtooth = [100.0 + n % 7 for n in range(60)]
    assert bounded(growing, 0.10)["bounded"] is False
    assert bounded(sawtooth, 0.10)["bounded"] is True
    assert bounded([1.0, 2.0, 3.0], 0.10)["bounded"] is None


def test_bounded_judges_the_level_not_a_transient_the_sampler_caught() -> None:
    """A flat level with one spike in the last third (a 2 MB malformed entry in flight) is
    bounded; a slow climb under the same spikes is not."""
    flat = [100.0] * 60
    spiked = [*flat[:45], 160.0, *flat[46:]]
    climbing = [100.0 + 2 * n + (60.0 if n in (15, 45) else 0.0) for n in range(60)]
    assert bounded(spiked, 0.10)["bounded"] is True
    assert bounded(spiked, 0.10)["last_third_max"] == 160.0
    assert bounded(climbing, 0.10)["bounded"] is False
