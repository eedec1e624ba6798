"""What the end-to-end benchmark asks Redis: publishing, drain progress, server costs, checks.

Progress is read from the consumer groups (XINFO GROUPS works on Redis 6.2 and 7): a partition
is drained when its group has delivered up to the last entry published and has nothing pending,
that is when every entry is acked. Each commit writes the frames and acks in one script, so an
acked entry's frames are already visible to a reader.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from time import perf_counter
from typing import Any, Final, NamedTuple, cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent
from terminus.service.cli.replay import clear_prefix
from terminus.service.keys import FIELD, GROUP, Keys, keys_for_session, partition_of
from terminus.service.redis.connect import is_cluster
from terminus.service.redis.replies import mget
from terminus.service.sdk.producer import Producer

PIPELINE_EVENTS: Final = 1000
POLL_S: Final = 0.02


def routed(events: Iterable[InboundEvent], partitions: int, prefix: str) -> list[tuple[str, bytes]]:
    """(inbound stream, encoded event) of every event, as a producer would append it."""
    return [
        (Keys(partition_of(e.session_id, partitions), prefix).inbound, encode_event(e))
        for e in events
    ]


async def xadd_all(redis: Redis, entries: Sequence[tuple[str, bytes]]) -> dict[str, bytes]:
    """Pipelined XADDs, `PIPELINE_EVENTS` a round trip; the last id of each stream."""
    tails: dict[str, bytes] = {}
    for start in range(0, len(entries), PIPELINE_EVENTS):
        chunk = entries[start : start + PIPELINE_EVENTS]
        async with redis.pipeline(transaction=False) as pipe:
            for stream, raw in chunk:
                pipe.xadd(stream, {FIELD: raw})
            ids: list[bytes] = await pipe.execute()
        tails.update(zip((s for s, _ in chunk), ids, strict=True))
    return tails


async def publish_all(
    redis: Redis, events: Sequence[InboundEvent], partitions: int, prefix: str
) -> dict[str, bytes]:
    """`Producer.publish` of every event, `PIPELINE_EVENTS` at a time; the last id per stream."""
    producer = Producer(redis, partitions=partitions, prefix=prefix)
    tails: dict[str, bytes] = {}
    for start in range(0, len(events), PIPELINE_EVENTS):
        chunk = events[start : start + PIPELINE_EVENTS]
        ids = await producer.publish(chunk)
        tails.update(zip((producer.inbound_key(e.session_id) for e in chunk), ids, strict=True))
    return tails


async def groups(redis: Redis, streams: Sequence[str]) -> list[dict[str, Any] | None]:
    """Our group's XINFO GROUPS row of each stream, None where it does not exist yet."""
    async with redis.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xinfo_groups(stream)
        replies: list[list[dict[str, Any]]] = await pipe.execute()
    wanted = GROUP.encode()
    return [next((g for g in rows if g["name"] == wanted), None) for rows in replies]


async def wait_started(
    redis: Redis, streams: Sequence[str], timeout_s: float, check: Callable[[], None]
) -> float:
    """Poll until a group has delivered an entry: when the workers begin; its perf_counter."""
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        rows = await groups(redis, streams)
        if any(r and r["last-delivered-id"] != b"0-0" for r in rows):
            return perf_counter()
        check()
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"no worker read an entry within {timeout_s:.0f}s")


async def wait_drained(
    redis: Redis, tails: dict[str, bytes], timeout_s: float, check: Callable[[], None]
) -> float:
    """Poll until every entry up to `tails` is acked; its perf_counter. `check` raises if the
    workers died."""
    streams = sorted(tails)
    last = [tails[s] for s in streams]
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        rows = await groups(redis, streams)
        now = perf_counter()
        delivered = [r["last-delivered-id"] if r else None for r in rows]
        if delivered == last and all(r and r["pending"] == 0 for r in rows):
            return now
        check()
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"inbound logs not drained within {timeout_s:.0f}s")


async def wait_marked(
    redis: Redis,
    prefix: str,
    partitions: int,
    tails: dict[str, bytes],
    timeout_s: float,
    check: Callable[[], None],
) -> float:
    """Poll until the `terminus traces` follower's mark of every partition is at its tail in
    `tails` (a mark is written once a pass is exported: every turn up to it was); its
    perf_counter. `check` raises if the follower died."""
    keys = [Keys(p, prefix) for p in range(partitions)]
    wanted = {k.traces_mark: tails[k.inbound].decode() for k in keys if k.inbound in tails}
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        marks = await mget(redis, sorted(wanted))
        through = [m and msgspec.json.decode(m)["through"] for m in marks]
        if through == [wanted[k] for k in sorted(wanted)]:
            return perf_counter()
        check()
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"spans not exported within {timeout_s:.0f}s")


async def wait_split(redis: Redis, prefix: str, partitions: int, workers: int) -> None:
    """Until every partition is leased and `workers` processes hold the leases: the pool has
    split them."""
    keys = [Keys(p, prefix).lease for p in range(partitions)]
    while True:
        values = await mget(redis, keys)
        if None not in values and len({v.rsplit(b":", 1)[0] for v in values if v}) >= workers:
            return
        await asyncio.sleep(POLL_S)


async def park_groups(redis: Redis, streams: Sequence[str]) -> None:
    """Our group on each stream, at its end: nothing to read yet (a start gun's first half)."""
    for stream in streams:
        await redis.xgroup_create(stream, GROUP, id="$")


async def rewind_groups(redis: Redis, streams: Sequence[str]) -> None:
    """Our group on each stream back to its start: every entry is new again, for whichever
    worker owns the stream by then (the start gun fired)."""
    for stream in streams:
        await redis.xgroup_setid(stream, GROUP, "0")


async def wait_owned(redis: Redis, prefix: str, partitions: int, timeout_s: float) -> None:
    """Until every partition's lease is held (the workers are up and own the partitions)."""
    leases = [Keys(p, prefix).lease for p in range(partitions)]
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        if await redis.exists(*leases) == partitions:
            return
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"workers did not take all {partitions} partitions in {timeout_s:.0f}s")


async def wait_grouped(redis: Redis, prefix: str, partitions: int, timeout_s: float) -> None:
    """Until every partition's inbound log has our group (the peer's process is up)."""
    streams = [Keys(p, prefix).inbound for p in range(partitions)]
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        with contextlib.suppress(ResponseError):  # no such key yet
            if all(await groups(redis, streams)):
                return
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"no group on all {partitions} partitions in {timeout_s:.0f}s")


class ServerUsage(NamedTuple):
    """Redis main-process CPU seconds, forks (AOF rewrites) and, per command, (calls,
    microseconds) so far."""

    cpu_s: float
    forks: int
    commands: dict[str, tuple[int, int]]

    def minus(self, before: ServerUsage) -> ServerUsage:
        earlier = before.commands
        return ServerUsage(
            self.cpu_s - before.cpu_s,
            self.forks - before.forks,
            {name: _minus(now, earlier.get(name, (0, 0))) for name, now in self.commands.items()},
        )

    def usec(self, *names: str) -> int:
        return sum(self.commands.get(n, (0, 0))[1] for n in names)


def _minus(now: tuple[int, int], before: tuple[int, int]) -> tuple[int, int]:
    return now[0] - before[0], now[1] - before[1]


async def _infos(redis: Redis, section: str) -> list[dict[str, Any]]:
    """INFO `section` of the server, or of every primary of a cluster."""
    if not is_cluster(redis):
        return [await redis.info(section)]
    cluster = cast(RedisCluster, redis)
    by_node = await cluster.info(section, target_nodes=RedisCluster.PRIMARIES)
    return list(cast("dict[str, dict[str, Any]]", by_node).values())


async def server_usage(redis: Redis) -> ServerUsage:
    """CPU, forks and per-command counts of the server (summed over a cluster's primaries)."""
    cpu_s, forks, commands = 0.0, 0, dict[str, tuple[int, int]]()
    for cpu in await _infos(redis, "cpu"):
        cpu_s += float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    for stats in await _infos(redis, "stats"):
        forks += int(stats.get("total_forks", 0))
    for per_command in await _infos(redis, "commandstats"):
        for name, row in per_command.items():
            calls, usec = commands.get(name.removeprefix("cmdstat_"), (0, 0))
            commands[name.removeprefix("cmdstat_")] = (
                calls + int(row["calls"]),
                usec + int(row["usec"]),
            )
    return ServerUsage(cpu_s, forks, commands)


class Outcome(NamedTuple):
    """What the workers left: frames in the session streams, dead letters, turns still open."""

    frames: int
    dead: int
    open_turns: int


async def outcome(redis: Redis, sessions: Iterable[str], partitions: int, prefix: str) -> Outcome:
    every = [Keys(p, prefix) for p in range(partitions)]
    async with redis.pipeline(transaction=False) as pipe:
        for session in sorted(set(sessions)):
            pipe.xlen(keys_for_session(session, partitions, prefix).session(session))
        frames: list[int] = await pipe.execute()
        for keys in every:
            pipe.xlen(keys.dead)
            pipe.zcard(keys.open_turns)
        counts: list[int] = await pipe.execute()
    return Outcome(sum(frames), sum(counts[::2]), sum(counts[1::2]))


async def compact_aof(redis: Redis, timeout_s: float = 120.0) -> None:
    """Rewrite the AOF now and wait for it: a phase then starts with a small AOF, so no
    rewrite of earlier phases' data lands in its measurement. Not on a cluster (a rewrite per
    node would need each node's own client): its phases may include a rewrite."""
    if is_cluster(redis):
        return
    with contextlib.suppress(ResponseError):  # one is running already: wait for it
        await redis.bgrewriteaof()
    deadline = perf_counter() + timeout_s
    while perf_counter() < deadline:
        info: dict[str, Any] = await redis.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            return
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"AOF rewrite still running after {timeout_s:.0f}s")


async def delete_prefix(redis: Redis, prefix: str) -> None:
    """Remove every key of a benchmark prefix (on a Redis the user gave us)."""
    await clear_prefix(redis, prefix)
