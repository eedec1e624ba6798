"""Redis stays bounded while turns keep arriving, with retention on (TERMINUS_RETAIN_MS): after
every round of turns, once the round is released, the key count and the stream lengths are
under bounds that do not depend on how many rounds came before. The same traffic without
retention grows by every turn's keys and entries, so the bound is retention's doing.

Each round is one turn in each of some sessions: the same sessions every round (a chat that
goes on), or new ones every round (new chats), whose streams go once idle and archived.

Bounds, by what holds each key (P partitions, T turns per round, one per session):
  per partition   in, lease, epoch, metrics, transitions, archived, turns   7 P
  the pool        workers, a worker's metrics                                2
  per session     the session stream of the sessions still in use           3 T
  tombstones      released and not yet forgotten: the last rounds            3 T
Messages and partials of archived turns are released. The transitions stream keeps the state
changes of the entries the live log still holds (a release trims it to an earlier release's
mark): about two rounds' worth, whatever the number of rounds.

A turn is released once it *started* more than the retention ago, usually before its last frame
is that old; its session's stream must still go once it is idle, however much later (the last
tests move the archiver's clock instead of waiting: `server_ms` is what it reads).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Final, NamedTuple, cast

import msgspec
import pytest
from redis.asyncio import Redis
from serving import running_worker
from test_replay import PARTITIONS, answer
from test_retention import archived_settings, settle
from test_retention_safety import ME, identical, lease_of, same_partition

from terminus.service.fold.releases import TOMBSTONE, id_key
from terminus.service.keys import Keys
from terminus.service.metrics.counters import TURNS_FINISHED, field_of
from terminus.service.redis.replies import StreamEntry
from terminus.service.retention.archive import LocalArchive
from terminus.service.retention.archiver import Archiver, PassResult
from terminus.service.retention.reads import server_ms
from terminus.service.runtime.leases import Leases
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.polling import until

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

TURNS: Final = 6  # per round
ROUNDS: Final = 20
SESSION_MAXLEN: Final = 20
NODE: Final = 100  # stream-node-max-entries: MAXLEN ~ trims whole nodes
ENTRIES: Final = len(answer("s", "t"))
FINISHED: Final = field_of((TURNS_FINISHED, "stop_reason", "end_turn"))


class Sample(NamedTuple):
    keys: int
    inbound: int  # entries in every inbound log
    longest_session: int
    transitions: int  # entries in every transitions stream


async def sample(redis: Redis, prefix: str) -> Sample:
    keys = [key async for key in redis.scan_iter(match=f"{prefix}:*", count=1000)]
    every = [Keys(p, prefix) for p in range(PARTITIONS)]
    inbound = sum([await redis.xlen(k.inbound) for k in every])
    sessions = [k for k in keys if b":session:" in k]
    longest = max([await redis.xlen(k) for k in sessions], default=0)
    transitions = sum([await redis.xlen(k.transitions) for k in every])
    return Sample(len(keys), inbound, longest, transitions)


async def finished(redis: Redis, prefix: str) -> int:
    counts = [await redis.hget(Keys(p, prefix).metrics, FINISHED) for p in range(PARTITIONS)]
    return sum(int(c or 0) for c in counts)


async def released(redis: Redis, prefix: str) -> bool:
    """No turn snapshot left but tombstones: every finished turn went to the archive."""
    async for key in redis.scan_iter(match=f"{prefix}:*:turn:*", count=1000):
        if await redis.get(key) not in (None, TOMBSTONE):
            return False
    return True


def sessions(round_no: int, fresh: bool) -> list[str]:
    return [f"s-{round_no if fresh else 0}-{n}" for n in range(TURNS)]


async def rounds(
    redis: Redis,
    prefix: str,
    retain_ms: int,
    tmp_path: Path,
    settled: Callable[[], Awaitable[bool]],
    fresh: bool = False,
) -> list[Sample]:
    """ROUNDS rounds of one complete turn per session; a sample once each round `settled`."""
    settings = msgspec.structs.replace(
        archived_settings(prefix, tmp_path, retain_ms), session_maxlen=SESSION_MAXLEN
    )
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    samples = []
    async with running_worker(redis, settings):
        for n in range(ROUNDS):
            for session in sessions(n, fresh):
                await producer.publish(answer(session, f"t-{n}-{session}"))
            done = partial(_reached, redis, prefix, (n + 1) * TURNS)
            await until(done, f"round {n} to finish")
            await until(settled, f"round {n} to settle")
            samples.append(await sample(redis, prefix))
    return samples


async def _reached(redis: Redis, prefix: str, count: int) -> bool:
    return await finished(redis, prefix) >= count


@pytest.mark.parametrize("fresh", [False, True], ids=["same-sessions", "new-sessions"])
async def test_keys_and_streams_stay_bounded_with_retention(
    redis: Redis, prefix: str, tmp_path: Path, fresh: bool
) -> None:
    settled = partial(released, redis, prefix)
    samples = await rounds(redis, prefix, 1, tmp_path, settled, fresh)

    max_keys = 7 * PARTITIONS + 2 + 3 * TURNS + 3 * TURNS
    assert max(s.keys for s in samples) <= max_keys, samples
    assert max(s.inbound for s in samples) <= 2 * TURNS * ENTRIES, samples
    assert max(s.longest_session for s in samples) <= SESSION_MAXLEN + NODE, samples
    per_round = samples[0].transitions  # nothing trimmed yet: no release before the first
    assert per_round > 0
    assert max(s.transitions for s in samples) <= 2 * per_round, samples
    settings = archived_settings(prefix, tmp_path)
    await identical(redis, settings, LocalArchive(settings.archive_dir))  # trimmed alike


async def test_without_retention_every_turn_stays(
    redis: Redis, prefix: str, tmp_path: Path
) -> None:
    async def committed() -> bool:
        return True

    samples = await rounds(redis, prefix, 0, tmp_path, committed, fresh=True)

    assert samples[-1].keys >= 3 * ROUNDS * TURNS  # a snapshot, a stream, messages per turn
    assert samples[-1].inbound == ROUNDS * TURNS * ENTRIES
    assert samples[-1].transitions == ROUNDS * samples[0].transitions


class Clock:
    """The archiver's clock (`server_ms`), set by the test."""

    def __init__(self) -> None:
        self.now_ms = 0

    async def __call__(self, redis: Redis) -> int:
        return self.now_ms


async def server_past(redis: Redis, ms: int) -> None:
    """Wait until the server's clock is past `ms` (ids after it are later, not tied)."""
    await until(lambda: _past(redis, ms), f"the server clock to pass {ms}")


async def _past(redis: Redis, ms: int) -> bool:
    return await server_ms(redis) > ms


async def last_ms(redis: Redis, key: str) -> int:
    rows = cast("list[StreamEntry]", await redis.xrevrange(key, count=1))
    return id_key(rows[0][0].decode())[0]


@pytest.mark.parametrize("later", ["with-a-segment", "in-a-quiet-log"])
async def test_a_session_released_before_it_is_idle_goes_once_it_is(
    redis: Redis,
    admin_redis: Redis,
    prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    later: str,
) -> None:
    """Its turn goes with a pass that finds the session's last frame younger than the
    retention; a later pass, with more of the log to archive or with none, deletes it."""
    settings = archived_settings(prefix, tmp_path)  # retention 0: the test runs the archiver
    [session] = same_partition(1)
    keys, events = Keys(0, prefix), answer(session, "t1")
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    split = 1 if later == "with-a-segment" else len(events)
    cut_ms = id_key((await producer.publish(events[:split]))[-1].decode())[0] + 1
    await server_past(redis, cut_ms)  # the frames come later than the entries before the cut
    await settle(redis, settings)  # a worker folds what is logged so far
    if events[split:]:
        await producer.publish(events[split:])
        await settle(redis, settings)
    frame_ms = await last_ms(redis, keys.session(session))
    assert frame_ms > cut_ms  # so a pass can release the turn with its frames still young
    await server_past(redis, frame_ms + 1)  # the release entry comes after every frame
    clock, retain = Clock(), 60_000
    monkeypatch.setattr("terminus.service.retention.archiver.server_ms", clock)
    archive = LocalArchive(settings.archive_dir)

    clock.now_ms = cut_ms + retain
    assert (await archive_pass(redis, settings, archive, retain)).released == 1
    assert await redis.get(keys.turn("t1")) == TOMBSTONE
    # not idle yet: its frames are young
    assert await admin_redis.exists(keys.session(session)) == 1
    assert await redis.zrange(keys.resting, 0, -1) == [session.encode()]
    clock.now_ms = frame_ms + 1 + retain
    done = await archive_pass(redis, settings, archive, retain)

    assert (done.archived > 0) == (later == "with-a-segment")  # the case the test is about
    assert await admin_redis.exists(keys.session(session)) == 0
    assert await admin_redis.zcard(keys.resting) == 0
    await identical(redis, settings, archive)


async def archive_pass(
    redis: Redis, settings: Settings, archive: LocalArchive, retain_ms: int
) -> PassResult:
    """Passes over partition 0 until one archives nothing, then a worker folds the releases."""
    lease = await lease_of(redis, settings.prefix)
    done = await Archiver(redis, settings, archive, retain_ms).run_until_done(0, lease)
    await Leases(redis, settings.prefix).release(0, ME, int(lease.rsplit(":", 1)[1]))
    await settle(redis, settings)
    return done
