"""The state the probes read: one session with a finished turn and a live one, published by the
producer SDK and folded by a real worker, plus the two states only retention and a damaged
Redis leave (a released turn's tombstone, a snapshot that does not decode). Meant for a private
Redis, or a prefix of its own: it writes under `settings.prefix`."""

from __future__ import annotations

import asyncio
import time
from typing import Final, NamedTuple

from redis.asyncio import Redis

from terminus.events.inbound import (
    AttemptStarted,
    FinishStep,
    InboundEvent,
    StreamClosed,
    TextDelta,
    TextEnd,
    TextStart,
    TurnStarted,
    Usage,
)
from terminus.service.conformance import ConformanceError
from terminus.service.fold.releases import TOMBSTONE
from terminus.service.gateway.timeline import load_turn
from terminus.service.keys import keys_for_session
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.settings import Settings
from terminus.statemachines.states import FINAL_STATES
from terminus.statemachines.turn import Turn

FOLD_DEADLINE_S: Final = 30.0
NOT_A_SNAPSHOT: Final = b"\xc1"  # a byte MessagePack never uses


class Scene(NamedTuple):
    """The ids the probes ask about."""

    session: str
    finished: str
    live: str
    archived: str
    unreadable: str
    quiet: str  # a session with no turn


SCENE: Final = Scene(
    session="contract-session",
    finished="contract-finished",
    live="contract-live",
    archived="contract-archived",
    unreadable="contract-unreadable",
    quiet="contract-quiet-session",
)


def _opening(session: str, turn: str) -> list[InboundEvent]:
    return [
        TurnStarted(session_id=session, turn_id=turn, seq=0),
        AttemptStarted(session_id=session, turn_id=turn, seq=1, provider="p", model="m"),
        TextStart(session_id=session, turn_id=turn, seq=2, part_id="a"),
        TextDelta(session_id=session, turn_id=turn, seq=3, part_id="a", delta="Hello"),
    ]


def _ending(session: str, turn: str) -> list[InboundEvent]:
    return [
        TextEnd(session_id=session, turn_id=turn, seq=4, part_id="a"),
        FinishStep(
            session_id=session,
            turn_id=turn,
            seq=5,
            finish_reason="stop",
            raw_finish_reason="end_turn",
            usage=Usage(input_tokens=3, output_tokens=1),
        ),
        StreamClosed(session_id=session, turn_id=turn, seq=6),
    ]


async def prepare(redis: Redis, settings: Settings, scene: Scene = SCENE) -> Scene:
    """Publish and fold the scene's turns, then write the tombstone and the broken snapshot."""
    s = scene.session
    producer = Producer(redis, partitions=settings.partitions, prefix=settings.prefix)
    await producer.publish(
        [*_opening(s, scene.finished), *_ending(s, scene.finished), *_opening(s, scene.live)]
    )
    worker = Worker(redis, settings)
    running = asyncio.create_task(worker.run())
    try:
        await _until_folded(redis, settings, scene)
    finally:
        await worker.stop()
        await running
    keys = keys_for_session(s, settings.partitions, settings.prefix)
    await redis.set(keys.turn(scene.archived), TOMBSTONE)
    await redis.set(keys.turn(scene.unreadable), NOT_A_SNAPSHOT)
    return scene


async def _until_folded(redis: Redis, settings: Settings, scene: Scene) -> None:
    deadline = time.monotonic() + FOLD_DEADLINE_S
    while time.monotonic() < deadline:
        finished = await _turn(redis, settings, scene.session, scene.finished)
        live = await _turn(redis, settings, scene.session, scene.live)
        if finished is not None and finished.state in FINAL_STATES and live is not None:
            return
        await asyncio.sleep(0.02)
    raise ConformanceError(f"the worker did not fold the scene within {FOLD_DEADLINE_S} s")


async def _turn(redis: Redis, settings: Settings, session: str, turn: str) -> Turn | None:
    return await load_turn(redis, session, turn, settings.partitions, settings.prefix)
