"""Property, on real Redis and a real worker: whatever invalid or foreign-session entries are
interleaved with the valid entries of several turns, the turns come out as the valid entries
alone make them, and every such entry is dead-lettered with its reason (issue 30;
docs/design.md, "Rejection is pure" and "A turn belongs to its session").

Several sessions share one partition (P = 1), so that an entry of one session can name another
session's turn at all. Each session publishes turns of the soak's shapes (bench/soak/load.py:
answers, cuts retried, tool steps, rate limits, failures), the sessions interleaved. Between any
two valid entries come probes: events of any type around a turn's position (in order, a gap,
far ahead, another attempt or step), from the turn's session or another one, or naming a turn
that never started; and now and then bytes no decoder reads. The pure fold judges each probe
against the turns as the valid entries so far made them; the ones it refuses are published,
with their expected reason. The worker must then commit exactly the frames, messages and
snapshots of the fold of the valid entries alone (`expect.fold_session`), which is also what
`terminus simulate` makes of each turn's valid entries, run as a log file; dead-letter exactly
the probes with those reasons, answer each that names no turn of its session with
`turn_refused`, and replay to the same bytes.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import msgspec
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from bench.soak.load import PLANS, turn_attempts
from terminus.events.codec import decode_command, encode_event, encode_json, encode_msgpack
from terminus.events.inbound import EVENT_TYPES, InboundEvent
from terminus.events.outbound import TurnRefused
from terminus.service.cli.replay import clear_prefix
from terminus.service.cli.simulate import simulate
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.connect import connect
from terminus.service.redis.replies import StreamEntry
from terminus.service.runtime.worker import Worker
from terminus.service.settings import Settings
from terminus.statemachines.errors import CoreError, NoTurnOfSession
from terminus.statemachines.fold import evolve
from terminus.statemachines.turn import Turn
from tests.support.faults.expect import assert_replay_clean, assert_session, fold_session
from tests.support.faults.harness import fault_settings, wait_owned, wait_quiet

DECODE: Final = msgspec.msgpack.Decoder(Turn)
KINDS: Final = ("message_stop", "[DONE]", "response.completed", "x")


@dataclass
class Log:
    """What is published, in order, and what each entry must come to."""

    events: list[InboundEvent | bytes] = field(default_factory=list)  # bytes: undecodable
    reasons: dict[int, str] = field(default_factory=dict)  # index of a probe -> its reason
    refused: dict[int, str] = field(default_factory=dict)  # index -> what its producer is told
    valid: dict[str, list[InboundEvent]] = field(default_factory=dict)  # by session
    turns: dict[str, Turn] = field(default_factory=dict)  # the valid entries' fold, by turn id

    def add_valid(self, event: InboundEvent) -> None:
        self.events.append(event)
        self.valid.setdefault(event.session_id, []).append(event)
        self.turns[event.turn_id], _ = evolve(self.turns.get(event.turn_id), event)

    def add_probe(self, probe: InboundEvent) -> None:
        """Publish the probe if the fold refuses it where it stands; the turns stay as they are."""
        known = self.turns.get(probe.turn_id)
        copy = None if known is None else DECODE.decode(encode_msgpack(known))
        try:
            evolve(copy, probe)
        except CoreError as exc:
            self.reasons[len(self.events)] = f"illegal: {exc}"
            if isinstance(exc, NoTurnOfSession):
                self.refused[len(self.events)] = exc.told
            self.events.append(probe)

    def add_garbage(self, raw: bytes) -> None:
        """An entry no decoder reads: dead-lettered as undecodable, with its bytes."""
        self.reasons[len(self.events)] = "undecodable: "
        self.events.append(raw)

    def raw(self, n: int) -> bytes:
        """The bytes of entry `n` as published."""
        entry = self.events[n]
        return entry if isinstance(entry, bytes) else encode_event(entry)


# Bytes no decoder reads: not JSON nor MessagePack, a known type short of its fields, a type
# from the future, invalid UTF-8 in a string, nesting past any sane depth, or anything at all.
GARBAGE: Final = st.one_of(
    st.sampled_from(
        [
            b"not an event",
            b'{"type":"text-delta","session_id":"ps-0"}',
            b'{"type":"from-the-future","session_id":"ps-0","turn_id":"ps-0-t0","seq":1}',
            b'{"type":"text-delta","session_id":"\xff"}',
            b'{"type":' + b"[" * 3000,
            b"\x81\xa4type\xa4nope",
        ]
    ),
    st.binary(max_size=40),
)


def sessions_of(draw: st.DrawFn) -> list[list[InboundEvent]]:
    """2-3 sessions of 1-2 turns each, every turn's events in order, turn after turn."""
    rng = random.Random(draw(st.integers(0, 2**32), label="seed"))
    sessions = []
    for n in range(draw(st.integers(2, 3), label="sessions")):
        events: list[InboundEvent] = []
        for t in range(draw(st.integers(1, 2), label="turns")):
            shape = draw(st.sampled_from(sorted(PLANS)), label="shape")
            for attempt in turn_attempts(rng, f"ps-{n}", f"ps-{n}-t{t}", shape, deltas=3):
                events.extend(attempt)
        sessions.append(events)
    return sessions


def probe(draw: st.DrawFn, log: Log, sessions: list[str]) -> InboundEvent:
    """An event of any type near a turn's position, from its session or another one, or of a
    turn that never started."""
    turn = draw(st.sampled_from([*log.turns.values(), None]), label="target")
    cls = draw(st.sampled_from(EVENT_TYPES), label="type")
    last = -1 if turn is None else turn.last_seq
    fields: dict[str, Any] = {
        "session_id": draw(st.sampled_from(["px", *sessions]), label="session"),
        "turn_id": "never-started" if turn is None else turn.turn_id,
        "step": 1 if turn is None else max(1, turn.step + draw(st.sampled_from((0, 0, 1, -1)))),
        "attempt": 1 if turn is None else max(1, turn.attempt + draw(st.sampled_from((0, 1)))),
        "seq": draw(st.sampled_from((last + 1, last + 2, last + 50, 2**53 - 1))),
        "part_id": "txt-0",
        "tool_call_id": "c",
        "tool_name": "search",
        "delta": "PROBE",
        "input": {},
        "output": "PROBE",
        "error": "PROBE",
        "finish_reason": draw(st.sampled_from(("stop", "tool-calls", "other"))),
        "kind": draw(st.sampled_from(KINDS)),
        "external": draw(st.booleans()),
    }
    if turn is not None and draw(st.booleans(), label="own session"):
        fields["session_id"] = turn.session_id
    made = msgspec.convert({k: v for k, v in fields.items() if k in cls.__struct_fields__}, cls)
    return cast("InboundEvent", made)


@st.composite
def logs(draw: st.DrawFn) -> Log:
    sessions = sessions_of(draw)
    ids = [events[0].session_id for events in sessions]
    cursors = [0] * len(sessions)
    log = Log()
    while any(c < len(s) for c, s in zip(cursors, sessions, strict=True)):
        live = [n for n, s in enumerate(sessions) if cursors[n] < len(s)]
        n = draw(st.sampled_from(live), label="next session")
        log.add_valid(sessions[n][cursors[n]])
        cursors[n] += 1
        for _ in range(draw(st.integers(0, 2), label="probes")):
            log.add_probe(probe(draw, log, ids))
        if draw(st.integers(0, 9), label="garbage?") == 0:
            log.add_garbage(draw(GARBAGE, label="garbage"))
    return log


async def scenario(url: str, log: Log) -> None:
    # `t-`: the root of the test run's keys, all the TLS + ACL pass's user may touch.
    config = fault_settings(url, partitions=1, prefix=f"t-rj-{uuid.uuid4().hex[:8]}")
    redis = connect(url)
    worker = Worker(redis, config)
    running = asyncio.create_task(worker.run())
    try:
        await wait_owned(redis, config)
        ids = await publish(redis, config, log)
        turns = sorted({(s, t) for s, t in map(identity, log.events) if t in log.turns})
        await wait_quiet(redis, config, turns, timeout=60)
        assert not running.done(), "the worker stopped"
        await check(redis, config, log, ids)
        await check_against_simulate(redis, config, log)
        await assert_replay_clean(redis, config)
    finally:
        await worker.stop()
        await running
        await clear_prefix(redis, config.prefix)
        await redis.aclose()


async def publish(redis: Any, config: Settings, log: Log) -> list[str]:
    """Every entry in order, in one pipeline: the events as the producer SDK writes them, the
    garbage as raw bytes no producer would write."""
    inbound = Keys(0, config.prefix).inbound
    async with redis.pipeline(transaction=False) as pipe:
        for n in range(len(log.events)):
            pipe.xadd(inbound, {FIELD: log.raw(n)})
        return [i.decode() for i in await pipe.execute()]


def identity(entry: InboundEvent | bytes) -> tuple[str, str]:
    return ("", "") if isinstance(entry, bytes) else (entry.session_id, entry.turn_id)


async def check(redis: Any, config: Settings, log: Log, ids: list[str]) -> None:
    for session_id, events in log.valid.items():
        expected = fold_session(enumerate_str(events), config.core())
        assert not expected.dead, "the valid entries alone are all applied"
        await assert_session(redis, config, session_id, expected, expected)
    keys = Keys(0, config.prefix)
    dead = cast("list[StreamEntry]", await redis.xrange(keys.dead))
    found = {f[b"source_id"].decode(): (f[b"reason"].decode(), f[b"raw"]) for _, f in dead}
    assert found.keys() == {ids[n] for n in log.reasons}
    for n, reason in log.reasons.items():
        got, raw = found[ids[n]]
        assert raw == log.raw(n), n
        # An undecodable entry's reason ends with what its decoder said.
        assert got.startswith(reason) if reason == "undecodable: " else got == reason, got
    commands = [decode_command(f[FIELD]) for _, f in await redis.xrange(keys.commands)]
    refusals = {c.entry_id: c for c in commands if isinstance(c, TurnRefused)}
    assert {e: c.reason for e, c in refusals.items()} == {ids[n]: t for n, t in log.refused.items()}
    for entry_id, command in refusals.items():
        refused = identity(log.events[ids.index(entry_id)])
        assert (command.session_id, command.turn_id) == refused


async def check_against_simulate(redis: Any, config: Settings, log: Log) -> None:
    """Each turn's frames and message in Redis are what `terminus simulate` makes of the turn's
    valid entries alone, given to it as a log file."""
    keys = Keys(0, config.prefix)
    with tempfile.TemporaryDirectory() as tmp:
        for session_id, events in log.valid.items():
            stored = [f[FIELD] for _, f in await redis.xrange(keys.session(session_id))]
            messages = await redis.hgetall(keys.messages(session_id))
            for turn_id in dict.fromkeys(e.turn_id for e in events):
                path = Path(tmp, f"{turn_id}.jsonl")
                own = [e for e in events if e.turn_id == turn_id]
                path.write_bytes(b"\n".join(encode_json(e) for e in own))
                outcome = simulate([path], session_id=session_id, turn_id=turn_id)
                frames = [f for f in stored if msgspec.json.decode(f)["turn_id"] == turn_id]
                assert frames == [encode_json(u) for u in outcome.updates], turn_id
                if outcome.message is not None:
                    message = outcome.message
                    assert messages[message.message_id.encode()] == encode_json(message)


def enumerate_str(events: list[InboundEvent]) -> list[tuple[str, InboundEvent]]:
    return [(str(n), event) for n, event in enumerate(events)]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # No shrinking: each step would start a worker (minutes); the fold's own property
    # (tests/unit/test_properties_rejection.py) shrinks the same defects in seconds.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(log=logs())
def test_refused_entries_change_nothing_and_are_each_dead_lettered_with_their_reason(
    single_redis_url: str, log: Log
) -> None:
    event(f"probes published: {min(len(log.reasons), 10) // 5 * 5}+")
    event(f"of them naming no turn of their session: {min(len(log.refused), 4)}+")
    event(f"undecodable entries: {min(sum(isinstance(e, bytes) for e in log.events), 3)}+")
    asyncio.run(scenario(single_redis_url, log))
