"""A sink reads the archive, then the live log, as `terminus replay` does (docs/sinks.md): a
sink that fell behind a retention trim reads what was trimmed from the archive, and a database
added later holds the whole history, turns released from Redis included."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from redis.asyncio import Redis
from serving import running_worker

from terminus.service.keys import Keys
from terminus.service.retention.archive import LocalArchive
from terminus.service.runtime.archiving import archive_free_partitions
from terminus.service.settings import Settings
from tests.support.polling import until
from tests.support.sinks import (
    PARTITIONS,
    assert_database_holds,
    cli,
    database,
    printed,
    publish,
    query,
    quiet,
    settings_for,
    workload,
)

__all__ = ["database"]  # the fixture, imported to be used here


async def committed(redis: Redis, settings: Settings, plan: list[tuple[str, str, object]]) -> None:
    async with running_worker(redis, settings):
        await publish(redis, settings.prefix, plan)
        await until(lambda: quiet(redis, settings.prefix), "the pool to be quiet")


async def test_a_sink_behind_the_trim_and_a_database_added_later_get_the_whole_history(
    redis: Redis, redis_url: str, prefix: str, tmp_path: Path, database: str
) -> None:
    archive_dir = tmp_path / "archive"
    settings = settings_for(prefix, archive_dir=str(archive_dir))
    env = {"TERMINUS_ARCHIVE_DIR": str(archive_dir)}
    first, second, third = workload(8, 2), workload(8, 2, first=8), workload(8, 2, first=16)
    later = f"sqlite:///{tmp_path / 'later.db'}"
    for url in (database, later):
        await asyncio.to_thread(cli, ["sink", "migrate", "--to", url], redis_url, prefix)

    async def sink_once(url: str) -> None:
        status, out = await asyncio.to_thread(
            cli, ["sink", "--once", "--to", url], redis_url, prefix, **env
        )
        assert status == 0, out

    await committed(redis, settings, first)
    await sink_once(database)
    await committed(redis, settings, second)
    history = await printed(redis_url, prefix, (s for s, _, _ in first + second))
    done, _ = await archive_free_partitions(redis, settings, LocalArchive(archive_dir), 0)
    await committed(redis, settings, third)
    history |= await printed(redis_url, prefix, (s for s, _, _ in third))

    await sink_once(database)  # the second part is in the archive only now
    await sink_once(later)  # a new database: everything

    assert sum(r.released for r in done.values()) == len(first + second)
    assert await printed(redis_url, prefix, ["s-0", "s-8"]) == {"s-0": [], "s-8": []}
    lengths = [await redis.xlen(Keys(p, prefix).inbound) for p in range(PARTITIONS)]
    assert sum(lengths) < 8 * len(third)  # the trimmed log holds (about) the third part
    for url in (database, later):
        assert_database_holds(url, history, first + second + third)


async def test_a_sink_started_before_the_first_archive_reads_it_once_it_lags_behind_the_trim(
    redis: Redis, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """The archive directory does not exist when the sink starts (the workers create it at their
    first archiving); frozen past its lease while the log is archived and trimmed, the sink
    refolds on waking and must find the trimmed part in the archive."""
    archive_dir = tmp_path / "archive"
    settings = settings_for(prefix, archive_dir=str(archive_dir))
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    await asyncio.to_thread(cli, ["sink", "migrate", "--to", url], redis_url, prefix)
    first, second, third = workload(8, 2), workload(8, 2, first=8), workload(8, 2, first=16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERMINUS_")}
    env |= {"REDIS_URL": redis_url, "TERMINUS_PREFIX": prefix, "TERMINUS_LEASE_TTL_MS": "1000"}
    env |= {"TERMINUS_PARTITIONS": str(PARTITIONS), "TERMINUS_ARCHIVE_DIR": str(archive_dir)}
    sink = subprocess.Popen([sys.executable, "-m", "terminus", "sink", "--to", url], env=env)
    try:
        await committed(redis, settings, first)
        await until(lambda: _turns(url, len(first)), "the sink to write the first part")
        sink.send_signal(signal.SIGSTOP)
        await committed(redis, settings, second)
        history = await printed(redis_url, prefix, (s for s, _, _ in first + second))
        await archive_free_partitions(redis, settings, LocalArchive(archive_dir), 0)
        await committed(redis, settings, third)
        history |= await printed(redis_url, prefix, (s for s, _, _ in third))
        sink.send_signal(signal.SIGCONT)
        everything = first + second + third
        await until(lambda: _turns(url, len(everything)), "the sink to write all", timeout=30)
    finally:
        sink.kill()
        sink.wait(10)
    assert_database_holds(url, history, everything)


async def _turns(url: str, count: int) -> bool:
    return int(query(url, "SELECT count(*) FROM turns")[0][0]) >= count
