"""What the sink tests share: turns of every ending, published and committed by a real worker,
and the messages as `terminus messages --json` prints them, to compare a database with."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

import pytest
from redis.asyncio import Redis

from terminus.service.cli.main import main
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.settings import Settings

PARTITIONS: Final = 4


def settings_for(prefix: str, **more: Any) -> Settings:
    return Settings(prefix=prefix, partitions=PARTITIONS, block_ms=100, lease_ttl_ms=1000, **more)


async def quiet(redis: Redis, prefix: str) -> bool:
    """Every partition's group has delivered its last entry and has nothing pending."""
    for partition in range(PARTITIONS):
        inbound = Keys(partition, prefix).inbound
        last = cast("list[StreamEntry]", await redis.xrevrange(inbound, count=1))
        if not last:
            continue
        groups = await redis.xinfo_groups(inbound)
        group = next((g for g in groups if g["name"] in (GROUP, GROUP.encode())), None)
        if group is None or group["pending"]:
            return False
        if group["last-delivered-id"] not in (last[0][0], last[0][0].decode()):
            return False
    return True


@contextlib.contextmanager
def environment(redis_url: str, prefix: str) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(
        {"REDIS_URL": redis_url, "TERMINUS_PREFIX": prefix, "TERMINUS_PARTITIONS": str(PARTITIONS)}
    )
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli(argv: list[str], redis_url: str, prefix: str) -> tuple[int, str]:
    """Run `terminus ARGV` in this process, on the test's Redis and prefix: status and stdout."""
    out = io.StringIO()
    with environment(redis_url, prefix), contextlib.redirect_stdout(out):
        status = main(argv)
    return status, out.getvalue()


async def printed_messages(redis_url: str, prefix: str, session: str) -> tuple[str, list[Any]]:
    """What `terminus messages SESSION --json` prints, and that parsed."""
    status, out = await asyncio.to_thread(cli, ["messages", session, "--json"], redis_url, prefix)
    assert status == 0, out
    return out.strip(), json.loads(out)


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql` on the database `url` names (a sink's `--to`)."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            return conn.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute(sql.encode()).fetchall()]


def loads(value: Any) -> Any:
    """A JSON column's value: SQLite gives its text, PostgreSQL's JSONB the value itself."""
    return json.loads(value) if isinstance(value, str) else value


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The `--to` of an empty database: a SQLite file, or a database on a private PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    return cast(str, request.getfixturevalue("postgres_url"))
