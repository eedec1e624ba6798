"""Sinks under faults (docs/sinks.md): a sink SIGKILLed mid-run and restarted, two sinks racing
for one partition (one frozen past its lease, then thawed), and a PostgreSQL server killed and
restarted while a sink writes; each time the database ends up holding every message once, as
`terminus messages --json` prints it, and every turn once, with its end."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.service.fold.releases import id_key
from terminus.service.keys import Keys, sink_prefix
from terminus.service.settings import Settings
from terminus.service.sinks.source import horizon
from tests.support.polling import until
from tests.support.postgres import PrivateServer, binaries
from tests.support.sinks import (
    PARTITIONS,
    assert_database_matches,
    cli,
    database,
    publish,
    query,
    quiet,
    settings_for,
    workload,
)

__all__ = ["database"]  # the fixture, imported to be used here
TERMINUS: Final = Path(sys.executable).parent / "terminus"
LEASE_MS: Final = 1000


class SinkProcess:
    """`terminus sink --to URL` as a process of its own, on the test's Redis and prefix; its
    stderr (the sink's log) goes to a temporary file, read by `log` until `kill`."""

    def __init__(self, url: str, redis_url: str, prefix: str, lease_ms: int = LEASE_MS) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TERMINUS_")}
        env |= {"REDIS_URL": redis_url, "TERMINUS_PREFIX": prefix}
        env |= {"TERMINUS_PARTITIONS": str(PARTITIONS), "TERMINUS_BATCH_SIZE": "4"}
        env |= {"TERMINUS_LEASE_TTL_MS": str(lease_ms)}
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by `kill`, with the process
        self.process = subprocess.Popen(
            [str(TERMINUS), "sink", "--to", url], env=env, stderr=self.stderr
        )

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.stderr.close()

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")


async def messages_written(url: str) -> int:
    return int(query(url, "SELECT count(*) FROM messages")[0][0])


async def leases_gone(redis: Redis, prefix: str, partitions: int = PARTITIONS) -> bool:
    keys = [Keys(p, sink_prefix("default", prefix)).lease for p in range(partitions)]
    return not await redis.exists(*keys)


async def sink_once(url: str, redis_url: str, prefix: str) -> str:
    status, out = await asyncio.to_thread(cli, ["sink", "--once", "--to", url], redis_url, prefix)
    assert status == 0, out
    return out


@pytest.fixture
async def backlog(redis: Redis, prefix: str) -> AsyncIterator[Settings]:
    """A worker running for the test; 300 turns of every kind committed before it starts."""
    settings = settings_for(prefix)
    async with running_worker(redis, settings):
        await publish(redis, prefix, workload(60, 5))
        await until(lambda: quiet(redis, prefix), "the backlog committed", timeout=120)
        yield settings


async def test_a_sink_killed_mid_run_and_restarted_loses_and_duplicates_nothing(
    backlog: Settings, redis: Redis, redis_url: str, database: str
) -> None:
    prefix = backlog.prefix
    await asyncio.to_thread(cli, ["sink", "migrate", "--to", database], redis_url, prefix)
    plan = workload(60, 5) + workload(20, 3, first=60)
    sink = SinkProcess(database, redis_url, prefix)
    try:
        more = asyncio.create_task(publish(redis, prefix, plan[300:]))
        await until(
            lambda: _between(database, 20, 200), "the sink halfway", timeout=60, every=0.005
        )
        sink.kill()
        written = await messages_written(database)
        await more
    finally:
        sink.kill()
    await until(lambda: quiet(redis, prefix), "the pool quiet", timeout=60)
    await until(lambda: leases_gone(redis, prefix), "the killed sink's leases to expire")

    await sink_once(database, redis_url, prefix)

    assert 0 < written < await messages_written(database)
    await assert_database_matches(redis_url, prefix, database, plan)


async def _between(url: str, low: int, high: int) -> bool:
    return low <= await messages_written(url) <= high


async def caught_up(redis: Redis, prefix: str, url: str) -> bool:
    """The pool is quiet and every partition's position is at the end of its log."""
    if not await quiet(redis, prefix):
        return False
    held = dict(query(url, "SELECT partition, log_ms || '-' || log_seq FROM sink_positions"))
    for partition in range(PARTITIONS):
        end = await horizon(redis, Keys(partition, prefix))
        if end is not None and id_key(str(held.get(partition, "0-0"))) < id_key(end):
            return False
    return True


async def test_two_sinks_racing_for_the_partitions_duplicate_nothing(
    backlog: Settings, redis: Redis, redis_url: str, database: str
) -> None:
    """B joins while A writes (A hands over half its partitions); A is then frozen past its
    lease, B takes them all, and A thaws in the middle of its page: the database fences it."""
    prefix = backlog.prefix
    await asyncio.to_thread(cli, ["sink", "migrate", "--to", database], redis_url, prefix)
    plan = workload(60, 5) + workload(20, 3, first=60)
    first = SinkProcess(database, redis_url, prefix)
    second: SinkProcess | None = None
    try:
        await until(lambda: _between(database, 20, 200), "A halfway", timeout=60, every=0.005)
        second = SinkProcess(database, redis_url, prefix)
        more = asyncio.create_task(publish(redis, prefix, plan[300:]))
        await asyncio.sleep(0.5)
        first.signal(signal.SIGSTOP)
        await asyncio.sleep(3 * LEASE_MS / 1000)
        first.signal(signal.SIGCONT)
        await more
        await until(lambda: caught_up(redis, prefix, database), "both sinks to catch up", 60)
    finally:
        first.signal(signal.SIGCONT)
        first.kill()
        if second is not None:
            second.kill()

    epochs = [epoch for (epoch,) in query(database, "SELECT epoch FROM sink_positions")]
    assert len(epochs) == PARTITIONS
    assert max(epochs) > 1  # partitions did change hands
    await assert_database_matches(redis_url, prefix, database, plan)


async def test_a_postgres_restart_mid_run_loses_nothing(
    backlog: Settings, redis: Redis, redis_url: str
) -> None:
    if binaries() is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    prefix = backlog.prefix
    server = PrivateServer()
    sink: SinkProcess | None = None
    try:
        server.init()
        server.start()
        url = server.create_database("chat")
        await asyncio.to_thread(cli, ["sink", "migrate", "--to", url], redis_url, prefix)
        plan = workload(60, 5) + workload(20, 3, first=60)
        sink = SinkProcess(url, redis_url, prefix)
        await until(lambda: _between(url, 20, 200), "the sink halfway", timeout=60, every=0.005)
        server.stop(kill=True)  # a crash: what was not committed is gone
        await publish(redis, prefix, plan[300:])
        await asyncio.sleep(1.0)
        server.start()
        await until(lambda: caught_up(redis, prefix, url), "the sink to catch up", 60)
        assert sink.process.poll() is None  # it waited for the server, it did not die
        assert "again in" in sink.log()  # it retried the page the crash cut
        await assert_database_matches(redis_url, prefix, url, plan)
    finally:
        if sink is not None:
            sink.kill()
        server.remove()


async def test_sigterm_ends_a_sink_and_hands_its_partitions_back_at_once(
    redis: Redis, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    await asyncio.to_thread(cli, ["sink", "migrate", "--to", url], redis_url, prefix)
    sink = SinkProcess(url, redis_url, prefix, lease_ms=60_000)  # would hold them a minute
    try:
        await until(lambda: _held(redis, prefix), "the sink to hold every partition", 30)
        sink.signal(signal.SIGTERM)
        status = await asyncio.to_thread(sink.process.wait, 10)
        assert await leases_gone(redis, prefix)
    finally:
        sink.kill()
    assert status == 0


async def _held(redis: Redis, prefix: str) -> bool:
    keys = [Keys(p, sink_prefix("default", prefix)).lease for p in range(PARTITIONS)]
    return await redis.exists(*keys) == PARTITIONS
