"""The producer's turn runner against real workers and a fake provider over HTTP: it retries what
the workers retry, after the delay they chose, and returns the persisted message or raises the
typed error (issue: "Adopted in an afternoon (1/2)")."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from serving import running_worker

from terminus.events.codec import MAX_EVENT_BYTES
from terminus.events.outbound import CompactionRequired, TextPart, ToolPart, ToolsRequired
from terminus.service.keys import keys_for_session
from terminus.service.sdk.attempts import AttemptOrderError
from terminus.service.sdk.callers import anthropic
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.runner import Attempt, ToolOutcome, TurnFailed, TurnRefused, TurnRunner
from terminus.service.sdk.views import session_messages
from terminus.service.settings import Settings
from terminus.service.traces.logs import PartitionTraces
from tests.support.fake_provider import Reply, fake_provider
from tests.support.faults.malformed import beside

ANTHROPIC = Path(__file__).parents[1] / "fixtures/provider-streams/anthropic"
# The recorded file drops the blank line that ends its last event on the wire (WHATWG: an event
# is dispatched at the blank line, and a stream cut before it loses the event).
ANSWER = (ANTHROPIC / "text-basic-ping-sdk-python.sse").read_bytes().rstrip(b"\n") + b"\n\n"
OVERLOADED = json.loads((ANTHROPIC / "http-529-overloaded-sdk-ts-issue616.json").read_text())
RATE_LIMITED = json.loads(
    (ANTHROPIC / "http-429-rate-limit-error-recorded-sdk-python.json").read_text()
)
SSE = {"content-type": "text/event-stream"}
CLOCK_S = 1_800_000_000.0  # the producer's clock in these tests: reset times are set against it


def error_reply(recorded: dict[str, Any], **headers: str) -> Reply:
    """A recorded error answer, replayed with `headers` added (its length and date dropped)."""
    kept = {k: v for k, v in recorded["headers"].items() if k not in ("content-length", "date")}
    body = json.dumps(recorded["body"]).encode()
    return Reply(recorded["status_code"], body, {**kept, **headers})


class Sleeps(list[float]):
    """Records each wait the runner makes, and makes none."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
async def runner(redis: Redis, prefix: str) -> AsyncIterator[tuple[TurnRunner, Sleeps]]:
    settings = Settings(prefix=prefix, partitions=4, block_ms=100, lease_ttl_ms=2000)
    producer = Producer(redis, partitions=4, prefix=prefix, clock=lambda: CLOCK_S)
    sleeps = Sleeps()
    turn_runner = TurnRunner(producer, decision_timeout_s=30, sleep=sleeps)
    async with running_worker(redis, settings):
        yield turn_runner, sleeps
    await turn_runner.close()


def text_of(parts: Sequence[object]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


async def test_a_clean_answer_is_returned_as_persisted(runner: tuple[TurnRunner, Sleeps]) -> None:
    turn_runner, sleeps = runner
    async with fake_provider([Reply(200, ANSWER, SSE)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        message = await turn_runner.run_turn("s-clean", "t-clean", call)
    assert text_of(message.parts) == "Hello there!"
    assert message.finish_reason == "stop"
    assert json.loads(provider.requests[0])["stream"] is True
    assert not sleeps


async def test_a_stream_cut_mid_line_is_retried_and_only_the_retry_kept(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, _ = runner
    cut = ANSWER.index(b'"text":"Hello"') + 9  # inside the first delta's data line
    replies = [Reply(200, ANSWER, SSE, cut_at=cut), Reply(200, ANSWER, SSE)]
    async with fake_provider(replies) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        message = await turn_runner.run_turn("s-cut", "t-cut", call)
    assert len(provider.requests) == 2
    assert text_of(message.parts) == "Hello there!"


async def test_a_429_waits_its_retry_after_then_succeeds(runner: tuple[TurnRunner, Sleeps]) -> None:
    turn_runner, sleeps = runner
    replies = [error_reply(RATE_LIMITED, **{"retry-after": "7"}), Reply(200, ANSWER, SSE)]
    async with fake_provider(replies) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        message = await turn_runner.run_turn("s-429", "t-429", call)
    assert text_of(message.parts) == "Hello there!"
    assert len(sleeps) == 1
    assert 7 <= sleeps[0] < 8


async def test_a_reset_time_ahead_sets_the_wait(runner: tuple[TurnRunner, Sleeps]) -> None:
    turn_runner, sleeps = runner
    reset = f"{CLOCK_S + 20:.0f}"  # 20 s after the producer's clock
    replies = [
        error_reply(RATE_LIMITED, **{"x-llm-error-reset-at": reset}),
        Reply(200, ANSWER, SSE),
    ]
    async with fake_provider(replies) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        await turn_runner.run_turn("s-reset", "t-reset", call)
    assert len(sleeps) == 1
    assert 20 <= sleeps[0] < 21


async def test_overloaded_until_the_budget_is_spent_fails_typed(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, sleeps = runner
    async with fake_provider([error_reply(OVERLOADED)] * 3) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        with pytest.raises(TurnFailed) as failed:
            await turn_runner.run_turn("s-over", "t-over", call)
    assert len(provider.requests) == 3
    assert len(sleeps) == 2
    error = failed.value.error
    assert (error.type, error.retryable, error.status, error.attempt) == (
        "provider_unavailable",
        True,
        529,
        3,
    )


async def test_a_402_with_our_headers_fails_at_once(runner: tuple[TurnRunner, Sleeps]) -> None:
    turn_runner, sleeps = runner
    headers = {
        "content-type": "application/json",
        "x-llm-error-type": "budget",
        "x-llm-error-retryable": "false",
    }
    body = b'{"error": {"message": "monthly budget spent"}}'
    async with fake_provider([Reply(402, body, headers)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        with pytest.raises(TurnFailed) as failed:
            await turn_runner.run_turn("s-402", "t-402", call)
    assert len(provider.requests) == 1
    assert not sleeps
    error = failed.value.error
    assert (error.type, error.retryable, error.status) == ("budget", False, 402)
    assert error.message == "monthly budget spent"


async def test_a_refused_connection_is_retried_as_provider_unavailable(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, sleeps = runner
    call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url="http://127.0.0.1:9")
    with pytest.raises(TurnFailed) as failed:
        await turn_runner.run_turn("s-refused", "t-refused", call)
    assert failed.value.error.type == "provider_unavailable"
    assert len(sleeps) == 2


TOOL_USE = (ANTHROPIC / "tool-use-recorded-fantasy.sse").read_bytes().rstrip(b"\n") + b"\n\n"
OVERFLOW = json.loads(
    (
        ANTHROPIC / "http-400-input-plus-max-tokens-exceed-context-docker-agent-issue569.json"
    ).read_text()
)


async def test_a_tool_step_runs_the_tools_then_the_next_step(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, _ = runner
    asked: list[ToolsRequired] = []

    async def tools(required: ToolsRequired) -> list[ToolOutcome]:
        asked.append(required)
        return [ToolOutcome(t.tool_call_id, output="sunny, 21 C") for t in required.tools]

    def body(attempt: Attempt) -> dict[str, Any]:
        results = [{"id": o.tool_call_id, "content": o.output} for o in attempt.tool_outcomes]
        return {"max_tokens": 64, "step": attempt.step, "results": results}

    async with fake_provider([Reply(200, TOOL_USE, SSE), Reply(200, ANSWER, SSE)]) as provider:
        call = anthropic("key", "claude-x", body, base_url=provider.url)
        message = await turn_runner.run_turn("s-tools", "t-tools", call, tools=tools)
    [required] = asked
    [tool] = required.tools
    assert (tool.tool_name, required.step) == ("weather", 2)
    second = json.loads(provider.requests[1])
    assert second["step"] == 2
    assert second["results"] == [{"id": tool.tool_call_id, "content": "sunny, 21 C"}]
    tools_done = [p for p in message.parts if isinstance(p, ToolPart)]
    assert [(p.name, p.state, p.output) for p in tools_done] == [
        ("weather", "completed", "sunny, 21 C")
    ]
    assert text_of(message.parts).endswith("Hello there!")


async def test_a_context_overflow_asks_for_compaction_then_goes_on(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, sleeps = runner
    compacted: list[CompactionRequired] = []
    seen: list[bool] = []

    async def compact(command: CompactionRequired) -> None:
        compacted.append(command)

    def body(attempt: Attempt) -> dict[str, Any]:
        seen.append(attempt.compact)
        return {"max_tokens": 64}

    overflow = Reply(
        400, json.dumps(OVERFLOW["body"]).encode(), {"content-type": "application/json"}
    )
    async with fake_provider([overflow, Reply(200, ANSWER, SSE)]) as provider:
        call = anthropic("key", "claude-x", body, base_url=provider.url)
        message = await turn_runner.run_turn("s-ctx", "t-ctx", call, on_compaction=compact)
    assert [c.error.type for c in compacted] == ["context_overflow"]
    assert seen == [False, True]
    assert text_of(message.parts) == "Hello there!"
    assert not sleeps


async def test_a_repeated_attempt_is_refused_before_it_is_published(
    redis: Redis, prefix: str
) -> None:
    turn = Producer(redis, partitions=4, prefix=prefix).turn("s-order", "t-order")
    await turn.start()
    await turn.start_attempt(provider="anthropic")
    with pytest.raises(AttemptOrderError, match="attempt 1 of step 1 cannot start"):
        await turn.start_attempt(attempt=1, provider="anthropic")
    inbound = Producer(redis, partitions=4, prefix=prefix).inbound_key("s-order")
    assert await redis.xlen(inbound) == 2  # turn-started and the first attempt-started


async def test_a_run_given_up_by_its_caller_leaves_no_request_running(
    runner: tuple[TurnRunner, Sleeps],
) -> None:
    turn_runner, _ = runner
    started, stopped = asyncio.Event(), asyncio.Event()

    async def call(attempt: Attempt) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise

    running = asyncio.create_task(
        turn_runner.run_turn("s-gone", "t-gone", call, provider="anthropic")
    )
    await asyncio.wait_for(started.wait(), 10)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    assert stopped.is_set()


async def test_a_turn_id_of_another_session_is_refused_not_waited_for(
    redis: Redis, prefix: str, runner: tuple[TurnRunner, Sleeps]
) -> None:
    """Issue 30: the runner once waited forever for decisions about another session's turn
    (its entries were late events of that turn); it now raises on the workers' refusal."""
    turn_runner, _ = runner
    other = beside("s-owner", 4, "s-other")  # the owner's partition: its workers know the turn
    async with fake_provider([Reply(200, ANSWER, SSE)] * 2) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        owned = await turn_runner.run_turn("s-owner", "t-taken", call)
        with pytest.raises(TurnRefused) as refused:
            await asyncio.wait_for(turn_runner.run_turn(other, "t-taken", call), 20)
    assert refused.value.reason == f"turn t-taken is not a turn of session {other}"
    stored = await session_messages(redis, "s-owner", partitions=4, prefix=prefix)
    assert stored == [owned], "the owner's message is as it was"


async def test_a_traceparent_given_to_the_runner_is_the_parent_of_the_turns_span(
    runner: tuple[TurnRunner, Sleeps], redis: Redis, prefix: str
) -> None:
    turn_runner, _ = runner
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with fake_provider([Reply(200, ANSWER, SSE)]) as provider:
        call = anthropic("key", "claude-x", {"max_tokens": 64}, base_url=provider.url)
        await turn_runner.run_turn("s-traced", "t-traced", call, traceparent=caller)
    keys = keys_for_session("s-traced", 4, prefix)
    (trace,) = await PartitionTraces(redis, keys, Settings().core(), MAX_EVENT_BYTES).read(None)
    assert (trace.root.trace_id, trace.root.parent_id) == (caller[3:35], caller[36:52])
    assert trace.root.parent_remote
    assert [s.attributes["terminus.attempt.outcome"] for s in trace.spans[1:]] == ["proven"]
