"""Sink processes sharing the partitions: membership, leases and one follower per partition.

The workers' own machinery in the sink's namespace (`keys.sink_prefix`): each process
heartbeats into the sink's member set, rendezvous hashing says which partitions are its, and it
holds a lease (with an epoch) on each while its follower runs. A partition moves when its
holder leaves or stops renewing; the new holder's claim in the database fences the old one.
A follower is stopped between pages, never cancelled inside a transaction; one that fails (Redis
away) is logged and started again at the next tick, as a new follower that claims anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from redis.asyncio import Redis
from redis.exceptions import RedisError

from terminus.service.keys import Keys, sink_prefix, sinks_key
from terminus.service.retention.archive import Archive
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.membership import assigned, heartbeat
from terminus.service.settings import Settings
from terminus.service.sinks import Fenced
from terminus.service.sinks.follower import Follower, Tally
from terminus.service.sinks.target import Target
from terminus.service.sinks.transact import DatabaseAway

log = logging.getLogger("terminus.sink")


@dataclass
class Summary:
    """What `once` did: partitions written, those another sink held, and the totals."""

    done: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)

    def add(self, partition: int, tally: Tally) -> None:
        self.done.append(partition)
        for name in ("entries", "rows", "refused", "retries"):
            setattr(self.tally, name, getattr(self.tally, name) + getattr(tally, name))


@dataclass
class _Running:
    follower: Follower
    task: asyncio.Task[Tally]


class SinkPool:
    """One sink process named `name`, writing to `target`."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        target: Target,
        name: str,
        member: str,
        archive: Archive | None = None,
    ) -> None:
        self.redis = redis
        self.settings = settings
        self.target = target
        self.name = name
        self.member = member
        self.archive = archive
        self.prefix = sink_prefix(name, settings.prefix)
        self.leases = Leases(redis, self.prefix)
        self.running: dict[int, _Running] = {}
        self._stopping = asyncio.Event()

    def _follower(self, partition: int, epoch: int) -> Follower:
        return Follower(
            self.redis,
            self.settings,
            self.target.session(),
            self.name,
            Keys(partition, self.prefix),
            epoch,
            self.archive,
        )

    async def once(self) -> Summary:
        """Write every committed entry of each partition no other sink holds, then return."""
        await self._listed()
        summary = Summary()
        ttl = self.settings.lease_ttl_ms
        for partition in range(self.settings.partitions):
            epoch = await self.leases.acquire(partition, self.member, ttl)
            if epoch is None:
                summary.held.append(partition)
                continue
            follower = self._follower(partition, epoch)
            renewing = asyncio.create_task(self._renew(partition, epoch, follower))
            try:
                summary.add(partition, await follower.run(once=True))
            finally:
                renewing.cancel()
                await follower.session.close()
                await self.leases.release(partition, self.member, epoch)
        return summary

    async def _renew(self, partition: int, epoch: int, follower: Follower) -> None:
        ttl = self.settings.lease_ttl_ms
        while await self.leases.renew(partition, self.member, epoch, ttl):
            await asyncio.sleep(ttl / 3000)
        follower.stop.set()

    async def run(self) -> None:
        """Follow this process's share of the partitions until `stop`."""
        ttl = self.settings.lease_ttl_ms
        await self._listed()
        try:
            while not self._stopping.is_set():
                try:
                    await self._tick(ttl)
                except RedisError as exc:  # Redis away: the next tick tries again
                    log.warning("sink %s: %s", self.name, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), ttl / 3000)
        finally:
            for partition in list(self.running):
                await self._let_go(partition)
            await heartbeat(self.redis, self.prefix, self.member, 0)

    async def _listed(self) -> None:
        """Name this sink where `GET /metrics` finds its counters (a hash, not a set: the
        service's ACL user has the hash commands already, docs/security.md)."""
        await self.redis.hset(sinks_key(self.settings.prefix), self.name, self.prefix)

    def stop(self) -> None:
        self._stopping.set()

    async def _tick(self, ttl: int) -> None:
        members = await heartbeat(self.redis, self.prefix, self.member, ttl)
        mine = assigned(self.settings.partitions, members, self.member)
        for partition in [p for p in self.running if p not in mine]:
            await self._let_go(partition)
        for partition in sorted(mine):
            await self._hold(partition, ttl)

    async def _hold(self, partition: int, ttl: int) -> None:
        epoch = await self.leases.acquire(partition, self.member, ttl)
        running = self.running.get(partition)
        if running is not None and (running.task.done() or running.follower.epoch != epoch):
            await self._stopped(partition)  # ended, or lost its lease meanwhile
            running = None
        if epoch is None or running is not None:
            return
        follower = self._follower(partition, epoch)
        task = asyncio.create_task(follower.run())
        self.running[partition] = _Running(follower, task)

    async def _stopped(self, partition: int) -> None:
        running = self.running.pop(partition)
        running.follower.stop.set()
        try:
            await running.task
        except (Fenced, DatabaseAway) as exc:  # moved on, or given up while the database was away
            log.warning("sink %s p%d: %s", self.name, partition, exc)
        except Exception:
            log.exception("sink %s p%d: follower failed", self.name, partition)
        finally:
            await running.follower.session.close()

    async def _let_go(self, partition: int) -> None:
        epoch = self.running[partition].follower.epoch
        await self._stopped(partition)
        await self.leases.release(partition, self.member, epoch)
