"""The soak's sink check (bench/soak/sunk.py) can fail: a message row missing, a body that
differs from `terminus messages --json` by a byte, a row Redis does not hold, a turn whose
state is not its snapshot's, each counted; and a message released from Redis into the archive
is still expected, from the archive's turn record.

Turns are committed by a real worker and written by a real `terminus sink --once` into SQLite;
the database is then tampered with, and the check reads Redis and the archive as the soak does.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, cast

import msgspec
from redis.asyncio import Redis
from serving import running_worker

from bench.soak.sunk import Projection, Rows, compare, failures, projection, rows
from terminus.service.keys import Keys, keys_for_session
from terminus.service.retention.archive import LocalArchive, segment_key
from terminus.service.retention.records import Segment, TurnRecord, pack_segment
from tests.support.polling import until
from tests.support.sinks import PARTITIONS, cli, publish, quiet, settings_for, workload

KINDS = ("missing", "extra", "duplicated", "differing")
PLAN = workload(3, 2)  # 6 turns: finished, retried twice, with tools twice, failed


async def sunk(redis: Redis, redis_url: str, prefix: str, tmp_path: Path) -> str:
    """The plan committed by a worker, then written by `sink --once`: the database's URL."""
    async with running_worker(redis, settings_for(prefix)):
        await publish(redis, prefix, PLAN)
        await until(lambda: quiet(redis, prefix), "the pool to be quiet")
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    for argv in (["sink", "migrate", "--to", url], ["sink", "--once", "--to", url]):
        status, out = await asyncio.to_thread(cli, argv, redis_url, prefix)
        assert status == 0, out
    return url


def run_sql(url: str, sql: str, *params: Any) -> None:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute(sql, params)


async def check(redis: Redis, prefix: str, url: str, archive: Path | None = None) -> Any:
    expected = await projection(redis, prefix, PARTITIONS, archive)
    return compare(expected, rows(url))


async def test_a_database_the_sink_wrote_matches_and_each_tampering_is_counted(
    redis: Redis, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    url = await sunk(redis, redis_url, prefix, tmp_path)
    clean = await check(redis, prefix, url)
    assert (clean["messages_expected"], clean["turns_expected"]) == (5, 6), clean
    assert failures({**clean, "once": {"all_applied": True}, "processes": {"crashed": 0}}) == []

    (_, message_id, body), *_ = rows(url).messages
    run_sql(url, "DELETE FROM messages WHERE message_id = ?", message_id)
    assert (await check(redis, prefix, url))["messages_missing"] == 1

    run_sql(url, "UPDATE messages SET body = ? WHERE message_id != ?", body + " ", message_id)
    run_sql(url, "UPDATE turns SET state = 'finished' WHERE state = 'failed'")
    found = await check(redis, prefix, url)
    assert (found["messages_differing"], found["turns_differing"]) == (4, 1), found

    copy = "INSERT INTO messages SELECT session_id, 'm-foreign', turn_id, step, attempt, seq,"
    copy += " log_ms, log_seq, partition, body, parts, finish_reason, usage, provider, model"
    run_sql(url, copy + " FROM messages WHERE message_id != ? LIMIT 1", message_id)
    found = await check(redis, prefix, url)
    assert found["messages_extra"] == 1, found
    report = {**found, "once": {"all_applied": True}, "processes": {"crashed": 0}}
    assert [line.split(":")[0] for line in failures(report)] == [
        "sink messages vs Redis",
        "sink turns vs Redis",
    ]


def test_a_row_twice_is_counted_as_duplicated() -> None:
    expected = Projection(messages={("s", "m"): "{}"}, turns={("s", "t"): "finished"})
    found = Rows([("s", "m", "{}"), ("s", "m", "{}")], [("s", "t", "finished")])
    assert compare(expected, found)["messages_duplicated"] == 1


async def test_a_message_released_into_the_archive_is_expected_from_its_turn_record(
    redis: Redis, redis_url: str, prefix: str, tmp_path: Path
) -> None:
    url = await sunk(redis, redis_url, prefix, tmp_path)
    session, message_id, _ = rows(url).messages[0]
    keys = keys_for_session(session, PARTITIONS, prefix)
    raw = cast(bytes, await redis.hget(keys.messages(session), message_id))
    turn_id = msgspec.json.decode(raw)["turn_id"]
    snapshot = cast(bytes, await redis.get(keys.turn(turn_id)))
    record = TurnRecord(
        turn_id=turn_id,
        session_id=session,
        state="finished",
        entries=[],
        snapshot=snapshot,
        message=raw,
    )
    segment = Segment(
        partition=keys.partition, first_id="1-0", last_id="1-0", turns=[record], loose=[]
    )
    archive = tmp_path / "archive"
    key = segment_key(prefix, keys.partition, "1-0", "1-0", 1)
    LocalArchive(archive).put(key, pack_segment(segment))
    await redis.hdel(keys.messages(session), message_id)  # as a release deletes it
    await redis.delete(Keys(keys.partition, prefix).turn(turn_id))

    alone = await check(redis, prefix, url)
    assert (alone["messages_extra"], alone["turns_extra"]) == (1, 1), "Redis alone lacks it"
    found = await check(redis, prefix, url, archive)
    counts = [found[f"{what}_{kind}"] for what in ("messages", "turns") for kind in KINDS]
    assert counts == [0] * 8, found
