"""Run one turn from the producer's side, attempt by attempt, until the workers call it final.

    runner = TurnRunner(producer)
    message = await runner.run_turn("session-1", "turn-1", call)

`call(attempt)` makes one provider request and streams the response into `attempt`
(`attempt.feed_bytes(chunk)`, or `attempt.report_http_error(status, headers, body)`);
service/sdk/callers.py has one for each provider terminus reads. The runner numbers the
attempts, stamps every event with its clock, and after each attempt waits for the workers'
decision on the commands stream: a retry (started `delay_ms` after the runner reads it), a
compaction (`on_compaction`, then the next attempt), tools (`tools`, then the next step), a
continuation (the next step sends the paused content back as-is, `attempt.continuation`, with no
help from the caller), or the end. It returns the persisted message, or raises `TurnFailed`
carrying the typed error, or `TurnCancelled`. A cancel that arrives while a request runs stops
that request; a decision made on the attempt's proof (the end, a next step) lets the request read
its stream to the end first, for up to `settle_s`. A turn id that is no turn of the session
(another session's turn has it) is refused by the workers: the runner raises `TurnRefused` as soon
as they say so, rather than wait for decisions that never come.

If the producer dies mid-turn, the workers' stall timer ends the turn, as for any producer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from terminus.events.adapters.continuation import CONTINUABLE, continuation_of
from terminus.events.codec import decode_message
from terminus.events.errors import LLMErrorPayload
from terminus.events.inbound import ToolError, ToolResult, TurnEnded
from terminus.events.outbound import (
    CompactionRequired,
    ContinuationRequired,
    PersistedMessage,
    ProducerCommand,
    RequestedTool,
    RetryScheduled,
    ToolsRequired,
    TurnConcluded,
)
from terminus.events.outbound import TurnRefused as Refusal
from terminus.service import TerminusError
from terminus.service.sdk.decisions import Decisions
from terminus.service.sdk.producer import Producer
from terminus.service.sdk.publisher import TurnPublisher
from terminus.service.sdk.steps import Attempt, Plan, ProviderCall, ToolOutcome

CANNOT_CONTINUE = "the runner cannot send this provider's continuation"


class TurnFailed(TerminusError):
    """The workers failed the turn; `error` is the typed error every subscriber saw."""

    def __init__(self, turn_id: str, error: LLMErrorPayload) -> None:
        super().__init__(f"turn {turn_id} failed: {error.type}: {error.message}")
        self.turn_id = turn_id
        self.error = error


class TurnCancelled(TerminusError):
    """The turn was cancelled (by a user, or an operator) before it finished."""

    def __init__(self, turn_id: str, message_id: str | None) -> None:
        super().__init__(f"turn {turn_id} was cancelled")
        self.turn_id = turn_id
        self.message_id = message_id


class TurnRefused(TerminusError):
    """The workers refused the turn's entries: its id is no turn of this session (`reason`)."""

    def __init__(self, turn_id: str, reason: str) -> None:
        super().__init__(f"turn {turn_id} refused: {reason}")
        self.turn_id = turn_id
        self.reason = reason


class NoDecision(TerminusError, TimeoutError):
    """The workers decided nothing about the turn within the runner's `decision_timeout_s`."""


Tools = Callable[[ToolsRequired], Awaitable[list[ToolOutcome] | None]]
Compaction = Callable[[CompactionRequired], Awaitable[None]]


@dataclass
class TurnRunner:
    """Runs turns through `producer`; one runner serves any number of concurrent turns."""

    producer: Producer
    decision_timeout_s: float | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # How long the app may go on reading a stream whose end the workers already proved (_settle).
    settle_s: float = 10.0
    decisions: Decisions = field(init=False)

    def __post_init__(self) -> None:
        self.decisions = Decisions(self.producer.redis)

    async def run_turn(
        self,
        session_id: str,
        turn_id: str,
        call: ProviderCall,
        *,
        provider: str | None = None,
        model: str | None = None,
        max_attempts: int | None = None,
        tools: Tools | None = None,
        on_compaction: Compaction | None = None,
        traceparent: str | None = None,
    ) -> PersistedMessage:
        """Run the turn to its end; `provider` and `model` default to the call's own;
        `traceparent` (W3C) makes the turn's spans children of the caller's (docs/traces.md)."""
        provider = provider or str(getattr(call, "provider", ""))
        model = model or str(getattr(call, "model", ""))
        await self.producer.ready()  # the commands stream is the partition's: its count first
        key = self.producer.keys(session_id).commands
        queue = await self.decisions.watch(key, session_id, turn_id)
        run = _Run(self, self.producer.turn(session_id, turn_id), queue, call, provider, model)
        try:
            await run.publisher.start(max_attempts, traceparent=traceparent)
            return await run.until_concluded(tools, on_compaction)
        finally:
            self.decisions.forget(key, session_id, turn_id)

    async def close(self) -> None:
        await self.decisions.close()


class _Run:
    """One turn being run: its publisher, its decisions, its provider call."""

    def __init__(
        self,
        runner: TurnRunner,
        publisher: TurnPublisher,
        queue: asyncio.Queue[ProducerCommand],
        call: ProviderCall,
        provider: str,
        model: str,
    ) -> None:
        self.runner, self.publisher, self.queue = runner, publisher, queue
        self.call, self.provider, self.model = call, provider, model

    async def until_concluded(
        self, tools: Tools | None, on_compaction: Compaction | None
    ) -> PersistedMessage:
        plan = Plan()
        keep = self.provider in CONTINUABLE
        while True:
            await self.publisher.start_attempt(
                step=plan.step, provider=self.provider, model=self.model
            )
            attempt = plan.attempt(self.publisher, keep_received=keep)
            decided = await self._attempt(attempt)
            if isinstance(decided, TurnConcluded | Refusal):
                return await self._concluded(decided)
            ended = await self._follow(decided, attempt, plan, tools, on_compaction)
            if ended is not None:
                return await self._concluded(ended)
            plan.after = decided

    async def _follow(
        self,
        decided: ProducerCommand,
        attempt: Attempt,
        plan: Plan,
        tools: Tools | None,
        on_compaction: Compaction | None,
    ) -> ProducerCommand | None:
        """Act on a decision that is not the end and update the plan; a decision that ends the
        turn meanwhile (a cancel while a retry waited, or the end the runner asked for)."""
        match decided:
            case RetryScheduled():
                return await self._pause(decided.delay_ms)
            case CompactionRequired():
                if on_compaction is not None:
                    await on_compaction(decided)
            case ToolsRequired():
                ran = await self._run_tools(decided, tools)
                if ran is None:
                    return await self._end("no next step")
                plan.tool_outcomes, plan.step, plan.paused = ran, decided.step, None
            case ContinuationRequired():
                received = bytes(attempt.received)
                plan.paused = continuation_of(self.provider, received, plan.paused)
                if plan.paused is None:
                    return await self._end(CANNOT_CONTINUE)
                plan.step = decided.step
            case TurnConcluded() | Refusal():
                return decided
        return None

    async def _end(self, reason: str) -> ProducerCommand:
        """End the turn between steps (`turn-ended`) and wait for the workers to conclude it."""
        await self.publisher.emit(TurnEnded, reason=reason)
        return await self._next_decision()

    async def _attempt(self, attempt: Attempt) -> ProducerCommand:
        """Make the request while watching for a decision; a decision that comes first (a
        cancel, or the stall timer's) ends the request, which the workers no longer want."""
        request = asyncio.ensure_future(self.call(attempt))
        decision = asyncio.ensure_future(self.queue.get())
        await _first(request, decision)
        if decision.done():
            decided = decision.result()
            await self._settle(request, decided)
            return decided
        decision.cancel()
        error = request.exception()
        if error is not None and not self.publisher.ended:
            await self.publisher.report_transport_error(error)
        await self.publisher.close_attempt()
        return await self._next_decision()

    async def _settle(self, request: asyncio.Future[None], decided: ProducerCommand) -> None:
        """End the request a decision came before. A decision made on the attempt's terminal
        proof (the turn finished, a next step) leaves the app up to `settle_s` to read its own
        stream to the end: the publisher feeds each piece before the app's SDK reads it, so the
        proof can be decided while the app still works through the last pieces. Any other
        decision (a cancel, a retry or failure of the stall timer) stops the request now."""
        try:
            if _on_proof(decided) and not request.done():
                await asyncio.wait({request}, timeout=self.runner.settle_s)
        finally:
            request.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await request

    async def _next_decision(self) -> ProducerCommand:
        timeout = self.runner.decision_timeout_s
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise NoDecision(
                f"no decision about turn {self.publisher.turn_id} within {timeout} s"
            ) from None

    async def _pause(self, delay_ms: int) -> ProducerCommand | None:
        """Wait out a retry's delay, counted from now; a decision meanwhile (a cancel, or the
        stall timer's failure) ends the wait and is returned."""
        nap = asyncio.ensure_future(self.runner.sleep(max(delay_ms, 0) / 1000))
        decision = asyncio.ensure_future(self.queue.get())
        await _first(nap, decision)
        nap.cancel()
        if decision.done():
            return decision.result()
        decision.cancel()
        return None

    async def _run_tools(
        self, required: ToolsRequired, tools: Tools | None
    ) -> list[ToolOutcome] | None:
        if tools is None:
            raise TerminusError(
                f"turn {required.turn_id} needs tools run "
                f"({', '.join(t.tool_name for t in required.tools)}): pass tools= to run_turn"
            )
        outcomes = await tools(required)
        for outcome in outcomes or []:
            await self._publish_outcome(outcome)
        return outcomes

    async def _publish_outcome(self, outcome: ToolOutcome) -> None:
        if outcome.error is not None:
            await self.publisher.emit(
                ToolError, tool_call_id=outcome.tool_call_id, error=outcome.error
            )
        else:
            await self.publisher.emit(
                ToolResult, tool_call_id=outcome.tool_call_id, output=outcome.output or ""
            )

    async def _concluded(self, decided: ProducerCommand) -> PersistedMessage:
        if isinstance(decided, Refusal):
            raise TurnRefused(decided.turn_id, decided.reason)
        if not isinstance(decided, TurnConcluded):
            raise AssertionError(f"expected the turn's end, got {decided!r}")
        if decided.state == "failed":
            assert decided.error is not None
            raise TurnFailed(decided.turn_id, decided.error)
        if decided.state == "cancelled":
            raise TurnCancelled(decided.turn_id, decided.message_id)
        assert decided.message_id is not None
        return await self._message(decided.message_id)

    async def _message(self, message_id: str) -> PersistedMessage:
        publisher = self.publisher
        key = self.runner.producer.keys(publisher.session_id).messages(publisher.session_id)
        raw = await self.runner.producer.redis.hget(key, message_id)
        if raw is None:
            raise TerminusError(f"message {message_id} of turn {publisher.turn_id} is not stored")
        return decode_message(raw)


def _on_proof(decided: ProducerCommand) -> bool:
    """Whether the workers decided on the attempt's terminal proof: its stream is complete."""
    if isinstance(decided, TurnConcluded):
        return decided.state == "finished"
    return isinstance(decided, ToolsRequired | ContinuationRequired)


async def _first(*futures: asyncio.Future[Any]) -> None:
    """Until the first of `futures` is done; if the caller is cancelled meanwhile (its own
    request went away), none of them is left running."""
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        for future in futures:
            future.cancel()
        raise


__all__ = [
    "Attempt",
    "NoDecision",
    "PersistedMessage",  # what `run_turn` returns
    "ProviderCall",
    "RequestedTool",
    "ToolOutcome",
    "TurnCancelled",
    "TurnFailed",
    "TurnRefused",
    "TurnRunner",
]
