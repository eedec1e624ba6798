"""The archiver: moves a partition's old log to the archive, lets its final turns go, trims.

One pass over a partition, by the holder of its lease (DESIGN section 5, retention):

1. The archive's last segment of the partition tells where the archive ends. If the log still
   holds entries up to there, the previous pass stopped between its steps: it is finished first
   (steps 4 and 5 again; both are safe to repeat).
2. Scan the log after that point, up to the first of: an entry the consumer group has not
   delivered yet, an entry still pending, an entry younger than `retain_ms` by its id, the first
   entry of a turn that is not final, `MAX_SEGMENT` entries. What the scan passed is the segment.
3. Put the segment in the archive, durably (the archive's `put` returns once it is on disk):
   the entries of each final turn with its snapshot, message and partial (`TurnRecord`), and the
   loose entries of no final turn.
4. Append a release entry through the lease-fenced append script: the fold turns each archived
   turn's snapshot into a tombstone and deletes its message and partial, deletes the
   tombstones released more than `retain_ms` ago (`forget`) and the streams of idle sessions
   (service/retention/idle.py), and trims the transitions and commands streams to the mark of an
   earlier release older than the segment's end (`archived_to`). A pass with no segment sends
   a release too, for tombstones and idle sessions alone, but only on a log folded to its end,
   so that a quiet partition lets its last sessions go without sending the same release twice.
5. Trim the log to the segment's end with trim.lua, which checks the lease, the pending entries
   and the group's delivered id in the same script as the XTRIM.

A crash after 3 leaves a segment whose entries are also still in the log: the next pass sees
that and does 4 and 5; replay reads the log only after the archive's end, so nothing is folded
twice. A crash during 3 leaves no object (write, fsync, rename). A release is idempotent: the
fold skips turns it has released already, and a replay folds the same releases at the same
places, so it releases the same state.
"""

from __future__ import annotations

import asyncio
from typing import Final, NamedTuple, cast

from redis.asyncio import Redis

from terminus.service.fold.applier import Entry, decode_entries
from terminus.service.fold.commit import LeaseLost
from terminus.service.fold.releases import (
    RELEASE_FIELD,
    TOMBSTONE,
    Release,
    encode_release,
    id_key,
    next_id,
)
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.connect import execute
from terminus.service.redis.replies import text, xrange
from terminus.service.redis.scripts import script
from terminus.service.retention.archive import Archive, partition_prefix, segment_info, segment_key
from terminus.service.retention.idle import idle_sessions
from terminus.service.retention.reads import (
    Head,
    delivered_limit,
    folded_all,
    holds_up_to,
    is_final,
    is_open,
    mget_all,
    read_head,
    server_ms,
)
from terminus.service.retention.records import (
    ArchivedEntry,
    Segment,
    TurnRecord,
    pack_segment,
    unpack_segment,
)
from terminus.service.settings import Settings
from terminus.statemachines.projection import message_id_of

MAX_SEGMENT: Final = 10_000  # entries per segment: one object stays a few MB at most
PAGE: Final = 1_000
FORGET_LIMIT: Final = 1_000  # tombstones deleted per release entry


class PassResult(NamedTuple):
    archived: int  # entries put in the archive
    released: int  # turns listed in the release entry
    trimmed: int  # entries trimmed from the log


class Archiver:
    """Archives and trims the partitions whose lease the caller holds."""

    def __init__(self, redis: Redis, settings: Settings, archive: Archive, retain_ms: int) -> None:
        self.redis = redis
        self.settings = settings
        self.archive = archive
        self.retain_ms = retain_ms
        # partition -> (lease, key of its last segment): listing a partition's segments, which
        # keep accumulating, once per lease rather than once per pass
        self._last: dict[int, tuple[str, str]] = {}

    async def run(self, partition: int, lease: str) -> PassResult:
        """One pass (module docstring); raises `LeaseLost` if the lease is not `lease`."""
        keys = Keys(partition, self.settings.prefix)
        last = await self._last_segment(partition, lease)
        now_ms = await server_ms(self.redis)
        cursor = segment_info(last)[0] if last is not None else None
        if last is not None and await holds_up_to(self.redis, keys, segment_info(last)[0]):
            blob = await asyncio.to_thread(self.archive.get, last)
            return await self._finish(keys, lease, unpack_segment(blob), now_ms, 0)
        entries = await self._scan(keys, cursor, now_ms - self.retain_ms)
        segment = await self._segment(keys, entries)
        if segment is None:
            return await self._finish(keys, lease, None, now_ms, 0)
        count = len(segment.entries())
        if await self.redis.get(keys.lease) != lease.encode():
            # Not a fence (the put below is not atomic with it), but a stale archiver mostly
            # stops here; one that gets past writes a segment of the log's own entries, which
            # replay reads once (service/cli/replay.py) and the owner's next pass continues after.
            raise LeaseLost(partition, lease)
        key = segment_key(self.settings.prefix, partition, segment.first_id, segment.last_id, count)
        # Compressing and writing off the event loop, which the worker's pumps share.
        await asyncio.to_thread(lambda: self.archive.put(key, pack_segment(segment)))
        self._last[partition] = (lease, key)
        return await self._finish(keys, lease, segment, now_ms, count)

    async def _last_segment(self, partition: int, lease: str) -> str | None:
        """The key of the partition's last segment: listed when the lease is new to us."""
        cached = self._last.get(partition)
        if cached is not None and cached[0] == lease:
            return cached[1]
        where = partition_prefix(self.settings.prefix, partition)
        listed = await asyncio.to_thread(self.archive.list, where)
        if not listed:
            return None
        self._last[partition] = (lease, listed[-1])
        return listed[-1]

    async def run_until_done(self, partition: int, lease: str, passes: int = 100) -> PassResult:
        """Passes until one archives nothing (a backlog takes several segments)."""
        total = PassResult(0, 0, 0)
        for _ in range(passes):
            done = await self.run(partition, lease)
            total = PassResult(*(a + b for a, b in zip(total, done, strict=True)))
            if not done.archived:
                break
        return total

    async def _scan(self, keys: Keys, cursor: str | None, horizon_ms: int) -> list[Entry]:
        """Entries after `cursor` that are delivered, not pending and older than the horizon."""
        limit = await delivered_limit(self.redis, keys)
        if limit is None:
            return []
        start = "-" if cursor is None else "(" + cursor
        found: list[Entry] = []
        while len(found) < MAX_SEGMENT:
            rows = await xrange(self.redis, keys.inbound, start, limit, PAGE)
            for raw_id, fields in rows:
                entry_id = raw_id.decode()
                if id_key(entry_id)[0] >= horizon_ms or len(found) >= MAX_SEGMENT:
                    return found
                found.append(Entry(entry_id, fields))
            if len(rows) < PAGE:
                return found
            start = "(" + rows[-1][0].decode()
        return found

    async def _segment(self, keys: Keys, entries: list[Entry]) -> Segment | None:
        """The segment the scanned entries allow: up to the first entry of an open turn."""
        decoded = decode_entries(
            entries, max_deliveries=1 << 30, max_bytes=self.settings.max_event_bytes
        )
        turn_of = [d.event.turn_id if d.event is not None else None for d in decoded]
        wanted = sorted({t for t in turn_of if t is not None})
        raws = await mget_all(self.redis, [keys.turn(t) for t in wanted])
        heads = {t: read_head(raw) for t, raw in zip(wanted, raws, strict=True)}
        final = {t: raw for t, raw in zip(wanted, raws, strict=True) if is_final(heads[t])}
        cut = next((n for n, t in enumerate(turn_of) if t and is_open(heads[t])), len(entries))
        if cut == 0:
            return None
        by_turn: dict[str, list[ArchivedEntry]] = {}
        loose: list[ArchivedEntry] = []
        for entry, turn_id in zip(entries[:cut], turn_of[:cut], strict=True):
            kept = ArchivedEntry(entry.id, list(entry.fields().items()))
            if turn_id is not None and turn_id in final:
                by_turn.setdefault(turn_id, []).append(kept)
            else:
                loose.append(kept)
        records = await self._records(keys, by_turn, final, heads)
        return Segment(
            partition=keys.partition,
            first_id=entries[0].id,
            last_id=entries[cut - 1].id,
            turns=records,
            loose=loose,
        )

    async def _records(
        self,
        keys: Keys,
        by_turn: dict[str, list[ArchivedEntry]],
        final: dict[str, bytes | None],
        heads: dict[str, Head | None],
    ) -> list[TurnRecord]:
        """What each final turn left in Redis, next to its entries."""
        turn_ids = list(by_turn)
        async with self.redis.pipeline(transaction=False) as pipe:
            for turn_id in turn_ids:
                session = cast(Head, heads[turn_id]).session_id
                pipe.hget(keys.messages(session), message_id_of(turn_id))
                pipe.hget(keys.partials(session), turn_id)
            found = cast("list[bytes | None]", await execute(pipe))
        records = []
        for n, turn_id in enumerate(turn_ids):
            head = cast(Head, heads[turn_id])
            records.append(
                TurnRecord(
                    turn_id=turn_id,
                    session_id=head.session_id,
                    state=head.state.value,
                    entries=by_turn[turn_id],
                    snapshot=cast(bytes, final[turn_id]),
                    message=found[2 * n],
                    partial=found[2 * n + 1],
                )
            )
        return records

    async def _finish(
        self, keys: Keys, lease: str, segment: Segment | None, now_ms: int, archived: int
    ) -> PassResult:
        """Release the segment's turns (and old tombstones, idle sessions), then trim the log
        to its end."""
        release = await self._release(keys, segment, now_ms)
        if release is not None:
            run = script(self.redis, "append_owned")
            args: list[str | bytes] = [lease, RELEASE_FIELD, encode_release(release)]
            if await run(keys=[keys.lease, keys.inbound], args=args) == 0:
                raise LeaseLost(keys.partition, lease)
        trimmed = 0
        if segment is not None:
            trimmed = await self._trim(keys, lease, segment.last_id)
        return PassResult(archived, len(release.turns) if release else 0, trimmed)

    async def _release(self, keys: Keys, segment: Segment | None, now_ms: int) -> Release | None:
        """What the pass lets go; None for nothing. Without a segment, only on a log folded to
        its end: a release the fold has not applied yet would otherwise be sent again by each
        pass until it is (with a segment, the trim moves on and the repeat is rare)."""
        if segment is None and not await folded_all(self.redis, keys):
            return None
        turn_ids = [r.turn_id for r in segment.turns] if segment is not None else []
        current = await mget_all(self.redis, [keys.turn(t) for t in turn_ids])
        still = [
            t for t, raw in zip(turn_ids, current, strict=True) if raw not in (None, TOMBSTONE)
        ]
        forget = await self._forgettable(keys, now_ms)
        idle = await self._idle_sessions(keys, segment, now_ms)
        if not (still or forget or idle):
            return None
        archived_to = segment.last_id if segment is not None else ""
        return Release(turns=still, forget=forget, sessions=idle, archived_to=archived_to)

    async def _idle_sessions(
        self, keys: Keys, segment: Segment | None, now_ms: int
    ) -> list[tuple[str, bytes]]:
        """Sessions with no open turn whose last frame is older than the retention and of a
        released turn or one of the segment's (service/retention/idle.py)."""
        archived = {r.turn_id: r.session_id for r in segment.turns} if segment else {}
        return await idle_sessions(self.redis, keys, archived, now_ms - self.retain_ms)

    async def _forgettable(self, keys: Keys, now_ms: int) -> list[str]:
        if self.retain_ms <= 0:
            return []  # archiving by hand (`terminus archive`): tombstones stay
        horizon = now_ms - self.retain_ms
        found = await self.redis.zrangebyscore(
            keys.archived, "-inf", f"({horizon}", 0, FORGET_LIMIT
        )
        return [text(t) for t in cast("list[bytes]", found)]

    async def _trim(self, keys: Keys, lease: str, last_id: str) -> int:
        run = script(self.redis, "trim")
        args = [lease, GROUP, last_id, next_id(last_id)]
        result = int(await run(keys=[keys.lease, keys.inbound], args=args))
        if result == -1:
            raise LeaseLost(keys.partition, lease)
        return max(result, 0)  # -2, -3: not yet; the next pass finishes it
