"""Malformed entries mixed into live traffic are dead-lettered, one by one, and nothing else is.

DESIGN section 5 (poison) and invariant 5: an entry that fails to decode or to apply goes to its
partition's dead stream at once, with its raw bytes, the reason, the source stream and entry id;
the rest of the batch goes on and no worker crashes. Events for a turn that is already final are
not errors: they are ignored and counted in the turn's snapshot.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar, cast

from expect import assert_exact, assert_replay_clean, started_turns
from harness import (
    Source,
    StartRedis,
    Workers,
    busy_partitions,
    dead_letters,
    decode_turn,
    fault_settings,
    keys_of,
    wait_owned,
    wait_quiet,
    wait_until,
)
from load import RecordingProducer, TurnPlan, plan_sessions, publish_sessions, publish_turn
from redis.asyncio import Redis

from events.codec import encode_event
from events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from service.keys import Keys
from service.producer import FIELD, Producer
from service.settings import Settings

VALID = plan_sessions(sessions=8, turns=10, tag="ok")
LATE: Final = 3  # late events after each valid session's last turn
GAP_TURNS: Final = 100  # each with one seq gap and one seq regression
GHOSTS: Final = 100  # events of turns that never started
JUNK: Final = 700  # entries no decoder accepts
EVENT: Final = (
    b'{"type":"text-delta","session_id":"junk","turn_id":"junk-t","seq":%b,"part_id":"p",'
    b'"delta":%b}'
)
E = TypeVar("E", bound=InboundEvent)


class Junk(NamedTuple):
    """An undecodable entry and words its dead-letter reason must contain."""

    fields: dict[bytes, bytes]
    reason: str


def junk(rng: random.Random) -> Iterator[Junk]:
    """Bad JSON, bad msgpack, unknown types, wrong field types, 2 MB, no field `e`."""
    whole = EVENT % (b"1", b'"d"')
    for _ in range(200):
        yield Junk({FIELD: whole[: rng.randrange(1, len(whole) - 1)]}, "malformed json")
    for n in range(150):  # a msgpack map of 7 whose third byte is one msgpack never uses
        yield Junk({FIELD: b"\x87\xa4type\xc1" + rng.randbytes(n % 40)}, "undecodable: ")
    for n in range(150):
        body = b'{"type":"text-%d","session_id":"junk","turn_id":"junk-t","seq":1}' % n
        yield Junk({FIELD: body}, "$.type")
    for n in range(75):
        yield Junk({FIELD: EVENT % (b'"seven"', b'"d"')}, "$.seq")
        yield Junk({FIELD: EVENT % (b"%d" % n, b"%d" % n)}, "$.delta")
    for _ in range(3):
        yield Junk({FIELD: EVENT % (b"1", b'"' + b"x" * 2_000_000 + b'"')}, "exceeds the limit")
    for n in range(47):
        yield Junk({b"x": b"%d" % n, b"y": bytes([200 + n % 50])}, "no field 'e'")


def event(cls: type[E], session_id: str, seq: int, **fields: Any) -> E:
    """An event of attempt 1 of the one turn of `session_id`."""
    return cls(session_id=session_id, turn_id=f"{session_id}-t", seq=seq, **fields)


def gap_turn(sid: str) -> list[InboundEvent]:
    """A turn whose seq jumps from 3 to 1000 (dead), then regresses to 4 (dead), then goes on."""
    usage = Usage(output_tokens=2)
    return [
        event(TurnStarted, sid, 0),
        event(AttemptStarted, sid, 1, provider="fault", contract="ai-sdk"),
        event(TextStart, sid, 2, part_id="p"),
        event(TextDelta, sid, 3, part_id="p", delta="a"),
        event(TextDelta, sid, 1000, part_id="p", delta="gap"),
        event(TextDelta, sid, 4, part_id="p", delta="regression"),
        event(TextDelta, sid, 1001, part_id="p", delta="b"),
        event(TextEnd, sid, 1002, part_id="p"),
        event(FinishStep, sid, 1003, finish_reason="stop", raw_finish_reason="end", usage=usage),
    ]


def late_events(plan: TurnPlan) -> list[InboundEvent]:
    """Deltas after the turn's end, from a producer that did not notice it was over."""
    attempt = 2 if plan.cut else 1
    return [
        TextDelta(session_id=plan.session_id, turn_id=plan.turn_id, attempt=attempt,
                  seq=500 + n, part_id="late", delta="late")
        for n in range(LATE)
    ]  # fmt: skip


async def valid_session(producer: Producer, turns: list[TurnPlan]) -> None:
    for plan in turns:
        await publish_turn(producer, plan)
    await producer.publish(late_events(turns[-1]))


async def odd_sessions(producer: Producer) -> None:
    """Turns with a seq gap and a regression, and events of turns that never started."""
    for n in range(GAP_TURNS):
        await producer.publish(gap_turn(f"gap{n}"))
    for n in range(GHOSTS):
        await producer.publish([event(TextDelta, f"ghost{n}", 3, part_id="p", delta="boo")])


async def inject(redis: Redis, settings: Settings, rng: random.Random) -> dict[Source, Junk]:
    """XADD the junk into random partitions' logs; returns it by stream and entry id."""
    injected: dict[Source, Junk] = {}
    for n, item in enumerate(junk(rng)):
        stream = Keys(rng.randrange(settings.partitions), settings.prefix).inbound
        entry_id = cast(bytes, await redis.xadd(stream, item.fields))  # type: ignore[arg-type]
        injected[stream, entry_id.decode()] = item
        if n % 25 == 0:
            await asyncio.sleep(0.001)  # interleave with the valid traffic
    return injected


def check_junk(found: dict[bytes, bytes], item: Junk) -> None:
    """The dead letter names the problem and keeps every byte of the entry."""
    assert item.reason in found[b"reason"].decode(), (found[b"reason"], item.reason)
    if FIELD in item.fields:
        assert found[b"raw"] == item.fields[FIELD]
    else:  # the entry's fields as JSON of latin-1 strings
        fields = json.loads(found[b"raw"])
        assert {k.encode("latin-1"): v.encode("latin-1") for k, v in fields.items()} == item.fields


def check_illegal(
    dead: dict[Source, dict[bytes, bytes]], illegal: dict[Source, str], producer: RecordingProducer
) -> None:
    """Decodable events the core rejects: the reason is the one the in-process fold gives."""
    events = {
        (producer.inbound_key(session_id), entry_id): event
        for session_id, entries in producer.published.items()
        for entry_id, event in entries
    }
    for source, reason in illegal.items():
        assert dead[source][b"reason"].decode() == reason
        assert dead[source][b"raw"] == encode_event(events[source])


async def test_malformed_entries_are_dead_lettered(
    private_redis: StartRedis, tmp_path: Path
) -> None:
    server = private_redis()
    settings = fault_settings(server.url, partitions=4)
    redis = Redis.from_url(server.url)
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(2):
                workers.start()
            await wait_owned(redis, settings)
            producer = RecordingProducer(redis, settings)
            valid = asyncio.gather(*(valid_session(producer, turns) for turns in VALID))
            odd = asyncio.create_task(odd_sessions(producer))
            injected = await inject(redis, settings, random.Random(5))
            await asyncio.gather(valid, odd)
            await wait_quiet(redis, settings, started_turns(producer.published))

            illegal = await assert_exact(redis, settings, producer.published)
            dead = await dead_letters(redis, settings)
            assert (len(injected), len(illegal)) == (JUNK, 2 * GAP_TURNS + GHOSTS)
            assert sorted(dead) == sorted([*injected, *illegal])  # 1,000, and nothing else
            for source, item in injected.items():
                check_junk(dead[source], item)
            check_illegal(dead, illegal, producer)
            for turns in VALID:
                last = turns[-1]
                snapshot = await redis.get(keys_of(settings, last.session_id).turn(last.turn_id))
                assert isinstance(snapshot, bytes)
                assert decode_turn(snapshot).ignored == {"late": LATE}
            await assert_replay_clean(redis, settings)
            assert [p.returncode for p in workers.processes] == [None, None]
            assert [p.poll() for p in workers.processes] == [None, None]
    finally:
        await redis.aclose()


async def test_msgpack_events_are_not_malformed(private_redis: StartRedis, tmp_path: Path) -> None:
    server = private_redis()
    settings = fault_settings(server.url, partitions=2)
    redis = Redis.from_url(server.url)
    try:
        with Workers(settings, tmp_path) as workers:
            workers.start()
            await wait_owned(redis, settings)
            producer = RecordingProducer(redis, settings)
            producer.fmt = "msgpack"
            await publish_sessions(producer, plan_sessions(sessions=2, turns=2, tag="packed"))

            async def applied() -> bool:
                return not await busy_partitions(redis, settings)

            await wait_until(applied, "every entry applied and acked", timeout=60)
            assert await dead_letters(redis, settings) == {}
            assert await assert_exact(redis, settings, producer.published) == {}
    finally:
        await redis.aclose()
