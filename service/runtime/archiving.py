"""Running the archiver: in the background of a worker, and for `terminus archive`.

A worker with `TERMINUS_RETAIN_MS` > 0 runs `ArchiveLoop`: every interval, a pass over each
partition it owns, with the owner's current lease value (every write of a pass is fenced by it).
`terminus archive` takes the lease of each partition no worker holds, archives it and gives
the lease back; partitions a worker holds are reported as skipped (that worker archives them
itself when it runs with retention on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from redis.asyncio import Redis

from terminus.service.fold.commit import LeaseLost
from terminus.service.redis.connect import TRANSIENT
from terminus.service.retention.archive import Archive, LocalArchive
from terminus.service.retention.archiver import Archiver, PassResult
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.settings import Settings

log = logging.getLogger("terminus.archive")

CLI_LEASE_MS: Final = 60_000


def local_archive(settings: Settings) -> LocalArchive:
    """The archive `TERMINUS_ARCHIVE_DIR` names."""
    return LocalArchive(Path(settings.archive_dir))


def interval_s(retain_ms: int) -> float:
    """How often a worker archives: often enough that the log stays near `retain_ms` long."""
    return max(0.05, min(retain_ms / 4000, 5.0))


class ArchiveLoop:
    """Archives the partitions `owned()` names (partition -> lease value) until `stop`."""

    def __init__(
        self,
        redis: Redis,
        settings: Settings,
        owned: Callable[[], Mapping[int, str]],
        archive: Archive | None = None,
    ) -> None:
        archive = archive if archive is not None else local_archive(settings)
        self.archiver = Archiver(redis, settings, archive, settings.retain_ms)
        self.owned = owned
        self.interval = interval_s(settings.retain_ms)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            for partition, lease in sorted(self.owned().items()):
                if self._stopping.is_set():
                    return
                await self._one(partition, lease)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    async def _one(self, partition: int, lease: str) -> None:
        try:
            await self.archiver.run_until_done(partition, lease)
        except LeaseLost:
            pass  # the owner finds out on its next commit; the new owner archives
        except TRANSIENT as exc:
            log.warning("partition %s: archive: %r", partition, exc)
        except Exception:  # a full disk, a bad object: logged, retried at the next interval
            log.exception("partition %s: archive failed", partition)


async def archive_free_partitions(
    redis: Redis, settings: Settings, archive: Archive, retain_ms: int
) -> tuple[dict[int, PassResult], list[int]]:
    """One archive of every partition whose lease is free; returns what each pass did and the
    partitions skipped because a worker holds them."""
    archiver = Archiver(redis, settings, archive, retain_ms)
    leases = Leases(redis, settings.prefix)
    me = f"archive-{os.getpid()}"
    done: dict[int, PassResult] = {}
    skipped: list[int] = []
    for partition in range(settings.partitions):
        epoch = await leases.acquire(partition, me, CLI_LEASE_MS)
        if epoch is None:
            skipped.append(partition)
            continue
        try:
            done[partition] = await archiver.run_until_done(partition, lease_value(me, epoch))
        except LeaseLost:
            skipped.append(partition)  # expired during a long pass, and taken: the owner goes on
        finally:
            await leases.release(partition, me, epoch)
    return done, skipped
