"""`terminus replay`: rebuild every projection from the inbound logs under another prefix, and
with `verify`, compare it with the live one (DESIGN section 6, invariant 4).

With an archive (service/retention/archiver.py), a partition's log is its archived segments, in
order, then the live log after the last segment's end: the entries exactly as they were, with their
ids, so the fold sees what the live workers saw, the archiver's release entries included. A
running archiver moves entries from the log to the archive while they are read: with retention
on, verify a stopped pool (or one started with `TERMINUS_RETAIN_MS=0`).

The rebuild runs the live workers' own code (`PartitionFold` and the lease-fenced commit) over
each partition's log up to the entry its consumer group has delivered last. One decision is not
in the log: an entry dead-lettered for being delivered too often depends on crash history, so the
live dead letters with that reason are applied as recorded.

What is compared, partition by partition: turn snapshots, the open-turns set with its deadlines,
messages and their order, partials, and the contents (not the ids) of session streams, commands,
transitions and dead letters. Streams capped with `MAXLEN ~` may trim at other points, since the
ids differ; for those only the entries both sides still hold, the newest, are compared. Verify a
quiet pool: entries still pending are reported as a difference, not guessed at.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from terminus.service.cli.verify import compare
from terminus.service.fold.applier import Entry, PartitionFold, Timeouts, decode_entries
from terminus.service.fold.commit import Batch, commit
from terminus.service.fold.cycle import fold_and_commit
from terminus.service.fold.releases import id_key
from terminus.service.keys import GROUP, START, Keys
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import text, xrange
from terminus.service.retention.archive import Archive, partition_prefix, segment_info
from terminus.service.retention.records import unpack_segment
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.settings import Settings

REPLAYER: Final = "replay"
DELIVERED: Final = "delivered "

Progress = Callable[[int, int], None]  # (entries folded so far, entries in the logs)


@dataclass
class ReplayReport:
    entries: int = 0
    partitions: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences


@dataclass
class _Tally:
    """Entries folded so far, passed on to a progress hook after each page."""

    total: int
    progress: Progress | None
    done: int = 0

    def add(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done, self.total)


async def rebuild(
    redis: Redis,
    settings: Settings,
    target: str,
    progress: Progress | None = None,
    archive: Archive | None = None,
) -> int:
    """Fold every partition's log into `target`; returns how many entries were folded.

    `progress(done, total)` is called after each page: entries folded so far, and the entries
    the logs held when the rebuild began (entries not yet delivered to the group are not folded,
    so `done` may end below `total` on a busy pool). `archive`: read it before the live logs."""
    total = await _logged(redis, settings, archive) if progress is not None else 0
    tally = _Tally(total, progress)
    tally.add(0)  # the total is known before the first page is folded
    for partition in range(settings.partitions):
        source = _Source(redis, settings, partition, archive)
        await _rebuild_partition(source, target, tally.add)
    return tally.done


async def _logged(redis: Redis, settings: Settings, archive: Archive | None) -> int:
    async with redis.pipeline(transaction=False) as pipe:
        for partition in range(settings.partitions):  # one XLEN per key: each its own slot
            pipe.xlen(Keys(partition, settings.prefix).inbound)
        lengths: list[int] = await execute(pipe)
    archived = 0
    for partition in range(settings.partitions) if archive is not None else ():
        where = partition_prefix(settings.prefix, partition)
        archived += sum(segment_info(key)[1] for key in await _listed(archive, where))
    return sum(lengths) + archived


async def _listed(archive: Archive | None, where: str) -> list[str]:
    return [] if archive is None else await asyncio.to_thread(archive.list, where)


@dataclass
class _Source:
    """Where one partition's entries come from: the archive, then the live log."""

    redis: Redis
    settings: Settings
    partition: int
    archive: Archive | None

    async def pages(self, page: int) -> AsyncIterator[list[Entry]]:
        """Every entry in log order, in pages of about `page`."""
        keys = Keys(self.partition, self.settings.prefix)
        segments = await _listed(self.archive, partition_prefix(keys.prefix, self.partition))
        end = (0, -1)
        for key in segments:
            assert self.archive is not None
            blob = await asyncio.to_thread(self.archive.get, key)
            # Segments may overlap (an archiver that lost its lease wrote one): the entries
            # are the log's either way, so each id is folded once, from the first segment.
            archived = [e for e in unpack_segment(blob).entries() if id_key(e.id) > end]
            entries = [Entry(e.id, dict(e.fields)) for e in archived]
            for first in range(0, len(entries), page):
                yield entries[first : first + page]
            end = max(end, id_key(segment_info(key)[0]))
        after = "-" if end == (0, -1) else "(" + "-".join(map(str, end))
        async for entries in _log(self.redis, keys, page, after):
            yield entries


async def _rebuild_partition(source: _Source, target: str, folded: Callable[[int], None]) -> None:
    redis, settings, partition = source.redis, source.settings, source.partition
    live, into = Keys(partition, settings.prefix), Keys(partition, target)
    timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
    fold = PartitionFold(into, settings.core(), timeouts, settings.session_maxlen, live.inbound)
    epoch = await Leases(redis, target).acquire(partition, REPLAYER, 600_000)
    assert epoch is not None, f"another replay holds {into.lease}"
    lease = lease_value(REPLAYER, epoch)
    forced = await _forced_dead(redis, live)
    async for entries in source.pages(settings.batch_size):
        decoded = decode_entries(
            entries, settings.max_deliveries, forced, max_bytes=settings.max_event_bytes
        )
        await fold_and_commit(redis, fold, decoded, partial(_commit, redis, into, lease))
        folded(len(entries))
    await Leases(redis, target).release(partition, REPLAYER, epoch)


async def _commit(redis: Redis, keys: Keys, lease: str, batch: Batch) -> None:
    batch.acks.clear()  # nothing to ack: the log is read with XRANGE, not the group
    await commit(redis, keys, lease, batch)


async def _forced_dead(redis: Redis, live: Keys) -> dict[str, str]:
    """Entries dead-lettered live for their delivery count, which the log cannot tell."""
    rows = await xrange(redis, live.dead)
    forced = {}
    for _, fields in rows:
        reason = fields.get(b"reason", b"").decode()
        if reason.startswith(DELIVERED):
            forced[fields[b"source_id"].decode()] = reason
    return forced


async def _log(redis: Redis, keys: Keys, page: int, start: str) -> AsyncIterator[list[Entry]]:
    """The inbound log from `start` in pages, up to the last entry the group delivered."""
    horizon = await _horizon(redis, keys)
    while horizon is not None:
        rows = await xrange(redis, keys.inbound, start, horizon, page)
        if not rows:
            return
        yield [Entry(i.decode(), fields) for i, fields in rows]
        start = "(" + rows[-1][0].decode()


async def _horizon(redis: Redis, keys: Keys) -> str | None:
    try:
        groups = cast("list[dict[str, object]]", await redis.xinfo_groups(keys.inbound))
    except ResponseError:  # no such stream: nothing was ever published here
        return None
    for group in groups:
        if text(group["name"]) == GROUP:
            last = text(group["last-delivered-id"])
            return None if last == START else last
    return None


async def pending_counts(redis: Redis, settings: Settings) -> dict[int, int]:
    """Partitions with entries read but not yet committed."""
    counts = {}
    for partition in range(settings.partitions):
        keys = Keys(partition, settings.prefix)
        try:
            summary = await redis.xpending(keys.inbound, GROUP)
        except ResponseError:
            continue
        if summary["pending"]:
            counts[partition] = int(summary["pending"])
    return counts


async def replay(
    redis: Redis,
    settings: Settings,
    *,
    verify: bool = False,
    target: str | None = None,
    keep: bool = False,
    progress: Progress | None = None,
    archive: Archive | None = None,
) -> ReplayReport:
    """Rebuild into `target` (default `<prefix>-replay`, cleared first), compare if asked, and
    remove the rebuilt keys unless `keep`; `progress` is told of the rebuild as in `rebuild`."""
    target = target or f"{settings.prefix}-replay"
    if target == settings.prefix:
        raise ValueError("replay must write under another prefix than the live one")
    await clear_prefix(redis, target)
    report = ReplayReport(partitions=settings.partitions)
    report.entries = await rebuild(redis, settings, target, progress, archive)
    if verify:
        for partition, count in sorted((await pending_counts(redis, settings)).items()):
            report.differences.append(f"p{partition}: {count} entries pending, not yet committed")
        report.differences += await compare(
            redis, settings.partitions, settings.prefix, target, settings.session_maxlen
        )
    if not keep:
        await clear_prefix(redis, target)
    return report


async def clear_prefix(redis: Redis, prefix: str) -> None:
    """UNLINK every key under `prefix:` (SCAN, never KEYS, which blocks the server)."""
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await redis.unlink(*batch)
            batch.clear()
    if batch:
        await redis.unlink(*batch)
