"""A seeded workload of inbound events for the core benchmark: many turns, mixed providers.

Each turn is one or more attempts of ~`deltas` text deltas with a few reasoning deltas; some turns
call a tool (a second step follows), some have their first attempt cut by `stream-closed` with no
finish (a retry completes it). Turns are interleaved in producer-sized bursts, as several
concurrent streams would arrive. Randomness lives here, outside the pure core.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import islice

import msgspec

from terminus.events.codec import encode_event
from terminus.events.inbound import (
    AttemptStarted,
    Contract,
    FinishStep,
    InboundEvent,
    ProviderTerminal,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StreamClosed,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolInputDelta,
    ToolInputStart,
    ToolResult,
    TurnStarted,
    Usage,
)

TRUNCATED_SHARE = 0.10
TOOL_SHARE = 0.08
CONCURRENCY = 32
BURST = 8
BASE_TS_MS = 1_767_225_600_000
WORDS = (
    *("the", "state", "of", "a", "turn", "is", "fold", "over", "its", "events", "and", "every"),
    *("delta", "appends", "to", "buffer", "while", "machine", "only", "sees", "triggers"),
)


class Provider(msgspec.Struct, frozen=True, kw_only=True):
    """One provider of the mix: its contract, a model, and the end marker that proves a finish."""

    name: str
    contract: Contract
    model: str
    terminal: str | None


PROVIDERS: tuple[Provider, ...] = (
    Provider(
        name="anthropic",
        contract="anthropic-messages",
        model="claude-sonnet-4-5",
        terminal="message_stop",
    ),
    Provider(name="openai-chat", contract="openai-chat", model="gpt-4.1-mini", terminal="[DONE]"),
    Provider(
        name="openai-responses",
        contract="openai-responses",
        model="gpt-5",
        terminal="response.completed",
    ),
    Provider(name="gemini", contract="gemini", model="gemini-2.5-flash", terminal=None),
)


class Attempt:
    """Builds the events of one attempt with consecutive seqs and advancing timestamps."""

    def __init__(self, rng: random.Random, turn: TurnStarted, step: int, attempt: int) -> None:
        self.rng, self.step, self.attempt = rng, step, attempt
        self.ids = {"session_id": turn.session_id, "turn_id": turn.turn_id}
        self.seq = turn.seq + 1 if (step, attempt) == (1, 1) else 0
        self.ts_ms = turn.ts_ms
        self.events: list[InboundEvent] = []

    def add(self, event_type: type[InboundEvent], **fields: object) -> None:
        self.ts_ms += self.rng.randint(2, 30)
        pos = {"step": self.step, "attempt": self.attempt, "seq": self.seq, "ts_ms": self.ts_ms}
        self.events.append(event_type(**self.ids, **pos, **fields))  # type: ignore[arg-type]
        self.seq += 1

    def text(self, words: int) -> str:
        return " " + " ".join(self.rng.choices(WORDS, k=words))


def reasoning(a: Attempt, provider: Provider) -> None:
    a.add(ReasoningStart, part_id="rs-0")
    for _ in range(a.rng.randint(2, 6)):
        a.add(ReasoningDelta, part_id="rs-0", delta=a.text(a.rng.randint(2, 8)))
    signature = "sig-" + a.ids["turn_id"] if provider.contract == "anthropic-messages" else None
    a.add(ReasoningEnd, part_id="rs-0", signature=signature)


def text(a: Attempt, deltas: int) -> None:
    a.add(TextStart, part_id="txt-0")
    for _ in range(deltas):
        a.add(TextDelta, part_id="txt-0", delta=a.text(a.rng.randint(1, 4)))
    a.add(TextEnd, part_id="txt-0")


def tool_call(a: Attempt) -> str:
    call_id = f"call-{a.rng.getrandbits(48):012x}"
    a.add(ToolInputStart, tool_call_id=call_id, tool_name="search")
    for chunk in ('{"query": ', '"fold ', 'replay"}'):
        a.add(ToolInputDelta, tool_call_id=call_id, delta=chunk)
    a.add(ToolCall, tool_call_id=call_id, tool_name="search", input={"query": "fold replay"})
    return call_id


def finish(a: Attempt, provider: Provider, reason: str, deltas: int) -> None:
    usage = Usage(input_tokens=a.rng.randint(200, 4000), output_tokens=deltas * 3)
    a.add(FinishStep, finish_reason=reason, raw_finish_reason=reason, usage=usage)
    if provider.terminal is not None:
        a.add(ProviderTerminal, kind=provider.terminal)


def attempt_events(
    a: Attempt, provider: Provider, shape: str, mean_deltas: int
) -> list[InboundEvent]:
    """One attempt; `shape` is `cut` (closed mid-text), `tool` (ends in a tool call) or `stop`."""
    a.add(AttemptStarted, provider=provider.name, model=provider.model, contract=provider.contract)
    reasoning(a, provider)
    deltas = max(1, round(a.rng.uniform(0.8 * mean_deltas, 1.2 * mean_deltas)))
    if shape == "cut":
        text(a, a.rng.randint(1, deltas))
        a.add(StreamClosed)
        return a.events
    text(a, deltas)
    if shape == "tool":
        call_id = tool_call(a)
        finish(a, provider, "tool-calls", deltas)
        a.add(ToolResult, tool_call_id=call_id, output="3 results")
    else:
        finish(a, provider, "stop", deltas)
    return a.events


def turn_started(index: int) -> TurnStarted:
    """The first event of turn `index`; four turns share a session."""
    return TurnStarted(
        session_id=f"sess-{index // 4:05d}",
        turn_id=f"turn-{index:05d}",
        seq=0,
        ts_ms=BASE_TS_MS + index * 1000,
    )


def plan_of(truncated: bool, tool: bool) -> list[tuple[tuple[int, int], str]]:
    """The (step, attempt) and shape of every attempt of a turn."""
    plan = [((1, 1), "cut"), ((1, 2), "stop")] if truncated else [((1, 1), "stop")]
    if tool:
        last_pos, _ = plan[-1]
        plan[-1] = (last_pos, "tool")
        plan.append(((2, 1), "stop"))
    return plan


def turn_events(
    rng: random.Random, index: int, deltas: int, plan: list[tuple[tuple[int, int], str]]
) -> list[InboundEvent]:
    """Every event of one turn, in order: it always ends `finished`."""
    provider = PROVIDERS[index % len(PROVIDERS)]
    started = turn_started(index)
    events: list[InboundEvent] = [started]
    for (step, attempt), shape in plan:
        events.extend(attempt_events(Attempt(rng, started, step, attempt), provider, shape, deltas))
    return events


def interleave(rng: random.Random, turns: list[list[InboundEvent]]) -> Iterator[InboundEvent]:
    """Bursts of up to `BURST` events from `CONCURRENCY` turns in flight at once."""
    pending = iter(turns)
    active = [iter(t) for t in (next(pending, None) for _ in range(CONCURRENCY)) if t is not None]
    while active:
        i = rng.randrange(len(active))
        burst = list(islice(active[i], rng.randint(1, BURST)))
        yield from burst
        if not burst:
            following = next(pending, None)
            if following is None:
                active.pop(i)
            else:
                active[i] = iter(following)


def generate(seed: int, turns: int, deltas: int) -> list[InboundEvent]:
    """The whole workload, the same list for the same arguments."""
    rng = random.Random(seed)
    truncated = set(rng.sample(range(turns), round(turns * TRUNCATED_SHARE)))
    tool = set(rng.sample(range(turns), round(turns * TOOL_SHARE)))
    plans = [plan_of(i in truncated, i in tool) for i in range(turns)]
    return list(interleave(rng, [turn_events(rng, i, deltas, p) for i, p in enumerate(plans)]))


def encode(events: list[InboundEvent]) -> list[bytes]:
    """JSON bytes of every event, as producers publish them."""
    return [encode_event(event) for event in events]


def delta_workload(
    seed: int, turns: int, deltas: int
) -> tuple[list[InboundEvent], list[InboundEvent]]:
    """Deltas only: a prelude that opens a text part in every turn, then the interleaved deltas."""
    rng = random.Random(seed)
    prelude: list[InboundEvent] = []
    streams: list[list[InboundEvent]] = []
    for index in range(turns):
        provider = PROVIDERS[index % len(PROVIDERS)]
        started = turn_started(index)
        a = Attempt(rng, started, 1, 1)
        a.add(AttemptStarted, provider=provider.name, contract=provider.contract)
        text(a, deltas)
        prelude.extend([started, *a.events[:2]])
        streams.append(a.events[2:-1])
    return prelude, list(interleave(rng, streams))
