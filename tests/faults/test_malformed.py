"""Malformed entries mixed into live traffic are dead-lettered, one by one, and nothing else is.

DESIGN section 5 (poison) and invariant 5: an entry that fails to decode or to apply goes to its
partition's dead stream at once, with its raw bytes, the reason, the source stream and entry id;
the rest of the batch goes on and no worker crashes. Events for a turn that is already final are
not errors: they are ignored and counted in the turn's snapshot. A rejected event changes nothing
(issue 30): a turn whose seq jumps far ahead finishes on the events that follow, and an entry of
another session naming its open turn reaches nothing of it.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Final, cast

import pytest
from redis.asyncio import Redis

from terminus.events.codec import encode_event
from terminus.events.inbound import InboundEvent, TextDelta
from terminus.service.keys import Keys
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from terminus.statemachines.states import TurnState
from tests.support.backends import Target
from tests.support.faults.expect import (
    assert_exact,
    assert_replay_clean,
    fold_session,
    started_turns,
)
from tests.support.faults.harness import (
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
from tests.support.faults.load import (
    RecordingProducer,
    TurnPlan,
    plan_sessions,
    publish_sessions,
    publish_turn,
)
from tests.support.faults.malformed import (
    Junk,
    beside,
    check_junk,
    foreign_event,
    foreign_reason,
    gap_turn,
    ghost_event,
    junk,
)

VALID = plan_sessions(sessions=8, turns=10, tag="ok")
LATE: Final = 3  # late events after each valid session's last turn
GAP_TURNS: Final = 100  # each with one seq far ahead, and named by one entry of another session
GHOSTS: Final = 100  # events of turns that never started
JUNK: Final = 730  # entries no decoder accepts


def late_events(plan: TurnPlan) -> list[InboundEvent]:
    """Deltas after the turn's end, from a producer that did not notice it was over."""
    attempt = 2 if plan.cut else 1
    return [
        TextDelta(
            session_id=plan.session_id,
            turn_id=plan.turn_id,
            attempt=attempt,
            seq=500 + n,
            part_id="late",
            delta="late",
        )
        for n in range(LATE)
    ]


async def valid_session(producer: Producer, turns: list[TurnPlan]) -> None:
    for plan in turns:
        await publish_turn(producer, plan)
    await producer.publish(late_events(turns[-1]))


async def odd_sessions(producer: Producer, settings: Settings) -> dict[Source, str]:
    """Turns with a seq far ahead, each named mid-stream by an entry of another session of its
    partition, and events of turns that never started. Returns the foreign entries' reasons
    (the fold of their own session alone cannot know whose turn they name)."""
    foreign: dict[Source, str] = {}
    for n in range(GAP_TURNS):
        session_id = f"gap{n}"
        events = gap_turn(session_id)
        await producer.publish(events[:4])
        head = [(str(n), event) for n, event in enumerate(events[:4])]
        victim = fold_session(head, settings.core()).turns[events[0].turn_id]
        intruder = foreign_event(beside(session_id, producer.partitions, f"foreign{n}"), victim)
        [entry_id] = await producer.publish([intruder])
        foreign[producer.inbound_key(session_id), entry_id.decode()] = foreign_reason(
            victim, intruder
        )
        await producer.publish(events[4:])
    for n in range(GHOSTS):
        await producer.publish([ghost_event(f"ghost{n}")])
    return foreign


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


@pytest.mark.cluster
async def test_malformed_entries_are_dead_lettered(fault_target: Target, tmp_path: Path) -> None:
    settings = fault_settings(fault_target.url, partitions=4, redis_cluster=fault_target.cluster)
    redis = fault_target.client()
    try:
        with Workers(settings, tmp_path) as workers:
            for _ in range(2):
                workers.start()
            await wait_owned(redis, settings, workers=2)
            producer = RecordingProducer(redis, settings)
            valid = asyncio.gather(*(valid_session(producer, turns) for turns in VALID))
            odd = asyncio.create_task(odd_sessions(producer, settings))
            injected = await inject(redis, settings, random.Random(5))
            _, foreign = await asyncio.gather(valid, odd)
            await wait_quiet(redis, settings, started_turns(producer.published))

            illegal = await assert_exact(redis, settings, producer.published) | foreign
            dead = await dead_letters(redis, settings)
            assert (len(injected), len(illegal)) == (JUNK, 2 * GAP_TURNS + GHOSTS)
            assert sorted(dead) == sorted([*injected, *illegal])  # 1,000, and nothing else
            for source, item in injected.items():
                check_junk(dead[source], item)
            check_illegal(dead, illegal, producer)
            for n in range(GAP_TURNS):  # each as if its seq had never jumped
                keys = keys_of(settings, f"gap{n}")
                snapshot = await redis.get(keys.turn(f"gap{n}-t"))
                assert isinstance(snapshot, bytes)
                assert decode_turn(snapshot).state is TurnState.FINISHED
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
