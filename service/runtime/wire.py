"""How a pump's requests go on the wire: to one Redis, or to a Redis Cluster.

One Redis: a round is one round trip on the pump's own connection (service/runtime/line.py): one
EVALSHA of round.lua, which runs every busy owner's read or commit-and-read and probes the idle
ones (`Probe`): it reads, in the same call, only the partitions whose logs grew. A wait is one
blocking XREAD over all idle partitions, on the same connection (a round and a wait never
overlap).

A cluster refuses a command whose keys span slots, and each partition is its own slot (`{p}`).
So a round sends each call on its own and one non-blocking XREAD per idle partition, which tells
which logs grew (`Sent.woken`: those owners read in the next round), and redis-py's cluster
pipeline splits the round into one pipeline per primary, sent concurrently; a wait is one
blocking XREAD per partition. The first to answer ends the wait; the others stay in flight into
the next wait rather than being cancelled, as redis-py drops a cancelled command's connection
and the next wait would reconnect.

Commit durability (`commit_wait_replicas` > 0): each connection that carried commits then sends
`WAIT replicas timeout`, which counts only that connection's writes; a shortfall is logged, the
commit stands (WAIT cannot undo it). See docs/design.md section 11 for what this guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

import msgspec
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from terminus.service.fold.commit import Value, pack, packable
from terminus.service.keys import GROUP
from terminus.service.redis.connect import (
    TRANSIENT,
    client_options,
    execute,
    is_cluster,
    refresh_slots,
)
from terminus.service.redis.replies import StreamReply, mget, xread
from terminus.service.redis.scripts import sha, source
from terminus.service.runtime.line import Command, Line
from terminus.service.settings import Settings

log = logging.getLogger("terminus.pump")


Call = tuple[str, list[str], list[Value]]  # a script's name, KEYS and ARGV


class Probe(NamedTuple):
    """An idle owner, read in the round only if its log holds an entry after `tail` (the last
    id it read, or was told ends the log, in its lease's epoch)."""

    lease_key: str
    stream: str
    lease: str
    consumer: str
    tail: str


class Sent(NamedTuple):
    """A round's answers: each call's reply (an exception in its place if it failed); on one
    Redis, the reply of each probe whose log grew, by its place among the probes (read.lua's
    reply, or an exception); on a cluster, which probed streams grew (`woken`) instead."""

    replies: list[Any]
    read: dict[int, Any]
    woken: StreamReply


class Wire:
    """Sends a pump's rounds, waits and loads on `redis`, whichever kind it is."""

    def __init__(self, redis: Redis, settings: Settings, *, own_connection: bool = True) -> None:
        self.redis = redis
        self.cluster = is_cluster(redis)
        # One Redis: rounds on a connection of the pump's own (`Line`), unless the caller
        # sends one request and would leave a connection behind.
        own = own_connection and not self.cluster
        self._line = Line(redis, client_options(settings)["socket_timeout"]) if own else None
        self.replicas = settings.commit_wait_replicas
        self.count = settings.batch_size  # a probe's read, as an owner's
        self.wait_ms = settings.commit_wait_ms
        self.shortfalls = 0  # WAITs that returned fewer replicas than asked for
        # On a cluster: the blocking XREAD of each idle partition, left in flight from one
        # wait to the next (a cancelled command costs its connection, and a reconnect).
        self._waits: dict[str, asyncio.Future[StreamReply]] = {}

    async def send(self, calls: Sequence[Call], idle: Sequence[Probe] = ()) -> Sent:
        """Run `calls` and probe `idle` in one round trip (one per node on a cluster); raises
        on a connection error."""
        if self.cluster:
            return await self._send_cluster(calls, idle)
        bundled = len(calls) > 1 or bool(idle)
        sent = [bundle(calls, idle, self.count)] if bundled else list(calls)
        commands = [_evalsha(call) for call in sent]
        waits = self._waits_for(any(name == "commit" for name, _, _ in calls))
        commands.extend(waits)
        results = await self._run(commands)
        replies = results[: len(sent)]
        self._check_waits(results[len(sent) :])
        await self._redo_unknown(sent, replies, commits=bool(waits))
        if not bundled:
            return Sent(replies, {}, [])
        each, read = unbundle(replies, len(calls))
        return Sent(each, read, [])

    async def _send_cluster(self, calls: Sequence[Call], idle: Sequence[Probe]) -> Sent:
        """`send` on a cluster: each call and each idle stream's XREAD on its own, split per
        primary by redis-py's cluster pipeline."""
        await cast(RedisCluster, self.redis).initialize()  # a no-op once it knows the slots
        pipe = self.redis.pipeline(transaction=False)
        committing = [keys for name, keys, _ in calls if name == "commit"]
        waits = self._calls(pipe, calls, committing)
        for probe in idle:
            pipe.xread({probe.stream: probe.tail}, count=1)
        results = await execute(pipe, raise_on_error=False)
        replies = results[: len(calls)]
        self._check_waits(results[len(calls) : len(calls) + waits])
        await self._redo_unknown(calls, replies)
        return Sent(replies, {}, _woken(results[len(calls) + waits :]))

    async def _run(self, commands: Sequence[Command]) -> list[Any]:
        """On one Redis: the commands in one round trip, on the pump's own connection where it
        has one (`Line`), else through a pipeline."""
        if self._line is not None:
            return await self._line.run(commands)
        pipe = self.redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return await execute(pipe, raise_on_error=False)

    def _waits_for(self, commits: bool) -> list[Command]:
        """On one Redis, the WAIT that follows a round's commits on their connection."""
        if not self.replicas or not commits:
            return []
        return [("WAIT", self.replicas, self.wait_ms)]

    def _calls(self, pipe: Any, calls: Sequence[Call], committing: list[list[str]]) -> int:
        """On a cluster: queue the calls, then the WAITs of the nodes that carry the commits
        among them (`committing`, their KEYS), each after that node's commits, on the same
        connection; how many WAITs."""
        for call in calls:
            pipe.execute_command(*_evalsha(call))
        if not self.replicas or not committing:
            return 0
        cluster = cast(RedisCluster, self.redis)
        nodes = {n.name: n for n in (cluster.get_node_from_key(k[0]) for k in committing) if n}
        for node in nodes.values():
            pipe.execute_command("WAIT", self.replicas, self.wait_ms, target_nodes=node)
        return len(nodes)

    def _check_waits(self, acks: list[Any]) -> None:
        for ack in acks:
            if isinstance(ack, Exception) or int(ack) < self.replicas:
                self.shortfalls += 1
                log.warning("commit reached %r of %d replicas", ack, self.replicas)

    async def _redo_unknown(
        self, calls: Sequence[Call], replies: list[Any], commits: bool = False
    ) -> None:
        """A server without our scripts (a restart, a promoted replica): load them, redo. On one
        Redis, `commits`: the calls hold commits (a WAIT follows them)."""
        unknown = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if not unknown:
            return
        for name in {calls[n][0] for n in unknown}:
            await self.redis.script_load(source(name))  # on a cluster: every primary
        again = [calls[n] for n in unknown]
        if self.cluster:  # calls there go one by one (never bundled): redo only their commits
            committing = [keys for name, keys, _ in again if name == "commit"]
            redo = self.redis.pipeline(transaction=False)
            waits = self._calls(redo, again, committing)
            results = await execute(redo, raise_on_error=False)
        else:
            commands = [_evalsha(call) for call in again] + self._waits_for(commits)
            waits = len(commands) - len(again)
            results = await self._run(commands)
        for n, reply in zip(unknown, results, strict=False):
            replies[n] = reply
        self._check_waits(results[len(unknown) : len(unknown) + waits])

    async def wait(self, streams: Mapping[str, str], block_ms: int) -> StreamReply:
        """Until one of `streams` has an entry after its id, or `block_ms` elapsed ([])."""
        if self._line is not None:  # cancelled (an owner came or went), it drops the connection
            return _woken(await self._line.run([_xread(streams, block_ms)]))
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
        """Cancel the waits still in flight; close the pump's own connection."""
        if self._line is not None:
            await self._line.close()
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


def _evalsha(call: Call) -> Command:
    name, keys, args = call
    return ("EVALSHA", sha(name), len(keys), *keys, *args)


def _xread(streams: Mapping[str, str], block_ms: int | None = None) -> Command:
    """XREAD of an entry after each stream's id; blocking up to `block_ms` if given."""
    block = () if block_ms is None else ("BLOCK", block_ms)
    return ("XREAD", "COUNT", 1, *block, "STREAMS", *streams, *streams.values())


def _woken(replies: Sequence[Any]) -> StreamReply:
    """The streams the round's XREADs found entries on; raises a failed XREAD's error."""
    woken: StreamReply = []
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        # As the server sent it on the pump's own connection: a map under RESP3.
        woken.extend(reply.items() if isinstance(reply, dict) else reply or [])
    return woken


def bundle(calls: Sequence[Call], probes: Sequence[Probe] = (), count: int = 0) -> Call:
    """The calls, and the probes reading up to `count` entries each, as one call of round.lua
    (one Redis only: their keys span partitions)."""
    keys: list[str] = []
    packed: list[tuple[str, int, list[Value | msgspec.Raw]]] = []
    for name, call_keys, call_args in calls:
        keys.extend(call_keys)
        # Each value as a script's ARGV holds it (numbers as text, bytes as msgpack str).
        packed.append((name, len(call_keys), [packable(a) for a in call_args]))
    args: list[Value] = [pack(packed)]
    if probes:
        fences: list[str] = []
        for probe in probes:
            keys += (probe.lease_key, probe.stream)
            fences += (probe.lease, probe.consumer, probe.tail)
        args.append(pack([GROUP, str(count), fences]))
    return "round", keys, args


def unbundle(replies: list[Any], calls: int) -> tuple[list[Any], dict[int, Any]]:
    """Each call's reply out of round.lua's (its error in every place if the script failed), and
    each grown probe's read by its place among the probes (none if the script failed)."""
    [reply] = replies
    if isinstance(reply, Exception):
        return [reply] * calls, {}
    if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], list)):
        return [RuntimeError(f"round.lua answered {reply!r:.200}")] * calls, {}
    each, hits = reply
    if len(each) != calls or len(hits) % 2:
        return [RuntimeError(f"round.lua answered {reply!r:.200} for {calls} calls")] * calls, {}
    return each, {int(hits[n]) - 1: hits[n + 1] for n in range(0, len(hits), 2)}
