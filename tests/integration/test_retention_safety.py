"""Retention never loses an entry (service/retention/archiver.py, trim.lua): the trim is fenced by
the lease, never passes a pending or undelivered entry, and a pass cut short between its steps (a
crash, simulated by doing the steps partially) leaves nothing that replay or the next pass gets
wrong.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Final, cast

import pytest
from redis.asyncio import Redis
from test_replay import PARTITIONS, answer
from test_retention import archived_settings, running, settle

from terminus.service.cli.replay import replay
from terminus.service.fold.commit import LeaseLost
from terminus.service.fold.releases import TOMBSTONE, id_key, next_id
from terminus.service.keys import GROUP, Keys, keys_for_session
from terminus.service.redis.replies import StreamEntry
from terminus.service.redis.scripts import script
from terminus.service.retention.archive import LocalArchive, partition_prefix, segment_key
from terminus.service.retention.archiver import Archiver, PassResult
from terminus.service.retention.records import Segment, pack_segment, unpack_segment
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

ME: Final = "archiver-under-test"


def same_partition(count: int) -> list[str]:
    """`count` session ids of partition 0."""
    found = (f"s-{n}" for n in range(1000))
    return [s for s in found if keys_for_session(s, PARTITIONS).partition == 0][:count]


async def finished(redis: Redis, settings: Settings, sessions: list[str]) -> None:
    """One complete turn per session (turn id `t` + session id), committed by a worker."""
    producer = Producer(redis, partitions=PARTITIONS, prefix=settings.prefix)
    async with running(redis, settings):
        for session in sessions:
            await producer.publish(answer(session, "t" + session))


async def lease_of(redis: Redis, prefix: str) -> str:
    epoch = await Leases(redis, prefix).acquire(0, ME, 60_000)
    assert epoch is not None
    return lease_value(ME, epoch)


async def trim(redis: Redis, keys: Keys, lease: str, last_id: str) -> int:
    args = [lease, GROUP, last_id, next_id(last_id)]
    return int(await script(redis, "trim")(keys=[keys.lease, keys.inbound], args=args))


async def identical(redis: Redis, settings: Settings, archive: LocalArchive) -> None:
    report = await replay(redis, settings, verify=True, archive=archive)
    assert report.differences == []


async def test_the_trim_never_passes_a_pending_or_undelivered_entry(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    first, second = same_partition(2)
    await finished(redis, settings, [first])
    keys = Keys(0, prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    pending = [i.decode() for i in await producer.publish(answer(second, "t-crashed")[:2])]
    await redis.xreadgroup(GROUP, "crashed", {keys.inbound: ">"}, count=10)  # never committed
    [undelivered] = [i.decode() for i in await producer.publish(answer(second, "t-later")[:1])]
    archive = LocalArchive(settings.archive_dir)
    lease = await lease_of(redis, prefix)

    done = await Archiver(redis, settings, archive, 0).run(0, lease)

    [key] = archive.list(partition_prefix(prefix, 0))
    segment = unpack_segment(archive.get(key))
    assert id_key(segment.last_id) < id_key(pending[0])
    assert [r.turn_id for r in segment.turns] == ["t" + first]
    assert done.trimmed == done.archived == len(answer(first, "t" + first))
    rows = cast("list[StreamEntry]", await redis.xrange(keys.inbound, pending[0], "+"))
    kept = [i.decode() for i, _ in rows]
    assert kept[:3] == [*pending, undelivered]
    assert (await redis.xpending(keys.inbound, GROUP))["pending"] == 2
    length = await redis.xlen(keys.inbound)
    assert await trim(redis, keys, lease, pending[0]) == -2
    assert await trim(redis, keys, "someone-else:1", segment.last_id) == -1
    await redis.xack(keys.inbound, GROUP, *pending)
    assert await trim(redis, keys, lease, undelivered) == -3
    assert await redis.xlen(keys.inbound) == length


class Crash(Exception):
    """The process died here."""


class DiesBeforeRelease(Archiver):
    async def _finish(self, *args: Any, **kwargs: Any) -> PassResult:
        raise Crash


class DiesBeforeTrim(Archiver):
    async def _trim(self, keys: Keys, lease: str, last_id: str) -> int:
        raise Crash


async def test_a_pass_cut_short_at_any_step_is_finished_by_the_next(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    sessions = same_partition(3)
    await finished(redis, settings, sessions)
    keys = Keys(0, prefix)
    logged = await redis.xlen(keys.inbound)
    archive = LocalArchive(settings.archive_dir)
    lease = await lease_of(redis, prefix)

    with contextlib.suppress(Crash):
        await DiesBeforeRelease(redis, settings, archive, 0).run(0, lease)
    [key] = archive.list(partition_prefix(prefix, 0))  # durable before anything else happens
    assert await redis.xlen(keys.inbound) == logged
    await identical(redis, settings, archive)  # the log after the archive's end only: no twice

    with contextlib.suppress(Crash):
        await DiesBeforeTrim(redis, settings, archive, 0).run(0, lease)
    assert archive.list(partition_prefix(prefix, 0)) == [key]  # finished, not archived again
    assert await redis.xlen(keys.inbound) == logged + 1  # the release entry

    done = await Archiver(redis, settings, archive, 0).run(0, lease)

    assert done == PassResult(archived=0, released=len(sessions), trimmed=logged)
    assert archive.list(partition_prefix(prefix, 0)) == [key]
    assert await redis.xlen(keys.inbound) == 2  # both release entries: the second changes nothing
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    for session in sessions:
        assert await redis.get(keys.turn("t" + session)) == TOMBSTONE
    await identical(redis, settings, archive)


class LosesItsLeaseAfterThePut(Archiver):
    async def _finish(self, keys: Keys, *args: Any, **kwargs: Any) -> PassResult:
        await self.redis.set(keys.lease, "new-owner:99")
        return await super()._finish(keys, *args, **kwargs)


async def test_an_archiver_without_the_lease_releases_and_trims_nothing(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    [session] = same_partition(1)
    await finished(redis, settings, [session])
    keys = Keys(0, prefix)
    logged = await redis.xlen(keys.inbound)
    archive = LocalArchive(settings.archive_dir)

    try:
        await Archiver(redis, settings, archive, 0).run(0, "never-held:1")
    except LeaseLost:
        pass
    else:
        raise AssertionError("a pass without the lease went through")
    assert archive.list(partition_prefix(prefix, 0)) == []
    lease = await lease_of(redis, prefix)
    try:
        await LosesItsLeaseAfterThePut(redis, settings, archive, 0).run(0, lease)
    except LeaseLost:
        pass
    else:
        raise AssertionError("a pass that lost its lease went through")
    assert await redis.xlen(keys.inbound) == logged  # no release entry, no trim
    assert cast(bytes, await redis.get(keys.turn("t" + session))) != TOMBSTONE
    await redis.delete(keys.lease)

    lease = await lease_of(redis, prefix)  # the next owner finishes the segment left behind
    done = await Archiver(redis, settings, archive, 0).run(0, lease)
    assert (done.released, done.trimmed) == (1, logged)
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    await identical(redis, settings, archive)


async def test_a_late_event_after_the_tombstone_is_forgotten_is_a_dead_letter(
    redis: Redis, admin_redis: Redis, prefix: str, tmp_path: Path
) -> None:
    """Tombstones last `retain_ms` after the release (memory stays bounded); after that the turn
    is unknown, and a late event for it is dead-lettered, raw bytes and reason, not lost."""
    # The test's own passes archive (retention 1 ms); its worker only folds, with no archiver of
    # its own that could forget the tombstone before the first check (it did, once, on a cluster).
    settings = archived_settings(prefix, tmp_path)
    [session] = same_partition(1)
    await finished(redis, settings, [session])
    keys = Keys(0, prefix)
    archive = LocalArchive(settings.archive_dir)
    lease = await lease_of(redis, prefix)
    await Archiver(redis, settings, archive, 1).run(0, lease)
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    assert await redis.get(keys.turn("t" + session)) == TOMBSTONE
    [other] = [s for s in same_partition(2) if s != session]
    await finished(redis, settings, [other])  # more traffic: a segment, and with it the forget
    lease = await lease_of(redis, prefix)
    await Archiver(redis, settings, archive, 1).run(0, lease)
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    assert await redis.get(keys.turn("t" + session)) is None
    assert await admin_redis.zscore(keys.archived, "t" + session) is None

    late = answer(session, "t" + session)[-1]
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish([late])
    await settle(redis, settings)
    [(_, letter)] = cast("list[StreamEntry]", await redis.xrange(keys.dead))
    assert letter[b"reason"].endswith(b"event for a turn that never started")
    await identical(redis, settings, archive)


class ANewTurnComesMeanwhile(Archiver):
    """Between judging the sessions idle and appending the release, a producer starts a turn."""

    async def _idle_sessions(self, keys: Keys, *args: Any) -> list[tuple[str, bytes]]:
        idle = await super()._idle_sessions(keys, *args)
        for session, _ in idle:
            events = answer(session, "t-next-" + session)
            await Producer(self.redis, partitions=PARTITIONS, prefix=keys.prefix).publish(events)
        return idle


async def test_an_idle_session_stream_goes_unless_a_turn_wrote_to_it_since(
    redis: Redis, admin_redis: Redis, prefix: str, tmp_path: Path
) -> None:
    settings = archived_settings(prefix, tmp_path)
    quiet_session, busy_session = same_partition(2)
    await finished(redis, settings, [quiet_session])
    keys = Keys(0, prefix)
    archive = LocalArchive(settings.archive_dir)
    lease = await lease_of(redis, prefix)
    await Archiver(redis, settings, archive, 0).run(0, lease)
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    assert await admin_redis.exists(keys.session(quiet_session)) == 0  # every turn archived, idle

    await finished(redis, settings, [busy_session])
    frames = await redis.xlen(keys.session(busy_session))
    lease = await lease_of(redis, prefix)
    await ANewTurnComesMeanwhile(redis, settings, archive, 0).run(0, lease)
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)

    rows = cast("list[StreamEntry]", await redis.xrange(keys.session(busy_session)))
    turns = [b'"t' + busy_session.encode() + b'"' in f[b"e"] for _, f in rows]
    assert turns.count(True) == frames  # the archived turn's frames stay: the session is busy
    assert len(rows) > frames  # and the new turn's follow them
    await identical(redis, settings, archive)


async def test_overlapping_segments_are_read_once(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    """Two archivers with the same start (one had lost its lease) leave segments that overlap:
    replay folds each entry once."""
    settings = archived_settings(prefix, tmp_path)
    await finished(redis, settings, same_partition(2))
    archive = LocalArchive(settings.archive_dir)
    lease = await lease_of(redis, prefix)
    await Archiver(redis, settings, archive, 0).run(0, lease)
    [key] = archive.list(partition_prefix(prefix, 0))
    whole = unpack_segment(archive.get(key))
    entries = whole.entries()[:5]
    part = Segment(
        partition=0, first_id=entries[0].id, last_id=entries[-1].id, turns=[], loose=entries
    )
    archive.put(segment_key(prefix, 0, part.first_id, part.last_id, 5), pack_segment(part))
    assert archive.list(partition_prefix(prefix, 0))[1] == key  # the shorter one comes first
    await Leases(redis, prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    await identical(redis, settings, archive)
