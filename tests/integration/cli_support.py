"""What the tests of `terminus messages | updates | dlq | publish` share: a sync client that sets
up data and unlinks it afterwards, the environment pointing the commands at the test's Redis,
frames, messages and dead letters written where the commands read them, and reading their output."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from redis import Redis
from redis.typing import EncodableT, FieldT

from terminus.events.codec import encode_json
from terminus.events.inbound import Usage
from terminus.events.outbound import AgentMessageChunk, PersistedMessage, TextPart
from terminus.service.keys import Keys, keys_for_session

P = 4
SESSION = "s-views"
DEMO = Path(__file__).parents[2] / "service" / "cli" / "demo_transcripts"
UNREACHABLE = "redis://127.0.0.1:1/0"
ANSI = re.compile(r"\x1b\[")
Entry = tuple[bytes, dict[bytes, bytes]]


def chunk(n: int) -> AgentMessageChunk:
    return AgentMessageChunk(
        session_id=SESSION, turn_id="t-1", step=1, attempt=1, part_id="p-1", delta=f"d{n}"
    )


def message(message_id: str, text: str) -> PersistedMessage:
    return PersistedMessage(
        message_id=message_id,
        session_id=SESSION,
        turn_id="t-1",
        parts=[TextPart(part_id="p-1", text=text)],
        finish_reason="stop",
        usage=Usage(),
        provider="p",
        model="m",
    )


@contextlib.contextmanager
def store_at(redis_url: str, prefix: str) -> Iterator[Redis]:
    """A sync client for setting up data; every key under `prefix` is unlinked afterwards."""
    with Redis.from_url(redis_url) as client:
        try:
            yield client
        finally:
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.unlink(*keys)


def set_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str) -> None:
    """Point the commands at the test's Redis, prefix and partition count."""
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("TERMINUS_PREFIX", prefix)
    monkeypatch.setenv("TERMINUS_PARTITIONS", str(P))


def keys(prefix: str) -> Keys:
    return keys_for_session(SESSION, P, prefix)


def xadd(store: Redis, key: str, fields: dict[FieldT, EncodableT]) -> str:
    entry_id = store.xadd(key, fields)
    return entry_id.decode() if isinstance(entry_id, bytes) else entry_id


def entries(store: Redis, key: str) -> list[Entry]:
    return cast("list[Entry]", store.xrange(key))


def add_frames(store: Redis, prefix: str, count: int) -> list[str]:
    key = keys(prefix).session(SESSION)
    return [xadd(store, key, {"e": encode_json(chunk(n))}) for n in range(count)]


def add_messages(store: Redis, prefix: str) -> list[PersistedMessage]:
    committed = [message("m-b", "hello"), message("m-a", "again")]
    for at_ms, msg in enumerate(committed, start=1):
        store.hset(keys(prefix).messages(SESSION), msg.message_id, encode_json(msg))
        store.zadd(keys(prefix).message_order(SESSION), {msg.message_id: at_ms})
    return committed


def add_dead(store: Redis, partition: int, prefix: str, raw: bytes) -> str:
    dead = Keys(partition, prefix)
    fields: dict[FieldT, EncodableT] = {"raw": raw, "reason": "malformed json"}
    fields.update(source_stream=dead.inbound, source_id="5-0")
    return xadd(store, dead.dead, fields)


def lines(text: str) -> list[str]:
    return text.splitlines()


def tables(text: str) -> list[str]:
    """The message tables of `messages` output, split at each table's title line."""
    return re.split(r"^(?=assistant )", text, flags=re.MULTILINE)[1:]


def assert_two_messages_in_order(out: str) -> None:
    """`add_messages`' messages, one table each in commit order: id, finish reason and text."""
    first, second = tables(out)
    assert first.startswith("assistant m-b  turn t-1  p/m")
    assert second.startswith("assistant m-a  turn t-1  p/m")
    for table, text in ((first, "hello"), (second, "again")):
        assert re.search(rf"^ +text +p-1 +{text} *$", table, re.MULTILINE)
        assert "finish_reason=stop  usage in=0 out=0" in table
    assert not ANSI.search(out)
