"""A worker of the pool: heartbeats, takes the partitions assigned to it, runs their owners.

Every tick (a third of the lease TTL, or at once when nudged) the worker renews its heartbeat,
computes its partitions from the live pool (`membership.assigned`), gives up the ones it should
no longer own (after their batch in hand), renews the leases it keeps and tries to take the
ones it lacks. A lease still held by a worker that is gone expires after its TTL; only then can
the partition move, and its new owner first drains what the old one left pending. Each tick also
stores the process's own metrics (commit latencies, lease changes, lanes: service/metrics/worker.py)
for the gateway to read, with a TTL of three ticks. With `TERMINUS_RETAIN_MS` > 0 the worker
also archives the partitions it owns in the background (service/runtime/archiving.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid

from redis.asyncio import Redis
from redis.exceptions import RedisError

from terminus.service.fold.commit import LeaseLost
from terminus.service.keys import control_channel
from terminus.service.metrics.worker import WorkerMetrics
from terminus.service.redis.connect import TRANSIENT
from terminus.service.runtime.archiving import ArchiveLoop
from terminus.service.runtime.lanes import Lanes
from terminus.service.runtime.leases import Leases
from terminus.service.runtime.membership import assigned, heartbeat
from terminus.service.runtime.owner import PartitionOwner
from terminus.service.runtime.pump import Pump
from terminus.service.settings import Settings
from terminus.service.shape import ShapeError, partitions_of

log = logging.getLogger("terminus.worker")


def new_worker_id() -> str:
    """Unique across hosts and restarts: a restarted worker never passes for its old self."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class Worker:
    """Owns the partitions the pool assigns it, until `stop`."""

    def __init__(self, redis: Redis, settings: Settings, worker_id: str | None = None) -> None:
        self.redis = redis
        self.settings = settings
        self.worker_id = worker_id or new_worker_id()
        self.leases = Leases(redis, settings.prefix)
        self.metrics = WorkerMetrics()
        self.owners: dict[int, PartitionOwner] = {}
        # Pumps stepping disjoint sets of partitions, as many in use as the load needs.
        self.lanes = Lanes(redis, settings, self.metrics)
        self._nudged = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()
        self._lock = asyncio.Lock()  # a tick and `stop` never move the same partition twice
        self.archiving = ArchiveLoop(redis, settings, self._leased) if settings.retain_ms else None

    @property
    def pumps(self) -> list[Pump]:
        return self.lanes.pumps

    @property
    def partitions(self) -> set[int]:
        return set(self.owners)

    def nudge(self) -> None:
        """Rebalance now instead of at the next tick (a worker joined or left)."""
        self._nudged.set()

    async def run(self) -> None:
        """Tick until `stop`, the owned partitions pumped meanwhile; Redis errors are logged
        and the next tick tries again."""
        interval = self.settings.lease_ttl_ms / 3000
        first = True
        pumping = [asyncio.create_task(p.run(), name=f"pump-{n}") for n, p in enumerate(self.pumps)]
        if self.archiving is not None:
            pumping.append(asyncio.create_task(self.archiving.run(), name="archive"))
        try:
            while not self._stopping.is_set():
                try:
                    if first:
                        await self._agree()
                    await self.tick()
                    await self._flush_metrics()
                    if first:
                        await self._announce()
                        first = False
                except TRANSIENT as exc:
                    log.warning("worker %s: %s", self.worker_id, exc)
                except ShapeError:
                    raise  # no later tick can mend a setting
                except Exception:  # e.g. a key of the wrong type: the next tick tries again
                    # Ending here would leave the pumps running on leases nobody renews, and
                    # the process alive, looking healthy, while the pool lost it.
                    log.exception("worker %s: tick failed", self.worker_id)
                self._reap()
                await self._sleep(interval)
            await self._stopped.wait()  # `stop` retires the owners through the pump
        finally:
            for pump in self.pumps:
                pump.stop()
            if self.archiving is not None:
                self.archiving.stop()
            await asyncio.gather(*pumping)

    async def _agree(self) -> None:
        """The count this worker was built with is the deployment's (service/shape.py),
        recorded now if nothing is: a worker of another count would own streams no producer
        writes to. `ShapeMismatch` otherwise, before it takes any partition."""
        prefix, partitions = self.settings.prefix, self.settings.partitions
        await partitions_of(self.redis, prefix, partitions, source="env", by="pool")

    async def tick(self) -> None:
        """One round of heartbeat and rebalance."""
        async with self._lock:
            if not self._stopping.is_set():
                await self._rebalance()

    async def _rebalance(self) -> None:
        self._reap()
        pool = await heartbeat(self.redis, self.settings.prefix, self.worker_id, self._ttl)
        mine = assigned(self.settings.partitions, pool, self.worker_id)
        released = [p for p in self.owners if p not in mine]
        for partition in released:
            await self._give_up(partition)
        for partition in sorted(set(self.owners) & mine):
            await self._renew(partition)
        for partition in sorted(mine - set(self.owners)):
            await self._take(partition)
        if released:
            await self._announce()

    async def _flush_metrics(self) -> None:
        try:
            await self.metrics.flush(self.redis, self.worker_id, self._ttl, self.settings.prefix)
        except RedisError as exc:  # e.g. a key of another type: metrics must not stop the worker
            log.warning("worker %s: storing metrics: %r", self.worker_id, exc)

    def _leased(self) -> dict[int, str]:
        """The lease value of each partition whose owner is past its takeover."""
        owners = self.owners.items()
        return {p: o.lease for p, o in owners if o.renewing}

    @property
    def _ttl(self) -> int:
        return self.settings.lease_ttl_ms

    async def _take(self, partition: int) -> None:
        epoch = await self.leases.acquire(partition, self.worker_id, self._ttl)
        if epoch is None:
            return  # still held by its previous owner; it expires or is released soon
        owner = PartitionOwner(
            self.redis, self.settings, partition, self.worker_id, epoch, self.metrics
        )
        self.metrics.lease_changed("acquired")
        self.owners[partition] = owner
        self.lanes.add(owner)
        log.info("worker %s took partition %s at epoch %s", self.worker_id, partition, epoch)

    async def _renew(self, partition: int) -> None:
        owner = self.owners[partition]
        # The owner's epoch, not the one it started with: it takes a new one after a
        # connection error (`PartitionOwner._refence`).
        if not await self.leases.renew(partition, self.worker_id, owner.epoch, self._ttl):
            log.warning("worker %s lost partition %s", self.worker_id, partition)
            self.metrics.lease_changed("lost")
            self.lanes.drop(partition)
            del self.owners[partition]

    async def _give_up(self, partition: int) -> None:
        owner = self.owners.pop(partition)
        await self.lanes.retire(partition)
        with contextlib.suppress(*TRANSIENT):
            await self.leases.release(partition, self.worker_id, owner.epoch)
        self.metrics.lease_changed("released")
        log.info("worker %s released partition %s", self.worker_id, partition)

    def _reap(self) -> None:
        """Forget owners that ended on their own (lease lost, or a bug: logged)."""
        for partition, owner in list(self.owners.items()):
            if owner.done:
                del self.owners[partition]
                exc = owner.ended.exception()
                if isinstance(exc, LeaseLost):
                    self.metrics.lease_changed("lost")
                if exc is not None:
                    level = logging.INFO if isinstance(exc, LeaseLost) else logging.ERROR
                    log.log(level, "partition %s ended: %r", partition, exc)

    async def _announce(self) -> None:
        with contextlib.suppress(*TRANSIENT):
            await self.redis.publish(control_channel(self.settings.prefix), self.worker_id)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._nudged.wait(), seconds)
        self._nudged.clear()

    async def stop(self) -> None:
        """Finish each partition's batch in hand, release every lease, leave the pool."""
        self._stopping.set()
        self._nudged.set()
        async with self._lock:
            for partition in list(self.owners):
                await self._give_up(partition)
        with contextlib.suppress(*TRANSIENT):
            await heartbeat(self.redis, self.settings.prefix, self.worker_id, 0)
        await self._announce()
        self._stopped.set()
