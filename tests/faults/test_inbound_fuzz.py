"""Mutated events among valid turns, against a real worker: nothing lost, nothing forged.

Issue 15, "fuzz the inbound path": valid encoded events are mutated (bytes flipped, cut or
inserted, types swapped, numbers pushed out of range, strings made non-UTF-8, objects nested deep)
and published between the turns of valid sessions. Every mutated entry must end in the dead
letters or be a valid event the fold took; every valid session's frames and messages must be byte
for byte the in-process fold of what its producer published; the worker never stops.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from typing import Any, Final, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from terminus.events.codec import encode_json
from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    TextDelta,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.fold.decoding import Entry, decode_entries
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.connect import connect
from terminus.service.runtime.worker import Worker
from terminus.service.settings import Settings
from tests.support.faults.expect import assert_session, fold_session
from tests.support.faults.harness import dead_letters, fault_settings, wait_owned, wait_quiet
from tests.support.faults.load import RecordingProducer, TurnPlan, publish_turn

VALID: Final = [
    TurnPlan(f"valid-{s}", f"valid-{s}-t{t}", cut=t == 1, deltas=12)
    for s in range(3)
    for t in range(2)
]
PARTITIONS: Final = 4


def templates(n: int) -> list[bytes]:
    """Encoded valid events of a junk session's turn, the material the mutations work on."""
    ids = {"session_id": f"zz-junk-{n}", "turn_id": f"zz-junk-{n}-t"}
    usage = Usage(output_tokens=3)
    events = [
        TurnStarted(**ids, seq=0, max_attempts=2),  # type: ignore[arg-type]
        AttemptStarted(**ids, seq=1, provider="p", contract="ai-sdk"),  # type: ignore[arg-type]
        TextStart(**ids, seq=2, part_id="p"),  # type: ignore[arg-type]
        TextDelta(**ids, seq=3, part_id="p", delta="héllo ✓"),  # type: ignore[arg-type]
        FinishStep(**ids, seq=4, finish_reason="stop", usage=usage),  # type: ignore[arg-type]
    ]
    return [encode_json(event) for event in events]


Mutation = Callable[[bytes, random.Random], bytes]


def flip(raw: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(raw))
    return raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1 :]


def cut(raw: bytes, rng: random.Random) -> bytes:
    return raw[: rng.randrange(len(raw))]


def insert(raw: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(raw))
    return raw[:at] + rng.choice([b"\xff", b"\x00", b"{", b"]", b'"', b"\\u", b"1e999"]) + raw[at:]


def retype(raw: bytes, rng: random.Random) -> bytes:
    field = rng.choice([b'"seq":', b'"step":', b'"delta":', b'"usage":', b'"max_attempts":'])
    value = rng.choice([b'"7"', b"null", b"[]", b"{}", b"1.5", b"true", b"-1", b"1" + b"0" * 40])
    if field not in raw:
        return raw
    head, _, tail = raw.partition(field)
    rest = tail.split(b",", 1)
    return head + field + value + (b"," + rest[1] if len(rest) > 1 else b"}")


def nest(raw: bytes, rng: random.Random) -> bytes:
    depth = rng.choice([10, 1_000, 200_000])
    return raw[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"


def unicode(raw: bytes, rng: random.Random) -> bytes:
    bad = rng.choice([b"\xed\xa0\x80", b"\xc3", b"\xf4\x90\x80\x80", b"\\ud800", b"\xef\xbf\xbf"])
    return raw.replace("é".encode(), bad, 1)


MUTATIONS: Final[list[Mutation]] = [flip, cut, insert, retype, nest, unicode]


async def scenario(url: str, recipes: list[tuple[int, int, int]]) -> None:
    prefix = f"fz-{uuid.uuid4().hex[:8]}"
    config = fault_settings(url, partitions=PARTITIONS, prefix=prefix, batch_size=16)
    redis = connect(url)
    worker = Worker(redis, config)
    running = asyncio.create_task(worker.run())
    try:
        await wait_owned(redis, config)
        producer = RecordingProducer(redis, config)
        injected: dict[str, dict[bytes, bytes]] = {}
        for n, (template, mutation, seed) in enumerate(recipes):
            if n < len(VALID):
                await publish_turn(producer, VALID[n])
            rng = random.Random(seed)
            raw = MUTATIONS[mutation % len(MUTATIONS)](templates(n)[template % 5], rng)
            fields = {FIELD: raw}
            key = Keys(rng.randrange(PARTITIONS), prefix).inbound
            injected[
                cast(bytes, await redis.xadd(key, cast("dict[Any, Any]", fields))).decode()
            ] = fields
        for plan in VALID[len(recipes) :]:
            await publish_turn(producer, plan)
        valid_turns = [(plan.session_id, plan.turn_id) for plan in VALID]
        await wait_quiet(redis, config, valid_turns, timeout=60)
        assert not running.done(), "the worker stopped"
        await check(redis, config, producer, injected)
    finally:
        await worker.stop()
        await running
        await clear(redis, prefix)
        await redis.aclose()


async def check(
    redis: Any,
    config: Settings,
    producer: RecordingProducer,
    injected: dict[str, dict[bytes, bytes]],
) -> None:
    dead = {entry_id for _, entry_id in await dead_letters(redis, config)}
    for entry_id, fields in injected.items():
        if entry_id in dead:
            continue
        [decoded] = decode_entries([Entry(entry_id, fields)], max_deliveries=5)
        assert decoded.event is not None, (entry_id, fields, decoded.problem)
    for session_id, entries in producer.published.items():
        expected = fold_session(entries, config.core())
        assert not expected.dead
        await assert_session(redis, config, session_id, expected, expected)


async def clear(redis: Any, prefix: str) -> None:
    keys = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)]
    if keys:
        await redis.delete(*keys)


recipe = st.tuples(st.integers(0, 4), st.integers(0, len(MUTATIONS) - 1), st.integers(0, 2**32))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipes=st.lists(recipe, min_size=4, max_size=24))
def test_mutated_events_among_valid_turns(
    single_redis_url: str, recipes: list[tuple[int, int, int]]
) -> None:
    asyncio.run(scenario(single_redis_url, recipes))
