"""The stall timer against a real Redis (DESIGN section 5): silence becomes an `attempt-stalled`
event in the inbound log, and the machine decides from there like from any other event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final, Protocol, cast

import msgspec
import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from worker_support import (
    PARTITIONS,
    SESSION,
    event,
    keys_of,
    snapshot,
    wait_state,
)

from bench.common.redis_ops import server_usage
from terminus.events.codec import decode_event
from terminus.events.inbound import (
    AttemptStalled,
    AttemptStarted,
    FinishStep,
    InboundEvent,
    TextDelta,
    TextStart,
    ToolCall,
    TurnStarted,
    Usage,
)
from terminus.events.outbound import AgentError, AttemptDiscarded, Retrying
from terminus.service.fold.applier import PartitionFold, Timeouts, entry_ms
from terminus.service.keys import FIELD, Keys
from terminus.service.redis.replies import StreamEntry
from terminus.service.runtime.leases import Leases, lease_value
from terminus.service.runtime.stall import StallTimer, scan_all
from terminus.service.runtime.worker import Worker
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.views import session_updates
from terminus.service.settings import Settings
from terminus.statemachines.outputs import Transition
from terminus.statemachines.states import TurnState
from terminus.statemachines.turn import Turn

pytestmark = pytest.mark.cluster  # on one Redis and on a Redis Cluster

SHORT_MS: Final = 300
LONG_MS: Final = 60_000


class StartWorker(Protocol):
    async def __call__(self, *, stall_timeout_ms: int, tool_timeout_ms: int) -> Worker: ...


@pytest.fixture
async def worker(redis: Redis, prefix: str) -> AsyncIterator[StartWorker]:
    """Starts one in-process worker with the given timeouts; stopped after the test."""
    started: list[tuple[Worker, asyncio.Task[None]]] = []

    async def start(*, stall_timeout_ms: int, tool_timeout_ms: int) -> Worker:
        settings = Settings(
            prefix=prefix,
            partitions=PARTITIONS,
            block_ms=100,
            lease_ttl_ms=1000,
            stall_timeout_ms=stall_timeout_ms,
            tool_timeout_ms=tool_timeout_ms,
        )
        running = Worker(redis, settings)
        started.append((running, asyncio.create_task(running.run())))
        return running

    yield start
    for running, task in started:
        await running.stop()
        await task


def silent_attempt(turn: str) -> list[InboundEvent]:
    """A turn whose first attempt streams a little and then goes quiet."""
    return [
        event(TurnStarted, 0, turn),
        event(AttemptStarted, 1, turn, provider="p", model="m"),
        event(TextStart, 2, turn, part_id="a"),
        event(TextDelta, 3, turn, part_id="a", delta="Hel"),
    ]


TOOL_USE: Final = {"finish_reason": "tool-calls", "raw_finish_reason": "tool_use"}


def tool_step(turn: str) -> list[InboundEvent]:
    """A turn whose first step ends, with proof, in a tool call: it then awaits the next step."""
    return [
        event(TurnStarted, 0, turn),
        event(AttemptStarted, 1, turn, provider="p", model="m"),
        event(ToolCall, 2, turn, tool_call_id="c-1", tool_name="search", input={"q": "x"}),
        event(FinishStep, 3, turn, **TOOL_USE, usage=Usage(output_tokens=5)),
    ]


async def log_entries(redis: Redis, key: str) -> list[tuple[str, InboundEvent]]:
    rows = cast("list[StreamEntry]", await redis.xrange(key))
    return [(i.decode(), decode_event(fields[FIELD])) for i, fields in rows]


async def stalls(redis: Redis, prefix: str, turn_id: str) -> list[tuple[int, int, int]]:
    """(step, attempt, seq) of every `attempt-stalled` of the turn in the inbound log."""
    return [
        (e.step, e.attempt, e.seq)
        for _, e in await log_entries(redis, keys_of(prefix).inbound)
        if isinstance(e, AttemptStalled) and e.turn_id == turn_id
    ]


async def transitions(redis: Redis, prefix: str, turn_id: str) -> list[tuple[str, str, str]]:
    rows = cast("list[StreamEntry]", await redis.xrange(keys_of(prefix).transitions))
    moves = [msgspec.json.decode(fields[FIELD], type=Transition) for _, fields in rows]
    return [(t.source, t.dest, t.trigger) for t in moves if t.turn_id == turn_id]


async def test_a_silent_attempt_is_stalled_retried_and_failed_when_no_retry_comes(
    redis: Redis, admin_redis: Redis, prefix: str, worker: StartWorker
) -> None:
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(silent_attempt("t-1"))
    await worker(stall_timeout_ms=SHORT_MS, tool_timeout_ms=LONG_MS)
    turn = await wait_state(redis, prefix, "t-1", TurnState.FAILED)

    # One stall cut the attempt (seq 4), one more found no retry started (seq 5), each once.
    assert await stalls(redis, prefix, "t-1") == [(1, 1, 4), (1, 1, 5)]
    assert await transitions(redis, prefix, "t-1") == [
        ("pending", "streaming", "start_attempt"),
        ("streaming", "truncated", "truncate"),
        ("truncated", "retrying", "schedule_retry"),
        ("retrying", "failed", "fail"),
    ]
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    discarded = [f for f in frames if isinstance(f, AttemptDiscarded)]
    assert [(f.attempt, f.reason, f.part_ids) for f in discarded] == [(1, "stalled", ["a"])]
    assert [(f.attempt, f.reason) for f in frames if isinstance(f, Retrying)] == [(2, "stalled")]
    errors = [f for f in frames if isinstance(f, AgentError)]
    assert len(errors) == 1
    assert frames[-1] is errors[0]
    assert [(a.outcome, a.reason) for a in turn.history] == [("truncated", "stalled")]
    assert turn.ignored == {}  # no stall was appended twice, or it would count as a duplicate
    assert await admin_redis.zscore(keys_of(prefix).open_turns, "t-1") is None


async def test_a_turn_awaiting_its_next_step_waits_for_the_tool_timeout(
    redis: Redis, admin_redis: Redis, prefix: str, worker: StartWorker
) -> None:
    producer = Producer(redis, partitions=PARTITIONS, prefix=prefix)
    await producer.publish([*tool_step("t-tools"), *silent_attempt("t-silent")])
    await worker(stall_timeout_ms=SHORT_MS, tool_timeout_ms=LONG_MS)
    await wait_state(redis, prefix, "t-silent", TurnState.FAILED)

    # The silent turn went through two stall timeouts; the tool turn's deadline is far away.
    assert await stalls(redis, prefix, "t-tools") == []
    tools = await snapshot(redis, prefix, "t-tools")
    assert tools is not None
    assert tools.state is TurnState.AWAITING_STEP
    entries = await log_entries(redis, keys_of(prefix).inbound)
    last_id = [i for i, e in entries if e.turn_id == "t-tools"][-1]
    deadline = await admin_redis.zscore(keys_of(prefix).open_turns, "t-tools")
    assert deadline == entry_ms(last_id) + LONG_MS


async def test_a_turn_whose_tools_never_report_fails_after_the_tool_timeout(
    redis: Redis, prefix: str, worker: StartWorker
) -> None:
    await Producer(redis, partitions=PARTITIONS, prefix=prefix).publish(tool_step("t-tools"))
    await worker(stall_timeout_ms=LONG_MS, tool_timeout_ms=SHORT_MS)
    await wait_state(redis, prefix, "t-tools", TurnState.FAILED)
    assert await stalls(redis, prefix, "t-tools") == [(1, 1, 4)]
    assert await transitions(redis, prefix, "t-tools") == [
        ("pending", "streaming", "start_attempt"),
        ("streaming", "awaiting_terminal", "finish_step"),
        ("awaiting_terminal", "awaiting_step", "prove_tool_calls"),
        ("awaiting_step", "failed", "fail"),
    ]
    frames = await session_updates(redis, SESSION, partitions=PARTITIONS, prefix=prefix)
    assert len([f for f in frames if isinstance(f, AgentError)]) == 1


async def _timer(
    redis: Redis, prefix: str, worker_id: str, epoch: int, keys: Keys | None = None
) -> StallTimer:
    """A stall timer of the session's partition (or of `keys`') holding `worker_id:epoch`, with
    one streaming turn due since the epoch of time."""
    keys = keys or keys_of(prefix)
    settings = Settings(prefix=prefix, partitions=PARTITIONS, stall_timeout_ms=SHORT_MS)
    timeouts = Timeouts(settings.stall_timeout_ms, settings.tool_timeout_ms)
    fold = PartitionFold(keys, settings.core(), timeouts, settings.session_maxlen)
    fold.turns["t-1"] = Turn(
        session_id=SESSION, turn_id="t-1", max_attempts=3, state=TurnState.STREAMING, last_seq=6
    )
    await redis.zadd(keys.open_turns, {"t-1": 0})
    return StallTimer(redis, keys, lease_value(worker_id, epoch), fold, settings)


async def test_the_stall_is_appended_at_most_once_per_position(redis: Redis, prefix: str) -> None:
    keys = keys_of(prefix)
    assert await Leases(redis, prefix).acquire(keys.partition, "worker-a", 10_000) == 1
    timer = await _timer(redis, prefix, "worker-a", 1)
    assert await timer.scan() == 1
    assert await timer.scan() == 0  # still due (nothing applied it yet), but already sent
    [(_, stalled)] = await log_entries(redis, keys.inbound)
    assert isinstance(stalled, AttemptStalled)
    assert (stalled.turn_id, stalled.step, stalled.attempt, stalled.seq) == ("t-1", 1, 1, 7)


async def test_a_timer_without_the_lease_appends_nothing(redis: Redis, prefix: str) -> None:
    keys = keys_of(prefix)
    assert await Leases(redis, prefix).acquire(keys.partition, "worker-b", 10_000) == 1
    timer = await _timer(redis, prefix, "worker-a", 1)
    assert await timer.scan() == 0
    assert await redis.xlen(keys.inbound) == 0


async def _held_timers(redis: Redis, prefix: str, partitions: range) -> list[StallTimer]:
    """A timer of each partition, each holding its lease and one due turn."""
    timers = []
    for partition in partitions:
        keys = Keys(partition, prefix)
        assert await Leases(redis, prefix).acquire(partition, "worker-a", 10_000) == 1
        timers.append(await _timer(redis, prefix, "worker-a", 1, keys))
    return timers


async def test_timers_scanned_together_read_the_clock_once_and_each_set_once(
    redis: Redis, admin_redis: Redis, prefix: str, on_cluster: bool
) -> None:
    if on_cluster:
        pytest.skip("counts the commands of one server")
    timers = await _held_timers(redis, prefix, range(3))
    before = await server_usage(admin_redis)
    assert await scan_all(redis, timers) == [1, 1, 1]
    calls = (await server_usage(admin_redis)).minus(before).commands
    assert (calls["time"][0], calls["zrangebyscore"][0]) == (1, 3)
    for timer in timers:
        [(_, stalled)] = await log_entries(redis, timer.keys.inbound)
        assert isinstance(stalled, AttemptStalled)


async def test_a_set_that_is_no_sorted_set_fails_its_timer_alone(redis: Redis, prefix: str) -> None:
    timers = await _held_timers(redis, prefix, range(3))
    broken = timers[1].keys.open_turns
    await redis.delete(broken)
    await redis.set(broken, "not a sorted set")
    first, failed, last = await scan_all(redis, timers)
    assert (first, last) == (1, 1)
    assert isinstance(failed, ResponseError)
    assert "WRONGTYPE" in str(failed)
    assert await redis.xlen(timers[1].keys.inbound) == 0
