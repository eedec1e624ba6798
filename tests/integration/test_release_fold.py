"""Release entries in the fold (service/fold/applier.py): whatever the batch boundaries, the same
log gives the same projections, since the live pool and a replay cut batches differently.
"""

from __future__ import annotations

from typing import Final, cast

import msgspec
import pytest
from redis.asyncio import Redis
from test_replay import PARTITIONS, answer, settings_for

from terminus.events.codec import encode_event
from terminus.events.inbound import TextDelta, TurnStarted
from terminus.service.cli.replay import rebuild
from terminus.service.cli.verify import compare
from terminus.service.fold.releases import RELEASE_FIELD, Release, encode_release
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session
from terminus.service.metrics.counters import IGNORED, field_of
from terminus.service.redis.replies import StreamEntry

BATCHES: Final = (1, 2, 3, 5)
SESSION: Final = "s-x"


def log() -> list[dict[bytes, bytes]]:
    """A finished turn released, a late event, an open turn whose release is refused, the first
    turn's tombstone forgotten, a late event after that, and a release that does not decode."""
    late = TurnStarted(session_id=SESSION, turn_id="t-x", seq=0)
    after = TextDelta(session_id=SESSION, turn_id="t-x", seq=9, part_id="a", delta="!")
    events = [
        *answer(SESSION, "t-x"),
        Release(turns=["t-x"]),
        late,
        *answer(SESSION, "t-y")[:3],
        Release(turns=["t-y"]),
        Release(forget=["t-x"]),
        after,
        b"{bad",
    ]
    return [_fields(item) for item in events]


def _fields(item: object) -> dict[bytes, bytes]:
    if isinstance(item, Release):
        return {RELEASE_FIELD: encode_release(item)}
    if isinstance(item, bytes):
        return {RELEASE_FIELD: item}
    return {FIELD: encode_event(cast(TurnStarted, item))}


@pytest.fixture
async def logged(redis: Redis, prefix: str) -> Keys:
    keys = keys_for_session(SESSION, PARTITIONS, prefix)
    ids = [await redis.xadd(keys.inbound, dict(fields)) for fields in log()]  # type: ignore[arg-type]
    await redis.xgroup_create(keys.inbound, GROUP, id=ids[-1])
    return keys


async def test_the_release_entries_fold_to_the_same_projections_in_any_batches(
    redis: Redis, prefix: str, logged: Keys
) -> None:
    whole = f"{prefix}:whole"
    await rebuild(redis, settings_for(prefix), whole)
    for size in BATCHES:
        settings = msgspec.structs.replace(settings_for(prefix), batch_size=size)
        await rebuild(redis, settings, f"{prefix}:by{size}")
        assert await compare(redis, PARTITIONS, whole, f"{prefix}:by{size}", 10_000) == []

    keys = Keys(logged.partition, whole)
    assert await redis.get(keys.turn("t-x")) is None  # released, then forgotten
    assert await redis.zrange(keys.archived, 0, -1) == []
    assert await redis.hget(keys.messages(SESSION), "msg-t-x") is None
    assert await redis.get(keys.turn("t-y")) is not None  # open: its release was refused
    assert await redis.zrange(keys.open_turns, 0, -1) == [b"t-y"]
    dead = cast("list[StreamEntry]", await redis.xrange(keys.dead))
    reasons = [fields[b"reason"].decode() for _, fields in dead]
    assert reasons[0] == "illegal: t-x: event for a turn that never started"
    assert reasons[1].startswith("undecodable: release: ")
    late = field_of((IGNORED, "reason", "late"))
    assert await redis.hget(keys.metrics, late) == b"1"
