"""Retention against a real Redis (service/retention/archiver.py): final turns go to the archive,
their Redis state is released through a log entry, the log is trimmed, and `replay --verify` over
archive plus live log still finds every projection byte-identical.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Final, cast

import msgspec
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from serving import running_worker
from test_replay import (
    PARTITIONS,
    TURNS,
    _in,
    answer,
    bad_and_repeated,
    keys_of,
    leave_poison,
    play,
    quiet,
    settings_for,
    snapshot,
    turn_of,
)

from terminus.events.inbound import TurnEnded, TurnStarted
from terminus.service.cli.main import main
from terminus.service.cli.replay import replay
from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.gateway.timeline import TurnArchived, find_session, timeline
from terminus.service.keys import Keys
from terminus.service.metrics.counters import IGNORED, field_of
from terminus.service.redis.replies import StreamEntry
from terminus.service.retention.archive import LocalArchive, partition_prefix
from terminus.service.retention.records import unpack_segment
from terminus.service.runtime.archiving import archive_free_partitions
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

ARCHIVED: Final = ("s-ok", "s-retry", "s-fail", "s-dup")  # final: archived and released
LATE: Final = field_of((IGNORED, "reason", "late")).encode()


def archived_settings(prefix: str, tmp_path: Path, retain_ms: int = 0) -> Settings:
    base = settings_for(prefix)
    return msgspec.structs.replace(base, archive_dir=str(tmp_path / "archive"), retain_ms=retain_ms)


@asynccontextmanager
async def running(redis: Redis, settings: Settings) -> AsyncIterator[Worker]:
    """A worker for the block; on leaving, the pool is quiet and the worker stopped."""
    async with running_worker(redis, settings) as worker:
        yield worker
        await until(lambda: drained(redis, settings.prefix), "the pool to be quiet")


async def drained(redis: Redis, prefix: str) -> bool:
    """test_replay's `quiet`, once the worker has created its groups."""
    for partition in range(PARTITIONS):
        inbound = Keys(partition, prefix).inbound
        with suppress(ResponseError):  # no log there yet
            if not await redis.xinfo_groups(inbound):
                return False
    return await quiet(redis, prefix)


async def settle(redis: Redis, settings: Settings) -> None:
    """Let a worker fold what the log holds (release entries too), then stop it."""
    async with running(redis, settings):
        pass


async def logged(redis: Redis, prefix: str) -> int:
    return sum([await redis.xlen(Keys(p, prefix).inbound) for p in range(PARTITIONS)])


async def traffic(redis: Redis, admin: Redis, settings: Settings) -> None:
    """test_replay's traffic: completed, retried, failed, open, dead-lettered, duplicated."""
    prefix = settings.prefix
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await leave_poison(redis, admin, producer, prefix, settings)
    async with running(redis, settings):
        await asyncio.gather(*(play(redis, producer, prefix, s) for s in TURNS))
        await bad_and_repeated(redis, producer, prefix)
        await until(partial(_in, redis, prefix, "s-dup", FINAL_STATES), "t-dup to finish")


def segments(archive: LocalArchive, prefix: str) -> list[str]:
    return [key for p in range(PARTITIONS) for key in archive.list(partition_prefix(prefix, p))]


async def test_archived_turns_are_released_and_replay_reads_the_archive(
    redis: Redis, admin_redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    await traffic(redis, admin_redis, settings)
    before = await logged(redis, prefix)
    archive = LocalArchive(settings.archive_dir)
    tools = keys_of("s-tools", prefix)  # open (awaiting its next step): the cut stops before it
    rows = cast("list[StreamEntry]", await redis.xrange(tools.inbound))
    tools_start = next(i for i, fields in rows if b'"t-tools"' in fields.get(b"e", b""))

    done, skipped = await archive_free_partitions(redis, settings, archive, retain_ms=0)

    assert skipped == []
    elsewhere = [s for s in ARCHIVED if keys_of(s, prefix).partition != tools.partition]
    assert sum(r.released for r in done.values()) >= len(elsewhere) > 0
    trimmed = sum(r.trimmed for r in done.values())
    assert trimmed == sum(r.archived for r in done.values()) > 0
    appended = sum(1 for r in done.values() if r.released)  # one release entry each
    assert await logged(redis, prefix) == before - trimmed + appended
    assert await redis.xrange(tools.inbound, tools_start, tools_start) != []
    assert (await replay(redis, settings, verify=True, archive=archive)).differences == []
    without = await replay(redis, settings, verify=True)
    assert without.differences  # the archive is what holds the trimmed entries

    await end_tools_turn(redis, prefix)
    await settle(redis, settings)  # folds the release entries and the turn's end
    await archive_free_partitions(redis, settings, archive, retain_ms=0)
    await settle(redis, settings)
    for session in (*ARCHIVED, "s-tools"):
        keys = keys_of(session, prefix)
        turn_id = turn_of(session)
        assert await redis.get(keys.turn(turn_id)) == TOMBSTONE
        assert await redis.hget(keys.messages(session), f"msg-{turn_id}") is None
        assert await admin_redis.zscore(keys.archived, turn_id) is not None
    assert (await replay(redis, settings, verify=True, archive=archive)).differences == []


async def end_tools_turn(redis: Redis, prefix: str) -> None:
    """The producer ends t-tools after its tool step: the turn is final."""
    turn = await snapshot(redis, prefix, "s-tools")
    assert turn is not None
    ended = TurnEnded(
        session_id="s-tools",
        turn_id="t-tools",
        step=turn.step,
        attempt=turn.attempt,
        seq=turn.last_seq + 1,
    )
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish([ended])


async def test_a_late_event_for_a_released_turn_is_ignored_and_counted(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running(redis, settings):
        await producer.publish(answer("s-late", "t-late"))
        await until(partial(_in, redis, prefix, "s-late", FINAL_STATES), "t-late to finish")
    archive = LocalArchive(settings.archive_dir)
    await archive_free_partitions(redis, settings, archive, retain_ms=0)
    await settle(redis, settings)
    keys = keys_of("s-late", prefix)
    assert await redis.get(keys.turn("t-late")) == TOMBSTONE
    late_before = int(await redis.hget(keys.metrics, LATE) or 0)

    await producer.publish([TurnStarted(session_id="s-late", turn_id="t-late", seq=0)])
    await settle(redis, settings)

    assert await redis.xlen(keys.dead) == 0
    assert int(await redis.hget(keys.metrics, LATE) or 0) == late_before + 1
    await archive_free_partitions(redis, settings, archive, retain_ms=0)
    await settle(redis, settings)
    assert len(segments(archive, prefix)) >= 2
    assert (await replay(redis, settings, verify=True, archive=archive)).differences == []


async def test_a_segment_holds_per_turn_records_and_loose_entries(
    redis: Redis, admin_redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    await traffic(redis, admin_redis, settings)
    await end_tools_turn(redis, prefix)
    await settle(redis, settings)
    archive = LocalArchive(settings.archive_dir)
    await archive_free_partitions(redis, settings, archive, retain_ms=0)
    found = [unpack_segment(archive.get(key)) for key in segments(archive, prefix)]
    records = {r.turn_id: r for s in found for r in s.turns}
    assert sorted(records) == sorted(turn_of(s) for s in (*ARCHIVED, "s-tools"))
    for segment in found:
        ids = [e.id for e in segment.entries()]
        assert ids == sorted(ids, key=id_key)
        assert (ids[0], ids[-1]) == (segment.first_id, segment.last_id)
    ok = records["t-ok"]
    assert ok.message is not None
    assert b'"msg-t-ok"' in ok.message
    assert records["t-fail"].state == "failed"
    loose = [e for s in found for e in s.loose]
    raws = [dict(e.fields).get(b"e", b"") for e in loose]
    assert b"{not json" in raws  # the undecodable entry, kept byte for byte
    assert any(b"t-ghost" in raw for raw in raws)  # an event of a turn that never started
    assert await logged(redis, prefix) == len({s.partition for s in found})  # release entries


async def test_terminus_archive_then_replay_verify_reads_the_archive_dir(
    redis: Redis,
    admin_redis: Redis,
    redis_env: None,
    prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = archived_settings(prefix, tmp_path)
    await traffic(redis, admin_redis, settings)
    await end_tools_turn(redis, prefix)
    await settle(redis, settings)
    for name, value in (
        ("TERMINUS_PREFIX", prefix),
        ("TERMINUS_PARTITIONS", str(PARTITIONS)),
        ("TERMINUS_ARCHIVE_DIR", settings.archive_dir),
    ):
        monkeypatch.setenv(name, value)

    assert await asyncio.to_thread(main, ["archive", "--once"]) == 0
    out = capsys.readouterr().out
    assert f"({len(ARCHIVED) + 1} turns released) to {settings.archive_dir}" in out
    await settle(redis, settings)
    with pytest.raises(TurnArchived):
        await timeline(redis, "s-ok", "t-ok", PARTITIONS, prefix)
    with pytest.raises(TurnArchived):
        await find_session(redis, "t-ok", PARTITIONS, prefix)

    assert await asyncio.to_thread(main, ["replay", "--verify"]) == 0
    assert "identical: every projection matches the live one" in capsys.readouterr().out
    monkeypatch.setenv("TERMINUS_ARCHIVE_DIR", str(tmp_path / "elsewhere"))
    assert await asyncio.to_thread(main, ["replay", "--verify"]) == 1
