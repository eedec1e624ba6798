"""How a pump's requests go on the wire: to one Redis, or to a Redis Cluster.

One Redis: a round is one pipeline of one EVALSHA of round.lua, which runs every owner's read or
commit-and-read, then one non-blocking XREAD over all idle partitions; a wait is one blocking
XREAD over all of them.

A cluster refuses a command whose keys span slots, and each partition is its own slot (`{p}`).
So a round sends one XREAD per idle partition, and redis-py's cluster pipeline splits the round
into one pipeline per primary, sent concurrently; a wait is one blocking XREAD per partition. The
first to answer ends the wait; the others stay in flight into the next wait rather than being
cancelled, as redis-py drops a cancelled command's connection and the next wait would reconnect.

Commit durability (`commit_wait_replicas` > 0): each connection that carried commits then sends
`WAIT replicas timeout`, which counts only that connection's writes; a shortfall is logged, the
commit stands (WAIT cannot undo it). See docs/design.md section 11 for what this guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from terminus.service.fold.commit import Value, pack, packable
from terminus.service.redis.connect import TRANSIENT, execute, is_cluster, refresh_slots
from terminus.service.redis.replies import StreamReply, mget, xread
from terminus.service.redis.scripts import sha, source
from terminus.service.settings import Settings

log = logging.getLogger("terminus.pump")


Call = tuple[str, list[str], list[Value]]  # a script's name, KEYS and ARGV


class Wire:
    """Sends a pump's rounds, waits and loads on `redis`, whichever kind it is."""

    def __init__(self, redis: Redis, settings: Settings) -> None:
        self.redis = redis
        self.cluster = is_cluster(redis)
        self.replicas = settings.commit_wait_replicas
        self.wait_ms = settings.commit_wait_ms
        self.shortfalls = 0  # WAITs that returned fewer replicas than asked for
        # On a cluster: the blocking XREAD of each idle partition, left in flight from one
        # wait to the next (a cancelled command costs its connection, and a reconnect).
        self._waits: dict[str, asyncio.Future[StreamReply]] = {}

    async def send(
        self, calls: Sequence[Call], idle: Mapping[str, str]
    ) -> tuple[list[Any], StreamReply]:
        """Each call's reply (an exception in its place if it failed), and which idle streams
        (name -> last id seen) have entries after their id; raises on a connection error."""
        if self.cluster:
            await cast(RedisCluster, self.redis).initialize()  # a no-op once it knows the slots
        pipe = self.redis.pipeline(transaction=False)
        bundled = len(calls) > 1 and not self.cluster
        sent = [bundle(calls)] if bundled else list(calls)
        committing = [keys for name, keys, _ in calls if name == "commit"]
        waits = self._calls(pipe, sent, committing)
        reads = [idle] if not self.cluster else [{k: v} for k, v in idle.items()]
        for streams in reads if idle else []:
            pipe.xread(cast(Any, streams), count=1)
        results = await execute(pipe, raise_on_error=False)
        replies = results[: len(sent)]
        self._check_waits(results[len(sent) : len(sent) + waits])
        await self._redo_unknown(sent, replies, committing)
        woken: StreamReply = []
        for reply in results[len(sent) + waits :]:
            if isinstance(reply, Exception):
                raise reply
            woken.extend(reply or [])
        return unbundle(replies, len(calls)) if bundled else replies, woken

    def _calls(self, pipe: Any, calls: Sequence[Call], committing: list[list[str]]) -> int:
        """Queue the calls, then the WAITs of the connections that carry the commits among
        them (`committing`, their KEYS); how many WAITs."""
        for name, keys, args in calls:
            pipe.execute_command("EVALSHA", sha(name), len(keys), *keys, *args)
        if not self.replicas or not committing:
            return 0
        if not self.cluster:
            pipe.execute_command("WAIT", self.replicas, self.wait_ms)
            return 1
        cluster = cast(RedisCluster, self.redis)
        nodes = {n.name: n for n in (cluster.get_node_from_key(k[0]) for k in committing) if n}
        for node in nodes.values():  # after that node's commits, on the same connection
            pipe.execute_command("WAIT", self.replicas, self.wait_ms, target_nodes=node)
        return len(nodes)

    def _check_waits(self, acks: list[Any]) -> None:
        for ack in acks:
            if isinstance(ack, Exception) or int(ack) < self.replicas:
                self.shortfalls += 1
                log.warning("commit reached %r of %d replicas", ack, self.replicas)

    async def _redo_unknown(
        self, calls: Sequence[Call], replies: list[Any], committing: list[list[str]]
    ) -> None:
        """A server without our scripts (a restart, a promoted replica): load them, redo."""
        unknown = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if not unknown:
            return
        for name in {calls[n][0] for n in unknown}:
            await self.redis.script_load(source(name))  # on a cluster: every primary
        redo = self.redis.pipeline(transaction=False)
        again = [calls[n] for n in unknown]
        if self.cluster:  # calls there go one by one (never bundled): redo only their commits
            committing = [keys for name, keys, _ in again if name == "commit"]
        waits = self._calls(redo, again, committing)
        results = await execute(redo, raise_on_error=False)
        for n, reply in zip(unknown, results, strict=False):
            replies[n] = reply
        self._check_waits(results[len(unknown) : len(unknown) + waits])

    async def wait(self, streams: Mapping[str, str], block_ms: int) -> StreamReply:
        """Until one of `streams` has an entry after its id, or `block_ms` elapsed ([])."""
        if not self.cluster:
            return await xread(self.redis, streams, 1, block_ms)
        for key, cursor in streams.items():
            if key not in self._waits:  # a wait still in flight started at or before `cursor`
                read = xread(self.redis, {key: cursor}, 1, block_ms)
                self._waits[key] = asyncio.ensure_future(read)
        watched = [self._waits[key] for key in streams]
        await asyncio.wait(watched, timeout=block_ms / 1000, return_when="FIRST_COMPLETED")
        return self._collect()

    def _collect(self) -> StreamReply:
        """What the finished waits read (they end for good); raises the first one's error."""
        woken: StreamReply = []
        errors: list[BaseException] = []
        for key, read in list(self._waits.items()):
            if not read.done():
                continue
            del self._waits[key]
            if read.cancelled():
                continue
            if read.exception() is not None:
                errors.append(cast(BaseException, read.exception()))
            else:
                woken.extend(read.result())
        if errors:
            raise errors[0]
        return woken

    async def recover(self, error: BaseException) -> None:
        """After a lost connection on a cluster, re-read the slot map before the next round: the
        client does not retry (connect.no_resends), so nothing else would, and every round
        would go to a dead primary again. Until its replica is promoted the map is unchanged,
        and the next failed round asks again."""
        if self.cluster and isinstance(error, TRANSIENT):
            await refresh_slots(self.redis)

    async def close(self) -> None:
        """Cancel the waits still in flight."""
        waits, self._waits = list(self._waits.values()), {}
        for read in waits:
            read.cancel()
        for read in waits:
            with contextlib.suppress(asyncio.CancelledError, *TRANSIENT):
                await read

    async def load(self, keys: Sequence[list[str]]) -> list[list[bytes | None]]:
        """MGET each list of keys (each list within one slot) in one round trip per node."""
        if self.cluster:
            return list(await asyncio.gather(*(mget(self.redis, k) for k in keys)))
        pipe = self.redis.pipeline(transaction=False)
        for k in keys:
            pipe.mget(k)
        return cast(list[list[bytes | None]], await execute(pipe))


def bundle(calls: Sequence[Call]) -> Call:
    """The calls as one call of round.lua (one Redis only: their keys span partitions)."""
    keys: list[str] = []
    packed: list[tuple[str, int, list[Value | msgspec.Raw]]] = []
    for name, call_keys, call_args in calls:
        keys.extend(call_keys)
        # Each value as a script's ARGV holds it (numbers as text, bytes as msgpack str).
        packed.append((name, len(call_keys), [packable(a) for a in call_args]))
    return "round", keys, [pack(packed)]


def unbundle(replies: list[Any], calls: int) -> list[Any]:
    """Each call's reply out of round.lua's; its error in every place if the script failed."""
    [reply] = replies
    if isinstance(reply, Exception):
        return [reply] * calls
    if not isinstance(reply, list) or len(reply) != calls:
        return [RuntimeError(f"round.lua answered {reply!r:.200} for {calls} calls")] * calls
    return reply
