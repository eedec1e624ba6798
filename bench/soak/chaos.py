"""The faults of the soak, one at a time at random moments: SIGKILL a worker (the supervisor
starts another; the first and every other time the sink too, when the soak runs one), SIGSTOP
one past its lease then SIGCONT it, SIGKILL redis-server and start it again on its port and
AOF, blackhole the workers' (and the sink's) connections, and inject malformed entries. On a
cluster, instead of the server's restart and the blackhole: SIGKILL the primary of a random
partition, wait for its replica's promotion, and start the dead node again (it rejoins as a
replica, so the next failover has one).

Kinds are drawn from a shuffled deck, so that every kind comes once before any comes twice and
even a short run sees them all. Each fault is recorded with its start, end and details.
Malformed entries are written straight into random partitions' logs (undecodable ones: their
expected reason is known) or published as sessions (a seq far ahead in an honest turn, a turn
that never started: the fold says which entries the core rejects and why), and one entry of
another session names the open turn of a session in play (its reason comes from the core, and
the checker's comparison of that session's frames shows it reached nothing).
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Sequence
from typing import Any, Final, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bench.soak.load import Load
from bench.soak.rig import Rig
from bench.soak.series import Fault, Series
from terminus.events.codec import encode_event
from terminus.service.keys import Keys
from terminus.service.redis.cluster import ClusterNode, LocalCluster
from terminus.service.redis.embedded import EmbeddedRedisError
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn
from tests.support.faults import harness, malformed

KINDS: Final = ("kill_worker", "pause_worker", "restart_redis", "blackhole", "malformed")
CLUSTER_KINDS: Final = ("kill_worker", "pause_worker", "failover", "malformed")
PROMOTION_S: Final = 30.0
Source = tuple[str, str]


class Chaos:
    """Injects faults until `until_s` seconds into the run, one every ~`every_s` seconds."""

    def __init__(
        self,
        rig: Rig,
        redis: Redis,
        load: Load,
        series: Series,
        every_s: float,
        seed: int,
        kinds: Sequence[str] = KINDS,
    ) -> None:
        self.rig, self.redis, self.load, self.series = rig, redis, load, series
        self.every_s, self.kinds = every_s, list(kinds)
        self.rng = random.Random(seed)
        self.sink_turn = 0  # kill_worker faults so far: the odd ones kill the sink too
        self.injected: dict[Source, malformed.Junk] = {}
        self.rounds = 0

    async def run(self, until_s: float) -> None:
        """One fault after another until `until_s`; the fault under way then finishes."""
        deck: list[str] = []
        while True:
            await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.every_s)
            if self.series.now() >= until_s:
                return
            if not deck:
                deck = list(self.kinds)
                self.rng.shuffle(deck)
            kind = deck.pop()
            start = self.series.now()
            detail = await getattr(self, kind)()
            self.series.faults.append(
                Fault(kind=kind, start_s=start, end_s=self.series.now(), detail=detail)
            )

    async def kill_worker(self) -> dict[str, Any]:
        """SIGKILL a worker holding a batch if one does; returns what it left pending."""
        settings, pool = self.rig.settings, self.rig.pool
        pending = await harness.kill_busy_and_replace(self.redis, settings, pool, self.rng)
        return {"pending": pending} | self._kill_sink()

    def _kill_sink(self) -> dict[str, Any]:
        """The first time and every other time after (no random draw, so that the other faults
        keep their seed's order, and a short run kills the sink too), SIGKILL the sink as well:
        the supervisor starts another."""
        sinks = self.rig.sinks
        self.sink_turn += 1
        if sinks is None or not sinks.running() or self.sink_turn % 2 == 0:
            return {}
        victim = sinks.running()[0]
        sinks.kill(victim)
        return {"sink_killed": victim.pid}

    async def pause_worker(self) -> dict[str, Any]:
        """SIGSTOP a worker for twice its lease (its partitions move on), then SIGCONT it."""
        victim = self.rng.choice(self.rig.pool.running())
        seconds = round(2 * self.rig.config.lease_ttl_ms / 1000 + self.rng.uniform(0, 1), 2)
        self.rig.pool.signal(victim, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.rig.pool.signal(victim, signal.SIGCONT)
        return {"pid": victim.pid, "seconds": seconds}

    async def restart_redis(self) -> dict[str, Any]:
        """SIGKILL redis-server; after a moment down, start it on the same port and AOF."""
        down = round(self.rng.uniform(0.5, 2.0), 2)
        self.rig.server.kill()
        await asyncio.sleep(down)
        await asyncio.to_thread(self.rig.server.start)
        return {"down_s": down}

    async def failover(self) -> dict[str, Any]:
        """SIGKILL the primary of a random partition; once a replica serves its slot, start the
        dead node again and wait until every replica is linked (the next failover needs one)."""
        cluster = self.rig.cluster
        assert cluster is not None, "failover is a cluster's fault"
        partition = self.rng.randrange(self.rig.settings.partitions)
        key = Keys(partition, self.rig.settings.prefix).root
        victim = await asyncio.to_thread(cluster.primary_of, key)
        start = self.series.now()
        victim.kill()
        deadline = start + PROMOTION_S
        while await asyncio.to_thread(_primary_or_none, cluster, key) in (None, victim):
            if self.series.now() > deadline:
                break
            await asyncio.sleep(0.1)
        promoted_s = round(self.series.now() - start, 2)
        await asyncio.to_thread(victim.start)
        await asyncio.to_thread(cluster.wait_ok)
        return {"partition": partition, "port": victim.port, "promoted_s": promoted_s}

    async def blackhole(self) -> dict[str, Any]:
        """Silence every worker connection for 3-8 s."""
        seconds = round(self.rng.uniform(3.0, 8.0), 2)
        await self.rig.blackhole(seconds)
        return {"seconds": seconds}

    async def malformed(self) -> dict[str, Any]:
        """One entry of each undecodable kind (a 2 MB one every 4th round), one session with a
        seq gap and a regression, one event of a turn that never started."""
        n, self.rounds = self.rounds, self.rounds + 1
        items = [
            malformed.bad_json(self.rng),
            malformed.bad_msgpack(self.rng, n),
            malformed.unknown_type(n),
            malformed.wrong_seq_type(),
            malformed.wrong_delta_type(n),
            malformed.no_event_field(n),
            malformed.poison(n),  # not UTF-8, nested past any limit, an integer out of range
        ]
        if n % 4 == 0:
            items.append(malformed.oversized())
        for item in items:
            stream = Keys(
                self.rng.randrange(self.rig.settings.partitions), self.rig.settings.prefix
            )
            entry_id = cast(bytes, await self.redis.xadd(stream.inbound, item.fields))  # type: ignore[arg-type]
            self.injected[stream.inbound, entry_id.decode()] = item
        await self._publish_session(f"gap-{n}", malformed.gap_turn(f"gap-{n}"))
        await self._publish_session(f"ghost-{n}", [malformed.ghost_event(f"ghost-{n}")])
        foreign = await self._foreign_entry(n)
        return {"undecodable": len(items), "rejected_sessions": 2, "foreign": foreign}

    async def _foreign_entry(self, n: int) -> str | None:
        """An entry of another session of its partition naming the open turn of a session in
        play; the session it names, or None if no turn was open."""
        victim = self._open_turn()
        if victim is None:
            return None
        partitions = self.rig.settings.partitions
        session_id = malformed.beside(victim.session_id, partitions, f"foreign-{n}")
        intruder = malformed.foreign_event(session_id, victim)
        producer = self.load.producer
        [entry_id] = await producer.publish([intruder])
        producer.published.pop(session_id, None)  # judged as a dead letter, not as a session
        source = (producer.inbound_key(session_id), entry_id.decode())
        reason = malformed.foreign_reason(victim, intruder)
        self.load.reader.dead[source] = (reason, encode_event(intruder))
        return victim.session_id

    def _open_turn(self) -> Turn | None:
        """The latest turn of a session still publishing, if the fold has it open."""
        watches = [w for w in self.load.reader.active.values() if not w.closed and w.sent]
        self.rng.shuffle(watches)
        for watch in watches:
            turn = watch.fold.expected.turns.get(watch.sent[-1][0])
            if turn is not None and turn.state not in FINAL_STATES:
                return turn
        return None

    async def _publish_session(self, session_id: str, events: list[Any]) -> None:
        watch = self.load.reader.watch(session_id)
        try:
            await self.load.publish(watch, events)
        finally:
            watch.closed = True


def _primary_or_none(cluster: LocalCluster, key: str) -> ClusterNode | None:
    """The node serving `key`'s slot as a primary, None while none does."""
    try:
        return cluster.primary_of(key)
    except (EmbeddedRedisError, OSError, RedisError):
        return None
