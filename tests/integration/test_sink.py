"""`terminus sink` into a real SQLite file and a real PostgreSQL server (docs/sinks.md): every
proven message once, exactly as `terminus messages --json` prints it; nothing of a discarded
attempt; failed and cancelled turns recorded with their ends; a second run writes nothing more."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import cast

import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from serving import running_worker

from terminus.service.keys import Keys, partition_of, sink_prefix
from terminus.service.metrics.exposition import render_metrics
from terminus.service.redis.replies import StreamEntry
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from tests.support.polling import until
from tests.support.sink_turns import DISCARDED, cancelled, failed, finished, retried, with_tools
from tests.support.sinks import (
    PARTITIONS,
    cli,
    database,
    loads,
    printed_messages,
    query,
    quiet,
    settings_for,
)

SESSIONS = {
    "s-ok": finished,
    "s-retry": retried,
    "s-fail": failed,
    "s-cancel": cancelled,
    "s-tools": with_tools,
}


@pytest.fixture
async def committed(redis: Redis, prefix: str) -> Settings:
    """One turn of each ending per session, committed by a real worker that is then stopped."""
    settings = settings_for(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings):
        for session, make in SESSIONS.items():
            await producer.publish(make(session, session.replace("s-", "t-")))
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    return settings


__all__ = ["database"]  # the fixture, imported to be used here


def sink(url: str, redis_url: str, prefix: str, *more: str) -> str:
    status, out = cli(["sink", *more, "--to", url], redis_url, prefix)
    assert status == 0, out
    return out


async def test_every_proven_message_lands_once_as_messages_prints_it(
    committed: Settings, redis_url: str, database: str
) -> None:
    prefix = committed.prefix
    assert "schema version 1" in await asyncio.to_thread(
        sink, database, redis_url, prefix, "migrate"
    )

    out = await asyncio.to_thread(sink, database, redis_url, prefix, "--once")

    assert f"of {PARTITIONS} partitions folded" in out
    stored = query(
        database, "SELECT session_id, message_id, body FROM messages ORDER BY session_id"
    )
    assert [(s, m) for s, m, _ in stored] == [
        ("s-ok", "msg-t-ok"),
        ("s-retry", "msg-t-retry"),
        ("s-tools", "msg-t-tools"),
    ]
    for session, _, body in stored:
        printed, parsed = await printed_messages(redis_url, prefix, session)
        assert printed == f"[{body}]"
        assert parsed == [json.loads(body)]
    # What a discarded attempt wrote is nowhere but in a failed turn's partial record.
    written = query(database, "SELECT * FROM messages") + query(
        database, "SELECT * FROM turns WHERE partial IS NULL"
    )
    assert DISCARDED not in json.dumps(written, default=str)
    tools = json.loads(stored[2][2])
    assert [p["type"] for p in tools["parts"]].count("step-finish") == 2


async def test_failed_and_cancelled_turns_are_recorded_with_their_ends(
    committed: Settings, redis_url: str, database: str
) -> None:
    await asyncio.to_thread(sink, database, redis_url, committed.prefix, "migrate")
    await asyncio.to_thread(sink, database, redis_url, committed.prefix, "--once")

    ends = query(
        database,
        "SELECT turn_id, state, stop_reason, message_id, error_type FROM turns ORDER BY turn_id",
    )

    assert ends == [
        ("t-cancel", "cancelled", "cancelled", None, None),
        ("t-fail", "failed", "error", None, "auth"),
        ("t-ok", "finished", "end_turn", "msg-t-ok", None),
        ("t-retry", "finished", "end_turn", "msg-t-retry", None),
        ("t-tools", "finished", "end_turn", "msg-t-tools", None),
    ]
    [(error, partial)] = query(
        database, "SELECT error, partial FROM turns WHERE turn_id = 't-fail'"
    )
    assert loads(error)["status"] == 401
    assert loads(partial)["parts"][0]["text"] == DISCARDED


async def test_a_second_run_writes_nothing_and_new_turns_are_added(
    committed: Settings, redis: Redis, redis_url: str, database: str
) -> None:
    prefix = committed.prefix
    await asyncio.to_thread(sink, database, redis_url, prefix, "migrate")
    first = await asyncio.to_thread(sink, database, redis_url, prefix, "--once")
    before = query(database, "SELECT * FROM messages ORDER BY session_id")

    again = await asyncio.to_thread(sink, database, redis_url, prefix, "--once")
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, committed):
        await producer.publish(finished("s-ok", "t-ok-2", "Again"))
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    later = await asyncio.to_thread(sink, database, redis_url, prefix, "--once")

    assert "9 rows written" in first  # the tool turn's message twice: per step, then whole
    assert "0 rows written" in again
    assert "2 rows written" in later
    unchanged = "SELECT * FROM messages WHERE message_id != 'msg-t-ok-2' ORDER BY session_id"
    assert query(database, unchanged) == before
    printed, _ = await printed_messages(redis_url, prefix, "s-ok")
    bodies = query(
        database, "SELECT body FROM messages WHERE session_id = 's-ok' ORDER BY log_ms, log_seq"
    )
    assert printed == "[" + ",".join(b for (b,) in bodies) + "]"


async def test_a_sink_without_the_schema_says_to_migrate(
    committed: Settings, redis_url: str, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = await asyncio.to_thread(
        cli, ["sink", "--once", "--to", database], redis_url, committed.prefix
    )

    assert status == 1
    err = capsys.readouterr().err
    assert "no terminus schema" in err
    assert "run `terminus sink migrate`" in err


async def test_a_message_the_database_refuses_is_dead_lettered_with_its_reason(
    redis: Redis, redis_url: str, postgres_url: str, prefix: str
) -> None:
    """PostgreSQL's JSONB holds no NUL character (SQLite's JSON text does): that message goes
    to the sink's dead letters with the server's words, and the turn's end is still written."""
    settings = settings_for(prefix)
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    async with running_worker(redis, settings):
        await producer.publish(finished("s-nul", "t-nul", "a\x00b"))
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    await asyncio.to_thread(sink, postgres_url, redis_url, prefix, "migrate")

    out = await asyncio.to_thread(sink, postgres_url, redis_url, prefix, "--once")
    again = await asyncio.to_thread(sink, postgres_url, redis_url, prefix, "--once")

    assert "1 rows written, 1 refused" in out
    assert "0 rows written, 0 refused" in again
    dead = Keys(partition_of("s-nul", PARTITIONS), sink_prefix("default", prefix)).dead
    [(_, letter)] = cast("list[StreamEntry]", await redis.xrange(dead))
    assert letter[b"reason"].startswith(b"database refused: unsupported Unicode escape sequence")
    printed, _ = await printed_messages(redis_url, prefix, "s-nul")
    assert printed == "[" + letter[b"raw"].decode() + "]"
    assert (
        letter[b"source_stream"].decode() == Keys(partition_of("s-nul", PARTITIONS), prefix).inbound
    )
    assert query(postgres_url, "SELECT count(*) FROM messages") == [(0,)]
    assert query(postgres_url, "SELECT turn_id, state FROM turns") == [("t-nul", "finished")]


async def test_the_counters_say_what_was_written_and_how_far_behind(
    committed: Settings, redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    await asyncio.to_thread(sink, url, redis_url, committed.prefix, "migrate")
    await asyncio.to_thread(sink, url, redis_url, committed.prefix, "--once")

    counted = [
        cast(
            "dict[bytes, bytes]",
            await redis.hgetall(Keys(p, sink_prefix("default", committed.prefix)).metrics),
        )
        for p in range(PARTITIONS)
    ]

    assert sum(int(c.get(b"rows", 0)) for c in counted) == 9
    exposed = (await render_metrics(redis, committed)).decode()
    families = {f.name: f for f in text_string_to_metric_families(exposed)}
    rows = [s for s in families["terminus_sink_rows"].samples if s.name.endswith("_total")]
    assert {s.labels["sink"] for s in rows} == {"default"}
    assert sum(s.value for s in rows) == 9
    assert {s.value for s in families["terminus_sink_lag_ms"].samples} == {0}
    written = [c for c in counted if c]
    assert all(c[b"lag_ms"] == b"0" for c in written)
    positions = dict(query(url, "SELECT partition, log_ms || '-' || log_seq FROM sink_positions"))
    assert {p: c[b"position"].decode() for p, c in enumerate(counted) if c} == {
        p: pos for p, pos in positions.items() if pos != "0-0"
    }
