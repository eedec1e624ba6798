"""What the fault tests expect: the in-process fold of what was published, compared byte for byte.

The expected outcome of a session is the fold (`terminus.statemachines.fold.evolve`) of exactly the
events its producer published, in order, an illegal event skipped as a worker skips it (into the
dead letters). `assert_exact` compares every frame, message and snapshot with it; `replay --verify`
must find no difference either.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from redis.asyncio import Redis

from terminus.events.codec import (
    CodecError,
    decode_event,
    encode_json,
    encode_msgpack,
    sniff_format,
)
from terminus.events.inbound import InboundEvent, TurnStarted
from terminus.service.cli.replay import replay
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.settings import Settings
from terminus.statemachines.config import CoreConfig
from terminus.statemachines.errors import CoreError
from terminus.statemachines.fold import evolve
from terminus.statemachines.outputs import Outputs
from terminus.statemachines.turn import Turn
from tests.support.faults.harness import Source, Workers, dead_letters, keys_of
from tests.support.faults.load import Published


@dataclass
class Expected:
    """What a session's log must produce: frames (JSON, cursor None), messages, turns, dead."""

    frames: list[bytes] = field(default_factory=list)
    messages: dict[str, bytes] = field(default_factory=dict)
    turns: dict[str, Turn] = field(default_factory=dict)
    dead: dict[str, str] = field(default_factory=dict)  # entry id -> dead-letter reason


class SessionFold:
    """A session's entries folded one by one as a worker folds them: an illegal event is dead,
    the rest goes on (the chaos soak folds each entry as it publishes it)."""

    def __init__(self, config: CoreConfig) -> None:
        self.config = config
        self.out = Outputs()
        self.expected = Expected()

    def apply(self, entry_id: str, event: InboundEvent) -> None:
        try:
            turn, _ = evolve(self.expected.turns.get(event.turn_id), event, self.config, self.out)
        except CoreError as exc:
            self.expected.dead[entry_id] = f"illegal: {exc}"
            return
        self.expected.turns[event.turn_id] = turn

    def result(self) -> Expected:
        """What the entries folded so far must produce."""
        self.expected.frames = [encode_json(frame) for frame in self.out.frames]
        self.expected.messages = {m.message_id: encode_json(m) for m in self.out.messages}
        return self.expected


def fold_session(entries: Iterable[tuple[str, InboundEvent]], config: CoreConfig) -> Expected:
    """Fold the entries in order as a worker does: an illegal event is dead, the rest goes on."""
    fold = SessionFold(config)
    for entry_id, event in entries:
        fold.apply(entry_id, event)
    return fold.result()


async def logs_by_session(redis: Redis, settings: Settings) -> Published:
    """Every decodable event of every inbound log, by session, in log order."""
    logs: Published = defaultdict(list)
    for partition in range(settings.partitions):
        rows = cast(
            "list[StreamEntry]", await redis.xrange(Keys(partition, settings.prefix).inbound)
        )
        for entry_id, fields in rows:
            try:
                raw = fields.get(FIELD, b"")
                event = decode_event(raw, sniff_format(raw))
            except CodecError:
                continue
            logs[event.session_id].append((entry_id.decode(), event))
    return logs


def assert_same(actual: Sequence[bytes], expected: Sequence[bytes], what: str) -> None:
    """Equal sequences; on failure, the first differing position instead of two huge lists."""
    if list(actual) == list(expected):
        return
    n = next((i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b), None)
    n = min(len(actual), len(expected)) if n is None else n
    got = actual[n] if n < len(actual) else b"<none>"
    want = expected[n] if n < len(expected) else b"<none>"
    raise AssertionError(
        f"{what}: {len(actual)} items, expected {len(expected)}; first difference at {n}: "
        f"got {got[:300]!r}, expected {want[:300]!r}"
    )


async def assert_session(
    redis: Redis, settings: Settings, session_id: str, expected: Expected, logged: Expected
) -> None:
    """Frames and messages as folded from what was published; snapshots as from the log."""
    keys = keys_of(settings, session_id)
    rows = cast("list[StreamEntry]", await redis.xrange(keys.session(session_id)))
    assert_same([fields[FIELD] for _, fields in rows], expected.frames, f"frames of {session_id}")
    stored = cast("dict[bytes, bytes]", await redis.hgetall(keys.messages(session_id)))
    assert {k.decode(): v for k, v in stored.items()} == expected.messages, session_id
    for turn_id, turn in logged.turns.items():
        snapshot = await redis.get(keys.turn(turn_id))
        assert snapshot == encode_msgpack(turn), f"snapshot of {turn_id}"


def first_occurrences(entries: Sequence[tuple[str, InboundEvent]]) -> list[InboundEvent]:
    """The events of a log without the duplicates a retried publish may have added."""
    seen: set[tuple[str, int, int, int]] = set()
    events = []
    for _, event in entries:
        position = (event.turn_id, event.step, event.attempt, event.seq)
        if position not in seen:
            seen.add(position)
            events.append(event)
    return events


async def assert_exact(
    redis: Redis, settings: Settings, published: Published, *, duplicates: bool = False
) -> dict[Source, str]:
    """Every session exactly as the in-process fold says; returns the dead letters it expects.

    The log of each session must hold exactly the published events in order (with
    `duplicates`, a retried publish may have repeated some: they are ignored as such).
    """
    logs = await logs_by_session(redis, settings)
    assert sorted(logs) == sorted(published), "sessions in the logs"
    dead: dict[Source, str] = {}
    for session_id, entries in published.items():
        events = [event for _, event in entries]
        logged = logs[session_id]
        if duplicates:
            assert first_occurrences(logged) == events, f"log of {session_id}"
        else:
            assert [event for _, event in logged] == events, f"log of {session_id}"
        expected = fold_session(entries, settings.core())
        await assert_session(
            redis, settings, session_id, expected, fold_session(logged, settings.core())
        )
        stream = keys_of(settings, session_id).inbound
        dead |= {(stream, entry_id): reason for entry_id, reason in expected.dead.items()}
    return dead


async def assert_replay_clean(redis: Redis, settings: Settings) -> None:
    report = await replay(redis, settings, verify=True)
    assert report.differences == [], report.differences[:5]


async def assert_all_well(
    redis: Redis, settings: Settings, published: Published, workers: Workers, **exact: bool
) -> None:
    """What every fault test ends on: each session exact (`exact`: `assert_exact`'s options),
    no dead letter, a clean replay, and no worker exited on its own."""
    assert await assert_exact(redis, settings, published, **exact) == {}
    assert await dead_letters(redis, settings) == {}
    await assert_replay_clean(redis, settings)
    crashed = workers.crashed()
    assert crashed == [], "\n".join(crashed)


def started_turns(published: Published) -> list[tuple[str, str]]:
    """(session, turn) of every turn a published `turn-started` opens."""
    return sorted(
        {
            (e.session_id, e.turn_id)
            for entries in published.values()
            for _, e in entries
            if isinstance(e, TurnStarted)
        }
    )
