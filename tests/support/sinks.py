"""What the sink tests of every tier share: a quiet pool, `terminus` run in this process, the
messages as `terminus messages --json` prints them, and the databases a sink writes to."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, cast

import msgspec
import pytest
from redis.asyncio import Redis

from terminus.service.cli.main import main
from terminus.service.keys import GROUP, Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.sink_turns import cancelled, failed, finished, retried, with_tools

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
def environment(redis_url: str, prefix: str, **more: str) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(
        {"REDIS_URL": redis_url, "TERMINUS_PREFIX": prefix, "TERMINUS_PARTITIONS": str(PARTITIONS)}
    )
    os.environ.update(more)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cli(argv: list[str], redis_url: str, prefix: str, **env: str) -> tuple[int, str]:
    """Run `terminus ARGV` in this process, on the test's Redis and prefix (and `env`, such as
    TERMINUS_ARCHIVE_DIR): its status and stdout."""
    out = io.StringIO()
    with environment(redis_url, prefix, **env), contextlib.redirect_stdout(out):
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


KINDS: Final = (finished, retried, with_tools, failed, cancelled)
ENDS: Final = {
    finished: "finished",
    retried: "finished",
    with_tools: "finished",
    failed: "failed",
    cancelled: "cancelled",
}


def workload(sessions: int, turns: int, first: int = 0) -> list[tuple[str, str, Any]]:
    """(session, turn, kind) of `turns` turns in each of `sessions` sessions, kinds in turn."""
    return [
        (f"s-{s}", f"t-{s}-{t}", KINDS[(s + t) % len(KINDS)])
        for s in range(first, first + sessions)
        for t in range(turns)
    ]


async def publish(redis: Redis, prefix: str, plan: list[tuple[str, str, Any]]) -> None:
    """Each turn of `plan` as its producer would publish it, turns of a session in order."""
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    for session, turn, kind in plan:
        await producer.publish(kind(session, turn))


async def printed(redis_url: str, prefix: str, sessions: Iterable[str]) -> dict[str, list[str]]:
    """Each session's messages as `terminus messages --json` prints them, one JSON text each."""
    found = {}
    for session in sorted(set(sessions)):
        _, parsed = await printed_messages(redis_url, prefix, session)
        found[session] = sorted(msgspec.json.encode(m).decode() for m in parsed)
    return found


def assert_database_holds(
    url: str, messages: dict[str, list[str]], plan: list[tuple[str, str, Any]]
) -> None:
    """The database holds exactly `messages` (by session), and each turn of `plan` once, ended
    as its kind ends."""
    stored: dict[str, list[str]] = {}
    for session, body in query(url, "SELECT session_id, body FROM messages"):
        stored.setdefault(session, []).append(body)
    assert {s: sorted(b) for s, b in stored.items()} == {s: b for s, b in messages.items() if b}
    ends = dict(query(url, "SELECT turn_id, state FROM turns"))
    assert ends == {turn: ENDS[kind] for _, turn, kind in plan}


async def assert_database_matches(
    redis_url: str, prefix: str, url: str, plan: list[tuple[str, str, Any]]
) -> None:
    """The database holds each message of each session once, exactly as `terminus messages
    --json` prints it, and each turn of `plan` once, ended as its kind ends."""
    expected = await printed(redis_url, prefix, (s for s, _, _ in plan))
    assert_database_holds(url, expected, plan)
