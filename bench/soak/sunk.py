"""The soak's sink check: the database a sink wrote, compared row by row with the Redis
projections it was derived from.

What Redis holds at the end of a soak with retention is split in two: the messages and final
snapshots of turns not yet released (the `messages:<sid>` hashes and the `turn:<tid>`
snapshots), and those of released turns, which the archiver wrote into the archive's turn
records before the release deleted them from Redis. Their union is every proven message and
every final turn, which is what a sink that backfills from the archive must hold.

A message is expected exactly as `terminus messages --json` prints it (its JSON re-encoded),
and its row's `body` must be those bytes; a turn's row must carry the snapshot's final state.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import msgspec
from redis.asyncio import Redis

from bench.soak.rig import SINK, Rig
from terminus.events.codec import decode_message
from terminus.service.keys import Keys
from terminus.service.retention.archive import LocalArchive, partition_prefix
from terminus.service.retention.reads import is_final, mget_all, read_head
from terminus.service.retention.records import unpack_segment

SAMPLES: Final = 5
HELD: Final = "skipped partitions"  # `sink --once`: a killed sink's leases have not expired
Key = tuple[str, str]  # (session_id, message_id) or (session_id, turn_id)


@dataclass
class Projection:
    """What the database must hold: message bodies and turn end states, by key."""

    messages: dict[Key, str] = field(default_factory=dict)
    turns: dict[Key, str] = field(default_factory=dict)


@dataclass
class Rows:
    """What the database holds: every row of `messages` and `turns`, duplicates included."""

    messages: list[tuple[str, str, str]]  # session_id, message_id, body
    turns: list[tuple[str, str, str]]  # session_id, turn_id, state


def printed(raw: bytes) -> str:
    """A stored message as `terminus messages --json` prints it."""
    return msgspec.json.encode(decode_message(raw)).decode()


async def projection(
    redis: Redis, prefix: str, partitions: int, archive: Path | None
) -> Projection:
    """The proven messages and final turns of every partition: the archive's turn records,
    then what Redis still holds (the same turn in both is the same final turn)."""
    found = Projection()
    for partition in range(partitions):
        if archive is not None:
            await asyncio.to_thread(_archived, found, LocalArchive(archive), prefix, partition)
        await _live(redis, Keys(partition, prefix), found)
    return found


def _archived(found: Projection, archive: LocalArchive, prefix: str, partition: int) -> None:
    with contextlib.suppress(FileNotFoundError):  # no archive written yet
        for key in archive.list(partition_prefix(prefix, partition)):
            for record in unpack_segment(archive.get(key)).turns:
                found.turns[record.session_id, record.turn_id] = record.state
                if record.message is not None:
                    message = decode_message(record.message)
                    found.messages[message.session_id, message.message_id] = printed(record.message)


async def _live(redis: Redis, keys: Keys, found: Projection) -> None:
    marker = f"{keys.root}:messages:"
    async for name in redis.scan_iter(match=f"{marker}*", count=1000):
        session_id = name.decode().removeprefix(marker)
        stored = cast("dict[bytes, bytes]", await redis.hgetall(name))
        for message_id, raw in stored.items():
            found.messages[session_id, message_id.decode()] = printed(raw)
    marker = f"{keys.root}:turn:"
    names = [name async for name in redis.scan_iter(match=f"{marker}*", count=1000)]
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        for name, value in zip(chunk, await mget_all(redis, chunk), strict=True):
            head = read_head(value)
            if head is not None and is_final(head):
                found.turns[head.session_id, name.decode().removeprefix(marker)] = str(head.state)


def rows(url: str) -> Rows:
    """Every row of `messages` and `turns` in the database `url` names (a sink's `--to`)."""
    messages = "SELECT session_id, message_id, body FROM messages"
    turns = "SELECT session_id, turn_id, state FROM turns"
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            return Rows(conn.execute(messages).fetchall(), conn.execute(turns).fetchall())
    import psycopg  # the `sink` extra: only a PostgreSQL sink needs it

    with psycopg.connect(url) as conn:
        return Rows(
            [tuple(r) for r in conn.execute(messages.encode()).fetchall()],
            [tuple(r) for r in conn.execute(turns.encode()).fetchall()],
        )


def compare(expected: Projection, found: Rows) -> dict[str, Any]:
    """Counts of what differs (all zero when the database matches), with a few keys named."""
    return {
        "messages_expected": len(expected.messages),
        "messages_rows": len(found.messages),
        **_differ("messages", expected.messages, found.messages),
        "turns_expected": len(expected.turns),
        "turns_rows": len(found.turns),
        **_differ("turns", expected.turns, found.turns),
    }


def _differ(
    what: str, expected: Mapping[Key, str], found: Iterable[tuple[str, str, str]]
) -> dict[str, Any]:
    copies = Counter((s, k) for s, k, _ in found)
    stored = {(s, k): value for s, k, value in found}
    kinds = {
        "missing": [key for key in expected if key not in stored],
        "extra": [key for key in stored if key not in expected],
        "duplicated": [key for key, n in copies.items() if n > 1],
        "differing": [k for k, v in stored.items() if k in expected and expected[k] != v],
    }
    return {f"{what}_{kind}": len(keys) for kind, keys in kinds.items()} | {
        f"{what}_samples": {kind: keys[:SAMPLES] for kind, keys in kinds.items() if keys}
    }


def failures(report: Mapping[str, Any] | None) -> list[str]:
    """Each difference between the database and Redis, in words, and a sink that crashed or
    could not apply everything."""
    if report is None:
        return []
    found = []
    if not report["once"]["all_applied"]:
        found.append(f"sink --once did not apply everything: {report['once']}")
    if report["processes"]["crashed"]:
        found.append(f"{report['processes']['crashed']} sink processes exited unkilled")
    for what in ("messages", "turns"):
        kinds = ("missing", "extra", "duplicated", "differing")
        counts = {kind: report[f"{what}_{kind}"] for kind in kinds}
        if any(counts.values()):
            named = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            found.append(f"sink {what} vs Redis: {named}, e.g. {report[f'{what}_samples']}")
    return found


async def sink_report(
    rig: Rig, redis: Redis, timeout_s: float, processes: dict[str, Any]
) -> dict[str, Any] | None:
    """After the workers stopped: `sink --once` until every partition is applied, then the
    database compared with Redis and the archive (None: the soak ran no sink); `processes`
    is `rig.sink_report()` taken before the stop."""
    url, sinks = rig.config.sink, rig.sinks
    if url is None or sinks is None:
        return None
    env = sinks.env | {"REDIS_URL": rig.url}  # direct: the proxy is the workers' way in
    once = await apply_all(env, url, timeout_s)
    archive = Path(rig.retention_env()["TERMINUS_ARCHIVE_DIR"])
    settings = rig.settings
    expected = await projection(redis, settings.prefix, settings.partitions, archive)
    found = await asyncio.to_thread(rows, url)
    return {"to": url, "processes": processes, "once": once} | compare(expected, found)


async def apply_all(env: Mapping[str, str], url: str, timeout_s: float) -> dict[str, Any]:
    """`terminus sink --once --to URL` again while a partition is held by a killed sink whose
    lease has not expired; its runs, seconds, status and last output."""
    start, runs = time.perf_counter(), 0
    while True:
        runs += 1
        process = await asyncio.create_subprocess_exec(
            *SINK, "--once", "--to", url, env=dict(env), stdout=asyncio.subprocess.PIPE
        )
        out = (await process.communicate())[0].decode(errors="replace")
        held = HELD in out and process.returncode == 0
        if not held or time.perf_counter() - start > timeout_s:
            break
        await asyncio.sleep(0.5)
    return {
        "runs": runs,
        "seconds": round(time.perf_counter() - start, 1),
        "exit": process.returncode,
        "output": out.strip()[-500:],
        "all_applied": not held and process.returncode == 0,
    }
